"""Comparing dialog systems by their per-example FULL scores: intervals, paired tests, rankings.

No model work happens here: the tests resample the cached per-example scores (sacrebleu's
``--paired-bs`` and ``--paired-ar``, not evaluate's evaluator, which would call the model once per
resample). Written with numpy rather than ``scipy.stats`` because scipy has neither sacrebleu's
p-value convention nor resampling shared by several systems, nor a Holm correction;
``tests/unit/test_comparison.py`` checks the results against ``scipy.stats.bootstrap`` and
``scipy.stats.permutation_test`` where they compute the same thing.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Hashable, Mapping, Sequence

import numpy as np

from .errors import UsageError
from .unscored import REASON, is_unscored

METHODS = ("bootstrap", "randomization")
#: sacrebleu's defaults: 1,000 bootstrap resamples, 10,000 randomization trials, seed 12345.
DEFAULT_RESAMPLES = {"bootstrap": 1000, "randomization": 10000}
DEFAULT_SEED = 12345
#: resamples behind the intervals when the p-values come from approximate randomization
INTERVAL_RESAMPLES = 1000


class PairingError(UsageError):
    """Two systems did not answer the same contexts; ``system`` and ``index`` name the first item
    that does not pair (``index`` into that system's items)."""

    def __init__(self, message: str, system: str, index: int):
        super().__init__(message)
        self.system, self.index = system, index


@dataclass(frozen=True)
class SystemScore:
    """One system's mean with its interval and, but for the baseline, its difference from the
    baseline with its interval and p-values (uncorrected and Holm-corrected)."""

    system: str
    n: int
    mean: float
    ci_low: float
    ci_high: float
    rank: int
    delta: float | None = None
    delta_ci_low: float | None = None
    delta_ci_high: float | None = None
    p_value: float | None = None
    p_value_holm: float | None = None


@dataclass(frozen=True)
class Comparison:
    """Systems compared with a baseline; ``systems`` in the order given, ``rank`` 1 the highest mean."""

    systems: tuple[SystemScore, ...]
    baseline: str
    method: str
    resamples: int
    seed: int
    paired: bool
    confidence: float = 0.95
    alpha: float = 0.05
    #: each system's items not scored (:mod:`full_metric.unscored`), by the names the caller gave them
    #: (``item_names``; else their 0-based positions); paired, every pair with one of them is left out
    left_out: dict[str, list[Any]] = field(default_factory=dict)

    def significant(self, system: SystemScore) -> bool:
        """Whether ``system`` differs from the baseline at ``alpha`` after the Holm correction."""
        return system.p_value_holm is not None and system.p_value_holm < self.alpha

    def ranking(self) -> list[SystemScore]:
        return sorted(self.systems, key=lambda s: s.rank)

    def to_dict(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline, "method": self.method, "resamples": self.resamples, "seed": self.seed,
            "paired": self.paired, "confidence": self.confidence, "alpha": self.alpha,
            "systems": [{**asdict(s), "significant": self.significant(s)} for s in self.systems],
            "left_out": self.left_out, "left_out_reason": REASON,
        }

    def table(self) -> str:
        """A plain-text table (sacrebleu's layout) with a footer saying what the test means."""
        pct = f"{self.confidence:.0%}"
        head = f"{'system':28} {'n':>5} {'mean':>9} {pct + ' CI':>20} {'delta':>9} {pct + ' CI (delta)':>20} {'p':>8} {'p (Holm)':>9} rank"
        lines = [head, "-" * len(head)]
        for s in self.systems:
            ci = f"[{s.ci_low:.3f}, {s.ci_high:.3f}]"
            if s.system == self.baseline:
                rest = f"{'(baseline)':>9} {'':>20} {'':>8} {'':>9}"
            else:
                dci = f"[{s.delta_ci_low:.3f}, {s.delta_ci_high:.3f}]"
                mark = "*" if self.significant(s) else " "
                rest = f"{s.delta:>+9.3f} {dci:>20} {s.p_value:>8.4f} {s.p_value_holm:>8.4f}{mark}"
            lines.append(f"{s.system[:28]:28} {s.n:>5} {s.mean:>9.3f} {ci:>20} {rest} {s.rank:>4}")
        test = {"bootstrap": f"paired bootstrap resampling ({self.resamples} resamples)",
                "randomization": f"approximate randomization ({self.resamples} trials)"}[self.method]
        if not self.paired:
            test = test.replace("paired ", "") + ", UNPAIRED: the systems did not answer the same contexts"
        lines += [
            "",
            f"p: two-sided {test}, seed {self.seed}, against the baseline {self.baseline!r}; "
            f"intervals: {pct} percentile bootstrap; * p < {self.alpha} after Holm's correction for "
            f"{len(self.systems) - 1} comparison(s).",
            "A significant difference means the systems' FULL scores differ beyond what resampling these items "
            "explains; it does not say that people would prefer the system with the higher score.",
        ]
        if self.left_out:
            unit = "pairs where either side is" if self.paired else "items"
            lines.append(f"Left out, {unit} not scored ({REASON}): "
                         + "; ".join(f"{name!r}: {', '.join(map(str, items))}" for name, items in self.left_out.items())
                         + ".")
        return "\n".join(lines)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (same order as given): the i-th smallest times (m - i + 1),
    made non-decreasing, capped at 1."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [0.0] * len(p_values)
    running = 0.0
    for step, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - step) * p_values[i]))
        adjusted[i] = running
    return adjusted


