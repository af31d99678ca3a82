"""Checking FULL against human ratings: statistics, rated files, ranking, fine-grained, commands."""

from __future__ import annotations

import csv
import json
import random

import numpy as np
import pytest
from scipy import stats

from full_metric import CANDIDATES, FullScorer
from full_metric.faces.cli import main
from full_metric.research.correlation import correlate
from full_metric.fine_grained import CATEGORY_GROUPS, category_scores
from full_metric.research.human_eval import LEVELS, rank_follow_ups, score_items, split_holdout
from full_metric.files.rated_files import RatedFileError, read_fed, read_table

from ..helpers import assert_drawn_png

X = [0.1, 0.4, 0.35, 0.8, 0.7, 0.2, 0.95, 0.5]
Y = [1.0, 2.0, 2.5, 4.0, 3.0, 1.5, 5.0, 2.0]
TOPICS = ["the weather", "my new job", "a trip to Rome", "cooking pasta", "the football match", "a good book",
          "learning guitar", "our cat", "the exam", "a movie night", "gardening", "a birthday party"]


def test_correlations_of_a_table_worked_by_hand():
    """x = 1..5, y = 2, 1, 4, 3, 5. Spearman: the ranks are the values, sum d^2 = 4, so
    1 - 6 * 4 / (5 * 24) = 0.8. Kendall: of the 10 pairs, 2 are discordant ((2, 1) and (4, 3)),
    (8 - 2) / 10 = 0.6. Pearson: covariance sum 8, variance sums 10 and 10: 0.8."""
    out = correlate([1, 2, 3, 4, 5], [2, 1, 4, 3, 5], bootstrap=0)
    assert out["spearman"].value == pytest.approx(0.8)
    assert out["kendall"].value == pytest.approx(0.6)
    assert out["pearson"].value == pytest.approx(0.8)
    # the p-value reported is the t approximation: t = 0.8 * sqrt(3 / 0.36) with 3 degrees of freedom;
    # the exact one counts 8 of the 120 orderings with sum d^2 <= 4 (the identity, 4 adjacent swaps,
    # 3 pairs of disjoint adjacent swaps), two-sided 16 / 120: the approximation is close
    assert out["spearman"].p_value == pytest.approx(2 * stats.t.sf(0.8 * np.sqrt(3 / 0.36), 3))
    assert out["spearman"].p_value == pytest.approx(16 / 120, abs=0.04)


def test_bootstrap_interval_of_a_correlation_whose_sampling_distribution_is_known():
    """n = 300 pairs from a normal law with correlation 0.5: Fisher's z of the sample Pearson r is
    normal with standard error 1 / sqrt(n - 3), so the 95% interval is tanh(atanh(r) -+ 1.96 / sqrt(n - 3))
    (a 90% interval would lie about 0.015 inside it)."""
    rng = np.random.default_rng(7)
    x = rng.normal(size=300)
    y = 0.5 * x + np.sqrt(0.75) * rng.normal(size=300)
    out = correlate(x, y, methods=("pearson",), bootstrap=2000, seed=3)["pearson"]
    half = 1.959964 / np.sqrt(len(x) - 3)
    assert out.ci_low == pytest.approx(np.tanh(np.arctanh(out.value) - half), abs=0.006)
    assert out.ci_high == pytest.approx(np.tanh(np.arctanh(out.value) + half), abs=0.006)
    assert correlate(x, y, methods=("pearson",), bootstrap=200, seed=3)["pearson"].ci_low == correlate(
        x, y, methods=("pearson",), bootstrap=200, seed=3)["pearson"].ci_low  # seeded


def test_correlation_errors():
    """Correlation inputs of different lengths, too short or not finite are refused (a metric score of NaN is an
    item not scored: left out, and then too few pairs are said with the count left out)."""
    with pytest.raises(ValueError, match="8 metric scores but 7 human ratings"):
        correlate(X, Y[:7])
    with pytest.raises(ValueError, match="at least 3 pairs"):
        correlate([1, 2], [1, 2])
    with pytest.raises(ValueError, match="finite"):
        correlate([1, 2, float("inf")], [1, 2, 3])
    with pytest.raises(ValueError, match="finite"):
        correlate([1, 2, 3], [1, 2, float("nan")])  # a human rating is never "not scored"
    with pytest.raises(ValueError, match=r"at least 3 pairs, got 2 \(1 left out, not scored"):
        correlate([1, 2, float("nan")], [1, 2, 3])


