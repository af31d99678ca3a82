"""Two judges compared item by item: each agreement measure as judge minus base, with a PAIRED
bootstrap interval that resamples contexts (the same contexts drawn for both judges, all the
answers to a context drawn together).

Reads what ``full-metric agreement`` keeps in ``scores.json`` (each item's key and score, and the
generic replies' scores: :func:`full_metric.research.agreement.agreement`) beside the rated
items themselves (for their ratings, contexts and systems), checking that both judges scored the
same items in the same order. The bootstrap is written here because ``scipy.stats.bootstrap``
resamples observations, not clusters of them shared by two statistics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import UsageError
from .agreement import context_spearman, generic_wins, has_systems, has_within_context, item_key, rated_level
from ..files.rated_files import RatedItem

Measure = Callable[[np.ndarray, np.ndarray], float]


@dataclass(frozen=True)
class Level:
    """One level of one rated set as one judge scored it."""

    items: Sequence[RatedItem]
    aspect: str
    scores: np.ndarray
    human: np.ndarray  # indices of the human-written answers among the items
    reply_scores: np.ndarray  # (human answers x generic replies)
    replies: Sequence[str]  # the generic replies' texts, in reply_scores' column order


def level_of(kept: dict[str, Any], items: Sequence[RatedItem]) -> Level:
    """A level of ``scores.json`` joined with its rated items (refused unless they are the same items
    in the same order)."""
    if [item_key(i) for i in items] != kept["keys"]:
        raise UsageError(f"{kept['data_set']} ({kept['level']} level): the scored items are not the rated file's "
                         "items in its order; score both judges on the same file")
    replies = np.asarray(kept["reply_scores"], dtype=float)
    return Level(items, kept["aspect"], np.asarray(kept["scores"], dtype=float), np.asarray(kept["human"], dtype=int),
                 replies if replies.ndim == 2 else replies.reshape(len(kept["human"]), 0), kept["replies"])


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(x, y).statistic) if len(x) > 2 and np.ptp(x) > 0 and np.ptp(y) > 0 else float("nan")


def _pooled(level: Level) -> Callable[[np.ndarray], float]:
    ratings = np.asarray([i.ratings[level.aspect] for i in level.items])
    return lambda rows: _spearman(level.scores[rows], ratings[rows])


def _context_rho(level: Level, groups: list[np.ndarray]) -> np.ndarray:
    """Each context's own Spearman between scores and ratings (:func:`context_spearman`: NaN where it
    does not count)."""
    ratings = np.asarray([i.ratings[level.aspect] for i in level.items])
    return np.asarray([context_spearman(level.scores[g], ratings[g]) for g in groups])


def _within(rho: np.ndarray, shared: np.ndarray) -> Callable[[np.ndarray], float]:
    """The mean of the resampled contexts' own Spearman over the contexts that qualify for both
    judges (``shared``)."""
    def measure(picked: np.ndarray) -> float:
        kept = picked[shared[picked]]
        return float(rho[kept].mean()) if len(kept) else float("nan")

    return measure


def _systems(level: Level, groups: list[np.ndarray]) -> Callable[[np.ndarray], float]:
    """Spearman between the systems' mean scores and mean ratings over the resampled contexts."""
    names = sorted({i.system for i in level.items if i.system is not None})
    system = np.asarray([names.index(i.system) if i.system is not None else -1 for i in level.items])
    ratings = np.asarray([i.ratings[level.aspect] for i in level.items])

    def measure(picked: np.ndarray) -> float:
        rows = np.concatenate([groups[g] for g in picked])
        rows = rows[system[rows] >= 0]
        counts = np.bincount(system[rows], minlength=len(names))
        if (counts == 0).any():
            return float("nan")
        means = [np.bincount(system[rows], weights=v[rows], minlength=len(names)) / counts
                 for v in (level.scores, ratings)]
        return _spearman(*means)

    return measure


def _generic(level: Level, groups: list[np.ndarray]) -> Callable[[np.ndarray], float]:
    """The share of (human answer, generic reply) pairs where the reply scores higher."""
    answers = [level.items[int(k)].response for k in level.human]
    wins = generic_wins(level.reply_scores, level.scores[level.human], level.replies, answers).mean(axis=1)
    where = {int(k): n for n, k in enumerate(level.human)}
    per_context = [np.asarray([wins[where[int(k)]] for k in g if int(k) in where]) for g in groups]
    return lambda picked: float(np.concatenate([per_context[g] for g in picked]).mean())


