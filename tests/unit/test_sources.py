"""One reader decides every source's format (files.dialog_files.open_rows): the scorer's inputs,
adapt's dialogs and the rated tables read JSON Lines, a JSON array, CSV, Parquet and hf:NAME alike."""

from __future__ import annotations

import json

import pytest

from full_metric.files.corpus import Source
from full_metric.files.dialog_files import DialogFileError, open_rows, source_kind
from full_metric.files.rated_files import RatedFileError, is_fed, read_rated
from full_metric.research.adapt import read_dialogs

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
    with pytest.raises(DialogFileError, match="x.txt: expected one of .jsonl, .json, .csv, .parquet, or hf:NAME"):
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
    path.write_text(json.dumps([ROWS[0], "not a row"]), encoding="utf-8")
    assert [w for w, _, _ in open_rows(path, lenient=True)][1] == f"{path}, item 2"
    with pytest.raises(DialogFileError, match="bad.json, item 2: expected a JSON object"):
        list(Source(str(path)).dialogs())
    with pytest.raises(RatedFileError, match="item 2"):
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
