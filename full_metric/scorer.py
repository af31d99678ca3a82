"""``FullScorer``: loads a model once and scores many dialogs with FULL."""

from __future__ import annotations

import logging
from typing import Any, Mapping, Sequence

import torch
from tqdm.auto import tqdm

from .aggregate import aggregate, check_aggregation
from .fine_grained import category_scores
from .follow_ups import PAPER_FIVE, REFERENCE_PACKAGE_DEFAULT, resolve_follow_ups
from .inputs import check_dialogs
from .loglik import (
    LogLik, cached_log_likelihoods, dialog_tokens, generic_log_likelihoods, is_out_of_memory,
    oracle_log_likelihoods, packed_log_likelihoods,
)
from .models import DEFAULT_MODEL, load_model, model_lock
from .paths import choose_paths
from .presets import STUDY_PRESETS
from .rendering import Renderer, default_rendering
from .result import FullResult, make_signature
from .settings import BY_NAME, describe, positive_int

logger = logging.getLogger(__name__)

#: Named bundles of settings. ``paper``: the paper's method (its five follow-ups, equation (1),
#: each model family rendered as it was trained, oldest tokens dropped first). ``reference``: the
#: authors' package ``full`` 0.0.3.1 exactly (encoder-decoder models only).
PRESETS: dict[str, dict[str, Any]] = {
    "paper": {"follow_ups": PAPER_FIVE, "aggregation": "sum", "rendering": None},
    "reference": {"follow_ups": REFERENCE_PACKAGE_DEFAULT, "aggregation": "perplexity", "rendering": "reference"},
    **STUDY_PRESETS,
}
#: ``batched``: the path chosen at load (``packed`` or ``cached`` where proven, else ``generic``);
#: ``generic``: one row per dialog and follow-up through the model's own forward; ``oracle``: one
#: pass per pair.
ENGINES = ("batched", "generic", "oracle")
_BATCHED = {"packed": packed_log_likelihoods, "cached": cached_log_likelihoods, "generic": generic_log_likelihoods}

#: Two short dialogs (turn level) that every scorer scores with its path and with the oracle at load.
SELF_CHECK_DIALOGS = (
    ("Hi! How was your weekend?", "Great, I went hiking in the mountains with my sister."),
    ("Do you like cooking?", "Not really.", "Why not? It can be fun.", "I always burn things, so I order food."),
)
#: The largest relative difference from the oracle the self-check accepts, by the model's dtype
#: (half precision rounds differently in differently shaped passes).
SELF_CHECK_TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-4}
HALF_PRECISION_TOLERANCE = 5e-2
#: Dialogs per forward pass when none is given: on a CPU small batches lose less to padding and
#: run as fast per token; accelerators need wide batches.
DEFAULT_BATCH_SIZE = {"cpu": 4, "accelerator": 32}
#: Padded tokens per forward pass at most (context plus, for decoder-only models, follow-ups):
#: bounds the memory that long dialogs take, whatever the batch size.
DEFAULT_MAX_BATCH_TOKENS = {"cpu": 1024, "accelerator": 65536}


def _squash(text: str) -> str:
    return "".join(c for c in text.lower() if c.isalnum())


def preset_fits(preset: str, model_name: str, model_type: str) -> bool:
    """Whether ``preset`` suits a model: method presets (no ``family``) suit any model; a family
    preset from the settings study suits models whose name or model type names its family
    (``smollm2`` in ``.../SmolLM2-135M-Instruct...``, ``gemma3`` in ``gemma3_text``)."""
    family = PRESETS[preset].get("family")
    return family is None or _squash(family) in _squash(model_name) or _squash(family) in _squash(model_type)


def check_batch_size(batch_size: Any) -> int:
    """Return ``batch_size`` if it is a positive integer, else raise ``ValueError``."""
    return positive_int(batch_size, "batch_size")


