"""The settings study: signed aggregation, the leave-one-set-out choice, tables and the commands."""

from __future__ import annotations

import json
import random

import pytest

from full_metric import FullScorer
from full_metric.aggregate import aggregate
from full_metric.faces.cli import main
from full_metric.follow_ups import CANDIDATES, PAPER_FIVE
from full_metric.research.loglik_tables import LogLikTable, TableItem, read_table, write_table
from full_metric.research.study import (
    SIGN, Config, Slice, choose, leave_one_out, signed_scores, slice_data, top_follow_ups,
)
from full_metric.research.study_report import build_variants

TEXTS = [c.text for c in CANDIDATES]
NEGATIVE = [c.text for c in CANDIDATES if c.polarity == "negative"]
POSITIVE = [c.text for c in CANDIDATES if c.polarity == "positive"]


def _table(data_set: str, model: str, planted: list[str], n: int, seed: int, levels=("turn",)) -> LogLikTable:
    """Random log-likelihoods, except that the ``planted`` follow-ups track the human rating
    (negative ones fall as it rises, positive ones rise): a study must find them."""
    rng = random.Random(seed)
    items = []
    for level in levels:
        for _ in range(n):
            human = rng.uniform(1, 5)
            lls = [-rng.uniform(5, 30) for _ in TEXTS]
            for f in planted:
                lls[TEXTS.index(f)] = SIGN[f] * 3 * human - 20 + rng.gauss(0, 0.3)
            items.append(TableItem(level, {"Overall" if data_set == "fed" else "human": human},
                                   rng.randint(3, 30), lls))
    return LogLikTable(data_set, model, "speaker", 50, None, TEXTS, [len(t.split()) + 2 for t in TEXTS],
                       "sig", items, "full-metric score-candidates ...")


def test_signed_scores_match_the_scorer_aggregation():
    table = _table("usr-a", "m", [], 5, 0)
    data = slice_data([table], "turn")
    chosen = [NEGATIVE[0], NEGATIVE[3], POSITIVE[1]]
    for aggregation in ("sum", "mean", "balanced"):
        index = [TEXTS.index(f) for f in chosen]
        expected = [aggregate([row.log_likelihoods[j] for j in index], [table.token_counts[j] for j in index],
                              aggregation, positive=1) for row in table.items]
        assert signed_scores(data, chosen, aggregation) == pytest.approx(expected)
    # negative follow-ups alone: the paper's score
    expected = [aggregate([row.log_likelihoods[TEXTS.index(f)] for f in PAPER_FIVE], [1] * 5, "sum")
                for row in table.items]
    assert signed_scores(data, PAPER_FIVE, "sum") == pytest.approx(expected)


def test_average_of_models_averages_scores():
    a, b = _table("usr-a", "m1", [], 6, 1), _table("usr-a", "m2", [], 6, 2)
    both = signed_scores(slice_data([a, b], "turn"), PAPER_FIVE, "sum")
    one = signed_scores(slice_data([a], "turn"), PAPER_FIVE, "sum")
    two = signed_scores(slice_data([b], "turn"), PAPER_FIVE, "sum")
    assert both == pytest.approx([(x + y) / 2 for x, y in zip(one, two)])


def test_top_follow_ups_finds_planted_ones_of_both_polarities():
    planted = [NEGATIVE[5], NEGATIVE[9], POSITIVE[2]]
    data = [slice_data([_table("usr-a", "m", planted, 60, 3)], "turn"),
            slice_data([_table("usr-b", "m", planted, 60, 4)], "turn")]
    assert set(top_follow_ups(data, 3, signed=True)) == set(planted)
    assert set(top_follow_ups(data, 2, signed=False)) == {NEGATIVE[5], NEGATIVE[9]}


def test_leave_one_out_never_uses_the_held_out_set():
    """Set ``c`` is planted differently from ``a`` and ``b``: the choice made without ``c``
    must be ``a``/``b``'s planted follow-ups, and it must do badly on ``c``."""
    good, other = NEGATIVE[:5], NEGATIVE[10:15]
    tables = [_table("usr-a", "m", good, 50, 5), _table("usr-b", "m", good, 50, 6), _table("usr-c", "m", other, 50, 7)]
    variants, _, _ = build_variants(tables)
    folds = {f.held_out: f for f in leave_one_out(variants)}
    fold_c = folds["usr-c"]
    assert set(fold_c.follow_ups) == set(good) and fold_c.config.rule == "top 5 negative, selected"
    assert fold_c.selection_score > 0.9 and fold_c.held_out_scores[Slice("usr-c", "turn")] < 0.5
    # held out a: chosen on b and c, which disagree, so the choice is not a's alone
    assert folds["usr-a"].selection_score < fold_c.selection_score
    # chosen on everything, the planted ones of the majority are in
    _, config, follow_ups = choose(variants)
    assert isinstance(config, Config) and set(good) <= set(follow_ups)


