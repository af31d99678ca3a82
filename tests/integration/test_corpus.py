"""Scoring corpora: every input and output format read back, a malformed line in a large file,
a run killed with SIGKILL and resumed, a mismatched output refused, two gloo processes under
torchrun, and gathering the ranks' scores inside a distributed evaluation loop."""

from __future__ import annotations

import csv
import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from full_metric import FullScorer
from full_metric.faces.cli import main
from full_metric.files.distributed import balanced_shares, merge_results

from ..helpers import run_checked

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 300
#: torchrun on this machine, 2 processes, a free port of its own (``--standalone``)
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]


def _rows(n: int) -> list[dict]:
    return [{"id": i, "context": ["Hi there!", f"I counted to {i} today."][: 1 + i % 2],
             "response": "Nice, " + "really " * (i % 7) + "well done."} for i in range(n)]


def _free_port() -> int:
    """A port free now (accelerate, unlike torchrun --standalone, does not pick one itself)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _read(path: Path) -> list[dict]:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _options(tiny) -> list[str]:
    return ["--model", str(tiny), "--device", "cpu", "--no-progress"]


@pytest.fixture(scope="module")
def scorer(tiny_blenderbot_path):
    return FullScorer(tiny_blenderbot_path, device="cpu", progress=False)


def _expected(scorer, rows):
    return scorer.score([r["context"] if isinstance(r["context"], list) else r["context"].split("\n") for r in rows],
                        [r["response"] for r in rows])


def _run(args, timeout=TIMEOUT, **kwargs) -> subprocess.CompletedProcess:
    """A child process in the checkout, offline, killed at the timeout, its stderr shown when it fails."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    return run_checked(args, timeout=timeout, cwd=REPO, env=env, **kwargs)


# -- formats ----------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt_in,fmt_out", [("jsonl", "parquet"), ("csv", "jsonl"), ("parquet", "parquet")])
def test_input_and_output_formats_round_trip(fmt_in, fmt_out, tiny_blenderbot_path, scorer, tmp_path):
    rows = _rows(9)
    src = tmp_path / f"in.{fmt_in}"
    if fmt_in == "jsonl":
        _write_jsonl(src, rows)
    elif fmt_in == "csv":  # contexts as one string, a turn per line (quoted cells span lines)
        rows = [{**r, "context": "\n".join(r["context"])} for r in rows]
        with open(src, "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=["id", "context", "response"])
            writer.writeheader()
            writer.writerows(rows)
        rows = [{**r, "id": str(r["id"])} for r in rows]  # CSV cells are text
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows), src)
    out = tmp_path / f"out.{fmt_out}"
    assert main(["score", str(src), "-o", str(out), "--chunk-size", "4", *_options(tiny_blenderbot_path)]) == 0
    got = _read(out)
    want = _expected(scorer, rows)
    # the input's columns, in order; the context as the turns it was read as (one writer with the app: issue 62, 9)
    read = [{**r, "context": r["context"].split("\n") if isinstance(r["context"], str) else r["context"]} for r in rows]
    assert [{k: g[k] for k in ("id", "context", "response")} for g in got] == read
    assert [g["full"] for g in got] == pytest.approx(want.scores, rel=1e-5)
    assert [v for g in got for v in g["follow_up_log_likelihoods"].values()] == pytest.approx(
        [v for row in want.follow_up_log_likelihoods for v in row], rel=1e-5)
    assert all(list(g["follow_up_log_likelihoods"]) == list(want.follow_ups) for g in got)
    assert {g["signature"] for g in got} == {want.signature}
    assert not (tmp_path / f"out.{fmt_out}.parts").exists()


