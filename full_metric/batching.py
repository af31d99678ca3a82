"""Scoring many dialogs in batches: length-sorted (longest first, so memory trouble shows at once),
within a batch size and a padded-token budget, input order restored; out of memory on any device,
both limits are halved and the batch is tried again."""

from __future__ import annotations

import logging
from typing import Any

import torch
from tqdm.auto import tqdm

from .engines import Engine
from .loglik import LogLik

logger = logging.getLogger(__name__)


def is_out_of_memory(error: BaseException) -> bool:
    """Whether ``error`` is an out-of-memory error of any device torch runs on (CUDA, MPS, CPU...)."""
    if isinstance(error, torch.OutOfMemoryError):
        return True
    text = str(error).lower()
    return isinstance(error, RuntimeError) and any(
        s in text for s in ("out of memory", "can't allocate memory", "not enough memory", "failed to allocate")
    )


def score_in_batches(engine: Engine, model: Any, contexts: list[tuple[int, ...]], targets: list[tuple[int, ...]],
                     pad_id: int, encoder_decoder: bool, batch_size: int, max_batch_tokens: int,
                     show: bool) -> list[list[LogLik]]:
    """Length-sorted batches (longest first, so memory trouble shows at once) of at most
    ``batch_size`` dialogs and ``max_batch_tokens`` padded tokens; input order restored.
    Out of memory (on any device), both limits are halved and the batch is tried again."""
    order = sorted(range(len(contexts)), key=lambda i: -len(contexts[i]))
    budget = max_batch_tokens
    out: list[list[LogLik]] = [[] for _ in contexts]
    done = 0
    with tqdm(total=len(contexts), disable=not show, desc="FULL", unit="dialog") as bar:
        while done < len(order):
            # the longest dialog of this batch
            width = engine.tokens(encoder_decoder, len(contexts[order[done]]), targets)
            rows = max(1, min(batch_size, budget // width))
            chunk = order[done : done + rows]
            try:
                values = engine.score(model, [contexts[i] for i in chunk], targets, pad_id)
            except (torch.OutOfMemoryError, RuntimeError) as error:
                if len(chunk) == 1 or not is_out_of_memory(error):
                    raise
                batch_size, budget = max(1, len(chunk) // 2), max(1, budget // 2)
                logger.warning("out of memory: batch size lowered to %d", batch_size)
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()
                continue
            for i, v in zip(chunk, values):
                out[i] = v
            done += len(chunk)
            bar.update(len(chunk))
    return out
