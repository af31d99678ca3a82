"""Reading and writing dialogs as JSON Lines, with errors that name the file, line and field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class DialogFileError(ValueError):
    """A malformed input file: the message names the file, the line and the problem."""


def read_dialogs(path: str | Path) -> list[dict[str, Any]]:
    """Read JSON Lines dialogs: ``{"context": [turns...], "response": "..."}`` (response optional).

    Blank lines are skipped. Every record must have the same level: all with a response
    (turn level) or none (dialog level).
    """
    records = []
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
    return records


def parse_json_lines(
    text: str, error: type[ValueError] = DialogFileError, where: str = ""
) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line; ``error`` names ``where`` and the line."""
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as problem:
            raise error(f"{where}line {number}: not valid JSON ({problem.msg})") from None
        if not isinstance(record, dict):
            raise error(f"{where}line {number}: expected a JSON object, got {type(record).__name__}")
        rows.append((number, record))
    return rows


def _records(path: Path) -> list[tuple[int, dict[str, Any]]]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise DialogFileError(f"{path}: not UTF-8 text ({error})") from None
    return parse_json_lines(text, DialogFileError, f"{path}, ")


def write_dialogs(path: str | Path, records: list[dict[str, Any]]) -> None:
    """Write records as JSON Lines (UTF-8, non-ASCII kept as is)."""
    with open(path, "w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")


def read_follow_ups(path: str | Path) -> list[str]:
    """A follow-up file: one follow-up per line; blank lines are skipped."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as error:
        raise DialogFileError(f"{path}: not UTF-8 text ({error})") from None
    return [line.strip() for line in lines if line.strip()]
