"""Protects judge adaptation (``full-metric adapt``): on tiny models, offline, a causal and a
seq2seq judge trained with LoRA and with full fine-tuning lower their held-out loss on repeated
text, write a folder FullScorer loads, whose signature names the adaptation and whose scores
differ from the base model's; bad input and untrainable models are refused before any training
step; an interrupted run leaves no folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from full_metric import FullScorer
from full_metric.cli import main
from full_metric.research.adapt import AdaptError, adapt, read_dialogs

DIALOG = {"context": ["Hi! How was your weekend?", "Great, I went hiking. And yours?"],
          "response": "Lovely, we baked bread and walked the dog."}
CONTEXTS, RESPONSES = [["Hi! How was your weekend?"], ["Do you cook?"]], ["Great, I went hiking.", "Not really."]


@pytest.fixture(scope="module")
def repeated(tmp_path_factory) -> Path:
    """Forty copies of one dialog: text a judge can learn in a few steps."""
    path = tmp_path_factory.mktemp("dialogs") / "repeated.jsonl"
    path.write_text("".join(json.dumps(DIALOG) + "\n" for _ in range(40)), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def llama_folder(tmp_path_factory, tiny_models, tokenizer) -> Path:
    folder = tmp_path_factory.mktemp("llama")
    tiny_models["llama"].save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.parametrize("kind, method", [("causal", "lora"), ("seq2seq", "lora"), ("causal", "full"),
                                          ("seq2seq", "full")])
def test_an_adapted_judge_learns_loads_and_names_its_adaptation(kind, method, repeated, llama_folder,
                                                               tiny_blenderbot_path, tmp_path):
    base = str(llama_folder if kind == "causal" else tiny_blenderbot_path)
    out = tmp_path / "judge"
    done = adapt(base, [str(repeated)], out, method=method, max_tokens=4000, batch_size=4, held_out=0.1,
                 learning_rate=5e-3 if method == "lora" else 1e-3, lora_rank=4, progress=False)
    assert done.held_out_loss_after < done.held_out_loss_before
    assert done.training_tokens <= 4000 + 200 and done.steps >= 2
    assert {"adaptation.json", "README.md", "config.json"} <= {p.name for p in out.iterdir()}
    assert not any(p.name.startswith(".judge") for p in tmp_path.iterdir())
    adapted, original = FullScorer(str(out), progress=False), FullScorer(base, progress=False)
    assert f"|model:judge@sha256:" in adapted.signature() and f"+adapted:{done.digest}|" in adapted.signature()
    assert adapted.rendering == original.rendering == done.rendering
    assert adapted.score(CONTEXTS, RESPONSES).scores != pytest.approx(original.score(CONTEXTS, RESPONSES).scores)
    card = (out / "README.md").read_text()
    assert f"{done.held_out_loss_after:.4f}" in card and done.base_model in card and str(done.training_tokens) in card


def test_the_command_line_adapts(repeated, tiny_blenderbot_path, tmp_path, capsys):
    out = tmp_path / "cli-judge"
    assert main(["adapt", str(repeated), "-o", str(out), "--model", str(tiny_blenderbot_path), "--method", "lora",
                 "--max-tokens", "3000", "--held-out", "0.1", "--learning-rate", "5e-3", "--lora-rank", "4",
                 "--seed", "1", "--batch-size", "4", "--max-length", "64", "--no-progress"]) == 0
    assert "held-out loss" in capsys.readouterr().err
    record = json.loads((out / "adaptation.json").read_text())
    assert record["seed"] == 1 and record["lora_rank"] == 4 and record["max_tokens"] == 3000
    assert record["max_length"] == 64
    assert main(["adapt", str(repeated), "-o", str(out), "--model", str(tiny_blenderbot_path)]) == 2  # exists


def test_the_chitchat_package_is_a_source():
    pytest.importorskip("chitchat_dataset")
    dialogs = read_dialogs(["chitchat"])
    assert len(dialogs) > 4000 and all  # of 7,168 conversations, 4,018 have two messages or more(len(d) >= 2 and all(t.strip() for t in d) for d in dialogs)


# -- refused before any training step ------------------------------------------------------------
@pytest.fixture
def no_training(monkeypatch):
    monkeypatch.setattr(torch.optim.AdamW, "step", lambda *a, **k: pytest.fail("a training step was taken"))


def test_no_usable_dialog_is_refused(tmp_path, tiny_blenderbot_path, no_training):
    src = tmp_path / "short.jsonl"
    src.write_text(json.dumps({"context": ["Only one turn."]}) + "\n")
    with pytest.raises(AdaptError, match="no usable dialog"):
        adapt(str(tiny_blenderbot_path), [str(src)], tmp_path / "j", progress=False)


def test_a_budget_smaller_than_one_batch_is_refused(repeated, tiny_blenderbot_path, tmp_path, no_training):
    with pytest.raises(AdaptError, match="budget of 10 tokens is smaller than one batch"):
        adapt(str(tiny_blenderbot_path), [str(repeated)], tmp_path / "j", max_tokens=10, progress=False)
    assert not (tmp_path / "j").exists()


def test_a_gguf_judge_without_gguf_is_refused(repeated, tmp_path, monkeypatch, no_training):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "gguf" else real(name, *a))
    with pytest.raises(AdaptError, match="needs the gguf package"):
        adapt("some/folder", [str(repeated)], tmp_path / "j", gguf_file="model.gguf", progress=False)


def test_a_model_without_a_training_path_is_refused(repeated, tiny_models, tokenizer, tmp_path, no_training):
    """A forward that computes no gradient (an inference-only path, as some recurrent models have)."""
    model = type(tiny_models["gpt2"])(tiny_models["gpt2"].config)
    model.forward = torch.no_grad()(model.forward)
    with pytest.raises(AdaptError, match="no loss with a gradient.*cannot be trained"):
        adapt(model, [str(repeated)], tmp_path / "j", tokenizer=tokenizer, method="full", progress=False)
    assert not (tmp_path / "j").exists()


def test_an_interrupted_adaptation_leaves_no_folder(repeated, tiny_blenderbot_path, tmp_path, monkeypatch):
    real, steps = torch.optim.AdamW.step, []

    def interrupted(self, *args, **kwargs):
        steps.append(1)
        if len(steps) == 2:
            raise KeyboardInterrupt
        return real(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.AdamW, "step", interrupted)
    with pytest.raises(KeyboardInterrupt):
        adapt(str(tiny_blenderbot_path), [str(repeated)], tmp_path / "judge", max_tokens=4000, batch_size=4,
              progress=False)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_a_gguf_judge_is_adapted_and_saved(smollm2_gguf, repeated, tmp_path):
    """The measurement's path: SmolLM2 from its GGUF file (de-quantized), adapted and written as a
    plain folder that loads (before, saving refused: "quantized with gguf and is not serializable")."""
    out = tmp_path / "smollm2-judge"
    done = adapt(str(smollm2_gguf), [str(repeated)], out, max_tokens=600, batch_size=4, held_out=0.1,
                 max_length=64, progress=False)
    assert done.held_out_loss_after < done.held_out_loss_before and done.rendering == "chat_template"
    adapted = FullScorer(str(out), progress=False)
    assert f"+adapted:{done.digest}|" in adapted.signature() and adapted.rendering == "chat_template"