def test_a_dataset_by_name_with_named_columns(tiny_blenderbot_path, scorer, tmp_path, monkeypatch):
    """``--dataset`` goes through ``datasets.load_dataset(name, split=..., streaming=True)``; a local
    dataset folder stands in for a Hub id here (no internet)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"dialog_history": r["context"], "reply": r["response"]} for r in _rows(6)]
    (tmp_path / "my-dialogs" / "data").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows[:4]), tmp_path / "my-dialogs" / "data" / "test-00000-of-00002.parquet")
    pq.write_table(pa.Table.from_pylist(rows[4:]), tmp_path / "my-dialogs" / "data" / "test-00001-of-00002.parquet")
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out.jsonl"
    assert main(["score", "--dataset", "my-dialogs", "--split", "test", "--context-column", "dialog_history",
                 "--response-column", "reply", "-o", str(out), *_options(tiny_blenderbot_path)]) == 0
    got = _read(out)
    assert [g["reply"] for g in got] == [r["reply"] for r in rows]
    assert [g["full"] for g in got] == pytest.approx(
        scorer.score([r["dialog_history"] for r in rows], [r["reply"] for r in rows]).scores, rel=1e-5)


def test_a_malformed_line_deep_in_a_large_file_is_named_before_any_model_work(tmp_path, capsys):
    rows = [json.dumps(r) for r in _rows(5000)]
    rows[3456] = '{"context": ["Hi"], "response": '  # line 3457, cut short
    src = tmp_path / "big.jsonl"
    src.write_text("\n".join(rows) + "\n")
    out = tmp_path / "out.jsonl"
    assert main(["score", str(src), "-o", str(out), "--model", "never-loaded"]) == 2
    assert f"{src}, line 3457: not valid JSON" in capsys.readouterr().err
    assert not out.exists() and not (tmp_path / "out.jsonl.parts").exists()


def test_bad_output_and_source_arguments(tmp_path, capsys):
    src = _write_jsonl(tmp_path / "in.jsonl", _rows(2))
    assert main(["score", str(src), "-o", str(tmp_path / "out.csv"), "--model", "never-loaded"]) == 2
    assert "must end in .jsonl or .parquet" in capsys.readouterr().err
    assert main(["score", "-o", str(tmp_path / "out.jsonl"), "--model", "never-loaded"]) == 2
    assert "give an input file or --dataset" in capsys.readouterr().err


def test_parquet_output_without_pyarrow_is_refused_before_model_work(tmp_path, capsys, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pyarrow" else real(name, *a))
    src = _write_jsonl(tmp_path / "in.jsonl", _rows(2))
    assert main(["score", str(src), "-o", str(tmp_path / "out.parquet"), "--model", "never-loaded"]) == 2
    err = capsys.readouterr().err
    assert 'Parquet output needs pyarrow: pip install pyarrow (in a checkout: pip install -e ".[evaluate]")' in err


# -- resume -----------------------------------------------------------------------------------
def _kill_partway(command: list[str], parts: Path, lines: int) -> None:
    """Start ``command``, wait (on the part files, not a clock) until ``lines`` rows are written,
    then SIGKILL its whole process group."""
    proc = subprocess.Popen(command, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + TIMEOUT
    try:
        while sum(p.read_bytes().count(b"\n") for p in parts.glob("part-*.jsonl")) < lines:
            if proc.poll() is not None:
                pytest.fail(f"the run ended before it could be killed: {proc.stderr.read().decode()[-2000:]}")
            if time.monotonic() > deadline:
                pytest.fail("the run wrote nothing in time")
            time.sleep(0.05)
    finally:
        _kill_tree(proc)


def _kill_tree(proc: subprocess.Popen) -> None:
    """SIGKILL a process and every process it started (torchrun's workers run in sessions of their
    own, out of its process group), and wait until they are gone."""
    import psutil

    try:
        family = [*psutil.Process(proc.pid).children(recursive=True), psutil.Process(proc.pid)]
    except psutil.NoSuchProcess:
        family = []
    for member in family:
        try:
            member.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(family, timeout=30)
    proc.wait(timeout=30)


@pytest.mark.parametrize("launcher", ["python", "torchrun"])
def test_killed_then_resumed_equals_an_uninterrupted_run(launcher, tiny_blenderbot_path, scorer, tmp_path):
    rows = _rows(400)
    src = _write_jsonl(tmp_path / "in.jsonl", rows)
    resumed = tmp_path / "resumed.jsonl"
    start = [sys.executable, "-m", "full_metric"] if launcher == "python" else [*TORCHRUN, "-m", "full_metric"]
    args = ["score", str(src), "--chunk-size", "8", *_options(tiny_blenderbot_path)]
    _kill_partway([*start, *args, "-o", str(resumed)], tmp_path / "resumed.jsonl.parts", 40)
    assert not resumed.exists()
    done = _run([*start, *args, "-o", str(resumed), "--resume"])
    if launcher == "torchrun":  # every worker was killed: each rank scores rows on resume
        counts = {int(m[0]): int(m[1]) for m in re.findall(r"rank (\d) of 2: scored (\d+) rows", done.stderr)}
        assert sorted(counts) == [0, 1] and all(n > 0 for n in counts.values()), done.stderr
    assert "scored 400 dialogs: mean FULL" in done.stderr  # a resume, not the "already complete" path
    got = _read(resumed)
    assert [g["id"] for g in got] == list(range(400))  # nothing lost, nothing twice, input order
    # equal to an uninterrupted run (the scorer's own scores of every row, in one pass)
    assert [g["full"] for g in got] == pytest.approx(_expected(scorer, rows).scores, rel=1e-5)
    assert not (tmp_path / "resumed.jsonl.parts").exists()


class _Counting:
    """The scorer, counting the rows it is asked to score; it stops the run (an exception, as a kill would)
    once it has scored ``stop_after`` rows."""

    def __init__(self, scorer, stop_after: int | None = None):
        self.scorer, self.stop_after, self.rows = scorer, stop_after, []

    def score(self, contexts, responses=None, **options):
        if self.stop_after is not None and len(self.rows) >= self.stop_after:
            raise KeyboardInterrupt("stopped")
        self.rows.extend(responses or contexts)
        return self.scorer.score(contexts, responses, **options)

    def __getattr__(self, name):
        return getattr(self.scorer, name)


def test_a_resumed_run_scores_only_the_rows_its_parts_lack(scorer, tmp_path):
    """Issue 62, 6: the output dedupes, so a resume that scored every row again would look right; it must ask
    the scorer for exactly the rows the parts folder lacks."""
    from full_metric.files.corpus import Source, score_corpus

    rows = _rows(60)
    src = _write_jsonl(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out.jsonl"
    first = _Counting(scorer, stop_after=24)
    with pytest.raises(KeyboardInterrupt):
        score_corpus(Source(str(src)), out, lambda: first, chunk_size=8, progress=False)
    assert len(first.rows) == 24 and not out.exists()
    again = _Counting(scorer)
    done = score_corpus(Source(str(src)), out, lambda: again, resume=True, chunk_size=8, progress=False)
    assert len(again.rows) == done["scored_here"] == 36
    assert sorted(again.rows) == sorted(r["response"] for r in rows[24:])  # the rows lacking, each once
    assert [g["id"] for g in _read(out)] == list(range(60))


def _killed_run(tiny_blenderbot_path, tmp_path) -> tuple[list[str], Path, Path, dict[str, bytes]]:
    """A run of 300 rows killed after 16: its arguments, output, parts folder and the parts' bytes."""
    src = _write_jsonl(tmp_path / "in.jsonl", _rows(300))
    out = tmp_path / "out.jsonl"
    parts = tmp_path / "out.jsonl.parts"
    args = ["score", str(src), "-o", str(out), "--chunk-size", "8", *_options(tiny_blenderbot_path)]
    _kill_partway([sys.executable, "-m", "full_metric", *args], parts, 16)
    return args, out, parts, {p.name: p.read_bytes() for p in parts.iterdir()}


