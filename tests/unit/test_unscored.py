"""Issue 62, 0: "not scored" means one thing in every face. Each face is given an item the model cannot
read a context for (a response longer than the tiny BlenderBot's 128 positions), and its figures are
checked against the same face on the scored items alone (the oracle: the items removed by hand)."""

from __future__ import annotations

import json
import logging
import math

import numpy as np
import pytest
import torch

from full_metric import FullScorer
from full_metric.comparison import compare_systems, mean_interval
from full_metric.faces.training import full_reward, summary, unscored_reward
from full_metric.files.dialog_files import read_dialog_lines, scored_records
from full_metric.research.correlation import correlate
from full_metric.research.probe import gaming_probe
from full_metric.unscored import REASON, as_json_score, scored_mean, unscored_items

LONG = " ".join(f"word{i}" for i in range(400))  # no repeated word: no other reward tells it apart


@pytest.fixture(scope="module")
def scorer(tiny_blenderbot_path):
    return FullScorer(str(tiny_blenderbot_path), progress=False)


def test_the_one_rule_takes_nan_and_none_and_leaves_them_out():
    scores = [1.5, math.nan, None, -2.0]
    assert unscored_items(scores) == [1, 2]
    assert scored_mean(scores) == (1.5 - 2.0) / 2
    assert math.isnan(scored_mean([None, math.nan]))
    assert as_json_score(math.nan) == {"full": None, "unscored": REASON} and as_json_score(3.0) == {"full": 3.0}


def test_a_scored_file_holds_valid_json_and_reads_back(scorer, tmp_path):
    rows = [{"context": ["Hi!"], "response": "Fine."}, {"context": ["Hi!"], "response": LONG}]
    records = scored_records(rows, scorer.score([r["context"] for r in rows], [r["response"] for r in rows]))
    path = tmp_path / "scored.jsonl"
    path.write_text("".join(json.dumps(r, allow_nan=False) + "\n" for r in records), encoding="utf-8")
    back = [r for _, r in read_dialog_lines(path)]
    assert back[1]["full"] is None and back[1]["unscored"] == REASON and isinstance(back[0]["full"], float)


@pytest.mark.parametrize("paired", [True, False])
def test_a_comparison_leaves_out_the_unscored_and_names_them(paired):
    rng = np.random.default_rng(7)
    a, b = list(rng.normal(size=30)), list(rng.normal(0.3, 1, size=30))
    a[4], b[9] = math.nan, None
    names = {"A": [f"line {k + 2}" for k in range(30)], "B": [f"line {k + 2}" for k in range(30)]}
    got = compare_systems({"A": a, "B": b}, paired=paired, item_names=names)
    if paired:
        keep = [k for k in range(30) if k not in (4, 9)]
        oracle = compare_systems({"A": [a[k] for k in keep], "B": [b[k] for k in keep]}, paired=True)
    else:
        oracle = compare_systems({"A": a[:4] + a[5:], "B": b[:9] + b[10:]}, paired=False)
    assert got.systems == oracle.systems
    assert got.left_out == {"A": ["line 6"], "B": ["line 11"]}
    assert "line 6" in got.table() and "line 11" in got.table() and json.dumps(got.to_dict())


def test_nothing_scored_is_refused_by_name():
    with pytest.raises(ValueError, match="system 'B': no item was scored"):
        compare_systems({"A": [1.0, 2.0], "B": [math.nan, None]})
    with pytest.raises(ValueError, match="no pair has both sides scored"):
        compare_systems({"A": [1.0, math.nan], "B": [math.nan, 2.0]})


def test_an_interval_and_a_correlation_are_over_the_scored_items():
    values = [3.0, 1.0, math.nan, 2.0, 5.0, 4.0]
    assert mean_interval(values) == mean_interval([3.0, 1.0, 2.0, 5.0, 4.0])
    human = [3.0, 2.0, 9.0, 1.0, 5.0, 4.0]
    got = correlate(values, human, bootstrap=50)["spearman"]
    oracle = correlate([3.0, 1.0, 2.0, 5.0, 4.0], [3.0, 2.0, 1.0, 5.0, 4.0], bootstrap=50)["spearman"]
    assert (got.value, got.n, got.not_scored) == (oracle.value, 5, 1)


def test_the_trainers_summary_is_over_the_scored_predictions(scorer):
    result = scorer.score([["Hi!"], ["Hi!"], ["How are you?"]], ["Fine.", LONG, "Good, you?"])
    logged = summary(result, "eval_full")
    assert logged["eval_full"] == (result.scores[0] + result.scores[2]) / 2
    assert logged["eval_full_unscored"] == 1 and logged["eval_full_n"] == 3
    assert (logged["eval_full_ci_low"], logged["eval_full_ci_high"]) == mean_interval([result.scores[0], result.scores[2]])


