"""The paired comparison of two judges (full_metric.research.paired) on made-up scores."""

from __future__ import annotations

import numpy as np
import pytest

from full_metric.errors import UsageError
from full_metric.research.agreement import item_key
from full_metric.research.paired import Level, contexts, level_of, paired_changes
from full_metric.files.rated_files import RatedItem

SYSTEMS = ("Human", "Bot A", "Bot B", "Bot C")


def _items(n_contexts: int = 30) -> list[RatedItem]:
    rng = np.random.default_rng(1)
    return [RatedItem([f"context {c}"], f"answer {c} {s}", {"human": float(rng.integers(1, 6)) + k}, "made up", s)
            for c in range(n_contexts) for k, s in enumerate(SYSTEMS)]


def _level(items: list[RatedItem], scores: np.ndarray) -> Level:
    human = np.asarray([k for k, i in enumerate(items) if i.system == "Human"])
    reply_scores = np.stack([scores[human] + 0.5 * (-1) ** np.arange(len(human)), scores[human] - 3], axis=1)
    return Level(items, "human", scores, human, reply_scores, ["Yes.", "I don't know."])


def test_a_judge_against_itself_changes_nothing_in_any_resample():
    """An unpaired bootstrap (each judge its own draws) would give intervals around 0, not [0, 0]."""
    items = _items()
    scores = np.asarray([i.ratings["human"] for i in items]) + np.random.default_rng(2).normal(0, 2, len(items))
    rows = paired_changes(_level(items, scores), _level(items, scores.copy()), within_context=True, resamples=200)
    assert {r["measure"] for r in rows} == {"Spearman, pooled", "Spearman, within context", "Spearman, over systems",
                                            "generic reply beats the human answer"}
    for row in rows:
        assert row["change"] == 0 and row["ci_low"] == 0 and row["ci_high"] == 0, row


def test_a_judge_that_follows_the_ratings_beats_a_noisy_one():
    items = _items()
    ratings = np.asarray([i.ratings["human"] for i in items])
    noisy = ratings + np.random.default_rng(3).normal(0, 5, len(items))
    rows = {r["measure"]: r for r in paired_changes(_level(items, noisy), _level(items, ratings.copy()),
                                                    within_context=True, resamples=300)}
    pooled = rows["Spearman, pooled"]
    assert pooled["judge"] == pytest.approx(1.0) and 0 < pooled["ci_low"] <= pooled["change"] <= pooled["ci_high"]
    assert rows["Spearman, within context"]["ci_low"] > 0
    assert pooled["contexts"] == 30


def test_contexts_group_the_answers_to_one_context_and_dialogs_stand_alone():
    items = _items(3)
    assert [list(g) for g in contexts(items)] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    dialogs = [RatedItem(["same"], None, {"Overall": 1.0}, "x") for _ in range(3)]
    assert [list(g) for g in contexts(dialogs)] == [[0], [1], [2]]


def test_scores_of_other_items_are_refused():
    items = _items(3)
    kept = {"data_set": "made-up", "level": "turn", "aspect": "human", "keys": [item_key(i) for i in items][::-1],
            "scores": [0.0] * 12, "human": [], "reply_scores": [], "replies": []}
    with pytest.raises(UsageError, match="made-up .turn level.: the scored items are not"):
        level_of(kept, items)
    kept["keys"] = kept["keys"][::-1]
    assert level_of(kept, items).scores.shape == (12,)


class _StandIn:
    """A judge that scores by a fixed function of the context and the response (no model)."""

    def score(self, contexts, responses=None, **options):
        from types import SimpleNamespace

        rows = zip(contexts, responses or [None] * len(contexts))
        return SimpleNamespace(scores=[float((sum(map(ord, " ".join(c) + (r or ""))) * 7) % 97) for c, r in rows])


def test_the_paired_comparison_measures_what_agreement_measures(tmp_path):
    """For one judge, each measure the paired comparison computes for it (its "base" value) is the value
    full-metric agreement reports: the rated items of a level, the within-context rule (turn level, not FED; at
    least three answers), the systems rule and the generic-reply wins are one rule, read by both."""
    import json

    from full_metric.research.agreement import agreement
    from full_metric.research.paired import compare_judges

    rng = np.random.default_rng(5)
    rows = []
    for c in range(12):
        answers = ("Original Ground Truth", "Bot A", "Bot B", "Bot C")[: 2 + c % 3]  # 2 to 4 answers a context
        for s in answers:
            rows.append({"context": [f"context {c}", f"more {c * 3}"], "response": f"{s} says {rng.integers(100)}",
                         "system": s, "level": "turn", "human": float(rng.integers(1, 6))})
    path = tmp_path / "usr-made-up.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    kept: list = []
    reported = agreement(_StandIn(), path, replies=("Yes.", "Sure."), bootstrap=50, scores_out=kept)
    paired = compare_judges({"levels": kept}, {"levels": kept}, {"usr-made-up": str(path)}, resamples=20)
    assert {r["measure"] for r in paired} == {r["measure"] for r in reported} == {
        "Spearman, pooled", "Spearman, within context", "Spearman, over systems", "generic reply beats the human answer"}
    for row in reported:
        twin = next(p for p in paired if (p["level"], p["measure"]) == (row["level"], row["measure"]))
        assert twin["base"] == pytest.approx(row["value"], rel=1e-12), row["measure"]


def test_a_reply_that_is_the_human_answer_itself_is_no_win_in_agreement_and_in_the_paired_comparison(tmp_path):
    """A person who answered "Yes." and the generic reply "Yes." make the same dialog: a tie. A stand-in whose
    every call adds a little more (as two batchings of one dialog differ in their last bits) makes every
    other reply win; both readers of the wins count exactly those."""
    import itertools
    import json
    from types import SimpleNamespace

    from full_metric.research.agreement import agreement
    from full_metric.research.paired import compare_judges

    calls = itertools.count()

    class Drifting:
        def score(self, contexts, responses=None, **options):
            offset = next(calls) * 1e-9
            return SimpleNamespace(scores=[1.0 + offset for _ in contexts])

    rows = [{"context": [f"context {c}"], "response": "Yes." if c == 0 else f"answer {c}", "system": system,
             "level": "turn", "human": float(c % 5 + k)} for c in range(6)
            for k, system in enumerate(("Original Ground Truth", "Bot A", "Bot B"))]
    path = tmp_path / "usr-made-up.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    kept: list = []
    reported = agreement(Drifting(), path, replies=("Yes.", "Sure."), bootstrap=20, scores_out=kept)
    rate = next(r for r in reported if r["measure"] == "generic reply beats the human answer")
    assert rate["per_reply"] == {"Yes.": pytest.approx(5 / 6), "Sure.": 1.0}  # six human answers, one is "Yes."
    paired = compare_judges({"levels": kept}, {"levels": kept}, {"usr-made-up": str(path)}, resamples=20)
    twin = next(p for p in paired if p["measure"] == "generic reply beats the human answer")
    assert twin["base"] == pytest.approx(rate["value"], rel=1e-12) == 11 / 12
