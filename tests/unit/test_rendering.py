"""How each family renders a dialog, and which tokens get scored."""

from __future__ import annotations

import pytest

from full_metric.rendering import Renderer, default_rendering


def test_default_rendering_per_family():
    assert default_rendering("blenderbot", "facebook/blenderbot-400M-distill", True) == "blenderbot"
    assert default_rendering("blenderbot-small", "facebook/blenderbot_small-90M", True) == "blenderbot"
    assert default_rendering("t5", "google/flan-t5-small", True) == "seq2seq"
    assert default_rendering("gpt2", "microsoft/DialoGPT-medium", False) == "eos"
    assert default_rendering("gpt2", "gpt2", False) == "speaker"
    assert default_rendering("llama", "HuggingFaceTB/SmolLM2-135M-Instruct", False, True) == "chat_template"


def test_texts(tokenizer):
    """The context and target texts of each rendering, written out."""
    turns = ["Hi!", "Hello, who is this?", "It's me."]
    bb = Renderer(tokenizer, "blenderbot", True)
    assert bb.context_text(turns) == " Hi!  Hello, who is this?   It's me."
    assert bb.target_text("Huh?") == " Huh?"
    sp = Renderer(tokenizer, "speaker", False)
    assert sp.context_text(turns) == "B: Hi!\nA: Hello, who is this?\nB: It's me.\nA:"
    assert sp.target_text("Huh?") == " Huh?\n"
    assert Renderer(tokenizer, "plain", False).context_text(turns) == "Hi!\nHello, who is this?\nIt's me.\n"
    assert Renderer(tokenizer, "eos", False).context_text(turns[:2]) == "Hi!</s>Hello, who is this?</s>"
    assert Renderer(tokenizer, "reference", True).context_text(turns) == " \tHi!\tHello, who is this?\tIt's me."


def test_chat_template_scores_follow_up_and_end_of_turn(tokenizer):
    tok = tokenizer.__class__.from_pretrained(tokenizer.name_or_path)
    tok.chat_template = "{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}</s>\n{% endfor %}"
    chat = Renderer(tok, "chat_template", False)
    assert chat.context_text(["Hi!", "Hello."]) == "<s>user: Hi!</s>\n<s>assistant: Hello.</s>\n<s>user: "
    ids = chat.target_ids("Huh?")
    assert ids[-1] == tok.eos_token_id and tok.decode(ids) == "Huh?</s>"


def test_seq2seq_targets_are_formatted_by_the_tokenizer(tokenizer):
    ids = Renderer(tokenizer, "blenderbot", True).target_ids("Huh?")
    assert ids[-1] == tokenizer.eos_token_id


def test_left_truncation_keeps_special_tokens(tokenizer):
    bb = Renderer(tokenizer, "blenderbot", True)
    encoded = bb.encode(["old " * 100, "the newest turn"], 12)
    assert len(encoded.context_ids) == 12 and encoded.context_ids[-1] == tokenizer.eos_token_id
    assert tokenizer.decode(encoded.context_ids).endswith("the newest turn</s>")


def test_unknown_rendering(tokenizer):
    """An unknown rendering, or one of the other model family, is refused by name."""
    with pytest.raises(ValueError, match="unknown rendering"):
        Renderer(tokenizer, "fancy", True)
    with pytest.raises(ValueError, match="needs a tokenizer with a chat template"):
        Renderer(tokenizer, "chat_template", False)


OPENING = "<s>system: be kind</s>\n"
SYSTEM_TEMPLATE = "{{ '" + OPENING.replace("\n", "\\n") + "' }}{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}</s>\n{% endfor %}"


def _with_template(tokenizer, template):
    tok = tokenizer.__class__.from_pretrained(tokenizer.name_or_path)
    tok.chat_template = template
    return tok


@pytest.mark.parametrize("budget", [40, 60, 90, 150])
def test_a_chat_template_cut_keeps_its_opening_and_whole_turns(tokenizer, budget):
    """A long dialog cut for a chat template keeps the template's opening (its system header) and
    the newest whole turns that fit: the most of them, rendered as the template renders them alone."""
    chat = Renderer(_with_template(tokenizer, SYSTEM_TEMPLATE), "chat_template", False)
    turns = [f"turn {k} says something about boats" for k in range(12)]
    encoded = chat.encode(turns, budget)
    text = chat.tokenizer.decode(encoded.context_ids)
    assert text.startswith(OPENING) and len(encoded.context_ids) <= budget
    kept = [k for k in range(1, 13) if text == chat.tokenizer.decode(chat.encode(turns[-k:], 10_000).context_ids)]
    assert len(kept) == 1 and 0 < kept[0] < 12
    assert len(chat.encode(turns[-kept[0] - 1 :], 10_000).context_ids) > budget  # one more turn would not fit
    assert encoded.dropped_tokens == len(chat.encode(turns, 10_000).context_ids) - len(encoded.context_ids)


