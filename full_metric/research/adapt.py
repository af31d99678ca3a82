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

``objective="complaints"`` trains on pairs of a real next turn and a corrupted reply instead
(:mod:`full_metric.research.complaints`): at most ``max_pairs`` pairs, the pairwise loss with
``margin`` plus ``lm_weight`` times the language-modelling loss of the real dialog,
``corruption_mix`` the corruptions' weights (default :data:`complaints.DEFAULT_MIX`). The held-out
split and pairs are drawn with :data:`~.adapt_data.HELD_OUT_SEED` (the pairs with the default mix)
whatever ``seed`` and ``corruption_mix`` are, so that runs are measured on one yardstick, before and
after training.

A checkpoint is written every ``checkpoint_every`` steps in the cache folder outside the checkout
(:func:`full_metric.cache.checkpoint_for`: ``$FULL_METRIC_CACHE``, default ``~/.cache/full-metric``; the
format: :mod:`full_metric.research.optimise`); ``resume=True`` continues from it (the same settings only) to
the judge an uninterrupted run makes, after a stop and after the folder of ``output`` was removed and laid
anew; without ``resume`` an existing checkpoint is refused.
"""

from __future__ import annotations

import importlib.util
import inspect
import logging
import random
import time
from pathlib import Path
from typing import Any, Sequence

import torch
from tqdm.auto import tqdm

from ..cache import checkpoint_for
from ..errors import UsageError, install_hint
from ..models import PACKAGED_MODELS, is_adapter, native_bf16, packaged_model, resolve_device
from ..scorer import FullScorer
from ..version import __version__
from . import complaints
from .adapt_data import (
    HELD_OUT_SEED, AdaptError, batch_tokens, batches, budgeted, examples, held_out_size, read_dialogs, split_held_out,
    training_example,
)
from .adapt_options import AUTOCASTS, LEARNING_RATES, METHODS, OBJECTIVES, SCHEDULES, default
from .frozen_casts import cast_frozen_linears
from .judge_folder import Adaptation, adapter_weights, digest, plain_weights, settings, write_judge
from .optimise import Run, warmup_steps

logger = logging.getLogger(__name__)



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
    model: str | Any, sources: Sequence[str], output: str | Path, *, tokenizer: Any = None,
    gguf_file: str | None = None, preset: str | None = None, rendering: str | None = None, device: str | None = None,
    progress: bool = True, corruption_mix: dict[str, float] | None = None, resume: bool = False,
    save_adapter: bool = False, method: str = default("method"), objective: str = default("objective"),
    max_tokens: int = default("max_tokens"), max_pairs: int = default("max_pairs"),
    pairs_per_dialog: int = default("pairs_per_dialog"),
    batch_size: int = default("batch_size"), held_out: float = default("held_out"),
    max_length: int = default("max_length"), learning_rate: float | None = default("learning_rate"),
    lora_rank: int = default("lora_rank"), seed: int = default("seed"), margin: float = default("margin"),
    lm_weight: float = default("lm_weight"), autocast: str = default("autocast"), schedule: str = default("schedule"),
    checkpoint_every: int = default("checkpoint_every"),
) -> Adaptation:
    """Continue training a judge (a Hub id, a local folder, a GGUF file or a model object with its
    ``tokenizer``) on the dialogs of ``sources`` (:func:`~.adapt_data.read_dialogs`) and write a folder
    ``FullScorer`` loads to ``output``. Returns what it did (also in the folder). The objectives, the
    held-out yardstick, checkpoints and ``resume``: this module's docstring; each option's default and
    meaning: :mod:`full_metric.research.adapt_options`. ``save_adapter``: also write the LoRA adapter
    alone (peft format, float16) to ``output/adapter``.

    Raises:
        AdaptError, DialogFileError: before any training step: an output that exists, an unknown
        setting, too few dialogs, a model that cannot be trained.
    """
    output = Path(output)
    checkpoint = checkpoint_for(output)
    _check_request(model, output, gguf_file, method, objective, autocast, held_out, schedule, checkpoint, resume,
                   save_adapter, pairs_per_dialog)
    mix = complaints.check_mix(corruption_mix or complaints.DEFAULT_MIX) if objective == "complaints" else {}
    dialogs, n_held, rng = _split(sources, held_out, seed)
    torch.manual_seed(seed)
    scorer = FullScorer(model, tokenizer=tokenizer, gguf_file=gguf_file, preset=preset, rendering=rendering,
                        device=str(resolve_device(device)), dtype="float32", progress=False)
    held_batches = batches(list(examples(scorer, dialogs[:n_held], max_length)), batch_size, scorer.pad_id)
    pairs, held_pairs, train_batches, tokens = _training_data(scorer, dialogs, n_held, rng, objective, mix, max_pairs,
                                                              pairs_per_dialog, max_tokens, max_length, batch_size,
                                                              progress)
    dtype = _autocast(autocast, scorer.model.device.type)
    scorer.model.train()
    judge = _with_lora(scorer.model, lora_rank, scorer.loaded.is_encoder_decoder) if method == "lora" else scorer.model
    _check_trainable(judge, scorer.loaded.name, train_batches[0], dtype)
    rate = LEARNING_RATES[method] if learning_rate is None else learning_rate
    record = _new_record(scorer, sources, len(dialogs), train_batches, held_batches, tokens, dtype, method=method,
                         rate=rate, max_tokens=max_tokens, batch_size=batch_size, max_length=max_length,
                         lora_rank=lora_rank, seed=seed, schedule=schedule)
    if objective == "complaints":
        _complaints_record(record, len(pairs), len(held_pairs), margin, lm_weight, mix, pairs_per_dialog)
    run = Run(judge, rate=rate, steps=len(train_batches), schedule=schedule, checkpoint=checkpoint,
              every=checkpoint_every, settings=settings(record))

    def measure() -> dict[str, float]:
        return _measure(scorer, judge, held_batches, held_pairs, dtype, max_length, batch_size, objective)
    if not (resume and run.resume()):
        run.measured = measure()
    record.held_out_loss_before, record.held_out_pair_accuracy_before = run.measured["loss"], run.measured.get("pair_accuracy")
    if objective == "complaints":
        _train_on_pairs(scorer, judge, pairs, train_batches, run, dtype, max_length, margin, lm_weight, progress)
    else:
        _train_on_dialogs(judge, train_batches, run, dtype, progress)
    adapter = adapter_weights(judge) if save_adapter else None  # float16: the judge keeps those very weights
    after = measure()
    record.held_out_loss_after, record.held_out_pair_accuracy_after = after["loss"], after.get("pair_accuracy")
    record.seconds, record.digest = run.seconds, digest(record)
    write_judge(plain_weights(judge.merge_and_unload() if method == "lora" else judge), scorer.tokenizer, record,
                output, adapter)
    run.finish()
    logger.info("adapted %s: held-out loss %.4f -> %.4f; written to %s", record.base_model,
                record.held_out_loss_before, record.held_out_loss_after, output)
    return record


def _new_record(scorer: FullScorer, sources: Sequence[str], dialogs: int, train_batches: list[dict],
                held_batches: list[dict], tokens: int, dtype: torch.dtype | None, *, method: str, rate: float,
                max_tokens: int, batch_size: int, max_length: int, lora_rank: int, seed: int,
                schedule: str) -> Adaptation:
    """The record of an adaptation about to train (the measurements filled in as they are made)."""
    return Adaptation(
        base_model=scorer.loaded.name, base_revision=scorer.loaded.revision, sources=[Path(s).name for s in sources],
        dialogs=dialogs, training_examples=sum(len(b["input_ids"]) for b in train_batches), training_tokens=tokens,
        held_out_examples=sum(len(b["input_ids"]) for b in held_batches), held_out_loss_before=0.0,
        held_out_loss_after=0.0, method=method, rendering=scorer.rendering, preset=scorer.preset, max_tokens=max_tokens,
        batch_size=batch_size, max_length=max_length, learning_rate=rate, lora_rank=lora_rank if method == "lora" else 0,
        seed=seed, autocast=str(dtype).removeprefix("torch.") if dtype else "none", steps=len(train_batches),
        seconds=0.0, full_metric=__version__, schedule=schedule, warmup_steps=warmup_steps(schedule, len(train_batches)))


def _complaints_record(record: Adaptation, pairs: int, held_out_pairs: int, margin: float, lm_weight: float,
                       mix: dict[str, float], pairs_per_dialog: int) -> None:
    """The complaints objective's settings, written into the record."""
    record.objective, record.pairs, record.held_out_pairs = "complaints", pairs, held_out_pairs
    record.margin, record.lm_weight, record.corruption_mix = margin, lm_weight, mix
    record.pairs_per_dialog = pairs_per_dialog


