"""The app under load: concurrent clients on all three endpoints, each answer checked against the
sequential one, latency per endpoint.

    python benchmarks/app_load.py --clients 8 --rounds 2

Starts ``app.py`` with the tiny test BlenderBot (or ``--model``) on a free port, sends every
request once sequentially (the expected answers), then again from ``--clients`` concurrent
``gradio_client`` clients (each client sends its share of ``--rounds`` x the request set, the
endpoints interleaved) and compares. Prints p50 / p95 latency per endpoint under load (queueing
included: all model work shares one queue).
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

DEFAULT_OPTIONS = ("paper", "the preset's", "", "", "the preset's")  # preset, follow-up set, custom, positive, aggregation
TURNS = ["Hi! How was your weekend?", "I just adopted a puppy!", "Do you like cooking?", "What is your favourite book?",
         "I'm learning the guitar.", "It rained all week.", "We're moving to Lisbon.", "I ran my first marathon!"]
ANSWERS = ["Great, I went hiking.", "Congratulations! What breed?", "Yes, I love pasta.", "Dune, by far.",
           "Nice! Acoustic or electric?", "Ugh, that sounds gloomy.", "How exciting! When?", "Well done! How long?"]


def request_set(folder: Path) -> list[tuple[str, tuple]]:
    """(endpoint, arguments) of 8 turn, 8 dialog and 8 batch requests, all different."""
    from gradio_client import handle_file

    requests = []
    for k in range(8):
        dialog = "\n".join(TURNS[k : k + 1 + k % 3])
        requests.append(("/score_turn", (dialog, "\n".join([ANSWERS[k], ANSWERS[(k + 3) % 8]]), *DEFAULT_OPTIONS)))
        requests.append(("/score_dialog", ("\n".join([TURNS[k], ANSWERS[k], TURNS[(k + 1) % 8]]), *DEFAULT_OPTIONS)))
        rows = [{"context": [TURNS[(k + j) % 8]], "response": ANSWERS[(k + 2 * j) % 8], "system": f"bot-{j % 2}"}
                for j in range(2 + k % 4)]
        path = folder / f"batch-{k}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        requests.append(("/score_file", (handle_file(str(path)), None, *DEFAULT_OPTIONS)))
    return requests


def comparable(endpoint: str, answer: Any) -> Any:
    """The parts of an answer that must not depend on load (the batch's chart image and the
    download's temporary path left out; the downloaded file's content kept)."""
    if endpoint != "/score_file":
        return json.dumps(answer, sort_keys=True, default=str)
    table, summary, _chart, download, signature, status = answer
    return json.dumps([table, summary, Path(download).read_text(encoding="utf-8"), signature, status],
                      sort_keys=True, default=str)


def drive(url: str, clients: int, rounds: int, folder: Path) -> dict[str, Any]:
    """Sequential answers, then the same requests from concurrent clients: returns the mismatches,
    the failures and the latencies per endpoint."""
    from gradio_client import Client

    requests = request_set(folder)
    sequential = Client(url, verbose=False)
    expected = [comparable(e, sequential.predict(*args, api_name=e)) for e, args in requests]
    jobs = [(i, e, args) for _ in range(rounds) for i, (e, args) in enumerate(requests)]
    latencies: dict[str, list[float]] = {e: [] for e, _ in requests}
    mismatches, failures = [], []
    lock = threading.Lock()

    def client_loop(share: list[tuple[int, str, tuple]]) -> None:
        client = Client(url, verbose=False)
        for i, endpoint, args in share:
            start = time.perf_counter()
            try:
                answer = comparable(endpoint, client.predict(*args, api_name=endpoint))
            except Exception as error:  # noqa: BLE001 - every failure is reported, none hides another
                with lock:
                    failures.append(f"{endpoint} #{i}: {type(error).__name__}: {error}")
                continue
            with lock:
                latencies[endpoint].append(time.perf_counter() - start)
                if answer != expected[i]:
                    mismatches.append(f"{endpoint} #{i}")

    threads = [threading.Thread(target=client_loop, args=(jobs[c::clients],)) for c in range(clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"requests": len(jobs), "clients": clients, "seconds": time.perf_counter() - start,
            "mismatches": mismatches, "failures": failures, "latencies": latencies}


def percentiles(values: list[float]) -> tuple[float, float]:
    """p50 and p95 (inclusive method of ``statistics.quantiles``)."""
    cuts = statistics.quantiles(values, n=20, method="inclusive")
    return statistics.median(values), cuts[18]


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--model", default=str(REPO / "tests" / "fixtures" / "tiny-blenderbot"))
    args = parser.parse_args()
    from tests.app_server import running_app

    with tempfile.TemporaryDirectory() as tmp:
        with running_app(Path(args.model), Path(tmp) / "app.log") as url:
            report = drive(url, args.clients, args.rounds, Path(tmp))
    print(f"{report['requests']} requests from {report['clients']} concurrent clients in {report['seconds']:.1f} s; "
          f"{len(report['failures'])} failed, {len(report['mismatches'])} differed from the sequential answer\n")
    print("| endpoint | requests | p50 s | p95 s |\n|---|---|---|---|")
    for endpoint, values in report["latencies"].items():
        p50, p95 = percentiles(values)
        print(f"| `{endpoint}` | {len(values)} | {p50:.2f} | {p95:.2f} |")
    for line in report["failures"] + report["mismatches"]:
        print(line, file=sys.stderr)


if __name__ == "__main__":
    main()
