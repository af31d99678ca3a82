"""What the app does besides drawing itself, with no Gradio: its limits (``FULL_LIMIT_<NAME>``),
reading what a user types or uploads within them, the follow-ups and aggregation picked in the
settings, scoring a batch in chunks under a time limit, the ranking and per-system summaries, the
scored file written back (CSV cells that a spreadsheet would run as formulas quoted), and the
temporary folders downloads live in. :mod:`full_metric.faces.webapp` lays it out in Gradio."""

from __future__ import annotations

import csv
import json
import logging
import os
import re
import tempfile
from dataclasses import field, make_dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from ..aggregate import check_signs
from ..files.dialog_files import ROW_SUFFIXES, OneLevel, check_row, scored_records, suffix_list, table_rows
from ..errors import UsageError
from ..follow_ups import NAMED_SETS, validate_follow_ups
from ..scorer import FullScorer
from ..settings import Setting, positive_int, resolve_positive
from ..turns import split_turns
from ..unscored import scored_mean, unscored_items



#: What one request may hold, and how long a batch may run: the app's limits, each declared once,
#: read from ``FULL_LIMIT_<NAME>`` (``FULL_LIMIT_ROWS=200``): names that no scorer setting can take.
LIMIT_SETTINGS: tuple[Setting, ...] = tuple(
    Setting(name, text, kind=int, default=default, prefix="FULL_LIMIT_") for name, text, default in (
        ("turns", "turns in one dialog or context", 100),
        ("characters", "characters in one dialog, context or response", 20_000),
        ("candidates", "candidate responses in the turn tab", 10),
        ("rows", "rows of an uploaded file", 1_000),
        ("upload_bytes", "bytes of an uploaded file", 2_000_000),
        ("follow_ups", "custom follow-ups", 20),
        ("follow_up_characters", "characters of one custom follow-up", 200),
        ("batch_seconds", "seconds a batch runs before it stops with the rows scored so far", 600),
        ("queue", "requests waiting for the model", 32),
    )
)


def _limits_from_env(cls: type, environ: Mapping[str, str] | None = None) -> Any:
    """The limits, each from its ``FULL_LIMIT_<NAME>`` variable where set (a positive integer)."""
    environ = os.environ if environ is None else environ
    values = {}
    for setting in LIMIT_SETTINGS:
        text = environ.get(setting.env, "").strip()
        if text:
            values[setting.name] = positive_int(setting.parse(text), setting.env)
    return cls(**values)


Limits = make_dataclass(
    "Limits", [(s.name, int, field(default=s.default)) for s in LIMIT_SETTINGS], frozen=True,
    namespace={"from_env": classmethod(_limits_from_env),
               "__doc__": "The app's limits (:data:`LIMIT_SETTINGS`); ``Limits.from_env()`` reads them."},
)
LIMITS = Limits()
logger = logging.getLogger(__name__)
CUSTOM = "custom (one per line below)"
#: The dropdown choice "the chosen preset's follow-ups (and aggregation)" (not settings.FROM_PRESET, a default).
PRESET_CHOICE = "the preset's"
FOLLOW_UP_CHOICES = [PRESET_CHOICE, "paper", *[name for name in NAMED_SETS if name != "paper"], CUSTOM]


class InputError(UsageError):
    """A request the app refuses, with a message for the person who sent it."""


# -- parsing and limits ---------------------------------------------------------------------
def parse_dialog(text: str, limits: Limits = LIMITS, name: str = "dialog") -> list[str]:
    """A text box with one turn per line, blank lines left out (speaker labels such as ``User:``
    are the scorer's to remove: the app's scorer strips them unless ``FULL_STRIP_SPEAKER_PREFIXES=0``). What is
    not text (``None`` through the named API) is refused by name, as an empty box is."""
    if not isinstance(text, str):
        raise InputError(f"the {name} must be text, one turn per line; got {type(text).__name__}")
    if len(text) > limits.characters:
        raise InputError(f"the {name} has {len(text)} characters; the limit is {limits.characters}")
    turns = [t.strip() for t in split_turns(text) if t.strip()]
    if len(turns) > limits.turns:
        raise InputError(f"the {name} has {len(turns)} turns; the limit is {limits.turns}")
    return turns


