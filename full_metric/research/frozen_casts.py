"""Frozen weights cast once for a training loop under autocast, not at every call.

Under ``torch.autocast`` a linear layer casts its float32 weight to the autocast dtype at each call,
and autocast's cache keeps only the casts of trainable leaves: a LoRA judge's frozen weights are cast
afresh by every forward (on Gemma-3-270M the tied 262,144-token output head alone, nine times a
step), and each cast is kept for the backward. :func:`cast_frozen_linears` gives each frozen
``nn.Linear`` its weight (and bias) already in the autocast dtype for the length of the loop and
puts the float32 parameters back after it. The numbers are the same to the last bit: a cast is a
rounding that gives the same tensor each time, and autocast leaves a tensor already in its dtype as
it is (``tests/integration/test_frozen_casts.py`` trains both ways and compares the weights exactly).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import torch


@contextmanager
def cast_frozen_linears(model: Any, dtype: torch.dtype | None) -> Iterator[int]:
    """Within the block, every frozen float32 ``nn.Linear`` of ``model`` holds its weight and bias cast to
    ``dtype`` (``None``: no autocast, nothing changes); yields how many layers were cast. A weight the
    layer shares with another module (a tied output head) is replaced in the layer only: the other
    module keeps the float32 parameter. The module that holds the model's first parameter, which the
    model's own code reads for its dtype (``PreTrainedModel.dtype``), keeps it."""
    swapped: list[tuple[torch.nn.Module, str, torch.nn.Parameter]] = []
    if dtype is not None and dtype != torch.float32:
        first = next(iter(model.named_parameters()), None)
        owner = model.get_submodule(first[0].rpartition(".")[0]) if first else None  # holds the first parameter
        for module in model.modules():
            if not isinstance(module, torch.nn.Linear) or module is owner or module.weight.requires_grad:
                continue
            for name in ("weight", "bias"):
                value = getattr(module, name)
                if value is not None and not value.requires_grad and value.dtype == torch.float32:
                    swapped.append((module, name, value))
                    setattr(module, name, torch.nn.Parameter(value.detach().to(dtype), requires_grad=False))
    try:
        yield sum(name == "weight" for _, name, _ in swapped)
    finally:
        for module, name, value in reversed(swapped):
            setattr(module, name, value)
