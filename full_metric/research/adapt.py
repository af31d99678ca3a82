"""Adapt FULL's judge on unlabeled dialogs: continue training the scoring model on whole dialogs,
rendered exactly as the scorer renders them for that model, and write a folder FULL loads.

Each dialog becomes one training example in the scorer's own format: the rendering of its turns
but the last as the context, the last turn as the follow-up (what FULL scores). A decoder-only
model learns the whole sequence; an encoder-decoder reads the context and learns the follow-up,
and gets one example per turn after the first. Training: LoRA through ``peft`` by default (merged
into the weights at the end) or full fine-tuning, AdamW, one pass over a token budget, bfloat16
autocast on accelerators and on CPUs that compute bfloat16 natively (float32 on other CPUs, where a
LoRA step under bfloat16 autocast ran many times slower), a held-out split whose
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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import torch
from tqdm.auto import tqdm

from ..files.dialog_files import check_row, open_rows
from ..errors import UsageError
from ..models import ADAPTATION_FILE, PACKAGED_MODELS, native_bf16, resolve_device
from ..scorer import FullScorer
from ..version import __version__
from . import complaints
from .adapt_options import AUTOCASTS, LEARNING_RATES, METHODS, OBJECTIVES, SCHEDULES, default
from .optimise import Run, warmup_steps

logger = logging.getLogger(__name__)

#: The name that reads the conversations of the ``chitchat-dataset`` package (MIT) as a source.
CHITCHAT = "chitchat"


class AdaptError(UsageError):
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


#: The held-out dialogs are at most this many (at least 200 held-out pairs need ``held_out`` x dialogs >= 200).
MAX_HELD_OUT = 500
#: The folder of the adapter alone inside a judge written with ``save_adapter``.
ADAPTER_FOLDER = "adapter"
#: The seed of the held-out split and the held-out pairs: one yardstick for every training seed.
HELD_OUT_SEED = 0
#: A run's checkpoint sits beside its output folder under this name (``.NAME.checkpoint``).
CHECKPOINT_SUFFIX = ".checkpoint"
#: Fields of :class:`Adaptation` that only the ``complaints`` objective sets: left out of a
#: ``dialogs`` adaptation's digest, which stays what it was before they existed.
COMPLAINT_FIELDS = ("objective", "pairs", "held_out_pairs", "held_out_pair_accuracy_before",
                    "held_out_pair_accuracy_after", "margin", "lm_weight", "corruption_mix")


def chitchat_dialogs() -> list[list[str]]:
    """The conversations of the ``chitchat-dataset`` package (about 7,200; MIT): each a list of
    messages (a speaker's consecutive utterances joined by a space)."""
    if importlib.util.find_spec("chitchat_dataset") is None:
        raise AdaptError("the chitchat source needs the package: pip install --no-deps chitchat-dataset")
    import chitchat_dataset

    return [[m.strip() for m in conversation] for conversation in chitchat_dataset.ConversationDataset()]


def read_dialogs(sources: Sequence[str], *, split: str = "train") -> list[list[str]]:
    """Whole dialogs from each source: ``chitchat`` (the package), or a source of rows that
    :func:`~full_metric.files.dialog_files.open_rows` reads (JSON Lines, a JSON array, CSV, Parquet,
    ``hf:NAME`` with ``split``; ``context`` turns plus ``response`` when there is one). Each row is checked by the one row check; dialogs with fewer
    than two non-empty turns are left out."""
    dialogs: list[list[str]] = []
    for source in sources:
        if source == CHITCHAT:
            found = chitchat_dialogs()
        else:
            found = []
            for where, row, csv_row in open_rows(source, split=split, error=AdaptError, required="context"):
                context, response = check_row(row, where, csv_row=csv_row)  # type: ignore[arg-type]
                found.append([*context, *([response] if response else [])])
        dialogs += [[t for t in d if t.strip()] for d in found]
    return [d for d in dialogs if len(d) >= 2]


#: Characters kept of a turn per token of ``max_length`` before rendering (a context turn keeps its
#: end, a follow-up its start): far more than any tokenizer's longest token, so the cut never shortens
#: what the tokens keep, and a 14,843-word message is not tokenised whole to keep 512 tokens of it.
CHARS_PER_TOKEN = 16


def _examples(
    scorer: FullScorer, dialogs: Iterable[list[str]], max_length: int
) -> Iterator[tuple[list[int], list[int]]]:
    """(input ids, labels) per example in the scorer's rendering, one at a time (:func:`_example`):
    the last turn as a follow-up; an encoder-decoder gets one example per turn after the first."""
    for dialog in dialogs:
        for cut in range(1, len(dialog)) if scorer.loaded.is_encoder_decoder else [len(dialog) - 1]:
            yield _example(scorer, dialog, cut, max_length)


def _example(scorer: FullScorer, dialog: Sequence[str], cut: int, max_length: int) -> tuple[list[int], list[int]]:
    """The example of ``dialog[cut]`` as a follow-up to the turns before it: the context as the
    scorer encodes it (truncated as it truncates, from the left, to at most ``max_length`` tokens
    with its follow-up); an encoder-decoder's labels are exactly the follow-up's ids, a causal
    model's the whole sequence. Turns are cut to :data:`CHARS_PER_TOKEN` characters per token of
    ``max_length`` before rendering."""
    cap = CHARS_PER_TOKEN * max_length
    target = list(scorer.renderer.target_ids(dialog[cut][:cap]))[: max_length // 2]
    limit = min(scorer.context_limit([target]), max(1, max_length - len(target)))
    context = list(scorer.renderer.encode([t[-cap:] for t in dialog[:cut]], limit).context_ids)
    if scorer.loaded.is_encoder_decoder:
        return context, target
    return context + target, context + target


def _budgeted(examples: Iterable[tuple[list[int], list[int]]], max_tokens: int, encoder_decoder: bool,
              progress: bool) -> tuple[list[tuple[list[int], list[int]]], int]:
    """The examples in order until ``max_tokens`` tokens are taken (preparation stops there: the
    rest is never rendered), and how many tokens they hold; a progress bar of the tokens prepared."""
    taken, tokens = [], 0
    with tqdm(total=max_tokens, disable=not progress, desc="preparing", unit="token") as bar:
        for example in examples:
            if tokens >= max_tokens:
                break
            size = len(example[0]) + (len(example[1]) if encoder_decoder else 0)
            taken.append(example)
            tokens += size
            bar.update(min(size, max_tokens - bar.n))
    return taken, tokens


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
    method: str = default("method"),
    max_tokens: int = default("max_tokens"),
    held_out: float = default("held_out"),
    batch_size: int = default("batch_size"),
    max_length: int = default("max_length"),
    learning_rate: float | None = default("learning_rate"),
    lora_rank: int = default("lora_rank"),
    seed: int = default("seed"),
    device: str | None = None,
    progress: bool = True,
    objective: str = default("objective"),
    max_pairs: int = default("max_pairs"),
    margin: float = default("margin"),
    lm_weight: float = default("lm_weight"),
    corruption_mix: dict[str, float] | None = None,
    autocast: str = default("autocast"),
    schedule: str = default("schedule"),
    resume: bool = False,
    checkpoint_every: int = default("checkpoint_every"),
    save_adapter: bool = False,
) -> Adaptation:
    """Continue training a judge (a Hub id, a local folder, a GGUF file or a model object with its
    ``tokenizer``) on the dialogs of ``sources`` (see :func:`read_dialogs`) and write a folder
    ``FullScorer`` loads to ``output``; each example holds at most ``max_length`` tokens (the
    dialog's end: the oldest tokens dropped first, as the scorer drops them). Returns what it did
    (also in the folder).

    ``objective="complaints"`` trains on pairs of a real next turn and a corrupted reply instead
    (:mod:`full_metric.research.complaints`): at most ``max_pairs`` pairs, the pairwise loss with
    ``margin`` plus ``lm_weight`` times the language-modelling loss of the real dialog,
    ``corruption_mix`` the corruptions' weights (default :data:`complaints.DEFAULT_MIX`); the
    held-out dialogs give held-out pairs (drawn with the default mix whatever ``corruption_mix``
    says, so runs that differ in it are measured on the same pairs) whose accuracy is measured
    before and after. The held-out split and pairs are drawn with :data:`HELD_OUT_SEED` whatever
    ``seed`` is (which orders and corrupts the training dialogs and seeds the weights' dropout), so
    runs of every seed are measured on the same yardstick. ``autocast``: one of :data:`AUTOCASTS`
    (``auto``: bfloat16 on an accelerator and on a CPU that computes it natively, float32 elsewhere).
    ``schedule``: one of :data:`~full_metric.research.optimise.SCHEDULES`.

    A checkpoint is written every ``checkpoint_every`` steps beside ``output`` (``.NAME.checkpoint``);
    ``resume=True`` continues from it (the same settings only) to the judge an uninterrupted run
    makes, and starts afresh when there is none; without ``resume`` an existing checkpoint is refused.
    ``save_adapter``: also write the LoRA adapter alone (peft format, float16) to ``output/adapter``.

    Raises:
        AdaptError, DialogFileError: before any training step: an output that exists, an unknown
            method, no usable dialog, a budget smaller than one batch, a GGUF file without the
            ``gguf`` package, a model that cannot be trained, a checkpoint without ``resume`` or
            made with other settings.
    """
    output = Path(output)
    checkpoint = output.parent / f".{output.name}{CHECKPOINT_SUFFIX}"
    _check_request(model, output, gguf_file, method, objective, autocast, held_out, schedule, checkpoint, resume,
                   save_adapter)
    autocast_name = autocast
    mix = complaints.check_mix(corruption_mix or complaints.DEFAULT_MIX) if objective == "complaints" else {}
    dialogs = read_dialogs(sources)
    if not dialogs:
        raise AdaptError(f"no usable dialog in {list(sources)}: each needs at least two non-empty turns")
    n_held = held_out_size(len(dialogs), held_out)
    if len(dialogs) < n_held + 1:
        raise AdaptError(f"{len(dialogs)} usable dialog(s): too few to hold {n_held} out and train on the rest")
    rng = split_held_out(dialogs)  # the held-out split: the same for every seed
    if seed != HELD_OUT_SEED:  # (seed 0 goes on with the split's generator, as before seeds split alike)
        rng = random.Random(seed)
        dialogs[n_held:] = rng.sample(dialogs[n_held:], len(dialogs) - n_held)
    torch.manual_seed(seed)
    scorer = FullScorer(model, tokenizer=tokenizer, gguf_file=gguf_file, preset=preset, rendering=rendering,
                        device=str(resolve_device(device)), dtype="float32",
                        progress=False)
    name = scorer.loaded.name
    pad = scorer.pad_id
    held_batches = _batches(list(_examples(scorer, dialogs[:n_held], max_length)), batch_size, pad)
    pairs: list[complaints.Pair] = []
    held_pairs: list[complaints.Pair] = []
    if objective == "complaints":
        pairs, held_pairs = _complaint_pairs(scorer, dialogs, n_held, rng, HELD_OUT_SEED, mix, max_pairs, batch_size)
        train_examples = [_example(scorer, [*p.context, p.real], len(p.context), max_length) for p in pairs]
        tokens = sum(len(i) + (len(t) if scorer.loaded.is_encoder_decoder else 0) for i, t in train_examples)
    else:
        train_examples, tokens = _budgeted(_examples(scorer, dialogs[n_held:], max_length), max_tokens,
                                           scorer.loaded.is_encoder_decoder, progress)
    batches = _batches(train_examples, batch_size, pad)
    first = _tokens(batches[0])
    if objective == "dialogs" and first > max_tokens:
        raise AdaptError(f"the budget of {max_tokens} tokens is smaller than one batch ({first} tokens in "
                         f"{len(train_examples[:batch_size])} examples); raise --max-tokens or lower --batch-size")
    autocast = _autocast(autocast_name, scorer.model.device.type)
    scorer.model.train()
    judge = _with_lora(scorer.model, lora_rank, scorer.loaded.is_encoder_decoder) if method == "lora" else scorer.model
    _check_trainable(judge, name, batches[0], autocast)
    rate = LEARNING_RATES[method] if learning_rate is None else learning_rate
    record = Adaptation(
        base_model=name, base_revision=scorer.loaded.revision, sources=[Path(s).name for s in sources],
        dialogs=len(dialogs), training_examples=len(train_examples), training_tokens=tokens,
        held_out_examples=sum(len(b["input_ids"]) for b in held_batches), held_out_loss_before=0.0,
        held_out_loss_after=0.0, method=method, rendering=scorer.rendering, preset=scorer.preset,
        max_tokens=max_tokens, batch_size=batch_size, max_length=max_length, learning_rate=rate,
        lora_rank=lora_rank if method == "lora" else 0, seed=seed,
        autocast=str(autocast).removeprefix("torch.") if autocast else "none", steps=len(batches),
        seconds=0.0, full_metric=__version__, schedule=schedule, warmup_steps=warmup_steps(schedule, len(batches)),
    )
    if objective == "complaints":
        record.objective, record.pairs, record.held_out_pairs = objective, len(pairs), len(held_pairs)
        record.margin, record.lm_weight, record.corruption_mix = margin, lm_weight, mix
    run = Run(judge, rate=rate, steps=len(batches), schedule=schedule, checkpoint=checkpoint,
              every=checkpoint_every, settings={**asdict(record), "held_out_examples": record.held_out_examples})
    if not (resume and run.resume()):
        run.measured = _measure(scorer, judge, held_batches, held_pairs, autocast, max_length, batch_size, objective)
    record.held_out_loss_before = run.measured["loss"]
    record.held_out_pair_accuracy_before = run.measured.get("pair_accuracy")
    max_context = max_length if objective == "complaints" else None
    if objective == "complaints":
        _train_on_pairs(scorer, judge, pairs, batches, run, autocast, max_context, margin, lm_weight, progress)
    else:
        _train_on_dialogs(judge, batches, run, autocast, progress)
    adapter = _adapter_weights(judge) if save_adapter else None  # float16: the judge keeps those very weights
    after = _measure(scorer, judge, held_batches, held_pairs, autocast, max_length, batch_size, objective)
    record.held_out_loss_after = after["loss"]
    record.held_out_pair_accuracy_after = after.get("pair_accuracy")
    record.seconds = run.seconds
    record.digest = _digest(record)
    _write_judge(_plain_weights(judge.merge_and_unload() if method == "lora" else judge), scorer.tokenizer, record,
                 output, adapter)
    run.finish()
    logger.info("adapted %s: held-out loss %.4f -> %.4f; written to %s", name, record.held_out_loss_before,
                record.held_out_loss_after, output)
    return record


def split_held_out(dialogs: list[list[str]]) -> random.Random:
    """Shuffle ``dialogs`` in place into :func:`adapt`'s order, whose first ``round(len * held_out)``
    (at most :data:`MAX_HELD_OUT`) are the held-out dialogs of every run; returns the generator, to go on
    with for seed :data:`HELD_OUT_SEED`."""
    rng = random.Random(HELD_OUT_SEED)
    rng.shuffle(dialogs)
    return rng


def held_out_size(dialogs: int, held_out: float) -> int:
    """How many of ``dialogs`` dialogs :func:`adapt` holds out: the share ``held_out``, at least one,
    at most :data:`MAX_HELD_OUT`."""
    return max(1, min(MAX_HELD_OUT, round(dialogs * held_out)))


def held_out_dialogs(sources: Sequence[str], held_out: float) -> list[list[str]]:
    """The dialogs :func:`adapt` holds out of training for these sources and ``held_out``: what a
    measurement of its judges may use without testing on their training data."""
    dialogs = read_dialogs(sources)
    split_held_out(dialogs)
    return dialogs[: held_out_size(len(dialogs), held_out)]


def _measure(scorer: FullScorer, judge: Any, held_batches: list[dict[str, torch.Tensor]],
             held_pairs: list[complaints.Pair], autocast: torch.dtype | None, max_length: int, batch_size: int,
             objective: str) -> dict[str, float]:
    """The held-out language-modelling loss and, for the complaints objective, the held-out pair accuracy."""
    measured = {"loss": _loss(judge, held_batches, autocast)}
    if objective == "complaints":
        measured["pair_accuracy"] = complaints.pair_accuracy(scorer, judge, held_pairs, max_length, batch_size)
    return measured


def _check_request(model: Any, output: Path, gguf_file: str | None, method: str, objective: str, autocast: str,
                   held_out: float, schedule: str, checkpoint: Path, resume: bool, save_adapter: bool) -> None:
    """The refusals that need neither the dialogs nor the model."""
    if output.exists():
        raise AdaptError(f"{output} exists; give a new folder for the adapted judge")
    if checkpoint.exists() and not resume:
        raise AdaptError(f"{checkpoint} holds an interrupted run's checkpoint: repeat its command with --resume to "
                         "continue it, or delete the checkpoint")
    if schedule not in SCHEDULES:
        raise AdaptError(f"unknown schedule {schedule!r}; choose one of {SCHEDULES}")
    if save_adapter and method != "lora":
        raise AdaptError("only a LoRA adaptation has an adapter to save alone (method='lora')")
    if method not in METHODS:
        raise AdaptError(f"unknown method {method!r}; choose one of {METHODS}")
    if objective not in OBJECTIVES:
        raise AdaptError(f"unknown objective {objective!r}; choose one of {OBJECTIVES}")
    if autocast not in AUTOCASTS:
        raise AdaptError(f"unknown autocast {autocast!r}; choose one of {AUTOCASTS}")
    if not 0 < held_out < 1:
        raise AdaptError(f"held_out must be a fraction between 0 and 1, got {held_out!r}")
    named_gguf = gguf_file is not None or (isinstance(model, str) and model.lower().endswith(".gguf"))
    if named_gguf and importlib.util.find_spec("gguf") is None:
        raise AdaptError("a GGUF judge needs the gguf package to be dequantized: pip install 'full-metric[gguf]'")
    if method == "lora" and importlib.util.find_spec("peft") is None:
        raise AdaptError("LoRA needs peft: pip install 'full-metric[adapt]' (or method='full')")


def _autocast(name: str, device_type: str) -> torch.dtype | None:
    """The autocast dtype for ``name`` (see :data:`AUTOCASTS`) on a device of ``device_type``."""
    if name == "none" or (name == "auto" and device_type == "cpu" and native_bf16() is None):
        return None
    return torch.bfloat16


def _complaint_pairs(scorer: FullScorer, dialogs: list[list[str]], n_held: int, rng: random.Random, seed: int,
                     mix: dict[str, float], max_pairs: int, batch_size: int,
                     ) -> tuple[list[complaints.Pair], list[complaints.Pair]]:
    """The training pairs (from the dialogs after the held-out ones, at most ``max_pairs``) and the
    held-out pairs, refused when the scorer's aggregation cannot be trained or they are too few."""
    try:
        complaints.check_trainable(scorer.aggregation, len(scorer.positive_follow_ups))
    except UsageError as error:
        raise AdaptError(str(error)) from None
    if max_pairs < batch_size:
        raise AdaptError(f"the budget of {max_pairs} pairs is smaller than one batch ({batch_size} pairs); "
                         "raise --max-pairs or lower --batch-size")
    pairs = complaints.make_pairs(dialogs[n_held : n_held + 2 * max_pairs], rng, mix)[:max_pairs]
    # the held-out pairs are a fixed yardstick: the default mix whatever the training mix
    held_pairs = complaints.make_pairs(dialogs[:n_held], random.Random(seed + 1), complaints.DEFAULT_MIX)
    if len(pairs) < batch_size or not held_pairs:
        raise AdaptError(f"{len(pairs)} training pair(s) and {len(held_pairs)} held-out pair(s): too few dialogs "
                         "to train on FULL's question")
    return pairs, held_pairs


def _with_lora(model: Any, rank: int, encoder_decoder: bool) -> Any:
    """The model wrapped with LoRA adapters (``peft``) on all its linear layers."""
    from peft import LoraConfig, get_peft_model

    task = "SEQ_2_SEQ_LM" if encoder_decoder else "CAUSAL_LM"
    return get_peft_model(model, LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.05,
                                            target_modules="all-linear", task_type=task))