def resolve_positive(
    positive: str | Sequence[str] | None, default: Sequence[str], negative: Sequence[str]
) -> tuple[str, ...]:
    """The positive follow-ups: ``None`` gives ``default``, an empty list none; none may also be negative."""
    if positive is None:
        chosen = tuple(default)
    elif not isinstance(positive, str) and len(positive) == 0:
        chosen = ()
    else:
        chosen = resolve_follow_ups(positive)
    both = [f for f in chosen if f in set(negative)]
    if both:
        raise ValueError(f"a follow-up cannot be both negative and positive: {both[0]!r}")
    return chosen


def check_signs(positive: Sequence[str], aggregation: str) -> None:
    """Positive follow-ups need an aggregation that can turn their sign."""
    if positive and aggregation == "perplexity":
        raise ValueError("the 'perplexity' aggregation takes no positive follow-ups; use 'sum', 'mean' or 'balanced'")


def check_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Validate the settings that need no model (a mapping of setting names of
    :data:`full_metric.settings.SETTINGS`; missing ones are ``None``), each by its declaration, then
    resolve them against the preset."""
    unknown = sorted(set(settings) - set(BY_NAME))
    if unknown:
        raise TypeError(f"unknown setting {unknown[0]!r}; the settings are {list(BY_NAME)}")
    for name, setting in BY_NAME.items():
        if not (name == "dtype" and isinstance(settings.get(name), torch.dtype)):  # a torch dtype is valid as it is
            setting.check(settings.get(name))
    preset, max_turns = settings.get("preset"), settings.get("max_turns")
    follow_ups, positive_follow_ups = settings.get("follow_ups"), settings.get("positive_follow_ups")
    preset = preset or "paper"
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose one of {sorted(PRESETS)}")
    defaults = PRESETS[preset]
    negative = resolve_follow_ups(follow_ups, defaults["follow_ups"])
    positive = resolve_positive(positive_follow_ups, defaults.get("positive_follow_ups", ()), negative)
    aggregation = check_aggregation(settings.get("aggregation") or defaults["aggregation"])
    check_signs(positive, aggregation)
    return {
        "preset": preset,
        "follow_ups": negative,
        "positive_follow_ups": positive,
        "aggregation": aggregation,
        "rendering": defaults["rendering"],
        "model": defaults.get("model", DEFAULT_MODEL),
        "max_turns": defaults.get("max_turns", 50) if max_turns is None else max_turns,
        "batch_size": settings.get("batch_size"),
        "context_budget": settings.get("context_budget"),
        "max_batch_tokens": settings.get("max_batch_tokens"),
    }


class FullScorer:
    """Scores dialog responses (turn level) or whole dialogs (dialog level) with FULL.

    The model reads each dialog and gives a log-likelihood to every follow-up; the aggregate is
    turned so that **higher is better** (the default follow-ups are negative ones).

    Args:
        model: a Hub model id, a local folder, a loaded ``transformers`` model (with
            ``tokenizer``) or a ``LoadedModel`` (shared, not copied).
        tokenizer: the tokenizer, required with a loaded model, optional otherwise.

    The other keywords are the settings, each declared once in :data:`full_metric.settings.SETTINGS`:

{settings}

    Raises:
        ValueError, TypeError: a bad setting, before the model is loaded.
    """

    __doc__ = __doc__.replace("{settings}", describe(8, skip=("model",)))

    def __init__(
        self,
        model: str | Any = None,
        *,
        tokenizer: Any = None,
        follow_ups: str | Sequence[str] | None = None,
        positive_follow_ups: str | Sequence[str] | None = None,
        aggregation: str | None = None,
        preset: str | None = None,
        device: str | torch.device | None = None,
        dtype: str | torch.dtype | None = None,
        batch_size: int | None = None,
        gguf_file: str | None = None,
        revision: str | None = None,
        rendering: str | None = None,
        context_budget: int | None = None,
        max_turns: int | None = None,
        max_batch_tokens: int | None = None,
        progress: bool = True,
    ):
        checked = check_settings({k: v for k, v in locals().items() if k in BY_NAME and k != "model"})
        self.preset: str = checked["preset"]
        self.follow_ups: tuple[str, ...] = checked["follow_ups"]
        self.positive_follow_ups: tuple[str, ...] = checked["positive_follow_ups"]
        self.aggregation: str = checked["aggregation"]
        batch_size = checked["batch_size"]
        self.context_budget: int | None = checked["context_budget"]
        self.max_turns: int = checked["max_turns"]
        self.progress = progress
        self.loaded = load_model(
            checked["model"] if model is None else model, tokenizer=tokenizer, gguf_file=gguf_file, device=device, dtype=dtype, revision=revision
        )
        config = self.loaded.model.config
        kind = "cpu" if self.loaded.model.device.type == "cpu" else "accelerator"
        self.batch_size: int = DEFAULT_BATCH_SIZE[kind] if batch_size is None else batch_size
        self.max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS[kind] if max_batch_tokens is None else max_batch_tokens
        if not preset_fits(self.preset, self.loaded.name, config.model_type):
            logger.warning(
                "preset %r was tuned for %s models; %s (model type %r) is not one, so its follow-ups and "
                "settings may not suit it", self.preset, PRESETS[self.preset]["family"], self.loaded.name,
                config.model_type,
            )
        self.rendering = (
            rendering
            or checked["rendering"]
            or default_rendering(
                config.model_type, self.loaded.name, self.loaded.is_encoder_decoder,
                bool(getattr(self.loaded.tokenizer, "chat_template", None)),
            )
        )
        if self.rendering == "reference" and not self.loaded.is_encoder_decoder:
            raise ValueError("the 'reference' rendering (and preset) needs an encoder-decoder model, as the package did")
        self.renderer = Renderer(self.loaded.tokenizer, self.rendering, self.loaded.is_encoder_decoder)
        tok = self.loaded.tokenizer
        self.pad_id = next((t for t in (tok.pad_token_id, tok.eos_token_id, 0) if t is not None))
        #: the engine of ``score``'s default ``engine="batched"``: ``"packed"``, ``"cached"`` or ``"generic"``
        self._candidates, reason = choose_paths(self.model)
        self.path: str = self._candidates[0]
        logger.info("%s path: %s", self.path, reason)
        #: the self-check's largest relative difference between ``path`` and the oracle
        self.self_check_difference = self._self_check()
        logger.info("FULL scorer ready: %s", self.signature())

    def _self_check(self) -> float:
        """Score :data:`SELF_CHECK_DIALOGS` with the chosen path and the oracle. A fast path that
        fails or differs falls back to the next candidate (with a warning); a generic path that
        differs means no path can score this model, and the scorer refuses it."""
        targets = [self.renderer.target_ids(f) for f in (*self.follow_ups, *self.positive_follow_ups)]
        limit = self._context_limit(targets)
        contexts = [self.renderer.encode(list(d), limit).context_ids for d in SELF_CHECK_DIALOGS]
        kind = self.model.config.model_type
        tolerance = SELF_CHECK_TOLERANCE.get(self.loaded.dtype, HALF_PRECISION_TOLERANCE)
        with model_lock(self.model):
            oracle = [oracle_log_likelihoods(self.model, c, targets) for c in contexts]
            while True:
                try:
                    values = _BATCHED[self.path](self.model, contexts, targets, self.pad_id)
                except Exception as error:  # noqa: BLE001 - any failure of a fast path means: not for this model
                    if self.path == "generic":
                        raise
                    outcome = f"fails ({type(error).__name__}: {error})"
                else:
                    difference = max(
                        abs(a - b) / max(abs(b), 1.0)
                        for got, want in zip(values, oracle) for (a, _), (b, _) in zip(got, want)
                    )
                    if difference <= tolerance:
                        return difference
                    if self.path == "generic":
                        raise ValueError(
                            f"model type {kind!r}: no scoring path reproduces the model's own forward pass "
                            f"(relative difference {difference:.2e} from the oracle on the self-check)"
                        )
                    outcome = f"differs from the oracle by {difference:.2e} (relative)"
                fallback = self._candidates[self._candidates.index(self.path) + 1]
                logger.warning("model type %r: the %s path %s on the self-check; scoring with the %s path",
                               kind, self.path, outcome, fallback)
                self.path = fallback

    # -- settings -----------------------------------------------------------------------------
    @property
    def model(self) -> Any:
        return self.loaded.model

    @property
    def tokenizer(self) -> Any:
        return self.loaded.tokenizer

    def _context_limit(self, targets: Sequence[Sequence[int]]) -> int:
        """The most context tokens a dialog keeps with these targets."""
        if self.rendering == "reference":
            return int(self.tokenizer.model_max_length)
        limit = self.loaded.max_positions
        if self.loaded.is_encoder_decoder:
            longest = max(len(t) for t in targets)
            if longest > limit:
                raise ValueError(f"a follow-up has {longest} tokens, more than the decoder's {limit} positions")
        else:
            limit -= max(len(t) for t in targets)
        if self.context_budget is not None:
            limit = min(limit, self.context_budget)
        if limit < 1:
            raise ValueError("the follow-ups leave no room for the dialog within the model's positions")
        return limit

    def _truncation_tag(self, limit: int) -> str:
        return f"right-{limit}" if self.rendering == "reference" else f"left-{limit}"

    def signature(
        self, follow_ups: Sequence[str] | None = None, level: str = "turn", aggregation: str | None = None,
        positive_follow_ups: Sequence[str] | None = None, path: str | None = None,
    ) -> str:
        """The signature string of these settings (see :func:`result.make_signature`)."""
        follow_ups = tuple(follow_ups) if follow_ups is not None else self.follow_ups
        positive = tuple(positive_follow_ups) if positive_follow_ups is not None else self.positive_follow_ups
        targets = [self.renderer.target_ids(f) for f in (*follow_ups, *positive)]
        return make_signature(
            model=self.loaded.name,
            revision=self.loaded.revision,
            dtype=str(self.loaded.dtype).removeprefix("torch."),
            path=path or self.path,
            rendering=self.rendering,
            truncation=self._truncation_tag(self._context_limit(targets)),
            max_turns=self.max_turns,
            follow_ups=follow_ups,
            positive_follow_ups=positive,
            aggregation=aggregation or self.aggregation,
            level=level,
        )

    # -- scoring ------------------------------------------------------------------------------
    def score(
        self,
        contexts: Sequence[Sequence[str]],
        responses: Sequence[str] | None = None,
        *,
        follow_ups: str | Sequence[str] | None = None,
        positive_follow_ups: str | Sequence[str] | None = None,
        aggregation: str | None = None,
        batch_size: int | None = None,
        progress: bool | None = None,
        engine: str = "batched",
    ) -> FullResult:
        """Score dialogs. Turn level: ``contexts`` (lists of turns) and their ``responses``.
        Dialog level: ``contexts`` are whole dialogs and ``responses`` is ``None``.

        ``follow_ups``, ``positive_follow_ups``, ``aggregation`` and ``batch_size`` override the
        scorer's for this call (new ``follow_ups`` alone come with no positive ones). ``engine``:
        ``"batched"`` (default) takes the scorer's :attr:`path`, ``"generic"`` the generic path,
        ``"oracle"`` one follow-up per forward pass without batching (the test oracle). Concurrent
        calls (threads) on scorers that share a model run one at a time and give the numbers of
        sequential calls.

        Raises:
            TypeError, ValueError: bad input, naming the item, before any model work.
        """
        dialogs = check_dialogs(contexts, responses)
        fus = self.follow_ups if follow_ups is None else resolve_follow_ups(follow_ups)
        if positive_follow_ups is None:
            positive_follow_ups = self.positive_follow_ups if follow_ups is None else ()
        pos = resolve_positive(positive_follow_ups, (), fus)
        agg = self.aggregation if aggregation is None else check_aggregation(aggregation)
        check_signs(pos, agg)
        size = self.batch_size if batch_size is None else check_batch_size(batch_size)
        if engine not in ENGINES:
            raise ValueError(f"unknown engine {engine!r}; choose one of {ENGINES}")
        show = self.progress if progress is None else progress
        level = "dialog" if responses is None else "turn"
        if level == "turn":
            dialogs = [d[:-1][-self.max_turns :] + d[-1:] for d in dialogs]
        else:
            dialogs = [d[-self.max_turns :] for d in dialogs]

        scored = (*fus, *pos)
        path = self.path if engine == "batched" else engine
        with model_lock(self.model):
            targets = [self.renderer.target_ids(f) for f in scored]
            limit = self._context_limit(targets)
            encoded = [self.renderer.encode(d, limit) for d in dialogs]
            unique: dict[tuple[int, ...], int] = {}
            for e in encoded:
                unique.setdefault(e.context_ids, len(unique))
            contexts_ids = list(unique)
            if path == "oracle":
                values = [oracle_log_likelihoods(self.model, c, targets) for c in tqdm(contexts_ids, disable=not show)]
            else:
                values = self._batched(path, contexts_ids, targets, size, show)
        per_dialog = [values[unique[e.context_ids]] for e in encoded]
        counts = [len(t) for t in targets]
        log_likelihoods = [[ll for ll, _ in v] for v in per_dialog]
        return FullResult(
            scores=[aggregate([ll for ll, _ in v], counts, agg, len(pos)) for v in per_dialog],
            follow_up_log_likelihoods=log_likelihoods,
            follow_up_token_counts=counts,
            follow_ups=scored,
            dropped_tokens=[e.dropped_tokens for e in encoded],
            signature=self.signature(fus, level, agg, pos, path),
            category_scores=category_scores(scored, log_likelihoods),
            positive_follow_ups=pos,
        )

    def _batched(
        self, path: str, contexts: list[tuple[int, ...]], targets: list[tuple[int, ...]], batch_size: int, show: bool
    ) -> list[list[LogLik]]:
        """Length-sorted batches (longest first, so memory trouble shows at once) of at most
        ``batch_size`` dialogs and ``max_batch_tokens`` padded tokens; input order restored.
        Out of memory (on any device), both limits are halved and the batch is tried again."""
        order = sorted(range(len(contexts)), key=lambda i: -len(contexts[i]))
        engine = _BATCHED[path]
        budget = self.max_batch_tokens
        out: list[list[LogLik]] = [[] for _ in contexts]
        done = 0
        with tqdm(total=len(contexts), disable=not show, desc="FULL", unit="dialog") as bar:
            while done < len(order):
                # the longest dialog of this batch
                width = dialog_tokens(path, self.loaded.is_encoder_decoder, len(contexts[order[done]]), targets)
                rows = max(1, min(batch_size, budget // width))
                chunk = order[done : done + rows]
                try:
                    values = engine(self.model, [contexts[i] for i in chunk], targets, self.pad_id)
                except (torch.OutOfMemoryError, RuntimeError) as error:
                    if len(chunk) == 1 or not is_out_of_memory(error):
                        raise
                    batch_size, budget = max(1, len(chunk) // 2), max(1, budget // 2)
                    logger.warning("out of memory: batch size lowered to %d", batch_size)
                    if torch.cuda.is_available():
                        torch.cuda.empty_cache()
                    continue
                for i, v in zip(chunk, values):
                    out[i] = v
                done += len(chunk)
                bar.update(len(chunk))
        return out
