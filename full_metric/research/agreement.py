"""How far FULL agrees with people, and how often it prefers a generic reply to a person's answer.

For one scorer and the rated sets (FED JSON, USR JSON Lines): Spearman with the human ratings
pooled over items (FED: turn and dialog level, Overall), within each context (USR: the systems'
answers to one context ranked against each other, averaged over contexts), and over systems (the
systems' means); and the *generic-reply rate*: over the contexts that have a human-written answer,
how often a generic reply ("Yes.", "I don't know."...) scores higher than that answer. Every figure
has a 95% percentile bootstrap interval (resampling items, or contexts for the within-context and
generic-reply figures, seeded).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..comparison import clustered_mean_interval, mean_interval
from ..errors import UsageError
from ..scorer import FullScorer
from .correlation import correlate
from .probe import beats
from .human_eval import score_items
from ..files.rated_files import RatedData, RatedItem, read_rated
from .systems import system_agreement

#: Replies that fit any context and say nothing.
GENERIC_REPLIES = ("Yes.", "I don't know.", "That's cool.", "Haha, ok.", "Sure.")
#: The ``system`` names of human-written answers in the rated sets.
HUMAN_SYSTEMS = ("Human", "New Human Generated", "Original Ground Truth")


#: The fewest rated answers to one context whose own Spearman counts in the within-context measure.
MIN_ANSWERS = 3
#: The fewest systems for the over-systems measure.
MIN_SYSTEMS = 3


def rated_level(data: RatedData, level: str) -> list[RatedItem]:
    """The items of one level that carry the set's rating: what every measure of that level reads."""
    return [i for i in data.level(level) if data.aspect in i.ratings]


def has_within_context(level: str, fed: bool) -> bool:
    """Whether a level has the within-context measure: turn level of a set whose contexts have several
    rated answers (USR), not FED (one answer per context)."""
    return level == "turn" and not fed


def has_systems(items: Sequence[RatedItem]) -> bool:
    """Whether the items name enough systems for the over-systems measure."""
    return len({i.system for i in items if i.system is not None}) >= MIN_SYSTEMS


def context_spearman(scores: Sequence[float], ratings: Sequence[float]) -> float:
    """One context's own Spearman between scores and ratings; NaN (left out of the mean) with fewer
    than :data:`MIN_ANSWERS` answers, or when the ratings or the scores are all equal."""
    from scipy.stats import spearmanr

    x, y = np.asarray(scores, dtype=float), np.asarray(ratings, dtype=float)
    if len(x) < MIN_ANSWERS or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(spearmanr(x, y).statistic)


def generic_wins(reply_scores: Any, human_scores: Any, replies: Sequence[str], answers: Sequence[str | None]
                 ) -> np.ndarray:
    """Whether each generic reply beats each human answer (``reply_scores``: answers x replies), by the probe's
    tie rule (:func:`full_metric.research.probe.beats`): the one count of generic wins. Its rows' means are each answer's share, its
    columns' each reply's rate."""
    scores = np.asarray(reply_scores, dtype=float).reshape(len(answers), len(replies))
    return np.asarray([[beats(s, h, r, a) for s, r in zip(row, replies)] for row, h, a in
                       zip(scores, np.asarray(human_scores, dtype=float), answers)], dtype=bool).reshape(scores.shape)


def item_key(item: RatedItem) -> str:
    """A short digest naming a rated item (its context, response and system) without its text."""
    return hashlib.sha256(json.dumps([list(item.context), item.response, item.system]).encode()).hexdigest()[:16]


def within_context(items: Sequence[RatedItem], scores: Sequence[float], aspect: str, *, bootstrap: int = 1000,
                   seed: int = 0) -> dict[str, Any]:
    """The mean over contexts of Spearman between FULL and people among the answers to one context
    (the contexts :func:`context_spearman` gives a value for)."""
    groups: dict[tuple[str, ...], list[tuple[float, float]]] = {}
    for item, score in zip(items, scores):
        if aspect in item.ratings:
            groups.setdefault(tuple(item.context), []).append((score, item.ratings[aspect]))
    rhos = [context_spearman(*zip(*pairs)) for pairs in groups.values()]
    values = np.asarray([r for r in rhos if np.isfinite(r)])
    low, high = mean_interval(values, resamples=bootstrap, seed=seed) if len(values) else (float("nan"), float("nan"))
    return {"value": float(values.mean()) if len(values) else float("nan"), "ci_low": low, "ci_high": high,
            "n": len(values)}


def generic_reply_rate(
    scorer: FullScorer, items: Sequence[RatedItem], replies: Sequence[str] = GENERIC_REPLIES, *,
    scores: Sequence[float] | None = None, bootstrap: int = 1000, seed: int = 0,
) -> dict[str, Any]:
    """How often each generic reply outscores the human-written answer of the same context (turn
    level, answers by one of :data:`HUMAN_SYSTEMS`; ties count as not outscoring), over the human
    answers, its interval resampling contexts (a context's answers drawn together). ``scores``: the
    items' FULL scores when already computed (the human answers are then not scored again); each
    reply is scored once per distinct context. Also returns which items are the human answers
    (``human``, indices) and each reply's score for each of them (``reply_scores``)."""
    chosen = [k for k, i in enumerate(items) if i.response is not None and i.system in HUMAN_SYSTEMS]
    if not chosen:
        raise UsageError(f"no human-written answer (system one of {HUMAN_SYSTEMS}) to compare with")
    human = [items[k] for k in chosen]
    if scores is None:
        own = np.asarray(scorer.score([i.context for i in human], [i.response for i in human]).scores)
    else:
        own = np.asarray([scores[k] for k in chosen])
    contexts = list(dict.fromkeys(tuple(i.context) for i in human))
    where = {context: k for k, context in enumerate(contexts)}
    rows = [where[tuple(i.context)] for i in human]
    reply_scores = np.stack([np.asarray(scorer.score([list(c) for c in contexts], [r] * len(contexts)).scores)[rows]
                             for r in replies], axis=1)
    wins = generic_wins(reply_scores, own, replies, [i.response for i in human])
    per_answer = wins.mean(axis=1)
    low, high = clustered_mean_interval(per_answer, rows, resamples=bootstrap, seed=seed)  # contexts resampled
    return {"rate": float(per_answer.mean()), "ci_low": low, "ci_high": high, "contexts": len(contexts),
            "answers": len(human), "per_reply": {r: float(wins[:, k].mean()) for k, r in enumerate(replies)},
            "human": [int(k) for k in chosen], "reply_scores": reply_scores.tolist()}