def test_variants_include_model_averages_and_reject_missing_tables():
    tables = [_table(d, m, [], 10, k) for k, (d, m) in enumerate([("fed", "m1"), ("usr-a", "m1"), ("fed", "m2"),
                                                                  ("usr-a", "m2")])]
    _, family, settings = build_variants(tables)
    assert sorted(family.values()) == ["average", "m1", "m2"]
    assert settings["m1 · speaker"] == {"model": "m1", "rendering": "speaker", "max_turns": 50, "context_budget": None}
    with pytest.raises(ValueError, match="without a table for every data set"):
        build_variants(tables[:3])


def test_table_file_round_trip_and_errors(tmp_path):
    table = _table("usr-a", "m", [], 4, 8)
    write_table(tmp_path / "t.json", table)
    assert read_table(tmp_path / "t.json") == table
    raw = json.loads((tmp_path / "t.json").read_text())
    raw["items"][2]["log_likelihoods"].pop()
    (tmp_path / "bad.json").write_text(json.dumps(raw))
    with pytest.raises(ValueError, match="item 2 has 62 log-likelihoods, expected 63"):
        read_table(tmp_path / "bad.json")
    (tmp_path / "junk.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="junk.json: not a log-likelihood table"):
        read_table(tmp_path / "junk.json")


def test_positive_follow_ups_in_the_scorer(tiny_models, tokenizer):
    scorer = FullScorer(tiny_models["llama"], tokenizer=tokenizer, device="cpu", progress=False)
    contexts, responses = [["Hi!", "Hello, how are you?"], []], ["Fine, thanks.", "Hm."]
    both = scorer.score(contexts, responses, follow_ups=PAPER_FIVE[:2], positive_follow_ups=POSITIVE[:2])
    assert both.follow_ups == (*PAPER_FIVE[:2], *POSITIVE[:2]) and both.positive_follow_ups == tuple(POSITIVE[:2])
    for row, score in zip(both.follow_up_log_likelihoods, both.scores):
        assert score == pytest.approx(row[2] + row[3] - row[0] - row[1])
    assert "|pos:custom-2-" in both.signature
    plain = scorer.score(contexts, responses, follow_ups=PAPER_FIVE[:2])
    assert plain.positive_follow_ups == () and "|pos:" not in plain.signature
    with pytest.raises(ValueError, match="perplexity.*no positive follow-ups"):
        scorer.score(contexts, responses, positive_follow_ups=POSITIVE[:1], aggregation="perplexity")
    with pytest.raises(ValueError, match="both negative and positive"):
        scorer.score(contexts, responses, follow_ups=PAPER_FIVE, positive_follow_ups=[PAPER_FIVE[0]])


def test_score_candidates_and_study_commands(tmp_path, tiny_blenderbot_path):
    """End to end on the tiny model: tables for two sets, then the study report."""
    rng = random.Random(9)
    files = []
    for name in ("set-a", "set-b"):
        path = tmp_path / f"{name}.jsonl"
        rows = [{"context": ["Hi!", "How are you?"], "response": f"Fine {'very ' * rng.randint(0, 5)}much.",
                 "human": rng.uniform(1, 5)} for _ in range(6)]
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        out = tmp_path / f"{name}.table.json"
        assert main(["score-candidates", str(path), "--model", str(tiny_blenderbot_path), "--device", "cpu",
                     "--no-progress", "--label", "tiny", "-o", str(out)]) == 0
        files.append(str(out))
    table = read_table(files[0])
    assert table.data_set == "set-a" and table.model == "tiny" and len(table.follow_ups) == 63
    assert table.command.startswith("full-metric") and len(table.items) == 6
    assert main(["study", *files, "-o", str(tmp_path / "study")]) == 0
    report = (tmp_path / "study" / "report.md").read_text()
    assert "Leave one data set out" in report and "## Every configuration" in report
    results = json.loads((tmp_path / "study" / "results.json").read_text())
    assert [f["held_out"] for f in results["protocols"][0]["folds"]] == ["set-a", "set-b"]
    for protocol in results["protocols"]:  # the report's numbers are the JSON's
        for fold in protocol["folds"]:
            for value in fold["held_out_scores"].values():
                assert f"{value:.3f}" in report


def test_presets_are_the_study_choice():
    """Each shipped study preset is the configuration the study chose on all three sets for that
    model family (reports/study/results.json, written by `full-metric study`)."""
    from pathlib import Path

    from full_metric.study_presets import STUDY_PRESETS

    results = json.loads((Path(__file__).resolve().parents[2] / "reports" / "study" / "results.json").read_text())
    finals = {p["family"]: p["final"] for p in results["protocols"]}
    assert STUDY_PRESETS, "no study preset is shipped"
    for name, preset in STUDY_PRESETS.items():
        final = finals[preset["family"]]
        chosen = final["follow_ups"]
        assert preset["follow_ups"] == tuple(f for f in chosen if SIGN.get(f, -1) < 0), name
        assert preset["positive_follow_ups"] == tuple(f for f in chosen if SIGN.get(f, -1) > 0), name
        assert preset["aggregation"] == final["aggregation"], name
        assert preset["rendering"] == final["settings"]["rendering"], name
        assert preset["max_turns"] == final["settings"]["max_turns"], name
    families = {p["family"] for p in results["protocols"]} - {"any (models and averages)"}
    assert {p["family"] for p in STUDY_PRESETS.values()} == families, "a model family of the study has no preset"


def test_presets_module_is_generated_from_the_results():
    """full_metric/study_presets.py is what reports/study/make_presets.py writes from results.json."""
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("make_presets", root / "reports" / "study" / "make_presets.py")
    make_presets = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_presets)
    results = json.loads((root / "reports" / "study" / "results.json").read_text())
    current = (root / "full_metric" / "study_presets.py").read_text()
    assert make_presets.presets_source(results, current) == current


