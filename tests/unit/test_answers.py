"""What the training examples measure of a policy's answers (full_metric.answers)."""

from __future__ import annotations

import pytest

from full_metric.answers import answer_profile, is_echo


@pytest.mark.parametrize("answer, turn, echo", [
    ("I love hiking in the mountains.", "I love hiking in the mountains!", True),
    ("hiking in the mountains", "I love hiking in the mountains.", True),
    ("Yes.", "Yes, I do like it.", False),  # too short to count as an echo
    ("I went to the lake with friends.", "How was your weekend?", False),
    ("", "Hi!", False),
    ("Hi!", "hi", True),  # the same words
])
def test_an_echo_repeats_the_words_of_the_turn_it_answers(answer, turn, echo):
    assert is_echo(answer, turn) is echo


def test_the_profile_counts_each_kind_of_answer():
    answers = ["Yes.", "Window window window.", "I love hiking too!", "I went to the lake with my sister."]
    contexts = [["Do you cook?"], ["Hi"], ["I love hiking too"], ["How was your weekend?"]]
    profile = answer_profile(answers, contexts)
    assert profile == {"mean_words": pytest.approx((1 + 3 + 4 + 8) / 4), "generic_share": 0.25, "short_share": 0.5,
                       "repetitive_share": 0.25, "echo_share": 0.25}
    assert "echo_share" not in answer_profile(answers)
    with pytest.raises(ValueError, match="4 answers but 3 contexts"):
        answer_profile(answers, contexts[:3])
