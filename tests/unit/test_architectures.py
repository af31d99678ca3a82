"""Protects the numbers on every model family: for tiny random models of many architectures, the
default path (packed where proven, else generic) and the generic path equal the oracle within 1e-4
relative, at turn and dialog level, with dialogs longer than the 16-token attention windows."""

from __future__ import annotations

import dataclasses
import logging
import random

import pytest

from full_metric import FullScorer
from full_metric import scorer as scorer_module
from full_metric.engines import ENGINES, candidates
from tests.tiny_architectures import SPECS, WINDOW, build

#: The path each architecture takes, and why (see ``full_metric.engines``).
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
    assert scorer.engine == EXPECTED_PATH[name]
    assert f"|engine:{scorer.engine}|" in scorer.signature()
    contexts, responses = _dialogs(10, seed=11)
    longest = max(len(scorer.renderer.encode(c + [r], 10_000).context_ids) for c, r in zip(contexts, responses))
    assert longest > 4 * WINDOW  # the dialogs cross the attention windows
    for level in ("turn", "dialog"):
        if level == "dialog":
            contexts, responses = [c + [r] for c, r in zip(contexts, responses)], None
        oracle = scorer.score(contexts, responses, engine="oracle")
        assert "|engine:oracle|" in oracle.signature
        batched = scorer.score(contexts, responses, batch_size=4)
        _close(batched.follow_up_log_likelihoods, oracle.follow_up_log_likelihoods)
        assert f"|engine:{scorer.engine}|" in batched.signature
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
    encoded = [scorer.renderer.encode(c + [r], scorer.context_limit(targets)).context_ids for c, r in zip(contexts, responses)]
    if model.config.is_encoder_decoder:
        with pytest.raises(ValueError, match="takes no key/value cache"):
            ENGINES["cached"].score(model, encoded, targets, scorer.pad_id)
        return
    cached = ENGINES["cached"].score(model, encoded, targets, scorer.pad_id)
    oracle = ENGINES["oracle"].score(model, encoded, targets, scorer.pad_id)
    _close([[ll for ll, _ in row] for row in cached], [[ll for ll, _ in row] for row in oracle])


def test_a_fast_path_that_differs_falls_back_along_the_candidates(tokenizer, monkeypatch, caplog):
    """Cohere scales its logits in its own forward, which the packed path skips: forced onto the
    packed path, the self-check must see the difference and switch to the cached path. Mamba keeps
    a recurrent state the cached path cannot copy: forced onto it, it must end on the generic path."""
    paths = ("packed", "cached", "generic")
    monkeypatch.setattr(scorer_module, "candidates", lambda model: (paths, "forced by the test"))
    with caplog.at_level(logging.WARNING, logger="full_metric.scorer"):
        cohere = FullScorer(build("cohere"), tokenizer=tokenizer, device="cpu", progress=False, rendering="speaker")
        mamba = FullScorer(build("mamba"), tokenizer=tokenizer, device="cpu", progress=False, rendering="speaker")
    assert cohere.engine == "cached" and mamba.engine == "generic"
    assert "'cohere': the packed engine differs from the oracle" in caplog.text
    assert "'mamba': the cached engine fails" in caplog.text
    assert cohere.self_check_difference <= 1e-4 and mamba.self_check_difference <= 1e-4


def test_a_model_no_path_can_score_is_refused(tokenizer, monkeypatch):
    def off_by_one(model, contexts, targets, pad_id):
        return [[(ll + 1.0, n) for ll, n in row] for row in real(model, contexts, targets, pad_id)]

    real = ENGINES["generic"].score
    monkeypatch.setitem(ENGINES, "generic", dataclasses.replace(ENGINES["generic"], score=off_by_one))
    with pytest.raises(ValueError, match=r"model type 'mamba'\): no engine reproduces .*relative difference"):
        FullScorer(build("mamba"), tokenizer=tokenizer, device="cpu", progress=False, rendering="speaker")


def test_flash_attention_is_not_fed_a_packed_mask(tokenizer):
    from full_metric.engines import candidates

    model = build("llama")
    assert candidates(model)[0] == ("packed", "cached", "generic")
    model.config._attn_implementation = "flash_attention_2"  # as a user-loaded model would declare it
    paths, reason = candidates(model)
    assert paths == ("cached", "generic") and "flash_attention_2" in reason


