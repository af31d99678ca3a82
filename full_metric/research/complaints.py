"""The ``complaints`` objective of judge adaptation: teach the judge FULL's own question (is a
complaint likely after this reply?) from unlabeled dialogs, without any human rating.

From each dialog, a pair: the real next turn and a corrupted reply to the same context (a turn of
another conversation, the context's last turn echoed, a far turn of the same conversation, the
real turn truncated, a short generic reply from :data:`TRAINING_GENERIC_REPLIES`, a bare
acknowledgement from :data:`TRAINING_ACKNOWLEDGEMENTS`, or a word of the real turn repeated; the
lists are disjoint from every list of answers measured). The loss is pairwise on FULL's own score for
that judge, preset and rendering, ``softplus(margin - (score(real) - score(corrupted)))``, plus
``lm_weight`` times the language-modelling loss of the real dialog (the ``dialogs`` objective's
example) as a regulariser. The score is the scorer's own, with gradients
(:meth:`FullScorer.differentiable_scores`: its engine, renderer, truncation, ``max_turns``,
speaker stripping, follow-ups and aggregation), all pairs of a batch in one call.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from ..aggregate import check_aggregation, check_signs
from ..errors import UsageError
from ..scorer import FullScorer
from .pairs import (
    CORRUPTIONS, DEFAULT_MIX, TRAINING_ACKNOWLEDGEMENTS, TRAINING_GENERIC_REPLIES, Pair, check_mix,
    make_pairs, normalised,
)

__all__ = [  # the objective, and the pairs' names (research/pairs.py), read through this module too
    "CORRUPTIONS", "DEFAULT_MIX", "TRAINING_ACKNOWLEDGEMENTS", "TRAINING_GENERIC_REPLIES", "Pair", "check_mix",
    "make_pairs", "normalised", "check_trainable", "dialog_scores", "pair_margins", "pair_accuracy", "pair_loss",
]

def check_trainable(aggregation: str, positive: int) -> None:
    """Refuse an aggregation the objective cannot train, before any training: ``perplexity`` with
    positive follow-ups (FULL itself refuses it: :func:`full_metric.aggregate.aggregate_tensor`)."""
    try:
        check_aggregation(aggregation)
        check_signs(positive, aggregation)
    except UsageError as error:
        raise UsageError(f"the complaints objective cannot train with this aggregation: {error}") from None


def dialog_scores(scorer: FullScorer, model: Any, dialogs: Sequence[Sequence[str]], max_context: int | None = None
                  ) -> torch.Tensor:
    """FULL's turn-level score of each dialog (context turns, then the reply) through ``model`` (the
    scorer's model, or the same model wrapped for training), differentiably: the scorer's own
    (:meth:`FullScorer.differentiable_scores`)."""
    return scorer.differentiable_scores([d[:-1] for d in dialogs], [d[-1] for d in dialogs], model=model,
                                        max_context=max_context)


def pair_margins(scorer: FullScorer, model: Any, pairs: Sequence[Pair], max_context: int | None) -> torch.Tensor:
    """score(real) - score(corrupted) for each pair, all in one forward."""
    dialogs = [[*p.context, p.real] for p in pairs] + [[*p.context, p.corrupted] for p in pairs]
    scores = dialog_scores(scorer, model, dialogs, max_context)
    return scores[: len(pairs)] - scores[len(pairs) :]


def pair_accuracy(scorer: FullScorer, model: Any, pairs: Sequence[Pair], max_context: int | None,
                  batch_size: int) -> float:
    """The share of pairs whose real turn FULL scores above the corrupted reply (eval mode, no gradients)."""
    was = model.training
    model.eval()
    right = 0
    with torch.no_grad():
        for start in range(0, len(pairs), batch_size):
            right += int((pair_margins(scorer, model, pairs[start : start + batch_size], max_context) > 0).sum())
    model.train(was)
    return right / max(len(pairs), 1)


def pair_loss(margins: torch.Tensor, margin: float) -> torch.Tensor:
    """The pairwise loss: ``softplus(margin - (score(real) - score(corrupted)))``, averaged."""
    return torch.nn.functional.softplus(margin - margins).mean()
