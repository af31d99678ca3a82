"""A judge's identity (issue 46, 2): FULL's signature must change whenever the numbers can. An adapter
judge is named by its base's weights, its adapter's weights *and* config, and its adaptation's digest;
a base whose weights changed is refused; the merged judge and the adapter on its base are one judge
(equal scores, as the code promises); every digest is checked against hashlib over the files (an
oracle outside the code under test), and by changing each input it must identify."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
from pathlib import Path

import pytest
import torch

from full_metric import FullScorer
from full_metric.research.adapt import adapt
from full_metric.research.judge_folder import Adaptation, digest
from ..helpers import sha_of_files

DIALOGS = [["Hi! How was your weekend?"], ["Do you cook?", "Not really.", "Why not?"]], ["Great.", "I burn it."]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def pingpong(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("pingpong") / "pingpong.jsonl"
    rows = [{"context": [f"ping {d}", f"pong {d}", f"ping {d + 1}"], "response": f"pong {d + 1}"} for d in range(160)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def judge(tmp_path_factory, tiny_models, tokenizer, pingpong) -> tuple[Path, Path, Adaptation]:
    """A base folder (a tiny Llama), and the judge adapted on it with its adapter alone."""
    root = tmp_path_factory.mktemp("judge")
    base = root / "base"
    tiny_models["llama"].save_pretrained(base)
    tokenizer.save_pretrained(base)
    record = adapt(str(base), [str(pingpong)], root / "judge", objective="complaints", max_pairs=16, batch_size=4,
                   held_out=0.05, learning_rate=5e-2, lora_rank=4, progress=False, save_adapter=True)
    return base, root / "judge", record


def _copy(folder: Path, to: Path) -> Path:
    shutil.copytree(folder, to)
    return to


def test_the_merged_judge_and_its_adapter_on_the_base_are_one_judge(judge):
    """The adapter keeps float16 values and the merged judge is given the same values back: identical
    computations, identical scores (no tolerance), and the signatures name the same adaptation."""
    base, folder, record = judge
    merged, alone = FullScorer(str(folder), progress=False), FullScorer(str(folder / "adapter"), progress=False)
    assert alone.score(*DIALOGS).scores == merged.score(*DIALOGS).scores
    assert merged.score(*DIALOGS).scores != pytest.approx(FullScorer(str(base), progress=False).score(*DIALOGS).scores)
    adapter = folder / "adapter"
    weights = sha_of_files(adapter / "adapter_model.safetensors", adapter / "adapter_config.json")
    # a folder is named by every file that can change a score (issue 62, 5): weights, config, tokenizer
    base_weights = sha_of_files(*base.glob("*.safetensors"), base / "config.json", *base.glob("tokenizer*"))
    want = f"{base_weights}+adapter:{weights}+adapted:{record.digest}"
    assert f"|model:adapter@{want}|" in alone.signature()
    merged_want = (f"{sha_of_files(*folder.glob('*.safetensors'), folder / 'config.json', *folder.glob('tokenizer*'))}"
                   f"+adapted:{record.digest}")
    assert f"|model:{folder.name}@{merged_want}|" in merged.signature()


def test_the_signature_changes_with_each_input_of_an_adapter_judge(judge, tmp_path):
    """Change the adapter's weights, then its config (lora_alpha: every score moves), then the base's
    weights: each time the signature changes or the judge is refused, never the same name for other
    numbers."""
    from safetensors.torch import load_file, save_file

    base, folder, _ = judge
    original = FullScorer(str(folder / "adapter"), progress=False)
    weights = _copy(folder / "adapter", tmp_path / "weights")
    tensors = load_file(str(weights / "adapter_model.safetensors"))
    first = sorted(tensors)[0]
    tensors[first] = tensors[first] * 2
    save_file(tensors, str(weights / "adapter_model.safetensors"))
    config = _copy(folder / "adapter", tmp_path / "config")
    settings = json.loads((config / "adapter_config.json").read_text())
    settings["lora_alpha"] *= 2
    (config / "adapter_config.json").write_text(json.dumps(settings))
    for changed in (weights, config):
        scorer = FullScorer(str(changed), progress=False)
        assert scorer.score(*DIALOGS).scores != original.score(*DIALOGS).scores, changed.name
        ours, theirs = (s.signature().split("|model:")[1].split("|")[0].split("@")[1] for s in (scorer, original))
        assert ours != theirs, changed.name


def test_an_adapter_on_a_base_whose_weights_changed_is_refused(judge, tiny_models, tmp_path):
    """The adapter's base is found where adapt found it; other weights saved there are refused, by
    loading them (not by editing the record)."""
    base, folder, _ = judge
    moved = _copy(base, tmp_path / "base")
    adapter = _copy(folder / "adapter", tmp_path / "adapter")
    config = json.loads((adapter / "adapter_config.json").read_text())
    assert Path(config["base_model_name_or_path"]).name == base.name
    config["base_model_name_or_path"] = str(moved)
    (adapter / "adapter_config.json").write_text(json.dumps(config))
    FullScorer(str(adapter), progress=False)  # the same weights elsewhere: loads
    model = tiny_models["llama"]
    with torch.no_grad():
        changed = {k: v.clone() for k, v in model.state_dict().items()}
        key = next(k for k in changed if k.endswith("q_proj.weight"))
        changed[key] += 0.01
    copy = type(model)(model.config)
    copy.load_state_dict(changed)
    copy.save_pretrained(moved)
    with pytest.raises(ValueError, match="only means something on the weights it was trained on"):
        FullScorer(str(adapter), progress=False)


def test_the_adaptation_digest_covers_every_setting_of_the_objective():
    """The shipped judge's adaptation.json digests to its stored value (computed here from the record
    with hashlib, not by the code under test's skip list alone), and two runs that differ only in a
    complaints setting (margin, lm_weight, the mix, pairs, pairs per dialog) digest differently; the shipped
    record, written before pairs per dialog existed, digests as it did (one per dialog left out)."""
    stored = json.loads((REPO / "full_metric" / "judges" / "smollm2-complaints" / "adaptation.json").read_text())
    record = Adaptation(**{k: v for k, v in stored.items()})
    assert digest(record) == stored["digest"]
    kept = {k: v for k, v in stored.items() if k not in (
        "seconds", "digest", "held_out_pair_accuracy_before", "held_out_pair_accuracy_after")}
    assert hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()[:16] == stored["digest"]
    for change in ({"margin": 2.0}, {"lm_weight": 0.2}, {"pairs": 2001}, {"corruption_mix": {"other": 1.0}},
                   {"objective": "complaints", "held_out_pairs": 1}, {"pairs_per_dialog": 2}):
        assert digest(dataclasses.replace(record, **change)) != stored["digest"], change
    for same in ({"seconds": 1.0}, {"held_out_pair_accuracy_after": 0.5}):
        assert digest(dataclasses.replace(record, **same)) == stored["digest"], same


def test_an_adapter_judge_adapted_again_with_save_adapter_is_refused_at_the_start(judge, pingpong, tmp_path,
                                                                                  monkeypatch):
    """Issue 46, 3: the new adapter would sit on a base plus another adapter, which no folder names: it
    could never load. Refused before the model is read, with the reason and what to do instead."""
    from full_metric.research import adapt as adapt_module

    _, folder, _ = judge
    monkeypatch.setattr(adapt_module, "FullScorer", lambda *a, **k: pytest.fail("the model was loaded"))
    with pytest.raises(ValueError, match="is a LoRA adapter.*--save-adapter"):
        adapt(str(folder / "adapter"), [str(pingpong)], tmp_path / "again", objective="complaints", max_pairs=8,
              batch_size=4, held_out=0.05, lora_rank=4, progress=False, save_adapter=True)
    with pytest.raises(ValueError, match="is a LoRA adapter.*--save-adapter"):
        adapt("smollm2-complaints", [str(pingpong)], tmp_path / "again", save_adapter=True, progress=False)
