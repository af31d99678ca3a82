"""The relevance report's scripts as child processes (reports/smollm2-relevance): make_report.py on made-up
records, in a copy of the reports folder (the bar's parts are said as the figures decide them, worked out by
hand; a part not measured is named as such; GRPO's part reads the distinct answers and the most frequent
one), and reproduce.sh's probe step under bash."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

REPORTS = Path(__file__).resolve().parents[2] / "reports"
ANSWERS = ("Yes.", "I don't know.", "Ok.", "repeated word", "echo", "other conversation", "first word", "same topic",
           "assistant opener", "same conversation, far")


def _answers(shares: dict[str, float]) -> dict[str, dict]:
    return {a: {"beats_human": shares.get(a, 0.02), "wins": round(100 * shares.get(a, 0.02)), "contexts": 100,
                "low": 0.0, "high": shares.get(a, 0.02) + 0.05, "mean": -1.0} for a in ANSWERS}


def _script(folder: str, name: str = "make_report"):
    """A script of reports/FOLDER, imported as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"{folder}_{name}", REPORTS / folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _copy(tmp_path: Path) -> Path:
    for folder in ("smollm2-relevance", "smollm2-complaints"):
        (tmp_path / folder).mkdir()
        for script in (REPORTS / folder).glob("*.py"):
            shutil.copy(script, tmp_path / folder / script.name)
    return tmp_path / "smollm2-relevance"


