"""Every batched path gives the one-pair-at-a-time oracle's numbers, in any batch size and order."""

from __future__ import annotations

import random

import pytest

from full_metric import FullScorer

TURNS = [
    "Hi there!", "How are you doing today?", "I just got back from a long trip to Portugal.",
    "", "The food was amazing, especially the custard tarts. 🍮", "Did you go to Lisbon or Porto?",
    "Both! Lisbon first, then the train up north.", "Ünïcödé is fine too: 日本語のテキスト.",
]


def _dialogs(n: int, seed: int, repeats: int = 3) -> tuple[list[list[str]], list[str]]:
    """``n`` dialogs drawn with ``seed``; a response repeats a turn up to ``repeats`` times (three: some leave
    the tiny models no room for their context, and are not scored; one: every dialog fits and is scored)."""
    rng = random.Random(seed)
    contexts = [[rng.choice(TURNS) for _ in range(rng.randint(0, 9))] for _ in range(n)]
    responses = [rng.choice(TURNS[:3] + TURNS[4:]) * rng.randint(1, repeats) for _ in range(n)]
    return contexts, responses


def _scorer(name, tiny_models, tokenizer, tiny_blenderbot_path, **kwargs):
    if name == "blenderbot":
        return FullScorer(tiny_blenderbot_path, device="cpu", progress=False, **kwargs)
    return FullScorer(tiny_models[name], tokenizer=tokenizer, device="cpu", progress=False, **kwargs)


CONFIGS = [
    ("blenderbot", None), ("bart", None), ("t5", None), ("llama", "speaker"), ("llama", "plain"), ("llama", "eos"),
    ("gpt2", "speaker"), ("llama", "chat_template"), ("gemma3", "speaker"), ("gemma3", "plain"),
]


@pytest.fixture(scope="module")
def chat_tokenizer(tokenizer):
    tok = tokenizer.__class__.from_pretrained(tokenizer.name_or_path)
    tok.chat_template = (
        "{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}</s>\n{% endfor %}"
    )
    return tok


@pytest.mark.parametrize("name,rendering", CONFIGS)
@pytest.mark.parametrize("level", ["turn", "dialog"])
def test_batched_matches_oracle(name, rendering, level, tiny_models, tokenizer, chat_tokenizer, tiny_blenderbot_path):
    tok = chat_tokenizer if rendering == "chat_template" else tokenizer
    scorer = _scorer(name, tiny_models, tok, tiny_blenderbot_path, rendering=rendering, aggregation="mean")
    contexts, responses = _dialogs(14, seed=3)
    if level == "dialog":
        contexts, responses = [c + [r] for c, r in zip(contexts, responses)], None
    oracle = scorer.score(contexts, responses, engine="oracle")
    for batch_size in (1, 4, 14):
        batched = scorer.score(contexts, responses, batch_size=batch_size)
        for a, b in zip(batched.follow_up_log_likelihoods, oracle.follow_up_log_likelihoods, strict=True):
            assert a == pytest.approx(b, abs=1e-4)
        assert batched.scores == pytest.approx(oracle.scores, abs=1e-4, nan_ok=True)  # NaN: no context read
        assert batched.unscored == oracle.unscored


@pytest.mark.parametrize("name", ["blenderbot", "llama"])
def test_input_order_does_not_change_scores(name, tiny_models, tokenizer, tiny_blenderbot_path):
    scorer = _scorer(name, tiny_models, tokenizer, tiny_blenderbot_path)
    contexts, responses = _dialogs(12, seed=5, repeats=1)  # dialogs that fit: every comparison compares numbers
    base = scorer.score(contexts, responses, batch_size=5)
    assert not base.unscored
    order = list(range(12))
    random.Random(0).shuffle(order)
    shuffled = scorer.score([contexts[i] for i in order], [responses[i] for i in order], batch_size=5)
    assert shuffled.scores == pytest.approx([base.scores[i] for i in order], abs=1e-4)


def test_identical_dialogs_get_identical_scores(tiny_blenderbot_path):
    scorer = FullScorer(tiny_blenderbot_path, device="cpu", progress=False)
    result = scorer.score([["Hi!"], ["Hello."], ["Hi!"]], ["Hey.", "Hey.", "Hey."])
    assert result.scores[0] == result.scores[2] != result.scores[1]


@pytest.mark.parametrize("name", ["blenderbot", "bart", "llama"])
def test_truncation_keeps_the_response(name, tiny_models, tokenizer, tiny_blenderbot_path):
    scorer = _scorer(name, tiny_models, tokenizer, tiny_blenderbot_path)
    history = [f"Turn number {i} says something rather long about the weather." for i in range(40)]
    a = scorer.score([history], ["Completely different answer A."])
    b = scorer.score([history], ["Another reply, B, about cats."])
    assert a.dropped_tokens[0] > 0
    assert a.scores != b.scores  # the response was read, not cut off
    kept = scorer.renderer.encode(history + ["Completely different answer A."], 40)
    text = scorer.tokenizer.decode(kept.context_ids)
    assert "answer A" in text and "Turn number 0 " not in text
    assert len(kept.context_ids) == 40


def test_context_budget_and_turn_limit(tiny_blenderbot_path):
    scorer = FullScorer(tiny_blenderbot_path, device="cpu", progress=False, context_budget=20, max_turns=2)
    history = ["one", "two", "three", "four"]
    result = scorer.score([history], ["five"])
    assert "trunc:left-20" in result.signature and "turns:2" in result.signature
    same = scorer.score([["three", "four"]], ["five"])
    assert result.scores == same.scores


def test_positions_limit_the_decoder_only_context(tiny_models, tokenizer):
    scorer = FullScorer(tiny_models["llama"], tokenizer=tokenizer, device="cpu", progress=False)
    longest = max(len(scorer.renderer.target_ids(f)) for f in scorer.follow_ups)
    result = scorer.score([["word " * 200]], ["reply"])
    assert f"trunc:left-{96 - longest}" in result.signature
    assert result.dropped_tokens[0] > 0


@pytest.mark.parametrize("name", ["blenderbot", "llama"])
def test_token_budget_does_not_change_scores(name, tiny_models, tokenizer, tiny_blenderbot_path):
    contexts, responses = _dialogs(10, seed=7, repeats=1)  # dialogs that fit: every comparison compares numbers
    wide = _scorer(name, tiny_models, tokenizer, tiny_blenderbot_path, batch_size=10, max_batch_tokens=100_000)
    tight = _scorer(name, tiny_models, tokenizer, tiny_blenderbot_path, batch_size=10, max_batch_tokens=60)
    expected = wide.score(contexts, responses)
    assert not expected.unscored
    assert tight.score(contexts, responses).scores == pytest.approx(expected.scores, abs=1e-4)
