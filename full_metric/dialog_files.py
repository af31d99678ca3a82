"""The one reader of dialog files (JSON Lines and CSV rows, for the command line, the app's uploads
and the human-rated files of :mod:`full_metric.research.rated_files`), and follow-up files; errors
name the file, the line and the field. (``full-metric score`` streams its input with
:mod:`full_metric.corpus`.)"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any


class DialogFileError(ValueError):
    """A malformed input file: the message names the file, the line and the problem."""


def read_dialog_lines(path: str | Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, record) of JSON Lines dialogs: ``{"context": [turns...], "response": "..."}``
    (response optional); blank lines are skipped; every record must have the same level: all with
    a response (turn level) or none (dialog level)."""
    records: list[dict[str, Any]] = []
    numbers: list[int] = []
    for number, record in _records(Path(path)):
        where = f"{path}, line {number}"
        context = record.get("context")
        if not isinstance(context, list) or not all(isinstance(t, str) for t in context):
            raise DialogFileError(f"{where}: field 'context' must be a list of strings")
        if "response" in record and record["response"] is not None and not isinstance(record["response"], str):
            raise DialogFileError(f"{where}: field 'response' must be a string")
        if "response" in record and record["response"] is not None and not record["response"].strip():
            raise DialogFileError(f"{where}: field 'response' is empty")
        if records and (records[0].get("response") is None) != (record.get("response") is None):
            raise DialogFileError(
                f"{where}: mixes turn-level (with 'response') and dialog-level (without) records"
            )
        if record.get("response") is None and not context:
            raise DialogFileError(f"{where}: field 'context' is an empty dialog and there is no 'response'")
        records.append(record)
        numbers.append(number)
    return list(zip(numbers, records))


def table_rows(
    text: str, suffix: str, error: type[ValueError] = DialogFileError, where: str = "", *, lenient: bool = False,
    required: str | None = None,
) -> list[tuple[int, dict[str, Any] | ValueError]]:
    """(line number, row) for each row of a JSON Lines (``suffix`` ``.jsonl``/``.json``) or CSV
    (``.csv``) text: blank JSON lines are skipped, empty CSV cells left out. A malformed line raises
    ``error`` naming ``where`` and the line, or with ``lenient`` stands in the list as that error
    (for callers that may skip it). ``required``: a column a CSV header must have."""
    suffix = suffix.lower()
    if suffix == ".csv":
        reader = csv.DictReader(io.StringIO(text))
        if required is not None and (not reader.fieldnames or required not in reader.fieldnames):
            raise error(f"{where}line 1: the CSV header needs a {required!r} column")
        return [(reader.line_num, {k: v for k, v in row.items() if v not in (None, "")}) for row in reader]
    if suffix not in (".jsonl", ".json"):
        raise error(f"{where}expected a .jsonl or .csv file, not {suffix or 'a file without extension'}")
    rows: list[tuple[int, dict[str, Any] | ValueError]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            problem = None if isinstance(record, dict) else f"expected a JSON object, got {type(record).__name__}"
        except json.JSONDecodeError as decode:
            problem = f"not valid JSON ({decode.msg})"
        if problem is None:
            rows.append((number, record))
        elif lenient:
            rows.append((number, error(f"{where}line {number}: {problem}")))
        else:
            raise error(f"{where}line {number}: {problem}")
    return rows


def _records(path: Path) -> list[tuple[int, dict[str, Any]]]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise DialogFileError(f"{path}: not UTF-8 text ({error})") from None
    return table_rows(text, ".jsonl", DialogFileError, f"{path}, ")  # type: ignore[return-value]


def read_follow_ups(path: str | Path) -> list[str]:
    """A follow-up file: one follow-up per line; blank lines are skipped."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as error:
        raise DialogFileError(f"{path}: not UTF-8 text ({error})") from None
    return [line.strip() for line in lines if line.strip()]
