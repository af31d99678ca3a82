"""Scoring corpora of any size (``full-metric score``): streamed, resumable, sharded.

The input (JSON Lines, a JSON array, CSV, Parquet or a Hub dataset) is read twice as a stream:
once to check every row (errors name the row, before any model work) and to note each row's length, then in
chunks for scoring. Each rank of ``torch.distributed`` (one process, or ``torchrun`` /
``accelerate launch`` on one or several machines) scores its share, balanced by length, and
appends each scored chunk to its own part file in ``OUTPUT.parts/`` (flushed to disk: a killed run
loses at most the chunk in flight). When every rank is done, rank 0 writes the output in input
order (JSON Lines or Parquet, by extension) and removes the parts. ``--resume`` keeps the parts
of a killed run whose input and settings match, and scores only what they lack.

Every source is read by the one reader, :func:`full_metric.files.dialog_files.open_rows`: JSON Lines
and CSV line by line, so that an error names its line (the ``datasets`` readers report a malformed
line without its number); Parquet files and Hub datasets with ``datasets`` in streaming mode.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import shutil
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from tqdm.auto import tqdm

from .dialog_files import (
    HUB_PREFIX, SOURCE_SUFFIXES, DialogFileError, OneLevel, check_input_file, check_row, open_rows,
    refuse_overwriting_input,
    scored_records,
)
from ..errors import install_hint
from ..result import signature_differences
from ..unscored import scored_mean, unscored_items
from .distributed import Rank, balanced_shares, barrier, decided_by_rank_zero, setup

logger = logging.getLogger(__name__)

DEFAULT_CHUNK_SIZE = 256
RUN_FILE = "run.json"
OUTPUT_SUFFIXES = (".jsonl", ".parquet")


@dataclass(frozen=True)
class Source:
    """Where the dialogs come from: a local file, or a Hub dataset (``dataset``, ``split``,
    ``config``); which columns hold the context (a list of turns, or a string with a turn per line)
    and the response (missing or empty: dialog level)."""

    path: str | None = None
    dataset: str | None = None
    split: str = "train"
    config: str | None = None
    context_column: str = "context"
    response_column: str = "response"

    def __post_init__(self) -> None:
        if (self.path is None) == (self.dataset is None):
            raise DialogFileError("give an input file or --dataset NAME (one of them)")
        if self.path is not None:
            check_input_file(self.path, SOURCE_SUFFIXES)

    @property
    def name(self) -> str:
        return self.path if self.path is not None else f"{self.dataset}[{self.split}]"

    def dialogs(self) -> Iterator[tuple[str, dict[str, Any], list[str], str | None]]:
        """(where, row, context turns, response or ``None``) for every row, streamed
        (:func:`~full_metric.files.dialog_files.open_rows`), each checked (an empty CSV cell is a
        missing value)."""
        source = self.path if self.path is not None else f"{HUB_PREFIX}{self.dataset}"
        for where, row, csv_row in open_rows(source, split=self.split, config=self.config,
                                             required=self.context_column):
            yield (where, row, *check_row(row, where, context_column=self.context_column,
                                          response_column=self.response_column, csv_row=csv_row))


@dataclass
class Survey:
    """What the checking pass learnt: the number of rows, each row's length (characters), the
    level, and a fingerprint of every (context, response)."""

    items: int
    lengths: array
    level: str
    fingerprint: str


def _fingerprint_update(digest: Any, context: list[str], response: str | None) -> None:
    digest.update(json.dumps([context, response], ensure_ascii=False).encode("utf-8") + b"\n")


def survey(source: Source) -> Survey:
    """Check every row of ``source`` (raising :class:`DialogFileError` naming the first bad one)
    and note its length; memory: one integer per row."""
    lengths, digest, one_level = array("q"), hashlib.sha256(), OneLevel()
    for where, _, context, response in source.dialogs():
        one_level.check(where, response)
        lengths.append(sum(map(len, context)) + len(response or ""))
        _fingerprint_update(digest, context, response)
    if one_level.level is None:
        raise DialogFileError(f"{source.name}: no rows")
    return Survey(len(lengths), lengths, one_level.level, digest.hexdigest())


# -- the parts of a run ---------------------------------------------------------------------
def _parts_folder(output: Path) -> Path:
    return output.with_name(output.name + ".parts")


def _repair(part: Path) -> None:
    """Cut a line torn by a kill off the end of a part file."""
    with open(part, "rb+") as handle:
        data = handle.read()
        keep = data.rfind(b"\n") + 1
        lines = data[:keep].splitlines()
        if lines:
            try:
                json.loads(lines[-1])
            except json.JSONDecodeError:
                keep -= len(lines[-1]) + 1
        if keep != len(data):
            logger.warning("%s: dropping a torn last line (%d bytes) left by a killed run", part, len(data) - keep)
            handle.truncate(keep)


def _output_matches(output: Path, source: Source, run: dict[str, Any]) -> bool:
    """Whether a finished output holds exactly this input, scored with these settings."""
    digest, signatures, count = hashlib.sha256(), set(), 0
    checker = Source(str(output), None, context_column=source.context_column,
                     response_column=source.response_column)
    for _, row, context, response in checker.dialogs():
        _fingerprint_update(digest, context, response)
        signatures.add(row.get("signature"))
        count += 1
    return count == run["items"] and digest.hexdigest() == run["fingerprint"] and signatures == {run["signature"]}


def _prepare(output: Path, source: Source, run: dict[str, Any], resume: bool) -> bytearray | None:
    """Rank 0, before any rank scores: start afresh, or check and keep a killed run's parts. Returns
    what is done (:func:`_done`, read before any rank writes, so every rank splits the same remaining
    rows), or ``None`` when a finished output already holds this run (``resume`` only)."""
    parts = _parts_folder(output)
    run_file = parts / RUN_FILE
    if not resume:
        if parts.exists():
            logger.info("removing the parts of an earlier run in %s (pass --resume to keep them)", parts)
            shutil.rmtree(parts)
    elif run_file.is_file():
        earlier = json.loads(run_file.read_text(encoding="utf-8"))
        for key, what in (("fingerprint", "input"), ("items", "input"), ("signature", "settings")):
            if earlier.get(key) != run[key]:
                differ = (signature_differences(earlier.get(key), run[key]) if key == "signature"
                          else f"{key} {earlier.get(key)!r}, this run's {run[key]!r}")
                raise DialogFileError(
                    f"--resume: {parts} belongs to another {what} ({differ}); nothing was changed: remove it, "
                    "or write to another output")
        for part in parts.glob("part-*.jsonl"):
            _repair(part)
        return _done(parts, run["items"])
    elif output.is_file():
        if _output_matches(output, source, run):
            logger.warning("--resume: %s is already complete for this input and these settings", output)
            return None
        raise DialogFileError(f"--resume: {output} holds another input or other settings (or is incomplete "
                              "without its .parts folder); nothing was changed: remove it, or write to another output")
    parts.mkdir(parents=True, exist_ok=True)
    run_file.write_text(json.dumps(run, indent=2), encoding="utf-8")
    return bytearray(run["items"])


def _done(parts: Path, items: int) -> bytearray:
    """A flag per row: already in a part file."""
    done = bytearray(items)
    for part in sorted(parts.glob("part-*.jsonl")):
        with open(part, encoding="utf-8") as handle:
            for line in handle:
                done[json.loads(line)["i"]] = 1
    return done


def _append(part: Path, lines: list[str]) -> None:
    with open(part, "a", encoding="utf-8") as handle:
        handle.write("".join(lines))
        handle.flush()
        os.fsync(handle.fileno())


def _merge(parts: Path, output: Path, items: int, chunk_size: int) -> tuple[float, list[int]]:
    """Write the output in input order from the part files (atomically); returns the mean score over the
    scored rows and the rows (0-based) not scored (:mod:`full_metric.unscored`)."""
    files = sorted(parts.glob("part-*.jsonl"))
    which, offsets = array("i", [-1]) * items, array("q", [0]) * items
    for f, part in enumerate(files):
        with open(part, "rb") as handle:
            offset = 0
            for line in handle:
                index = json.loads(line)["i"]
                which[index], offsets[index] = f, offset
                offset += len(line)
    missing = next((i for i in range(items) if which[i] < 0), None)
    if missing is not None:
        raise RuntimeError(f"row {missing + 1} was scored by no rank; rerun with --resume")
    handles = [open(part, "rb") for part in files]
    temporary = output.with_name(output.name + ".tmp")
    scores: list[Any] = []
    try:
        with _writer(temporary) as write:
            batch = []
            for i in range(items):
                handle = handles[which[i]]
                handle.seek(offsets[i])
                record = json.loads(handle.readline())["r"]
                scores.append(record["full"])
                batch.append(record)
                if len(batch) == chunk_size:
                    write(batch)
                    batch = []
            if batch:
                write(batch)
    finally:
        for handle in handles:
            handle.close()
    os.replace(temporary, output)
    shutil.rmtree(parts)
    return scored_mean(scores), unscored_items(scores)


class _writer:
    """A context manager giving ``write(records)`` for the output's format (by its extension)."""

    def __init__(self, path: Path):
        self.path, self.parquet = path, path.name.removesuffix(".tmp").lower().endswith(".parquet")

    def __enter__(self) -> Callable[[list[dict[str, Any]]], None]:
        if self.parquet:
            self.handle, self.schema = None, None
            return self._parquet
        self.handle = open(self.path, "w", encoding="utf-8")
        return lambda records: self.handle.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))

    def _parquet(self, records: list[dict[str, Any]]) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        if self.schema is None:  # the first chunk's columns, a score and the reason it is missing typed whatever it holds
            schema = pa.Table.from_pylist(records).schema
            fields = [pa.field(f.name, pa.float64() if f.name == "full" else pa.string() if f.name in ("unscored", "response")
                               and pa.types.is_null(f.type) else f.type) for f in schema]
            if "unscored" not in schema.names:
                fields.insert(schema.names.index("full") + 1, pa.field("unscored", pa.string()))
            self.schema = pa.schema(fields)
            self.handle = pq.ParquetWriter(self.path, self.schema)
        table = pa.Table.from_pylist(records, schema=self.schema)
        self.handle.write_table(table)

    def __exit__(self, *exc: Any) -> None:
        if self.handle is not None:
            self.handle.close()


