"""Every option of every subcommand is exercised by a test: the table below maps each option to
the test that passes it (checked: the option is in the parser, the test exists and its source
uses the option), the scorer options reach the scorer in every subcommand, and the rated-data
options and the remaining ones are run here. Also the installed ``full-metric`` entry point on
``examples/dialogs.jsonl``."""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import shutil
import sys
from pathlib import Path

import pytest

import full_metric.scorer as scorer_module
from full_metric.faces.cli import _parser, main
from full_metric.settings import LOAD_SETTINGS

from ..helpers import run_checked

REPO = Path(__file__).resolve().parents[2]
RATED = ("correlate", "rank-follow-ups", "report", "score-candidates")
_RATED_OPTIONS = {o: "test_cli_coverage::test_rated_data_options" for o in
                  ("data", "--format", "--context-field", "--response-field", "--score-field", "--skip-invalid", "--seed")}
#: (subcommand, option) -> "module::test" that passes it; the scorer options (one declaration,
#: LOAD_SETTINGS) are covered for every subcommand by test_scorer_options_reach_the_scorer.
COVERAGE: dict[str, dict[str, str]] = {
    "score": {
        "input": "test_cli::test_score_turn_level",
        "--output": "test_cli::test_score_turn_level",
        "--dataset": "test_corpus::test_a_dataset_by_name_with_named_columns",
        "--split": "test_corpus::test_a_dataset_by_name_with_named_columns",
        "--config": "test_cli_coverage::test_dataset_config",
        "--context-column": "test_corpus::test_a_dataset_by_name_with_named_columns",
        "--response-column": "test_corpus::test_a_dataset_by_name_with_named_columns",
        "--resume": "test_corpus::test_killed_then_resumed_equals_an_uninterrupted_run",
        "--chunk-size": "test_corpus::test_input_and_output_formats_round_trip",
    },
    "correlate": {
        **_RATED_OPTIONS,
        "--aspects": "test_cli_coverage::test_rated_data_options",
        "--fine-grained": "test_human_eval::test_correlate_command",
        "--bootstrap": "test_human_eval::test_correlate_command",
        "--json": "test_human_eval::test_correlate_command",
        "--csv": "test_human_eval::test_correlate_command",
        "--plot": "test_human_eval::test_correlate_command",
    },
    "rank-follow-ups": {
        **_RATED_OPTIONS,
        "--candidates": "test_human_eval::test_rank_command_writes_a_follow_up_file",
        "--aspect": "test_cli_coverage::test_rated_data_options",
        "--top-k": "test_human_eval::test_rank_command_writes_a_follow_up_file",
        "--holdout": "test_human_eval::test_rank_command_writes_a_follow_up_file",
        "--output": "test_human_eval::test_rank_command_writes_a_follow_up_file",
        "--json": "test_human_eval::test_rank_command_writes_a_follow_up_file",
        "--plot": "test_human_eval::test_rank_command_writes_a_follow_up_file",
    },
    "report": {
        **_RATED_OPTIONS,
        "--output": "test_human_eval::test_report_command",
        "--top-k": "test_cli_coverage::test_rated_data_options",
        "--holdout": "test_cli_coverage::test_rated_data_options",
        "--bootstrap": "test_human_eval::test_report_command",
    },
    "score-candidates": {
        **_RATED_OPTIONS,
        "--candidates": "test_cli_coverage::test_rated_data_options",
        "--name": "test_cli_coverage::test_rated_data_options",
        "--label": "test_study::test_score_candidates_and_study_commands",
        "--output": "test_study::test_score_candidates_and_study_commands",
    },
    "compare": {
        "files": "test_comparison::test_compare_command_end_to_end",
        "--baseline": "test_comparison::test_compare_command_end_to_end",
        "--method": "test_comparison::test_compare_reads_scored_files_and_refuses_what_does_not_compare",
        "--resamples": "test_comparison::test_compare_command_end_to_end",
        "--seed": "test_comparison::test_compare_command_end_to_end",
        "--unpaired": "test_comparison::test_compare_reads_scored_files_and_refuses_what_does_not_compare",
        "--json": "test_comparison::test_compare_command_end_to_end",
        "--plot": "test_comparison::test_compare_command_end_to_end",
    },
    "systems": {
        "data": "test_comparison::test_systems_command_compares_systems_by_full_and_by_people",
        "--score-field": "test_comparison::test_systems_command_compares_systems_by_full_and_by_people",
        "--presets": "test_comparison::test_systems_command_compares_systems_by_full_and_by_people",
        "--resamples": "test_comparison::test_systems_command_compares_systems_by_full_and_by_people",
        "--seed": "test_comparison::test_systems_command_compares_systems_by_full_and_by_people",
        "--output": "test_comparison::test_systems_command_compares_systems_by_full_and_by_people",
    },
    "agreement": {
        "data": "test_cli_coverage::test_agreement_command",
        "--presets": "test_cli_coverage::test_agreement_command",
        "--bootstrap": "test_cli_coverage::test_agreement_command",
        "--replies": "test_cli_coverage::test_agreement_command",
        "--generic-only": "test_cli_coverage::test_agreement_command",
        "--seed": "test_cli_coverage::test_agreement_command",
        "--output": "test_cli_coverage::test_agreement_command",
    },
    "adapt": {
        "dialogs": "test_adapt::test_the_command_line_adapts",
        "--output": "test_adapt::test_the_command_line_adapts",
        "--method": "test_adapt::test_the_command_line_adapts",
        "--max-tokens": "test_adapt::test_the_command_line_adapts",
        "--held-out": "test_adapt::test_the_command_line_adapts",
        "--max-length": "test_adapt::test_the_command_line_adapts",
        "--learning-rate": "test_adapt::test_the_command_line_adapts",
        "--lora-rank": "test_adapt::test_the_command_line_adapts",
        "--seed": "test_adapt::test_the_command_line_adapts",
        "--objective": "test_adapt::test_the_command_line_adapts_on_complaints",
        "--schedule": "test_adapt::test_the_command_line_resumes_and_saves_the_adapter",
        "--resume": "test_adapt::test_the_command_line_resumes_and_saves_the_adapter",
        "--checkpoint-every": "test_adapt::test_the_command_line_resumes_and_saves_the_adapter",
        "--save-adapter": "test_adapt::test_the_command_line_resumes_and_saves_the_adapter",
        "--max-pairs": "test_adapt::test_the_command_line_adapts_on_complaints",
        "--pairs-per-dialog": "test_adapt::test_two_pairs_per_dialog_train_on_half_the_dialogs_mixed_in_batches",
        "--margin": "test_adapt::test_the_command_line_adapts_on_complaints",
        "--lm-weight": "test_adapt::test_the_command_line_adapts_on_complaints",
        "--autocast": "test_adapt::test_the_command_line_adapts_on_complaints",
        "--mix": "test_adapt::test_the_command_line_adapts_on_complaints",
    },
    "study": {
        "tables": "test_study::test_score_candidates_and_study_commands",
        "--output": "test_study::test_score_candidates_and_study_commands",
    },
}


