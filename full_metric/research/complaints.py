"""The ``complaints`` objective of judge adaptation: teach the judge FULL's own question (is a
complaint likely after this reply?) from unlabeled dialogs, without any human rating.

From each dialog, a pair: the real next turn and a corrupted reply to the same context (a turn of
another conversation, the context's last turn echoed, a far turn of the same conversation, the
real turn truncated, a short generic reply from :data:`TRAINING_GENERIC_REPLIES`, a bare
acknowledgement from :data:`TRAINING_ACKNOWLEDGEMENTS`, or a word of the real turn repeated; the
lists are disjoint from every list of answers measured). The loss is pairwise on FULL's own score for
that judge, preset and rendering, ``softplus(margin - (score(real) - score(corrupted)))``, plus
``lm_weight`` times the language-modelling loss of the real dialog (the ``dialogs`` objective's
example) as a regulariser. :func:`dialog_scores` computes the score as the scorer does (its
renderer, truncation, ``max_turns``, follow-ups and aggregation), differentiably, all follow-ups
of a batch of pairs in one forward (packed after each context where the scorer's packed engine is
proven); ``tests/integration/test_adapt.py`` proves it equal to
:meth:`FullScorer.score`.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from ..aggregate import AGGREGATIONS
from ..errors import UsageError
from .. import engines
from ..loglik import (
    _additive_mask, _body, _decoder_start, _encode, _output_logits, _pad, _segments, _sliding_window, _token_log_probs,
    _within_follow_ups,
)
from ..scorer import FullScorer
from .pairs import (
    CORRUPTIONS, DEFAULT_MIX, TRAINING_ACKNOWLEDGEMENTS, TRAINING_GENERIC_REPLIES, Pair, check_mix,
    make_pairs, normalised,
)

__all__ = [  # the objective, and the pairs' names (research/pairs.py), read through this module too
    "CORRUPTIONS", "DEFAULT_MIX", "TRAINING_ACKNOWLEDGEMENTS", "TRAINING_GENERIC_REPLIES", "Pair", "check_mix",
    "make_pairs", "normalised", "check_trainable", "aggregate_tensor", "follow_up_log_likelihoods", "packs",
    "dialog_scores", "pair_margins", "pair_accuracy", "pair_loss",
]

def check_trainable(aggregation: str, positive: int) -> None:
    """Refuse an aggregation the objective cannot train: ``perplexity`` with positive follow-ups
    (FULL itself refuses it: :func:`full_metric.aggregate.aggregate`)."""
    if aggregation not in AGGREGATIONS or (aggregation == "perplexity" and positive):
        raise UsageError(f"the complaints objective cannot train with aggregation {aggregation!r} and {positive} "
                         "positive follow-ups")


def aggregate_tensor(log_likelihoods: torch.Tensor, counts: Sequence[int], aggregation: str, positive: int) -> torch.Tensor:
    """:func:`full_metric.aggregate.aggregate` on a (dialogs x follow-ups) tensor, differentiably."""
    check_trainable(aggregation, positive)
    split = log_likelihoods.shape[1] - positive
    neg, pos = log_likelihoods[:, :split], log_likelihoods[:, split:]
    if aggregation == "sum":
        return pos.sum(1) - neg.sum(1)
    per_token = log_likelihoods / torch.tensor(list(counts), dtype=log_likelihoods.dtype, device=log_likelihoods.device)
    if aggregation == "mean":
        return (per_token[:, split:].sum(1) - per_token[:, :split].sum(1)) / log_likelihoods.shape[1]
    if aggregation == "balanced":
        praise = pos.mean(1) if positive else torch.zeros_like(neg[:, 0])
        return praise - neg.mean(1) if split else praise
    return torch.exp(-per_token).mean(1)  # perplexity, negative follow-ups only


def follow_up_log_likelihoods(model: Any, contexts: Sequence[Sequence[int]], targets: Sequence[Sequence[int]],
                              pad_id: int, packed: bool | None = None) -> torch.Tensor:
    """log p(target | context) summed over each target's tokens, for every context and target, as a
    (contexts x targets) float32 tensor with gradients. The output head is applied at target
    positions only (a large vocabulary at every context position would dwarf the model's own
    activations). Encoder-decoders: each context encoded once, one decoder row per target.
    Decoder-only: ``packed`` (default: where :func:`packs`), one row per context with all targets
    after it, each seeing the context and its own earlier tokens, positions restarting where the
    context ends (the packed engine's layout, without a cache); otherwise one plain row per
    (context, target), right-padded so positions are those of a row alone. The padding, decoder
    start and token log-probabilities are :mod:`full_metric.loglik`'s."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model  # PEFT: LoRA layers in place
    device = inner.device
    if inner.config.is_encoder_decoder:
        hidden, enc_mask = _encode(inner, contexts, pad_id)
        rows = torch.arange(len(contexts), device=device).repeat_interleave(len(targets))
        start = _decoder_start(inner)
        dec, dec_mask = _pad([[start, *t[:-1]] for _ in contexts for t in targets], pad_id, device)
        logits = inner(encoder_outputs=(hidden[rows],), attention_mask=enc_mask[rows], decoder_input_ids=dec,
                       decoder_attention_mask=dec_mask, use_cache=False).logits
        labels, scored = _pad([t for _ in contexts for t in targets], 0, device)
        return (_token_log_probs(logits, labels) * scored).sum(-1).view(len(contexts), len(targets))
    if packs(inner) if packed is None else packed:
        return _packed_rows(inner, contexts, targets, pad_id)
    pairs = [(c, t) for c in contexts for t in targets]
    ids, mask = _pad([[*c, *t] for c, t in pairs], pad_id, device)
    hidden = _body(inner)(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state
    # the hidden state at position p predicts token p + 1
    rows = torch.tensor([r for r, (_, t) in enumerate(pairs) for _ in t], device=device)
    cols = torch.tensor([len(c) - 1 + k for c, t in pairs for k in range(len(t))], device=device)
    labels = torch.tensor([tok for _, t in pairs for tok in t], device=device)
    lp = _token_log_probs(_output_logits(inner, hidden[rows, cols]), labels)
    return torch.zeros(len(pairs), device=device).index_add(0, rows, lp).view(len(contexts), len(targets))


def packs(model: Any) -> bool:
    """Whether the packed layout serves this decoder-only model: the scorer's packed engine is
    proven for its family (:mod:`full_metric.engines`) and it attends without a window."""
    return "packed" in engines.candidates(model)[0] and not _sliding_window(model)


def _packed_rows(model: Any, contexts: Sequence[Sequence[int]], targets: Sequence[Sequence[int]],
                 pad_id: int) -> torch.Tensor:
    device, n = model.device, len(contexts)
    segment, offset = _segments(targets)
    lengths = torch.tensor([len(c) for c in contexts])
    ctx_ids, _ = _pad(contexts, pad_id, device)
    width, tail = ctx_ids.shape[1], len(segment)
    tail_ids = torch.tensor([tok for t in targets for tok in t], device=device).expand(n, -1)
    allowed = torch.zeros(n, width + tail, width + tail, dtype=torch.bool)
    allowed[:, :width, :width] = torch.ones(width, width, dtype=torch.bool).tril()  # padding sits after each context
    allowed[:, width:, :width] = (torch.arange(width)[None, :] < lengths[:, None])[:, None, :]
    allowed[:, width:, width:] = _within_follow_ups(segment, offset)
    dtype = next(model.parameters()).dtype
    positions = torch.cat([torch.arange(width).expand(n, -1), lengths[:, None] + offset[None, :]], dim=1)
    hidden = _body(model)(input_ids=torch.cat([ctx_ids, tail_ids], dim=1),
                          attention_mask=_additive_mask(allowed.unsqueeze(1), dtype).to(device),
                          position_ids=positions.to(device), use_cache=False).last_hidden_state
    last = hidden[torch.arange(n, device=device), (lengths - 1).to(device)]  # predicts each target's first token
    starts = (offset == 0).to(device)[None, :, None]
    picked = torch.where(starts, last[:, None, :], torch.cat([last[:, None, :], hidden[:, width:-1]], dim=1))
    lp = _token_log_probs(_output_logits(model, picked), tail_ids)
    return torch.zeros(n, len(targets), device=device).index_add(1, segment.to(device), lp)


def dialog_scores(scorer: FullScorer, model: Any, dialogs: Sequence[Sequence[str]], max_context: int | None = None
                  ) -> torch.Tensor:
    """FULL's turn-level score of each dialog (context turns, then the reply) as ``scorer`` computes
    it (its ``max_turns``, renderer, truncation, follow-ups and aggregation), through ``model`` (the
    scorer's model, or the same model wrapped for training), differentiably. ``max_context``: keep at
    most this many context tokens (``None``: the scorer's own limit, which gives its numbers exactly)."""
    targets = [list(scorer.renderer.target_ids(f)) for f in (*scorer.follow_ups, *scorer.positive_follow_ups)]
    limit = scorer.context_limit(targets)
    limit = limit if max_context is None else max(1, min(limit, max_context))
    contexts = [list(scorer.renderer.encode([*d[:-1][-scorer.max_turns:], d[-1]], limit).context_ids)
                for d in dialogs]
    unique = list(dict.fromkeys(tuple(c) for c in contexts))
    # the packed layout only where the scorer itself scores packed (its load-time self-check may have fallen back)
    values = follow_up_log_likelihoods(model, unique, targets, scorer.pad_id,
                                       packed=scorer.engine == "packed" and packs(model))
    where = {c: i for i, c in enumerate(unique)}
    rows = values[[where[tuple(c)] for c in contexts]]
    return aggregate_tensor(rows, [len(t) for t in targets], scorer.aggregation, len(scorer.positive_follow_ups))


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