# -- the run --------------------------------------------------------------------------------
def _check_output(source: Source, output: Path, chunk_size: int) -> None:
    """Refuse an output that would overwrite the input, has no known suffix or cannot be written here,
    and a chunk size that is not a positive integer."""
    refuse_overwriting_input([source.path], output)
    if output.suffix.lower() not in OUTPUT_SUFFIXES:
        raise DialogFileError(f"{output}: the output must end in {' or '.join(OUTPUT_SUFFIXES)}")
    if output.suffix.lower() == ".parquet" and importlib.util.find_spec("pyarrow") is None:
        raise DialogFileError(f"{output}: Parquet output needs pyarrow: {install_hint('evaluate', 'pyarrow')}")
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise DialogFileError(f"the chunk size must be a positive integer, got {chunk_size!r}")


def score_corpus(
    source: Source, output: str | Path, make_scorer: Callable[[], Any], *, resume: bool = False,
    chunk_size: int = DEFAULT_CHUNK_SIZE, progress: bool = True, rank: Rank | None = None,
) -> dict[str, Any]:
    """Score every row of ``source`` into ``output`` on this rank's share (see the module's text).

    ``make_scorer`` builds the :class:`~full_metric.scorer.FullScorer` (called once per rank, after
    the input has been checked). Returns ``{"items", "scored_here", "mean", "unscored", "signature"}``
    (``mean``, over the scored rows, and ``unscored``, the rows not scored counted from 1 in input order,
    on rank 0 only; else ``None`` and ``[]``).

    Raises:
        DialogFileError: a bad row (before any model work), a bad output name, or ``resume`` with
            an output that belongs to another input or other settings (nothing is changed).
    """
    output = Path(output)
    _check_output(source, output, chunk_size)
    rank = setup(rank)
    checked = survey(source)
    scorer = make_scorer()
    signature = scorer.signature(level=checked.level)
    run = {"fingerprint": checked.fingerprint, "items": checked.items, "signature": signature,
           "input": source.name if source.dataset else Path(source.name).name}
    parts = _parts_folder(output)
    # rank 0 checks the folder (and may refuse it) and reads what is done; every rank hears its decision,
    # and splits the same remaining rows, before anyone writes
    done = decided_by_rank_zero(lambda: _prepare(output, source, run, resume), DialogFileError)
    summary = {"items": checked.items, "scored_here": 0, "mean": None, "unscored": [], "signature": signature, "rank": rank.rank,
               "world_size": rank.world_size}
    if done is None:  # --resume found the output already complete
        return summary
    remaining = [i for i in range(checked.items) if not done[i]]
    del done
    share = balanced_shares([checked.lengths[i] for i in remaining], rank.world_size)[rank.rank]
    mine = bytearray(checked.items)
    for k in share:
        mine[remaining[k]] = 1
    count = len(share)
    del remaining, share
    logger.info("rank %d: %d of %d rows to score", rank.rank, count, checked.items)
    part = parts / f"part-{rank.rank:05d}.jsonl"
    turn_level = checked.level == "turn"
    chunk: list[tuple[int, dict[str, Any], list[str], str | None]] = []

    def flush() -> None:
        result = scorer.score([c for _, _, c, _ in chunk], [r for *_, r in chunk] if turn_level else None,
                              progress=False)
        # the context as the turns it was read as (a CSV cell, a string with a turn per line): what the app writes
        records = scored_records([{**row, source.context_column: context} for _, row, context, _ in chunk], result)
        lines = [json.dumps({"i": index, "r": record}, ensure_ascii=False, default=str) + "\n"
                 for (index, *_), record in zip(chunk, records)]
        _append(part, lines)
        bar.update(len(chunk))
        chunk.clear()

    with tqdm(total=count, disable=not progress, desc=f"FULL rank {rank.rank}" if rank.world_size > 1 else "FULL",
              unit="dialog", position=rank.local_rank) as bar:
        for index, (_, row, context, response) in enumerate(source.dialogs()):
            if mine[index]:
                chunk.append((index, row, context, response))
                if len(chunk) == chunk_size:
                    flush()
        if chunk:
            flush()
    barrier()
    mean, unscored = _merge(parts, output, checked.items, chunk_size) if rank.main else (None, [])
    barrier()
    return {**summary, "scored_here": count, "mean": mean, "unscored": [i + 1 for i in unscored]}
