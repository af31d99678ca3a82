"""The `reference` preset reproduces the authors' package full 0.0.3.1 on all 104 fixture cases."""

from __future__ import annotations

import json

import pytest

from full_metric import REFERENCE_PACKAGE_DEFAULT, FullScorer

from ..conftest import FIXTURES

CASES = json.loads((FIXTURES / "reference_full_0.0.3.1.json").read_text())
GROUPS = [(s, lvl) for s in ("package_default_follow_ups", "paper_five_follow_ups") for lvl in ("turn", "dialog")]


@pytest.fixture(scope="module")
def reference_scorer(tiny_blenderbot_path):
    return FullScorer(tiny_blenderbot_path, preset="reference", device="cpu", progress=False)


def test_fixture_holds_104_cases_with_truncation():
    assert len(CASES["cases"]) == 104
    assert tuple(CASES["package_default_follow_ups"]) == REFERENCE_PACKAGE_DEFAULT


@pytest.mark.parametrize("engine", ["auto", "oracle"])
@pytest.mark.parametrize("setting,level", GROUPS)
def test_reference_parity(reference_scorer, setting, level, engine):
    cases = [c for c in CASES["cases"] if c["setting"] == setting and c["level"] == level]
    follow_ups = None if setting == "package_default_follow_ups" else CASES["paper_five_follow_ups"]
    responses = [c["response"] for c in cases] if level == "turn" else None
    result = reference_scorer.score(
        [c["context"] for c in cases], responses, follow_ups=follow_ups, engine=engine, batch_size=3
    )
    for case, score in zip(cases, result.scores, strict=True):
        assert score == pytest.approx(case["score"], rel=1e-4), case


def test_reference_truncates_on_the_right(reference_scorer):
    long = [c for c in CASES["cases"] if c["level"] == "turn"]
    result = reference_scorer.score([c["context"] for c in long], [c["response"] for c in long])
    assert any(d > 0 for d in result.dropped_tokens)
    assert "trunc:right-128" in result.signature
    assert "agg:perplexity" in result.signature


def test_reference_needs_encoder_decoder(tiny_models, tokenizer):
    with pytest.raises(ValueError, match="encoder-decoder"):
        FullScorer(tiny_models["llama"], tokenizer=tokenizer, preset="reference", progress=False)


def test_the_reference_preset_keeps_the_packages_50_turns(tiny_blenderbot_path):
    """The package keeps ``conversation[-50:] + [response]`` (turn level) and ``conversation[-50:]``
    (dialog level) (``full/eval.py`` of full 0.0.3.1). No parity case is longer than 15 turns, so
    this pins it on 60: the first turns kept decide the score, as the reference cuts the end."""
    from full_metric import FullScorer
    from full_metric.presets import PRESETS

    scorer = FullScorer(tiny_blenderbot_path, preset="reference", progress=False)
    turns = [f"turn {k} is here" for k in range(60)]
    kept = scorer.score([turns], ["the answer"]).scores
    assert kept == scorer.score([turns[-50:]], ["the answer"]).scores
    assert kept != scorer.score([turns[-16:]], ["the answer"]).scores
    whole = scorer.score([turns]).scores
    assert whole == scorer.score([turns[-50:]]).scores != scorer.score([turns[-16:]]).scores
    assert {k: PRESETS["reference"][k] for k in ("aggregation", "rendering", "max_turns")} == \
        {"aggregation": "perplexity", "rendering": "reference", "max_turns": 50}
