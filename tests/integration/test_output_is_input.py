"""Issue 62, 3: what any face writes, every face reads back, dialog level (a null response) and items not
scored (a null score with its reason) included. Writers: ``full-metric score`` (JSON Lines, Parquet) and the
app's download (JSON Lines, CSV). Readers: the command line's (``compare``, ``score``'s input: the same row
check) and the app's upload."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from full_metric.faces.app_data import score_rows, upload_lines, write_scored
from full_metric.faces.cli import main
from full_metric.files.corpus import Source
from full_metric.files.dialog_files import read_dialog_lines
from full_metric.unscored import REASON

LONG = " ".join(f"word{i}" for i in range(400))
TURN = [{"context": ["Hi!", "How was your weekend?"], "response": "Great, I went hiking."},
        {"context": ["Hi!"], "response": LONG}, {"context": ["Hello."], "response": "Hello to you."}]
DIALOG = [{"context": ["Hi!", "Hello, who is this?", "It's me."]}, {"context": ["Hey.", "Hey, how are you?"]}]


def _written_by_the_cli(rows, folder: Path, suffix: str, model: Path) -> Path:
    source, out = folder / "in.jsonl", folder / f"cli.scored{suffix}"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert main(["score", str(source), "-o", str(out), "--model", str(model), "--device", "cpu", "--no-progress"]) == 0
    return out


def _written_by_the_app(rows, folder: Path, as_csv: bool, model: Path) -> Path:
    from full_metric import FullScorer

    rows = [{**r, "response": r.get("response")} for r in rows]  # the app's rows: response None at dialog level
    score_rows(FullScorer(str(model), progress=False), rows, None, None)
    return write_scored(rows, folder / f"app.scored{'.csv' if as_csv else '.jsonl'}", as_csv)


def _read_by_every_reader(path: Path) -> list[list[tuple[list[str], str | None, object]]]:
    seen = []
    if path.suffix != ".parquet":
        seen.append([(r["context"], r["response"], r.get("full")) for _, r in read_dialog_lines(path)])
        seen.append([(r["context"], r["response"], r.get("full")) for _, r in upload_lines(path.name, path.read_bytes())])
    seen.append([(c, resp, row.get("full")) for _, row, c, resp in Source(str(path)).dialogs()])
    return seen


@pytest.mark.parametrize("rows", [TURN, DIALOG], ids=["turn", "dialog"])
@pytest.mark.parametrize("writer", ["cli.jsonl", "cli.parquet", "app.jsonl", "app.csv"])
def test_what_any_face_writes_every_face_reads_back(rows, writer, tiny_blenderbot_path, tmp_path):
    face, suffix = writer.split(".")
    if face == "cli":
        path = _written_by_the_cli(rows, tmp_path, "." + suffix, tiny_blenderbot_path)
    else:
        path = _written_by_the_app(rows, tmp_path, suffix == "csv", tiny_blenderbot_path)
    for seen in _read_by_every_reader(path):
        assert [(c, r) for c, r, _ in seen] == [(r["context"], r.get("response")) for r in rows]
        if rows is TURN:
            assert [s is None or s == "" for *_, s in seen] == [False, True, False]
    if path.suffix == ".jsonl":
        records = [json.loads(line, parse_constant=lambda c: pytest.fail(f"not JSON: {c}")) for line in path.open()]
        assert [r.get("unscored") for r in records] == ([None, REASON, None] if rows is TURN else [None, None])


def test_a_parquet_file_whose_response_column_is_all_null_is_dialog_level(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    path = tmp_path / "dialogs.parquet"
    pq.write_table(pa.table({"context": [["Hi!", "Hello."], ["Hey.", "Hey you."]], "response": pa.array([None, None], pa.string())}), path)
    assert [(c, r) for _, _, c, r in Source(str(path)).dialogs()] == [(["Hi!", "Hello."], None), (["Hey.", "Hey you."], None)]


def test_the_cli_says_the_mean_is_over_the_scored_rows(tiny_blenderbot_path, tmp_path, capsys):
    out = _written_by_the_cli(TURN, tmp_path, ".jsonl", tiny_blenderbot_path)
    err = capsys.readouterr().err
    scores = [json.loads(line)["full"] for line in out.open()]
    assert f"scored 2 of 3 dialogs: mean FULL {(scores[0] + scores[2]) / 2:.4f}" in err
    assert "1 of 3 rows not scored (2)" in err
    again = tmp_path / "again.jsonl"  # the output, read back by the same command
    assert main(["score", str(out), "-o", str(again), "--model", str(tiny_blenderbot_path), "--no-progress"]) == 0
    assert [json.loads(line)["full"] for line in again.open()] == scores
    pair = tmp_path / "pair.jsonl"
    pair.write_text("".join(json.dumps({**r, "response": "Sure."}) + "\n" for r in TURN), encoding="utf-8")
    assert main(["compare", str(out), str(pair), "--model", str(tiny_blenderbot_path), "--no-progress"]) == 0
    table = capsys.readouterr().out
    assert "'cli.scored': cli.scored.jsonl line 2" in table and table.count("    2 ") >= 2  # n = 2 pairs each


def test_a_csv_context_is_written_back_as_its_turns_by_every_writer(tiny_blenderbot_path, tmp_path):
    """Issue 62, 9: the command line wrote a CSV context back as its raw cell, the app as its turns; one writer:
    both write the turns the row was read as."""
    import csv

    source = tmp_path / "in.csv"
    with open(source, "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([["context", "response"], ["['Hi!' 'How was your weekend?']", "Great."]])
    out = tmp_path / "out.jsonl"
    assert main(["score", str(source), "-o", str(out), "--model", str(tiny_blenderbot_path), "--no-progress"]) == 0
    assert json.loads(out.read_text())["context"] == ["Hi!", "How was your weekend?"]
    app = [r for _, r in upload_lines(source.name, source.read_bytes())]
    assert app[0]["context"] == ["Hi!", "How was your weekend?"]
