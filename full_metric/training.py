"""FULL inside training loops: a ``transformers`` Trainer callback, ``compute_metrics`` for
``Seq2SeqTrainer``, and a reward function for TRL. A face over :class:`~full_metric.FullScorer`.

The judge (the scorer's model) is loaded once, on first use, and kept for the whole run; it never
trains (the scorer scores under ``torch.inference_mode``). Settings are the scorer's
(:data:`full_metric.settings.SETTINGS`). On an accelerator the judge runs in bfloat16 unless a
``dtype`` is given. Importing this module imports neither TRL nor ``evaluate``.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from .comparison import mean_interval
from .distributed import current_rank, gather_results, merge_results
from .inputs import check_turns
from .rendering import Renderer, default_rendering
from .result import FullResult
from .scorer import FullScorer
from .turns import split_turns

try:  # transformers is a dependency; the base class makes the callback a TrainerCallback
    from transformers import TrainerCallback
except ImportError:  # pragma: no cover - transformers is always installed with full-metric
    TrainerCallback = object  # type: ignore[assignment,misc]

logger = logging.getLogger(__name__)

#: The per-example table each evaluation writes: ``<output_dir>/full/step-<N>.jsonl``.
TABLE_FOLDER = "full"
#: Reward scales of :func:`full_reward`.
REWARD_SCALES = ("raw", "group_z")


def check_contexts(contexts: Any) -> list[list[str]]:
    """Held-out contexts: a non-empty list of contexts, each a list of turns (or one string with a
    turn per line) with at least one turn to answer."""
    if isinstance(contexts, (str, bytes)) or not isinstance(contexts, Sequence):
        raise TypeError(f"contexts must be a list of contexts, got {type(contexts).__name__}")
    if len(contexts) == 0:
        raise ValueError("contexts is empty: give at least one held-out context to answer")
    checked = []
    for i, context in enumerate(contexts):
        turns = check_turns(split_turns(context) if isinstance(context, str) else context, f"contexts[{i}]")
        if not turns:
            raise ValueError(f"contexts[{i}] has no turn: the model being trained needs something to answer")
        checked.append(turns)
    return checked


class LazyScorer:
    """A :class:`FullScorer` made on first use with these settings (once for the whole run), or
    the one given. ``device`` / ``dtype`` left out follow the training: the trainer's device, and
    bfloat16 on an accelerator."""

    def __init__(self, scorer: FullScorer | None = None, **settings: Any):
        if scorer is not None and settings:
            raise TypeError(f"give a scorer or settings, not both (got settings {sorted(settings)})")
        if scorer is None:
            from .settings import check_settings

            check_settings({k: v for k, v in settings.items() if k != "model"})  # bad settings: before any work
        self._scorer, self.settings, self.loads = scorer, settings, 0

    def get(self, device: torch.device | str | None = None) -> FullScorer:
        if self._scorer is None:
            settings = {"progress": False, **self.settings}
            if device is not None and "device" not in settings:
                settings["device"] = str(device)
            if "dtype" not in settings and torch.device(settings.get("device") or "cpu").type not in ("cpu",):
                settings["dtype"] = "bfloat16"
            self._scorer = FullScorer(settings.pop("model", None), **settings)
            self.loads += 1
        return self._scorer


def summary(result: FullResult, prefix: str = "full") -> dict[str, Any]:
    """A result as the numbers a trainer logs: mean, its 95% bootstrap interval, how many, signature."""
    low, high = mean_interval(result.scores)
    return {prefix: result.mean, f"{prefix}_ci_low": low, f"{prefix}_ci_high": high,
            f"{prefix}_n": len(result.scores), f"{prefix}_signature": result.signature}


def prompt_text(tokenizer: Any, turns: list[str], encoder_decoder: bool) -> str:
    """What the model being trained reads to answer: its chat template where the tokenizer has one,
    else FULL's rendering of the dialog for its family (``B:`` answers ``A:`` for decoder-only)."""
    if getattr(tokenizer, "chat_template", None):
        last = len(turns) - 1
        messages = [{"role": "user" if (last - i) % 2 == 0 else "assistant", "content": t} for i, t in enumerate(turns)]
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    if encoder_decoder:
        return Renderer(tokenizer, default_rendering("", getattr(tokenizer, "name_or_path", ""), True), True) \
            .context_text(turns)
    last = len(turns) - 1
    return "\n".join([*(f"{'A' if (last - i) % 2 == 0 else 'B'}: {t}" for i, t in enumerate(turns)), "B:"])


def check_generation_tokenizer(tokenizer: Any) -> None:
    """A tokenizer the callback can generate with: it has a padding or an end-of-text token."""
    if tokenizer is None:
        raise ValueError("the callback needs the trained model's tokenizer: pass tokenizer= or the Trainer's "
                         "processing_class")
    if tokenizer.pad_token_id is None and tokenizer.eos_token_id is None:
        raise ValueError(f"tokenizer {getattr(tokenizer, 'name_or_path', '')!r} has neither a padding nor an "
                         "end-of-text token: generation cannot pad a batch or stop; set tokenizer.pad_token")