def _p_value(extreme: np.ndarray) -> float:
    """sacrebleu's p = (c + 1) / (N + 1), ``extreme`` a boolean per resample or trial."""
    return (int(extreme.sum()) + 1) / (len(extreme) + 1)


def _percentiles(values: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def _as_scores(name: str, values: Any) -> np.ndarray:
    scores = getattr(values, "scores", values)  # a FullResult or a sequence of numbers
    values = list(scores)
    bad = next((i for i, v in enumerate(values)
                if isinstance(v, bool) or not (v is None or isinstance(v, (int, float, np.number)))), None)
    if bad is not None:
        raise UsageError(f"system {name!r}: item {bad} is not a number ({values[bad]!r})")
    array = np.asarray([np.nan if is_unscored(v) else v for v in values], dtype=float)
    if array.ndim != 1 or len(array) == 0:
        raise UsageError(f"system {name!r}: no scores")
    bad = np.flatnonzero(np.isinf(array))  # NaN / None: not scored, left out by compare_systems
    if len(bad):
        raise UsageError(f"system {name!r}: item {bad[0]} is not a finite number ({array[bad[0]]})")
    return array


def pairing_keys(records: Sequence[Mapping[str, Any]]) -> list[tuple[Hashable, ...]]:
    """What pairs two systems' records (:func:`pair_items`): the context's turns and whether the record is
    dialog level (no response). The one key of the command line's ``compare`` and the app's summary."""
    return [(tuple(r["context"]), r.get("response") is None) for r in records]


def _checked_request(scores: Mapping[str, Any], baseline: str | None, method: str, resamples: int | None,
                     confidence: float) -> tuple[list[str], str, int]:
    """The systems' names, the baseline and the resamples of a comparison, refused when they cannot be."""
    if len(scores) < 2:
        raise UsageError(f"a comparison needs at least two systems, got {len(scores)}")
    if method not in METHODS:
        raise UsageError(f"unknown method {method!r}; choose one of {METHODS}")
    names = [str(n) for n in scores]
    if len(set(names)) != len(names):
        raise UsageError(f"system names must differ: {names}")
    baseline = names[0] if baseline is None else baseline
    if baseline not in names:
        raise UsageError(f"baseline {baseline!r} is not one of the systems {names}")
    resamples = DEFAULT_RESAMPLES[method] if resamples is None else resamples
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise UsageError(f"resamples must be a positive integer, got {resamples!r}")
    if not 0 < confidence < 1:
        raise UsageError(f"confidence must lie between 0 and 1, got {confidence}")
    return names, baseline, resamples


def compare_systems(
    scores: Mapping[str, Any],
    *,
    baseline: str | None = None,
    method: str = "bootstrap",
    resamples: int | None = None,
    seed: int = DEFAULT_SEED,
    paired: bool = True,
    confidence: float = 0.95,
    alpha: float = 0.05,
    item_names: Mapping[str, Sequence[Any]] | None = None,
) -> Comparison:
    """Compare systems by their per-example scores (``FullResult`` s or lists of numbers).

    Items not scored (NaN or ``None``: :mod:`full_metric.unscored`) are left out: paired, every pair
    where either side is not scored; unpaired, each system's own. The comparison lists them
    (:attr:`Comparison.left_out`) by ``item_names`` (per system, one name per item given: the
    caller's line numbers) or their 0-based positions.

    Paired (the default): every system scored the same items in the same order; the bootstrap
    resamples item indices shared by all systems. Unpaired: each system is resampled on its own and
    the randomization test shuffles the pooled scores of the two systems compared. The p-value of
    each system against ``baseline`` (default: the first system) is two-sided, as sacrebleu computes
    it: bootstrap, the share of resampled mean differences at least as far from the observed one as
    the observed one is from zero; randomization, the share of trials (each pair swapped with
    probability 1/2, or the pooled scores shuffled) whose difference is at least as large as the
    observed one in absolute value; p = (c + 1) / (N + 1). Holm's correction covers the comparisons
    with the baseline. The intervals are percentile bootstrap intervals (``resamples`` of them with
    the bootstrap, :data:`INTERVAL_RESAMPLES` with randomization).

    Raises:
        ValueError: fewer than two systems, an unknown baseline or method, paired systems of
            different lengths, an infinite score or one that is not a number, a system with no item
            scored (paired: no pair with both sides scored).
    """
    names, baseline, resamples = _checked_request(scores, baseline, method, resamples, confidence)
    arrays = {n: _as_scores(n, v) for n, v in zip(names, scores.values())}
    if paired:
        lengths = {n: len(a) for n, a in arrays.items()}
        if len(set(lengths.values())) != 1:
            raise UsageError(f"paired systems need the same number of items, got {lengths}; compare them unpaired")
    arrays, left_out = _scored_items(arrays, paired, item_names)
    rng = np.random.default_rng(seed)
    boots = _bootstrap_means(arrays, resamples if method == "bootstrap" else INTERVAL_RESAMPLES, paired, rng)
    means = {n: float(a.mean()) for n, a in arrays.items()}
    order = sorted(names, key=lambda n: -means[n])
    base = arrays[baseline]
    tests: dict[str, dict[str, float]] = {}
    for name in names:
        if name == baseline:
            continue
        delta = means[name] - means[baseline]
        resampled = boots[name] - boots[baseline]
        if method == "bootstrap":
            p = _p_value(np.abs(resampled - delta) >= abs(delta))
        else:
            p = _p_value(_randomized(arrays[name], base, resamples, paired, rng) >= abs(delta))
        low, high = _percentiles(resampled, confidence)
        tests[name] = {"delta": delta, "delta_ci_low": low, "delta_ci_high": high, "p_value": p}
    for name, adjusted in zip(tests, holm([t["p_value"] for t in tests.values()])):
        tests[name]["p_value_holm"] = adjusted
    systems = []
    for name in names:
        low, high = _percentiles(boots[name], confidence)
        systems.append(SystemScore(name, len(arrays[name]), means[name], low, high, order.index(name) + 1,
                                   **tests.get(name, {})))
    return Comparison(tuple(systems), baseline, method, resamples, seed, paired, confidence, alpha, left_out)


def _scored_items(arrays: dict[str, np.ndarray], paired: bool, item_names: Mapping[str, Sequence[Any]] | None
                  ) -> tuple[dict[str, np.ndarray], dict[str, list[Any]]]:
    """The scores with the items not scored left out (paired: every pair with one), and each system's
    items not scored, by name; refused when a system has nothing left."""
    names = {n: list(item_names[n]) if item_names and n in item_names else list(range(len(a)))
             for n, a in arrays.items()}
    unscored = {n: np.isnan(a) for n, a in arrays.items()}
    left_out = {n: [names[n][i] for i in np.flatnonzero(u)] for n, u in unscored.items() if u.any()}
    if paired:
        keep = ~np.logical_or.reduce(list(unscored.values()))
        kept = {n: a[keep] for n, a in arrays.items()}
    else:
        kept = {n: a[~unscored[n]] for n, a in arrays.items()}
    empty = next((n for n, u in unscored.items() if u.all()), None)
    if empty is not None:
        raise UsageError(f"system {empty!r}: no item was scored ({REASON})")
    if not all(len(a) for a in kept.values()):
        raise UsageError(f"no pair has both sides scored ({REASON})")
    return kept, left_out


def mean_interval(
    values: Sequence[float], *, resamples: int = DEFAULT_RESAMPLES["bootstrap"], seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
) -> tuple[float, float]:
    """One group's mean with no comparison: its percentile bootstrap interval, over the scored items
    (NaN, NaN when none was scored)."""
    scores = _as_scores("x", values)
    scores = scores[~np.isnan(scores)]
    if not len(scores):
        return math.nan, math.nan
    boots = _bootstrap_means({"x": scores}, resamples, True, np.random.default_rng(seed))
    return _percentiles(boots["x"], confidence)


def clustered_mean_interval(
    values: Sequence[float], clusters: Sequence[Any], *, resamples: int = DEFAULT_RESAMPLES["bootstrap"],
    seed: int = DEFAULT_SEED, confidence: float = 0.95,
) -> tuple[float, float]:
    """The mean of ``values`` (one per item) with a percentile bootstrap interval that resamples
    clusters (for example the contexts several answers share) and keeps all of a drawn cluster's
    items: items of one cluster are not independent draws. One item per cluster gives
    :func:`mean_interval`'s interval (the same draws)."""
    array = _as_scores("values", values)
    if len(clusters) != len(array):
        raise UsageError(f"{len(array)} values but {len(clusters)} cluster labels")
    names = list(dict.fromkeys(clusters))
    where = {c: k for k, c in enumerate(names)}
    sums, counts = np.zeros(len(names)), np.zeros(len(names))
    for value, cluster in zip(array, clusters):
        sums[where[cluster]] += value
        counts[where[cluster]] += 1
    index = np.random.default_rng(seed).integers(0, len(names), size=(resamples, len(names)))
    return _percentiles(sums[index].sum(axis=1) / counts[index].sum(axis=1), confidence)


def _bootstrap_means(
    arrays: Mapping[str, np.ndarray], resamples: int, paired: bool, rng: np.random.Generator
) -> dict[str, np.ndarray]:
    """Each system's mean on ``resamples`` resamples of its items (the same indices for all when paired)."""
    if paired:
        n = len(next(iter(arrays.values())))
        index = rng.integers(0, n, size=(resamples, n))
        return {name: a[index].mean(axis=1) for name, a in arrays.items()}
    return {name: a[rng.integers(0, len(a), size=(resamples, len(a)))].mean(axis=1) for name, a in arrays.items()}


def _randomized(a: np.ndarray, b: np.ndarray, trials: int, paired: bool, rng: np.random.Generator) -> np.ndarray:
    """|mean difference| of ``trials`` randomized relabellings: each pair swapped with probability 1/2
    (paired), or the pooled scores shuffled into groups of the same sizes (unpaired)."""
    if paired:
        signs = rng.integers(0, 2, size=(trials, len(a))) * 2 - 1
        return np.abs((signs * (a - b)).mean(axis=1))
    pooled = np.concatenate([a, b])
    out = np.empty(trials)
    for t in range(trials):
        shuffled = rng.permutation(pooled)
        out[t] = abs(shuffled[: len(a)].mean() - shuffled[len(a):].mean())
    return out


def pair_items(
    systems: Mapping[str, Sequence[Hashable]], baseline: str
) -> dict[str, list[int]]:
    """For each system, the indices of its items in the baseline's order, pairing items by their
    key (e.g. the context's turns): the k-th item with a key pairs with the baseline's k-th item
    with that key (so repeated contexts pair by position).

    Raises:
        PairingError: a system lacks one of the baseline's keys or has one the baseline lacks
            (naming the first such item).
    """
    def keyed(keys: Sequence[Hashable]) -> list[tuple[Hashable, int]]:
        seen: dict[Hashable, int] = {}
        out = []
        for key in keys:
            out.append((key, seen.get(key, 0)))
            seen[key] = seen.get(key, 0) + 1
        return out

    base = keyed(systems[baseline])
    where = {k: i for i, k in enumerate(base)}
    order: dict[str, list[int]] = {}
    for name, keys in systems.items():
        mine = keyed(keys)
        position = {k: i for i, k in enumerate(mine)}
        extra = next((i for i, k in enumerate(mine) if k not in where), None)
        if extra is not None:
            raise PairingError(f"system {name!r}, item {extra + 1}: its context is not among the baseline "
                               f"{baseline!r}'s (or occurs there fewer times)", name, extra)
        missing = next((i for i, k in enumerate(base) if k not in position), None)
        if missing is not None:
            raise PairingError(f"system {name!r} has no item for the baseline {baseline!r}'s item {missing + 1} "
                               f"(its context)", baseline, missing)
        order[name] = [position[k] for k in base]
    return order