def _run(here: Path) -> str:
    done = subprocess.run([sys.executable, str(here / "make_report.py")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return (here / "report.md").read_text(encoding="utf-8")


def test_the_report_says_each_part_of_the_bar_as_the_figures_decide(tmp_path):
    here = _copy(tmp_path)
    probe = {"contexts": 100, "seed": 0, "judges": {
        "base": {"signature": "b", "answers": _answers({"Yes.": 0.3})},
        "shipped": {"signature": "s", "answers": _answers({"other conversation": 0.22, "same topic": 0.3})},
        # other 8% (met), same topic 16% > half of 30% (not met), "Ok." 6% > 5% (not met)
        "mix": {"signature": "m", "answers": _answers({"other conversation": 0.08, "same topic": 0.16, "Ok.": 0.06})}}}
    (here / "probe.json").write_text(json.dumps(probe))
    record = {"pairs": 2000, "held_out_pair_accuracy_before": 0.6, "held_out_pair_accuracy_after": 0.9,
              "held_out_loss_before": 3.0, "held_out_loss_after": 2.9, "seconds": 3600.0, "digest": "abc",
              "base_model": "m"}
    (here / "adaptation-mix-s0.json").write_text(json.dumps(record))
    (here / "wall.json").write_text(json.dumps({"adapt mix seed 0": 4200}))
    subprocess.run([sys.executable, str(here / "choose.py"), "mix"], check=True, capture_output=True)
    text = _run(here)
    assert "- other conversation <= 10%: **met** (8%)" in text
    assert "- same topic <= half of smollm2-complaints': **not met** (16%; smollm2-complaints 30%)" in text
    assert "- every other answer of issue 37's probe <= 5%: **not met** (the most: Ok. 6%)" in text
    assert "agreement measure: not measured yet" in text and "GRPO without KL" in text and "not measured yet" in text
    # issue 61's gate: mix wins 8 + 16 + 2 + 2 = 28 relevance contexts against smollm2-complaints' 22 + 30 + 2 + 2
    # = 56 (met), no answer of issue 37's probe above smollm2-complaints' upper bound ("Ok." 6% <= 2% + 5%: met);
    # agreement and GRPO not measured: not decided yet, whatever issue 45's bar (the goal) says
    assert "- (a) fewer relevance wins than smollm2-complaints: **met** (28 against 56)" in text
    assert "- (b) no answer of issue 37's probe above smollm2-complaints' upper bound: **met**" in text
    assert "- ships as the package's relevance judge: not decided yet (parts of the gate not measured yet)" in text
    assert "| mix-s0 | 2,000 | 1 | 0.600 -> **0.900** | 3.0000 -> 2.9000 | 60 min | 70 min | `abc` |" in text
    # GRPO without KL: 20 answers, 19 of them distinct (95%), the most frequent twice (10% > 5%): not met
    answers = [f"Answer number {i}." for i in range(18)] + ["Hello there! How can I help?"] * 2
    run = {"settings": {"judge": "j", "learning_rate": 5e-5, "beta": 0.0}, "history": [],
           **{when: {"answers": answers, "full": 1.0, "full_ci_low": 0.5, "full_ci_high": 1.5, "mean_words": 4.0,
                     "generic_share": 0.0, "short_share": 0.0, "echo_share": 0.0, "repetitive_share": 0.0}
              for when in ("before", "after")}}
    (here / "grpo-new.json").write_text(json.dumps(run))
    text = _run(here)
    assert ("GRPO without KL keeps >= 85% distinct answers, none above 5%: **not met** (distinct 95%; most frequent "
            "\"Hello there! How can I help?\" 10%)") in text
    assert ("- (d) GRPO without KL keeps >= 85% distinct answers, none above 5%, at most 5 assistant openers: **not met** "
            "(distinct 95%; most frequent \"Hello there! How can I help?\" 10%; openers 2 of 20)") in text
    assert "**no**, the gate is not met ((d) GRPO without KL keeps" in text


def test_the_levers_table_has_the_judges_made_before_as_todays_adapt_measures_them(tmp_path):
    """held-out.json's rows (held_out.py) join the levers' table; the sentence under it quotes the shipped
    seed's own record (chosen.json's seed) as the other rendering's figures; without the file it says so."""
    here = _copy(tmp_path)
    record = {"pairs": 2000, "held_out_pair_accuracy_before": 0.6, "held_out_pair_accuracy_after": 0.9,
              "held_out_loss_before": 3.0, "held_out_loss_after": 2.9, "seconds": 3600.0, "digest": "abc"}
    (here / "adaptation-mix-s0.json").write_text(json.dumps(record))
    assert "The judges made before issue 45 on this yardstick: not measured yet." in _run(here)
    complaints = tmp_path / "smollm2-complaints"
    (complaints / "chosen.json").write_text(json.dumps({"seed": 1}))
    (complaints / "adaptation-s1.json").write_text(json.dumps({**record, "held_out_pair_accuracy_before": 0.635,
                                                               "held_out_loss_before": 3.61893}))
    (here / "held-out.json").write_text(json.dumps({"judges": {
        "smollm2-gguf": {"loss": 3.82176, "pair_accuracy": 0.6473, "signature": "full:0.1.0|model:m@sha256:1|agg:sum"},
        "smollm2-complaints": {"loss": 3.15091, "pair_accuracy": 0.85062,
                               "signature": "full:0.1.0|model:c@sha256:1+adapter:sha256:2+adapted:6b09|agg:sum"}}}))
    text = _run(here)
    assert "| smollm2-gguf (made before) | - | - | **0.647** | 3.8218 | - | - | - |" in text
    assert "| smollm2-complaints (made before) | - | - | **0.851** | 3.1509 | - | - | `6b09` |" in text
    assert "own record (0.635 ->\n0.900, LM loss 3.6189 -> 2.9000)" in text


def test_the_docs_relevance_figures_are_the_probes():
    """docs/training.md's figures on off-topic answers are reports/smollm2-relevance/probe.json's."""
    import re

    probe = json.loads((REPORTS / "smollm2-relevance" / "probe.json").read_text(encoding="utf-8"))["judges"]
    docs = " ".join((REPORTS.parent / "docs" / "training.md").read_text(encoding="utf-8").split())
    part = docs.split("**Off-topic answers (issue 45, in progress).**")[1][:1200]
    opener, opener_base, topic, topic_base, *levers = (int(x) for x in re.findall(r"(\d+)%", part)[:10])
    mix, pairs2 = levers[:3], levers[3:]
    share = {(j, a): round(100 * probe[j]["answers"][a]["beats_human"]) for j in ("base", "shipped")
             for a in ("assistant opener", "same topic")}
    assert (opener, opener_base, topic, topic_base) == (share["shipped", "assistant opener"],
                                                        share["base", "assistant opener"],
                                                        share["shipped", "same topic"], share["base", "same topic"])
    for name, figures in (("mix", mix), ("pairs2", pairs2)):
        assert figures == [round(100 * probe[name]["answers"][a]["beats_human"])
                           for a in ("assistant opener", "same topic", "other conversation")], name


def test_the_docs_held_out_figures_of_the_judges_made_before_are_held_out_jsons():
    """docs/training.md's figures of smollm2-complaints' held-out yardstick: its record's (the revision that
    trained it) and today's adapt's (reports/smollm2-relevance/held-out.json)."""
    import re

    held = json.loads((REPORTS / "smollm2-relevance" / "held-out.json").read_text(encoding="utf-8"))["judges"]
    records = [json.loads((REPORTS / "smollm2-complaints" / f"adaptation-s{s}.json").read_text()) for s in (0, 1)]
    docs = " ".join((REPORTS.parent / "docs" / "training.md").read_text(encoding="utf-8").split())
    part = docs.split("package (two seeds: held-out pair accuracy ")[1][:400]
    figures = re.findall(r"\d\.\d+", part)[:7]
    assert figures == [f"{records[0]['held_out_pair_accuracy_before']:.3f}", f"{records[0]['held_out_pair_accuracy_after']:.3f}",
                       f"{records[1]['held_out_pair_accuracy_after']:.3f}",
                       f"{held['smollm2-gguf']['pair_accuracy']:.3f}", f"{held['smollm2-complaints']['pair_accuracy']:.3f}",
                       f"{held['smollm2-gguf']['loss']:.3f}", f"{held['smollm2-complaints']['loss']:.3f}"]


def test_the_agreement_part_names_each_measure_where_the_new_judge_is_worse_beyond_its_interval(tmp_path, monkeypatch):
    """The paired comparison against smollm2-complaints decides the agreement part: a measure is worse
    when its interval lies wholly on the worse side (below 0; above 0 for the generic-reply rate, where
    lower is better); an interval across 0 is not; no folder yet is "not measured yet"."""
    complaints, relevance = _script("smollm2-complaints"), _script("smollm2-relevance")
    rows = [("fed_data", "turn", "Spearman, pooled", -0.10, -0.02),  # worse
            ("fed_data", "dialog", "Spearman, pooled", -0.10, 0.05),  # across 0: not worse
            ("usr-topicalchat", "turn", "generic reply beats the human answer", 0.01, 0.20),  # worse (lower is better)
            ("usr-personachat", "turn", "generic reply beats the human answer", -0.20, -0.01)]  # better
    paired = [{"data_set": d, "level": lv, "measure": m, "base": 0.5, "judge": 0.5, "change": (lo + hi) / 2,
               "ci_low": lo, "ci_high": hi} for d, lv, m, lo, hi in rows]
    monkeypatch.setattr(complaints, "compare_judges", lambda *args, **kwargs: paired)
    monkeypatch.setattr(complaints, "markdown", lambda rows: f"{len(rows)} rows")
    folders = {}
    for name in ("old", "new"):
        folders[name] = tmp_path / name
        folders[name].mkdir()
        (folders[name] / "results.json").write_text(json.dumps({
            "rows": [{"data_set": "fed_data"}], "command": f"full-metric agreement --model {name}",
            "signatures": {"paper": f"sig-{name}"}}))
    (tmp_path / "data").mkdir()
    assert complaints.agreement_section(str(tmp_path / "data"), (folders["old"], "smollm2-complaints"),
                                        (folders["new"], "the new judge")) == ("", None, [])  # no scores yet
    (folders["old"] / "scores.json").write_text("{}")
    (folders["new"] / "scores.json").write_text("{}")
    text, worse, commands = complaints.agreement_section(str(tmp_path / "data"), (folders["old"], "smollm2-complaints"),
                                                         (folders["new"], "the new judge"))
    assert worse == ["fed_data turn Spearman, pooled", "usr-topicalchat turn generic reply beats the human answer"]
    assert "| data set | level | measure | smollm2-complaints | the new judge | difference [95%] |" in text
    assert commands[1] == "- the new judge: `full-metric agreement --model new` (signature `sig-new`)"
    assert relevance.agreement_part(worse) == (
        "- worse than smollm2-complaints beyond its interval on no agreement measure: **not met** (worse on "
        "fed_data turn Spearman, pooled; usr-topicalchat turn generic reply beats the human answer)")
    assert relevance.agreement_part([]).endswith(": **met**")
    assert relevance.agreement_part(None).endswith(": not measured yet")


def test_the_pilot_section_counts_the_bar_parts_and_names_the_answers_it_makes_worse():
    """Lever 3's pilot as make_report says it, on made-up shares worked out by hand: plain FULL meets the
    "other six answers" part (all 2%) and no other; contrasted, another conversation falls to 8% (met),
    same topic to 10% (met: at most half of plain's 30%), but "I don't know." rises to 40%, above plain's
    upper bound (2% + 5%): two parts met against one, and still not built."""
    report = _script("smollm2-relevance")
    pilot = {"contexts": 40, "seed": 0, "judges": {
        "plain": {"signature": "s", "answers": _answers({"other conversation": 0.3, "same topic": 0.3})},
        "contrast": {"signature": "s", "answers": _answers({"other conversation": 0.08, "same topic": 0.1,
                                                            "I don't know.": 0.4})}}}
    text = report.pilot_section(pilot)
    assert "The bar's probe parts met: plain 1 of 3, contrast 2;" in text
    assert "more often contrasted than plain FULL's upper bound: “I don't know.”." in text and "Not built" in text
    pilot["judges"]["contrast"]["answers"]["I don't know."] = _answers({})["I don't know."]
    assert "upper bound: none. The setting is worth building." in report.pilot_section(pilot)


def test_the_judge_ships_only_when_the_whole_gate_holds():
    report = _script("smollm2-relevance")
    met = ["- (a) x: **met** (3 against 9)", "- (b) y: **met**"]
    assert report.ship_line({"chosen": "mix"}, met).endswith("**yes**")
    assert "not decided yet (parts of the gate" in report.ship_line({"chosen": "mix"}, [*met, "- (c) z: not measured yet"])
    refused = report.ship_line({"chosen": "mix"}, [*met, "- (c) z: **not met** (9%)", "- (d) w: not measured yet"])
    assert "**no**, the gate is not met ((c) z)" in refused  # one failed part decides it, whatever is still missing
    assert "not decided yet (no lever chosen)" in report.ship_line(None, met)


def test_the_docs_kl_figures_are_the_runs():
    """docs/training.md's figures on the documented KL term against smollm2-complaints are those of
    grpo-shipped-kl.json (this issue's run) and grpo-shipped-lr5e-5.json (issue 37's run without it):
    the answers that offer help before and after, and the distinct shares."""
    import re

    report = _script("smollm2-relevance")
    kl = json.loads((REPORTS / "smollm2-relevance" / "grpo-shipped-kl.json").read_text(encoding="utf-8"))
    no_kl = json.loads((REPORTS / "smollm2-complaints" / "grpo-shipped-lr5e-5.json").read_text(encoding="utf-8"))
    docs = " ".join((REPORTS.parent / "docs" / "training.md").read_text(encoding="utf-8").split())
    part = docs.split("**The KL term as documented, against `smollm2-complaints` (issue 45).**")[1][:900]
    counts = [int(x) for x in re.findall(r"(\d+) of (?:the )?64", part)]
    assert counts == [report.offers_help(kl["after"]["answers"]), report.offers_help(no_kl["after"]["answers"]),
                      report.offers_help(kl["before"]["answers"])]
    distinct = report.complaints_report.distinct_share
    assert [int(x) for x in re.findall(r"(\d+)%", part)] == [
        round(100 * distinct(run[when]["answers"])) for run, when in ((kl, "before"), (kl, "after"), (no_kl, "after"))]


def test_an_answer_offers_help_when_it_asks_how_it_can_help_or_assist():
    report = _script("smollm2-relevance")
    assert report.offers_help(["Hello! How can I help you today?", "hey there! how can i assist you?",
                               "How can I helpfully put it...", "I can help you with that.", "How can it help?",
                               "Yes."]) == 2


def _probe_words(tmp_path: Path, *names: str, folders: tuple[str, ...] = ()) -> list[str]:
    """The words reproduce.sh's probe() hands probe.py (through a stand-in ``timed``), run under bash with
    OUT=tmp_path and the judge folders named (under tmp_path/j) there; none when it does not run the probe. A
    judge rebuilt (a stand-in ``rebuilt`` that makes its folder) is said as "rebuilt NAME SEED MODEL"."""
    script = REPORTS / "smollm2-relevance" / "reproduce.sh"
    for folder in folders:
        (tmp_path / "j" / folder).mkdir(parents=True, exist_ok=True)
    shell = (f'OUT="{tmp_path}"; JUDGES="{tmp_path}/j"; PATH="{Path(sys.executable).parent}:$PATH"; '
             'declare -A BASE=([mix]=m.gguf [pairs2]=m.gguf) LEVER=([mix]="--a 1" [pairs2]="--b 2"); '
             'timed() { shift; printf "%s\\n" "$@"; }; '
             'rebuilt() { echo "rebuilt $1 $2 $3"; mkdir -p "$JUDGES/smollm2-relevance-$1-s$2"; }; '
             f'eval "$(sed -n "/^probed() {{/,/^}}/p; /^probe() {{/,/^}}/p" "{script}")"; probe {" ".join(names)}')
    words = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, check=True).stdout.splitlines()
    return [w.replace(str(tmp_path), "T") for w in words]


def test_reproduce_sh_probes_each_seed_under_the_name_choose_py_reads(tmp_path):
    """reproduce.sh's probe() names a lever's judge as choose.probe_name does (the seed that would ship is
    looked up by that name), and points it at that seed's judge folder."""
    choose = _script("smollm2-relevance", "choose")
    words = _probe_words(tmp_path, "mix", "pairs2", "mix:1", folders=(
        "smollm2-relevance-mix-s0", "smollm2-relevance-pairs2-s0", "smollm2-relevance-mix-s1"))
    judges = [words[k + 1] for k, w in enumerate(words) if w == "--judge"]
    assert judges == ["base=smollm2-gguf", "shipped=smollm2-complaints",
                      f"{choose.probe_name('mix', 0)}=T/j/smollm2-relevance-mix-s0",
                      f"{choose.probe_name('pairs2', 0)}=T/j/smollm2-relevance-pairs2-s0",
                      f"{choose.probe_name('mix', 1)}=T/j/smollm2-relevance-mix-s1"]
    assert not any(w.startswith("rebuilt") for w in words) and "--kept" not in words


def test_reproduce_sh_does_not_probe_again_what_its_record_holds(tmp_path):
    """A probe whose record has every judge asked for is not run again (its wall time is not added to); a
    judge missing from the record runs it."""
    (tmp_path / "probe.json").write_text(json.dumps({"judges": {"base": {}, "shipped": {}, "mix": {}}}))
    assert _probe_words(tmp_path, "mix") == []
    assert "pairs2=T/j/smollm2-relevance-pairs2-s0" in _probe_words(tmp_path, "mix", "pairs2",
                                                                    folders=("smollm2-relevance-pairs2-s0",))
    assert "mix seed 1=T/j/smollm2-relevance-mix-s1" in _probe_words(tmp_path, "mix", "mix:1",
                                                                    folders=("smollm2-relevance-mix-s1",))
    (tmp_path / "probe.json").write_text(json.dumps({"judges": {"base": {}, "mix": {}}}))  # the shipped judge missing
    assert "shipped=smollm2-complaints" in _probe_words(tmp_path, "mix")
    from full_metric.cache import checkpoint_for

    partial = checkpoint_for(tmp_path / "probe.json")  # in the cache folder, outside the checkout
    partial.parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "probe.json").unlink()  # a probe killed before its last judge: its partial record is the record
    partial.write_text(json.dumps({"judges": {"base": {}, "shipped": {}, "mix": {}}}))
    assert _probe_words(tmp_path, "mix") == []
    (tmp_path / "probe.json").write_text(json.dumps({"judges": {"base": {}, "shipped": {}, "mix": {}}}))
    partial.write_text(json.dumps({"judges": {"pairs2": {}}}))  # the two hold them together
    assert _probe_words(tmp_path, "mix", "pairs2") == []


