"""Comparing systems: the statistics (against scipy, hand-worked values and planted data), the
pairing of files, ``full-metric compare`` end to end, the evaluate comparison module."""

from __future__ import annotations

import json
from pathlib import Path

import evaluate
import numpy as np
import pytest
from scipy import stats

from full_metric import PRESETS, FullScorer
from full_metric.faces import metric as metric_module
from full_metric.faces.cli import main
from full_metric.comparison import PairingError, compare_systems, holm, pair_items

from ..helpers import assert_drawn_png

REPO = Path(__file__).resolve().parents[2]


# -- statistics -------------------------------------------------------------------------------
def test_holm_matches_values_worked_by_hand():
    # sorted 0.01, 0.03, 0.04 -> 3 * 0.01, 2 * 0.03, max(0.06, 1 * 0.04); capped at 1
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, 0.6]) == pytest.approx([1.0, 1.0])
    assert holm([0.2]) == [0.2]


def test_p_value_formula_on_data_whose_answer_is_known():
    """A constant difference of 1: every bootstrap resample's difference is exactly 1, so none lies
    |1| from the observed one, c = 0 and p = 1 / (N + 1); randomization finds |mean| >= 1 only when
    all 40 signs agree (2^-39), so c = 0 too. Identical systems: every resample counts, p = 1."""
    a = np.linspace(0, 3, 40)
    for method, n in (("bootstrap", 999), ("randomization", 4999)):
        result = compare_systems({"a": a, "b": a + 1}, method=method, resamples=n).systems[1]
        assert result.delta == pytest.approx(1.0)
        assert result.p_value == pytest.approx(1 / (n + 1))
        assert (result.delta_ci_low, result.delta_ci_high) == pytest.approx((1.0, 1.0))
        assert compare_systems({"a": a, "b": a.copy()}, method=method, resamples=n).systems[1].p_value == 1.0


def test_interval_of_a_mean_matches_the_normal_theory_interval():
    """n = 2000 draws of N(0, 1): the mean's sampling distribution is N(mean, 1/n), so the 95%
    interval is mean -+ 1.96 / sqrt(n) (0.0438), which the bootstrap must reproduce."""
    x = np.random.default_rng(3).normal(size=2000)
    s = compare_systems({"x": x, "y": x + 0.1}, resamples=4000).systems[0]
    half = 1.959964 * x.std(ddof=1) / np.sqrt(len(x))
    assert s.ci_low == pytest.approx(x.mean() - half, abs=0.006)
    assert s.ci_high == pytest.approx(x.mean() + half, abs=0.006)


def test_bootstrap_interval_agrees_with_scipy():
    rng = np.random.default_rng(1)
    a = rng.gamma(2.0, size=80)
    b = a + rng.normal(0.2, 1.0, size=80)
    ours = compare_systems({"a": a, "b": b}, resamples=20000, seed=5).systems
    ref = stats.bootstrap((a,), np.mean, n_resamples=20000, method="percentile", random_state=9).confidence_interval
    assert (ours[0].ci_low, ours[0].ci_high) == pytest.approx((ref.low, ref.high), abs=0.03)
    diff = stats.bootstrap((b, a), lambda x, y: np.mean(x - y), paired=True, n_resamples=20000, method="percentile",
                           random_state=9).confidence_interval
    assert (ours[1].delta_ci_low, ours[1].delta_ci_high) == pytest.approx((diff.low, diff.high), abs=0.03)


@pytest.mark.parametrize("paired", [True, False])
def test_randomization_p_value_agrees_with_scipy_permutation_test(paired):
    rng = np.random.default_rng(2)
    a = rng.normal(size=50)
    b = a + rng.normal(0.25, 1.0, size=50) if paired else rng.normal(0.4, 1.0, size=45)
    ours = compare_systems({"a": a, "b": b}, method="randomization", resamples=20000, paired=paired).systems[1]

    def statistic(x, y, axis=-1):
        return np.mean(x, axis=axis) - np.mean(y, axis=axis)

    ref = stats.permutation_test((b, a), statistic, permutation_type="samples" if paired else "independent",
                                 n_resamples=20000, alternative="two-sided", random_state=4, vectorized=True)
    assert 0.001 < ref.pvalue < 0.5  # a case where the p-value is informative
    assert ours.p_value == pytest.approx(ref.pvalue, abs=0.01)


