"""The one file layer of dialog rows, for the command line, the corpus scorer, the app's uploads and
the human-rated files of :mod:`full_metric.files.rated_files`: one reader of JSON Lines and CSV
rows (:func:`iter_rows`, streamed, with line numbers), one row check (:func:`check_row`), one
scored-record writer (:func:`scored_records`); and follow-up files. Errors name the file, the line
and the field. (Parquet files and Hub datasets are read with ``datasets`` in :mod:`full_metric.files.corpus`.)
"""

from __future__ import annotations

import csv
import difflib
import io
import json
import os
from pathlib import Path
from typing import IO, Any, Iterator, Sequence

from ..errors import UsageError, install_hint
from ..turns import split_turns
from ..unscored import as_json_score

#: The suffixes of the files :func:`iter_rows` reads (the app's uploads too: one list).
ROW_SUFFIXES = (".jsonl", ".json", ".csv")


def suffix_list(suffixes: Sequence[str]) -> str:
    """``.jsonl, .json or .csv``: suffixes as a message names them."""
    return ", ".join(suffixes[:-1]) + f" or {suffixes[-1]}" if len(suffixes) > 1 else suffixes[0]


class DialogFileError(UsageError):
    """A malformed input file: the message names the file, the line and the problem."""


class Position(int):
    """A row's line number (an ``int``: ordered and compared as the line) that also names the item of a
    JSON array: ``f"line {position}"`` reads "line 1, item 5", so that the rows of a compact array, all
    on line 1, are told apart in every message."""

    item: int | None = None

    def __new__(cls, line: int, item: int | None = None) -> "Position":
        made = super().__new__(cls, line)
        made.item = item
        return made

    def __str__(self) -> str:
        return f"{int(self)}" if self.item is None else f"{int(self)}, item {self.item}"

    def __format__(self, spec: str) -> str:  # what f-strings use
        return format(str(self), spec)


def iter_rows(
    handle: IO[str], suffix: str, error: type[ValueError] = DialogFileError, where: str = "", *,
    lenient: bool = False, required: str | None = None,
) -> Iterator[tuple[int, dict[str, Any] | ValueError]]:
    """(line number, row) for each row of a JSON Lines (``suffix`` ``.jsonl``, or ``.json``), JSON
    array (``.json`` whose text starts with ``[``: :func:`json_is_array`, numbered by the line each
    item starts on) or CSV (``.csv``, numbered by the line the row starts on) text stream: blank JSON lines are skipped,
    empty CSV cells left out (a missing value). A malformed line raises ``error`` naming ``where`` and the line, or with
    ``lenient`` stands in the stream as that error (for callers that may skip it). ``required``: a
    column a CSV header must have."""
    suffix = suffix.lower()
    if suffix == ".csv":
        yield from _csv_rows(handle, error, where, required)
    elif suffix == ".json":
        try:
            text = handle.read()
        except UnicodeDecodeError as decode:
            raise error(f"{where}not UTF-8 text ({decode.reason})") from None
        if json_is_array(text):
            yield from _json_array_rows(text, error, where, lenient)
        else:
            yield from _json_rows(io.StringIO(text), error, where, lenient)
    elif suffix == ".jsonl":
        yield from _json_rows(handle, error, where, lenient)
    else:
        raise error(f"{where}expected a {suffix_list(ROW_SUFFIXES)} file, not {suffix or 'a file without extension'}")


def _json_rows(handle: IO[str], error: type[ValueError], where: str, lenient: bool) -> Iterator[tuple[int, Any]]:
    number = 0
    while True:
        try:
            line = handle.readline()
        except UnicodeDecodeError as decode:
            raise error(f"{where}line {number + 1}: not UTF-8 text ({decode.reason})") from None
        if not line:
            return
        number += 1
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            problem = None if isinstance(record, dict) else f"expected a JSON object, got {type(record).__name__}"
        except json.JSONDecodeError as decode:
            problem = f"not valid JSON ({_json_problem(decode)})"
        if problem is None:
            yield number, record
        elif lenient:
            yield number, error(f"{where}line {number}: {problem}")
        else:
            raise error(f"{where}line {number}: {problem}")


def _json_problem(decode: json.JSONDecodeError) -> str:
    """What ``json`` found wrong, whole: its message ends where it would name the place ("Invalid control
    character at"), which is said here ("... at column 23")."""
    return f"{decode.msg.removesuffix(' at')} at column {decode.colno}"