def test_reproduce_sh_keeps_or_rebuilds_a_judge_whose_folder_is_gone(tmp_path):
    """On a new machine a lever's judge folder is gone: one the probe's record holds is kept from it by its
    adaptation record (probe.py --kept), not rebuilt; one it does not hold is rebuilt first, from its lever's base
    and options, then probed from its folder."""
    (tmp_path / "probe.json").write_text(json.dumps({"judges": {"base": {}, "shipped": {}, "mix": {}}}))
    words = _probe_words(tmp_path, "mix", "pairs2")
    assert words[words.index("--kept") + 1] == "mix=T/adaptation-mix-s0.json" and words.count("--kept") == 1
    assert words[0] == "rebuilt pairs2 0 m.gguf" and "pairs2=T/j/smollm2-relevance-pairs2-s0" in words
    assert [w for w in words if w.startswith("rebuilt")] == ["rebuilt pairs2 0 m.gguf"]


def test_the_levers_table_says_which_wall_times_count_one_part_and_that_base_losses_differ_by_machine():
    """A run stopped and resumed: its record's steps' time (7,200 s) above wall.json's (3,000 s, the last part):
    named; two runs whose base loss before training differs (another machine): both figures said. A run timed
    whole and one base loss: neither said."""
    report = _script("smollm2-relevance")
    record = {"pairs": 2000, "held_out_pair_accuracy_before": 0.6, "held_out_pair_accuracy_after": 0.9,
              "held_out_loss_before": 3.8218, "held_out_loss_after": 3.1, "seconds": 3600.0, "digest": "abc"}
    records = {"mix-s0": record, "pairs2-s0": {**record, "seconds": 7200.0, "held_out_loss_before": 3.81846}}
    text = report.levers_section(records, {"adapt mix seed 0": 3700, "adapt pairs2 seed 0": 3000})
    assert "counts only the part that finished (pairs2-s0)." in text
    assert "reads 3.8185 and 3.8218 in runs made on different machines" in text
    text = report.levers_section({"mix-s0": record}, {"adapt mix seed 0": 3700})
    assert "counts only the part that finished." in text and "different machines" not in text