def test_resume_refuses_an_output_of_other_settings_or_input(tiny_blenderbot_path, tmp_path, capsys):
    args, out, parts, before = _killed_run(tiny_blenderbot_path, tmp_path)
    assert main([*args, "--resume", "--aggregation", "mean"]) == 2
    assert "belongs to another settings (agg: sum vs mean)" in capsys.readouterr().err  # the field that differs
    other = _write_jsonl(tmp_path / "other.jsonl", _rows(301))
    assert main(["score", str(other), "-o", str(out), "--resume", *_options(tiny_blenderbot_path)]) == 2
    assert "belongs to another input" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in parts.iterdir()} == before  # untouched
    # a finished output: --resume accepts it as it is for the same run, refuses it for another
    assert main([*args, "--resume"]) == 0 and not parts.exists()
    finished = out.read_bytes()
    assert main([*args, "--resume"]) == 0 and out.read_bytes() == finished
    assert main([*args, "--resume", "--aggregation", "mean"]) == 2
    assert "holds another input or other settings" in capsys.readouterr().err
    assert out.read_bytes() == finished


# -- sharding ---------------------------------------------------------------------------------
def test_shares_are_balanced_by_length_and_cover_every_row():
    lengths = [100, 1, 1, 1, 1, 50, 50, 1, 1, 1]
    shares = balanced_shares(lengths, 2)
    assert sorted(i for s in shares for i in s) == list(range(10)) and all(s == sorted(s) for s in shares)
    totals = [sum(lengths[i] for i in s) for s in shares]
    assert totals == [104, 103]  # by count, the first five rows would hold 154 and the last five 53
    assert balanced_shares([], 3) == [[], [], []]


