"""What "not scored" means, the one rule every face follows (the result, the corpus run, the command
line, the app, the Trainer's metrics, the comparisons and the TRL reward).

A dialog is not scored when the model reads none of its context (its response alone fills the model's
positions): its score is NaN in a :class:`~full_metric.result.FullResult`, ``null`` with the field
``unscored`` (this reason) in the files written, ``None`` as a TRL reward. Every mean is taken over the
scored items only and says how many were left out and which.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

#: Why an item has no score, as the files written say it (their ``unscored`` field).
REASON = "the response leaves no room for its context within the model's positions"


def is_unscored(value: Any) -> bool:
    """Whether a score is the mark of an item not scored: NaN, or ``None`` / JSON ``null``."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def unscored_items(scores: Sequence[Any]) -> list[int]:
    """The indices of the items not scored."""
    return [i for i, s in enumerate(scores) if is_unscored(s)]


def scored_mean(scores: Sequence[Any]) -> float:
    """The mean of the scored items (NaN when none was scored)."""
    kept = [float(s) for s in scores if not is_unscored(s)]
    return math.fsum(kept) / len(kept) if kept else math.nan


def left_out(unscored: Sequence[Any], total: int, names: str = "items") -> str:
    """How a face says what its mean leaves out: ``"2 of 10 items not scored (3, 7): <reason>"``, or ``""``."""
    if not unscored:
        return ""
    shown = ", ".join(map(str, unscored[:20])) + (" ..." if len(unscored) > 20 else "")
    return f"{len(unscored)} of {total} {names} not scored ({shown}): {REASON}"


def as_json_score(score: float) -> dict[str, Any]:
    """A score as the files written give it: ``{"full": number}``, or ``{"full": None, "unscored": REASON}``."""
    return {"full": None, "unscored": REASON} if is_unscored(score) else {"full": score}
