"""Token ids in, follow-up log-likelihoods out: the generic, cached, packed and oracle engines.

Each engine is one function of the form ``*_sums(model, contexts, targets, pad_id)`` that returns
the summed token log-probability of every target (follow-up) after every context, as a
(contexts x targets) float32 tensor, whatever the model's dtype: with gradients when autograd is on
(the training objective's score, :meth:`full_metric.FullScorer.differentiable_scores`), and under
``torch.inference_mode`` in its ``*_log_likelihoods`` form, which gives each dialog one ``(sum,
token count)`` pair per target (the scorer's numbers). One computation serves both.

- :func:`oracle_log_likelihoods`: one dialog and one follow-up per forward pass, no padding.
  Slow and obviously right; the tests and the scorer's self-check hold every other engine to it.
- :func:`generic_log_likelihoods`: correct for any causal or sequence-to-sequence language
  model by construction, as lm-evaluation-harness's ``loglikelihood`` is: one row per (dialog,
  follow-up) pair through the model's own ``forward`` (its own masks, positions, head scaling,
  recurrent state), right padding (every row's real tokens sit where they would alone, and a
  causal model never reads the padding after them) and a standard 0/1 attention mask. Causal
  models: context + follow-up per row, logits kept for the follow-up positions only where the
  model's forward offers ``logits_to_keep``. Encoder-decoders: each dialog encoded once, one
  decoder row per follow-up against a copy of the encoding.
- :func:`cached_log_likelihoods`: decoder-only models, correct wherever the model's own cache
  is (as generation relies on it): each context once through the model's forward with its cache,
  then the follow-ups as one batch of rows (right padding) continuing from copies of that cache;
  the model applies its own positions, windows, biases and head scaling.
- :func:`packed_log_likelihoods`: the fastest engine, taken only for the model families of
  :mod:`full_metric.engines` on which it is proven equal to the oracle. For the BART family (BART,
  BlenderBot, BlenderBot-small, Marian, Pegasus, mBART) all follow-ups of a dialog are packed
  into one decoder row, with a block-diagonal causal mask and positions that restart at every
  follow-up, so the cross-attention keys and values are computed once per dialog and never
  copied. Decoder-only models run the contexts once (plain causal attention, keys and values
  kept in the cache), then all follow-ups of a dialog as one row after its cached context, with
  an attention mask that lets each follow-up see the context and itself only, and positions
  that restart every follow-up where the context ends: the context's keys and values are shared
  by all follow-ups without being copied; logits are computed at follow-up positions only.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Sequence

import torch

from .errors import UsageError
from .models import text_config

LogLik = tuple[float, int]
#: The most logits (rows x positions x vocabulary) held at once by the decoder-only engines.
LOGIT_BUDGET = 8_000_000


def _token_log_probs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """log p(target) for each position, in float32."""
    return torch.log_softmax(logits.float(), dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def _decoder_start(model: Any) -> int:
    start = model.config.decoder_start_token_id
    if start is None:
        start = getattr(model.generation_config, "decoder_start_token_id", None)
    if start is None:
        raise UsageError(f"model type {model.config.model_type!r}: the encoder-decoder model's config has no "
                         "decoder_start_token_id")
    return int(start)


def oracle_sums(model: Any, contexts: Sequence[Sequence[int]], targets: Sequence[Sequence[int]],
                pad_id: int = 0) -> torch.Tensor:
    """Score each target after each context, one plain forward pass per (context, target), no padding."""
    device = model.device
    rows = []
    for context_ids in contexts:
        row = []
        for target in targets:
            tgt = torch.tensor([list(target)], device=device)
            if model.config.is_encoder_decoder:
                dec_in = torch.tensor([[_decoder_start(model), *target[:-1]]], device=device)
                ids = torch.tensor([list(context_ids)], device=device)
                logits = model(input_ids=ids, decoder_input_ids=dec_in, use_cache=False).logits
                lp = _token_log_probs(logits[0], tgt[0])
            else:
                ids = torch.tensor([[*context_ids, *target]], device=device)
                logits = model(input_ids=ids, use_cache=False).logits[0, len(context_ids) - 1 : -1]
                lp = _token_log_probs(logits, tgt[0])
            row.append(lp.sum())
        rows.append(torch.stack(row))
    return torch.stack(rows)


def as_log_likelihoods(sums: torch.Tensor, targets: Sequence[Sequence[int]]) -> list[list[LogLik]]:
    """A (contexts x targets) tensor of sums as each context's ``(sum, token count)`` per target."""
    return [[(value, len(targets[j])) for j, value in enumerate(row)] for row in sums.tolist()]


