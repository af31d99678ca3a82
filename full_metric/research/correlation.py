"""Correlation of metric scores with human ratings: Spearman, Pearson, Kendall, bootstrap intervals."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np

from ..errors import UsageError
from ..unscored import REASON, is_unscored

METHODS = ("spearman", "pearson", "kendall")


@dataclass(frozen=True)
class Correlation:
    """One correlation coefficient with its p-value and a percentile bootstrap interval."""

    method: str
    value: float
    p_value: float
    ci_low: float
    ci_high: float
    n: int
    #: the pairs left out because the metric did not score the item (:mod:`full_metric.unscored`)
    not_scored: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _statistic(method: str, x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    from scipy import stats

    if method == "spearman":
        result = stats.spearmanr(x, y)
    elif method == "pearson":
        result = stats.pearsonr(x, y)
    elif method == "kendall":
        result = stats.kendalltau(x, y)
    else:
        raise UsageError(f"unknown correlation {method!r}; choose one of {METHODS}")
    return float(result.statistic), float(result.pvalue)


def correlate(
    metric: Sequence[float],
    human: Sequence[float],
    *,
    methods: Sequence[str] = METHODS,
    bootstrap: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, Correlation]:
    """Correlate metric scores with human ratings (paired, same order).

    The interval resamples the pairs ``bootstrap`` times with replacement (seeded) and takes the
    percentiles; resamples where a side is constant are left out.

    Raises:
        ValueError: different lengths, fewer than 3 pairs scored, or a non-finite value other than
            an item the metric did not score (NaN or ``None``: left out, counted in ``not_scored``).
    """
    x = np.asarray([math.nan if is_unscored(v) else v for v in metric], dtype=float)
    y = np.asarray(human, dtype=float)
    if x.shape != y.shape:
        raise UsageError(f"{len(x)} metric scores but {len(y)} human ratings")
    scored = ~np.isnan(x)
    x, y, not_scored = x[scored], y[scored], int((~scored).sum())
    if len(x) < 3:
        raise UsageError(f"a correlation needs at least 3 pairs, got {len(x)}"
                         + (f" ({not_scored} left out, not scored: {REASON})" if not_scored else ""))
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise UsageError("metric scores and human ratings must be finite numbers")
    rng = np.random.default_rng(seed)
    samples = rng.integers(0, len(x), size=(bootstrap, len(x)))
    out = {}
    for method in methods:
        value, p_value = _statistic(method, x, y)
        boot = []
        for index in samples:
            bx, by = x[index], y[index]
            if bx.min() == bx.max() or by.min() == by.max():
                continue
            boot.append(_statistic(method, bx, by)[0])
        tail = (1 - confidence) / 2 * 100
        low, high = (np.percentile(boot, [tail, 100 - tail]) if boot else (math.nan, math.nan))
        out[method] = Correlation(method, value, p_value, float(low), float(high), len(x), not_scored)
    return out