@torch.no_grad()
def generate_responses(
    model: Any, tokenizer: Any, contexts: Sequence[list[str]], generation_kwargs: dict[str, Any] | None = None,
    batch_size: int = 8,
) -> list[str]:
    """The model's answer to each context (greedy unless ``generation_kwargs`` say otherwise), its
    first line, stripped; the model's mode (training or eval) is restored afterwards."""
    check_generation_tokenizer(tokenizer)
    encoder_decoder = bool(model.config.is_encoder_decoder)
    kwargs = {"max_new_tokens": 32, "do_sample": False, **(generation_kwargs or {})}
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    side = tokenizer.padding_side
    was_training = model.training
    model.eval()
    answers: list[str] = []
    try:
        tokenizer.padding_side = "right" if encoder_decoder else "left"  # a decoder-only prompt ends where generation starts
        for start in range(0, len(contexts), batch_size):
            texts = [prompt_text(tokenizer, list(c), encoder_decoder) for c in contexts[start : start + batch_size]]
            batch = tokenizer(texts, return_tensors="pt", padding=True, truncation=True,
                              add_special_tokens=not getattr(tokenizer, "chat_template", None)).to(model.device)
            out = model.generate(**batch, pad_token_id=pad, **kwargs)
            new = out if encoder_decoder else out[:, batch["input_ids"].shape[1] :]
            for text in tokenizer.batch_decode(new, skip_special_tokens=True):
                line = next((x.strip() for x in text.strip().splitlines() if x.strip()), "")
                answers.append(line or "...")  # FULL scores a non-empty response; an empty answer is scored as one
    finally:
        tokenizer.padding_side = side
        model.train(was_training)
    return answers


