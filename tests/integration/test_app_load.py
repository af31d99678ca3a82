"""The running app (``python app.py``, tiny model) under load and under hostile input, through
``gradio_client``: concurrent answers equal sequential ones, limits refuse before model work,
long batches stop at their time limit with the rows scored so far, a full queue says so."""

from __future__ import annotations

import json
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from full_metric import FullScorer
from full_metric.faces.app_data import CUSTOM, TemporaryFiles

from ..app_server import running_app

REPO = Path(__file__).resolve().parents[2]
pytest.importorskip("gradio_client")
from gradio_client import Client, handle_file  # noqa: E402

sys.path.insert(0, str(REPO / "benchmarks"))
app_load = pytest.importorskip("app_load")

OPTIONS = app_load.DEFAULT_OPTIONS


@pytest.fixture(scope="module")
def app_url(tiny_blenderbot_path, tmp_path_factory):
    with running_app(tiny_blenderbot_path, tmp_path_factory.mktemp("app") / "app.log") as url:
        yield url


@pytest.fixture(scope="module")
def client(app_url):
    return Client(app_url, verbose=False)


def test_eight_concurrent_clients_get_the_sequential_answers(app_url, tmp_path, tiny_blenderbot_path, client):
    report = app_load.drive(app_url, clients=8, rounds=2, folder=tmp_path)
    assert report["failures"] == [] and report["mismatches"] == []
    assert sum(len(v) for v in report["latencies"].values()) == report["requests"] == 48
    for endpoint, values in report["latencies"].items():
        p50, p95 = app_load.percentiles(values)
        print(f"{endpoint}: p50 {p50:.2f} s, p95 {p95:.2f} s over {len(values)} requests")
    # and the sequential answer is the scorer's own
    ranked, _, signature = client.predict("Hi! How was your weekend?", "Great, I went hiking.\nPotato.", *OPTIONS,
                                          api_name="/score_turn")
    scores = FullScorer(tiny_blenderbot_path, device="cpu", progress=False).score(
        [["Hi! How was your weekend?"]] * 2, ["Great, I went hiking.", "Potato."]).scores
    assert sorted(row[3] for row in ranked["data"]) == pytest.approx(sorted(round(s, 3) for s in scores))
    assert "model:tiny-blenderbot@" in signature


def _refused(client, message, *args, api_name):
    with pytest.raises(Exception, match=message):
        client.predict(*args, api_name=api_name)


def test_hostile_text_inputs_are_refused_with_the_limit(client):
    _refused(client, "100000 characters; the limit is 20000", "x" * 100_000, "Hello.", *OPTIONS, api_name="/score_turn")
    _refused(client, "the limit is 20000", "Hi\n" + "y" * 100_000, *OPTIONS, api_name="/score_dialog")
    many = "\n".join(f"Huh {k}?" for k in range(1000))
    _refused(client, "1000 follow-ups; the limit is 20", "Hi!", "Hello.", "paper", CUSTOM, many, "", "the preset's",
             api_name="/score_turn")
    _refused(client, "has 301 characters; the limit is 200", "Hi!", "Hello.", "paper", CUSTOM, "z" * 301, "",
             "the preset's", api_name="/score_turn")
    _refused(client, "11 candidates; the limit is 10", "Hi!", "\n".join(f"Answer {k}." for k in range(11)), *OPTIONS,
             api_name="/score_turn")


@pytest.mark.parametrize("name,data,message", [
    ("photo.jsonl", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)), "not UTF-8 text"),
    ("nul.jsonl", b'{"context": ["a"]}\n\x00\x00\x00\x00', "line 2: a NUL byte"),
    ("mixed.jsonl", '{"context": ["café"], "response": "oui"}\n'.encode() + '{"context": ["café"]}\n'.encode("latin-1"),
     "line 2: not UTF-8 text"),
    ("empty.jsonl", b"", "no rows"),
    ("blank.jsonl", b"\n  \n\n\t\n", "no rows"),
    ("blank.csv", b"", "needs a 'context' column"),
    ("long.jsonl", json.dumps({"context": ["w" * 100_000], "response": "ok"}).encode(), "line 1: the context has 100000 characters"),
])
def test_hostile_uploads_are_refused_naming_the_problem(client, tmp_path, name, data, message):
    path = tmp_path / name
    path.write_bytes(data)
    _refused(client, message, handle_file(str(path)), None, *OPTIONS, api_name="/score_file")