def _test_module(name: str):
    """A test module by its file's name, in tests/unit or tests/integration."""
    folder = "unit" if (REPO / "tests" / "unit" / f"{name}.py").is_file() else "integration"
    return importlib.import_module(f"tests.{folder}.{name}")


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _own_options(command: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    shared = {s.flag for s in LOAD_SETTINGS}
    out = {}
    for action in command._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        name = max(action.option_strings, key=len) if action.option_strings else action.dest
        if name not in shared:
            out[name] = action
    return out


def test_the_table_covers_every_option_and_names_tests_that_use_them():
    commands = _subcommands()
    assert set(COVERAGE) == set(commands)
    for name, command in commands.items():
        assert set(COVERAGE[name]) == set(_own_options(command)), name
        for option, where in COVERAGE[name].items():
            module_name, test_name = where.split("::")
            test = getattr(_test_module(module_name), test_name)
            source = inspect.getsource(test)
            action = _own_options(command)[option]
            spelled = [s for s in action.option_strings if s in source] or (
                [option] if not action.option_strings else [])
            assert spelled, f"{where} does not pass {name} {option}"
            assert name in source or (name == "score" and "score" in source), f"{where} does not run {name}"


@pytest.mark.parametrize("command", [c for c in _subcommands() if c not in ("study", "adapt")])
def test_scorer_options_reach_the_scorer(command, monkeypatch, tmp_path):
    """Every scorer option, given to every subcommand that scores, arrives at ``FullScorer``."""
    from full_metric.faces import cli

    values = {"--model": "m", "--gguf-file": "g.gguf", "--revision": "r", "--follow-ups": "paper",
              "--positive-follow-ups": "positive", "--aggregation": "mean", "--preset": "paper",
              "--rendering": "plain", "--device": "cpu", "--dtype": "bfloat16", "--batch-size": "3",
              "--max-batch-tokens": "99", "--context-budget": "77", "--max-turns": "5"}
    switches = ["--strip-speaker-prefixes", "--no-progress"]
    assert set(values) | set(switches) == {s.flag for s in LOAD_SETTINGS}
    seen = {}

    class Captured(Exception):
        pass

    def fake(model, **settings):
        seen.update(model=model, **settings)
        raise Captured

    monkeypatch.setattr(scorer_module, "FullScorer", fake)
    positional = {"score": ["in.jsonl", "-o", "o.jsonl"], "compare": ["a.jsonl"], "systems": ["d.jsonl", "-o", "x"],
                  "rank-follow-ups": ["d.json", "-o", "x"], "report": ["d.json", "-o", "x"],
                  "score-candidates": ["d.json", "-o", "x"], "correlate": ["d.json"],
                  "agreement": ["d.json", "-o", "x"]}[command]
    args = _parser().parse_args([command, *positional, *[x for kv in values.items() for x in kv], *switches])
    with pytest.raises(Captured):
        cli._make_scorer(args)
    assert seen["model"] == "m" and seen["gguf_file"] == "g.gguf" and seen["revision"] == "r"
    assert seen["follow_ups"] == "paper" and seen["positive_follow_ups"] == "positive"
    assert (seen["aggregation"], seen["preset"], seen["rendering"], seen["device"], seen["dtype"]) == (
        "mean", "paper", "plain", "cpu", "bfloat16")
    assert (seen["batch_size"], seen["max_batch_tokens"], seen["context_budget"], seen["max_turns"]) == (3, 99, 77, 5)
    assert seen["progress"] is False and seen["strip_speaker_prefixes"] is True


def test_rated_data_options(tiny_blenderbot_path, tmp_path, capsys):
    """A CSV with its own column names and one malformed row, through every command that reads
    rated data: --format, --context-field, --response-field, --score-field, --skip-invalid, --seed
    (plus --aspects, --aspect, --top-k, --holdout, --candidates and --name)."""
    rows = ["dialog,reply,Overall"] + [f'"Hi!\nHow is topic {k}?","Answer {"very " * (k % 4)}{k}.",{1 + k % 5}'
                                       for k in range(12)] + ['"Hi!",Broken row,not-a-number']
    data = tmp_path / "rated.csv"
    data.write_text("\n".join(rows) + "\n", encoding="utf-8")
    common = ["--format", "table", "--context-field", "dialog", "--response-field", "reply", "--score-field", "Overall",
              "--skip-invalid", "--seed", "3", "--model", str(tiny_blenderbot_path), "--device", "cpu", "--no-progress"]
    out = tmp_path / "corr.json"
    assert main(["correlate", str(data), *common, "--aspects", "Overall", "--bootstrap", "20", "--json", str(out)]) == 0
    rows_out = json.loads(out.read_text())["rows"]
    assert {(r["level"], r["aspect"], r["n"]) for r in rows_out} == {("turn", "Overall", 12)}
    assert "skipped 1 malformed items on request" in capsys.readouterr().err
    top = tmp_path / "top.txt"
    assert main(["rank-follow-ups", str(data), *common, "--candidates", "negative-turn", "--aspect", "Overall",
                 "--top-k", "2", "-o", str(top)]) == 0
    assert len(top.read_text().splitlines()) == 2
    report = tmp_path / "report"
    assert main(["report", str(data), *common, "--top-k", "2", "--holdout", "0.5", "--bootstrap", "20",
                 "-o", str(report)]) == 0
    assert "top 2 selected on the other 50%" in (report / "report.md").read_text()
    table = tmp_path / "table.json"
    assert main(["score-candidates", str(data), *common, "--candidates", "paper", "--name", "my-set",
                 "-o", str(table)]) == 0
    written = json.loads(table.read_text())
    assert written["data_set"] == "my-set" and len(written["follow_ups"]) == 5 and len(written["items"]) == 12
    # without --skip-invalid the bad row stops the run, naming its line (each row above spans two)
    capsys.readouterr()
    assert main(["correlate", str(data), *[c for c in common if c != "--skip-invalid"]]) == 2
    assert "line 26: field 'Overall' is not a number" in capsys.readouterr().err


def test_dataset_config(tiny_blenderbot_path, tmp_path, monkeypatch):
    """``--config`` picks a configuration of a dataset (declared in its card, as on the Hub)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "two-configs"
    for config, reply in (("short", "Yes."), ("long", "Yes, I went hiking with my sister.")):
        (folder / config).mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist([{"context": ["Hi!", "Did you go out?"], "response": reply}]),
                       folder / config / "test.parquet")
    (folder / "README.md").write_text("---\nconfigs:\n" + "".join(
        f"- config_name: {c}\n  data_files:\n  - split: test\n    path: {c}/test.parquet\n" for c in ("short", "long"))
        + "---\n")
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out.jsonl"
    assert main(["score", "--dataset", "two-configs", "--config", "long", "--split", "test", "-o", str(out),
                 "--model", str(tiny_blenderbot_path), "--device", "cpu", "--no-progress"]) == 0
    assert json.loads(out.read_text())["response"] == "Yes, I went hiking with my sister."


def test_the_installed_entry_point_scores_the_example_file(tiny_blenderbot_path, tmp_path):
    entry = Path(sys.executable).parent / "full-metric"
    if not entry.exists():
        entry = shutil.which("full-metric")
    assert entry, "the full-metric console script is not installed"
    out = tmp_path / "scored.jsonl"
    run_checked([str(entry), "score", str(REPO / "examples" / "dialogs.jsonl"), "-o", str(out), "--model",
                 str(tiny_blenderbot_path), "--device", "cpu", "--no-progress"], timeout=300, cwd=tmp_path)
    source = [json.loads(line) for line in (REPO / "examples" / "dialogs.jsonl").read_text().splitlines() if line.strip()]
    scored = [json.loads(line) for line in out.read_text().splitlines()]
    assert [{k: r[k] for k in s} for r, s in zip(scored, source)] == source and len(scored) == len(source)
    assert all(isinstance(r["full"], float) and len(r["follow_up_log_likelihoods"]) == 5 for r in scored)


def test_agreement_command(tiny_blenderbot_path, tmp_path, capsys):
    """``full-metric agreement`` on a small USR-like set (three systems answering four contexts) and
    FED-like JSON: every measure of its table, written back and read."""
    rows = []
    for k in range(4):
        for system, response, human in (("New Human Generated", f"I love hiking, {k} times a year.", 4.5),
                                        ("Seq2Seq", "i do not know", 2.0), ("Language Model", f"Yes {k}.", 3.0)):
            rows.append({"context": [f"Do you like hiking? ({k})"], "response": response, "human": human + k / 10,
                         "system": system})
    data = tmp_path / "usr-like.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "agreement"
    assert main(["agreement", str(data), "--presets", "paper", "--bootstrap", "50", "--seed", "3", "-o", str(out),
                 "--model", str(tiny_blenderbot_path), "--device", "cpu", "--no-progress"]) == 0
    assert main(["agreement", str(data), "--replies", "Yes.", "Sure.", "-o", str(tmp_path / "two"),
                 "--model", str(tiny_blenderbot_path), "--device", "cpu", "--no-progress"]) == 0
    two = json.loads((tmp_path / "two" / "results.json").read_text())
    assert {r for row in two["rows"] if "per_reply" in row for r in row["per_reply"]} == {"Yes.", "Sure."}
    results = json.loads((out / "results.json").read_text())
    measures = {r["measure"] for r in results["rows"]}
    assert measures == {"Spearman, pooled", "Spearman, within context", "Spearman, over systems",
                        "generic reply beats the human answer"}
    rate = next(r for r in results["rows"] if r["measure"].startswith("generic"))
    assert rate["n"] == 4 and 0 <= rate["ci_low"] <= rate["value"] <= rate["ci_high"] <= 1
    assert set(rate["per_reply"]) == {"Yes.", "I don't know.", "That's cool.", "Haha, ok.", "Sure."}
    report = (out / "report.md").read_text()
    assert "generic reply beats the human answer" in report
    assert "| paper | usr-like | " + " | ".join(f"{v:.2f}" for v in rate["per_reply"].values()) + " |" in report
    assert "paper" in results["signatures"]
    kept = json.loads((out / "scores.json").read_text())
    turn = next(level for level in kept["levels"] if level["level"] == "turn")
    assert len(turn["keys"]) == len(set(turn["keys"])) == len(turn["scores"]) == 12
    assert [row["system"] for row in (rows[k] for k in turn["human"])] == ["New Human Generated"] * 4
    assert len(turn["reply_scores"]) == 4 and all(len(r) == 5 for r in turn["reply_scores"])
    assert "Do you like" not in (out / "scores.json").read_text()  # keys, not the data set's text
    # the rate alone: the same row, nothing else measured
    assert main(["agreement", str(data), "--presets", "paper", "--bootstrap", "50", "--seed", "3", "--generic-only",
                 "-o", str(tmp_path / "alone"), "--model", str(tiny_blenderbot_path), "--device", "cpu",
                 "--no-progress"]) == 0
    alone = json.loads((tmp_path / "alone" / "results.json").read_text())["rows"]
    assert [r["measure"] for r in alone] == ["generic reply beats the human answer"]
    assert alone[0]["value"] == rate["value"] and alone[0]["per_reply"] == rate["per_reply"]
