"""Protects the numbers on every model family: for tiny random models of many architectures, the
default path (packed where proven, else generic) and the generic path equal the oracle within 1e-4
relative, at turn and dialog level, with dialogs longer than the 16-token attention windows."""

from __future__ import annotations

import logging
import random

import pytest

from full_metric import FullScorer
from full_metric import scorer as scorer_module
from tests.tiny_architectures import SPECS, WINDOW, build

#: The path each architecture takes, and why (see ``full_metric.paths``).
EXPECTED_PATH = {
    "llama": "packed", "mistral-window": "generic", "mixtral-window": "generic", "qwen2": "packed",
    "qwen2-window": "packed", "qwen3": "packed", "gemma": "packed", "gemma2-window": "packed",
    "gemma3-window": "packed", "phi": "packed", "phi3-window": "generic", "stablelm": "generic",
    "cohere": "generic", "granite": "generic", "starcoder2-window": "generic", "olmo2": "packed",
    "gpt_neox": "packed", "falcon": "packed", "falcon-alibi": "generic", "gptj": "packed", "codegen": "packed",
    "gpt2": "packed", "opt": "packed", "gpt_neo-window": "generic", "bloom": "generic", "mpt": "generic",
    "mamba": "generic", "bart": "packed", "mbart": "packed", "pegasus": "packed", "marian": "packed",
    "blenderbot": "packed", "blenderbot_small": "packed", "t5": "generic", "t5-v1.1": "generic",
    "umt5": "generic", "longt5": "generic",
}

WORDS = "the weather was lovely and we walked to the old harbour to watch boats come in slowly".split()


def _dialogs(n: int, seed: int) -> tuple[list[list[str]], list[str]]:
    rng = random.Random(seed)
    turn = lambda: " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 14))).capitalize() + "."  # noqa: E731
    contexts = [[turn() for _ in range(rng.randint(0, 7))] for _ in range(n)]
    return contexts, [turn() for _ in range(n)]


def _close(got: list[list[float]], want: list[list[float]], rtol: float = 1e-4) -> float:
    worst = max(abs(a - b) / max(abs(b), 1.0) for g, w in zip(got, want, strict=True) for a, b in zip(g, w, strict=True))
    assert worst <= rtol, f"largest relative difference from the oracle: {worst:.2e}"
    return worst


def test_every_architecture_has_an_expected_path():
    assert set(EXPECTED_PATH) == set(SPECS) and len(SPECS) >= 30


@pytest.mark.parametrize("name", list(SPECS))
def test_default_and_generic_paths_match_the_oracle(name, tokenizer):
    model = build(name)
    rendering = None if model.config.is_encoder_decoder else "speaker"
    scorer = FullScorer(model, tokenizer=tokenizer, device="cpu", progress=False, aggregation="mean", rendering=rendering)
    assert scorer.path == EXPECTED_PATH[name]
    assert f"|path:{scorer.path}|" in scorer.signature()
    contexts, responses = _dialogs(10, seed=11)
    longest = max(len(scorer.renderer.encode(c + [r], 10_000).context_ids) for c, r in zip(contexts, responses))
    assert longest > 4 * WINDOW  # the dialogs cross the attention windows
    for level in ("turn", "dialog"):
        if level == "dialog":
            contexts, responses = [c + [r] for c, r in zip(contexts, responses)], None
        oracle = scorer.score(contexts, responses, engine="oracle")
        assert "|path:oracle|" in oracle.signature
        batched = scorer.score(contexts, responses, batch_size=4)
        _close(batched.follow_up_log_likelihoods, oracle.follow_up_log_likelihoods)
        assert f"|path:{scorer.path}|" in batched.signature
    generic = scorer.score(contexts, responses, engine="generic", batch_size=3)
    _close(generic.follow_up_log_likelihoods, oracle.follow_up_log_likelihoods)


def test_a_packed_path_that_differs_falls_back_to_the_generic_path(tokenizer, monkeypatch, caplog):
    """Cohere scales its logits in its own forward, which the packed path skips: forced onto the
    packed path, the self-check must see the difference and switch to the generic path."""
    monkeypatch.setattr(scorer_module, "choose_path", lambda model: ("packed", "forced by the test"))
    with caplog.at_level(logging.WARNING, logger="full_metric.scorer"):
        scorer = FullScorer(build("cohere"), tokenizer=tokenizer, device="cpu", progress=False, rendering="speaker")
    assert scorer.path == "generic"
    assert "'cohere'" in caplog.text and "packed path differs from the oracle" in caplog.text
    assert scorer.self_check_difference <= 1e-4


def test_a_model_no_path_can_score_is_refused(tokenizer, monkeypatch):
    def off_by_one(model, contexts, targets, pad_id):
        return [[(ll + 1.0, n) for ll, n in row] for row in real(model, contexts, targets, pad_id)]

    real = scorer_module._BATCHED["generic"]
    monkeypatch.setitem(scorer_module._BATCHED, "generic", off_by_one)
    with pytest.raises(ValueError, match=r"model type 'bloom': no scoring path reproduces .*relative difference"):
        FullScorer(build("bloom"), tokenizer=tokenizer, device="cpu", progress=False, rendering="speaker")


def test_flash_attention_takes_the_generic_path(tokenizer):
    model = build("llama")
    model.config._attn_implementation = "flash_attention_2"  # as a user-loaded model would declare it
    from full_metric.paths import choose_path

    path, reason = choose_path(model)
    assert path == "generic" and "flash_attention_2" in reason
