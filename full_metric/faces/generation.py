"""Generation for the training face: what the model being trained reads (its prompt, cut as the judge
cuts), what it is taught to answer, and its answers to held-out contexts, read by the one response
rule (:func:`full_metric.answers.response_of`)."""

from __future__ import annotations

from typing import Any, Sequence

import torch

from .. import answers as answer_rules
from ..errors import UsageError
from ..models import max_positions
from ..rendering import (
    Renderer, chat_messages, cut_whole_turns, default_rendering, encode_text, speaker_lines, template_needs_user_first,
)

#: The context a rank with no context of its own generates for, so that every rank calls
#: ``generate`` the same number of times (its answer is discarded).
FILLER_CONTEXT = ("Hi!",)


def prompt_text(tokenizer: Any, turns: Sequence[str], config: Any, user_first: bool | None = None) -> str:
    """What the model being trained (``config``: its ``model.config``) reads to answer: its chat
    template where the tokenizer has one (the last turn the user's; a strict template gets the
    judge's user-first placeholder, :func:`~full_metric.rendering.chat_messages`), else FULL's
    rendering of the dialog for its model type (BlenderBot's own format for BlenderBot; ``B:``
    answers ``A:`` for decoder-only). ``user_first``: the template's answer to
    :func:`~full_metric.rendering.template_needs_user_first`, when the caller asked it once for
    many prompts (``None``: asked here)."""
    if getattr(tokenizer, "chat_template", None):
        if user_first is None:
            user_first = template_needs_user_first(tokenizer)
        messages = chat_messages(turns, "user", user_first)
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    if config.is_encoder_decoder:
        rendering = default_rendering(config.model_type, getattr(tokenizer, "name_or_path", ""), True)
        return Renderer(tokenizer, rendering, True).context_text(turns)
    return speaker_lines(turns, "B")


def answer_text(tokenizer: Any, turns: Sequence[str], response: str, config: Any, user_first: bool | None = None) -> str:
    """The text that follows :func:`prompt_text` when the trained model answers ``response``: with a
    chat template, the answer as the template closes an assistant turn (its end-of-turn token, such as
    Gemma's ``<end_of_turn>`` or ChatML's ``<|im_end|>``, not the end-of-text token); otherwise the
    response after a space, closed by the end-of-text token."""
    if not getattr(tokenizer, "chat_template", None) or config.is_encoder_decoder:
        return " " + response + (tokenizer.eos_token or "")
    if user_first is None:
        user_first = template_needs_user_first(tokenizer)
    prompt = prompt_text(tokenizer, turns, config, user_first)
    whole = tokenizer.apply_chat_template([*chat_messages(turns, "user", user_first),
                                           {"role": "assistant", "content": response}], tokenize=False)
    if not whole.startswith(prompt):
        raise UsageError(f"tokenizer {getattr(tokenizer, 'name_or_path', '')!r}: its chat template writes the answered "
                         "conversation differently from the prompt it writes, so the answer's text cannot be cut out")
    return whole[len(prompt) :]


def prompt_limit(model: Any, tokenizer: Any, max_new_tokens: int) -> int:
    """The most prompt tokens the model being trained reads: its positions (and its tokenizer's
    limit), less the new tokens for a decoder-only model."""
    limit = max_positions(model.config, tokenizer)
    declared = getattr(tokenizer, "model_max_length", None)
    if isinstance(declared, int) and 0 < declared < limit:
        limit = declared
    if not model.config.is_encoder_decoder:
        limit -= max_new_tokens
    if limit < 1:
        raise UsageError(f"{max_new_tokens} new tokens leave no room for a prompt within the model's {limit + max_new_tokens} "
                         "positions: lower max_new_tokens")
    return limit


def check_generation_tokenizer(tokenizer: Any) -> None:
    """A tokenizer the callback can generate with: it has a padding or an end-of-text token."""
    if tokenizer is None:
        raise UsageError("the callback needs the trained model's tokenizer: pass tokenizer= or the Trainer's "
                         "processing_class")
    if tokenizer.pad_token_id is None and tokenizer.eos_token_id is None:
        raise UsageError(f"tokenizer {getattr(tokenizer, 'name_or_path', '')!r} has neither a padding nor an "
                         "end-of-text token: generation cannot pad a batch or stop; set tokenizer.pad_token")