@pytest.mark.parametrize("method", ["bootstrap", "randomization"])
def test_no_difference_gives_uniform_p_values_and_a_real_one_is_found(method):
    rng = np.random.default_rng(0)
    p_values = []
    for seed in range(300):
        a = rng.normal(size=40)
        b = a + rng.normal(0.0, 1.0, size=40)  # paired, no difference in expectation
        p_values.append(compare_systems({"a": a, "b": b}, method=method, resamples=400, seed=seed).systems[1].p_value)
    p_values = np.array(p_values)
    assert 0.02 <= (p_values < 0.05).mean() <= 0.10  # false positives near 5%
    assert stats.kstest(p_values, "uniform").pvalue > 0.01  # roughly uniform
    a = rng.normal(size=40)
    assert compare_systems({"a": a, "b": a + rng.normal(0.8, 1.0, size=40)}, method=method).systems[1].p_value < 0.01


def test_ranking_holm_and_the_table():
    a = np.arange(30.0)
    result = compare_systems({"base": a, "better": a + 2, "same": a + np.tile([0.6, -0.5], 15)}, resamples=500)
    assert [s.system for s in result.ranking()] == ["better", "same", "base"]
    assert result.systems[0].p_value is None and result.systems[0].delta is None
    better, same = result.systems[1], result.systems[2]
    assert better.p_value_holm == pytest.approx(min(1, 2 * better.p_value)) and result.significant(better)
    assert not result.significant(same)
    table = result.table()
    assert "(baseline)" in table and "Holm" in table and "does not say that people would prefer" in table
    data = result.to_dict()
    assert data["systems"][1]["significant"] is True and data["method"] == "bootstrap"


def test_unpaired_comparison_is_said_and_validation():
    result = compare_systems({"a": [1.0, 2.0, 3.0], "b": [2.0, 3.0, 4.0, 5.0]}, paired=False, resamples=200)
    assert "UNPAIRED" in result.table() and not result.paired
    with pytest.raises(ValueError, match="same number of items"):
        compare_systems({"a": [1.0, 2.0], "b": [1.0]})
    with pytest.raises(ValueError, match="at least two systems"):
        compare_systems({"a": [1.0]})
    with pytest.raises(ValueError, match="baseline 'c'"):
        compare_systems({"a": [1.0], "b": [2.0]}, baseline="c")
    with pytest.raises(ValueError, match="system 'b': item 1 is not a finite"):  # (NaN: not scored, left out)
        compare_systems({"a": [1.0, 2.0], "b": [1.0, float("inf")]})
    with pytest.raises(ValueError, match="system 'b': item 1 is not a number"):
        compare_systems({"a": [1.0, 2.0], "b": [1.0, "2.0"]})
    with pytest.raises(ValueError, match="unknown method"):
        compare_systems({"a": [1.0], "b": [2.0]}, method="t-test")


def test_pairing_by_context_reorders_and_names_the_first_mismatch():
    base = ["x", "y", "x", "z"]
    order = pair_items({"base": base, "other": ["z", "x", "y", "x"]}, "base")
    assert order == {"base": [0, 1, 2, 3], "other": [1, 2, 3, 0]}
    with pytest.raises(PairingError, match="item 2") as error:
        pair_items({"base": base, "other": ["x", "w", "x", "z"]}, "base")
    assert (error.value.system, error.value.index) == ("other", 1)
    with pytest.raises(PairingError, match="no item for the baseline 'base'"):
        pair_items({"base": base, "other": ["x", "y", "z"]}, "base")


# -- the command line -------------------------------------------------------------------------
CONTEXTS = [["Hi! How was your weekend?"], ["I just adopted a puppy!"], ["Do you like cooking?"],
            ["What is the capital of France?"]]
SYSTEMS = {
    "good": ["Great, I went hiking.", "Congratulations! What breed?", "Yes, I love making pasta.", "Paris."],
    "bad": ["My car needs tires.", "The sky is blue.", "Potato.", "I am a banana."],
    "mixed": ["Great, I went hiking.", "The sky is blue.", "Yes, I love making pasta.", "I am a banana."],
}


