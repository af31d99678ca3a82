"""Human-rated dialogs from files: FED's JSON natively, or JSON Lines / CSV with named columns.

Errors name the file, the item (line, or item number in a JSON array) and the field. Nothing is
skipped silently: with ``skip_invalid=True`` bad items are left out and counted.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .dialog_files import open_rows, source_kind
from ..errors import UsageError
from ..turns import split_turns, strip_speaker


class RatedFileError(UsageError):
    """A malformed rated-data file; the message names the file, item and field."""


@dataclass
class RatedItem:
    """One rated dialog: its context, its response (``None`` at dialog level), its ratings."""

    context: list[str]
    response: str | None
    ratings: dict[str, float]
    where: str
    system: str | None = None
    missing: list[str] = field(default_factory=list)  # aspects rated "N/A" (FED)

    @property
    def level(self) -> str:
        return "dialog" if self.response is None else "turn"


#: FED's overall rating: the aspect FULL is checked against in a FED file.
FED_ASPECT = "Overall"


@dataclass
class RatedData:
    items: list[RatedItem]
    skipped: list[str]  # "where: why" of each item left out on request
    #: the rating FULL is checked against unless another aspect is asked for: FED's Overall, or a
    #: table's score field (the one place this is decided)
    aspect: str = FED_ASPECT
    #: the format it was read from: ``fed`` (each dialog its own context) or ``table``
    fmt: str = "table"

    def level(self, level: str) -> list[RatedItem]:
        return [i for i in self.items if i.level == level]


def _rating(value: Any, where: str, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                raise RatedFileError(f"{where}: field {name!r} is not a number: {value!r}") from None
        else:
            raise RatedFileError(f"{where}: field {name!r} is not a number: {value!r}")
    if not math.isfinite(value):
        raise RatedFileError(f"{where}: field {name!r} is not a finite number: {value!r}")
    return float(value)


def _fed_item(raw: Any, where: str) -> RatedItem:
    if not isinstance(raw, dict):
        raise RatedFileError(f"{where}: expected a JSON object")
    if not isinstance(raw.get("context"), str):
        raise RatedFileError(f"{where}: field 'context' is missing or not a string")
    context = [strip_speaker(t) for t in split_turns(raw["context"])]
    response = raw.get("response")
    if response is not None:
        if not isinstance(response, str) or not response.strip():
            raise RatedFileError(f"{where}: field 'response' must be a non-empty string")
        response = strip_speaker(response)
    annotations = raw.get("annotations")
    if not isinstance(annotations, dict) or not annotations:
        raise RatedFileError(f"{where}: field 'annotations' is missing or empty")
    ratings, missing = {}, []
    for aspect, values in annotations.items():
        name = f"annotations.{aspect}"
        if not isinstance(values, list) or not values:
            raise RatedFileError(f"{where}: field {name!r} must be a non-empty list of ratings")
        numbers = [v for v in values if not (isinstance(v, str) and v.startswith("N/A"))]
        if not numbers:
            missing.append(aspect)
            continue
        parsed = [_rating(v, where, name) for v in numbers]
        ratings[aspect] = sum(parsed) / len(parsed)
    return RatedItem(context, response, ratings, where, raw.get("system"), missing)


def read_fed(path: str | Path, skip_invalid: bool = False) -> RatedData:
    """FED (Mehri and Eskenazi, 2020): a JSON array; each aspect's ratings are averaged.

    Ratings written "N/A ..." (FED uses them where an aspect could not be judged) count as
    missing for that aspect; an aspect with no numeric rating is left out of that item.
    """
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise RatedFileError(f"{path}: not a UTF-8 JSON file ({error})") from None
    if not isinstance(raw, list):
        raise RatedFileError(f"{path}: expected a JSON array of items (the FED format)")
    return replace(_collect(((f"{path}, item {i}", item) for i, item in enumerate(raw)), _fed_item, skip_invalid),
                   fmt="fed")


def read_table(
    path: str | Path,
    *,
    context_field: str = "context",
    response_field: str = "response",
    score_field: str = "human",
    skip_invalid: bool = False,
) -> RatedData:
    """Rows with a context, an optional response and a rating, in any format :func:`open_rows` reads
    (JSON Lines, a JSON array, CSV, Parquet, ``hf:NAME``).

    A context is a list of turns or a string with a turn per line. The rating is stored under
    the aspect name ``score_field``.
    """
    try:
        rows = [(where, row) for where, row, _ in open_rows(path, error=RatedFileError, lenient=True)]
    except UnicodeDecodeError as error:
        raise RatedFileError(f"{path}: not UTF-8 text ({error})") from None

    def parse(raw: Any, where: str) -> RatedItem:
        if not isinstance(raw, dict):
            raise RatedFileError(f"{where}: expected a JSON object")
        context = raw.get(context_field)
        if isinstance(context, str):
            context = split_turns(context)
        if not isinstance(context, list) or not all(isinstance(t, str) for t in context):
            raise RatedFileError(f"{where}: field {context_field!r} is missing or not a list of turns")
        response = raw.get(response_field) or None
        if response is not None and not isinstance(response, str):
            raise RatedFileError(f"{where}: field {response_field!r} must be a string")
        if score_field not in raw or raw[score_field] in (None, ""):
            raise RatedFileError(f"{where}: field {score_field!r} is missing")
        rating = _rating(raw[score_field], where, score_field)
        return RatedItem(context, response, {score_field: rating}, where, raw.get("system"))

    return replace(_collect(rows, parse, skip_invalid), aspect=score_field)


def _collect(rows: Any, parse: Any, skip_invalid: bool) -> RatedData:
    items, skipped = [], []
    for where, raw in rows:
        try:
            if isinstance(raw, RatedFileError):
                raise raw
            item = parse(raw, where)
            if item.response is None and not item.context:
                raise RatedFileError(f"{where}: an empty dialog with no response")
        except RatedFileError as error:
            if not skip_invalid:
                raise
            skipped.append(str(error))
            continue
        items.append(item)
    return RatedData(items, skipped)


def is_fed(path: str | Path) -> bool:
    """Whether a file is in the FED format: a ``.json`` JSON array (rows of a table are JSON Lines,
    or a JSON array whose items have no ``annotations``)."""
    if Path(path).suffix.lower() != ".json" or source_kind(path) != "json-array":
        return False
    try:
        first = next(iter(json.loads(Path(path).read_text(encoding="utf-8-sig"))), None)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return True  # read_fed names the problem
    return not isinstance(first, dict) or "annotations" in first


def read_rated(path: str | Path, fmt: str = "auto", skip_invalid: bool = False, **fields: str) -> RatedData:
    """Read a rated-data file; ``fmt`` is ``fed``, ``table`` or ``auto`` (:func:`is_fed`)."""
    if fmt == "auto":
        fmt = "fed" if is_fed(path) else "table"
    if fmt == "fed":
        return read_fed(path, skip_invalid)
    if fmt == "table":
        return read_table(path, skip_invalid=skip_invalid, **fields)
    raise UsageError(f"unknown format {fmt!r}; choose fed, table or auto")