def json_is_array(text: str) -> bool:
    """Whether a ``.json`` file's text is one JSON array (it starts with ``[``) rather than JSON Lines:
    decided here only, for every reader. A ``.jsonl`` file is JSON Lines whatever its first line holds."""
    return text.lstrip("\ufeff \t\r\n")[:1] == "["


def _json_array_rows(text: str, error: type[ValueError], where: str, lenient: bool) -> Iterator[tuple[int, Any]]:
    """The items of a JSON array, each numbered by the line it starts on and its place in the array
    (:class:`Position`; by hand: ``json`` gives no positions of items; the whole text is checked by
    ``json.loads`` first, so the scan cannot fail)."""
    try:
        json.loads(text)
    except json.JSONDecodeError as decode:
        raise error(f"{where}line {decode.lineno}: not a valid JSON array ({_json_problem(decode)})") from None
    decoder, pos, number = json.JSONDecoder(), text.index("[") + 1, 0
    while True:
        pos = _skip_space(text, pos)
        if text[pos] == "]":
            return
        item, end = decoder.raw_decode(text, pos)
        number += 1
        line = Position(text.count("\n", 0, pos) + 1, number)
        if isinstance(item, dict):
            yield line, item
        elif lenient:
            yield line, error(f"{where}line {line}: expected a JSON object, got {type(item).__name__}")
        else:
            raise error(f"{where}line {line}: expected a JSON object, got {type(item).__name__}")
        pos = _skip_space(text, end)
        pos += text[pos] == ","


def _skip_space(text: str, pos: int) -> int:
    while text[pos] in " \t\r\n":
        pos += 1
    return pos


def _csv_rows(handle: IO[str], error: type[ValueError], where: str, required: str | None) -> Iterator[tuple[int, Any]]:
    reader = csv.DictReader(handle)
    start = 2
    try:
        if required is not None and (not reader.fieldnames or required not in reader.fieldnames):
            raise error(f"{where}line 1: the CSV header needs a {required!r} column")
        for row in reader:
            if row.pop(None, None):  # type: ignore[call-overload]
                raise error(f"{where}line {start}: more cells than the header has columns")
            yield start, {k: v for k, v in row.items() if v not in (None, "")}  # an empty cell: a missing value
            start = reader.line_num + 1
    except UnicodeDecodeError as decode:
        raise error(f"{where}line {start}: not UTF-8 text ({decode.reason})") from None


def table_rows(
    text: str, suffix: str, error: type[ValueError] = DialogFileError, where: str = "", *, lenient: bool = False,
    required: str | None = None,
) -> list[tuple[int, dict[str, Any] | ValueError]]:
    """:func:`iter_rows` of a text held in memory (an upload), as a list."""
    return list(iter_rows(io.StringIO(text, newline=""), suffix, error, where, lenient=lenient, required=required))


def check_input_file(path: str | Path, suffixes: Sequence[str], error: type[ValueError] = DialogFileError) -> None:
    """The one check of an input file every command makes before reading it: a known suffix, and a file that
    exists (not a folder), each refused in one line naming the path."""
    path = Path(path)
    if path.is_dir():
        raise error(f"{path}: a folder, not a file; give the file of dialogs inside it")
    if path.suffix.lower() not in suffixes:
        raise error(f"{path}: expected a {suffix_list(suffixes)} file")
    if not path.is_file():
        raise error(f"{path}: no such file")


def read_rows(path: str | Path, **options: Any) -> Iterator[tuple[int, dict[str, Any] | ValueError]]:
    """:func:`iter_rows` of a file, streamed (``options``: those of :func:`iter_rows`); errors name the file.
    The file is decoded a line at a time (:class:`_DecodedLines`), so that a byte that is not UTF-8 is
    named at its own line (a text stream decodes 8 KB chunks and fails at the line a chunk starts on)."""
    path = Path(path)
    error = options.get("error", DialogFileError)
    check_input_file(path, ROW_SUFFIXES, error)
    with open(path, "rb") as handle:
        yield from iter_rows(_DecodedLines(handle, error, f"{path}, "), path.suffix, where=f"{path}, ", **options)


class _DecodedLines:
    """The lines of a binary file as text (UTF-8, a leading byte-order mark dropped), with the
    ``readline``, ``read`` and iteration :func:`iter_rows` uses; a line that is not UTF-8 raises
    ``error`` naming it and the byte."""

    def __init__(self, handle: IO[bytes], error: type[ValueError], where: str) -> None:
        self.handle, self.error, self.where, self.number = handle, error, where, 0

    def readline(self) -> str:
        raw = self.handle.readline()
        if not raw:
            return ""
        self.number += 1
        if self.number == 1:
            raw = raw.removeprefix(b"\xef\xbb\xbf")
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as decode:
            raise self.error(f"{self.where}line {self.number}: not UTF-8 text (byte {decode.start + 1} of the line: "
                             f"{decode.reason}); save the file as UTF-8") from None

    def read(self) -> str:
        return "".join(iter(self.readline, ""))

    def __iter__(self) -> Iterator[str]:
        return iter(self.readline, "")


