"""``FullScorer``: loads a model once and scores many dialogs with FULL."""

from __future__ import annotations

import logging
import math
from typing import Any, Sequence

import torch

from .aggregate import aggregate, aggregate_tensor
from .engines import ENGINES, candidates, refusal
from .errors import UsageError
from .fine_grained import category_scores
from .inputs import check_dialogs, strip_speakers
from .batching import score_in_batches
from .loglik import LogLik
from .models import attention_window, load_model, loading_bars, model_lock
from .presets import PRESETS, preset_fits, preset_runs
from .rendering import EncodedDialog, Renderer, default_rendering
from .result import FullResult, make_signature
from .settings import BY_NAME, CALL_OPTIONS, check_known, check_settings, describe, resolve_options

logger = logging.getLogger(__name__)

#: Short dialogs of both parities (turn level) that every scorer scores with its engine and with the
#: oracle at load (an odd number of turns opens with the response's speaker: the case strict chat
#: templates refuse); a model with windowed attention also gets one dialog longer than its window
#: (:meth:`FullScorer._window_dialog`).
SELF_CHECK_DIALOGS = (
    ("Hi! How was your weekend?", "Great, I went hiking in the mountains with my sister."),
    ("I got a puppy!", "Oh wow, what breed?", "A beagle, she is very loud."),
    ("Do you like cooking?", "Not really.", "Why not? It can be fun.", "I always burn things, so I order food."),
)
#: The largest relative difference from the oracle the self-check accepts, by the model's dtype.
SELF_CHECK_TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-4}
#: Half precision (bfloat16, float16) rounds differently in differently shaped passes: its self-check
#: accepts up to this relative difference (said in the log at load, and in docs/engines.md).
HALF_PRECISION_TOLERANCE = 5e-2
#: The self-check's long dialog repeats this turn until it is longer than the model's window.
#: What becomes of a response that leaves no room for its context, as the warning says: in a score, and in
#: the differentiable score that trains a judge (the complaints objective and its held-out pair accuracy
#: keep such a pair, scored on the response alone, as the judges of issues 37 and 45 were trained and measured).
UNSCORED = "they are not scored (NaN, left out of the mean, listed in the result's unscored)"
TRAINED_ALONE = "the training score reads each on its own, without its context"
WINDOW_TURN = "We talked about the weather, the garden, the old harbour and the boats that came in late."