def _write(path: Path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return str(path)


def _options(tiny):
    return ["--model", str(tiny), "--device", "cpu", "--no-progress"]


def test_compare_command_end_to_end(tiny_blenderbot_path, tmp_path, capsys):
    files = [_write(tmp_path / f"{name}.jsonl", [{"context": c, "response": r} for c, r in zip(CONTEXTS, answers)])
             for name, answers in SYSTEMS.items()]
    # the second file in another order: pairing by context restores the baseline's
    order = [2, 0, 3, 1]
    _write(tmp_path / "bad.jsonl", [{"context": CONTEXTS[k], "response": SYSTEMS["bad"][k]} for k in order])
    out_json, out_png = tmp_path / "cmp.json", tmp_path / "cmp.png"
    assert main(["compare", *files, "--baseline", "mixed", "--resamples", "300", "--seed", "7", "--json", str(out_json),
                 "--plot", str(out_png), *_options(tiny_blenderbot_path)]) == 0
    printed = capsys.readouterr()
    data = json.loads(out_json.read_text())
    scorer = FullScorer(tiny_blenderbot_path, device="cpu", progress=False)
    want = {name: scorer.score(CONTEXTS, answers).scores for name, answers in SYSTEMS.items()}
    expected = compare_systems(want, baseline="mixed", resamples=300, seed=7)
    by_name = {s["system"]: s for s in data["systems"]}
    assert list(by_name) == ["good", "bad", "mixed"]
    for s in expected.systems:
        got = by_name[s.system]
        for key in ("mean", "ci_low", "ci_high", "delta", "delta_ci_low", "delta_ci_high", "p_value", "p_value_holm"):
            assert got[key] == pytest.approx(getattr(s, key)), (s.system, key)
    assert by_name["mixed"]["p_value"] is None
    assert data["method"] == "bootstrap" and data["resamples"] == 300 and data["seed"] == 7
    assert data["signature"] == scorer.signature()
    assert "mixed" in printed.out and "(baseline)" in printed.out
    assert_drawn_png(out_png)


def test_compare_reads_scored_files_and_refuses_what_does_not_compare(tiny_blenderbot_path, tmp_path, capsys):
    a = _write(tmp_path / "a.jsonl", [{"context": c, "response": r} for c, r in zip(CONTEXTS, SYSTEMS["good"])])
    b = _write(tmp_path / "b.jsonl", [{"context": c, "response": r, "system": "System B"}
                                      for c, r in zip(CONTEXTS, SYSTEMS["bad"])])
    scored_a, scored_b = tmp_path / "a.scored.jsonl", tmp_path / "b.scored.jsonl"
    for src, out in ((a, scored_a), (b, scored_b)):
        assert main(["score", src, "-o", str(out), *_options(tiny_blenderbot_path)]) == 0
    out_json = tmp_path / "cmp.json"
    assert main(["compare", str(scored_a), str(scored_b), "--method", "randomization", "--resamples", "500",
                 "--json", str(out_json)]) == 0  # no model options needed: nothing to score
    data = json.loads(out_json.read_text())
    assert [s["system"] for s in data["systems"]] == ["a.scored", "System B"]
    scores = [json.loads(line)["full"] for line in scored_b.read_text().splitlines()]
    assert data["systems"][1]["mean"] == pytest.approx(np.mean(scores))
    capsys.readouterr()
    # a context the baseline lacks: refused, naming the file and line
    c = _write(tmp_path / "c.jsonl", [{"context": c, "response": "Ok."} for c in [*CONTEXTS[:2], ["Other?"], CONTEXTS[3]]])
    assert main(["compare", a, c, *_options(tiny_blenderbot_path)]) == 2
    assert f"{c}, line 3" in capsys.readouterr().err
    assert main(["compare", a, c, "--unpaired", *_options(tiny_blenderbot_path)]) == 0
    assert "UNPAIRED" in capsys.readouterr().out
    # scores made with other settings do not compare
    other = tmp_path / "other.scored.jsonl"
    assert main(["score", b, "-o", str(other), "--aggregation", "mean", *_options(tiny_blenderbot_path)]) == 0
    assert main(["compare", str(scored_a), str(other)]) == 2
    assert f"scored with different settings, their scores do not compare: {other} against {scored_a}: agg: sum vs mean" \
        in capsys.readouterr().err


# -- the evaluate comparison module -----------------------------------------------------------
def test_comparison_module_by_path_shares_the_metric_model(tiny_blenderbot_path, monkeypatch):
    calls = []
    real = metric_module.load_model
    monkeypatch.setattr(metric_module, "_LOADED", {})
    monkeypatch.setattr(metric_module, "load_model", lambda *a, **k: calls.append(a) or real(*a, **k))
    options = {"model": str(tiny_blenderbot_path), "device": "cpu", "progress": False}
    compare = evaluate.load(str(REPO / "full_comparison.py"), module_type="comparison", **options)
    full = evaluate.load(str(REPO / "full.py"), **options)
    assert isinstance(compare, evaluate.EvaluationModule) and len(calls) == 1  # one model for both
    out = compare.compute(predictions1=SYSTEMS["bad"], predictions2=SYSTEMS["good"], references=CONTEXTS,
                          resamples=500)
    scorer = FullScorer(tiny_blenderbot_path, device="cpu", progress=False)
    one, two = scorer.score(CONTEXTS, SYSTEMS["bad"]), scorer.score(CONTEXTS, SYSTEMS["good"])
    assert out["scores1"] == pytest.approx(one.scores) and out["scores2"] == pytest.approx(two.scores)
    assert out["full1"] == pytest.approx(full.compute(predictions=SYSTEMS["bad"], references=CONTEXTS)["full"])
    assert out["difference"] == pytest.approx(two.mean - one.mean, abs=1e-4)  # float32 scores near 400: ulp 3e-5
    want = compare_systems({"1": one.scores, "2": two.scores}, resamples=500).systems[1]
    assert (out["ci_low"], out["ci_high"], out["p_value"]) == pytest.approx(  # one batch of both systems
        (want.delta_ci_low, want.delta_ci_high, want.p_value), abs=1e-4)  # vs one each: float32 rounding
    assert out["signature"] == one.signature
    with pytest.raises(ValueError, match="predictions2"):
        compare.compute(predictions1=SYSTEMS["bad"], predictions2=SYSTEMS["good"][:3], references=CONTEXTS)


def test_comparison_module_docstring_example_runs(tiny_blenderbot_path, monkeypatch):
    import doctest

    from full_metric.faces import comparison_metric

    monkeypatch.chdir(REPO)
    monkeypatch.setitem(PRESETS["paper"], "model", str(tiny_blenderbot_path))  # the default model, for the doctest
    test = doctest.DocTestParser().get_doctest(comparison_metric._KWARGS_DESCRIPTION, {}, "doc", None, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    assert test.examples and runner.failures == 0


# -- system-level agreement with people ---------------------------------------------------------
def test_systems_command_compares_systems_by_full_and_by_people(tiny_blenderbot_path, tmp_path, capsys):
    rated = tmp_path / "rated.jsonl"
    ratings = {"good": [4.5, 4.0, 5.0, 4.5], "bad": [1.0, 1.5, 1.0, 2.0], "mixed": [4.0, 1.5, 4.5, 1.0]}
    rated.write_text("".join(
        json.dumps({"context": c, "response": SYSTEMS[s][k], "human": ratings[s][k], "system": s}) + "\n"
        for s in SYSTEMS for k, c in enumerate(CONTEXTS)))
    out = tmp_path / "systems"
    assert main(["systems", str(rated), "--presets", "paper", "reference", "--resamples", "300", "--seed", "4",
                 "--score-field", "human", "-o", str(out), *_options(tiny_blenderbot_path)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["command"].startswith("full-metric systems") and str(tmp_path) not in results["command"]
    assert [(r["preset"], r["level"], r["paired"]) for r in results["rows"]] == [("paper", "turn", True),
                                                                                ("reference", "turn", True)]
    row = results["rows"][0]
    scorer = FullScorer(tiny_blenderbot_path, device="cpu", progress=False)
    by_name = {s["system"]: s for s in row["systems"]}
    for name, answers in SYSTEMS.items():
        assert by_name[name]["full_mean"] == pytest.approx(np.mean(scorer.score(CONTEXTS, answers).scores))
        assert by_name[name]["human_mean"] == pytest.approx(np.mean(ratings[name]))
    assert row["signature"] == scorer.signature()
    assert len(row["pairs"]) == 3 and sum(row["counts"].values()) == 3
    for pair in row["pairs"]:  # each verdict follows from the two tests' p-values and directions
        full_sig, human_sig = pair["full_p"] < 0.05, pair["human_p"] < 0.05
        same = (pair["full_delta"] > 0) == (pair["human_delta"] > 0)
        expected = ("agree" if same else "disagree") if full_sig and human_sig else (
            "FULL only" if full_sig else "people only" if human_sig else "neither")
        assert pair["verdict"] == expected and pair["same_sign"] == same
        human = compare_systems({pair["a"]: ratings[pair["a"]], pair["b"]: ratings[pair["b"]]}, resamples=300, seed=4)
        assert pair["human_p"] == pytest.approx(human.systems[1].p_value)
    report = (out / "report.md").read_text()
    assert f"| rated | turn | tiny-blenderbot | paper | 3 | yes | {row['spearman']:.2f} |" in report
    assert "paper" in capsys.readouterr().out


def test_compare_takes_one_file_whose_records_name_their_systems(tiny_blenderbot_path, tmp_path, capsys):
    """The README's example: examples/three_systems.jsonl holds three systems' answers to the same contexts."""
    out = tmp_path / "cmp.json"
    assert main(["compare", str(REPO / "examples" / "three_systems.jsonl"), "--json", str(out),
                 *_options(tiny_blenderbot_path)]) == 0
    result = json.loads(out.read_text())
    assert [s["system"] for s in result["systems"]] == ["engaging", "generic", "off-topic"]
    assert all(s["n"] == 12 for s in result["systems"])
