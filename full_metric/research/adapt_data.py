"""The dialogs judge adaptation reads and the examples it trains on: sources read into whole dialogs
(the one row check), the held-out split every seed shares, and each dialog rendered as the scorer
renders it (its context encoded and truncated as the scorer does, the last turn as the follow-up),
batched for training."""

from __future__ import annotations

import importlib.util
import random
from typing import Iterable, Iterator, Sequence

import torch
from tqdm.auto import tqdm

from ..errors import UsageError
from ..files.dialog_files import check_row, open_rows
from ..scorer import FullScorer

#: The name that reads the conversations of the ``chitchat-dataset`` package (MIT) as a source.
CHITCHAT = "chitchat"
#: The held-out dialogs are at most this many (at least 200 held-out pairs need ``held_out`` x dialogs >= 200).
MAX_HELD_OUT = 500
#: The seed of the held-out split and the held-out pairs: one yardstick for every training seed.
HELD_OUT_SEED = 0


class AdaptError(UsageError):
    """Adaptation refused before any training step; the message says why."""


def chitchat_dialogs() -> list[list[str]]:
    """The conversations of the ``chitchat-dataset`` package (about 7,200; MIT): each a list of
    messages (a speaker's consecutive utterances joined by a space)."""
    if importlib.util.find_spec("chitchat_dataset") is None:
        raise AdaptError("the chitchat source needs the package: pip install --no-deps chitchat-dataset")
    import chitchat_dataset

    return [[m.strip() for m in conversation] for conversation in chitchat_dataset.ConversationDataset()]


def read_dialogs(sources: Sequence[str], *, split: str = "train") -> list[list[str]]:
    """Whole dialogs from each source: ``chitchat`` (the package), or a source of rows that
    :func:`~full_metric.files.dialog_files.open_rows` reads (JSON Lines, a JSON array, CSV, Parquet,
    ``hf:NAME`` with ``split``; ``context`` turns plus ``response`` when there is one). Each row is checked by the one row check; dialogs with fewer
    than two non-empty turns are left out."""
    dialogs: list[list[str]] = []
    for source in sources:
        if source == CHITCHAT:
            found = chitchat_dialogs()
        else:
            found = []
            for where, row, csv_row in open_rows(source, split=split, error=AdaptError, required="context"):
                context, response = check_row(row, where, csv_row=csv_row)  # type: ignore[arg-type]
                found.append([*context, *([response] if response else [])])
        dialogs += [[t for t in d if t.strip()] for d in found]
    return [d for d in dialogs if len(d) >= 2]


#: Characters kept of a turn per token of ``max_length`` before rendering (a context turn keeps its
#: end, a follow-up its start): far more than any tokenizer's longest token, so the cut never shortens
#: what the tokens keep, and a 14,843-word message is not tokenised whole to keep 512 tokens of it.
CHARS_PER_TOKEN = 16


def examples(
    scorer: FullScorer, dialogs: Iterable[list[str]], max_length: int
) -> Iterator[tuple[list[int], list[int]]]:
    """(input ids, labels) per example in the scorer's rendering, one at a time (:func:`training_example`):
    the last turn as a follow-up; an encoder-decoder gets one example per turn after the first."""
    for dialog in dialogs:
        for cut in range(1, len(dialog)) if scorer.loaded.is_encoder_decoder else [len(dialog) - 1]:
            yield training_example(scorer, dialog, cut, max_length)


def training_example(scorer: FullScorer, dialog: Sequence[str], cut: int, max_length: int) -> tuple[list[int], list[int]]:
    """The example of ``dialog[cut]`` as a follow-up to the turns before it: the context as the
    scorer encodes it (truncated as it truncates, from the left, to at most ``max_length`` tokens
    with its follow-up); an encoder-decoder's labels are exactly the follow-up's ids, a causal
    model's the whole sequence. Turns are cut to :data:`CHARS_PER_TOKEN` characters per token of
    ``max_length`` before rendering."""
    cap = CHARS_PER_TOKEN * max_length
    target = list(scorer.renderer.target_ids(dialog[cut][:cap]))[: max_length // 2]
    limit = min(scorer.context_limit([target]), max(1, max_length - len(target)))
    context = list(scorer.renderer.encode([t[-cap:] for t in dialog[:cut]], limit).context_ids)
    if scorer.loaded.is_encoder_decoder:
        return context, target
    return context + target, context + target


def budgeted(examples: Iterable[tuple[list[int], list[int]]], max_tokens: int, encoder_decoder: bool,
              progress: bool) -> tuple[list[tuple[list[int], list[int]]], int]:
    """The examples in order until ``max_tokens`` tokens are taken (preparation stops there: the
    rest is never rendered), and how many tokens they hold; a progress bar of the tokens prepared."""
    taken, tokens = [], 0
    with tqdm(total=max_tokens, disable=not progress, desc="preparing", unit="token") as bar:
        for example in examples:
            if tokens >= max_tokens:
                break
            size = len(example[0]) + (len(example[1]) if encoder_decoder else 0)
            taken.append(example)
            tokens += size
            bar.update(min(size, max_tokens - bar.n))
    return taken, tokens


def batches(examples: list[tuple[list[int], list[int]]], size: int, pad: int) -> list[dict[str, torch.Tensor]]:
    out = []
    for start in range(0, len(examples), size):
        chunk = examples[start : start + size]
        width = max(len(i) for i, _ in chunk)
        labels = max(len(t) for _, t in chunk)
        out.append({
            "input_ids": torch.tensor([i + [pad] * (width - len(i)) for i, _ in chunk]),
            "attention_mask": torch.tensor([[1] * len(i) + [0] * (width - len(i)) for i, _ in chunk]),
            "labels": torch.tensor([t + [-100] * (labels - len(t)) for _, t in chunk]),
        })
    return out


def batch_tokens(batch: dict[str, torch.Tensor]) -> int:
    return int(batch["attention_mask"].sum()) + (0 if batch["labels"].shape == batch["input_ids"].shape
                                                  else int((batch["labels"] != -100).sum()))


def split_held_out(dialogs: list[list[str]]) -> random.Random:
    """Shuffle ``dialogs`` in place into :func:`adapt`'s order, whose first ``round(len * held_out)``
    (at most :data:`MAX_HELD_OUT`) are the held-out dialogs of every run; returns the generator, to go on
    with for seed :data:`HELD_OUT_SEED`."""
    rng = random.Random(HELD_OUT_SEED)
    rng.shuffle(dialogs)
    return rng


def held_out_size(dialogs: int, held_out: float) -> int:
    """How many of ``dialogs`` dialogs :func:`adapt` holds out: the share ``held_out``, at least one,
    at most :data:`MAX_HELD_OUT`."""
    return max(1, min(MAX_HELD_OUT, round(dialogs * held_out)))


def held_out_dialogs(sources: Sequence[str], held_out: float) -> list[list[str]]:
    """The dialogs :func:`adapt` holds out of training for these sources and ``held_out``: what a
    measurement of its judges may use without testing on their training data."""
    dialogs = read_dialogs(sources)
    split_held_out(dialogs)
    return dialogs[: held_out_size(len(dialogs), held_out)]