@pytest.mark.parametrize("name", list(SPECS))
def test_the_first_choice_engine_matches_the_oracle_directly(name, tokenizer):
    """The engine the registry picks first (before any self-check, which could hide an error by
    falling back) is pinned per family and equals the oracle on dialogs longer than the windows:
    marking a family as proven for an engine that is wrong for it fails here."""
    model = build(name)
    first = candidates(model)[0][0]
    assert first == EXPECTED_PATH[name]
    rendering = None if model.config.is_encoder_decoder else "speaker"
    scorer = FullScorer(model, tokenizer=tokenizer, device="cpu", progress=False, rendering=rendering)
    contexts, responses = _dialogs(6, seed=13)
    targets = [scorer.renderer.target_ids(f) for f in scorer.follow_ups]
    limit = scorer.context_limit(targets)
    encoded = [scorer.renderer.encode(c + [r], limit).context_ids for c, r in zip(contexts, responses)]
    assert max(map(len, encoded)) > 4 * WINDOW
    got = ENGINES[first].score(model, encoded, targets, scorer.pad_id)
    want = ENGINES["oracle"].score(model, encoded, targets, scorer.pad_id)
    _close([[ll for ll, _ in row] for row in got], [[ll for ll, _ in row] for row in want])


def test_the_self_check_limits_are_pinned():
    import torch

    assert scorer_module.SELF_CHECK_TOLERANCE == {torch.float32: 1e-4, torch.float64: 1e-4}
    assert scorer_module.HALF_PRECISION_TOLERANCE == 5e-2


def _planted(engine: str, relative: float, only_longer_than: int = 0):
    """The engine with its log-likelihoods off by ``relative`` (on contexts longer than ``only_longer_than``)."""
    real = ENGINES[engine].score

    def off(model, contexts, targets, pad_id):
        rows = real(model, contexts, targets, pad_id)
        return [[(ll * (1 + relative) if len(c) > only_longer_than else ll, n) for ll, n in row]
                for c, row in zip(contexts, rows)]

    return dataclasses.replace(ENGINES[engine], score=off)


def test_an_error_just_above_the_limit_makes_the_scorer_fall_back_or_refuse(tokenizer, monkeypatch):
    monkeypatch.setitem(ENGINES, "packed", _planted("packed", 2e-4))
    llama = FullScorer(build("llama"), tokenizer=tokenizer, device="cpu", progress=False, rendering="speaker")
    assert llama.engine == "cached" and llama.self_check_difference <= 1e-4
    monkeypatch.setitem(ENGINES, "generic", _planted("generic", 2e-4))
    with pytest.raises(ValueError, match=r"model type 'mamba'\): no engine reproduces"):
        FullScorer(build("mamba"), tokenizer=tokenizer, device="cpu", progress=False, rendering="speaker")


def test_the_self_check_sees_an_error_beyond_the_window(tokenizer, monkeypatch):
    """An engine wrong only past the attention window (which the short self-check dialogs never
    reach) is caught at load: the self-check also scores a dialog longer than the window."""
    import transformers

    config = transformers.Qwen2Config(**{**SPECS["qwen2-window"][2], "sliding_window": 60})
    model = transformers.Qwen2ForCausalLM(config).eval()
    probe = FullScorer(model, tokenizer=tokenizer, device="cpu", progress=False, rendering="speaker")
    limit = probe.context_limit([probe.renderer.target_ids(f) for f in probe.follow_ups])
    short = max(len(probe.renderer.encode(list(d), limit).context_ids) for d in scorer_module.SELF_CHECK_DIALOGS)
    assert short < 60 and probe.engine == "packed"  # the short dialogs stay within the window
    monkeypatch.setitem(ENGINES, "packed", _planted("packed", 1e-2, only_longer_than=60))
    windowed = FullScorer(model, tokenizer=tokenizer, device="cpu", progress=False, rendering="speaker")
    assert windowed.engine == "cached"


def test_mbart_without_a_decoder_start_is_refused_naming_it(tokenizer):
    model = build("mbart")
    model.config.decoder_start_token_id = None
    model.generation_config.decoder_start_token_id = None
    with pytest.raises(ValueError, match=r"model type 'mbart'\) cannot be scored: mBART's decoder starts"):
        FullScorer(model, tokenizer=tokenizer, device="cpu", progress=False)