#: The sources :func:`open_rows` reads: these files, and ``hf:NAME`` (a Hub dataset).
SOURCE_SUFFIXES = (*ROW_SUFFIXES, ".parquet")
#: A source naming a Hub dataset: ``hf:NAME``.
HUB_PREFIX = "hf:"


def source_kind(source: str | Path) -> str:
    """The format of a source, decided here only: ``hub`` (``hf:NAME``), ``parquet``, ``csv``,
    ``json-array`` (a ``.json`` file whose text starts with ``[``) or ``json-lines`` (``.jsonl``, or
    any other ``.json``)."""
    text = str(source)
    if text.startswith(HUB_PREFIX):
        return "hub"
    suffix = Path(text).suffix.lower()
    if suffix not in SOURCE_SUFFIXES:
        raise DialogFileError(f"{text}: expected a {suffix_list(SOURCE_SUFFIXES)} file, or hf:NAME for a Hub dataset")
    if suffix in (".parquet", ".csv"):
        return suffix[1:]
    if suffix == ".jsonl":  # one JSON value per line, whatever the first line holds
        return "json-lines"
    if not Path(text).is_file():
        raise DialogFileError(f"{text}: no such file")
    with open(text, encoding="utf-8-sig", errors="replace") as handle:
        return "json-array" if json_is_array(handle.read(4096)) else "json-lines"


def open_rows(
    source: str | Path, *, split: str = "train", config: str | None = None, error: type[ValueError] = DialogFileError,
    lenient: bool = False, required: str | None = None,
) -> Iterator[tuple[str, dict[str, Any] | ValueError, bool]]:
    """(where, row, whether it is a CSV row) for every row of a source, streamed where the format
    allows: JSON Lines, JSON arrays and CSV by :func:`iter_rows` (``error``, ``lenient``, ``required``
    as there), Parquet files and Hub datasets (``split``, ``config``)
    through ``datasets`` in streaming mode. The one reader of the scorer's inputs, ``adapt``'s
    dialogs and the rated tables."""
    kind, text = source_kind(source), str(source)
    if kind in ("hub", "parquet"):
        try:
            import datasets
        except ImportError:
            raise error("Parquet files and Hub datasets need the datasets package: "
                        + install_hint("evaluate", "datasets")) from None
        stream = (datasets.load_dataset(text[len(HUB_PREFIX):], config, split=split, streaming=True) if kind == "hub"
                  else datasets.load_dataset("parquet", data_files=text, split="train", streaming=True))
        yield from ((f"{text}, row {number}", row, False) for number, row in enumerate(stream, start=1))
    else:
        for number, row in read_rows(text, error=error, lenient=lenient, required=required):
            yield f"{text}, line {number}", row, kind == "csv"


#: Field names that hold a response under another name: a row with one of them and no ``response``
#: is refused rather than silently scored as a whole dialog.
RESPONSE_LIKE = frozenset({"reply", "replies", "answer", "answers", "responses", "prediction", "predictions", "output",
                           "generation", "completion", "hypothesis", "candidate", "bot", "system_response"})


def check_row(
    row: dict[str, Any], where: str, error: type[ValueError] = DialogFileError, *,
    context_column: str = "context", response_column: str = "response", csv_row: bool = False,
) -> tuple[list[str], str | None]:
    """The one check of a dialog row: its context (a list of turns, or a string with a turn per
    line) and its response (a non-empty string; missing or null, as every face writes a dialog-level
    row and as a Parquet column holds it: dialog level, and then the context must hold a turn). ``csv_row``: a row of a CSV file whose header has the context column, where an
    empty cell is a missing value (an empty context, no response). A known field's name misspelled
    is refused (:func:`_refuse_misspelled`)."""
    if not csv_row and context_column in row and row[context_column] is None:
        raise error(f"{where}: field {context_column!r} is null; give it as a list of turns or a string")
    response = row.get(response_column)
    if response is None:
        named = next((k for k in row if str(k).strip().lower() in RESPONSE_LIKE and row[k] not in (None, "")), None)
        if named is not None:
            raise error(f"{where}: no field {response_column!r} but a field {named!r}: the row would be scored as a "
                        f"whole dialog; rename {named!r} to {response_column!r} to score it as the response")
    _refuse_misspelled(row, where, error, (context_column, response_column))
    if row.get(context_column) is None and not csv_row:
        raise error(f"{where}: missing field {context_column!r}")
    context = row.get(context_column, "")
    if isinstance(context, str):
        context = split_turns(context)
    if not isinstance(context, (list, tuple)) or not all(isinstance(t, str) for t in context):
        raise error(f"{where}: field {context_column!r} must be a list of strings or a string with a turn per line")
    if response is not None and not isinstance(response, str):
        raise error(f"{where}: field {response_column!r} must be a string")
    if response is None and not context:
        raise error(f"{where}: field {context_column!r} is an empty dialog and there is no {response_column!r}")
    return list(context), response


