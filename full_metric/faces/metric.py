"""FULL as an ``evaluate`` metric: a thin layer over :class:`~full_metric.FullScorer`.

Turn level (config ``"default"`` or ``"turn"``): ``compute(predictions=responses, references=contexts)``.
Dialog level (config ``"dialog"``): ``compute(predictions=dialogs)``. A context or dialog may be a
list of turns or one string with a turn per line; strings are split here, before evaluate's own
feature casting could turn them into lists of characters.
"""

from __future__ import annotations

import inspect
from typing import Any, Sequence

import datasets
import evaluate

from ..errors import UsageError, UsageTypeError
from ..inputs import check_dialogs, strip_speakers
from ..models import LoadedModel, load_model, loading_bars, resolve_device, resolve_dtype
from ..scorer import FullScorer
from ..settings import CALL_OPTIONS, LOAD_SETTINGS, check_known, check_settings, describe, refuse_unknown
from ..turns import split_turns
from ..version import __version__

CITATION = """\
@inproceedings{de-bruyn-etal-2022-open,
  title     = {Open-Domain Dialog Evaluation using Follow-Ups Likelihood},
  author    = {De Bruyn, Maxime and Lotfi, Ehsan and Buhmann, Jeska and Daelemans, Walter},
  booktitle = {Proceedings of the 29th International Conference on Computational Linguistics},
  year      = {2022},
  publisher = {International Committee on Computational Linguistics},
  note      = {arXiv:2209.05185},
}
"""

_DESCRIPTION = """\
FULL (Follow-Up Log-Likelihood) scores a dialog response without a reference answer. A language
model (by default facebook/blenderbot-400M-distill) reads the dialog, the context turns plus the
response, and gives a log-likelihood to five negative follow-ups such as "Not really relevant
here." and "What are you trying to say?". Likely complaints mean a poor response. The score is
the paper's equation (1), the sum of the follow-ups' log-likelihoods, with its sign turned:
higher is better. The paper reports Spearman 0.51 (turn level) and 0.69 (dialog level) with
human Overall ratings on FED.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions: turn level: the responses, one string each (an empty one is scored as the reply it
        is, as in every face). Dialog level (config "dialog"):
        the dialogs, each a list of turns or one string with a turn per line.
    references: turn level only: the context of each response, a list of turns (possibly
        empty) or one string with a turn per line.

Options of one ``compute`` call (each optional; each means what the load setting of that name means
and replaces it for this call only; new follow_ups keep the preset's positive ones):
{options}

Settings of ``evaluate.load("full", ...)``:
{settings}

Returns:
    full: the corpus score, the mean of the scored examples' scores (higher is better).
    scores: one score per example; NaN for one not scored (its response leaves the model no room
        to read any of its context).
    unscored: the examples not scored, left out of ``full``.
    follow_up_log_likelihoods: per example, log p(follow-up | dialog) for each follow-up.
    follow_ups: the follow-ups, in the order of the log-likelihoods.
    signature: every setting that changes a score.

Examples:
    Turn level, contexts as lists of turns or as one string:

    >>> import evaluate
    >>> full = evaluate.load("full", progress=False)
    >>> results = full.compute(
    ...     predictions=["It was great, I went hiking.", "The capital of Australia is Canberra."],
    ...     references=[["Hi!", "How was your weekend?"], "Hi!\\nHow was your weekend?"],
    ... )
    >>> sorted(results)
    ['follow_up_log_likelihoods', 'follow_ups', 'full', 'positive_follow_ups', 'scores', 'signature', 'unscored']
    >>> len(results["scores"]), len(results["follow_up_log_likelihoods"][0])
    (2, 5)

    Dialog level, FED-style text with speaker labels:

    >>> full_dialog = evaluate.load("full", "dialog", strip_speaker_prefixes=True, progress=False)
    >>> results = full_dialog.compute(predictions=["User: Hi!\\nSystem: Hello! How are you?\\nUser: Fine."])
    >>> results["signature"].split("|")[-1]
    'level:dialog'
"""

_KWARGS_DESCRIPTION = _KWARGS_DESCRIPTION.replace("{settings}", describe(4, metric=True)).replace(
    "{options}", describe(4, scope="call"))
__all__ = ["FULL", "FullSettings", "__version__"]
CONFIGS = ("default", "turn", "dialog")
_LOADED: dict[tuple[str, ...], LoadedModel] = {}


