"""What the training examples (train_with_full.py, grpo_with_full.py) share: the policy loaded to
train (a GGUF de-quantized to plain weights), and training and held-out dialogs: from ``chitchat`` (the chitchat-dataset package's conversations, MIT: training only, never for
evaluation against people) or JSON Lines rows (``context`` turns and ``response``), split by
conversation with a seed, so that no held-out conversation is trained on."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

from full_metric.research.adapt_data import read_dialogs


def load_policy(name: str, gguf_file: str | None = None) -> tuple[Any, Any]:
    """The model to train and its tokenizer, in float32; a GGUF file is de-quantized at load, and
    its weights are then plain ones (the Trainer refuses a model still marked as quantized)."""
    gguf = {"gguf_file": gguf_file} if gguf_file else {}
    tokenizer = AutoTokenizer.from_pretrained(name, **gguf)  # used as it is: FULL pads with EOS if need be
    auto = AutoModelForSeq2SeqLM if AutoConfig.from_pretrained(name, **gguf).is_encoder_decoder else AutoModelForCausalLM
    model = auto.from_pretrained(name, dtype=torch.float32, **gguf)
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer, model.is_quantized, model.quantization_method = None, False, None
        if getattr(model.config, "quantization_config", None) is not None:
            del model.config.quantization_config
    return model, tokenizer


def loadable(model: Any, tokenizer: Any, folder: str | Path) -> None:
    """Make the policy reloadable from its own config: TRL builds GRPO's reference model (``beta`` > 0)
    by loading ``model.config._name_or_path`` again, and a GGUF policy's folder has no ``config.json``.
    Such a policy is written, as the plain weights it was de-quantized to, to ``folder``, which it then
    names. A policy that names a loadable folder or a Hub id is left as it is."""
    source = Path(model.config._name_or_path)
    if not source.exists() or (source / "config.json").is_file():
        return
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    model.config._name_or_path = model.name_or_path = str(folder)


def cut(dialog: list[str], rng: random.Random, max_turns: int) -> tuple[list[str], str]:
    """A context (at most ``max_turns`` of the latest turns) and the real next turn, cut at a random place."""
    k = rng.randint(1, len(dialog) - 1)
    return dialog[max(0, k - max_turns) : k], dialog[k]


def split(source: str, held_out: int, seed: int = 0, max_turns: int = 4) -> tuple[list[dict], list[dict]]:
    """(training rows, held-out rows), each row ``{"context": [...], "response": "..."}``: one cut
    per dialog; the last ``held_out`` dialogs of a seeded shuffle are held out (0: all train). A
    JSON Lines file's rows are kept whole (``context`` and ``response`` as written)."""
    rng = random.Random(seed)
    if source == "chitchat":
        dialogs = read_dialogs([source])
        rng.shuffle(dialogs)
        rows = [dict(zip(("context", "response"), cut(d, rng, max_turns))) for d in dialogs]
    else:
        rows = [{"context": d[:-1], "response": d[-1]} for d in read_dialogs([source])]
    if held_out >= len(rows):
        raise ValueError(f"{source} has {len(rows)} dialogs: too few to hold {held_out} out")
    return (rows[: len(rows) - held_out], rows[len(rows) - held_out :]) if held_out else (rows, [])