class FullCallback(TrainerCallback):
    """Scores the model being trained with FULL at each evaluation (every ``every``-th).

    It answers the held-out ``contexts`` with the model (greedy, ``generation_kwargs`` to change
    that; the chat template where the tokenizer has one), scores the answers with the judge and
    logs ``eval_full`` (the mean), ``eval_full_ci_low`` / ``eval_full_ci_high`` (its 95% interval),
    ``eval_full_n`` and ``eval_full_signature``. With :meth:`attach` (``FullCallback(...).attach(trainer)``)
    they go through ``trainer.log``, so every ``report_to`` integration receives them; they are
    also added to the metrics ``trainer.evaluate()`` returns. The per-example table (context,
    response, score) of each evaluation is written to ``<output_dir>/full/step-<N>.jsonl``. Under
    ``torchrun`` / ``accelerate launch`` each rank answers and scores its share of the contexts and
    every rank gets the gathered result (rank 0 writes the table).

    Args:
        contexts: held-out contexts, each a list of turns (or a string with a turn per line).
        scorer: a :class:`FullScorer` to use as the judge; or, instead, the scorer's settings as
            keywords (``model=``, ``preset=``, ``dtype=``...), loaded once on first use on the
            trainer's device.
        tokenizer: the trained model's tokenizer (default: the Trainer's ``processing_class``).
        generation_kwargs: for ``model.generate`` (default: greedy, 32 new tokens).
        every: score at every ``every``-th evaluation.

    Raises:
        TypeError, ValueError: no contexts, an empty context, bad settings: at construction.
    """

    def __init__(
        self, contexts: Sequence[Any], scorer: FullScorer | None = None, *, tokenizer: Any = None,
        generation_kwargs: dict[str, Any] | None = None, every: int = 1, **settings: Any,
    ):
        from .settings import positive_int

        self.contexts = check_contexts(contexts)
        self.judge = LazyScorer(scorer, **settings)
        self.tokenizer = tokenizer
        self.generation_kwargs = dict(generation_kwargs or {})
        self.every = positive_int(every, "every")
        self.trainer: Any = None
        self.evaluations = 0
        if tokenizer is not None:
            check_generation_tokenizer(tokenizer)

    def attach(self, trainer: Any) -> "FullCallback":
        """Add the callback to ``trainer`` and log through it (``trainer.log``); returns itself."""
        self.trainer = trainer
        trainer.add_callback(self)
        return self

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        check_generation_tokenizer(self.tokenizer or kwargs.get("processing_class"))

    def evaluate(self, model: Any, tokenizer: Any, device: Any = None) -> tuple[FullResult, list[dict[str, Any]]]:
        """Answer this rank's share of the contexts and score the answers; the result gathered from
        every rank (in rank order) and its table (context, response, score)."""
        rank = current_rank()
        mine = self.contexts[rank.rank :: rank.world_size]
        responses = generate_responses(model, tokenizer, mine, self.generation_kwargs)
        result = self.judge.get(device).score(mine, responses)
        parts = gather_results((result, mine, responses))
        rows = [{"context": c, "response": r, "full": s}
                for part, contexts, answers in parts for c, r, s in zip(contexts, answers, part.scores)]
        return merge_results([part for part, _, _ in parts]), rows

    def on_evaluate(self, args: Any, state: Any, control: Any, metrics: dict[str, Any] | None = None,
                    **kwargs: Any) -> None:
        self.evaluations += 1
        if (self.evaluations - 1) % self.every:
            return
        tokenizer = self.tokenizer or kwargs.get("processing_class")
        gathered, rows = self.evaluate(kwargs["model"], tokenizer, getattr(args, "device", None))
        logs = summary(gathered, "eval_full")
        if metrics is not None:
            metrics.update(logs)
        if current_rank().main and getattr(args, "output_dir", None):
            folder = Path(args.output_dir) / TABLE_FOLDER
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"step-{state.global_step}.jsonl").write_text(
                "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
        if self.trainer is not None:
            self.trainer.log(dict(logs))
        else:
            state.log_history.append({**logs, "step": state.global_step})


def full_compute_metrics(
    contexts: Sequence[Any], tokenizer: Any, scorer: FullScorer | None = None, **settings: Any
) -> Callable[[Any], dict[str, Any]]:
    """``compute_metrics`` for ``Seq2SeqTrainer(..., args=Seq2SeqTrainingArguments(predict_with_generate=True))``:
    decodes the generated predictions, pairs them with the evaluation set's ``contexts`` (in the
    same order) and returns ``full`` (the mean), ``full_ci_low`` / ``full_ci_high``, ``full_n`` and
    ``full_signature`` (the Trainer logs them as ``eval_full``...). ``scorer`` or the scorer's
    settings as for :class:`FullCallback`."""
    checked = check_contexts(contexts)
    judge = LazyScorer(scorer, **settings)

    def compute_metrics(prediction: Any) -> dict[str, Any]:
        ids = prediction.predictions[0] if isinstance(prediction.predictions, tuple) else prediction.predictions
        ids = [[t for t in row if t >= 0] for row in getattr(ids, "tolist", lambda: ids)()]  # -100: padding
        responses = [text.strip() or "..." for text in tokenizer.batch_decode(ids, skip_special_tokens=True)]
        if len(responses) != len(checked):
            raise ValueError(f"{len(responses)} predictions but {len(checked)} contexts: give the contexts of the "
                             "evaluation set, in its order")
        return summary(judge.get().score(checked, responses))

    return compute_metrics


def _messages_text(value: Any, where: str) -> tuple[list[str], bool]:
    """A prompt or completion as turns: plain text (one turn), or conversational messages (their
    contents, system messages left out); and whether it held a user turn."""
    if isinstance(value, str):
        return [value], True
    if isinstance(value, Sequence) and all(isinstance(m, dict) and "content" in m for m in value):
        turns = [str(m["content"]) for m in value if m.get("role") != "system"]
        return turns, any(m.get("role") == "user" for m in value)
    raise TypeError(f"{where} must be a string or a list of messages ({{'role': ..., 'content': ...}}), "
                    f"got {type(value).__name__}")


def full_reward(scorer: FullScorer | None = None, *, scale: str = "raw", **settings: Any) -> Callable[..., list[float]]:
    """A reward function for TRL (``GRPOTrainer(reward_funcs=[full_reward(...)])``): the FULL score
    of each completion as the answer to its prompt.

    Prompts and completions are plain text or conversational (lists of messages; the completion's
    messages are its answer, a prompt needs a user turn). ``scale``: ``"raw"`` (the FULL score,
    higher is better) or ``"group_z"`` (z-scored among the completions of the same prompt:
    ``(s - mean) / std``, 0 where they all score the same). The judge is made once, on first call,
    and shared by every call. ``scorer`` or the scorer's settings as for :class:`FullCallback`.
    """
    if scale not in REWARD_SCALES:
        raise ValueError(f"unknown scale {scale!r}; choose one of {REWARD_SCALES}")
    judge = LazyScorer(scorer, **settings)

    def reward(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float]:
        if len(prompts) != len(completions):
            raise ValueError(f"got {len(prompts)} prompts but {len(completions)} completions; they must pair up")
        contexts, responses, keys = [], [], []
        for i, (prompt, completion) in enumerate(zip(prompts, completions)):
            turns, has_user = _messages_text(prompt, f"prompts[{i}]")
            if not has_user:
                raise ValueError(f"prompts[{i}] has no user turn: there is nothing for the completion to answer")
            answer = " ".join(_messages_text(completion, f"completions[{i}]")[0]).strip()
            contexts.append(turns)
            responses.append(answer or "...")
            keys.append(json.dumps(turns))
        scores = judge.get().score(contexts, responses).scores
        return scores if scale == "raw" else group_z(scores, keys)

    reward.__name__ = "full"  # TRL logs each reward under its function's name
    reward.judge = judge  # type: ignore[attr-defined]
    return reward


def group_z(scores: Sequence[float], groups: Sequence[Any]) -> list[float]:
    """Each score z-scored among the scores of its group (population standard deviation; 0 where a
    group's scores are all equal)."""
    members: dict[Any, list[float]] = {}
    for score, group in zip(scores, groups):
        members.setdefault(group, []).append(score)
    out = []
    for score, group in zip(scores, groups):
        values = members[group]
        mean = sum(values) / len(values)
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
        out.append(0.0 if std == 0 else (score - mean) / std)
    return out