@pytest.mark.parametrize("launcher", ["torchrun", "accelerate"])
def test_two_gloo_processes_equal_one(launcher, tiny_blenderbot_path, tmp_path):
    src = _write_jsonl(tmp_path / "in.jsonl", _rows(60))
    one, two = tmp_path / "one.jsonl", tmp_path / "two.parquet"
    args = ["score", str(src), "--chunk-size", "16", *_options(tiny_blenderbot_path)]
    assert main([*args, "-o", str(one)]) == 0  # one process
    start = TORCHRUN if launcher == "torchrun" else [  # on a machine without GPUs accelerate runs gloo
        str(Path(sys.executable).parent / "accelerate"), "launch", "--multi_gpu", "--num_processes", "2",
        "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
        "--main_process_port", str(_free_port())]
    done = _run([*start, "-m", "full_metric", *args, "-o", str(two)])
    assert "rank 0 of 2: scored" in done.stderr and "rank 1 of 2: scored" in done.stderr
    single, sharded = _read(one), _read(two)
    assert [s["id"] for s in sharded] == list(range(60))
    assert [s["full"] for s in sharded] == pytest.approx([s["full"] for s in single], rel=1e-5, abs=1e-5)


_LOOP = """
import json, sys
from full_metric import FullScorer
from full_metric.files.distributed import gather_results, merge_results, setup, teardown

rank = setup()
contexts, responses = json.loads(sys.argv[2]), json.loads(sys.argv[3])
mine = slice(rank.rank, None, rank.world_size)  # this rank's own predictions, as a sampler gives them
scorer = FullScorer(sys.argv[1], progress=False)  # the rank's own device: cuda:LOCAL_RANK with GPUs
result = scorer.score(contexts[mine], responses[mine])
gathered = merge_results(gather_results(result))
# the same with accelerate, as a training script using it would write it
import torch
from accelerate import Accelerator
accelerator = Accelerator(cpu=True)
with_accelerate = accelerator.gather_for_metrics(torch.tensor(result.scores, dtype=torch.float64)).tolist()
with open(f"{sys.argv[4]}/rank-{rank.rank}.json", "w") as out:  # a file per rank: their stdouts interleave
    json.dump({"rank": rank.rank, "scores": gathered.scores, "accelerate": with_accelerate,
               "device": str(scorer.model.device)}, out)
teardown()  # a barrier, then the group destroyed: a rank leaving mid-collective aborted gloo once
"""


def test_a_distributed_evaluation_loop_gathers_every_ranks_scores(tiny_blenderbot_path, scorer, tmp_path):
    rows = _rows(10)
    contexts, responses = [r["context"] for r in rows], [r["response"] for r in rows]
    script = tmp_path / "loop.py"
    script.write_text(_LOOP)
    _run([*TORCHRUN, str(script), str(tiny_blenderbot_path), json.dumps(contexts), json.dumps(responses),
          str(tmp_path)])
    outs = [json.loads((tmp_path / f"rank-{r}.json").read_text()) for r in (0, 1)]
    assert [o["rank"] for o in outs] == [0, 1]
    want = scorer.score(contexts, responses).scores
    order = [*range(0, 10, 2), *range(1, 10, 2)]  # rank 0's rows, then rank 1's
    for out in outs:
        assert out["scores"] == pytest.approx([want[i] for i in order], rel=1e-5)
        assert out["accelerate"] == pytest.approx(out["scores"], rel=1e-12)
        assert out["device"] == "cpu"