def _split(sources: Sequence[str], held_out: float, seed: int) -> tuple[list[list[str]], int, random.Random]:
    """The dialogs (the held-out ones first, the same for every seed; the rest in ``seed``'s order),
    how many are held out, and the generator that goes on to draw the training pairs."""
    dialogs = read_dialogs(sources)
    if not dialogs:
        raise AdaptError(f"no usable dialog in {list(sources)}: each needs at least two non-empty turns")
    n_held = held_out_size(len(dialogs), held_out)
    if len(dialogs) < n_held + 1:
        raise AdaptError(f"{len(dialogs)} usable dialog(s): too few to hold {n_held} out and train on the rest")
    rng = split_held_out(dialogs)
    if seed != HELD_OUT_SEED:  # (seed 0 goes on with the split's generator, as before seeds split alike)
        rng = random.Random(seed)
        dialogs[n_held:] = rng.sample(dialogs[n_held:], len(dialogs) - n_held)
    return dialogs, n_held, rng


def _training_data(scorer: FullScorer, dialogs: list[list[str]], n_held: int, rng: random.Random, objective: str,
                   mix: dict[str, float], max_pairs: int, per_dialog: int, max_tokens: int, max_length: int,
                   batch_size: int, progress: bool) -> tuple[list[complaints.Pair], list[complaints.Pair], list[dict], int]:
    """The training pairs and held-out pairs (complaints; else none), the training batches (the pairs'
    real dialogs, or the dialogs within the token budget) and the tokens they hold."""
    pairs: list[complaints.Pair] = []
    held_pairs: list[complaints.Pair] = []
    if objective == "complaints":
        pairs, held_pairs = _complaint_pairs(scorer, dialogs, n_held, rng, HELD_OUT_SEED, mix, max_pairs, per_dialog,
                                             batch_size)
        train_examples = [training_example(scorer, [*p.context, p.real], len(p.context), max_length) for p in pairs]
        tokens = sum(len(i) + (len(t) if scorer.loaded.is_encoder_decoder else 0) for i, t in train_examples)
    else:
        train_examples, tokens = budgeted(examples(scorer, dialogs[n_held:], max_length), max_tokens,
                                          scorer.loaded.is_encoder_decoder, progress)
    train_batches = batches(train_examples, batch_size, scorer.pad_id)
    first = batch_tokens(train_batches[0])
    if objective == "dialogs" and first > max_tokens:
        raise AdaptError(f"the budget of {max_tokens} tokens is smaller than one batch ({first} tokens in "
                         f"{len(train_examples[:batch_size])} examples); raise --max-tokens or lower --batch-size")
    return pairs, held_pairs, train_batches, tokens


