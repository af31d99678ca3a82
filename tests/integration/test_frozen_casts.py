"""Protects the frozen weights cast once for a training loop (``research/frozen_casts.py``): a LoRA
run under bfloat16 autocast trains the very same judge, to the last bit, as the same run whose frozen
weights autocast casts at every call (the oracle: the loop before the option), on a causal model with
its own head, one with a head tied to its embeddings (Gemma 3: soft-capping, scaled embeddings,
windows), GPT-2 (Conv1D layers, not ``nn.Linear``) and an encoder-decoder; both objectives; and the
model holds its own float32 parameters again after the loop."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from full_metric.research import adapt as adapt_module
from full_metric.research.adapt import adapt
from full_metric.research.frozen_casts import cast_frozen_linears


@pytest.fixture(scope="module")
def dialogs(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("casts") / "dialogs.jsonl"
    rows = [{"context": [f"ping {d + t}" if t % 2 == 0 else f"pong {d + t - 1}" for t in range(5)],
             "response": f"pong {d + 4}"} for d in range(60)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def folders(tmp_path_factory, tiny_models, tokenizer, tiny_blenderbot_path) -> dict[str, Path]:
    saved = {"blenderbot": tiny_blenderbot_path}
    for family in ("llama", "gemma3", "gpt2"):
        saved[family] = tmp_path_factory.mktemp(family)
        tiny_models[family].save_pretrained(saved[family])
        tokenizer.save_pretrained(saved[family])
    return saved


def _at_every_call(monkeypatch) -> None:
    """The oracle: both training loops with the frozen weights cast by autocast at every call."""
    for name in ("_train_on_pairs", "_train_on_dialogs"):
        real = getattr(adapt_module, name)
        monkeypatch.setattr(adapt_module, name, lambda *a, _real=real, **k: _real(*a, **k, cast_once=False))


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


@pytest.mark.parametrize("objective", ["complaints", "dialogs"])
@pytest.mark.parametrize("family", ["llama", "gemma3", "gpt2", "blenderbot"])
def test_cast_once_trains_the_judge_autocast_trains(family, objective, folders, dialogs, tmp_path, monkeypatch):
    settings = dict(objective=objective, max_pairs=16, max_tokens=1500, batch_size=4, held_out=0.1,
                    learning_rate=5e-3, lora_rank=4, progress=False, autocast="bfloat16", seed=1)
    once = adapt(str(folders[family]), [str(dialogs)], tmp_path / "once", **settings)
    _at_every_call(monkeypatch)
    every = adapt(str(folders[family]), [str(dialogs)], tmp_path / "every", **settings)
    assert once.autocast == "bfloat16" and once.steps == every.steps >= 4
    assert once.digest == every.digest
    assert (once.held_out_loss_after, once.held_out_pair_accuracy_after) == (every.held_out_loss_after,
                                                                             every.held_out_pair_accuracy_after)
    a, b = _weights(tmp_path / "once"), _weights(tmp_path / "every")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], v) for k, v in _weights(folders[family]).items() if k in a)  # it did train


def test_the_model_gets_its_float32_parameters_back(tiny_models):
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(tiny_models["gemma3"].__class__(tiny_models["gemma3"].config),
                           LoraConfig(r=4, target_modules="all-linear", task_type="CAUSAL_LM"))
    head, embedding = model.get_output_embeddings(), model.get_input_embeddings()
    assert head.weight is embedding.weight  # tied
    before = {n: p for n, p in model.named_parameters(remove_duplicate=False)}
    with cast_frozen_linears(model, None) as cast:
        assert cast == 0
    frozen = [m for m in model.modules() if isinstance(m, torch.nn.Linear) and not m.weight.requires_grad]
    assert head in frozen
    with cast_frozen_linears(model, torch.bfloat16) as cast:
        assert cast == len(frozen) and all(m.weight.dtype == torch.bfloat16 for m in frozen)
        assert model.dtype == torch.float32
        assert embedding.weight.dtype == torch.float32 and head.weight.dtype == torch.bfloat16
        assert all(p.dtype == torch.float32 for n, p in model.named_parameters() if p.requires_grad)
    after = {n: p for n, p in model.named_parameters(remove_duplicate=False)}
    assert after.keys() == before.keys() and all(after[n] is before[n] for n in before)
    assert head.weight is embedding.weight