def parse_candidates(text: str, limits: Limits = LIMITS) -> list[str]:
    """One candidate response per line; at least one."""
    candidates = parse_dialog(text, limits, name="candidate list")
    if not candidates:
        raise InputError("give at least one candidate response, one per line")
    if len(candidates) > limits.candidates:
        raise InputError(f"{len(candidates)} candidates; the limit is {limits.candidates}")
    return candidates


def _lines(text: str, what: str, limits: Limits = LIMITS) -> tuple[str, ...]:
    if len(text) > limits.characters:
        raise InputError(f"{what}: {len(text)} characters; the limit is {limits.characters}")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) > limits.follow_ups:
        raise InputError(f"{what}: {len(lines)} follow-ups; the limit is {limits.follow_ups}")
    long = next((k for k, line in enumerate(lines) if len(line) > limits.follow_up_characters), None)
    if long is not None:
        raise InputError(f"{what}: follow-up {long + 1} has {len(lines[long])} characters; "
                         f"the limit is {limits.follow_up_characters}")
    try:
        return validate_follow_ups(lines)
    except (TypeError, ValueError) as error:
        raise InputError(f"{what}: {error}") from None


def choose_follow_ups(choice: str, custom_text: str, limits: Limits = LIMITS) -> tuple[str, ...]:
    """The follow-up set picked in the settings, or the custom lines (within the limits)."""
    if choice == CUSTOM:
        return _lines(custom_text, "custom follow-ups", limits)
    if choice not in NAMED_SETS:
        raise InputError(f"unknown follow-up set {choice!r}")
    return NAMED_SETS[choice]


def read_upload(name: str, data: bytes, limits: Limits = LIMITS) -> list[dict[str, Any]]:
    """Rows of an uploaded JSON Lines (``.jsonl``), JSON array (``.json``) or CSV (``.csv``) file
    (:func:`upload_lines` without the line numbers)."""
    return [row for _, row in upload_lines(name, data, limits)]


def upload_lines(name: str, data: bytes, limits: Limits = LIMITS) -> list[tuple[int, dict[str, Any]]]:
    """(line number, row) of an uploaded JSON Lines (``.jsonl``), JSON array (``.json``) or CSV
    (``.csv``) file.

    Each row needs ``context`` (a list of turns, or a string with a turn per line) and may have
    ``response`` (turn level) and ``system``. Errors name the line and the problem.
    """
    if len(data) > limits.upload_bytes:
        raise InputError(f"the file has {len(data)} bytes; the limit is {limits.upload_bytes}")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise InputError(f"line {line}: not UTF-8 text (byte {error.start}); save the file as UTF-8") from None
    if "\x00" in text:
        raise InputError(f"line {text[: text.index(chr(0))].count(chr(10)) + 1}: a NUL byte; this looks like a "
                         "binary file, not JSON or CSV text")
    suffix = Path(name).suffix.lower()
    if suffix not in ROW_SUFFIXES:
        raise InputError(f"upload a {suffix_list(ROW_SUFFIXES)} file, not {suffix or 'a file without extension'}")
    rows = table_rows(text, suffix, InputError, required="context")
    if not rows:
        raise InputError("the file holds no rows")
    if len(rows) > limits.rows:
        raise InputError(f"the file has {len(rows)} rows; the limit is {limits.rows}")
    checked = [(line, _row_within_limits(line, row, limits, suffix == ".csv")) for line, row in rows]
    one_level = OneLevel(InputError)
    for line, row in checked:
        one_level.check(f"line {line}", row["response"])
    return checked


def check_scorable(scorer: FullScorer, numbered: Sequence[tuple[int, dict[str, Any]]]) -> None:
    """Every check the scorer makes of each row's input (:meth:`FullScorer.dialogs`: a response that is
    only a speaker label when it strips them...), before any model work; the error names the file's line."""
    for line, row in numbered:
        try:
            scorer.dialogs([row["context"]], None if row["response"] is None else [row["response"]])
        except UsageError as error:  # the scorer names item 0 of this one-row call: the line says which row
            raise InputError(f"line {line}: {_ONE_ITEM.sub('', str(error), count=1)}") from None


#: How the scorer names the one item of a one-row call (left out where the file's line is named instead).
_ONE_ITEM = re.compile(r"^(responses\[0\] |contexts\[0\] )")