def _fed_items(n_turn: int = 8, n_dialog: int = 5) -> list[dict]:
    rng = random.Random(0)
    items = []
    for i in range(n_turn + n_dialog):
        topic = TOPICS[i % len(TOPICS)]
        context = f"User: Let's talk about {topic}.\nSystem: Sure, what about {topic}?\nUser: Do you like it?"
        ratings = {"Overall": [rng.randint(1, 5) for _ in range(3)], "Relevant": [rng.randint(0, 2) for _ in range(3)]}
        item = {"context": context, "system": "Meena" if i % 2 else "Human", "annotations": ratings}
        if i < n_turn:
            item["response"] = f"System: I really enjoy {topic}, especially on weekends." if i % 2 else "System: Purple."
        else:
            item["annotations"] = {"Overall": ratings["Overall"], "Error recovery": ["N/A (nothing to recover)"] * 3}
        items.append(item)
    return items


def test_read_fed(tmp_path):
    """FED's JSON: contexts split into turns, speaker labels removed, ratings averaged, N/A missing."""
    path = tmp_path / "fed.json"
    path.write_text(json.dumps(_fed_items()))
    data = read_fed(path)
    assert len(data.level("turn")) == 8 and len(data.level("dialog")) == 5
    item = data.items[0]
    assert item.context[0] == "Let's talk about the weather." and item.response == "Purple."
    assert set(item.ratings) == {"Overall", "Relevant"}
    dialog = data.level("dialog")[0]
    assert "Error recovery" not in dialog.ratings and dialog.missing == ["Error recovery"]


@pytest.mark.parametrize(
    "change,message",
    [
        (lambda it: it["annotations"].update(Overall=[1, "good", 3]), r"item 2: field 'annotations.Overall' is not a number"),
        (lambda it: it.pop("context"), r"item 2: field 'context' is missing"),
        (lambda it: it.update(annotations={}), r"item 2: field 'annotations' is missing or empty"),
        (lambda it: it.update(response=""), r"item 2: field 'response' must be a non-empty string"),
    ],
)
def test_fed_errors_name_item_and_field(tmp_path, change, message):
    items = _fed_items()
    change(items[2])
    path = tmp_path / "fed.json"
    path.write_text(json.dumps(items))
    with pytest.raises(RatedFileError, match=message):
        read_fed(path)
    data = read_fed(path, skip_invalid=True)
    assert len(data.items) == len(items) - 1 and len(data.skipped) == 1 and "item 2" in data.skipped[0]


