"""Adapt FULL's judge on unlabeled dialogs: continue training the scoring model on whole dialogs,
rendered exactly as the scorer renders them for that model, and write a folder FULL loads.

Each dialog becomes one training example in the scorer's own format: the rendering of its turns
but the last as the context, the last turn as the follow-up (what FULL scores). A decoder-only
model learns the whole sequence; an encoder-decoder reads the context and learns the follow-up,
and gets one example per turn after the first. Training: LoRA through ``peft`` by default (merged
into the weights at the end) or full fine-tuning, AdamW, one pass over a token budget, bfloat16
autocast on accelerators (on the CPU float32: a LoRA step under bfloat16 autocast ran many times
slower than in float32 on this project's CPU, native bfloat16 or not), a held-out split whose
loss is measured before and after. The folder (merged weights, tokenizer, ``README.md`` card,
``adaptation.json``) is written under a temporary name and renamed at the end: an interrupted run
leaves no judge folder. FULL's signature names an adapted judge by its weights' digest and the
adaptation's (``model:JUDGE@sha256:...+adapted:...``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import logging
import random
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import torch
from tqdm.auto import tqdm

from ..dialog_files import check_row, read_rows
from ..models import ADAPTATION_FILE
from ..scorer import FullScorer
from ..version import __version__

logger = logging.getLogger(__name__)

#: The name that reads the conversations of the ``chitchat-dataset`` package (MIT) as a source.
CHITCHAT = "chitchat"
METHODS = ("lora", "full")
DEFAULT_LEARNING_RATE = {"lora": 2e-4, "full": 2e-5}


class AdaptError(ValueError):
    """Adaptation refused before any training step; the message says why."""


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


def chitchat_dialogs() -> list[list[str]]:
    """The conversations of the ``chitchat-dataset`` package (about 7,200; MIT): each a list of
    messages (a speaker's consecutive utterances joined by a space)."""
    if importlib.util.find_spec("chitchat_dataset") is None:
        raise AdaptError("the chitchat source needs the package: pip install --no-deps chitchat-dataset")
    import chitchat_dataset

    return [[m.strip() for m in conversation] for conversation in chitchat_dataset.ConversationDataset()]


def _rows(source: str, split: str) -> Iterable[tuple[str, dict[str, Any], bool]]:
    """(where, row, whether it is a CSV row) of a file (the one row reader) or a Hub dataset."""
    if source.startswith("hf:") or source.lower().endswith(".parquet"):
        try:
            import datasets
        except ImportError:
            raise AdaptError("Parquet files and Hub datasets need the datasets package: "
                             "pip install 'full-metric[evaluate]'") from None
        stream = (datasets.load_dataset(source[3:], split=split, streaming=True) if source.startswith("hf:") else
                  datasets.load_dataset("parquet", data_files=source, split="train", streaming=True))
        return ((f"{source}, row {number}", row, False) for number, row in enumerate(stream, start=1))
    csv_file = source.lower().endswith(".csv")
    return ((f"{source}, line {number}", row, csv_file) for number, row in read_rows(source, required="context"))


def read_dialogs(sources: Sequence[str], *, split: str = "train") -> list[list[str]]:
    """Whole dialogs from each source: ``chitchat`` (the package), a JSON Lines / CSV / Parquet file
    of rows (``context`` turns plus ``response`` when there is one), or ``hf:NAME`` (a Hub dataset
    with the same columns, ``split``). Each row is checked by the one row check; dialogs with fewer
    than two non-empty turns are left out."""
    dialogs: list[list[str]] = []
    for source in sources:
        if source == CHITCHAT:
            found = chitchat_dialogs()
        else:
            found = []
            for where, row, csv_row in _rows(source, split):
                context, response = check_row(row, where, csv_row=csv_row)  # type: ignore[arg-type]
                found.append([*context, *([response] if response else [])])
        dialogs += [[t for t in d if t.strip()] for d in found]
    return [d for d in dialogs if len(d) >= 2]


def _examples(
    scorer: FullScorer, dialogs: Iterable[list[str]], max_length: int
) -> list[tuple[list[int], list[int]]]:
    """(input ids, labels) per example in the scorer's rendering: the context as the scorer encodes
    it (truncated as it truncates, from the left, to at most ``max_length`` tokens with its
    follow-up), the last turn as a follow-up."""
    out = []
    for dialog in dialogs:
        cuts = range(1, len(dialog)) if scorer.loaded.is_encoder_decoder else [len(dialog) - 1]
        for cut in cuts:
            target = list(scorer.renderer.target_ids(dialog[cut]))[: max_length // 2]
            limit = min(scorer._context_limit([target]), max(1, max_length - len(target)))
            context = list(scorer.renderer.encode(dialog[:cut], limit).context_ids)
            if scorer.loaded.is_encoder_decoder:
                out.append((context, target))
            else:
                out.append((context + target, context + target))
    return out


def _batches(examples: list[tuple[list[int], list[int]]], size: int, pad: int) -> list[dict[str, torch.Tensor]]:
    out = []
    for start in range(0, len(examples), size):
        chunk = examples[start : start + size]
        width = max(len(i) for i, _ in chunk)
        labels = max(len(t) for _, t in chunk)
        out.append({
            "input_ids": torch.tensor([i + [pad] * (width - len(i)) for i, _ in chunk]),
            "attention_mask": torch.tensor([[1] * len(i) + [0] * (width - len(i)) for i, _ in chunk]),
            "labels": torch.tensor([t + [-100] * (labels - len(t)) for _, t in chunk]),
        })
    return out


def _tokens(batch: dict[str, torch.Tensor]) -> int:
    return int(batch["attention_mask"].sum()) + (0 if batch["labels"].shape == batch["input_ids"].shape
                                                  else int((batch["labels"] != -100).sum()))


def _loss(model: Any, batches: list[dict[str, torch.Tensor]], autocast: torch.dtype | None) -> float:
    """Mean token cross-entropy (nats) over the batches, in eval mode."""
    was = model.training
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for batch in batches:
            with torch.autocast(model.device.type, dtype=autocast, enabled=autocast is not None):
                loss = model(**{k: v.to(model.device) for k, v in batch.items()}).loss
            n = int((batch["labels"][:, 1:] != -100).sum()) if not model.config.is_encoder_decoder \
                else int((batch["labels"] != -100).sum())
            total, count = total + float(loss) * n, count + n
    model.train(was)
    return total / max(count, 1)


def _check_trainable(model: Any, name: str, batch: dict[str, torch.Tensor], autocast: torch.dtype | None) -> None:
    """Refuse a model FULL cannot train, before any training step: one forward and backward on one
    batch (then the gradients are dropped)."""
    if "labels" not in inspect.signature(model.forward).parameters:
        raise AdaptError(f"{name} (model type {model.config.model_type!r}) takes no labels in its forward: "
                         "it has no training path here")
    try:
        with torch.autocast(model.device.type, dtype=autocast, enabled=autocast is not None):
            loss = model(**{k: v.to(model.device) for k, v in batch.items()}).loss
        if loss is None or not loss.requires_grad:
            raise AdaptError(f"{name} (model type {model.config.model_type!r}): its forward gives no loss with a "
                             "gradient (an inference-only path, as some recurrent models have): it cannot be trained here")
        loss.backward()
    except AdaptError:
        raise
    except Exception as error:  # noqa: BLE001 - any failure here means: this model cannot be trained here
        raise AdaptError(f"{name} (model type {model.config.model_type!r}) cannot be trained here: "
                         f"{type(error).__name__}: {error}") from None
    finally:
        model.zero_grad(set_to_none=True)


def adapt(
    model: str | Any,
    sources: Sequence[str],
    output: str | Path,
    *,
    tokenizer: Any = None,
    gguf_file: str | None = None,
    preset: str | None = None,
    rendering: str | None = None,
    method: str = "lora",
    max_tokens: int = 250_000,
    held_out: float = 0.05,
    batch_size: int = 8,
    max_length: int = 512,
    learning_rate: float | None = None,
    lora_rank: int = 16,
    seed: int = 0,
    device: str | None = None,
    progress: bool = True,
) -> Adaptation:
    """Continue training a judge (a Hub id, a local folder, a GGUF file or a model object with its
    ``tokenizer``) on the dialogs of ``sources`` (see :func:`read_dialogs`) and write a folder
    ``FullScorer`` loads to ``output``; each example holds at most ``max_length`` tokens (the
    dialog's end: the oldest tokens dropped first, as the scorer drops them). Returns what it did
    (also in the folder).

    Raises:
        AdaptError, DialogFileError: before any training step: an output that exists, an unknown
            method, no usable dialog, a budget smaller than one batch, a GGUF file without the
            ``gguf`` package, a model that cannot be trained.
    """
    output = Path(output)
    if output.exists():
        raise AdaptError(f"{output} exists; give a new folder for the adapted judge")
    if method not in METHODS:
        raise AdaptError(f"unknown method {method!r}; choose one of {METHODS}")
    if not 0 < held_out < 1:
        raise AdaptError(f"held_out must be a fraction between 0 and 1, got {held_out!r}")
    named_gguf = gguf_file is not None or (isinstance(model, str) and model.lower().endswith(".gguf"))
    if named_gguf and importlib.util.find_spec("gguf") is None:
        raise AdaptError("a GGUF judge needs the gguf package to be dequantized: pip install 'full-metric[gguf]'")
    if method == "lora" and importlib.util.find_spec("peft") is None:
        raise AdaptError("LoRA needs peft: pip install 'full-metric[adapt]' (or method='full')")
    dialogs = read_dialogs(sources)
    if not dialogs:
        raise AdaptError(f"no usable dialog in {list(sources)}: each needs at least two non-empty turns")
    rng = random.Random(seed)
    rng.shuffle(dialogs)
    n_held = max(1, min(200, round(len(dialogs) * held_out)))
    if len(dialogs) < n_held + 1:
        raise AdaptError(f"{len(dialogs)} usable dialog(s): too few to hold {n_held} out and train on the rest")
    torch.manual_seed(seed)
    scorer = FullScorer(model, tokenizer=tokenizer, gguf_file=gguf_file, preset=preset, rendering=rendering,
                        device=device or ("cuda" if torch.cuda.is_available() else "cpu"), dtype="float32",
                        progress=False)
    name = scorer.loaded.name
    pad = scorer.pad_id
    held_batches = _batches(_examples(scorer, dialogs[:n_held], max_length), batch_size, pad)
    train_examples, tokens = [], 0
    for dialog in dialogs[n_held:]:
        for example in _examples(scorer, [dialog], max_length):
            if tokens >= max_tokens:
                break
            train_examples.append(example)
            tokens += len(example[0]) + (len(example[1]) if scorer.loaded.is_encoder_decoder else 0)
    batches = _batches(train_examples, batch_size, pad)
    first = _tokens(batches[0])
    if first > max_tokens:
        raise AdaptError(f"the budget of {max_tokens} tokens is smaller than one batch ({first} tokens in "
                         f"{len(train_examples[:batch_size])} examples); raise --max-tokens or lower --batch-size")
    on = scorer.model.device.type
    autocast = torch.bfloat16 if on != "cpu" else None  # on the CPU, bfloat16 autocast trained far slower here
    judge = scorer.model
    judge.train()
    if method == "lora":
        from peft import LoraConfig, get_peft_model

        task = "SEQ_2_SEQ_LM" if scorer.loaded.is_encoder_decoder else "CAUSAL_LM"
        judge = get_peft_model(judge, LoraConfig(r=lora_rank, lora_alpha=2 * lora_rank, lora_dropout=0.05,
                                                 target_modules="all-linear", task_type=task))
    _check_trainable(judge, name, batches[0], autocast)
    before = _loss(judge, held_batches, autocast)
    rate = DEFAULT_LEARNING_RATE[method] if learning_rate is None else learning_rate
    optimizer = torch.optim.AdamW([p for p in judge.parameters() if p.requires_grad], lr=rate)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / 10))
    started = time.perf_counter()
    partial = output.parent / f".{output.name}.partial"
    try:
        for batch in tqdm(batches, disable=not progress, desc="adapting", unit="batch"):
            with torch.autocast(on, dtype=autocast, enabled=autocast is not None):
                loss = judge(**{k: v.to(judge.device) for k, v in batch.items()}).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(judge.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad(set_to_none=True)
        after = _loss(judge, held_batches, autocast)
        merged = judge.merge_and_unload() if method == "lora" else judge
        merged.eval()
        if getattr(merged, "hf_quantizer", None) is not None:  # a GGUF judge, de-quantized at load: plain weights now
            merged.hf_quantizer = None
            if getattr(merged.config, "quantization_config", None) is not None:
                del merged.config.quantization_config
        record = Adaptation(
            base_model=name, base_revision=scorer.loaded.revision, sources=[Path(s).name for s in sources],
            dialogs=len(dialogs), training_examples=len(train_examples), training_tokens=tokens,
            held_out_examples=sum(len(b["input_ids"]) for b in held_batches), held_out_loss_before=before,
            held_out_loss_after=after, method=method, rendering=scorer.rendering, preset=scorer.preset,
            max_tokens=max_tokens, batch_size=batch_size, max_length=max_length, learning_rate=rate,
            lora_rank=lora_rank if method == "lora" else 0, seed=seed,
            autocast=str(autocast).removeprefix("torch.") if autocast else "none", steps=len(batches),
            seconds=time.perf_counter() - started, full_metric=__version__,
        )
        settings = {k: v for k, v in asdict(record).items() if k not in ("seconds", "digest")}
        record.digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]
        shutil.rmtree(partial, ignore_errors=True)
        merged.save_pretrained(partial)
        scorer.tokenizer.save_pretrained(partial)
        (partial / ADAPTATION_FILE).write_text(json.dumps(asdict(record), indent=2), encoding="utf-8")
        (partial / "README.md").write_text(card(record), encoding="utf-8")
        partial.rename(output)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    logger.info("adapted %s: held-out loss %.4f -> %.4f; written to %s", name, before, after, output)
    return record


def card(record: Adaptation) -> str:
    """The adapted judge's model card."""
    settings = "\n".join(f"| {k} | {v} |" for k, v in asdict(record).items()
                         if k not in ("held_out_loss_before", "held_out_loss_after", "digest"))
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

Held-out loss (mean token cross-entropy, nats, {record.held_out_examples} held-out examples):
**{record.held_out_loss_before:.4f}** before, **{record.held_out_loss_after:.4f}** after.

Adaptation digest: `{record.digest}` (FULL's signature carries it: `model:<folder>@sha256:...+adapted:{record.digest}`).

| setting | value |
|---|---|
{settings}
"""

