"""Log-likelihood tables: every candidate follow-up's log-likelihood on every item of a rated set.

A table is what one scoring pass of a model over a rated data set gives; the study
(:mod:`full_metric.research.study`) computes every configuration (follow-up subset, signs, aggregation,
model average) from tables, without model work. This module holds the table type and its JSON
file; :func:`score_table` makes one with a scorer.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

from .human_eval import LEVELS, score_items
from ..files.rated_files import RatedData
from ..errors import UsageError
from ..scorer import FullScorer


@dataclass
class TableItem:
    """One rated item's numbers: level, human ratings, length in words (of the response at turn
    level, of the whole dialog at dialog level), follow-up log-likelihoods."""

    level: str
    ratings: dict[str, float]
    words: int
    log_likelihoods: list[float]
    dropped_tokens: int = 0


@dataclass
class LogLikTable:
    """Per-follow-up log-likelihoods of one model, rendering and context window on one rated set."""

    data_set: str
    model: str
    rendering: str
    max_turns: int
    context_budget: int | None
    follow_ups: list[str]
    token_counts: list[int]
    signature: str
    items: list[TableItem]
    command: str = ""  # the command line that made the table

    def level(self, level: str) -> list[TableItem]:
        return [i for i in self.items if i.level == level]


def score_table(
    scorer: FullScorer, data: RatedData, data_set: str, follow_ups: Sequence[str], model_name: str | None = None,
    command: str = "",
) -> LogLikTable:
    """Score every item of ``data`` on ``follow_ups`` (both levels) and keep the numbers."""
    items: list[TableItem] = []
    signature, counts = "", []
    for level in LEVELS:
        rated = data.level(level)
        result = score_items(scorer, rated, tuple(follow_ups))
        if result is None:
            continue
        signature = signature or result.signature
        counts = list(result.follow_up_token_counts)
        for item, values, dropped in zip(rated, result.follow_up_log_likelihoods, result.dropped_tokens):
            text = [item.response] if item.response is not None else item.context
            words = sum(len(t.split()) for t in text)
            items.append(TableItem(level, dict(item.ratings), words, list(values), dropped))
    return LogLikTable(
        data_set=data_set, model=model_name or scorer.loaded.name, rendering=scorer.rendering,
        max_turns=scorer.max_turns, context_budget=scorer.context_budget, follow_ups=list(follow_ups),
        token_counts=counts, signature=signature, items=items, command=command,
    )


def write_table(path: str | Path, table: LogLikTable) -> None:
    """Write a table as JSON (numbers and settings only, no dialog text)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(asdict(table)), encoding="utf-8")


def read_table(path: str | Path) -> LogLikTable:
    """Read a table written by :func:`write_table`; a malformed file raises ``ValueError`` naming it."""
    try:
        raw: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
        items = [TableItem(**item) for item in raw.pop("items")]
        table = LogLikTable(**raw, items=items)
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as error:
        raise UsageError(f"{path}: not a log-likelihood table ({error})") from None
    width = len(table.follow_ups)
    for k, item in enumerate(table.items):
        if len(item.log_likelihoods) != width:
            raise UsageError(f"{path}: item {k} has {len(item.log_likelihoods)} log-likelihoods, expected {width}")
    return table