def _train_on_dialogs(judge: Any, batches: list[dict[str, torch.Tensor]], run: Run, autocast: torch.dtype | None,
                      progress: bool) -> None:
    """The ``dialogs`` objective: one pass of the language-modelling loss over the batches (from the
    run's step on, when it resumed)."""
    for batch in tqdm(batches[run.done :], disable=not progress, desc="adapting", unit="batch",
                      initial=run.done, total=len(batches)):
        started = time.perf_counter()
        with torch.autocast(judge.device.type, dtype=autocast, enabled=autocast is not None):
            loss = judge(**{k: v.to(judge.device) for k, v in batch.items()}).loss
        run.step(loss, time.perf_counter() - started)


def _train_on_pairs(scorer: FullScorer, judge: Any, pairs: list[complaints.Pair],
                    batches: list[dict[str, torch.Tensor]], run: Run, autocast: torch.dtype | None,
                    max_context: int | None, margin: float, lm_weight: float, progress: bool) -> None:
    """The ``complaints`` objective: one pass over the pairs (from the run's step on, when it
    resumed), the pairwise loss plus ``lm_weight`` times the language-modelling loss of each pair's
    real dialog (``batches``, in pair order)."""
    size = len(batches[0]["input_ids"])
    with tqdm(total=len(pairs), initial=min(len(pairs), run.done * size), disable=not progress,
              desc="adapting (complaints)", unit="pair") as bar:
        for index in range(run.done, len(batches)):
            started = time.perf_counter()
            chunk, batch = pairs[index * size : (index + 1) * size], batches[index]
            with torch.autocast(judge.device.type, dtype=autocast, enabled=autocast is not None):
                loss = complaints.pair_loss(complaints.pair_margins(scorer, judge, chunk, max_context), margin)
                if lm_weight:
                    loss = loss + lm_weight * judge(**{k: v.to(judge.device) for k, v in batch.items()}).loss
            run.step(loss, time.perf_counter() - started)
            bar.update(len(chunk))
            bar.set_postfix(loss=f"{float(loss.detach()):.3f}")


