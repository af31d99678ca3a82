"""An adapted judge's folder: what the adaptation did (:class:`Adaptation`, its digest), the merged
weights and tokenizer, the LoRA adapter alone when asked (peft format, float16), ``adaptation.json``
and the model card, written under a temporary name and renamed."""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..model_sources import packaged_name_of_file
from ..models import ADAPTATION_FILE

#: The folder of the adapter alone inside a judge written with ``save_adapter``.
ADAPTER_FOLDER = "adapter"
#: Fields of :class:`Adaptation` that only the ``complaints`` objective sets: left out of a
#: ``dialogs`` adaptation's digest, which stays what it was before they existed.
COMPLAINT_FIELDS = ("objective", "pairs", "held_out_pairs", "held_out_pair_accuracy_before",
                    "held_out_pair_accuracy_after", "margin", "lm_weight", "corruption_mix", "pairs_per_dialog")


@dataclass
class Adaptation:
    """What an adaptation did: written to ``adaptation.json`` and the folder's card."""

    base_model: str
    base_revision: str
    sources: list[str]
    dialogs: int
    training_examples: int
    training_tokens: int
    held_out_examples: int
    held_out_loss_before: float
    held_out_loss_after: float
    method: str
    rendering: str
    preset: str
    max_tokens: int
    batch_size: int
    max_length: int
    learning_rate: float
    lora_rank: int
    seed: int
    autocast: str
    steps: int
    seconds: float
    full_metric: str
    digest: str = ""
    objective: str = "dialogs"
    pairs: int = 0
    held_out_pairs: int = 0
    held_out_pair_accuracy_before: float | None = None
    held_out_pair_accuracy_after: float | None = None
    margin: float = 0.0
    lm_weight: float = 0.0
    corruption_mix: dict[str, float] = field(default_factory=dict)
    schedule: str = "constant"
    warmup_steps: int = 10
    pairs_per_dialog: int = 1


def kept_lm_loss(record: dict[str, Any]) -> bool:
    """Whether an adaptation record's held-out LM loss did not rise (a judge fit to be chosen)."""
    return record["held_out_loss_after"] <= record["held_out_loss_before"]


def choose_seed(records: dict[int, dict[str, Any]]) -> int | None:
    """The seed rule of the reports' ``reproduce.sh``: among the seeds whose held-out LM loss did not
    rise, the highest held-out pair accuracy, ties to the lower seed; None when no seed is fit."""
    fit = [s for s in sorted(records) if kept_lm_loss(records[s])]
    return max(fit, key=lambda s: (records[s]["held_out_pair_accuracy_after"], -s)) if fit else None


def adapter_weights(judge: Any) -> dict[str, Any]:
    """The LoRA adapter alone, before it is merged: its peft config and float16 weights (which the
    judge is given back, rounded)."""
    from peft import get_peft_model_state_dict, set_peft_model_state_dict

    weights = {k: v.detach().to("cpu", torch.float16).contiguous() for k, v in get_peft_model_state_dict(judge).items()}
    # the judge takes the float16 values too, so the merged judge and the adapter on its base are one judge
    set_peft_model_state_dict(judge, {k: v.float() for k, v in weights.items()})
    return {"config": judge.peft_config["default"], "weights": weights}


def plain_weights(model: Any) -> Any:
    """The trained model in eval mode, as plain weights (a GGUF judge was de-quantized at load)."""
    model.eval()
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer = None
        if getattr(model.config, "quantization_config", None) is not None:
            del model.config.quantization_config
    return model


def settings(record: Adaptation) -> dict[str, Any]:
    """The record as a dict, less the settings at the value they had before they existed
    (``pairs_per_dialog`` 1): what a run's checkpoint fingerprint and the digest are made of, so that
    both stay what they were for the runs and judges made before."""
    return {k: v for k, v in asdict(record).items() if not (k == "pairs_per_dialog" and v == 1)}


def digest(record: Adaptation) -> str:
    """The digest of every setting of the adaptation (not its timing or its measured accuracy; the
    ``complaints`` fields only for that objective), which FULL's signature carries as ``+adapted:``."""
    skip = ("seconds", "digest", "held_out_pair_accuracy_before", "held_out_pair_accuracy_after",
            *(COMPLAINT_FIELDS if record.objective == "dialogs" else ()),
            *(("schedule", "warmup_steps") if record.schedule == "constant" else ()))  # as before schedules
    kept = {k: v for k, v in settings(record).items() if k not in skip}
    return hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()[:16]