@pytest.fixture(scope="module")
def chat_llama_folder(tmp_path_factory, tiny_models, tokenizer):
    """The tiny Llama saved with a chat template, as a local model folder (decoder-only presets)."""
    folder = tmp_path_factory.mktemp("chat-llama")
    tok = tokenizer.__class__.from_pretrained(tokenizer.name_or_path)
    tok.chat_template = "{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}</s>\n{% endfor %}"
    tiny_models["llama"].save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def test_study_presets_everywhere(chat_llama_folder):
    """A study preset sets follow-ups of both signs, aggregation and rendering in the scorer, the
    metric, the command line and the app, and its scores are the study's arithmetic."""
    from full_metric import PRESETS
    from full_metric.faces.metric import FULL
    from full_metric.study_presets import STUDY_PRESETS
    from full_metric.faces.app_data import PRESET_CHOICE, choose_settings

    contexts, responses = [["Hi!", "How was your weekend?"], ["I adopted a puppy!"]], ["Great, I went hiking.", "Tires."]
    for name, preset in STUDY_PRESETS.items():
        assert name in PRESETS
        scorer = FullScorer(str(chat_llama_folder), preset=name, device="cpu", progress=False)
        assert (scorer.follow_ups, scorer.positive_follow_ups) == (preset["follow_ups"], preset["positive_follow_ups"])
        assert scorer.rendering == preset["rendering"] and scorer.aggregation == preset["aggregation"]
        result = scorer.score(contexts, responses)
        n_neg = len(preset["follow_ups"])
        table = LogLikTable("x", "m", scorer.rendering, scorer.max_turns, None, list(result.follow_ups),
                            result.follow_up_token_counts, result.signature,
                            [TableItem("turn", {"human": 1.0}, 1, row) for row in result.follow_up_log_likelihoods])
        assert result.scores == pytest.approx(signed_scores(slice_data([table], "turn"), result.follow_ups,
                                                            preset["aggregation"]))
        assert result.follow_ups[n_neg:] == preset["positive_follow_ups"]
        metric = FULL(model=str(chat_llama_folder), preset=name, device="cpu", progress=False)
        out = metric.compute(predictions=responses, references=contexts)
        assert out["scores"] == pytest.approx(result.scores) and out["positive_follow_ups"] == list(preset["positive_follow_ups"])
        assert choose_settings(scorer, PRESET_CHOICE, "", "", PRESET_CHOICE)["positive_follow_ups"] == preset["positive_follow_ups"]


def test_study_preset_on_the_command_line(chat_llama_folder, tmp_path):
    from full_metric.study_presets import STUDY_PRESETS

    name = next(iter(STUDY_PRESETS))
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text('{"context": ["Hi!"], "response": "Hello."}\n')
    assert main(["score", str(src), "-o", str(out), "--model", str(chat_llama_folder), "--device", "cpu",
                 "--preset", name, "--no-progress"]) == 0
    line = json.loads(out.read_text())
    preset = STUDY_PRESETS[name]
    assert list(line["follow_up_log_likelihoods"]) == [*preset["follow_ups"], *preset["positive_follow_ups"]]