def _measure(scorer: FullScorer, judge: Any, held_batches: list[dict[str, torch.Tensor]],
             held_pairs: list[complaints.Pair], autocast: torch.dtype | None, max_length: int, batch_size: int,
             objective: str) -> dict[str, float]:
    """The held-out language-modelling loss and, for the complaints objective, the held-out pair accuracy."""
    measured = {"loss": _loss(judge, held_batches, autocast)}
    if objective == "complaints":
        measured["pair_accuracy"] = complaints.pair_accuracy(scorer, judge, held_pairs, max_length, batch_size)
    return measured


def _held_out_pairs(held: list[list[str]], seed: int = HELD_OUT_SEED) -> list[complaints.Pair]:
    """The held-out pairs, a fixed yardstick: drawn with the default mix whatever the training mix."""
    return complaints.make_pairs(held, random.Random(seed + 1), complaints.DEFAULT_MIX)


def measure_held_out(scorer: FullScorer, sources: Sequence[str], *, held_out: float = default("held_out"),
                     max_length: int = default("max_length"), batch_size: int = default("batch_size"),
                     autocast: str = default("autocast")) -> dict[str, float]:
    """What :func:`adapt` measures before and after training (its ``loss`` and ``pair_accuracy``), for a
    judge already made, measured by today's code: the same held-out split, examples and pairs of
    ``sources`` for these settings. The base measured here gives adapt's figures before training, to the
    last bit; a judge adapt wrote, loaded from its folder, gives figures near its record's after training
    (its merged weights round otherwise than the base plus the adapter)."""
    dialogs, n_held, _ = _split(sources, held_out, HELD_OUT_SEED)
    held = dialogs[:n_held]
    held_batches = batches(list(examples(scorer, held, max_length)), batch_size, scorer.pad_id)
    return _measure(scorer, scorer.model, held_batches, _held_out_pairs(held), _autocast(autocast, scorer.model.device.type),
                    max_length, batch_size, "complaints")


