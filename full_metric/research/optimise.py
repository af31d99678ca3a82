"""The optimisation loop of judge adaptation: AdamW, the learning-rate schedule, and checkpoints
that let a killed run continue to the judge an uninterrupted run would have made.

A checkpoint holds the trainable weights, the optimiser's and the schedule's states, the random
number generators' states (LoRA's dropout draws from torch's), the steps done, what was measured
before training, and a fingerprint of the run's settings: a run resumes only from a checkpoint of
the same settings. It is written under a temporary name and renamed, so a kill while writing
leaves the previous checkpoint whole.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

import torch
from transformers import get_constant_schedule_with_warmup, get_linear_schedule_with_warmup

from ..errors import UsageError
from ..models import release_freed_memory
from .adapt_options import SCHEDULES

logger = logging.getLogger(__name__)

def weights_digest(model: Any) -> str:
    """SHA-256 of the trainable weights' bytes, in name order: equal only for the very same weights (a resumed
    run against an uninterrupted one; the training benchmark's modes against each other)."""
    digest = hashlib.sha256()
    for name, weight in sorted(model.named_parameters()):
        if weight.requires_grad:
            digest.update(name.encode() + weight.detach().float().contiguous().cpu().numpy().tobytes())
    return digest.hexdigest()[:16]


WARMUP_SHARE = 0.05
CONSTANT_WARMUP = 10


def warmup_steps(schedule: str, steps: int) -> int:
    """The warm-up of ``schedule`` over ``steps`` optimisation steps."""
    return CONSTANT_WARMUP if schedule == "constant" else max(1, round(WARMUP_SHARE * steps))


def fingerprint(settings: dict[str, Any]) -> str:
    """The digest of a run's settings that a checkpoint must share to be resumed."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:16]


class Run:
    """One pass of optimisation steps over a judge's trainable parameters, checkpointed every
    ``every`` steps to ``checkpoint`` (``None``: never) and resumed from it when it exists; after each
    step the memory it freed goes back to the system (``release_memory``, :func:`release_freed_memory`)."""

    def __init__(self, judge: Any, *, rate: float, steps: int, schedule: str, checkpoint: Path | None,
                 every: int, settings: dict[str, Any], release_memory: bool = True) -> None:
        if schedule not in SCHEDULES:
            raise UsageError(f"unknown schedule {schedule!r}; choose one of {SCHEDULES}")
        self.judge, self.steps, self.checkpoint, self.every = judge, steps, checkpoint, max(1, every)
        self.release_memory = release_memory
        self.fingerprint = fingerprint(settings)
        self.trainable = {n: p for n, p in judge.named_parameters() if p.requires_grad}
        self.optimizer = torch.optim.AdamW(list(self.trainable.values()), lr=rate)
        warm = warmup_steps(schedule, steps)
        self.schedule = (get_constant_schedule_with_warmup(self.optimizer, warm) if schedule == "constant"
                         else get_linear_schedule_with_warmup(self.optimizer, warm, steps))
        self.done = 0
        self.measured: dict[str, Any] = {}
        self.seconds = 0.0

    def resume(self) -> bool:
        """Load the checkpoint if there is one (refused when made with other settings); whether it was."""
        if self.checkpoint is None or not self.checkpoint.exists():
            return False
        state = torch.load(self.checkpoint, map_location="cpu", weights_only=False)
        if state["fingerprint"] != self.fingerprint:
            raise UsageError(f"the checkpoint {self.checkpoint} was made by a run with other settings "
                             f"({state['fingerprint']} vs {self.fingerprint}); delete it or repeat that run's command")
        with torch.no_grad():
            for name, value in state["trainable"].items():
                self.trainable[name].copy_(value)
        self.optimizer.load_state_dict(state["optimizer"])
        self.schedule.load_state_dict(state["schedule"])
        torch.set_rng_state(state["torch_rng"])
        if torch.cuda.is_available() and state.get("cuda_rng") is not None:
            torch.cuda.set_rng_state_all(state["cuda_rng"])
        self.done, self.measured, self.seconds = state["step"], state["measured"], state["seconds"]
        logger.info("resumed from %s at step %d of %d", self.checkpoint, self.done, self.steps)
        return True

    def step(self, loss: torch.Tensor, seconds: float = 0.0) -> None:
        """One step: backward, gradients clipped to norm 1, optimiser and schedule step, gradients
        dropped; a checkpoint every ``every`` steps (not after the last: the judge is written then)."""
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.judge.parameters(), 1.0)
        self.optimizer.step()
        self.schedule.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.release_memory:
            release_freed_memory()
        self.done += 1
        self.seconds += seconds
        if self.checkpoint is not None and self.done % self.every == 0 and self.done < self.steps:
            self.save()

    def save(self) -> None:
        """Write the checkpoint under a temporary name, then rename it over the last one."""
        assert self.checkpoint is not None
        state = {
            "fingerprint": self.fingerprint, "step": self.done, "measured": self.measured, "seconds": self.seconds,
            "trainable": {n: p.detach().cpu() for n, p in self.trainable.items()},
            "optimizer": self.optimizer.state_dict(), "schedule": self.schedule.state_dict(),
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
        }
        self.checkpoint.parent.mkdir(parents=True, exist_ok=True)
        partial = self.checkpoint.with_name(self.checkpoint.name + ".partial")
        torch.save(state, partial)
        os.replace(partial, self.checkpoint)

    def finish(self) -> None:
        """The run is written: its checkpoint goes."""
        if self.checkpoint is not None:
            self.checkpoint.unlink(missing_ok=True)
