"""Which engine scores a model: a fast path where it is proven exact, else the generic one.

The packed path (:func:`full_metric.loglik.packed_log_likelihoods`) feeds the model restarted
positions, hand-built 4D masks and a shared key/value cache, and applies the output head itself.
That is exact only where the model takes positions as ``position_ids`` (rotary or learned), builds
no attention bias of its own (ALiBi), applies no scaling in its ``ForCausalLM.forward`` besides
Gemma's soft-capping, keeps no recurrent state, and either attends to every earlier token or
declares its window in ``layer_types`` (which the packed path honours). The families below were
each checked against the oracle with tiny random models (``tests/test_architectures.py``); every
other model, and any variant of these that leaves those conditions, takes the generic path, which
is correct for any causal or sequence-to-sequence language model by construction.

Between the two, the cached path (:func:`full_metric.loglik.cached_log_likelihoods`) runs each
context once through the model's own forward and continues every follow-up from a copy of the
model's own key/value cache, as generation does: positions, masks, windows and head scaling stay
the model's. It serves the decoder-only families below (checked the same way), not recurrent ones.

The scorer checks the first candidate path against the oracle once at load (its self-check) and
falls back along the candidates; a model whose generic path differs is refused.
"""

from __future__ import annotations

from typing import Any

#: Decoder-only families the packed path is proven exact for (``config.model_type``).
PACKED_DECODER_ONLY = frozenset({
    "llama", "mistral", "mixtral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "phi", "olmo2",
    "gpt_neox", "falcon", "gptj", "codegen", "gpt2", "opt",
})
#: Of those, the families whose sliding window the packed path applies (declared in ``layer_types``).
PACKED_WINDOWED = frozenset({"qwen2", "gemma2", "gemma3_text"})
#: Encoder-decoder families whose decoder takes positions from ``embed_positions(..., position_ids=)``,
#: so that follow-ups packed in one decoder row can restart them.
PACKED_ENCODER_DECODER = frozenset({"bart", "mbart", "blenderbot", "blenderbot-small", "marian", "pegasus"})
#: Decoder-only families the cached path is proven exact for (windowed, ALiBi and scaled-head ones
#: included): the packed families and these.
CACHED_DECODER_ONLY = PACKED_DECODER_ONLY | frozenset({
    "phi3", "starcoder2", "stablelm", "cohere", "granite", "gpt_neo", "bloom", "mpt",
})
#: Attention implementations that accept the packed path's 4D float masks.
MASKABLE_ATTENTION = frozenset({"eager", "sdpa"})
#: RoPE variants whose frequencies depend on the sequence length (a packed row is longer than a pair's).
LENGTH_DEPENDENT_ROPE = frozenset({"dynamic", "longrope"})


def text_config(config: Any) -> Any:
    """The language model's config (a multimodal config's text part; the config itself otherwise)."""
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def attention_window(config: Any) -> int | None:
    """The span of the model's windowed, local or chunked attention, whichever field declares it."""
    config = text_config(config)
    windows = [
        getattr(config, key, None)
        for key in ("sliding_window", "attention_chunk_size", "window_size", "local_window_size")
    ]
    found = [w for w in windows if isinstance(w, int) and not isinstance(w, bool) and w > 0]
    return min(found) if found else None


def _rope_type(config: Any) -> str | None:
    for key in ("rope_parameters", "rope_scaling"):
        value = getattr(config, key, None)
        if isinstance(value, dict):
            kind = value.get("rope_type") or value.get("type")
            if kind:
                return str(kind)
    return None


def choose_paths(model: Any) -> tuple[tuple[str, ...], str]:
    """The candidate engines for ``model``, fastest first (ending with ``"generic"``), and why the
    first was chosen or the packed path was not."""
    config = text_config(model.config)
    kind = str(getattr(config, "model_type", "") or model.config.model_type)
    packed, reason = _packed_fits(model, config, kind)
    cached = not model.config.is_encoder_decoder and kind in CACHED_DECODER_ONLY
    paths = (("packed",) if packed else ()) + (("cached",) if cached else ()) + ("generic",)
    if not packed and cached:
        reason += "; the cached path is proven for it"
    return paths, reason


def _packed_fits(model: Any, config: Any, kind: str) -> tuple[bool, str]:
    attention = getattr(model.config, "_attn_implementation", None) or "eager"
    if model.config.is_encoder_decoder:
        if kind not in PACKED_ENCODER_DECODER:
            return False, f"the packed path is not proven for encoder-decoder model type {kind!r}"
    elif kind not in PACKED_DECODER_ONLY:
        return False, f"the packed path is not proven for model type {kind!r}"
    if attention not in MASKABLE_ATTENTION:
        return False, f"attention implementation {attention!r} takes no 4D float mask"
    if getattr(config, "alibi", False):
        return False, f"{kind} with ALiBi biases computes positions the packed path cannot restart"
    for key in ("logit_scale", "logits_scaling"):
        if getattr(config, key, None) not in (None, 1, 1.0):
            return False, f"{kind} scales its logits ({key}) in a forward the packed path skips"
    rope = _rope_type(config)
    if rope in LENGTH_DEPENDENT_ROPE:
        return False, f"{kind} with {rope!r} RoPE scaling depends on the sequence length"
    window = attention_window(config)
    if window is not None and kind not in PACKED_WINDOWED:
        return False, f"{kind} attends within a window of {window} tokens, which the packed path does not apply"
    if window is not None and "sliding_attention" not in (getattr(config, "layer_types", None) or ()):
        return False, f"{kind} declares a window of {window} tokens outside layer_types"
    return True, f"the packed path is proven for model type {kind!r}"
