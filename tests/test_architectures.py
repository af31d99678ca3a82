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
    "llama": "packed", "mistral": "packed", "mixtral": "packed", "mistral-window": "cached", "mixtral-window": "cached", "qwen2": "packed",
    "qwen2-window": "packed", "qwen3": "packed", "gemma": "packed", "gemma2-window": "packed",
    "gemma3-window": "packed", "phi": "packed", "phi3-window": "cached", "stablelm": "cached",
    "cohere": "cached", "granite": "cached", "starcoder2-window": "cached", "olmo2": "packed",
    "gpt_neox": "packed", "falcon": "packed", "falcon-alibi": "cached", "gptj": "packed", "codegen": "packed",
    "gpt2": "packed", "opt": "packed", "gpt_neo-window": "cached", "bloom": "cached", "mpt": "cached",
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


@pytest.mark.parametrize("name", [n for n, path in EXPECTED_PATH.items() if path == "packed" and "t5" not in n])
def test_the_cached_path_matches_the_oracle_on_packed_families_too(name, tokenizer):
    """The cached path is the packed families' fallback: it must hold for them as well."""
    model = build(name)
    rendering = None if model.config.is_encoder_decoder else "speaker"
    scorer = FullScorer(model, tokenizer=tokenizer, device="cpu", progress=False, rendering=rendering)
    contexts, responses = _dialogs(6, seed=12)
    targets = [scorer.renderer.target_ids(f) for f in scorer.follow_ups]
    encoded = [scorer.renderer.encode(c + [r], scorer._context_limit(targets)).context_ids for c, r in zip(contexts, responses)]
    if model.config.is_encoder_decoder:
        with pytest.raises(ValueError, match="takes no key/value cache"):
            scorer_module._BATCHED["cached"](model, encoded, targets, scorer.pad_id)
        return
    cached = scorer_module._BATCHED["cached"](model, encoded, targets, scorer.pad_id)
    oracle = [scorer_module.oracle_log_likelihoods(model, c, targets) for c in encoded]
    _close([[ll for ll, _ in row] for row in cached], [[ll for ll, _ in row] for row in oracle])


def test_a_fast_path_that_differs_falls_back_along_the_candidates(tokenizer, monkeypatch, caplog):
    """Cohere scales its logits in its own forward, which the packed path skips: forced onto the
    packed path, the self-check must see the difference and switch to the cached path. Mamba keeps
    a recurrent state the cached path cannot copy: forced onto it, it must end on the generic path."""
    paths = ("packed", "cached", "generic")
    monkeypatch.setattr(scorer_module, "choose_paths", lambda model: (paths, "forced by the test"))
    with caplog.at_level(logging.WARNING, logger="full_metric.scorer"):
        cohere = FullScorer(build("cohere"), tokenizer=tokenizer, device="cpu", progress=False, rendering="speaker")
        mamba = FullScorer(build("mamba"), tokenizer=tokenizer, device="cpu", progress=False, rendering="speaker")
    assert cohere.path == "cached" and mamba.path == "generic"
    assert "'cohere': the packed path differs from the oracle" in caplog.text
    assert "'mamba': the cached path fails" in caplog.text
    assert cohere.self_check_difference <= 1e-4 and mamba.self_check_difference <= 1e-4


def test_a_model_no_path_can_score_is_refused(tokenizer, monkeypatch):
    def off_by_one(model, contexts, targets, pad_id):
        return [[(ll + 1.0, n) for ll, n in row] for row in real(model, contexts, targets, pad_id)]

    real = scorer_module._BATCHED["generic"]
    monkeypatch.setitem(scorer_module._BATCHED, "generic", off_by_one)
    with pytest.raises(ValueError, match=r"model type 'mamba': no scoring path reproduces .*relative difference"):
        FullScorer(build("mamba"), tokenizer=tokenizer, device="cpu", progress=False, rendering="speaker")


def test_flash_attention_is_not_fed_a_packed_mask(tokenizer):
    from full_metric.paths import choose_paths

    model = build("llama")
    assert choose_paths(model)[0] == ("packed", "cached", "generic")
    model.config._attn_implementation = "flash_attention_2"  # as a user-loaded model would declare it
    paths, reason = choose_paths(model)
    assert paths == ("cached", "generic") and "flash_attention_2" in reason