def test_an_unscored_answer_never_earns_more_than_a_scored_one_beside_another_reward(tiny_blenderbot_path):
    """TRL sums the reward functions, a None counted as nothing (nansum): with praise follow-ups and the
    balanced aggregation FULL is negative here, so a None would have beaten every scored answer."""
    from full_metric.faces.training import repetition_reward

    reward = full_reward(model=str(tiny_blenderbot_path), follow_ups=["Not really relevant here."],
                         positive_follow_ups=["That's interesting!"], aggregation="balanced")
    prompts = ["Hi!", "How are you?", "What did you do today?", "Hi!"]
    completions = ["Fine.", LONG, "I went hiking.", "Hello there."]
    funcs = [reward, repetition_reward]
    per_func = torch.tensor([[math.nan if v is None else v for v in f(prompts, completions)] for f in funcs]).T
    total = per_func.nansum(dim=1)  # GRPOTrainer's sum of the reward functions
    scored = [0, 2, 3]
    assert per_func[1, 0] == min(per_func[k, 0] for k in scored)  # the call's lowest FULL reward
    assert all(total[1] <= total[k] for k in scored)
    assert unscored_reward([math.nan, math.nan]) == [None, None]
    assert unscored_reward([-3.0, math.nan, -1.0]) == [-3.0, -3.0, -1.0]


def test_the_probe_leaves_out_a_context_whose_human_turn_is_unscored(caplog):
    dialogs = [[f"a{k} one", f"b{k} two", f"c{k} three", f"d{k} four", f"e{k} five", f"f{k} six"] for k in range(8)]

    def score(contexts, responses):  # the human's turn of the dialog starting 'a3' is not scored
        return [math.nan if r.startswith(("b3", "c3", "d3", "e3", "f3")) and c[0].startswith("a3") else float(len(r))
                for c, r in zip(contexts, responses)]

    with caplog.at_level(logging.WARNING, logger="full_metric.research.probe"):
        rows = gaming_probe(score, dialogs)
    assert all(r.contexts <= 7 for r in rows) and next(r for r in rows if r.answer == "Yes.").contexts == 7
    assert any("1 of 8 human turns not scored" in r.getMessage() for r in caplog.records)


def test_an_unscored_items_category_scores_are_not_numbers(scorer):
    """Issue 62, 6: with all 63 follow-ups, the fine-grained category scores of an item not scored are NaN too."""
    result = scorer.score([["Hi!"], ["Hi!"]], ["Fine.", LONG], follow_ups="all")
    assert result.category_scores and result.unscored == [1]
    for name, values in result.category_scores.items():
        assert not math.isnan(values[0]) and math.isnan(values[1]), name


def test_every_face_of_the_metric_gives_the_unscored_items(tiny_blenderbot_path):
    """evaluate's FULL and FullComparison, and the Trainer's compute_metrics, with one prediction too long for any
    context: the mean over the others, the item named, nothing aborted (issue 62, 0)."""
    from types import SimpleNamespace

    import full_metric
    from full_metric.faces.comparison_metric import FULLComparison
    from full_metric.faces.training import full_compute_metrics

    contexts, responses = [["Hi!"], ["Hi!"], ["How are you?"]], ["Fine.", LONG, "Good, you?"]
    full = full_metric.FULL(model=str(tiny_blenderbot_path), device="cpu", progress=False)
    out = full.compute(predictions=responses, references=contexts)
    assert out["unscored"] == [1] and math.isnan(out["scores"][1])
    assert out["full"] == pytest.approx((out["scores"][0] + out["scores"][2]) / 2, abs=1e-9)
    pair = FULLComparison(model=str(tiny_blenderbot_path), device="cpu", progress=False)
    got = pair.compute(predictions1=responses, predictions2=["Sure.", "Ok then.", LONG], references=contexts,
                       resamples=50)
    assert (got["unscored1"], got["unscored2"], got["pairs_left_out"]) == ([1], [2], 2)
    assert got["full1"] == pytest.approx(got["scores1"][0], abs=1e-9)  # the one pair with both sides scored
    decoding = SimpleNamespace(batch_decode=lambda ids, skip_special_tokens: [responses[i] for i, *_ in ids])
    metrics = full_compute_metrics(contexts, decoding, FullScorer(str(tiny_blenderbot_path), progress=False))
    logged = metrics(SimpleNamespace(predictions=[[0], [1], [2]]))
    assert logged["full_unscored"] == 1 and logged["full"] == pytest.approx(out["full"], abs=1e-4)