def test_merge_results_refuses_other_settings(scorer):
    a = scorer.score([["Hi!"]], ["Hello."])
    b = scorer.score([["Hi!"]], ["Hello."], aggregation="mean")
    assert merge_results([a, a]).scores == a.scores * 2
    with pytest.raises(ValueError, match="different settings cannot be merged: agg: sum vs mean$"):
        merge_results([a, b])


def test_the_output_may_not_be_the_input(tmp_path, capsys):
    """Before, ``score in.jsonl -o in.jsonl`` replaced the input with its scores."""
    src = _write_jsonl(tmp_path / "in.jsonl", _rows(3))
    before = src.read_bytes()
    assert main(["score", str(src), "-o", str(src), "--model", "never/loaded"]) == 2
    assert "the output is the input file" in capsys.readouterr().err
    assert src.read_bytes() == before
    assert main(["compare", str(src), "--json", str(src), "--model", "never/loaded"]) == 2
    assert src.read_bytes() == before


def test_one_reader_one_check_one_writer():
    """The corpus, the command line and the app read rows, check them and write scored records
    through the one file layer (before: two readers, three checks, three writers)."""
    package = REPO / "full_metric"
    for face, uses in {"files/corpus.py": ("open_rows(", "check_row(", "scored_records("),
                       "research/adapt_data.py": ("open_rows(", "check_row("),
                       "files/rated_files.py": ("open_rows(",),
                       "faces/app_data.py": ("table_rows(", "check_row(", "scored_records("),
                       "faces/cli.py": ("read_dialog_lines(", "scored_records(")}.items():
        text = (package / face).read_text(encoding="utf-8")
        assert all(u in text for u in uses), face
        assert "csv.DictReader" not in text and "def _json_lines" not in text and "def _check_row" not in text, face


def test_the_output_is_the_input_however_it_is_named(tmp_path, monkeypatch):
    """Compared as files, not strings: ./in.jsonl, the absolute path, a symbolic and a hard link."""
    import os

    from full_metric.files.dialog_files import DialogFileError, refuse_overwriting_input

    src = _write_jsonl(tmp_path / "in.jsonl", _rows(2))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "link.jsonl").symlink_to(src)
    os.link(src, tmp_path / "hard.jsonl")
    for output in ("./in.jsonl", str(src.resolve()), "link.jsonl", "hard.jsonl", "sub/../in.jsonl"):
        with pytest.raises(DialogFileError, match="the output is the input file"):
            refuse_overwriting_input(["in.jsonl"], output)
    refuse_overwriting_input(["in.jsonl"], "out.jsonl")  # another file: fine