@pytest.mark.parametrize("rendering, family", [("chat_template", False), ("blenderbot", True), ("speaker", False)])
def test_a_response_that_leaves_no_room_for_the_context_is_flagged(tokenizer, rendering, family):
    """A last turn that alone fills the budget keeps its end and is flagged (the scorer counts it in a
    warning); an old turn that does not fit only drops, and the context is still read."""
    renderer = Renderer(_with_template(tokenizer, SYSTEM_TEMPLATE), rendering, family)
    long = "word " * 200
    for turns in (["Hi!", "How are you?", long], [long]):
        encoded = renderer.encode(turns, 64)
        assert not encoded.context_read and len(encoded.context_ids) <= 64 and encoded.dropped_tokens > 0
    encoded = renderer.encode(["old " * 200, "Hi!", "Fine."], 64)
    assert encoded.context_read and encoded.dropped_tokens > 0


def test_the_reference_rendering_still_cuts_the_end(tokenizer):
    """The authors' package cut long inputs on the right: the reference preset keeps that (parity):
    the start of the dialog stays, the end of the long last turn goes."""
    turns = ["Hi there!", "word " * 200 + "THE END"]
    encoded = Renderer(tokenizer, "reference", True).encode(turns, 32)
    whole = Renderer(tokenizer, "reference", True).encode(turns, 10_000).context_ids
    assert len(encoded.context_ids) == 32 and encoded.dropped_tokens == len(whole) - 32
    text = tokenizer.decode(encoded.context_ids, skip_special_tokens=True)
    assert text.lstrip().startswith("Hi there!") and "THE END" not in text
    assert tuple(encoded.context_ids[:20]) == tuple(whole[:20])  # the start, token for token


def test_a_chat_template_response_that_leaves_no_room_for_any_whole_context_turn_is_flagged(tokenizer):
    """Issue 46, 5: with a budget that holds the response but no whole context turn beside it, the
    context is dropped: flagged for every context (before, only when the response filled the budget
    exactly, so three different contexts gave one score, silently)."""
    chat = Renderer(_with_template(tokenizer, SYSTEM_TEMPLATE), "chat_template", False)
    response = "Great, I went hiking with my friends by the lake."
    alone = len(chat.encode([response], 10_000).context_ids)
    for context in (["Hi! How was your weekend, my dear old friend?"], ["Do you cook?", "Not really, no."],
                    ["What did you do on Saturday afternoon with everyone?"]):
        assert len(chat.encode([context[-1]], 10_000).context_ids) > 3  # no context turn fits in 3 more tokens
        encoded = chat.encode([*context, response], alone + 3)
        assert not encoded.context_read, context


@pytest.mark.parametrize("turns", [1, 2, 3, 6])
def test_the_policy_prompt_and_the_judge_give_the_turns_to_the_same_speakers(tokenizer, turns):
    """Without a chat template a decoder-only policy is prompted in the judge's speaker rendering
    (rendering.speaker_lines): the judge's text of a dialog is the policy's prompt for its context
    with the policy's answer, then the judge's follow-up speaker. A second labelling rule in either
    would give a turn to the other speaker."""
    from types import SimpleNamespace

    from full_metric.faces.training import prompt_text
    from full_metric.rendering import Renderer

    context = [f"turn {k}" for k in range(turns)]
    plain = SimpleNamespace(chat_template=None, name_or_path="plain")
    prompt = prompt_text(plain, context, SimpleNamespace(is_encoder_decoder=False))
    judge = Renderer(tokenizer, "speaker", False).context_text([*context, "the answer"])
    assert judge == f"{prompt} the answer\nA:"


@pytest.mark.parametrize("rendering, family", [("blenderbot", True), ("speaker", False), ("chat_template", False)])
def test_a_response_that_exactly_fills_the_budget_is_flagged(tokenizer, rendering, family):
    """The edge case: the response alone is exactly the budget, so no context token is read (flagged); one
    and two tokens more leave room for no more than the separator or speaker label (flagged: issue 62, 1);
    the budget of the whole dialog reads it, one token less cuts the context's first token and still reads it."""
    renderer = Renderer(_with_template(tokenizer, SYSTEM_TEMPLATE), rendering, family)
    response = "I went hiking by the lake with my two brothers and our dog."
    context = "Hi, how was your weekend?"
    exact = len(renderer.encode([response], 10_000).context_ids)
    whole = len(renderer.encode([context, response], 10_000).context_ids)
    for budget in (exact, exact + 1, exact + 2):
        encoded = renderer.encode([context, response], budget)
        assert not encoded.context_read and tokenizer.decode(encoded.context_ids).count("weekend") == 0
    assert renderer.encode([context, response], whole).context_read
    partial = renderer.encode([context, response], whole - 1)
    assert partial.context_read == (rendering != "chat_template")  # a chat template keeps turns whole or not at all
