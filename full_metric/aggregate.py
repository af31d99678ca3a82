"""Per-follow-up log-likelihoods to one score per dialog. Every aggregation: higher is better."""

from __future__ import annotations

import math
from typing import Sequence

from .errors import UsageError

#: ``sum``: the paper's equation (1), -sum_i log p(f_i | dialog). The follow-ups are negative
#: ("Not really relevant here."), so the sign is turned: likely follow-ups give a low score.
#: ``mean``: -mean_i (log p(f_i | dialog) / |f_i|), the mean per-token log-likelihood, turned.
#: ``perplexity``: mean_i exp(-log p(f_i | dialog) / |f_i|), what the authors' package returns.
#: ``balanced``: mean_j log p(p_j | dialog) - mean_i log p(f_i | dialog) over the positive
#: follow-ups p_j and the negative ones f_i: praise and complaints weigh the same however many of
#: each there are (with negative follow-ups only, the same ranking as ``sum``).
#: Positive follow-ups ("That's interesting!"), when given, enter ``sum`` and ``mean`` with the
#: opposite sign: likely praise raises the score. ``perplexity`` takes none.
AGGREGATIONS = ("sum", "mean", "perplexity", "balanced")


def check_aggregation(aggregation: str) -> str:
    """Return ``aggregation`` if known, else raise ``ValueError``."""
    if aggregation not in AGGREGATIONS:
        raise UsageError(f"unknown aggregation {aggregation!r}; choose one of {AGGREGATIONS}")
    return aggregation


def aggregate(
    log_likelihoods: Sequence[float], token_counts: Sequence[int], aggregation: str, positive: int = 0
) -> float:
    """One dialog's score from its follow-ups' summed log-likelihoods and token counts; the last
    ``positive`` follow-ups are positive ones and count with the opposite sign."""
    split = len(log_likelihoods) - positive
    if aggregation == "sum":
        return math.fsum(log_likelihoods[split:]) - math.fsum(log_likelihoods[:split])
    per_token = [ll / n for ll, n in zip(log_likelihoods, token_counts)]
    if aggregation == "mean":
        return (math.fsum(per_token[split:]) - math.fsum(per_token[:split])) / len(per_token)
    if aggregation == "balanced":
        praise = math.fsum(log_likelihoods[split:]) / positive if positive else 0.0
        return praise - math.fsum(log_likelihoods[:split]) / split if split else praise
    if positive:
        raise UsageError(f"the {aggregation!r} aggregation takes no positive follow-ups; use 'sum', 'mean' or 'balanced'")
    if aggregation == "perplexity":
        return math.fsum(math.exp(-x) for x in per_token) / len(per_token)
    raise UsageError(f"unknown aggregation {aggregation!r}; choose one of {AGGREGATIONS}")
