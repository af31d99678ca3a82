"""The settings study: which FULL configuration agrees with people, chosen without the set it is reported on.

Inputs are log-likelihood tables (:mod:`full_metric.research.loglik_tables`): one per model, rendering,
context window and rated data set, each holding every candidate follow-up's log-likelihood on
every item. Every configuration is arithmetic on them:

- *variant*: a model with a rendering and a context window, or the average of several
  (their scores averaged item by item, in nats);
- *follow-up set*: fixed lists (the paper's five, all negative candidates, all candidates signed)
  or lists chosen from data (the ``k`` candidates that correlate best on the selection sets, on
  average or on the worst of them);
  a positive follow-up ("That's interesting!") enters with the opposite sign, as in the paper's
  category scores;
- *aggregation*: ``sum`` (the paper's equation (1)), ``mean`` (per token, length-normalised) or
  ``balanced`` (mean over the positive follow-ups minus mean over the negative ones).

:func:`leave_one_out` is the honest protocol: for each data set, every choice (variant,
follow-up set, aggregation, and the follow-ups of a data-chosen set) is made on the other data
sets only, and the chosen configuration is then reported on the held-out set.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

from ..aggregate import aggregate
from .correlation import correlate
from ..errors import UsageError
from ..follow_ups import CANDIDATES, PAPER_FIVE
from .loglik_tables import LogLikTable
from ..files.rated_files import FED_ASPECT

#: The polarity of each Table 3 candidate: +1 positive (likely after a good response), -1 negative.
SIGN = {c.text: (1 if c.polarity == "positive" else -1) for c in CANDIDATES}
#: Study aggregations: both turn signed follow-ups into one higher-is-better score.
STUDY_AGGREGATIONS = ("sum", "mean", "balanced")


@dataclass(frozen=True)
class Slice:
    """A part of a data set that correlations are computed on: one level of one set."""

    data_set: str
    level: str

    @property
    def name(self) -> str:
        return self.data_set if self.level == "turn" and not self.data_set.startswith("fed") else f"{self.data_set}-{self.level}"


@dataclass
class SliceData:
    """One variant's numbers on one slice: per follow-up log-likelihoods, token counts, ratings."""

    follow_ups: list[str]
    token_counts: list[int]
    log_likelihoods: list[list[list[float]]]  # per model of the variant: items x follow-ups
    human: list[float]
    words: list[int]


def _aspect(table: LogLikTable) -> str:
    keys = {k for item in table.items for k in item.ratings}
    if FED_ASPECT in keys:
        return FED_ASPECT
    if len(keys) != 1:
        raise UsageError(f"{table.data_set}: no 'Overall' rating and several aspects {sorted(keys)}")
    return next(iter(keys))


def slice_data(tables: Sequence[LogLikTable], level: str, follow_ups: Sequence[str] | None = None) -> SliceData:
    """The numbers of one level of one data set for the models of ``tables`` (same set, same
    items), on ``follow_ups`` (default: the first table's; every table must have scored them)."""
    first = tables[0]
    aspect = _aspect(first)
    items = first.level(level)
    follow_ups = list(first.follow_ups if follow_ups is None else follow_ups)
    for table in tables:
        if len(table.level(level)) != len(items) or not set(follow_ups) <= set(table.follow_ups):
            raise UsageError(f"{first.data_set}: tables of {first.model} and {table.model} do not cover the same items")
    keep = [k for k, item in enumerate(items) if aspect in item.ratings]
    columns = [[t.follow_ups.index(f) for f in follow_ups] for t in tables]
    return SliceData(
        follow_ups=follow_ups,
        token_counts=[first.token_counts[first.follow_ups.index(f)] for f in follow_ups],
        log_likelihoods=[[[t.level(level)[k].log_likelihoods[j] for j in cols] for k in keep]
                         for t, cols in zip(tables, columns)],
        human=[items[k].ratings[aspect] for k in keep],
        words=[items[k].words for k in keep],
    )