def measures(level: Level, groups: list[np.ndarray], shared: np.ndarray | None) -> dict[str, tuple[Callable, bool]]:
    """The measures of one level, each a function of the resampled contexts (``True``: the function
    takes item rows rather than context indices); ``shared``: the contexts whose own Spearman both
    judges have (``None``: no within-context measure)."""
    found: dict[str, tuple[Callable, bool]] = {"Spearman, pooled": (_pooled(level), True)}
    if shared is not None:
        found["Spearman, within context"] = (_within(_context_rho(level, groups), shared), False)
    if has_systems(level.items):
        found["Spearman, over systems"] = (_systems(level, groups), False)
    if len(level.human):
        found["generic reply beats the human answer"] = (_generic(level, groups), False)
    return found


def contexts(items: Sequence[RatedItem]) -> list[np.ndarray]:
    """The item rows of each distinct context, in order of first appearance (at dialog level each
    dialog is its own context)."""
    groups: dict[tuple[str, ...], list[int]] = {}
    for k, item in enumerate(items):
        key = tuple(item.context) if item.level == "turn" else (str(k),)
        groups.setdefault(key, []).append(k)
    return [np.asarray(g) for g in groups.values()]


def paired_changes(base: Level, judge: Level, *, within_context: bool, resamples: int = 1000,
                   seed: int = 0) -> list[dict[str, Any]]:
    """Each measure of one level for ``base`` and ``judge`` (scored on the same items), and
    ``judge`` minus ``base`` with a 95% percentile interval from ``resamples`` paired draws of
    contexts."""
    if [item_key(i) for i in base.items] != [item_key(i) for i in judge.items]:
        raise UsageError("the two judges did not score the same items")
    groups = contexts(base.items)
    shared = (np.isfinite(_context_rho(base, groups)) & np.isfinite(_context_rho(judge, groups))
              if within_context else None)
    ours, theirs = measures(base, groups, shared), measures(judge, groups, shared)
    rng = np.random.default_rng(seed)
    draws = [rng.integers(0, len(groups), len(groups)) for _ in range(resamples)]
    rows = []
    for name, (of_base, by_rows) in ours.items():
        of_judge = theirs[name][0]
        everything = np.arange(len(base.items)) if by_rows else np.arange(len(groups))
        value = of_judge(everything) - of_base(everything)
        changes = []
        for picked in draws:
            at = np.concatenate([groups[g] for g in picked]) if by_rows else picked
            changes.append(of_judge(at) - of_base(at))
        changes = np.asarray(changes)
        changes = changes[np.isfinite(changes)]
        low, high = (np.percentile(changes, [2.5, 97.5]) if len(changes) else (np.nan, np.nan))
        rows.append({"measure": name, "base": of_base(everything), "judge": of_judge(everything), "change": value,
                     "ci_low": float(low), "ci_high": float(high), "contexts": len(groups)})
    return rows


def read_levels(kept: dict[str, Any], data: dict[str, str]) -> dict[tuple[str, str], tuple[Level, bool]]:
    """The levels of one judge's ``scores.json`` (preset ``paper`` or its only preset), each joined
    with its rated items (``data``: data set name -> rated file) and whether it has a
    within-context measure (USR turn level)."""
    from ..files.rated_files import read_rated

    found, files = {}, {}
    for level in kept["levels"]:
        name = level["data_set"]
        if name not in data:
            raise UsageError(f"no rated file for data set {name!r} (given: {sorted(data)})")
        if name not in files:
            files[name] = read_rated(data[name], score_field="human")
        items = rated_level(files[name], level["level"])
        found[(name, level["level"])] = (level_of(level, items), has_within_context(level["level"],
                                                                                    files[name].fmt == "fed"))
    return found


def compare_judges(base: dict[str, Any], judge: dict[str, Any], data: dict[str, str], *, resamples: int = 1000,
                   seed: int = 0) -> list[dict[str, Any]]:
    """:func:`paired_changes` for every level both ``scores.json`` contents hold."""
    ours, theirs = read_levels(base, data), read_levels(judge, data)
    rows = []
    for key, (level, within) in ours.items():
        if key in theirs:
            rows += [{"data_set": key[0], "level": key[1], **row}
                     for row in paired_changes(level, theirs[key][0], within_context=within, resamples=resamples,
                                               seed=seed)]
    return rows