class FullScorer:
    """Scores dialog responses (turn level) or whole dialogs (dialog level) with FULL.

    The model reads each dialog and gives a log-likelihood to every follow-up; the aggregate is
    turned so that **higher is better** (the default follow-ups are negative ones).

    Args:
        model: a Hub model id, a local folder, a GGUF file, a loaded ``transformers`` model (with
            ``tokenizer``; used on its own device and in its own dtype unless ``device`` /
            ``dtype`` say otherwise, which then change it in place, logged) or a ``LoadedModel``
            (shared, not copied). Default: the preset's.
        tokenizer: the tokenizer, required with a loaded model, optional otherwise.

    The other keywords are the load settings, each declared once in
    :data:`full_metric.settings.SETTINGS`:

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
        strip_speaker_prefixes: bool | None = None,
        progress: bool | None = None,
    ):
        given = {k: v for k, v in locals().items() if k in BY_NAME and k != "model"}
        checked = check_settings({**given, "model": model if isinstance(model, str) or model is None else None})
        self.preset: str = checked["preset"]
        self.follow_ups: tuple[str, ...] = checked["follow_ups"]
        self.positive_follow_ups: tuple[str, ...] = checked["positive_follow_ups"]
        self.aggregation: str = checked["aggregation"]
        self.context_budget: int | None = checked["context_budget"]
        self.max_turns: int = checked["max_turns"]
        self.progress: bool = checked["progress"]
        self.strip_speaker_prefixes: bool = checked["strip_speaker_prefixes"]
        with loading_bars(self.progress):
            self.loaded = load_model(
                checked["model"] if model is None else model, tokenizer=tokenizer, gguf_file=gguf_file, device=device,
                dtype=dtype, revision=revision,
            )
        refused = refusal(self.model, self.loaded.name)
        if refused:
            raise UsageError(refused)
        config = self.loaded.model.config
        kind = "cpu" if self.loaded.model.device.type == "cpu" else "accelerator"
        self.batch_size: int = BY_NAME["batch_size"].default.on(kind) if batch_size is None else batch_size
        self.max_batch_tokens: int = (BY_NAME["max_batch_tokens"].default.on(kind) if max_batch_tokens is None
                                      else max_batch_tokens)
        encoder_decoder = self.loaded.is_encoder_decoder
        if not preset_runs(self.preset, encoder_decoder):
            raise UsageError(f"preset {self.preset!r} needs an encoder-decoder model, as the authors' package did; "
                             f"{self.loaded.name} (model type {config.model_type!r}) is decoder-only")
        if not preset_fits(self.preset, self.loaded.name, config.model_type, encoder_decoder):
            logger.warning(
                "preset %r was tuned for %s models; %s (model type %r) is not one, so its follow-ups and "
                "settings may not suit it", self.preset, PRESETS[self.preset]["family"], self.loaded.name,
                config.model_type,
            )
        self.rendering: str = checked["rendering"] or default_rendering(
            config.model_type, self.loaded.name, encoder_decoder,
            bool(getattr(self.loaded.tokenizer, "chat_template", None)),
        )
        if self.rendering == "reference" and not encoder_decoder:
            raise UsageError("the 'reference' rendering (and preset) needs an encoder-decoder model, as the package did")
        self.renderer = Renderer(self.loaded.tokenizer, self.rendering, encoder_decoder)
        tok = self.loaded.tokenizer
        self.pad_id = next((t for t in (tok.pad_token_id, tok.eos_token_id, 0) if t is not None))
        #: the engines proven for this model, fastest first; :attr:`engine` is the one ``score`` uses
        self.engine_candidates, reason = candidates(self.model)
        self.engine: str = self.engine_candidates[0]
        logger.info("%s engine: %s", self.engine, reason)
        #: the self-check's largest relative difference between :attr:`engine` and the oracle
        self.self_check_difference = self._self_check()
        logger.info("FULL scorer ready: %s", self.signature())

    @property
    def self_check_tolerance(self) -> float:
        """The largest relative difference from the oracle the self-check accepts for this model's dtype."""
        return SELF_CHECK_TOLERANCE.get(self.loaded.dtype, HALF_PRECISION_TOLERANCE)

    def _window_dialog(self, limit: int) -> tuple[str, ...] | None:
        """A dialog longer than the model's attention window, within ``limit`` context tokens (``None``
        when the model declares no window, or its window is not shorter than the limit)."""
        window = attention_window(self.model.config)
        if window is None or window >= limit - 1:
            return None
        turns: list[str] = []
        while len(self.renderer.encode([*turns, WINDOW_TURN], 10 * limit).context_ids) <= window + 8:
            turns.append(WINDOW_TURN)
        return (*turns, WINDOW_TURN)

    def _self_check(self) -> float:
        """Score :data:`SELF_CHECK_DIALOGS` (and a dialog longer than the model's window) with the
        chosen engine and the oracle. A fast engine that fails or differs by more than
        :attr:`self_check_tolerance` falls back to the next candidate (with a warning); a generic
        engine that differs means no engine can score this model, and the scorer refuses it."""
        targets = [self.renderer.target_ids(f) for f in (*self.follow_ups, *self.positive_follow_ups)]
        limit = self.context_limit(targets)
        dialogs = [*SELF_CHECK_DIALOGS, *filter(None, [self._window_dialog(limit)])]
        contexts = [self.renderer.encode(list(d), limit).context_ids for d in dialogs]
        kind = self.model.config.model_type
        tolerance = self.self_check_tolerance
        if tolerance != SELF_CHECK_TOLERANCE.get(torch.float32):
            logger.info("self-check in %s: up to %.0e relative difference from the oracle is accepted "
                        "(half precision rounds differently in differently shaped passes)",
                        str(self.loaded.dtype).removeprefix("torch."), tolerance)
        with model_lock(self.model):
            oracle = ENGINES["oracle"].score(self.model, contexts, targets, self.pad_id)
            while True:
                try:
                    values = ENGINES[self.engine].score(self.model, contexts, targets, self.pad_id)
                except Exception as error:  # noqa: BLE001 - any failure of a fast engine means: not for this model
                    if self.engine == "generic":
                        raise
                    outcome = f"fails ({type(error).__name__}: {error})"
                else:
                    difference = max(
                        abs(a - b) / max(abs(b), 1.0)
                        for got, want in zip(values, oracle) for (a, _), (b, _) in zip(got, want)
                    )
                    if difference <= tolerance:
                        return difference
                    if self.engine == "generic":
                        raise UsageError(
                            f"{self.loaded.name} (model type {kind!r}): no engine reproduces the model's own forward "
                            f"pass (relative difference {difference:.2e} from the oracle on the self-check)"
                        )
                    outcome = f"differs from the oracle by {difference:.2e} (relative)"
                fallback = self.engine_candidates[self.engine_candidates.index(self.engine) + 1]
                logger.warning("model type %r: the %s engine %s on the self-check; scoring with the %s engine",
                               kind, self.engine, outcome, fallback)
                self.engine = fallback

    # -- settings -----------------------------------------------------------------------------
    #: The settings a scorer keeps when it switches preset: no preset sets them (:data:`PRESETS`).
    RUN_OPTIONS = ("batch_size", "max_batch_tokens", "context_budget", "strip_speaker_prefixes", "progress")

    def with_preset(self, preset: str) -> FullScorer:
        """A scorer of ``preset``'s settings on this scorer's loaded model (``self`` when it already
        has that preset), keeping :data:`RUN_OPTIONS`; the one way the command line and the app
        switch presets."""
        if preset == self.preset:
            return self
        return FullScorer(self.loaded, preset=preset, **{k: getattr(self, k) for k in self.RUN_OPTIONS})

    @property
    def model(self) -> Any:
        return self.loaded.model

    @property
    def tokenizer(self) -> Any:
        return self.loaded.tokenizer

    def options(self) -> dict[str, Any]:
        """This scorer's value of every per-call option: passing them to :meth:`score` changes nothing."""
        own = {"follow_ups": self.follow_ups, "positive_follow_ups": self.positive_follow_ups,
               "aggregation": self.aggregation, "batch_size": self.batch_size, "progress": self.progress,
               "engine": "auto"}
        return {s.name: own[s.name] for s in CALL_OPTIONS}

    def context_limit(self, targets: Sequence[Sequence[int]]) -> int:
        """The most context tokens a dialog keeps with these targets."""
        if self.rendering == "reference":
            return int(self.tokenizer.model_max_length)
        limit = self.loaded.max_positions
        if self.loaded.is_encoder_decoder:
            longest = max(len(t) for t in targets)
            if longest > limit:
                raise UsageError(f"a follow-up has {longest} tokens, more than the decoder's {limit} positions")
        else:
            limit -= max(len(t) for t in targets)
        if self.context_budget is not None:
            limit = min(limit, self.context_budget)
        if limit < 1:
            raise UsageError("the follow-ups leave no room for the dialog within the model's positions")
        return limit

    def _truncation_tag(self, limit: int) -> str:
        return f"right-{limit}" if self.rendering == "reference" else f"left-{limit}"

    def signature(
        self, follow_ups: Sequence[str] | None = None, level: str = "turn", aggregation: str | None = None,
        positive_follow_ups: Sequence[str] | None = None, engine: str | None = None,
    ) -> str:
        """The signature string of these settings (see :func:`result.make_signature`): what scored,
        the model named by the commit or content digest that was loaded."""
        follow_ups = tuple(follow_ups) if follow_ups is not None else self.follow_ups
        positive = tuple(positive_follow_ups) if positive_follow_ups is not None else self.positive_follow_ups
        targets = [self.renderer.target_ids(f) for f in (*follow_ups, *positive)]
        return make_signature(
            model=self.loaded.name,
            revision=self.loaded.revision,
            dtype=str(self.loaded.dtype).removeprefix("torch."),
            engine=engine or self.engine,
            rendering=self.renderer.tag,
            truncation=self._truncation_tag(self.context_limit(targets)),
            max_turns=self.max_turns,
            follow_ups=follow_ups,
            positive_follow_ups=positive,
            aggregation=aggregation or self.aggregation,
            level=level,
            strip_speaker_prefixes=self.strip_speaker_prefixes,
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
        engine: str | None = None,
    ) -> FullResult:
        """Score dialogs. Turn level: ``contexts`` (lists of turns) and their ``responses``.
        Dialog level: ``contexts`` are whole dialogs and ``responses`` is ``None``.

        The options (each ``None`` keeps the scorer's own) mean what the load settings of the same
        name mean, resolved by the same rule (:func:`full_metric.settings.resolve_options`): new
        ``follow_ups`` replace the negative follow-ups and keep the scorer's positive ones (pass
        ``positive_follow_ups=[]`` for none); a follow-up both negative and positive is refused.
        The result's signature names what scored. Concurrent calls (threads) on scorers that share
        a model run one at a time and give the numbers of sequential calls.

{options}

        Raises:
            TypeError, ValueError: bad input, naming the item, before any model work.
        """
        options = {"follow_ups": follow_ups, "positive_follow_ups": positive_follow_ups, "aggregation": aggregation,
                   "batch_size": batch_size, "progress": progress, "engine": engine}
        check_known(options, CALL_OPTIONS, "option")
        dialogs = self.dialogs(contexts, responses)
        chosen = resolve_options(options, self.options())
        fus, pos, agg = chosen["follow_ups"], chosen["positive_follow_ups"], chosen["aggregation"]
        size = self.batch_size if batch_size is None else batch_size
        show = self.progress if progress is None else progress
        name = self.engine if engine in (None, "auto") else engine
        level = "dialog" if responses is None else "turn"

        scored = (*fus, *pos)
        with model_lock(self.model):
            targets = [self.renderer.target_ids(f) for f in scored]
            encoded = self.encode(dialogs, targets)
            unique = _unique_contexts(encoded)
            values = self._batched(name, list(unique), targets, size, show)
        counts = [len(t) for t in targets]
        log_likelihoods = [[ll for ll, _ in values[unique[e.context_ids]]] for e in encoded]
        # a dialog whose context the model read none of gets NaN: FULL of it is not a number to rank (its
        # log-likelihoods stay, what the model computed on the response alone, for inspection)
        unread = {i for i, e in enumerate(encoded) if not e.context_read}
        return FullResult(
            scores=[math.nan if i in unread else aggregate(ll, counts, agg, len(pos))
                    for i, ll in enumerate(log_likelihoods)],
            follow_up_log_likelihoods=log_likelihoods,
            follow_up_token_counts=counts,
            follow_ups=scored,
            dropped_tokens=[e.dropped_tokens for e in encoded],
            signature=self.signature(fus, level, agg, pos, name),
            category_scores={name: [math.nan if i in unread else v for i, v in enumerate(values)]
                             for name, values in category_scores(scored, log_likelihoods).items()},
            positive_follow_ups=pos,
        )

    def dialogs(self, contexts: Sequence[Sequence[str]], responses: Sequence[str] | None = None) -> list[list[str]]:
        """The dialogs as this scorer reads them (context turns, then the response; or whole dialogs
        when ``responses`` is ``None``): checked, speaker labels stripped when it strips, the context
        cut to its newest ``max_turns`` turns. Raises naming the item, before any model work."""
        dialogs = check_dialogs(contexts, responses)
        if self.strip_speaker_prefixes:
            dialogs = strip_speakers(dialogs, turn_level=responses is not None)
        if responses is not None:
            return [d[:-1][-self.max_turns :] + d[-1:] for d in dialogs]
        return [d[-self.max_turns :] for d in dialogs]

    def encode(self, dialogs: Sequence[Sequence[str]], targets: Sequence[Sequence[int]],
               max_context: int | None = None, *, alone: str = UNSCORED) -> list[EncodedDialog]:
        """Each dialog's context ids within the budget these targets leave, or ``max_context`` tokens
        when fewer (call under the model's lock: the tokenizer is not thread-safe). Responses that
        leave no room for any of their context are counted in one warning that names them and says
        what becomes of them (``alone``: :meth:`score` gives them NaN)."""
        limit = self.context_limit(targets)
        limit = limit if max_context is None else max(1, min(limit, max_context))
        encoded = [self.renderer.encode(turns, limit) for turns in dialogs]
        note, alone = alone, [i for i, e in enumerate(encoded) if not e.context_read]
        if alone:
            logger.warning("%d of %d responses leave no room for their context within the model's %d tokens (items %s): "
                           "%s; shorten them, or use a model that reads more", len(alone), len(encoded), limit,
                           ", ".join(map(str, alone[:20])) + (" ..." if len(alone) > 20 else ""), note)
        return encoded

    score.__doc__ = score.__doc__.replace("{options}", describe(8, scope="call"))

    def differentiable_scores(self, contexts: Sequence[Sequence[str]], responses: Sequence[str] | None = None, *,
                              model: Any = None, max_context: int | None = None) -> torch.Tensor:
        """:meth:`score`'s scores (this scorer's settings) as a tensor with gradients: the same checks,
        speaker stripping, ``max_turns``, renderer, truncation, follow-ups, engine (after the load-time
        self-check) and aggregation, computed through ``model`` (default: this scorer's own; a PEFT
        wrapper of it trains its adapters) in one pass for all the dialogs given. ``max_context``
        keeps at most that many context tokens (``None``: the scorer's own limit, its exact numbers).
        The training objective's score (:mod:`full_metric.research.complaints`)."""
        model = self.model if model is None else model
        inner = model.get_base_model() if hasattr(model, "get_base_model") else model  # PEFT: LoRA layers in place
        dialogs = self.dialogs(contexts, responses)
        targets = [self.renderer.target_ids(f) for f in (*self.follow_ups, *self.positive_follow_ups)]
        with model_lock(self.model):
            encoded = self.encode(dialogs, targets, max_context, alone=TRAINED_ALONE)
        unique = _unique_contexts(encoded)
        sums = ENGINES[self.engine].sums(inner, list(unique), targets, self.pad_id)
        rows = sums[[unique[e.context_ids] for e in encoded]]
        return aggregate_tensor(rows, [len(t) for t in targets], self.aggregation, len(self.positive_follow_ups))

    def _batched(
        self, name: str, contexts: list[tuple[int, ...]], targets: list[tuple[int, ...]], batch_size: int, show: bool
    ) -> list[list[LogLik]]:
        """The engine ``name``'s log-likelihoods of every context, in batches (:func:`batching.score_in_batches`)."""
        return score_in_batches(ENGINES[name], self.model, contexts, targets, self.pad_id,
                                self.loaded.is_encoder_decoder, batch_size, self.max_batch_tokens, show)


def _unique_contexts(encoded: Sequence[EncodedDialog]) -> dict[tuple[int, ...], int]:
    """Each distinct context's ids -> its row: a context shared by several responses is scored once."""
    unique: dict[tuple[int, ...], int] = {}
    for e in encoded:
        unique.setdefault(e.context_ids, len(unique))
    return unique
