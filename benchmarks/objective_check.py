"""The complaints objective's numbers on the tiny fixtures, to compare two versions of the code (issue 39:
the training score moved onto the scorer's own path and had to stay the same). Run it in each checkout,
then compare:

    python benchmarks/objective_check.py record OUT.json WORK_FOLDER      (in each checkout)
    python benchmarks/objective_check.py compare BEFORE.json AFTER.json

``record``: at a fixed judge (eval mode), the pair margins, loss and embedding gradients of 12 pairs for
the tiny Llama and the tiny BlenderBot with every aggregation; then a short adapt run of each (24 pairs,
LoRA rank 4, learning rate 2e-4, LoRA dropout off so that two runs draw nothing apart) and its held-out
figures. ``compare`` prints the largest differences."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

SETTINGS = {"paper": {}, "mean": {"aggregation": "mean", "positive_follow_ups": ["That's interesting!"]},
            "balanced": {"aggregation": "balanced", "positive_follow_ups": ["That's interesting!"]},
            "perplexity": {"aggregation": "perplexity"}}


def record(out: str, work: str) -> None:
    import peft
    from safetensors.torch import load_file
    from transformers import AutoTokenizer

    sys.path.insert(0, ".")
    from full_metric import FullScorer
    from full_metric.research import adapt as adapt_module, complaints
    from tests.conftest import TINY_BLENDERBOT, _tiny_llama

    folder = Path(work)
    folder.mkdir(parents=True, exist_ok=True)
    llama = folder / "llama"
    _tiny_llama().save_pretrained(llama)
    AutoTokenizer.from_pretrained(TINY_BLENDERBOT).save_pretrained(llama)
    rows = [{"context": [f"ping {d + t}" if t % 2 == 0 else f"pong {d + t - 1}" for t in range(7)],
             "response": f"pong {d + 6}"} for d in range(200)]
    data = folder / "learnable.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    dialogs = [[*r["context"], r["response"]] for r in rows]
    found: dict = {}
    for kind, path in (("causal", llama), ("seq2seq", TINY_BLENDERBOT)):
        for name, extra in SETTINGS.items():
            scorer = FullScorer(str(path), preset="paper", progress=False, **extra)
            pairs = complaints.make_pairs(dialogs[:12], random.Random(0))
            scorer.model.zero_grad()
            margins = complaints.pair_margins(scorer, scorer.model, pairs, 48)
            loss = complaints.pair_loss(margins, 1.0)
            loss.backward()
            grad = scorer.model.get_input_embeddings().weight.grad.flatten()
            found[f"{kind}-{name}"] = {"margins": margins.tolist(), "loss": float(loss),
                                       "grad_norm": float(grad.norm())}
    real = peft.LoraConfig.__init__

    def no_dropout(self, *args, **kwargs):
        real(self, *args, **{**kwargs, "lora_dropout": 0.0})

    peft.LoraConfig.__init__ = no_dropout
    for kind, path in (("causal", llama), ("seq2seq", TINY_BLENDERBOT)):
        done = adapt_module.adapt(str(path), [str(data)], folder / f"judge-{kind}", objective="complaints",
                                  max_pairs=24, batch_size=4, held_out=0.1, learning_rate=2e-4, lora_rank=4,
                                  progress=False, save_adapter=True)
        weights = load_file(str(folder / f"judge-{kind}" / "adapter" / "adapter_model.safetensors"))
        found[f"adapt-{kind}"] = {
            "held_out_pair_accuracy": [done.held_out_pair_accuracy_before, done.held_out_pair_accuracy_after],
            "held_out_loss": [done.held_out_loss_before, done.held_out_loss_after],
            "adapter_abs_sum": float(sum(v.float().abs().sum() for v in weights.values()))}
    Path(out).write_text(json.dumps(found, indent=1))


def compare(before: str, after: str) -> None:
    old, new = json.loads(Path(before).read_text()), json.loads(Path(after).read_text())
    for key in old:
        pairs = list(zip(_flat(old[key]), _flat(new[key])))
        absolute = max(abs(a - b) for a, b in pairs)
        relative = max(abs(a - b) / max(abs(a), 1e-3) for a, b in pairs)
        print(f"{key:20s} largest difference: {absolute:.2e} absolute, {relative:.2e} relative")


def _flat(value) -> list[float]:
    if isinstance(value, dict):
        return [x for v in value.values() for x in _flat(v)]
    if isinstance(value, list):
        return [x for v in value for x in _flat(v)]
    return [float(value)]


if __name__ == "__main__":
    {"record": record, "compare": compare}[sys.argv[1]](*sys.argv[2:])
