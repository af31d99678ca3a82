"""FULL inside training loops: a ``transformers`` Trainer callback, ``compute_metrics`` for
``Seq2SeqTrainer``, and a reward function for TRL. A face over :class:`~full_metric.FullScorer`.

The judge (the scorer's model) is loaded once, on first use, and kept for the whole run; it never
trains (the scorer scores under ``torch.inference_mode``). Settings are the scorer's
(:data:`full_metric.settings.SETTINGS`). Where the judge runs is decided once, by
:func:`judge_placement`: the trainer's device (or ``device="auto"``: the process's own GPU under
``torchrun``), in bfloat16 on an accelerator unless a ``dtype`` is given. Importing this module
imports neither TRL nor ``evaluate``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from .. import answers as answers_module
from .generation import (
    FILLER_CONTEXT, answer_text, check_generation_tokenizer, generate_responses, prompt_ids, prompt_limit, prompt_text,
)
from ..comparison import mean_interval
from ..files.distributed import balanced_shares, current_rank, gather_results, merge_in_order
from ..errors import UsageError, UsageTypeError
from ..inputs import check_turns
from ..models import resolve_device
from ..result import FullResult
from ..scorer import FullScorer
from ..turns import split_turns
from ..unscored import as_json_score, is_unscored, left_out, unscored_items

try:  # transformers is a dependency; the base class makes the callback a TrainerCallback
    from transformers import TrainerCallback
except ImportError:  # pragma: no cover - transformers is always installed with full-metric
    TrainerCallback = object  # type: ignore[assignment,misc]

logger = logging.getLogger(__name__)

__all__ = [  # this face, generation's functions (faces/generation.py) and the answer profile included
    "FullCallback", "full_compute_metrics", "full_reward", "repetition_reward", "summary", "check_contexts",
    "judge_placement", "LazyScorer", "FullScorer", "NO_TRAINER", "TABLE_FOLDER", "FILLER_CONTEXT", "prompt_text",
    "answer_text", "prompt_limit", "prompt_ids", "check_generation_tokenizer", "generate_responses", "GENERIC_ANSWERS",
    "answer_profile",
]

#: What the training examples measure of a policy's answers (:mod:`full_metric.answers`), named here too.
GENERIC_ANSWERS, answer_profile = answers_module.GENERIC_ANSWERS, answers_module.answer_profile

#: The per-example table each evaluation writes: ``<output_dir>/full/step-<N>.jsonl``.
TABLE_FOLDER = "full"


def check_contexts(contexts: Any) -> list[list[str]]:
    """Held-out contexts: a non-empty list of contexts, each a list of turns (or one string with a
    turn per line) with at least one turn to answer."""
    if isinstance(contexts, (str, bytes)) or not isinstance(contexts, Sequence):
        raise UsageTypeError(f"contexts must be a list of contexts, got {type(contexts).__name__}")
    if len(contexts) == 0:
        raise UsageError("contexts is empty: give at least one held-out context to answer")
    checked = []
    for i, context in enumerate(contexts):
        turns = check_turns(split_turns(context) if isinstance(context, str) else context, f"contexts[{i}]")
        if not turns:
            raise UsageError(f"contexts[{i}] has no turn: the model being trained needs something to answer")
        checked.append(turns)
    return checked


def judge_placement(settings: dict[str, Any], trainer_device: torch.device | str | None = None) -> dict[str, Any]:
    """The judge's ``device`` and ``dtype`` from its settings: a device given (other than
    ``"auto"``) is kept; else the trainer's device; else the best available for this process
    (:func:`~full_metric.models.resolve_device`: ``cuda:LOCAL_RANK`` under ``torchrun``). Without a
    ``dtype``, bfloat16 on an accelerator (the model's own float32 on a CPU). The one rule of the
    callback, :func:`full_compute_metrics` and :func:`full_reward`."""
    given = settings.get("device")
    device = resolve_device(trainer_device if given in (None, "auto") else given)
    dtype = settings.get("dtype")
    if dtype is None and device.type != "cpu":
        dtype = "bfloat16"
    return {**settings, "device": str(device), "dtype": dtype}


class LazyScorer:
    """A :class:`FullScorer` made on first use with these settings (once for the whole run), or
    the one given, placed by :func:`judge_placement`."""

    def __init__(self, scorer: FullScorer | None = None, **settings: Any):
        if scorer is not None and settings:
            raise UsageTypeError(f"give a scorer or settings, not both (got settings {sorted(settings)})")
        if scorer is None:
            from ..settings import check_settings

            check_settings({k: v for k, v in settings.items() if k != "model"})  # bad settings: before any work
        self._scorer, self.settings, self.loads = scorer, settings, 0

    def get(self, device: torch.device | str | None = None) -> FullScorer:
        """The judge; made on first call, on ``device`` (the trainer's) unless the settings name one."""
        if self._scorer is None:
            settings = judge_placement({"progress": False, **self.settings}, device)
            self._scorer = FullScorer(settings.pop("model", None), **settings)
            self.loads += 1
        return self._scorer


def summary(result: FullResult, prefix: str = "full") -> dict[str, Any]:
    """A result as the numbers a trainer logs: the mean over the scored items, its 95% bootstrap interval,
    how many items and how many of them were not scored (:mod:`full_metric.unscored`), the signature."""
    low, high = mean_interval(result.scores)
    if result.unscored:
        logger.warning("%s: %s", prefix, left_out(result.unscored, len(result), "predictions"))
    return {prefix: result.mean, f"{prefix}_ci_low": low, f"{prefix}_ci_high": high,
            f"{prefix}_n": len(result.scores), f"{prefix}_unscored": len(result.unscored),
            f"{prefix}_signature": result.signature}


#: What the callback says when it has no trainer to log through (no ``report_to`` integration would
#: receive ``eval_full``).
NO_TRAINER = ("FullCallback needs the Trainer to log eval_full through (else no report_to integration receives "
              "it): create the Trainer first, then FullCallback(..., trainer=trainer).attach(trainer) or "
              "FullCallback(...).attach(trainer)")


class FullCallback(TrainerCallback):
    """Scores the model being trained with FULL at each evaluation (every ``every``-th).

    It answers the held-out ``contexts`` with the model (greedy, ``generation_kwargs`` to change
    that; the chat template where the tokenizer has one), scores the answers with the judge and
    logs ``eval_full`` (the mean), ``eval_full_ci_low`` / ``eval_full_ci_high`` (its 95% interval),
    ``eval_full_n`` and ``eval_full_signature`` through ``trainer.log``, so every ``report_to``
    integration (TensorBoard, W&B...) receives them; they are also added to the metrics
    ``trainer.evaluate()`` returns. A Trainer does not hand itself to its callbacks, so the callback
    needs it: ``FullCallback(...).attach(trainer)`` (adds it too), or ``trainer=`` with
    ``trainer.add_callback``. Passed only as ``Trainer(callbacks=[...])``, it refuses to run at
    the start of training (and at an evaluation) with a message saying so.

    The per-example table (context, the prompt the model read, response, score) of each evaluation
    is written to ``<output_dir>/full/step-<N>.jsonl``, in the order of ``contexts``. Under
    ``torchrun`` / ``accelerate launch`` each rank answers and scores an equal share of the contexts
    (every rank calls ``generate`` equally often), and every rank gets the gathered result in the
    order of ``contexts`` (rank 0 writes the table).

    Args:
        contexts: held-out contexts, each a list of turns (or a string with a turn per line).
        scorer: a :class:`FullScorer` to use as the judge; or, instead, the scorer's settings as
            keywords (``model=``, ``preset=``, ``dtype=``...), loaded once on first use on the
            trainer's device (:func:`judge_placement`).
        trainer: the Trainer to log through (or call :meth:`attach`).
        tokenizer: the trained model's tokenizer (default: the Trainer's ``processing_class``).
        generation_kwargs: for ``model.generate`` (default: greedy, 32 new tokens).
        every: score at the 1st, ``every + 1``-th, ``2 * every + 1``-th... evaluation.
        batch_size: contexts per ``generate`` call.

    Raises:
        TypeError, ValueError: no contexts, an empty context, bad settings: at construction.
    """

    def __init__(
        self, contexts: Sequence[Any], scorer: FullScorer | None = None, *, trainer: Any = None, tokenizer: Any = None,
        generation_kwargs: dict[str, Any] | None = None, every: int = 1, batch_size: int = 8, **settings: Any,
    ):
        from ..settings import positive_int

        self.contexts = check_contexts(contexts)
        self.judge = LazyScorer(scorer, **settings)
        self.tokenizer = tokenizer
        self.generation_kwargs = dict(generation_kwargs or {})
        self.every = positive_int(every, "every")
        self.batch_size = positive_int(batch_size, "batch_size")
        self.trainer: Any = trainer
        self.evaluations = 0
        self.generate_calls = 0  # generate calls of this rank at the last evaluation
        if tokenizer is not None:
            check_generation_tokenizer(tokenizer)

    def attach(self, trainer: Any) -> "FullCallback":
        """Log through ``trainer`` and add the callback to it (unless it is there already); returns itself."""
        self.trainer = trainer
        if self not in trainer.callback_handler.callbacks:
            trainer.add_callback(self)
        return self

    def _check_trainer(self) -> None:
        if self.trainer is None:
            raise UsageError(NO_TRAINER)

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._check_trainer()
        check_generation_tokenizer(self.tokenizer or kwargs.get("processing_class"))
        best = getattr(args, "metric_for_best_model", None) or ""
        if self.every > 1 and best.removeprefix("eval_").startswith("full"):
            raise UsageError(f"metric_for_best_model={best!r} needs FULL at every evaluation, and FullCallback(every="
                             f"{self.every}) scores one evaluation in {self.every}: the Trainer would find no "
                             f"{best!r} at the others; use every=1, or evaluate less often (eval_steps)")

    def evaluate(self, model: Any, tokenizer: Any, device: Any = None) -> tuple[FullResult, list[dict[str, Any]]]:
        """Answer this rank's share of the contexts and score the answers; the result gathered from
        every rank, and its table (context, prompt, response, score), in the order of the contexts."""
        rank = current_rank()
        shares = balanced_shares([1] * len(self.contexts), rank.world_size)  # sizes differ by one at most
        indices = shares[rank.rank]
        mine = [self.contexts[i] for i in indices]
        batches = max(-(-len(share) // self.batch_size) for share in shares)
        self.generate_calls = batches  # every rank's, the same (a rank with fewer contexts answers a filler)
        prompts: list[str] = []
        responses = generate_responses(model, tokenizer, mine, self.generation_kwargs, self.batch_size,
                                       batches=batches, prompts=prompts)
        result = self.judge.get(device).score(mine, responses)
        parts = gather_results((indices, result, prompts, responses))
        merged = merge_in_order([(i, r) for i, r, _, _ in parts])
        by_index = {i: (p, a) for idx, _, ps, rs in parts for i, p, a in zip(idx, ps, rs)}
        rows = [{"context": c, "prompt": by_index[k][0], "response": by_index[k][1], **as_json_score(s)}
                for k, (c, s) in enumerate(zip(self.contexts, merged.scores))]  # valid JSON: null + why, not NaN
        return merged, rows

    def on_evaluate(self, args: Any, state: Any, control: Any, metrics: dict[str, Any] | None = None,
                    **kwargs: Any) -> None:
        self._check_trainer()
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
        self.trainer.log(dict(logs))


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
        responses = [answers_module.response_of(t) for t in tokenizer.batch_decode(ids, skip_special_tokens=True)]
        if len(responses) != len(checked):
            raise UsageError(f"{len(responses)} predictions but {len(checked)} contexts: give the contexts of the "
                             "evaluation set, in its order")
        return summary(judge.get().score(checked, responses))

    return compute_metrics


def _messages_text(value: Any, where: str) -> tuple[list[str], bool]:
    """A prompt or completion as turns: plain text (one turn), or conversational messages (their
    contents; system messages and empty turns, such as a strict template's user-first placeholder,
    left out); and whether it held a user turn."""
    if isinstance(value, str):
        return [value], True
    if isinstance(value, Sequence) and all(isinstance(m, dict) and "content" in m for m in value):
        turns = [str(m["content"]) for m in value if m.get("role") != "system" and str(m["content"]).strip()]
        return turns, any(m.get("role") == "user" for m in value)
    raise UsageTypeError(f"{where} must be a string or a list of messages ({{'role': ..., 'content': ...}}), "
                    f"got {type(value).__name__}")


def _completion_response(completion: Any, where: str) -> str:
    """The response a TRL completion gives (plain text or messages), by :func:`full_metric.answers.response_of`."""
    return answers_module.response_of("\n".join(_messages_text(completion, where)[0]))


def full_reward(scorer: FullScorer | None = None, **settings: Any) -> Callable[..., list[float | None]]:
    """A reward function for TRL (``GRPOTrainer(reward_funcs=[full_reward(...)])``): the FULL score
    of each completion as the answer to its prompt, unscaled.

    Prompts and completions are plain text or conversational (lists of messages; system messages
    are left out of the context, the completion's messages are its answer, a prompt needs a user
    turn). GRPO itself scales rewards among the completions of each prompt, over the completions
    of all processes (``GRPOConfig(scale_rewards="group")``, its default), so this function does not
    (a process sees only its own share of a group). The judge is made once, on first call, and
    shared by every call. ``scorer`` or the scorer's settings as for :class:`FullCallback`.
    """
    judge = LazyScorer(scorer, **settings)

    def reward(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        if len(prompts) != len(completions):
            raise UsageError(f"got {len(prompts)} prompts but {len(completions)} completions; they must pair up")
        contexts, responses = [], []
        for i, (prompt, completion) in enumerate(zip(prompts, completions)):
            turns, has_user = _messages_text(prompt, f"prompts[{i}]")
            if not has_user:
                raise UsageError(f"prompts[{i}] has no user turn: there is nothing for the completion to answer")
            contexts.append(turns)
            responses.append(_completion_response(completion, f"completions[{i}]"))
        return unscored_reward(judge.get().score(contexts, responses).scores)

    reward.__name__ = "full"  # TRL logs each reward under its function's name
    reward.judge = judge  # type: ignore[attr-defined]
    return reward


def unscored_reward(scores: Sequence[float]) -> list[float | None]:
    """FULL's rewards of one call, an answer not scored (too long for any context: :mod:`full_metric.unscored`)
    given the lowest reward of the scored answers of the same call, so that it never earns more than a scored
    one, whatever the sign of FULL (positive follow-ups and ``balanced`` can make it negative; TRL sums the
    reward functions and counts a ``None`` as nothing, i.e. 0). With no answer of the call scored, every one
    gets ``None``: no reward to rank them by."""
    scored = [s for s in scores if not is_unscored(s)]
    if len(scored) < len(scores):
        logger.warning("full_reward: %s; each gets the call's lowest reward (%s)",
                       left_out(unscored_items(scores), len(scores), "completions"),
                       f"{min(scored):.4f}" if scored else "none: no completion of this call was scored")
    floor = min(scored) if scored else None
    return [floor if is_unscored(s) else s for s in scores]


def repetition_reward(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float]:
    """A guard to give GRPO beside :func:`full_reward`: minus the share of repeated words in each
    completion (0 for an answer without repeats, near -1 for "window window window...")."""
    out = []
    for i, completion in enumerate(completions):
        said = answers_module.words(_completion_response(completion, f"completions[{i}]"))
        out.append(-(1 - len(set(said)) / len(said)) if said else 0.0)
    return out
