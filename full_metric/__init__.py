"""FULL (Follow-Up Log-Likelihood): reference-free evaluation of open-domain dialog responses."""

from .aggregate import AGGREGATIONS
from .comparison import Comparison, compare_systems
from .follow_ups import CANDIDATES, NAMED_SETS, PAPER_FIVE, REFERENCE_PACKAGE_DEFAULT, FollowUp, select
from .presets import DEFAULT_MODEL, PRESETS
from .rendering import RENDERINGS
from .result import FullResult
from .scorer import FullScorer
from .version import __version__


def __getattr__(name: str):
    """``full_metric.FULL``, the evaluate metric, imported on first use (the core needs no evaluate)."""
    if name == "FULL":
        from .faces.metric import FULL

        return FULL
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "FULL",
    "AGGREGATIONS",
    "CANDIDATES",
    "Comparison",
    "DEFAULT_MODEL",
    "FollowUp",
    "FullResult",
    "FullScorer",
    "NAMED_SETS",
    "PAPER_FIVE",
    "PRESETS",
    "REFERENCE_PACKAGE_DEFAULT",
    "RENDERINGS",
    "__version__",
    "compare_systems",
    "select",
]