def write_judge(model: Any, tokenizer: Any, record: Adaptation, output: Path,
                 adapter: dict[str, Any] | None = None) -> None:
    """Weights, tokenizer, ``adaptation.json`` and card (and the adapter alone in ``adapter/``, when
    given), written under a temporary name and renamed: an interrupted or failed write leaves no
    judge folder and no temporary one."""
    partial = output.parent / f".{output.name}.partial"
    try:
        shutil.rmtree(partial, ignore_errors=True)
        model.save_pretrained(partial)
        if adapter is not None:
            from safetensors.torch import save_file

            (partial / ADAPTER_FOLDER).mkdir()
            config = adapter["config"]
            if packaged_name_of_file(record.base_model) is not None:
                config.base_model_name_or_path = record.base_model  # found by its name: no path of this machine
            config.save_pretrained(partial / ADAPTER_FOLDER)
            save_file(adapter["weights"], partial / ADAPTER_FOLDER / "adapter_model.safetensors",
                      metadata={"format": "pt"})
            (partial / ADAPTER_FOLDER / ADAPTATION_FILE).write_text(json.dumps(asdict(record), indent=2),
                                                                     encoding="utf-8")
        tokenizer.save_pretrained(partial)
        (partial / ADAPTATION_FILE).write_text(json.dumps(asdict(record), indent=2), encoding="utf-8")
        (partial / "README.md").write_text(card(record), encoding="utf-8")
        partial.rename(output)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


#: What a judge folder's ``adapter/`` holds that a package ships: the weights, peft's config, the record.
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors", ADAPTATION_FILE)


def package_adapter(judge: Path, destination: Path) -> dict[str, Any]:
    """Copy a judge folder's adapter (``adapt --save-adapter``) into ``destination``, a folder of the package's
    judges; its base is named by the file its adaptation record gives, which is how a packaged base is found
    (no path of this machine). Refused, naming the judge, when the base is not a packaged model: a shipped judge
    must load by name offline. Returns the adaptation record."""
    source = judge / ADAPTER_FOLDER
    if not all((source / name).is_file() for name in ADAPTER_FILES):
        raise SystemExit(f"{judge.name}: no adapter in {ADAPTER_FOLDER}/ (train it with --save-adapter)")
    record = json.loads((source / ADAPTATION_FILE).read_text(encoding="utf-8"))
    if packaged_name_of_file(record["base_model"]) is None:
        raise SystemExit(f"{judge.name}: its base {record['base_model']} is not a model a package ships, so the judge "
                         "could not load by name offline; name the base in model_sources.PACKAGED_MODELS first")
    destination.mkdir(parents=True, exist_ok=True)
    for name in ADAPTER_FILES:
        shutil.copyfile(source / name, destination / name)
    config = json.loads((destination / "adapter_config.json").read_text(encoding="utf-8"))
    config["base_model_name_or_path"] = record["base_model"]
    (destination / "adapter_config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    return record


def card(record: Adaptation) -> str:
    """The adapted judge's model card."""
    settings = "\n".join(f"| {k} | {v} |" for k, v in asdict(record).items()
                         if k not in ("held_out_loss_before", "held_out_loss_after", "digest",
                                      "held_out_pair_accuracy_before", "held_out_pair_accuracy_after")
                         and not (record.objective == "dialogs" and k in COMPLAINT_FIELDS[1:]))
    return f"""---
library_name: transformers
tags: [full-metric, dialog-evaluation, adapted-judge]
---
# An adapted FULL judge

`{record.base_model}` (revision `{record.base_revision}`) trained further on {record.dialogs:,} dialogs
({record.training_tokens:,} training tokens, {record.method}) from {", ".join(record.sources)}, rendered as
FULL's `{record.rendering}` rendering writes them, so that the judge reads dialogs in the format it is
scored in. Score with it as with any model: `full-metric score ... --model THIS_FOLDER`,
`evaluate.load("full", model="THIS_FOLDER")`, or the app's `FULL_MODEL`.

Objective: `{record.objective}`.{_pairs_line(record)}

Held-out loss (mean token cross-entropy, nats, {record.held_out_examples} held-out examples):
**{record.held_out_loss_before:.4f}** before, **{record.held_out_loss_after:.4f}** after.

Adaptation digest: `{record.digest}` (FULL's signature carries it: `model:<folder>@sha256:...+adapted:{record.digest}`).

| setting | value |
|---|---|
{settings}
"""



def _pairs_line(record: Adaptation) -> str:
    if record.objective != "complaints":
        return ""
    return (f" Trained on {record.pairs:,} pairs of a real next turn and a corrupted reply (FULL's score of the real "
            f"one pushed above the corrupted one's); on {record.held_out_pairs} held-out pairs FULL preferred the real "
            f"turn in **{record.held_out_pair_accuracy_before:.1%}** before and **{record.held_out_pair_accuracy_after:.1%}** after.")
