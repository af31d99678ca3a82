"""How much more likely a response is after its context than alone: log P(response | context) - log P(response),
the mutual-information criterion of Li et al. (2016, "A Diversity-Promoting Objective Function for Neural
Conversation Models"). A reply from another conversation, an assistant opener or "I don't know." gains little
from this context; the human's real turn gains most. Issue 61's lever 3 adds it to FULL with a weight chosen
on held-out pairs only (:func:`choose_weight`).

The response is the judge's own rendering of it: the assistant's turn after the context (a chat template), each
log-likelihood one plain forward pass per (context, response) (:func:`full_metric.loglik.oracle_sums`), the
computation with nothing to prove. The turn header and the response are tokenised apart, as the scorer tokenises a
follow-up: with a header that ends in a line break (ChatML as SmolLM2 has it, Llama-3, Gemma) the very tokens of
the whole conversation (``tests/unit/test_response_pmi.py``). Decoder-only judges with a chat template only (the relevance judges); any
other is refused by name.
"""

from __future__ import annotations

from typing import Sequence

import torch

from ..errors import UsageError
from ..loglik import oracle_sums
from ..rendering import chat_messages
from ..scorer import FullScorer

_SENTINEL = "\x00RESPONSE\x00"


def _check(scorer: FullScorer) -> None:
    if scorer.loaded.is_encoder_decoder or scorer.rendering != "chat_template":
        raise UsageError(f"the response's mutual information is computed for decoder-only judges read through their "
                         f"chat template; {scorer.loaded.name} is read with the {scorer.rendering!r} rendering")


def response_ids(scorer: FullScorer, context: Sequence[str], response: str) -> tuple[list[int], list[int]]:
    """The token ids the judge reads before the response (the context, then the assistant's turn header) and
    the response's own ids (its text and the end-of-turn token), as its chat template renders them."""
    tok = scorer.tokenizer
    messages = chat_messages([*context, _SENTINEL], "assistant", scorer.renderer.user_first)
    head, _, tail = tok.apply_chat_template(messages, tokenize=False).rpartition(_SENTINEL)
    before = list(tok(head, add_special_tokens=False)["input_ids"])
    ids = list(tok(response + tail, add_special_tokens=False)["input_ids"])
    special = set(tok.all_special_ids)
    end = next((i + 1 for i, t in enumerate(ids) if t in special), len(ids))
    return before, ids[:end]


def response_log_likelihood(scorer: FullScorer, context: Sequence[str], response: str) -> float:
    """log P(response | context) under the judge (an empty context: the response alone)."""
    before, ids = response_ids(scorer, context, response)
    with torch.inference_mode():
        return float(oracle_sums(scorer.model, [before], [ids])[0, 0])


def response_pmi(scorer: FullScorer, contexts: Sequence[Sequence[str]], responses: Sequence[str],
                 alone: dict[str, float] | None = None) -> list[float]:
    """Each response's log P(response | context) - log P(response); ``alone`` caches log P(response) by text."""
    _check(scorer)
    if len(contexts) != len(responses):
        raise UsageError(f"got {len(contexts)} contexts but {len(responses)} responses")
    alone = {} if alone is None else alone
    values = []
    for context, response in zip(contexts, responses):
        if response not in alone:
            alone[response] = response_log_likelihood(scorer, [], response)
        values.append(response_log_likelihood(scorer, context, response) - alone[response])
    return values


def choose_weight(full_margins: Sequence[float], pmi_margins: Sequence[float], weights: Sequence[float]
                  ) -> tuple[float, dict[float, float]]:
    """The weight ``w`` whose FULL + w * PMI ranks the most held-out pairs right (a margin above zero), from
    each pair's margins (real minus corrupted) of FULL and of the PMI; ties: the smaller weight. Returns it
    with each weight's pair accuracy."""
    if len(full_margins) != len(pmi_margins) or not full_margins:
        raise UsageError("choose_weight needs the same positive number of FULL and PMI margins")
    accuracy = {w: sum(f + w * p > 0 for f, p in zip(full_margins, pmi_margins)) / len(full_margins)
                for w in weights}
    best = max(sorted(accuracy), key=lambda w: accuracy[w])
    return best, accuracy
