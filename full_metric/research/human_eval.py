"""Checking FULL against human ratings: correlations per level and aspect, follow-up selection.

Used by the ``correlate`` and ``rank-follow-ups`` commands; knows no file formats (see
:mod:`full_metric.files.rated_files`) and draws nothing (see :mod:`full_metric.research.plots`).
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any, Sequence

from .correlation import METHODS, correlate
from ..errors import UsageError
from ..follow_ups import CANDIDATES
from ..files.rated_files import FED_ASPECT, RatedData, RatedItem
from ..result import FullResult
from ..scorer import FullScorer

LEVELS = ("turn", "dialog")


def score_items(
    scorer: FullScorer, items: Sequence[RatedItem], follow_ups: Any = None, progress: bool | None = None
) -> FullResult | None:
    """Score rated items of one level (``None`` when there are none)."""
    if not items:
        return None
    level = items[0].level
    contexts = [i.context for i in items]
    responses = [i.response for i in items] if level == "turn" else None
    return scorer.score(contexts, responses, follow_ups=follow_ups, progress=progress)


def _row(level: str, aspect: str, signal: str, metric: list[float], human: list[float], **options: Any) -> dict:
    row: dict[str, Any] = {"level": level, "aspect": aspect, "signal": signal}
    for method, c in correlate(metric, human, **options).items():
        row.update({"n": c.n, "not_scored": c.not_scored})
        row.update({method: c.value, f"{method}_p": c.p_value, f"{method}_low": c.ci_low, f"{method}_high": c.ci_high})
    return row


def correlation_rows(
    data: RatedData,
    results: dict[str, FullResult | None],
    *,
    aspects: Sequence[str] | None = None,
    fine_grained: bool = False,
    bootstrap: int = 1000,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """One row per level and aspect: FULL's score (and, if asked, the aspect's category score)
    correlated with the items that carry a rating for that aspect."""
    rows = []
    for level in LEVELS:
        items, result = data.level(level), results.get(level)
        if not items or result is None:
            continue
        names = aspects or sorted({a for i in items for a in i.ratings}, key=lambda a: (a != FED_ASPECT, a))
        for aspect in names:
            rated = [k for k, item in enumerate(items) if aspect in item.ratings]
            if len(rated) < 3:
                continue
            human = [items[k].ratings[aspect] for k in rated]
            options = {"bootstrap": bootstrap, "seed": seed}
            rows.append(_row(level, aspect, "full", [result.scores[k] for k in rated], human, **options))
            category = aspect.lower()
            if fine_grained and category in result.category_scores:
                values = result.category_scores[category]
                rows.append(_row(level, aspect, f"category:{category}", [values[k] for k in rated], human, **options))
    return rows


def rank_follow_ups(
    data: RatedData,
    results: dict[str, FullResult | None],
    aspect: str = FED_ASPECT,
    only: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """Each follow-up's Spearman correlation of -log-likelihood with the aspect, per level, and
    the paper's selection order: the sum of its turn-level and dialog-level ranks (best first).
    ``only`` restricts the ranking to those of the scored follow-ups."""
    follow_ups: tuple[str, ...] = next(r.follow_ups for r in results.values() if r is not None)
    table = {f: {"follow_up": f} for f in follow_ups if only is None or f in only}
    meta = {c.text: c for c in CANDIDATES}
    for level in LEVELS:
        items, result = data.level(level), results.get(level)
        if not items or result is None:
            continue
        rated = [k for k, item in enumerate(items) if aspect in item.ratings]
        human = [items[k].ratings[aspect] for k in rated]
        for j, f in enumerate(follow_ups):
            if f not in table:
                continue
            metric = [-result.follow_up_log_likelihoods[k][j] for k in rated]
            table[f][level] = correlate(metric, human, methods=("spearman",), bootstrap=0)["spearman"].value
    levels = [lvl for lvl in LEVELS if all(lvl in row for row in table.values())]
    for level in levels:
        ordered = sorted(table.values(), key=lambda row: -row[level])
        for position, row in enumerate(ordered, start=1):
            row[f"{level}_rank"] = position
    for row in table.values():
        row["combined_rank"] = sum(row[f"{lvl}_rank"] for lvl in levels)
        if row["follow_up"] in meta:
            row["category"], row["polarity"] = meta[row["follow_up"]].category, meta[row["follow_up"]].polarity
    return sorted(table.values(), key=lambda row: (row["combined_rank"], row["follow_up"]))


def split_holdout(data: RatedData, fraction: float, seed: int = 0) -> tuple[RatedData, RatedData]:
    """Split each level's items at random into a selection part and a held-out report part."""
    if not 0 < fraction < 1:
        raise UsageError(f"the held-out fraction must be between 0 and 1, got {fraction}")
    rng = random.Random(seed)
    select, report = [], []
    for level in LEVELS:
        items = data.level(level)
        order = list(range(len(items)))
        rng.shuffle(order)
        cut = round(len(items) * (1 - fraction))
        select += [items[k] for k in sorted(order[:cut])]
        report += [items[k] for k in sorted(order[cut:])]
    return replace(data, items=select), replace(data, items=report)


def subset_result(result: FullResult, follow_ups: Sequence[str], aggregation: str) -> list[float]:
    """Scores of a follow-up subset, from a result that scored a superset (no model work)."""
    from ..aggregate import aggregate

    index = [result.follow_ups.index(f) for f in follow_ups]
    counts = [result.follow_up_token_counts[j] for j in index]
    return [aggregate([row[j] for j in index], counts, aggregation) for row in result.follow_up_log_likelihoods]


__all__ = ["METHODS", "correlation_rows", "rank_follow_ups", "score_items", "split_holdout", "subset_result"]
