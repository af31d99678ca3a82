"""Fine-grained scores: one per FED category of Table 3, from that category's follow-ups.

A category's score is -sum(log-likelihood) over its negative follow-ups plus sum(log-likelihood)
over its positive ones: likely complaints lower it, likely praise raises it; higher is better.
"""

from __future__ import annotations

import math
from typing import Sequence

from .follow_ups import CANDIDATES, FollowUp

#: The follow-ups of each category (FED's fine-grained qualities), in Table 3's order.
CATEGORY_GROUPS: dict[str, tuple[FollowUp, ...]] = {}
for _candidate in CANDIDATES:
    CATEGORY_GROUPS.setdefault(_candidate.category, ())
    CATEGORY_GROUPS[_candidate.category] += (_candidate,)


def category_scores(
    follow_ups: Sequence[str], log_likelihoods: Sequence[Sequence[float]]
) -> dict[str, list[float]]:
    """Per category whose follow-ups are all in ``follow_ups``: one score per dialog."""
    index = {text: i for i, text in enumerate(follow_ups)}
    out: dict[str, list[float]] = {}
    for category, group in CATEGORY_GROUPS.items():
        if not all(f.text in index for f in group):
            continue
        signs = [(index[f.text], -1.0 if f.polarity == "negative" else 1.0) for f in group]
        out[category] = [math.fsum(sign * row[i] for i, sign in signs) for row in log_likelihoods]
    return out
