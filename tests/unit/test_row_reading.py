"""What users' files carry (issue 46, 4, 6, 12, 13): extra columns that look like a known field are
kept when that field is present; a near-miss is refused only when the field it resembles is missing;
the items of a compact JSON array, a ``null`` response, a byte that is not UTF-8 and a cut JSON line
are each named where they are; a context written as a list in a CSV cell is read as its turns."""

from __future__ import annotations

import json

import pytest

from full_metric.files.dialog_files import DialogFileError, read_dialog_lines, table_rows
from full_metric.turns import split_turns

ROW = {"context": ["Hi!", "How was your weekend?"], "response": "Great, I went hiking."}


def _jsonl(tmp_path, rows, name="in.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize("extra", ["responder", "response_a", "content", "responses", "Response_B", "contexts"])
def test_look_alike_columns_are_kept_when_the_known_fields_are_there(extra, tmp_path):
    records = read_dialog_lines(_jsonl(tmp_path, [{**ROW, extra: "something else"}]))
    assert records[0][1][extra] == "something else" and records[0][1]["response"] == ROW["response"]


@pytest.mark.parametrize("field, message", [
    ("reponse", "unknown field 'reponse'; did you mean 'response'?"),
    ("Response", "unknown field 'Response'; did you mean 'response'?"),
    ("responses", "no field 'response' but a field 'responses'"),
])
def test_a_near_miss_is_refused_when_the_field_it_resembles_is_missing(field, message, tmp_path):
    with pytest.raises(DialogFileError, match=message):
        read_dialog_lines(_jsonl(tmp_path, [{"context": ROW["context"], field: "Great."}]))


def test_the_items_of_a_compact_json_array_are_named(tmp_path):
    rows = [ROW, ROW, {"context": ["Hi!"], "response": 3}, ROW]
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(rows), encoding="utf-8")  # one line
    with pytest.raises(DialogFileError, match=r"rows\.json, line 1, item 3: field 'response' must be a string"):
        read_dialog_lines(path)
    text = json.dumps([ROW, "not a row"])
    with pytest.raises(DialogFileError, match="line 1, item 2: expected a JSON object"):
        table_rows(text, ".json")


def test_a_null_response_is_dialog_level_as_every_face_writes_it(tmp_path):
    """Issue 62, 3: the app writes a dialog-level row with ``"response": null``; read back, it is dialog level
    (after a turn-level row, the file mixes levels, said so); a null context is still refused by name."""
    dialog = {"context": ["Hi!", "Hello."], "response": None}
    assert [r["response"] for _, r in read_dialog_lines(_jsonl(tmp_path, [dialog, dialog]))] == [None, None]
    with pytest.raises(DialogFileError, match="line 2: mixes turn-level"):
        read_dialog_lines(_jsonl(tmp_path, [ROW, dialog]))
    with pytest.raises(DialogFileError, match="line 1: field 'context' is null"):
        read_dialog_lines(_jsonl(tmp_path, [{"context": None, "response": "Hi."}]))


def test_a_byte_that_is_not_utf8_is_named_at_its_own_line(tmp_path):
    path = tmp_path / "in.jsonl"
    lines = [json.dumps({**ROW, "id": i}).encode() for i in range(600)]
    lines[400] = lines[400].replace(b"hiking", b"hik\xe9ng")  # line 401, past the first 8 KB chunks
    path.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(DialogFileError, match=r"line 401: not UTF-8 text"):
        read_dialog_lines(path)
    csv = tmp_path / "in.csv"
    csv.write_bytes(b"context,response\n" + b"".join(b"Hi!,Hello there friend.\n" for _ in range(600))
                    + b"Hi!,caf\xe9\n")
    with pytest.raises(DialogFileError, match=r"line 602: not UTF-8 text"):
        read_dialog_lines(csv)


def test_a_cut_json_line_says_what_and_where_whole(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps(ROW) + "\n" + '{"context": ["Hi!"], "response": "Great\n', encoding="utf-8")
    with pytest.raises(DialogFileError) as caught:  # the line ends inside a string: json says "... at"
        read_dialog_lines(path)
    assert str(caught.value).endswith("line 2: not valid JSON (Invalid control character at column 40)")
    path.write_text(json.dumps(ROW) + "\n" + '{"context": ["Hi!"], "response": "Great', encoding="utf-8")
    with pytest.raises(DialogFileError) as caught:  # the file ends inside a string
        read_dialog_lines(path)
    assert str(caught.value).endswith("line 2: not valid JSON (Unterminated string starting at column 34)")


@pytest.mark.parametrize("cell", ['["Hi!", "How was your weekend?"]', "['Hi!', 'How was your weekend?']",
                                  "['Hi!' 'How was your weekend?']", "['Hi!'\n 'How was your weekend?']",
                                  "  ['Hi!', 'How was your weekend?',]\n"])
@pytest.mark.parametrize("bom", [False, True])
def test_a_csv_context_written_as_a_list_is_read_as_its_turns(cell, bom, tmp_path):
    """JSON's, pandas' and NumPy's ways of writing a list (issue 62, 4: NumPy's has no commas, and Python
    would glue its literals into one turn), with spaces around it, in a file with or without a byte-order mark."""
    path = tmp_path / "in.csv"
    import csv

    with open(path, "w", newline="", encoding="utf-8-sig" if bom else "utf-8") as handle:
        csv.writer(handle).writerows([["context", "response"], [cell, ROW["response"]]])
    assert read_dialog_lines(path)[0][1]["context"] == ROW["context"]


def test_a_numpy_cell_as_datasets_writes_it_is_two_turns_never_one(tmp_path):
    pd = pytest.importorskip("pandas")
    datasets = pytest.importorskip("datasets")
    path = tmp_path / "out.csv"
    datasets.Dataset.from_list([ROW]).to_pandas().to_csv(path, index=False)
    assert "' '" in path.read_text(encoding="utf-8") and pd is not None  # NumPy's cell: no comma between the turns
    assert read_dialog_lines(path)[0][1]["context"] == ROW["context"]


def test_a_json_lines_file_with_a_byte_order_mark_reads_its_first_row(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [ROW, ROW]), encoding="utf-8-sig")
    assert [r["context"] for _, r in read_dialog_lines(path)] == [ROW["context"]] * 2


def test_only_a_list_of_strings_is_read_as_turns():
    assert split_turns("[laughs] hi") == ["[laughs] hi"]
    assert split_turns("[1, 2]") == ["[1, 2]"] and split_turns("[laughs]") == ["[laughs]"]
    assert split_turns("Hi!\nHello.") == ["Hi!", "Hello."] and split_turns("") == []
    # a list with a non-string item is not a list of turns: the text as it is, one turn per line
    assert split_turns("['Hi!', 3]") == ["['Hi!', 3]"] and split_turns(" ['Hi!', 3] ") == [" ['Hi!', 3] "]
    assert split_turns("['a',,'b']") == ["['a',,'b']"] and split_turns("['Hi!'] and more") == ["['Hi!'] and more"]
    assert split_turns("  ['Hi!', 'Hello.']  ") == ["Hi!", "Hello."]
