"""A real pretrained model (SmolLM2-135M-Instruct, offline from PyPI) prefers fitting responses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from full_metric import FullScorer

PAIRS = json.loads((Path(__file__).resolve().parents[1] / "data" / "response_pairs.json").read_text())


@pytest.fixture(scope="module")
def smollm2(smollm2_gguf):
    return FullScorer(gguf_file=str(smollm2_gguf), device="cpu", progress=False)


@pytest.mark.slow
def test_fitting_responses_score_higher(smollm2):
    assert smollm2.rendering == "chat_template"  # the tokenizer has one, so it is the default
    contexts = [p["context"] for p in PAIRS]
    good = smollm2.score(contexts, [p["good"] for p in PAIRS]).scores
    bad = smollm2.score(contexts, [p["bad"] for p in PAIRS]).scores
    right = sum(g > b for g, b in zip(good, bad))
    print(f"SmolLM2-135M-Instruct ranks {right}/{len(PAIRS)} pairs right")
    assert len(PAIRS) >= 20
    assert right >= 0.8 * len(PAIRS)


@pytest.mark.slow
def test_real_model_batched_matches_oracle(smollm2):
    contexts = [p["context"] for p in PAIRS[18:]]
    responses = [p["good"] for p in PAIRS[18:]]
    batched = smollm2.score(contexts, responses, batch_size=3)
    oracle = smollm2.score(contexts, responses, engine="oracle")
    assert batched.scores == pytest.approx(oracle.scores, abs=1e-3)