def test_the_mutual_information_pilot_is_built_only_when_it_moves_a_relevance_answer():
    """Issue 61's pilot as make_report says it, on made-up shares whose intervals are worked out by hand: the
    opener at 68% [52%, 80%] plain; with the mutual information 10% [4%, 23%]: below plain's low, moved; no issue-37
    answer above plain's high: worth building. At 60% it moves nothing: not built, its figures said."""
    report = _script("smollm2-relevance")

    def answers(**shares):
        out = _answers({})
        for name, (share, low, high) in shares.items():
            out[name.replace("_", " ")] = {**out[name.replace("_", " ")], "beats_human": share, "low": low, "high": high}
        return out

    pilot = {"contexts": 40, "seed": 0, "weight": 0.5, "weight_chosen_on": "201 held-out pairs",
             "pair_accuracy": {"0.0": 0.866, "0.5": 0.88, "1.0": 0.85}, "judges": {
                 "plain": {"signature": "s", "answers": answers(assistant_opener=(0.68, 0.52, 0.80))},
                 "plus mutual information": {"signature": "s", "answers": answers(assistant_opener=(0.10, 0.04, 0.23))},
                 "mutual information alone": {"signature": "s", "answers": answers(echo=(0.88, 0.74, 0.95))}}}
    text = report.pilot_mi_section(pilot)
    assert "**0.5** (pair accuracy 0.880; plain FULL 0.866;" in text and "beyond both intervals: “assistant opener”" in text
    assert text.endswith("The setting is worth building.")
    pilot["judges"]["plus mutual information"]["answers"] = answers(assistant_opener=(0.60, 0.44, 0.74))
    text = report.pilot_mi_section(pilot)
    assert "beyond both intervals: none" in text and "Not built" in text
    assert "every larger weight ranks fewer held-out pairs right (at most 0.850)" in text and "in 88% of the contexts" in text