def _shared_model(model: str, **settings: Any) -> LoadedModel:
    """One loaded model per value of the settings that load it (device and dtype resolved), shared by
    all instances."""
    dtype = resolve_dtype(settings.get("dtype"), settings.get("device"))
    resolved = {**settings, "device": str(resolve_device(settings.get("device"))), "dtype": str(dtype)}
    key = (str(model), *(f"{k}={v}" for k, v in sorted(resolved.items())))
    if key not in _LOADED:
        _LOADED[key] = load_model(model, **{**settings, "dtype": dtype})
    return _LOADED[key]


def _as_turns(value: Any) -> Any:
    """A context or dialog as a list of turns; anything else is left for the checks to name."""
    return split_turns(value) if isinstance(value, str) else value


#: The keywords evaluate's own module takes (cache_dir, num_process, experiment_id...), passed on to it.
EVALUATE_KEYWORDS = tuple(name for name, p in inspect.signature(evaluate.EvaluationModule.__init__).parameters.items()
                          if name not in ("self", "config_name") and p.kind is not inspect.Parameter.VAR_KEYWORD)


class FullSettings:
    """What FULL's evaluate modules share: every setting as a keyword of ``evaluate.load``, checked
    before any model work, and the scorer built on first use around the process-wide model cache."""

    def __init__(self, config_name: str | None = None, **kwargs: Any):
        settings = {s.name: kwargs.pop(s.keyword, None) for s in LOAD_SETTINGS}
        # evaluate's base class would swallow a misspelled setting: what is left must be one of its own keywords
        refuse_unknown(kwargs, [*EVALUATE_KEYWORDS, *(s.keyword for s in LOAD_SETTINGS)], "load setting")
        super().__init__(config_name=config_name, **kwargs)  # type: ignore[call-arg]
        settings["model"] = check_settings(settings)["model"]  # the preset's model where none is given
        self._model_settings = {s.name: settings[s.name] for s in LOAD_SETTINGS if s.loads_model}
        self._scorer_settings = {s.name: settings[s.name] for s in LOAD_SETTINGS if not s.loads_model}
        self.strip_speaker_prefixes: bool = bool(self._scorer_settings["strip_speaker_prefixes"])
        self._scorer: FullScorer | None = None

    # evaluate.load's keywords, as the signature shows them: evaluate's own, then every setting
    __init__.__signature__ = inspect.Signature([  # type: ignore[attr-defined]
        inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        inspect.Parameter("config_name", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None),
        *(inspect.Parameter(s.keyword, inspect.Parameter.KEYWORD_ONLY, default=None) for s in LOAD_SETTINGS),
        inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD),
    ])

    def _download_and_prepare(self, dl_manager: Any) -> None:
        self.scorer  # noqa: B018 -- load the model with evaluate.load, as comet does

    @property
    def scorer(self) -> FullScorer:
        """The scorer, built on first use around the shared loaded model."""
        if self._scorer is None:
            settings = dict(self._model_settings)
            with loading_bars(self._scorer_settings.get("progress") is not False):
                loaded = _shared_model(settings.pop("model"), **settings)
            self._scorer = FullScorer(loaded, **self._scorer_settings)
        return self._scorer

    @staticmethod
    def check_call_options(kwargs: dict[str, Any], own: Sequence[str] = ()) -> None:
        """Check a call's options (:data:`full_metric.settings.CALL_OPTIONS`) before anything is
        stored: an unknown name is refused, naming it (``own``: the module's own options, which it
        checks itself); the follow-ups against each other when the scorer scores."""
        check_known({k: v for k, v in kwargs.items() if k not in own}, CALL_OPTIONS, "option")

    @staticmethod
    def contexts(references: Any) -> list[Any]:
        """Turn-level contexts as lists of turns (strings split)."""
        if isinstance(references, (str, bytes)) or not isinstance(references, Sequence):
            raise UsageTypeError(f"references must be a list of contexts, got {type(references).__name__}")
        return [_as_turns(r) for r in references]

    def check_strip(self, value: Any) -> None:
        """A call's ``strip_speaker_prefixes`` (``None``: not given) must be the load setting's: the
        scorer strips, and the signature says so, for every example of a result alike."""
        if value is not None and value != self.strip_speaker_prefixes:
            raise UsageError(
                f"strip_speaker_prefixes={value!r} in a call, but the metric was loaded with "
                f"strip_speaker_prefixes={self.strip_speaker_prefixes}: it is a load setting (the signature "
                f"records it); pass it to evaluate.load(...)")

    def check_input(self, contexts: Any, responses: Any = None, names: tuple[str, str] = ("references", "predictions")
                    ) -> list[list[str]]:
        """:func:`full_metric.inputs.check_dialogs`, and a response that is only a speaker label
        refused when labels are stripped: before evaluate stores anything; errors name the arguments as
        the user passed them (``names``: the contexts', the responses')."""
        dialogs = check_dialogs(contexts, responses, names)
        if self.strip_speaker_prefixes:
            strip_speakers(dialogs, turn_level=responses is not None, name=names[1])
        return dialogs


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class FULL(FullSettings, evaluate.Metric):
    """The FULL metric. Settings as keyword arguments (see ``_KWARGS_DESCRIPTION``)."""

    @property
    def dialog_level(self) -> bool:
        return self.config_name == "dialog"

    def _info(self) -> evaluate.MetricInfo:
        if self.config_name not in CONFIGS:
            raise UsageError(f"unknown config {self.config_name!r}; choose one of {CONFIGS}")
        turns = datasets.Sequence(datasets.Value("string"))
        if self.config_name == "dialog":
            features = datasets.Features({"predictions": turns})
        else:
            features = datasets.Features({"predictions": datasets.Value("string"), "references": turns})
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=features,
            homepage="https://arxiv.org/abs/2209.05185",
            codebase_urls=["https://github.com/maximedb/full"],
            reference_urls=["https://aclanthology.org/2022.coling-1.41"],
        )

    # -- input checks and normalisation, before evaluate stores anything -----------------------
    def _prepare(self, predictions: Any, references: Any, strip: bool | None) -> tuple[Any, Any]:
        self.check_strip(strip)
        if self.dialog_level:
            if references is not None:
                raise UsageError("the 'dialog' config scores whole dialogs: pass them as predictions, no references")
            if isinstance(predictions, (str, bytes)) or not isinstance(predictions, Sequence):
                raise UsageTypeError(f"predictions must be a list of dialogs, got {type(predictions).__name__}")
            dialogs = [_as_turns(p) for p in predictions]
            self.check_input(dialogs, names=("predictions", "predictions"))
            return dialogs, None
        contexts = self.contexts(references)
        self.check_input(contexts, predictions)
        return list(predictions), contexts

    def add_batch(self, *, predictions: Any = None, references: Any = None, **kwargs: Any) -> None:
        """Check, normalise and store a batch of examples.
"""
        predictions, references = self._prepare(predictions, references, kwargs.pop("strip_speaker_prefixes", None))
        super().add_batch(predictions=predictions, references=references, **kwargs)

    def add(self, *, prediction: Any = None, reference: Any = None, **kwargs: Any) -> None:
        """Check, normalise and store one example.
"""
        strip = kwargs.pop("strip_speaker_prefixes", None)
        if self.dialog_level:
            (prediction,), _ = self._prepare([prediction], reference, strip)
        else:
            (prediction,), (reference,) = self._prepare([prediction], [reference], strip)
        super().add(prediction=prediction, reference=reference, **kwargs)

    def compute(self, *, predictions: Any = None, references: Any = None, **kwargs: Any) -> dict[str, Any] | None:
        """Check and normalise the examples (before anything is stored), then score them all.
"""
        strip = kwargs.pop("strip_speaker_prefixes", None)
        self.check_call_options(kwargs)
        if predictions is not None or references is not None:
            predictions, references = self._prepare(predictions, references, strip)
        return super().compute(predictions=predictions, references=references, **kwargs)

    def _compute(self, predictions: list[Any], references: list[list[str]] | None = None, **options: Any) -> dict[str, Any]:
        """Score with the call's options (:data:`full_metric.settings.CALL_OPTIONS`, checked by
        :meth:`compute` before anything is stored)."""
        if not predictions:
            raise UsageError("nothing to score: compute was given no predictions (and none were added)")
        if self.dialog_level:
            result = self.scorer.score(predictions, None, **options)
        else:
            result = self.scorer.score(references, predictions, **options)
        return {
            "full": result.mean,
            "scores": result.scores,
            "unscored": result.unscored,
            "follow_up_log_likelihoods": result.follow_up_log_likelihoods,
            "follow_ups": list(result.follow_ups),
            "positive_follow_ups": list(result.positive_follow_ups),
            "signature": result.signature,
        }
