"""FULL (Follow-Up Log-Likelihood): reference-free evaluation of open-domain dialog responses."""

from .aggregate import AGGREGATIONS
from .follow_ups import CANDIDATES, NAMED_SETS, PAPER_FIVE, REFERENCE_PACKAGE_DEFAULT, FollowUp, select
from .models import DEFAULT_MODEL
from .rendering import RENDERINGS
from .result import FullResult
from .scorer import PRESETS, FullScorer
from .version import __version__

__all__ = [
    "AGGREGATIONS",
    "CANDIDATES",
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
    "select",
]
