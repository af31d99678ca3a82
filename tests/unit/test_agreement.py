"""The generic-reply rate against its plain computation: every (human answer, reply) pair scored on
its own and compared."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from full_metric.research.agreement import generic_reply_rate
from full_metric.files.rated_files import RatedItem


class CountingScorer:
    """A stand-in judge whose score depends on both the context and the response; it records every
    (context, response) it is asked to score."""

    def __init__(self) -> None:
        self.calls: list[tuple[tuple[str, ...], str]] = []

    def score(self, contexts, responses):
        pairs = [(tuple(c), r) for c, r in zip(contexts, responses)]
        self.calls += pairs
        return SimpleNamespace(scores=[self.value(c, r) for c, r in pairs])

    @staticmethod
    def value(context: tuple[str, ...], response: str) -> float:
        return float((sum(map(ord, " ".join(context))) * 7 + sum(map(ord, response)) * 3) % 101)


def _items() -> list[RatedItem]:
    items = []
    for k in range(6):
        context = [f"Hello there, friend number {k}.", f"What did you do today? ({k * k})"]
        for system, response in (("Original Ground Truth", f"I went swimming {k} times."),
                                 ("New Human Generated", "Mostly reading." * (k % 3 + 1)),
                                 ("Seq2Seq", "i do not know")):
            items.append(RatedItem(context, response, {"human": float(k)}, f"line {len(items) + 1}", system))
    return items


@pytest.mark.parametrize("reuse", [False, True])
def test_generic_reply_rate_equals_the_plain_count(reuse):
    items, replies = _items(), ("Yes.", "Sure.", "I don't know.")
    scorer = CountingScorer()
    given = [scorer.value(tuple(i.context), i.response) for i in items] if reuse else None
    rate = generic_reply_rate(scorer, items, replies, scores=given, bootstrap=50, seed=1)
    human = [i for i in items if i.system != "Seq2Seq"]
    plain = [[scorer.value(tuple(i.context), r) > scorer.value(tuple(i.context), i.response) for r in replies]
             for i in human]
    assert rate["rate"] == pytest.approx(sum(map(sum, plain)) / (len(human) * len(replies)))
    assert rate["per_reply"] == {r: pytest.approx(sum(row[k] for row in plain) / len(human))
                                 for k, r in enumerate(replies)}
    assert (rate["contexts"], rate["answers"]) == (6, len(human)) == (6, 12)  # two human answers per context
    # each reply once per distinct context (6), the human answers only when their scores were not given
    assert len(scorer.calls) == 6 * len(replies) + (0 if reuse else 12)
    assert 0 <= rate["ci_low"] <= rate["rate"] <= rate["ci_high"] <= 1


def test_generic_reply_rate_needs_a_human_answer():
    items = [i for i in _items() if i.system == "Seq2Seq"]
    with pytest.raises(ValueError, match="no human-written answer"):
        generic_reply_rate(CountingScorer(), items)


def test_the_rates_interval_resamples_contexts_not_answers():
    """Nine answers sharing one context are one draw: resampling them as if independent makes the
    interval far too narrow."""
    import numpy as np

    from full_metric.comparison import clustered_mean_interval, mean_interval

    values, clusters = [1.0] * 9 + [0.0] * 9, ["shared"] * 9 + [f"own {k}" for k in range(9)]
    by_answer = mean_interval(values, resamples=2000, seed=0)
    by_context = clustered_mean_interval(values, clusters, resamples=2000, seed=0)
    assert by_context[0] <= 0.5 <= by_context[1]
    assert by_context[1] - by_context[0] > 1.5 * (by_answer[1] - by_answer[0])
    one_each = list(range(18))  # one answer per context: the same draws as mean_interval
    assert clustered_mean_interval(values, one_each, resamples=500, seed=3) == mean_interval(values, resamples=500, seed=3)
    with pytest.raises(ValueError, match="18 values but 2 cluster labels"):
        clustered_mean_interval(values, ["a", "b"])
    assert np.isfinite(by_context).all()