def _row_within_limits(line: int, row: dict[str, Any], limits: Limits, csv_file: bool) -> dict[str, Any]:
    """The one row check (:func:`full_metric.files.dialog_files.check_row`), then the app's limits."""
    context, response = check_row(row, f"line {line}", InputError, csv_row=csv_file)
    if len(context) > limits.turns:
        raise InputError(f"line {line}: {len(context)} turns; the limit is {limits.turns}")
    if sum(map(len, context)) > limits.characters:
        raise InputError(f"line {line}: the context has {sum(map(len, context))} characters; "
                         f"the limit is {limits.characters}")
    if response is not None and len(response) > limits.characters:
        raise InputError(f"line {line}: the response has {len(response)} characters; the limit is {limits.characters}")
    return {**row, "context": context, "response": response}


# -- scoring helpers ------------------------------------------------------------------------
def rank(candidates: Sequence[str], scores: Sequence[float]) -> list[tuple[int, str, float]]:
    """(rank, candidate, score), best first; ties keep the input order."""
    order = sorted(range(len(candidates)), key=lambda i: -scores[i])
    return [(r + 1, candidates[i], scores[i]) for r, i in enumerate(order)]


def summarize(rows: Sequence[dict[str, Any]], baseline: str | None = None) -> tuple[list[dict[str, Any]], Any]:
    """The batch summary: a row for ``all`` (count, mean, 95% interval) and, when the rows name two or
    more ``system`` s, one per system with its difference from ``baseline`` (default: the first
    system), the p-value of the paired bootstrap test (unpaired when the systems did not answer the
    same contexts) and its Holm correction; also the :class:`~full_metric.comparison.Comparison`
    (``None`` without systems)."""
    from ..comparison import PairingError, compare_systems, mean_interval, pair_items, pairing_keys

    scores = [r["full"] for r in rows]
    low, high = mean_interval(scores)
    table = [{"group": "all", "items": len(scores), "not scored": len(unscored_items(scores)),
              "mean FULL": scored_mean(scores), "CI low": low, "CI high": high}]
    groups: dict[str, list[dict[str, Any]]] = {}
    numbers: dict[str, list[int]] = {}  # each system's rows by their row number in the batch, from 1
    for number, row in enumerate(rows, start=1):
        if row.get("system") is not None:
            groups.setdefault(str(row["system"]), []).append(row)
            numbers.setdefault(str(row["system"]), []).append(number)
    if len(groups) < 2:
        return table, None
    baseline = baseline if baseline in groups else next(iter(groups))
    try:
        order = pair_items({n: pairing_keys(g) for n, g in groups.items()}, baseline)
        paired = True
    except PairingError:
        order, paired = {n: list(range(len(g))) for n, g in groups.items()}, False
    comparison = compare_systems({n: [g[k]["full"] for k in order[n]] for n, g in groups.items()},
                                 baseline=baseline, paired=paired,
                                 item_names={n: [f"row {numbers[n][k]}" for k in order[n]] for n in groups})
    for s in comparison.systems:
        table.append({"group": s.system, "items": s.n, "not scored": len(comparison.left_out.get(s.system, [])),
                      "mean FULL": s.mean, "CI low": s.ci_low, "CI high": s.ci_high,
                      "vs baseline": "baseline" if s.delta is None else f"{s.delta:+.3f}",
                      "p": s.p_value, "p (Holm)": s.p_value_holm,
                      "significant": "" if s.delta is None else ("yes" if comparison.significant(s) else "no"),
                      "paired": "yes" if paired else "no (different contexts)"})
    return table, comparison


