"""Issue 62, 6: cast_frozen_linears leaves alone the layer that holds the model's first parameter (the model's
own code reads its dtype from it), also when that layer is a frozen Linear; every other frozen Linear is cast
within the block and gets its float32 parameters back after it. A unit test of seconds, on a hand-made model."""

from __future__ import annotations

import torch

from full_metric.research.frozen_casts import cast_frozen_linears


class _Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = torch.nn.Linear(4, 4)  # the first parameter: a frozen Linear
        self.middle = torch.nn.Linear(4, 4)
        self.trained = torch.nn.Linear(4, 2)
        for p in (*self.first.parameters(), *self.middle.parameters()):
            p.requires_grad_(False)

    @property
    def dtype(self) -> torch.dtype:  # as PreTrainedModel.dtype: the first parameter's
        return next(self.parameters()).dtype


def test_the_layer_of_the_first_parameter_keeps_it_and_the_others_are_cast_then_put_back():
    model = _Model()
    before = {name: p for name, p in model.named_parameters()}
    with cast_frozen_linears(model, torch.bfloat16) as cast:
        assert cast == 1 and model.dtype == torch.float32
        assert model.first.weight is before["first.weight"] and model.middle.weight.dtype == torch.bfloat16
        assert model.middle.bias.dtype == torch.bfloat16 and model.trained.weight is before["trained.weight"]
    assert {name: p for name, p in model.named_parameters()} == before  # the very parameters, back
    with cast_frozen_linears(model, None) as cast:
        assert cast == 0