def scored(sums: Callable[..., torch.Tensor]) -> Callable[..., list[list[LogLik]]]:
    """An engine's ``*_sums`` function as the scorer calls it: under ``torch.inference_mode``, as
    ``(sum, token count)`` pairs."""
    def log_likelihoods(model: Any, contexts: Sequence[Sequence[int]], targets: Sequence[Sequence[int]],
                        pad_id: int) -> list[list[LogLik]]:
        with torch.inference_mode():
            return as_log_likelihoods(sums(model, contexts, targets, pad_id), targets)

    log_likelihoods.__name__ = sums.__name__.replace("_sums", "_log_likelihoods")
    log_likelihoods.__doc__ = sums.__doc__
    return log_likelihoods


def _pad(rows: Sequence[Sequence[int]], value: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad rows into ids and a 0/1 mask."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), value, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(list(r), dtype=torch.long)
        mask[i, : len(r)] = 1
    return ids.to(device), mask.to(device)


def packed_sums(
    model: Any, contexts: Sequence[Sequence[int]], targets: Sequence[Sequence[int]], pad_id: int
) -> torch.Tensor:
    """Score every target after every context with the packed engine (see the module docstring).
    Only for the model families :data:`full_metric.engines.ENGINES` proves it for."""
    if model.config.is_encoder_decoder:
        hidden, enc_mask = _encode(model, contexts, pad_id)
        return _packed_decoder(model, hidden, enc_mask, targets)
    return _decoder_only_batch(model, contexts, targets, pad_id)


def cached_sums(
    model: Any, contexts: Sequence[Sequence[int]], targets: Sequence[Sequence[int]], pad_id: int
) -> torch.Tensor:
    """Score every target after every context through the model's own forward and its own cache,
    as generation does (see the module docstring). Decoder-only models whose forward takes a cache."""
    keyword = cache_keyword(model)
    if keyword is None or model.config.is_encoder_decoder:
        raise UsageError(f"model type {model.config.model_type!r} takes no key/value cache in its forward")
    device = model.device
    tgt_ids, tgt_mask = _pad(targets, pad_id, device)  # right padding: a causal row never reads it
    keep = _keep_keyword(model)
    out = []
    for context in contexts:
        ids = torch.tensor([list(context)], device=device)
        first = model(input_ids=ids, use_cache=True, **({keep: 1} if keep else {}))
        cache = getattr(first, "cache", None) or getattr(first, "past_key_values", None)
        cache.batch_repeat_interleave(len(targets))  # one copy of the context's cache per follow-up
        mask = torch.cat([torch.ones(len(targets), len(context), dtype=tgt_mask.dtype, device=device), tgt_mask], 1)
        rest = model(input_ids=tgt_ids, attention_mask=mask, use_cache=True, **{keyword: cache}).logits
        # the context's last logit predicts each follow-up's first token, the follow-up's own the rest
        logits = torch.cat([first.logits[:, -1:].expand(len(targets), -1, -1), rest[:, :-1]], dim=1)
        out.append(_masked_sum(_token_log_probs(logits, tgt_ids), tgt_mask))
    return torch.stack(out)


def cache_keyword(model: Any) -> str | None:
    """The keyword by which the model's forward takes a key/value cache, if it takes one."""
    params = inspect.signature(model.forward).parameters
    return next((k for k in ("cache", "past_key_values") if k in params), None)


def generic_sums(
    model: Any, contexts: Sequence[Sequence[int]], targets: Sequence[Sequence[int]], pad_id: int
) -> torch.Tensor:
    """Score every target after every context through the model's own forward, one row per pair
    (see the module docstring): correct for any causal or sequence-to-sequence language model."""
    if model.config.is_encoder_decoder:
        hidden, enc_mask = _encode(model, contexts, pad_id)
        return _repeated_decoder(model, hidden, enc_mask, targets, pad_id)
    return _generic_decoder_only(model, contexts, targets, pad_id)


def _encode(model: Any, contexts: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    enc_ids, enc_mask = _pad(contexts, pad_id, model.device)
    return model.get_encoder()(input_ids=enc_ids, attention_mask=enc_mask).last_hidden_state, enc_mask


def _segments(targets: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """For the concatenated targets: each token's follow-up index and its offset inside it."""
    segment = torch.cat([torch.full((len(t),), k) for k, t in enumerate(targets)])
    offset = torch.cat([torch.arange(len(t)) for t in targets])
    return segment, offset


def _within_follow_ups(segment: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
    """Which packed follow-up token may see which: its own follow-up's tokens up to itself."""
    return (segment[:, None] == segment[None, :]) & (offset[:, None] >= offset[None, :])


def _per_follow_up(lp: torch.Tensor, segment: torch.Tensor, targets: Sequence[Sequence[int]]) -> torch.Tensor:
    """Sum packed token log-probabilities (rows x tokens) per follow-up (rows x follow-ups)."""
    return torch.zeros(lp.shape[0], len(targets), device=lp.device).index_add(1, segment.to(lp.device), lp)


def _masked_sum(lp: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Per row, the sum of the token log-probabilities where ``keep`` is true (the one way padding
    and context positions are left out of a sum)."""
    return torch.where(keep.bool(), lp, 0.0).sum(-1)


def _additive_mask(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A 0 / most-negative float mask from a boolean one (valid for eager and SDPA attention)."""
    mask = torch.zeros(allowed.shape, dtype=dtype)
    return mask.masked_fill_(~allowed, torch.finfo(dtype).min)


def _packed_decoder(
    model: Any, hidden: torch.Tensor, enc_mask: torch.Tensor, targets: Sequence[Sequence[int]]
) -> torch.Tensor:
    device, n_ctx = model.device, hidden.shape[0]
    start = _decoder_start(model)
    segment, offset = _segments(targets)
    width = len(segment)
    dec_in = torch.tensor([tok for t in targets for tok in (start, *t[:-1])], device=device)
    labels = torch.tensor([tok for t in targets for tok in t], device=device)
    allowed = _within_follow_ups(segment, offset)
    mask = _additive_mask(allowed, hidden.dtype).to(device).expand(n_ctx, 1, width, width)
    positions = offset.to(device)

    def restart_positions(module: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        return args, {**kwargs, "position_ids": positions}

    decoder = model.get_decoder()
    handle = decoder.embed_positions.register_forward_pre_hook(restart_positions, with_kwargs=True)
    try:
        logits = model(
            encoder_outputs=(hidden,),
            attention_mask=enc_mask,
            decoder_input_ids=dec_in.expand(n_ctx, -1),
            decoder_attention_mask=mask,
            use_cache=False,
        ).logits
    finally:
        handle.remove()
    return _per_follow_up(_token_log_probs(logits, labels.expand(n_ctx, -1)), segment, targets)


def _repeated_decoder(
    model: Any, hidden: torch.Tensor, enc_mask: torch.Tensor, targets: Sequence[Sequence[int]], pad_id: int
) -> torch.Tensor:
    device = model.device
    n_ctx, n_tgt = hidden.shape[0], len(targets)
    start = _decoder_start(model)
    dec_in, dec_mask = _pad([[start, *t[:-1]] for t in targets], pad_id, device)
    labels, _ = _pad(targets, pad_id, device)
    rows = torch.arange(n_ctx, device=device).repeat_interleave(n_tgt)
    logits = model(
        encoder_outputs=(hidden[rows],),
        attention_mask=enc_mask[rows],
        decoder_input_ids=dec_in.repeat(n_ctx, 1),
        decoder_attention_mask=dec_mask.repeat(n_ctx, 1),
        use_cache=False,
    ).logits
    return _masked_sum(_token_log_probs(logits, labels.repeat(n_ctx, 1)), dec_mask.repeat(n_ctx, 1)).view(n_ctx, n_tgt)


def _sliding_window(model: Any) -> int | None:
    """The window of the model's sliding-window attention layers (Gemma 2/3...), if it has any."""
    config = text_config(model.config)
    if "sliding_attention" not in (getattr(config, "layer_types", None) or ()):
        return None
    return getattr(config, "sliding_window", None)


def _body(model: Any) -> Any:
    """The decoder-only model without its output head (``base_model``; ``get_decoder()`` where
    ``base_model`` is the model itself, as for Gemma 3 in transformers 4.x)."""
    body = model.base_model
    return model.get_decoder() if body is model else body


def _new_cache(model: Any) -> tuple[str, Any]:
    """An empty key/value cache and the keyword the model's forward takes it by. Models with
    sliding-window layers get a cache that keeps every key (a sliding cache would drop the oldest
    context keys before the follow-ups are scored); their window is applied by the mask."""
    from transformers import DynamicCache

    try:
        cache = DynamicCache() if _sliding_window(model) else DynamicCache(config=model.config)
    except TypeError:  # transformers before 4.56
        cache = DynamicCache()
    return cache_keyword(_body(model)) or "past_key_values", cache


def _decoder_only_batch(
    model: Any, contexts: Sequence[Sequence[int]], targets: Sequence[Sequence[int]], pad_id: int
) -> torch.Tensor:
    device = model.device
    n = len(contexts)
    tail = [t for target in targets for t in target]
    segment, offset = _segments(targets)
    lengths = torch.tensor([len(c) for c in contexts])
    ctx_ids, _ = _pad(contexts, pad_id, device)
    width = ctx_ids.shape[1]
    # 1) the contexts, plain causal attention: padding sits after each context, so no real token
    #    sees it; the keys and values stay in the cache, one copy per dialog
    key, cache = _new_cache(model)
    first = _body(model)(input_ids=ctx_ids, use_cache=True, **{key: cache}).last_hidden_state
    last = first[torch.arange(n, device=device), (lengths - 1).to(device)]  # predicts each follow-up's first token
    del first
    # 2) all follow-ups of a dialog in one row after its cached context: each sees the context
    #    (not its padding) and its own earlier tokens; positions restart where the context ends
    allowed = torch.zeros(n, len(tail), width + len(tail), dtype=torch.bool)
    allowed[:, :, :width] = (torch.arange(width)[None, :] < lengths[:, None])[:, None, :]
    allowed[:, :, width:] = _within_follow_ups(segment, offset)
    dtype = next(model.parameters()).dtype
    position = lengths[:, None] + offset[None, :]
    mask: Any = _additive_mask(allowed.unsqueeze(1), dtype).to(device)
    window = _sliding_window(model)
    if window:  # sliding layers see only keys less than `window` positions back
        keys = torch.cat([torch.arange(width).expand(n, -1), position], dim=1)
        near = (position[:, :, None] - keys[:, None, :]) < window
        mask = {"full_attention": mask,
                "sliding_attention": _additive_mask((allowed & near).unsqueeze(1), dtype).to(device)}
    position = position.to(device)
    tail_ids = torch.tensor(tail, device=device).expand(n, -1)
    hidden = _body(model)(
        input_ids=tail_ids, attention_mask=mask, position_ids=position, use_cache=True, **{key: cache}
    ).last_hidden_state
    del cache
    starts = (offset == 0).to(device)[None, :, None]
    picked = torch.where(starts, last[:, None, :], torch.cat([last[:, None, :], hidden[:, :-1]], dim=1))
    # logits at follow-up positions only, a few rows at a time: a large vocabulary makes them big
    vocab = model.get_output_embeddings().weight.shape[0]
    step = max(1, LOGIT_BUDGET // (len(tail) * vocab))
    lp = torch.cat([
        _token_log_probs(_output_logits(model, picked[i : i + step]), tail_ids[i : i + step])
        for i in range(0, n, step)
    ])
    return _per_follow_up(lp, segment, targets)


def _output_logits(model: Any, hidden: torch.Tensor) -> torch.Tensor:
    """Apply the model's output head (and final logit soft-capping where the model has it), in
    float32 whatever the model's dtype: at follow-up positions only, that costs little and keeps the
    logits of a half-precision model from being rounded before the log-softmax. Under autocast the
    head runs as it is: autocast casts its inputs to the autocast dtype whatever theirs (a weight
    already cast, :mod:`full_metric.research.frozen_casts`, is not cast again), the same numbers."""
    head = model.get_output_embeddings()
    if head.weight.dtype == torch.float32 or torch.is_autocast_enabled(hidden.device.type):
        logits = head(hidden)
    else:
        bias = None if getattr(head, "bias", None) is None else head.bias.float()
        logits = torch.nn.functional.linear(hidden.float(), head.weight.float(), bias)
    cap = getattr(model.config, "final_logit_softcapping", None)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    return logits


def _keep_keyword(model: Any) -> str | None:
    """The keyword by which the model's forward computes logits for the last positions only."""
    params = inspect.signature(model.forward).parameters
    return next((k for k in ("logits_to_keep", "num_logits_to_keep") if k in params), None)


def _generic_decoder_only(
    model: Any, contexts: Sequence[Sequence[int]], targets: Sequence[Sequence[int]], pad_id: int
) -> torch.Tensor:
    device = model.device
    pairs = [(i, j) for i in range(len(contexts)) for j in range(len(targets))]
    keep_keyword = _keep_keyword(model)
    vocab = model.get_output_embeddings().weight.shape[0]
    done: list[torch.Tensor] = []  # each chunk's sums, in pair order
    start = 0
    while start < len(pairs):
        # as many rows as keep the logits (rows x kept positions x vocabulary) within the budget
        end, shortest, width = start, None, 0
        while end < len(pairs):
            i, j = pairs[end]
            low = len(contexts[i]) if shortest is None else min(shortest, len(contexts[i]))
            wide = max(width, len(contexts[i]) + len(targets[j]))
            kept = wide - low + 1 if keep_keyword else wide
            if end > start and (end - start + 1) * kept * vocab > 4 * LOGIT_BUDGET:
                break
            shortest, width, end = low, wide, end + 1
        chunk = pairs[start:end]
        rows = [(*contexts[i], *targets[j]) for i, j in chunk]
        ids, mask = _pad(rows, pad_id, device)  # right padding: positions as in a row alone
        kwargs = {keep_keyword: width - shortest + 1} if keep_keyword else {}
        logits = model(input_ids=ids, attention_mask=mask, use_cache=False, **kwargs).logits
        lead = width - logits.shape[1]  # the positions before the first logit the model returned
        # the logit at position p predicts token p + 1: labels are the ids shifted by one, kept
        # at follow-up positions only
        labels = torch.full((len(chunk), logits.shape[1]), 0, dtype=torch.long)
        scored = torch.zeros(labels.shape, dtype=torch.bool)
        for r, (i, j) in enumerate(chunk):
            at = len(contexts[i]) - 1 - lead
            labels[r, at : at + len(targets[j])] = torch.tensor(list(targets[j]))
            scored[r, at : at + len(targets[j])] = True
        done.append(_masked_sum(_token_log_probs(logits, labels.to(device)), scored.to(device)))
        start = end
    return torch.cat(done).view(len(contexts), len(targets))  # pairs run context by context, target by target


#: Each engine in the form the scorer calls (``(sum, token count)`` pairs, under inference mode).
oracle_log_likelihoods = scored(oracle_sums)
packed_log_likelihoods = scored(packed_sums)
cached_log_likelihoods = scored(cached_sums)
generic_log_likelihoods = scored(generic_sums)