def prompt_ids(model: Any, tokenizer: Any, contexts: Sequence[Sequence[str]], max_new_tokens: int) -> list[list[int]]:
    """Each context's prompt as token ids, cut from the left to :func:`prompt_limit` (the newest
    turn kept; special tokens the tokenizer adds stay), by the judge's own truncation
    (:func:`~full_metric.rendering.encode_text`); a chat template is cut between whole turns, as the
    judge cuts it, so its opening stays (a last turn longer than the limit alone keeps its end)."""
    limit = prompt_limit(model, tokenizer, max_new_tokens)
    special = not getattr(tokenizer, "chat_template", None)  # a chat template writes its own special tokens
    user_first = template_needs_user_first(tokenizer)  # asked once for all the prompts
    out = []
    for context in contexts:
        text = prompt_text(tokenizer, context, model.config, user_first)
        encoded = encode_text(tokenizer, text, limit, special)
        ids = list(encoded.context_ids)
        if not special and encoded.dropped_tokens:  # a chat template is cut between whole turns, its opening kept
            def rendered(kept: Sequence[str]) -> list[int]:
                return list(tokenizer(prompt_text(tokenizer, kept, model.config, user_first),
                                      add_special_tokens=False)["input_ids"])

            found = cut_whole_turns(rendered, context, limit)
            ids = found[0] if found else ids  # a last turn too long alone keeps its end
        if special and not model.config.is_encoder_decoder:  # a decoder-only prompt ends where the answer starts
            while len(ids) > 1 and ids[-1] == tokenizer.eos_token_id:
                ids.pop()
        out.append(ids)
    return out


@torch.no_grad()
def generate_responses(
    model: Any, tokenizer: Any, contexts: Sequence[Sequence[str]], generation_kwargs: dict[str, Any] | None = None,
    batch_size: int = 8, *, batches: int | None = None, prompts: list[str] | None = None,
) -> list[str]:
    """The model's answer to each context (greedy unless ``generation_kwargs`` say otherwise), as
    :func:`full_metric.answers.response_of` reads a generation; the model's mode (training or eval)
    is restored afterwards.

    Prompts longer than the model's positions lose their oldest tokens. A batch is padded (on the
    left for a decoder-only model) with the padding token, or the end-of-text token where there is
    none; the tokenizer is read, never changed. ``batches``: call ``generate`` this many times
    (at least as many as the contexts need; the extra calls answer :data:`FILLER_CONTEXT`, discarded),
    so that every rank of a distributed run calls it equally often. ``prompts``: a list that
    receives each context's prompt as the model read it (decoded)."""
    check_generation_tokenizer(tokenizer)
    encoder_decoder = bool(model.config.is_encoder_decoder)
    kwargs = {"max_new_tokens": 32, "do_sample": False, **(generation_kwargs or {})}
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    needed = -(-len(contexts) // batch_size)
    batches = needed if batches is None else batches
    if batches < needed:
        raise UsageError(f"{len(contexts)} contexts need {needed} batches of {batch_size}, not {batches}")
    chunks = [list(contexts[k * batch_size : (k + 1) * batch_size]) or [list(FILLER_CONTEXT)] for k in range(batches)]
    was_training = model.training
    model.eval()
    answers: list[str] = []
    try:
        for k, chunk in enumerate(chunks):
            ids = prompt_ids(model, tokenizer, chunk, kwargs["max_new_tokens"])
            width = max(len(i) for i in ids)
            # a decoder-only prompt ends where generation starts: pad on the left; an encoder reads from
            # the first position: pad on the right
            side = (lambda row, fill: row + fill) if encoder_decoder else (lambda row, fill: fill + row)
            rows = [side(i, [pad] * (width - len(i))) for i in ids]
            mask = [side([1] * len(i), [0] * (width - len(i))) for i in ids]
            batch = {"input_ids": torch.tensor(rows, device=model.device),
                     "attention_mask": torch.tensor(mask, device=model.device)}
            out = model.generate(**batch, pad_token_id=pad, **kwargs)
            if k >= needed:
                continue  # a filler batch: called for the other ranks' sake
            if prompts is not None:
                prompts.extend(tokenizer.batch_decode(ids))
            new = out if encoder_decoder else out[:, width:]
            answers += [answer_rules.response_of(t) for t in tokenizer.batch_decode(new, skip_special_tokens=True)]
    finally:
        model.train(was_training)
    return answers