def _adapter_weights(judge: Any) -> dict[str, Any]:
    """The LoRA adapter alone, before it is merged: its peft config and float16 weights (which the
    judge is given back, rounded)."""
    from peft import get_peft_model_state_dict, set_peft_model_state_dict

    weights = {k: v.detach().to("cpu", torch.float16).contiguous() for k, v in get_peft_model_state_dict(judge).items()}
    # the judge takes the float16 values too, so the merged judge and the adapter on its base are one judge
    set_peft_model_state_dict(judge, {k: v.float() for k, v in weights.items()})
    return {"config": judge.peft_config["default"], "weights": weights}


def _plain_weights(model: Any) -> Any:
    """The trained model in eval mode, as plain weights (a GGUF judge was de-quantized at load)."""
    model.eval()
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer = None
        if getattr(model.config, "quantization_config", None) is not None:
            del model.config.quantization_config
    return model


def _digest(record: Adaptation) -> str:
    """The digest of every setting of the adaptation (not its timing or its measured accuracy; the
    ``complaints`` fields only for that objective), which FULL's signature carries as ``+adapted:``."""
    skip = ("seconds", "digest", "held_out_pair_accuracy_before", "held_out_pair_accuracy_after",
            *(COMPLAINT_FIELDS if record.objective == "dialogs" else ()),
            *(("schedule", "warmup_steps") if record.schedule == "constant" else ()))  # as before schedules
    settings = {k: v for k, v in asdict(record).items() if k not in skip}
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def _write_judge(model: Any, tokenizer: Any, record: Adaptation, output: Path,
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
            if any(file == record.base_model for _, file, _ in PACKAGED_MODELS.values()):
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