def test_read_generic_jsonl_and_csv(tmp_path):
    jsonl = tmp_path / "r.jsonl"
    jsonl.write_text('{"ctx": ["Hi!"], "reply": "Hello.", "score": 4}\n\n{"ctx": "Hi!\\nYo.", "reply": "Hey.", "score": "2.5"}\n')
    data = read_table(jsonl, context_field="ctx", response_field="reply", score_field="score")
    assert [i.ratings["score"] for i in data.items] == [4.0, 2.5] and data.items[1].context == ["Hi!", "Yo."]
    csv_path = tmp_path / "r.csv"
    csv_path.write_text('context,response,human\n"Hi!\nHow are you?",Fine.,3\nHello,There,oops\n')
    with pytest.raises(RatedFileError, match=r"r.csv, line 4: field 'human' is not a number: 'oops'"):
        read_table(csv_path)
    assert len(read_table(csv_path, skip_invalid=True).items) == 1
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"context": ["a"], "response": "b", "human": 1}\n{oops\n')
    with pytest.raises(RatedFileError, match=r"bad.jsonl, line 2: not valid JSON"):
        read_table(bad)
    missing = tmp_path / "missing.jsonl"
    missing.write_text('{"context": ["a"], "response": "b"}\n')
    with pytest.raises(RatedFileError, match=r"line 1: field 'human' is missing"):
        read_table(missing)


def test_fine_grained_groups_and_signs():
    assert len(CATEGORY_GROUPS) == 18 and sum(len(g) for g in CATEGORY_GROUPS.values()) == 63
    group = CATEGORY_GROUPS["likeable"]
    follow_ups = [f.text for f in group]
    lls = [[-1.0] * len(group)]
    expected = sum(1.0 if f.polarity == "negative" else -1.0 for f in group)
    assert category_scores(follow_ups, lls) == {"likeable": [pytest.approx(expected)]}
    assert category_scores(follow_ups[:-1], lls) == {}


@pytest.fixture(scope="module")
def scorer(tiny_blenderbot_path):
    return FullScorer(tiny_blenderbot_path, device="cpu", progress=False)


def test_scorer_reports_category_scores(scorer):
    result = scorer.score([["Hi!"]], ["Hello."], follow_ups="all")
    assert set(result.category_scores) == set(CATEGORY_GROUPS)
    assert set(scorer.score([["Hi!"]], ["Hello."]).category_scores) == {"understanding"}  # its one follow-up is in the five


def test_ranking_recovers_a_known_order(scorer, tmp_path):
    """Human ratings built from one follow-up's log-likelihood: it must rank first, perfectly."""
    path = tmp_path / "fed.json"
    path.write_text(json.dumps(_fed_items(10, 6)))
    data = read_fed(path)
    candidates = [c.text for c in CANDIDATES[:6]]
    results = {lvl: score_items(scorer, data.level(lvl), candidates) for lvl in LEVELS}
    planted = candidates[3]
    for lvl in LEVELS:
        for item, row in zip(data.level(lvl), results[lvl].follow_up_log_likelihoods):
            item.ratings["Overall"] = -row[3]
    ranking = rank_follow_ups(data, results)
    assert ranking[0]["follow_up"] == planted
    assert ranking[0]["turn"] == pytest.approx(1.0) and ranking[0]["dialog"] == pytest.approx(1.0)
    assert ranking[0]["combined_rank"] == 2 and len(ranking) == 6


def test_holdout_split_is_disjoint(tmp_path):
    path = tmp_path / "fed.json"
    path.write_text(json.dumps(_fed_items(10, 6)))
    data = read_fed(path)
    select, report = split_holdout(data, 0.5, seed=3)
    assert len(select.items) + len(report.items) == 16
    assert not {id(i) for i in select.items} & {id(i) for i in report.items}
    assert len(report.level("turn")) == 5 and len(report.level("dialog")) == 3


def test_correlate_command(tiny_blenderbot_path, tmp_path, capsys):
    path = tmp_path / "fed.json"
    path.write_text(json.dumps(_fed_items(10, 6)))
    out, png = tmp_path / "rows.json", tmp_path / "scatter.png"
    code = main(["correlate", str(path), "--model", str(tiny_blenderbot_path), "--device", "cpu", "--no-progress",
                 "--bootstrap", "50", "--fine-grained", "--json", str(out), "--csv", str(tmp_path / "rows.csv"),
                 "--plot", str(png)])
    assert code == 0
    rows = json.loads(out.read_text())["rows"]
    assert {(r["level"], r["aspect"], r["signal"]) for r in rows} >= {
        ("turn", "Overall", "full"), ("turn", "Relevant", "full"), ("turn", "Relevant", "category:relevant"),
        ("dialog", "Overall", "full")}
    assert all({"spearman", "spearman_p", "spearman_low", "pearson", "kendall", "n"} <= set(r) for r in rows)
    with open(tmp_path / "rows.csv", newline="", encoding="utf-8") as handle:  # the CSV holds the JSON's rows
        table = list(csv.DictReader(handle))
    assert len(table) == len(rows) and list(table[0]) == list(rows[0])
    for got, want in zip(table, rows):
        assert (got["level"], got["aspect"], got["signal"], int(got["n"])) == (
            want["level"], want["aspect"], want["signal"], want["n"])
        assert float(got["spearman"]) == pytest.approx(want["spearman"]) and float(got["kendall"]) == pytest.approx(want["kendall"])
    assert_drawn_png(png, min_width=600)  # two panels side by side
    printed = capsys.readouterr().out
    main_row = next(r for r in rows if (r["level"], r["aspect"], r["signal"]) == ("turn", "Overall", "full"))
    assert f"{main_row['spearman']:.3f} [{main_row['spearman_low']:.2f}, {main_row['spearman_high']:.2f}]" in printed


def test_correlate_command_rejects_bad_rating(tmp_path, capsys):
    items = _fed_items()
    items[4]["annotations"]["Overall"] = ["x"]
    path = tmp_path / "fed.json"
    path.write_text(json.dumps(items))
    assert main(["correlate", str(path), "--model", "unused"]) == 2
    assert "item 4: field 'annotations.Overall' is not a number" in capsys.readouterr().err


def test_rank_command_writes_a_follow_up_file(tiny_blenderbot_path, tmp_path):
    path = tmp_path / "fed.json"
    path.write_text(json.dumps(_fed_items(12, 8)))
    top, ranking, bars = tmp_path / "top.txt", tmp_path / "rank.json", tmp_path / "bars.png"
    common = ["--model", str(tiny_blenderbot_path), "--device", "cpu", "--no-progress"]
    assert main(["rank-follow-ups", str(path), *common, "--candidates", "negative-turn", "--top-k", "3",
                 "--holdout", "0.5", "-o", str(top), "--json", str(ranking), "--plot", str(bars)]) == 0
    chosen = top.read_text().splitlines()
    assert len(chosen) == 3 and all(c in {f.text for f in CANDIDATES} for c in chosen)
    summary = json.loads(ranking.read_text())
    assert len(summary["ranking"]) == 21 and set(summary["held_out"]) >= {"turn/selected", "turn/default"}
    assert_drawn_png(bars)
    dialogs = tmp_path / "d.jsonl"
    dialogs.write_text('{"context": ["Hi!"], "response": "Hello."}\n')
    assert main(["score", str(dialogs), "-o", str(tmp_path / "s.jsonl"), "--follow-ups", str(top), *common]) == 0
    scored = json.loads((tmp_path / "s.jsonl").read_text())
    assert list(scored["follow_up_log_likelihoods"]) == chosen


def test_report_command(tiny_blenderbot_path, tmp_path):
    path = tmp_path / "fed.json"
    path.write_text(json.dumps(_fed_items(12, 8)))
    out = tmp_path / "report"
    assert main(["report", str(path), "--model", str(tiny_blenderbot_path), "--device", "cpu", "--no-progress",
                 "--bootstrap", "50", "-o", str(out)]) == 0
    text = (out / "report.md").read_text()
    for part in ("paper's five, sum", "paper's five, mean", "paper's five, perplexity", "`reference` settings",
                 "held-out 50%", "| DynaEval | 0.32 | 0.55 |", "Quoted from the paper", "scatter.png"):
        assert part in text
    assert_drawn_png(out / "scatter.png", min_width=600) and assert_drawn_png(out / "follow-ups.png")
    # the report's main row holds the numbers that `correlate` computes on the same data and settings
    rows_json = tmp_path / "rows.json"
    assert main(["correlate", str(path), "--model", str(tiny_blenderbot_path), "--device", "cpu", "--no-progress",
                 "--bootstrap", "50", "--json", str(rows_json)]) == 0
    rows = {(r["level"], r["aspect"], r["signal"]): r for r in json.loads(rows_json.read_text())["rows"]}
    line = next(line for line in text.splitlines() if line.startswith("| paper's five, sum | all"))
    turn_cell, dialog_cell = line.split("|")[3:5]
    assert turn_cell.strip().startswith(f"{rows[('turn', 'Overall', 'full')]['spearman']:.3f} [")
    assert dialog_cell.strip().startswith(f"{rows[('dialog', 'Overall', 'full')]['spearman']:.3f} [")