def _refuse_misspelled(row: dict[str, Any], where: str, error: type[ValueError], known: Sequence[str]) -> None:
    """Refuse a field that is a known field's name misspelled ("reponse", "Context") while that known
    field is missing, naming the one meant: the row would otherwise be scored as something else. With
    the known field present, a look-alike (``responder``, ``response_a``, ``content``) is an extra
    column like any other (``id``, ``system``...): kept and written back with the scores."""
    for key in row:
        name = str(key).strip().lower()
        if key in known:
            continue
        close = [k for k in known if k not in row and abs(len(name) - len(k)) <= 2
                 and difflib.SequenceMatcher(None, name, k).ratio() >= 0.8]
        if close:
            raise error(f"{where}: unknown field {key!r}; did you mean {close[0]!r}? (other fields are kept as they "
                        "are, but one so like a known name would leave the row scored as something else)")


class OneLevel:
    """The one rule of every reader that scores: a file's rows are all turn level (with a response) or
    all dialog level (without); the first row that breaks it is refused, named by ``where``."""

    def __init__(self, error: type[Exception] = DialogFileError) -> None:
        self.level: str | None = None
        self.error = error

    def check(self, where: str, response: str | None) -> str:
        """This row's level (``"turn"`` or ``"dialog"``), refused when it is not the earlier rows'."""
        this = "dialog" if response is None else "turn"
        if self.level is not None and this != self.level:
            raise self.error(f"{where}: mixes turn-level (with a response) and dialog-level (without) rows; score "
                             "each level from its own file")
        self.level = this
        return this


def read_dialog_lines(path: str | Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, record) of a dialog file's rows, each checked (:func:`check_row`; its context
    as a list of turns, its ``response`` ``None`` at dialog level); every record must have the same
    level: all with a response (turn level) or none (dialog level)."""
    records: list[tuple[int, dict[str, Any]]] = []
    csv_file = Path(path).suffix.lower() == ".csv"
    one_level = OneLevel()
    for number, row in read_rows(path, required="context"):
        where = f"{path}, line {number}"
        context, response = check_row(row, where, csv_row=csv_file)  # type: ignore[arg-type]
        one_level.check(where, response)
        records.append((number, {**row, "context": context, "response": response}))
    return records


def scored_records(rows: Sequence[dict[str, Any]], result: Any) -> list[dict[str, Any]]:
    """The one way a scored row is written (command line, corpus, app): the row's own fields, then
    its score (``full``; ``null`` with the field ``unscored`` saying why for an item not scored:
    :mod:`full_metric.unscored`), its per-follow-up log-likelihoods and the signature."""
    return [
        {**{k: v for k, v in row.items() if k != "unscored"}, **as_json_score(score), "follow_up_log_likelihoods": dict(zip(result.follow_ups, values)),
         "signature": result.signature}
        for row, score, values in zip(rows, result.scores, result.follow_up_log_likelihoods)
    ]


def refuse_overwriting_input(inputs: Sequence[str | Path | None], output: str | Path) -> None:
    """Refuse an output path that is one of the inputs (it would replace the input), before any work:
    the same file however it is named (relative or absolute, through a symbolic or a hard link)."""
    out = Path(output)
    for given in inputs:
        if given is None:
            continue
        same = Path(given).resolve() == out.resolve() or (
            Path(given).exists() and out.exists() and os.path.samefile(given, out))
        if same:
            raise DialogFileError(f"{output}: the output is the input file; write the scores to another file")


def read_follow_ups(path: str | Path) -> list[str]:
    """A follow-up file: one follow-up per line; blank lines are skipped."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as error:
        raise DialogFileError(f"{path}: not UTF-8 text ({error})") from None
    return [line.strip() for line in lines if line.strip()]
