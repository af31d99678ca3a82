"""The scoring result and the signature string of the settings that produced it."""

from __future__ import annotations

import hashlib
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from .follow_ups import NAMED_SETS
from .version import __version__


def follow_up_tag(follow_ups: Sequence[str]) -> str:
    """``<set name or 'custom'>-<count>-<hash>``: identifies a follow-up list exactly."""
    name = next((k for k, v in NAMED_SETS.items() if tuple(follow_ups) == v), "custom")
    digest = hashlib.sha256("\n".join(follow_ups).encode("utf-8")).hexdigest()[:8]
    return f"{name}-{len(follow_ups)}-{digest}"


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
) -> str:
    """A sacrebleu-style signature of every setting that changes a score."""
    parts = [
        f"full:{__version__}",
        f"model:{model}@{revision}",
        f"dtype:{dtype}",
        f"engine:{engine}",
        f"render:{rendering}",
        f"trunc:{truncation}",
        f"turns:{max_turns}",
        f"fu:{follow_up_tag(follow_ups)}",
        *([f"pos:{follow_up_tag(positive_follow_ups)}"] if positive_follow_ups else []),
        f"agg:{aggregation}",
        f"level:{level}",
    ]
    return "|".join(parts)


@dataclass
class FullResult:
    """Scores of a list of dialogs, in input order; higher is better.

    Attributes:
        scores: one score per dialog.
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
        """The corpus score: the mean of the per-dialog scores (NaN for no dialogs)."""
        return math.fsum(self.scores) / len(self.scores) if self.scores else float("nan")

    def __len__(self) -> int:
        return len(self.scores)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict, with the corpus mean under ``"mean"``."""
        out = asdict(self)
        out["follow_ups"] = list(self.follow_ups)
        out["positive_follow_ups"] = list(self.positive_follow_ups)
        out["mean"] = self.mean
        return out