def agreement(
    scorer: FullScorer, path: str | Path, *, replies: Sequence[str] = GENERIC_REPLIES, generic_only: bool = False,
    bootstrap: int = 1000, seed: int = 0, scores_out: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """The rows of one rated set for one scorer: one per (level, measure); ``replies``: the generic
    replies of the generic-reply rate; ``generic_only``: that rate alone (no correlation, and only the
    human-written answers and the replies are scored). ``scores_out``: a list that receives, per
    level, each item's key (:func:`item_key`: no text of the data set) and score and the generic
    replies' scores, so that two judges can be compared item by item (:mod:`full_metric.research.paired`)."""
    data: RatedData = read_rated(path, score_field="human")
    fed = data.fmt == "fed"
    aspect = data.aspect
    name = Path(path).stem
    rows: list[dict[str, Any]] = []
    for level in ("turn",) if generic_only else ("turn", "dialog"):
        items = rated_level(data, level)
        if not items:
            continue
        scores = None if generic_only else score_items(scorer, items).scores
        if scores is not None:
            rows += _correlation_rows(name, level, items, scores, aspect, fed, bootstrap, seed)
        if level == "turn":
            rate = generic_reply_rate(scorer, items, replies, scores=scores, bootstrap=bootstrap, seed=seed)
            rows.append({"data_set": name, "level": level, "measure": "generic reply beats the human answer",
                         "value": rate["rate"], "ci_low": rate["ci_low"], "ci_high": rate["ci_high"],
                         "n": rate["contexts"], "per_reply": rate["per_reply"]})
        if scores_out is not None:
            scores_out.append({
                "data_set": name, "level": level, "aspect": aspect, "keys": [item_key(i) for i in items],
                "scores": None if scores is None else [float(x) for x in scores],
                "replies": list(replies) if level == "turn" else [],
                "human": rate["human"] if level == "turn" else [],
                "reply_scores": rate["reply_scores"] if level == "turn" else [],
            })
    return rows


def _correlation_rows(name: str, level: str, items: Sequence[RatedItem], scores: Sequence[float], aspect: str,
                      fed: bool, bootstrap: int, seed: int) -> list[dict[str, Any]]:
    """Spearman pooled, within context (USR turn level) and over systems (three or more) for one level."""
    pooled = correlate(scores, [i.ratings[aspect] for i in items], methods=("spearman",), bootstrap=bootstrap,
                       seed=seed)["spearman"]
    rows = [{"data_set": name, "level": level, "measure": "Spearman, pooled", "value": pooled.value,
             "ci_low": pooled.ci_low, "ci_high": pooled.ci_high, "n": pooled.n}]
    if has_within_context(level, fed):
        rows.append({"data_set": name, "level": level, "measure": "Spearman, within context",
                     **within_context(items, scores, aspect, bootstrap=bootstrap, seed=seed)})
    systems = [i for i in items if i.system is not None]
    if has_systems(items):
        kept = [s for i, s in zip(items, scores) if i.system is not None]
        row = system_agreement(systems, kept, aspect, resamples=bootstrap, seed=seed)
        rows.append({"data_set": name, "level": level, "measure": "Spearman, over systems",
                     "value": row["spearman"], "ci_low": float("nan"), "ci_high": float("nan"),
                     "n": len(row["systems"])})
    return rows


def markdown(rows: Sequence[dict[str, Any]], label: str = "judge") -> str:
    """The rows as a Markdown table (one column per ``label`` value)."""
    judges = list(dict.fromkeys(r[label] for r in rows))
    keys = list(dict.fromkeys((r["data_set"], r["level"], r["measure"]) for r in rows))
    lines = [f"| data set | level | measure | {' | '.join(judges)} |", "|---|---|---|" + "---|" * len(judges)]
    for key in keys:
        cells = []
        for judge in judges:
            row = next((r for r in rows if (r["data_set"], r["level"], r["measure"]) == key and r[label] == judge), None)
            if row is None:
                cells.append("")
            elif np.isnan(row["ci_low"]):
                cells.append(f"{row['value']:.2f} (n={row['n']})")
            else:
                cells.append(f"{row['value']:.2f} [{row['ci_low']:.2f}, {row['ci_high']:.2f}]")
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {' | '.join(cells)} |")
    return "\n".join(lines)


def per_reply_markdown(rows: Sequence[dict[str, Any]], replies: Sequence[str], label: str = "judge") -> str:
    """Each generic reply's own rate, one line per (``label`` value, data set) with a rate row."""
    lines = [f"| {label} | data set | {' | '.join(replies)} |", "|---|---|" + "---|" * len(replies)]
    lines += [f"| {r[label]} | {r['data_set']} | " + " | ".join(f"{r['per_reply'][x]:.2f}" for x in replies) + " |"
              for r in rows if "per_reply" in r]
    return "\n".join(lines)