def test_every_rank_refuses_a_parts_folder_of_other_settings_before_anyone_writes(tiny_blenderbot_path, tmp_path):
    """Under torchrun with 2 processes, --resume on a parts folder made with other settings: both
    ranks refuse (each exits with the message), and no rank writes a row into the folder."""
    args, _, parts, before = _killed_run(tiny_blenderbot_path, tmp_path)
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([*TORCHRUN, "-m", "full_metric", *args, "--resume", "--aggregation", "mean"], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode != 0
    assert done.stderr.count("belongs to another settings (agg: sum vs mean)") == 2, done.stderr[-3000:]
    assert {p.name: p.read_bytes() for p in parts.iterdir()} == before  # no rank wrote anything


_DELAYED_RANK_ZERO = """
import os, sys, time
from full_metric.faces.cli import main
from full_metric.files import corpus

read = corpus._done
def delayed(*args, **kwargs):  # rank 0 reads what is done 5 s late: rank 1 has scored chunks by then
    if os.environ.get("RANK") == "0":
        time.sleep(5)
    return read(*args, **kwargs)
corpus._done = delayed
sys.exit(main(sys.argv[1:]))
"""


def test_a_delayed_rank_zero_still_splits_the_rows_every_rank_splits(tiny_blenderbot_path, scorer, tmp_path):
    """Issue 46, 0: a fresh run under torchrun whose rank 0 reads the parts folder 5 s late. Every rank
    must split the same remaining rows (rank 0 reads them before anyone writes and tells the others),
    else rows go to no rank ("row N was scored by no rank") or to two."""
    rows = _rows(60)
    src = _write_jsonl(tmp_path / "in.jsonl", rows)
    script = tmp_path / "delayed.py"
    script.write_text(_DELAYED_RANK_ZERO)
    out = tmp_path / "out.jsonl"
    done = _run([*TORCHRUN, str(script), "score", str(src), "-o", str(out), "--chunk-size", "4",
                 *_options(tiny_blenderbot_path)])
    counts = {int(m[0]): int(m[1]) for m in re.findall(r"rank (\d) of 2: scored (\d+) rows", done.stderr)}
    assert sorted(counts) == [0, 1] and sum(counts.values()) == 60, done.stderr[-3000:]
    got = _read(out)
    assert [g["id"] for g in got] == list(range(60))
    assert [g["full"] for g in got] == pytest.approx(_expected(scorer, rows).scores, rel=1e-5)


_DECIDE = """
import json, sys, time
from full_metric.files.distributed import decided_by_rank_zero, setup, teardown

rank = setup()
calls = []
def decide():
    calls.append(rank.rank)
    return f"rank {rank.rank}'s decision"
value = decided_by_rank_zero(decide, ValueError)
def fail():
    if rank.rank == 0:
        raise OSError("run.json is truncated")
    return "rank 1 decided alone"
started = time.monotonic()
try:
    outcome = decided_by_rank_zero(fail, ValueError)
except Exception as error:
    outcome = f"{type(error).__name__}: {error}"
seconds = time.monotonic() - started
with open(f"{sys.argv[1]}/rank-{rank.rank}.json", "w") as out:
    json.dump({"value": value, "calls": calls, "outcome": outcome, "seconds": seconds}, out)
teardown()
"""


def test_only_rank_zero_decides_and_its_failure_reaches_every_rank(tmp_path):
    """Two gloo ranks: ``decided_by_rank_zero`` runs the decision on rank 0 alone and every rank takes
    rank 0's value; an error that is not the refusal class (an OSError) on rank 0 is re-raised there and
    raised on rank 1 within seconds, naming it (before, rank 1 waited in the broadcast for 48 h)."""
    script = tmp_path / "decide.py"
    script.write_text(_DECIDE)
    _run([*TORCHRUN, str(script), str(tmp_path)], timeout=120)
    ranks = [json.loads((tmp_path / f"rank-{r}.json").read_text()) for r in (0, 1)]
    assert [r["value"] for r in ranks] == ["rank 0's decision"] * 2
    assert [r["calls"] for r in ranks] == [[0], []]
    assert ranks[0]["outcome"] == "OSError: run.json is truncated"
    assert ranks[1]["outcome"] == "ValueError: rank 0 failed: OSError: run.json is truncated"
    assert all(r["seconds"] < 10 for r in ranks)


def test_each_rank_takes_its_own_gpu_before_joining_the_group(monkeypatch):
    """Issue 46, 9: with GPUs, ``setup`` makes ``cuda:LOCAL_RANK`` the process's device before the
    process group is joined (NCCL's collectives use the current device) and the model's device follows."""
    import torch
    import torch.distributed as dist

    from full_metric.files import distributed
    from full_metric.models import resolve_device

    events = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.setattr(torch.cuda, "set_device", lambda d: events.append(("set_device", d)))
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    monkeypatch.setattr(dist, "init_process_group", lambda backend, **k: events.append(("init", backend)))
    # rank 6 of 8, the second process of its machine: its GPU is local_rank 1, not rank 6 % 4 = 2 (issue 62, 6)
    distributed.setup(distributed.Rank(rank=6, world_size=8, local_rank=1, local_world_size=4))
    assert events == [("set_device", 1), ("init", "nccl")]
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("RANK", "6")
    assert resolve_device("auto") == torch.device("cuda:1")
