"""The scoring result and the signature string of the settings that produced it."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from .follow_ups import NAMED_SETS
from .unscored import scored_mean, unscored_items
from .version import __version__


def follow_up_tag(follow_ups: Sequence[str]) -> str:
    """``<set name or 'custom'>-<count>-<hash>``: identifies a follow-up list exactly."""
    name = next((k for k, v in NAMED_SETS.items() if tuple(follow_ups) == v), "custom")
    digest = hashlib.sha256("\n".join(follow_ups).encode("utf-8")).hexdigest()[:8]
    return f"{name}-{len(follow_ups)}-{digest}"


#: The fields a signature string leaves out when they are empty (their settings are off).
OPTIONAL_FIELDS = ("speakers", "positive_follow_ups")
#: The signature's fields in order: (key in the string, attribute of :class:`Signature`).
SIGNATURE_FIELDS = (("full", "version"), ("model", "model"), ("dtype", "dtype"), ("engine", "engine"),
                    ("render", "rendering"), ("speakers", "speakers"), ("trunc", "truncation"),
                    ("turns", "max_turns"), ("fu", "follow_ups"), ("pos", "positive_follow_ups"),
                    ("agg", "aggregation"), ("level", "level"))


@dataclass(frozen=True)
class Signature:
    """Every setting that changes a score, field by field, as sacrebleu's signature: ``str()`` is the
    signature string (``full:VERSION|model:NAME@REVISION|dtype:...|level:...``), :meth:`parse` reads
    one back, :meth:`differences` says which fields two signatures do not share. Follow-up lists are
    their tags (:func:`follow_up_tag`); ``positive_follow_ups`` is empty when there are none and
    ``speakers`` is ``stripped`` when speaker labels were removed (:data:`OPTIONAL_FIELDS`: the string
    has no ``pos:`` / ``speakers:`` field when they are empty)."""

    version: str
    model: str  # NAME@REVISION
    dtype: str
    engine: str
    rendering: str
    truncation: str
    max_turns: str
    follow_ups: str
    positive_follow_ups: str
    aggregation: str
    level: str
    speakers: str = ""

    def __str__(self) -> str:
        return "|".join(f"{key}:{getattr(self, name)}" for key, name in SIGNATURE_FIELDS
                        if name not in OPTIONAL_FIELDS or getattr(self, name))

    @classmethod
    def parse(cls, text: str) -> Signature:
        """The fields of a signature string (``ValueError`` naming what is not one)."""
        names = dict(SIGNATURE_FIELDS)
        found = dict.fromkeys(OPTIONAL_FIELDS, "")
        for part in str(text).split("|"):
            key, colon, value = part.partition(":")
            if not colon or key not in names:
                raise ValueError(f"not a FULL signature: {text!r} (field {part!r})")
            found[names[key]] = value
        missing = [key for key, name in SIGNATURE_FIELDS if name not in found]
        if missing:
            raise ValueError(f"not a FULL signature: {text!r} (no {', '.join(missing)} field)")
        return cls(**found)

    def differences(self, other: Signature | str) -> list[str]:
        """``key: this vs other`` for each field the two do not share (empty: the same settings)."""
        other = other if isinstance(other, Signature) else Signature.parse(other)
        return [f"{key}: {getattr(self, name) or '(none)'} vs {getattr(other, name) or '(none)'}"
                for key, name in SIGNATURE_FIELDS if getattr(self, name) != getattr(other, name)]


def signature_differences(first: str | None, second: str | None) -> str:
    """Which settings two signature strings differ in, for an error message (the whole strings
    when either is not a FULL signature)."""
    try:
        return "; ".join(Signature.parse(str(first)).differences(str(second)))
    except ValueError:
        return f"{first!r} vs {second!r}"


def make_signature(
    *,
    model: str,
    revision: str,
    dtype: str,
    engine: str,
    rendering: str,
    truncation: str,
    max_turns: int,
    follow_ups: Sequence[str],
    aggregation: str,
    level: str,
    positive_follow_ups: Sequence[str] = (),
    strip_speaker_prefixes: bool = False,
) -> str:
    """A sacrebleu-style signature of every setting that changes a score (:class:`Signature`'s string)."""
    return str(Signature(
        version=__version__, model=f"{model}@{revision}", dtype=dtype, engine=engine, rendering=rendering,
        truncation=truncation, max_turns=str(max_turns), follow_ups=follow_up_tag(follow_ups),
        positive_follow_ups=follow_up_tag(positive_follow_ups) if positive_follow_ups else "",
        aggregation=aggregation, level=level, speakers="stripped" if strip_speaker_prefixes else "",
    ))


@dataclass
class FullResult:
    """Scores of a list of dialogs, in input order; higher is better.

    Attributes:
        scores: one score per dialog; NaN for a dialog the model could read none of the context of (its
            response alone fills the model's positions): FULL of a dialog needs the dialog, so such a
            response gets no number that could outrank real replies (:attr:`unscored` lists them; its
            ``follow_up_log_likelihoods`` are what the model computed on the response alone).
        follow_up_log_likelihoods: per dialog, log p(f_i | dialog) (summed over the follow-up's
            tokens, natural log) for each follow-up, in ``follow_ups`` order.
        follow_up_token_counts: the number of scored tokens of each follow-up.
        follow_ups: the follow-ups scored: the negative ones, then the positive ones.
        dropped_tokens: per dialog, how many context tokens truncation removed.
        signature: every setting that changes a score.
        category_scores: per FED category whose follow-ups are all in ``follow_ups`` (for
            example with ``follow_ups="all"``), one fine-grained score per dialog
            (see :mod:`full_metric.fine_grained`); empty otherwise.
        positive_follow_ups: the follow-ups of ``follow_ups`` that count with the opposite sign
            (likely praise raises the score); empty for the paper's settings.
    """

    scores: list[float]
    follow_up_log_likelihoods: list[list[float]]
    follow_up_token_counts: list[int]
    follow_ups: tuple[str, ...]
    dropped_tokens: list[int]
    signature: str
    category_scores: dict[str, list[float]] = field(default_factory=dict)
    positive_follow_ups: tuple[str, ...] = ()

    @property
    def mean(self) -> float:
        """The corpus score: the mean of the per-dialog scores, the :attr:`unscored` left out (NaN when
        no dialog was scored)."""
        return scored_mean(self.scores)

    @property
    def unscored(self) -> list[int]:
        """The dialogs (indices) left unscored because no context was read: NaN scores."""
        return unscored_items(self.scores)

    def __len__(self) -> int:
        return len(self.scores)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict, with the corpus mean under ``"mean"``."""
        out = asdict(self)
        out["follow_ups"] = list(self.follow_ups)
        out["positive_follow_ups"] = list(self.positive_follow_ups)
        out["mean"] = self.mean
        out["unscored"] = self.unscored
        return out