def test_an_upload_over_the_size_limit_is_refused_by_the_server(client, app_url, tmp_path):
    big = tmp_path / "big.jsonl"
    big.write_bytes(b'{"context": ["a"], "response": "b"}\n' * 70_000)  # 2.5 MB > 2 MB
    with pytest.raises(Exception, match="(?i)file size|too large|exceeds|413"):
        client.predict(handle_file(str(big)), None, *OPTIONS, api_name="/score_file")


def test_a_csv_formula_is_inert_in_the_download_and_scores_keep_full_precision(client, tmp_path):
    src = tmp_path / "sheet.csv"
    src.write_text('context,response,system\n"Hi!\nHow are you?","=HYPERLINK(""http://x"",""click"")",bot\n'
                   '"Hi!","@SUM(1+1)",bot\n', encoding="utf-8")
    table, _, _, download, _, status = client.predict(handle_file(str(src)), None, *OPTIONS, api_name="/score_file")
    assert status == "all 2 rows scored"
    text = Path(download).read_text(encoding="utf-8")
    assert Path(download).suffix == ".csv"
    import csv

    rows = list(csv.DictReader(text.splitlines(keepends=True)))
    assert [r["response"] for r in rows] == ["'=HYPERLINK(\"http://x\",\"click\")", "'@SUM(1+1)"]
    assert rows[0]["context"] == "Hi!\nHow are you?"
    assert float(rows[0]["full"]) != round(float(rows[0]["full"]), 3)  # full precision in the file
    assert [row[3] for row in table["data"]] == [round(float(r["full"]), 3) for r in rows]  # rounded on screen


def test_the_model_is_shown_by_name_not_by_path(app_url, tiny_blenderbot_path):
    config = urllib.request.urlopen(app_url.rstrip("/") + "/config", timeout=30).read().decode()
    assert "Model: `tiny-blenderbot`" in config
    assert str(tiny_blenderbot_path) not in config


def test_a_long_batch_stops_at_its_time_limit_and_a_full_queue_says_so(tiny_blenderbot_path, tmp_path):
    """One app with a 8 s batch limit, 20,000 rows allowed and room for one waiting request: a long
    batch stops at the limit with the rows scored so far; while it runs, one request waits and the
    next is told the queue is full; a batch cancelled from the client stops and the server says so."""
    rows = 20_000  # far more than the tiny model scores in 8 s on any machine
    src = tmp_path / "long.jsonl"
    src.write_text("".join(json.dumps({"context": [f"Turn {k}."], "response": f"Answer {k}."}) + "\n"
                           for k in range(rows)))
    env = {"FULL_LIMIT_BATCH_SECONDS": "8", "FULL_LIMIT_QUEUE": "1", "FULL_LIMIT_ROWS": str(rows), "FULL_LIMIT_UPLOAD_BYTES": "4000000"}
    log = tmp_path / "app.log"
    with running_app(tiny_blenderbot_path, log, **env) as url:
        first, second, third = (Client(url, verbose=False) for _ in range(3))  # connected before the clock matters
        job = first.submit(handle_file(str(src)), None, *OPTIONS, api_name="/score_file")
        deadline = time.monotonic() + 120
        while job.status().code.name not in ("PROCESSING", "ITERATING", "PROGRESS"):
            assert time.monotonic() < deadline, "the batch never started"
            time.sleep(0.05)
        waiting = second.submit("Hi!", "Hello.", *OPTIONS, api_name="/score_turn")
        while waiting.status().code.name not in ("IN_QUEUE", "SENDING_DATA", "JOINING_QUEUE") and not waiting.done():
            time.sleep(0.05)
        with pytest.raises(Exception, match="(?i)queue is full"):
            third.predict("Hi!", "Hello.", *OPTIONS, api_name="/score_turn")
        table, _, _, download, _, status = job.result(timeout=300)
        assert waiting.result(timeout=300)[2].startswith("full:")  # the waiting request is served after
        cancelled = first.submit(handle_file(str(src)), None, *OPTIONS, api_name="/score_file")
        while cancelled.status().code.name != "ITERATING":
            assert time.monotonic() < deadline + 120, "the second batch never sent rows"
            time.sleep(0.05)
        cancelled.cancel()
        while "batch cancelled after" not in log.read_text():
            assert time.monotonic() < deadline + 240, f"no cancellation in the log: {log.read_text()[-2000:]}"
            time.sleep(0.05)
        assert f"of {rows} rows" in log.read_text().split("batch cancelled after", 1)[1].splitlines()[0]
    assert status.startswith("stopped at the time limit (8 s)")
    scored = [json.loads(line) for line in Path(download).read_text().splitlines()]
    assert 16 <= len(scored) < rows and len(scored) % 16 == 0 and len(table["data"]) == len(scored)
    assert [r["response"] for r in scored] == [f"Answer {k}." for k in range(len(scored))]


