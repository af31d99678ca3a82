"""Per-follow-up log-likelihoods to one score per dialog. Every aggregation: higher is better."""

from __future__ import annotations

from typing import Sequence

import torch

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


def check_signs(positive: int, aggregation: str) -> None:
    """The one rule of signs: positive follow-ups need an aggregation that can turn their sign
    (``perplexity`` cannot). Settings, the scorer and the training objective all ask here."""
    if positive and aggregation == "perplexity":
        raise UsageError(f"the {aggregation!r} aggregation takes no positive follow-ups; use 'sum', 'mean' or 'balanced'")


def aggregate_tensor(log_likelihoods: torch.Tensor, token_counts: Sequence[int], aggregation: str,
                     positive: int = 0) -> torch.Tensor:
    """Each dialog's score from a (dialogs x follow-ups) tensor of summed log-likelihoods and the
    follow-ups' token counts, differentiably; the last ``positive`` follow-ups are positive ones and
    count with the opposite sign. The one aggregation: :func:`aggregate` and the training objective
    call it."""
    check_aggregation(aggregation)
    check_signs(positive, aggregation)
    split = log_likelihoods.shape[1] - positive
    neg, pos = log_likelihoods[:, :split], log_likelihoods[:, split:]
    if aggregation == "sum":
        return pos.sum(1) - neg.sum(1)
    if aggregation == "balanced":
        praise = pos.mean(1) if positive else torch.zeros_like(log_likelihoods[:, 0])
        return praise - neg.mean(1) if split else praise
    per_token = log_likelihoods / torch.tensor(list(token_counts), dtype=log_likelihoods.dtype,
                                               device=log_likelihoods.device)
    if aggregation == "mean":
        return (per_token[:, split:].sum(1) - per_token[:, :split].sum(1)) / log_likelihoods.shape[1]
    return torch.exp(-per_token).mean(1)  # perplexity


def aggregate(
    log_likelihoods: Sequence[float], token_counts: Sequence[int], aggregation: str, positive: int = 0
) -> float:
    """One dialog's score (:func:`aggregate_tensor` on one row, in float64)."""
    row = torch.tensor([list(log_likelihoods)], dtype=torch.float64)
    return float(aggregate_tensor(row, token_counts, aggregation, positive)[0])