def _check_request(model: Any, output: Path, gguf_file: str | None, method: str, objective: str, autocast: str,
                   held_out: float, schedule: str, checkpoint: Path, resume: bool, save_adapter: bool,
                   pairs_per_dialog: int) -> None:
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
    if save_adapter and isinstance(model, str) and is_adapter(packaged_model(model) if model in PACKAGED_MODELS
                                                              else model):
        raise AdaptError(f"{model} is a LoRA adapter: a new adapter saved alone (--save-adapter) would sit on its base "
                         "plus this adapter, which no folder names, so it could never load; adapt it without "
                         "--save-adapter (the merged judge loads), or adapt its base")
    if method not in METHODS:
        raise AdaptError(f"unknown method {method!r}; choose one of {METHODS}")
    if objective not in OBJECTIVES:
        raise AdaptError(f"unknown objective {objective!r}; choose one of {OBJECTIVES}")
    if autocast not in AUTOCASTS:
        raise AdaptError(f"unknown autocast {autocast!r}; choose one of {AUTOCASTS}")
    if not 0 < held_out < 1:
        raise AdaptError(f"held_out must be a fraction between 0 and 1, got {held_out!r}")
    if pairs_per_dialog < 1:
        raise AdaptError(f"pairs_per_dialog must be at least 1 (pairs drawn from each dialog), got {pairs_per_dialog}")
    named_gguf = gguf_file is not None or (isinstance(model, str) and model.lower().endswith(".gguf"))
    if named_gguf and importlib.util.find_spec("gguf") is None:
        raise AdaptError(f"a GGUF judge needs the gguf package to be dequantized: {install_hint('gguf', 'gguf accelerate')}")
    if method == "lora" and importlib.util.find_spec("peft") is None:
        raise AdaptError(f"LoRA needs peft: {install_hint('adapt', 'peft')} (or method='full')")


def _autocast(name: str, device_type: str) -> torch.dtype | None:
    """The autocast dtype for ``name`` (see :data:`AUTOCASTS`) on a device of ``device_type``."""
    if name == "none" or (name == "auto" and device_type == "cpu" and native_bf16() is None):
        return None
    return torch.bfloat16


def _complaint_pairs(scorer: FullScorer, dialogs: list[list[str]], n_held: int, rng: random.Random, seed: int,
                     mix: dict[str, float], max_pairs: int, per_dialog: int, batch_size: int,
                     ) -> tuple[list[complaints.Pair], list[complaints.Pair]]:
    """The training pairs (at most ``max_pairs``, ``per_dialog`` from each dialog after the held-out ones in
    turn, then shuffled when more than one so that a batch mixes dialogs) and the held-out pairs (one per
    held-out dialog, whatever ``per_dialog``), refused when the scorer's aggregation cannot be trained or
    they are too few."""
    try:
        complaints.check_trainable(scorer.aggregation, len(scorer.positive_follow_ups))
    except UsageError as error:
        raise AdaptError(str(error)) from None
    if max_pairs < batch_size:
        raise AdaptError(f"the budget of {max_pairs} pairs is smaller than one batch ({batch_size} pairs); "
                         "raise --max-pairs or lower --batch-size")
    pairs = complaints.make_pairs(dialogs[n_held : n_held + 2 * max_pairs], rng, mix, per_dialog)[:max_pairs]
    if per_dialog > 1:  # a dialog's pairs sit together: spread them over the batches
        rng.shuffle(pairs)
    held_pairs = _held_out_pairs(dialogs[:n_held], seed)
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
                      progress: bool, cast_once: bool = True) -> None:
    """The ``dialogs`` objective: one pass of the language-modelling loss over the batches (from the
    run's step on, when it resumed). The frozen weights are cast to the autocast dtype once for the
    loop (:func:`~.frozen_casts.cast_frozen_linears`; the same numbers); ``cast_once=False``: at every call."""
    with cast_frozen_linears(judge, autocast if cast_once else None):
        for batch in tqdm(batches[run.done :], disable=not progress, desc="adapting", unit="batch",
                          initial=run.done, total=len(batches)):
            started = time.perf_counter()
            with torch.autocast(judge.device.type, dtype=autocast, enabled=autocast is not None):
                loss = judge(**{k: v.to(judge.device) for k, v in batch.items()}).loss
            run.step(loss, time.perf_counter() - started)


def _train_on_pairs(scorer: FullScorer, judge: Any, pairs: list[complaints.Pair],
                    batches: list[dict[str, torch.Tensor]], run: Run, autocast: torch.dtype | None,
                    max_context: int | None, margin: float, lm_weight: float, progress: bool,
                    cast_once: bool = True) -> None:
    """The ``complaints`` objective: one pass over the pairs (from the run's step on, when it
    resumed), the pairwise loss plus ``lm_weight`` times the language-modelling loss of each pair's
    real dialog (``batches``, in pair order). The frozen weights: as in :func:`_train_on_dialogs`."""
    size = len(batches[0]["input_ids"])
    with cast_frozen_linears(judge, autocast if cast_once else None), \
            tqdm(total=len(pairs), initial=min(len(pairs), run.done * size), disable=not progress,
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