def signed_scores(data: SliceData, follow_ups: Sequence[str], aggregation: str) -> list[float]:
    """Higher-is-better scores of a signed follow-up set, averaged over the variant's models.

    ``sum``: sum of sign x log-likelihood; ``mean``: mean of sign x per-token log-likelihood;
    ``balanced``: mean log-likelihood of the positive ones minus that of the negative ones.
    Negative follow-ups have sign -1 (the paper's score), positive ones +1; a follow-up that is
    not a Table 3 candidate counts as negative.
    """
    negative = [f for f in follow_ups if SIGN.get(f, -1) < 0]
    positive = [f for f in follow_ups if SIGN.get(f, -1) > 0]
    if aggregation not in STUDY_AGGREGATIONS:
        raise UsageError(f"unknown study aggregation {aggregation!r}; choose one of {STUDY_AGGREGATIONS}")
    index = [data.follow_ups.index(f) for f in (*negative, *positive)]
    counts = [data.token_counts[j] for j in index]
    models = data.log_likelihoods
    return [
        math.fsum(aggregate([model[i][j] for j in index], counts, aggregation, len(positive)) for model in models)
        / len(models)
        for i in range(len(data.human))
    ]


def spearman(values: Sequence[float], human: Sequence[float]) -> float:
    return correlate(list(values), list(human), methods=("spearman",), bootstrap=0)["spearman"].value


_CORRELATIONS: dict[int, tuple[SliceData, dict[str, float]]] = {}


def follow_up_correlations(data: SliceData) -> dict[str, float]:
    """Each follow-up's Spearman correlation with people, signed (higher is better for both
    polarities); computed once per slice."""
    cached = _CORRELATIONS.get(id(data))
    if cached is None or cached[0] is not data:
        cached = (data, {f: spearman(signed_scores(data, [f], "sum"), data.human) for f in data.follow_ups})
        _CORRELATIONS[id(data)] = cached
    return cached[1]


def top_follow_ups(
    selection: Sequence[SliceData], k: int, signed: bool = True, worst_case: bool = False
) -> list[str]:
    """The ``k`` candidates with the best mean signed correlation over the selection slices
    (``worst_case``: the best lowest correlation, so a follow-up must work on every slice;
    negative candidates only when ``signed`` is false), best first; ties by text."""
    per_slice = [follow_up_correlations(d) for d in selection]
    candidates = [f for f in selection[0].follow_ups if f in SIGN and (signed or SIGN[f] < 0)]
    if worst_case:
        key = {f: min(c[f] for c in per_slice) for f in candidates}
    else:
        key = {f: sum(c[f] for c in per_slice) / len(per_slice) for f in candidates}
    return sorted(candidates, key=lambda f: (-key[f], f))[:k]


#: A follow-up rule: from the selection slices (and the candidates scored), the follow-ups to use.
Rule = Callable[[Sequence[SliceData]], list[str]]


def _fixed(follow_ups: Sequence[str]) -> Rule:
    return lambda selection: list(follow_ups)


def follow_up_rules() -> dict[str, tuple[Rule, bool]]:
    """Named follow-up rules and whether each is chosen from data."""
    negative = [c.text for c in CANDIDATES if c.polarity == "negative"]
    positive = [c.text for c in CANDIDATES if c.polarity == "positive"]
    rules: dict[str, tuple[Rule, bool]] = {
        "paper five": (_fixed(PAPER_FIVE), False),
        f"all {len(negative)} negative": (_fixed(negative), False),
        f"all {len(positive)} positive (+)": (_fixed(positive), False),
        f"all {len(CANDIDATES)}, signed": (_fixed([c.text for c in CANDIDATES]), False),
        f"paper five + all {len(positive)} positive, signed": (_fixed([*PAPER_FIVE, *positive]), False),
    }
    for k in (5, 10, 20):
        rules[f"top {k} negative, selected"] = ((lambda s, k=k: top_follow_ups(s, k, signed=False)), True)
        rules[f"top {k} signed, selected"] = ((lambda s, k=k: top_follow_ups(s, k, signed=True)), True)
        rules[f"top {k} signed, selected on the worst slice"] = (
            (lambda s, k=k: top_follow_ups(s, k, signed=True, worst_case=True)), True)
    return rules


@dataclass
class Config:
    variant: str
    rule: str
    aggregation: str


def evaluate(
    config: Config, follow_ups: Sequence[str], slices: dict[Slice, SliceData]
) -> dict[Slice, float]:
    """Spearman of a configuration with people on each slice."""
    return {s: spearman(signed_scores(d, follow_ups, config.aggregation), d.human) for s, d in slices.items()}