def systems_in(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The ``system`` names of uploaded rows, in order of first appearance."""
    return list(dict.fromkeys(str(r["system"]) for r in rows if r.get("system") is not None))


def choose_settings(
    scorer: FullScorer, choice: str, custom_text: str, positive_text: str, aggregation: str, limits: Limits = LIMITS
) -> dict[str, Any]:
    """The scoring options picked in the settings: the preset's follow-ups (negative and positive)
    and aggregation, or a named set / custom lines (custom positive lines with custom only)."""
    if choice == PRESET_CHOICE:
        follow_ups, positive = scorer.follow_ups, scorer.positive_follow_ups
    else:
        follow_ups = choose_follow_ups(choice, custom_text, limits)
        positive = (_lines(positive_text, "custom positive follow-ups", limits)
                    if choice == CUSTOM and positive_text.strip() else ())
    agg = scorer.aggregation if aggregation == PRESET_CHOICE else aggregation
    try:
        resolve_positive(positive, (), follow_ups)
        check_signs(len(positive), agg)
    except ValueError as error:
        raise InputError(str(error)) from None
    return {"follow_ups": follow_ups, "positive_follow_ups": positive, "aggregation": agg}


def score_in_chunks(
    scorer: FullScorer, rows: list[dict[str, Any]], follow_ups: Sequence[str], aggregation: str,
    positive_follow_ups: Sequence[str] = (), chunk_size: int = 16,
) -> Iterator[tuple[int, list[str]]]:
    """Score uploaded rows in place, ``chunk_size`` at a time in input order (turn-level and
    dialog-level rows of a chunk each in one call); after each chunk yields (rows scored so far,
    the signatures so far: one per level)."""
    signatures: list[str] = []
    for start in range(0, len(rows), chunk_size):
        chunk = rows[start : start + chunk_size]
        for turn_level in (True, False):
            chosen = [r for r in chunk if (r["response"] is not None) == turn_level]
            if not chosen:
                continue
            result = scorer.score(
                [r["context"] for r in chosen], [r["response"] for r in chosen] if turn_level else None,
                follow_ups=follow_ups, positive_follow_ups=positive_follow_ups, aggregation=aggregation, progress=False,
            )
            for row, record in zip(chosen, scored_records(chosen, result)):
                row.update(record)
            if result.signature not in signatures:
                signatures.append(result.signature)
        yield start + len(chunk), signatures


def score_rows(
    scorer: FullScorer, rows: list[dict[str, Any]], follow_ups: Sequence[str], aggregation: str,
    positive_follow_ups: Sequence[str] = (),
) -> str:
    """Score uploaded rows in place; returns the signatures (one line per level)."""
    signatures: list[str] = []
    for _, signatures in score_in_chunks(scorer, rows, follow_ups, aggregation, positive_follow_ups, len(rows)):
        pass
    return "\n".join(signatures)


#: Characters that make a spreadsheet read a cell as a formula (OWASP's CSV injection list).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _cell(value: Any) -> Any:
    """A CSV cell: text that a spreadsheet would run as a formula gets a leading ``'``."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def write_scored(rows: Sequence[dict[str, Any]], path: Path, as_csv: bool) -> Path:
    """The scored rows, full precision: JSON Lines, or CSV (context turns on separate lines, one
    column per follow-up, formula-like text made inert) for CSV uploads."""
    if not as_csv:
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        return path
    follow_ups = list(dict.fromkeys(f for r in rows for f in r.get("follow_up_log_likelihoods", {})))
    columns = list(dict.fromkeys(k for r in rows for k in r if k != "follow_up_log_likelihoods"))
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow([*columns, *(f"log-likelihood: {f}" for f in follow_ups)])
        for r in rows:
            values = ["\n".join(r[c]) if c == "context" else r.get(c, "") for c in columns]
            lls = r.get("follow_up_log_likelihoods", {})
            writer.writerow([*map(_cell, values), *(lls.get(f, "") for f in follow_ups)])
    return path


class TemporaryFiles:
    """The app's own folder for files it serves: each request gets a fresh sub-folder; folders
    older than ``max_age`` seconds are removed at the next request, and all at exit. (Gradio copies
    what it serves into its cache, which ``gr.Blocks(delete_cache=...)`` empties in turn.)"""

    def __init__(self, max_age: float = 600.0):
        import atexit
        import shutil

        self.root = Path(tempfile.mkdtemp(prefix="full-app-"))
        self.max_age = max_age
        atexit.register(shutil.rmtree, self.root, True)

    def new_folder(self) -> Path:
        self.clean()
        return Path(tempfile.mkdtemp(dir=self.root))

    def clean(self, now: float | None = None) -> None:
        import shutil
        import time

        now = time.time() if now is None else now
        for folder in self.root.iterdir():
            if now - folder.stat().st_mtime > self.max_age:
                shutil.rmtree(folder, ignore_errors=True)
