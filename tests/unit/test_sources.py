"""One reader decides every source's format (files.dialog_files.open_rows): the scorer's inputs,
adapt's dialogs and the rated tables read JSON Lines, a JSON array, CSV, Parquet and hf:NAME alike."""

from __future__ import annotations

import json

import pytest

from full_metric.files.corpus import Source
from full_metric.files.dialog_files import DialogFileError, open_rows, source_kind
from full_metric.files.rated_files import RatedFileError, is_fed, read_rated
from full_metric.research.adapt_data import read_dialogs

ROWS = [{"context": ["Hi!", "Hello, how are you?"], "response": "Fine.", "human": 4},
        {"context": "Do you cook?\nNot really.", "response": "Why not?", "human": 2}]


@pytest.fixture
def files(tmp_path):
    made = {
        "lines.jsonl": "".join(json.dumps(r) + "\n" for r in ROWS),
        "lines.json": "".join(json.dumps(r) + "\n" for r in ROWS),
        "array.json": json.dumps(ROWS, indent=1),
        "rows.csv": 'context,response,human\n"Hi!\nHello, how are you?",Fine.,4\n"Do you cook?\nNot really.",Why not?,2\n',
    }
    for name, text in made.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


def test_the_format_is_decided_in_one_place(files):
    assert [source_kind(files / n) for n in ("lines.jsonl", "lines.json", "array.json", "rows.csv")] == [
        "json-lines", "json-lines", "json-array", "csv"]
    assert source_kind("x.parquet") == "parquet" and source_kind("hf:org/name") == "hub"
    (files / "array.jsonl").write_text("[1, 2]\n", encoding="utf-8")
    assert source_kind(files / "array.jsonl") == "json-lines"  # its line 1 is refused as not an object
    with pytest.raises(DialogFileError, match="x.txt: expected a .jsonl, .json, .csv or .parquet file, or hf:NAME"):
        source_kind("x.txt")


@pytest.mark.parametrize("name", ["lines.jsonl", "lines.json", "array.json", "rows.csv"])
def test_the_scorer_adapt_and_the_rated_reader_read_every_format_alike(files, name):
    path = files / name
    dialogs = [(context, response) for _, _, context, response in Source(str(path)).dialogs()]
    assert dialogs == [(["Hi!", "Hello, how are you?"], "Fine."), (["Do you cook?", "Not really."], "Why not?")]
    assert read_dialogs([str(path)]) == [["Hi!", "Hello, how are you?", "Fine."], ["Do you cook?", "Not really.", "Why not?"]]
    rated = read_rated(path)
    assert [i.ratings["human"] for i in rated.items] == [4.0, 2.0] and rated.aspect == "human"


def test_a_json_array_item_that_is_not_an_object_is_named(files):
    path = files / "bad.json"
    path.write_text(json.dumps([ROWS[0], "not a row"], indent=1), encoding="utf-8")
    line = json.dumps([ROWS[0], "not a row"], indent=1).splitlines().index(' "not a row"') + 1
    assert [w for w, _, _ in open_rows(path, lenient=True)] == [f"{path}, line 2, item 1", f"{path}, line {line}, item 2"]
    with pytest.raises(DialogFileError, match=f"bad.json, line {line}, item 2: expected a JSON object"):
        list(Source(str(path)).dialogs())
    with pytest.raises(RatedFileError, match=f"line {line}"):
        read_rated(path)


def test_fed_is_a_json_array_of_annotated_items(files):
    fed = files / "fed.json"
    fed.write_text(json.dumps([{"context": "User: Hi!", "response": "System: Hello.",
                                "annotations": {"Overall": [4, 5]}}]), encoding="utf-8")
    assert is_fed(fed) and not is_fed(files / "array.json") and not is_fed(files / "lines.json")
    data = read_rated(fed)
    assert data.aspect == "Overall" and data.items[0].ratings["Overall"] == 4.5
    # the format is read once and carried (agreement and paired comparisons treat FED dialogs as their own contexts)
    assert data.fmt == "fed" and read_rated(files / "lines.json", score_field="human").fmt == "table"


def _faces(path):
    """How score, compare, adapt and an app upload read one file: each a call giving (context, response) pairs."""
    from full_metric.faces.app_data import Limits, read_upload
    from full_metric.faces.cli import _system_file

    return {
        "score": lambda: [(c, r) for _, _, c, r in Source(str(path)).dialogs()],
        "compare": lambda: [(r["context"], r["response"]) for _, _, rs in _system_file(str(path)) for r in rs],
        "adapt": lambda: [(d[:-1], d[-1]) for d in read_dialogs([str(path)])],
        "app": lambda: [(r["context"], r["response"]) for r in read_upload(path.name, path.read_bytes(), Limits())],
    }


@pytest.mark.parametrize("name", ["lines.jsonl", "lines.json", "array.json", "rows.csv"])
def test_every_face_reads_every_format_alike(files, name):
    """One file through score, compare, adapt and the app's upload: the same rows (a JSON array
    included, which compare and the app once refused)."""
    read = {face: call() for face, call in _faces(files / name).items()}
    want = [(["Hi!", "Hello, how are you?"], "Fine."), (["Do you cook?", "Not really."], "Why not?")]
    assert read == {face: want for face in read}


@pytest.mark.parametrize("field, meant", [("reponse", "response"), ("Response", "response"), ("contexts", "context"),
                                          ("respones", "response")])
def test_a_misspelled_field_is_refused_by_every_face(files, field, meant):
    """A row with a known field's name misspelled, and that field missing, is refused, naming the one
    meant, by every reader (it was scored as a whole dialog); other extra fields are kept (and a
    look-alike beside the field it resembles too: test_row_reading.py)."""
    from full_metric.faces.app_data import InputError

    row = {"context": ["Hi!"], "response": "Fine.", "id": 7, "response_id": "r7"}
    row[field] = row.pop(meant)
    path = files / "typo.jsonl"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    for call in _faces(path).values():
        with pytest.raises((DialogFileError, InputError), match=f"unknown field {field!r}; did you mean {meant!r}"):
            call()
    path.write_text(json.dumps({"context": ["Hi!"], "response": "Fine.", "id": 7, "response_id": "r7"}) + "\n")
    assert [r for _, _, _, r in Source(str(path)).dialogs()] == ["Fine."]


def test_a_file_mixing_turn_and_dialog_rows_is_refused_by_every_face_that_scores(files):
    """One rule (dialog_files.OneLevel): score's survey, the dialog reader and the app's upload refuse
    the first row of the other level, naming its line (the app once scored both levels apart)."""
    from full_metric.faces.app_data import InputError, Limits, read_upload
    from full_metric.files.corpus import survey
    from full_metric.files.dialog_files import read_dialog_lines

    path = files / "mixed.jsonl"
    path.write_text('{"context": ["Hi!"], "response": "Fine."}\n{"context": ["Hi!", "Fine."]}\n', encoding="utf-8")
    for call in (lambda: survey(Source(str(path))), lambda: read_dialog_lines(path),
                 lambda: read_upload(path.name, path.read_bytes(), Limits())):
        with pytest.raises((DialogFileError, InputError), match="line 2: mixes turn-level .* and dialog-level"):
            call()