def test_temporary_folders_are_removed_after_their_time():
    files = TemporaryFiles(max_age=600)
    old, new = files.new_folder(), files.new_folder()
    (old / "a.jsonl").write_text("{}")
    files.clean(now=time.time() + 601)
    assert not old.exists() and not new.exists()
    kept = files.new_folder()
    files.clean()
    assert kept.exists()


def test_the_documented_client_call_works_with_named_and_optional_parameters(app_url, client, tiny_blenderbot_path):
    """docs/app.md's gradio_client call, as written (its URL the test server's): the endpoints'
    parameters have names, the settings are optional (the positive follow-ups box was required)."""
    import re

    docs = (REPO / "docs" / "app.md").read_text(encoding="utf-8")
    code = re.search(r"## Calling the app from code.*?```python\n(.+?)```", docs, re.S).group(1)
    code = code.replace('Client("http://127.0.0.1:7860/")', f"Client({app_url!r}, verbose=False)")
    scope: dict = {}
    exec(code, scope)  # noqa: S102 - the documented snippet, run as a user would
    ranked, signature = scope["ranked"], scope["signature"]
    assert [row[2] for row in ranked["data"]] and "model:tiny-blenderbot@" in signature
    info = client.view_api(return_format="dict", print_info=False)["named_endpoints"]
    for endpoint, required in (("/score_turn", {"dialog", "candidates"}), ("/score_dialog", {"dialog"})):
        params = {p["parameter_name"]: p["parameter_has_default"] for p in info[endpoint]["parameters"]}
        assert {"preset", "follow_up_set", "custom_follow_ups", "positive_follow_ups", "aggregation"} <= set(params)
        assert {name for name, optional in params.items() if not optional} == required
    score, _, _ = client.predict(dialog="Hi!\nHello, how are you?", api_name="/score_dialog")
    plain = FullScorer(tiny_blenderbot_path, device="cpu", progress=False)
    assert isinstance(score, float)  # a number, not its text
    assert score == pytest.approx(plain.score([["Hi!", "Hello, how are you?"]]).scores[0], abs=1e-3)


@pytest.mark.parametrize("model, said", [("someorg/no-such-model", "the Hub cannot be reached"),
                                         ("smollm2-complaint", "did you mean 'smollm2-complaints'?")])
def test_the_app_with_a_model_it_cannot_load_ends_in_one_line_naming_full_model(model, said):
    """`python app.py` offline with a model it cannot load: one line (no traceback) in the app's own
    terms, FULL_MODEL, not the command line's --model."""
    import os
    import subprocess

    env = {**os.environ, "FULL_MODEL": model, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "app.py"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert lines[-1].startswith(f"app.py: model {model!r}") and said in lines[-1] and "FULL_MODEL" in lines[-1]
    assert "--model" not in lines[-1]