def length_baseline(slices: dict[Slice, SliceData]) -> dict[Slice, float]:
    """Spearman of the length in words (response at turn level, dialog at dialog level) with people."""
    return {s: spearman([float(w) for w in d.words], d.human) for s, d in slices.items()}


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def data_set_mean(scores: dict[Slice, float]) -> float:
    """The mean over data sets of each set's mean over its slices (FED's two levels count once)."""
    by_set: dict[str, list[float]] = {}
    for s, v in scores.items():
        by_set.setdefault(s.data_set, []).append(v)
    return mean([mean(v) for v in by_set.values()])


@dataclass
class Fold:
    """One leave-one-data-set-out fold: what was chosen without ``held_out`` and how it did there."""

    held_out: str
    config: Config
    follow_ups: list[str]
    selection_score: float
    held_out_scores: dict[Slice, float]


def choose(
    variants: dict[str, dict[Slice, SliceData]],
    exclude: str | None = None,
    rules: dict[str, tuple[Rule, bool]] | None = None,
    aggregations: Sequence[str] = STUDY_AGGREGATIONS,
    allowed: Callable[[Config], bool] = lambda c: True,
) -> tuple[float, Config, list[str]]:
    """The configuration with the best mean Spearman over every data set but ``exclude`` (each
    set's slices averaged first; data-chosen follow-ups are chosen on the same sets)."""
    rules = rules or follow_up_rules()
    best: tuple[float, Config, list[str]] | None = None
    for variant, slices in variants.items():
        selection = {s: d for s, d in slices.items() if s.data_set != exclude}
        for rule_name, (rule, _) in rules.items():
            follow_ups = rule(list(selection.values()))
            if not covers(slices, follow_ups):
                continue
            for aggregation in aggregations:
                config = Config(variant, rule_name, aggregation)
                if not allowed(config):
                    continue
                score = data_set_mean(evaluate(config, follow_ups, selection))
                if best is None or score > best[0] + 1e-12:
                    best = (score, config, follow_ups)
    if best is None:
        raise UsageError("no configuration to choose from")
    return best


def leave_one_out(
    variants: dict[str, dict[Slice, SliceData]],
    rules: dict[str, tuple[Rule, bool]] | None = None,
    aggregations: Sequence[str] = STUDY_AGGREGATIONS,
    allowed: Callable[[Config], bool] = lambda c: True,
) -> list[Fold]:
    """For each data set: :func:`choose` without it, then report the choice on it."""
    data_sets = sorted({s.data_set for slices in variants.values() for s in slices})
    folds = []
    for held_out in data_sets:
        score, config, follow_ups = choose(variants, held_out, rules, aggregations, allowed)
        held = {s: d for s, d in variants[config.variant].items() if s.data_set == held_out}
        folds.append(Fold(held_out, config, follow_ups, score, evaluate(config, follow_ups, held)))
    return folds


def covers(slices: dict[Slice, SliceData], follow_ups: Sequence[str]) -> bool:
    """Whether the variant's tables scored every one of ``follow_ups``."""
    return set(follow_ups) <= set(next(iter(slices.values())).follow_ups)


def rule_scores(
    slices: dict[Slice, SliceData], rule: Rule, data_driven: bool, aggregation: str
) -> dict[Slice, float] | None:
    """A follow-up rule's Spearman on every slice; a data-driven rule chooses its follow-ups
    without the slice's data set (so each number is out-of-selection for the follow-ups).
    ``None`` when the variant's tables lack a follow-up of a fixed rule."""
    if not data_driven and not covers(slices, rule([])):
        return None
    out = {}
    for s, d in slices.items():
        selection = [v for t, v in slices.items() if t.data_set != s.data_set] if data_driven else []
        follow_ups = rule(selection)
        out[s] = spearman(signed_scores(d, follow_ups, aggregation), d.human)
    return out


__all__ = [
    "Config", "Fold", "SIGN", "Slice", "SliceData", "choose", "covers", "data_set_mean", "evaluate", "follow_up_correlations", "follow_up_rules",
    "leave_one_out", "length_baseline", "rule_scores", "signed_scores", "slice_data", "spearman", "top_follow_ups",
]
