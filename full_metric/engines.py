"""The engines that turn token ids into follow-up log-likelihoods, in one registry: what each
computes, which models it is proven exact for, and what a dialog costs it. The scorer's choice,
its fallbacks and its self-check all read :data:`ENGINES`.

- ``packed`` (:func:`full_metric.loglik.packed_log_likelihoods`): the fastest. It feeds the
  model restarted positions, hand-built 4D masks and a shared key/value cache, and applies the
  output head itself. Exact only where the model takes positions as ``position_ids`` (rotary or
  learned), builds no attention bias of its own (ALiBi), applies no scaling in its
  ``ForCausalLM.forward`` besides Gemma's soft-capping, keeps no recurrent state, and either
  attends to every earlier token or declares its window in ``layer_types`` (which the packed
  engine honours): the families of :data:`PACKED_DECODER_ONLY` and :data:`PACKED_ENCODER_DECODER`,
  each checked against the oracle with tiny random models (``tests/unit/test_architectures.py``).
- ``cached`` (:func:`full_metric.loglik.cached_log_likelihoods`): each context once through the
  model's own forward, every follow-up continued from a copy of the model's own key/value cache,
  as generation does: positions, masks, windows and head scaling stay the model's. Decoder-only
  families of :data:`CACHED_DECODER_ONLY` (checked the same way), not recurrent ones.
- ``generic`` (:func:`full_metric.loglik.generic_log_likelihoods`): one row per (dialog,
  follow-up) pair through the model's own forward: correct for any causal or
  sequence-to-sequence language model by construction.
- ``oracle`` (:func:`full_metric.loglik.oracle_log_likelihoods`): one dialog and one follow-up
  per forward pass, no padding. Slow and obviously right: the reference of the self-check and
  the tests.

A model's candidates are the proven engines, fastest first, ending with ``generic``. The scorer
checks the first against the oracle once at load (its self-check) and falls back along the
candidates; a model whose generic engine differs is refused. Models no engine can score by their
own conventions are refused at once (:data:`REFUSED`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

from .loglik import (
    LogLik, cached_log_likelihoods, cached_sums, generic_log_likelihoods, generic_sums, oracle_log_likelihoods,
    oracle_sums, packed_log_likelihoods, packed_sums,
)
from .models import attention_window, text_config

#: Decoder-only families the packed engine is proven exact for (``config.model_type``).
PACKED_DECODER_ONLY = frozenset({
    "llama", "mistral", "mixtral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "phi", "olmo2",
    "gpt_neox", "falcon", "gptj", "codegen", "gpt2", "opt",
})
#: Of those, the families whose sliding window the packed engine applies (declared in ``layer_types``).
PACKED_WINDOWED = frozenset({"qwen2", "gemma2", "gemma3_text"})
#: Encoder-decoder families whose decoder takes positions from ``embed_positions(..., position_ids=)``,
#: so that follow-ups packed in one decoder row can restart them. (mBART only with a
#: declared ``decoder_start_token_id``: see :data:`REFUSED`.)
PACKED_ENCODER_DECODER = frozenset({"bart", "mbart", "blenderbot", "blenderbot-small", "marian", "pegasus"})
#: Decoder-only families the cached engine is proven exact for (windowed, ALiBi and scaled-head ones
#: included): the packed families and these.
CACHED_DECODER_ONLY = PACKED_DECODER_ONLY | frozenset({
    "phi3", "starcoder2", "stablelm", "cohere", "granite", "gpt_neo", "bloom", "mpt",
})
#: Attention implementations that accept the packed engine's 4D float masks.
MASKABLE_ATTENTION = frozenset({"eager", "sdpa"})
#: RoPE variants whose frequencies depend on the sequence length (a packed row is longer than a pair's).
LENGTH_DEPENDENT_ROPE = frozenset({"dynamic", "longrope"})


def _rope_type(config: Any) -> str | None:
    for key in ("rope_parameters", "rope_scaling"):
        value = getattr(config, key, None)
        if isinstance(value, dict):
            kind = value.get("rope_type") or value.get("type")
            if kind:
                return str(kind)
    return None


def model_type(model: Any) -> str:
    """The language model's ``model_type`` (a multimodal model's text part)."""
    return str(getattr(text_config(model.config), "model_type", "") or model.config.model_type)


def _packed_fits(model: Any) -> tuple[bool, str]:
    config, kind = text_config(model.config), model_type(model)
    attention = getattr(model.config, "_attn_implementation", None) or "eager"
    if model.config.is_encoder_decoder:
        if kind not in PACKED_ENCODER_DECODER:
            return False, f"the packed engine is not proven for encoder-decoder model type {kind!r}"
    elif kind not in PACKED_DECODER_ONLY:
        return False, f"the packed engine is not proven for model type {kind!r}"
    if attention not in MASKABLE_ATTENTION:
        return False, f"attention implementation {attention!r} takes no 4D float mask"
    if getattr(config, "alibi", False):
        return False, f"{kind} with ALiBi biases computes positions the packed engine cannot restart"
    for key in ("logit_scale", "logits_scaling"):
        if getattr(config, key, None) not in (None, 1, 1.0):
            return False, f"{kind} scales its logits ({key}) in a forward the packed engine skips"
    rope = _rope_type(config)
    if rope in LENGTH_DEPENDENT_ROPE:
        return False, f"{kind} with {rope!r} RoPE scaling depends on the sequence length"
    window = attention_window(config)
    if window is not None and kind not in PACKED_WINDOWED:
        return False, f"{kind} attends within a window of {window} tokens, which the packed engine does not apply"
    if window is not None and "sliding_attention" not in (getattr(config, "layer_types", None) or ()):
        return False, f"{kind} declares a window of {window} tokens outside layer_types"
    return True, f"the packed engine is proven for model type {kind!r}"


def _cached_fits(model: Any) -> tuple[bool, str]:
    kind = model_type(model)
    if model.config.is_encoder_decoder or kind not in CACHED_DECODER_ONLY:
        return False, f"the cached engine is not proven for model type {kind!r}"
    return True, f"the cached engine is proven for model type {kind!r}"


def _any_model(model: Any) -> tuple[bool, str]:
    return True, "the generic engine is correct for any causal or sequence-to-sequence model"


def _tokens_packed(encoder_decoder: bool, context: int, targets: Sequence[Sequence[int]]) -> int:
    return context if encoder_decoder else context + sum(len(t) for t in targets)


def _tokens_cached(encoder_decoder: bool, context: int, targets: Sequence[Sequence[int]]) -> int:
    return context + len(targets) * max(len(t) for t in targets)


def _tokens_generic(encoder_decoder: bool, context: int, targets: Sequence[Sequence[int]]) -> int:
    return context if encoder_decoder else len(targets) * (context + max(len(t) for t in targets))


def _tokens_oracle(encoder_decoder: bool, context: int, targets: Sequence[Sequence[int]]) -> int:
    return context + max(len(t) for t in targets)


@dataclass(frozen=True)
class Engine:
    """One engine: ``score(model, contexts, targets, pad_id)`` gives each context's (log-likelihood,
    token count) per target; ``sums`` is the same computation as a (contexts x targets) tensor, with
    gradients when autograd is on; ``proven(model)`` says whether it is proven exact for ``model`` and
    why; ``tokens(encoder_decoder, context_length, targets)`` is the padded tokens one dialog puts
    in a forward pass (its cost, for the token budget: encoder-decoder decoder rows are short
    beside the encoder's)."""

    name: str
    score: Callable[[Any, Sequence[Sequence[int]], Sequence[Sequence[int]], int], list[list[LogLik]]]
    sums: Callable[[Any, Sequence[Sequence[int]], Sequence[Sequence[int]], int], torch.Tensor]
    proven: Callable[[Any], tuple[bool, str]]
    tokens: Callable[[bool, int, Sequence[Sequence[int]]], int]


#: Every engine, fastest first; ``oracle`` last, the reference of all the others.
ENGINES: dict[str, Engine] = {
    "packed": Engine("packed", packed_log_likelihoods, packed_sums, _packed_fits, _tokens_packed),
    "cached": Engine("cached", cached_log_likelihoods, cached_sums, _cached_fits, _tokens_cached),
    "generic": Engine("generic", generic_log_likelihoods, generic_sums, _any_model, _tokens_generic),
    "oracle": Engine("oracle", oracle_log_likelihoods, oracle_sums, _any_model, _tokens_oracle),
}
#: What a call may ask for: ``auto`` (the engine chosen and self-checked at load) or an engine
#: correct for any model.
ENGINE_OPTIONS = ("auto", "generic", "oracle")
#: Model types no engine scores by their own conventions, and why (checked before anything else).
REFUSED = {
    "mbart": "mBART's decoder starts with the target language's code (its own convention), which FULL cannot "
             "choose; its config declares no decoder_start_token_id",
}


def refusal(model: Any, name: str) -> str | None:
    """Why ``model`` (called ``name``) cannot be scored at all, or ``None``."""
    kind = model_type(model)
    if kind in REFUSED and getattr(model.config, "decoder_start_token_id", None) is None:
        return f"{name} (model type {kind!r}) cannot be scored: {REFUSED[kind]}"
    return None


def candidates(model: Any) -> tuple[tuple[str, ...], str]:
    """The engines proven for ``model``, fastest first (ending with ``"generic"``), and why the first
    was chosen or the packed engine was not."""
    chosen, reasons = [], []
    for name in ("packed", "cached", "generic"):
        fits, reason = ENGINES[name].proven(model)
        if fits:
            chosen.append(name)
        reasons.append(reason)
    first = ("packed", "cached", "generic").index(chosen[0])
    reason = reasons[0] if first == 0 else f"{reasons[0]}; {reasons[first]}"
    return tuple(chosen), reason
