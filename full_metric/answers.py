"""What a set of generated answers looks like: the shares a reward that can be gamed would push up
(generic, short, repetitive answers, echoes of the last turn) and their mean length. Torch-free."""

from __future__ import annotations

import re
from typing import Sequence

#: Answers counted as generic by :func:`answer_profile` (compared lower-cased, punctuation left out).
GENERIC_ANSWERS = ("yes", "no", "i don't know", "i dont know", "ok", "okay", "sure", "i see", "me too", "thanks",
                   "thank you", "yeah", "maybe", "i'm not sure", "haha", "haha ok", "lol", "cool", "nice",
                   "that's cool", "that's nice", "that's great", "good", "great")
#: An answer of at least this many words, this share of them words of the last turn, echoes it.
ECHO_MIN_WORDS, ECHO_SHARE = 3, 0.8


#: What FULL scores for a generation that is empty: the empty response it is (one rule in every face: an empty
#: response is scored as the reply it is, :func:`full_metric.inputs.check_dialogs`).
EMPTY_ANSWER = ""


def response_of(generated: str) -> str:
    """The response a generation gives, as every training face scores and measures it (the callback,
    ``compute_metrics``, the GRPO reward and the examples): its first non-empty line, stripped (a
    model that goes on to write the next speaker's turn is scored on its own turn only);
    :data:`EMPTY_ANSWER` when it has none."""
    return next((line.strip() for line in generated.splitlines() if line.strip()), EMPTY_ANSWER)


def words(text: str) -> list[str]:
    """The words of ``text``, lower-cased, punctuation left out (apostrophes kept)."""
    return re.findall(r"[\w']+", text.lower())


def is_echo(answer: str, last_turn: str) -> bool:
    """Whether ``answer`` repeats the turn it answers: the same words, or at least
    :data:`ECHO_MIN_WORDS` words of which :data:`ECHO_SHARE` or more are words of that turn."""
    said, heard = words(answer), words(last_turn)
    if not said:
        return False
    if said == heard:
        return True
    heard_words = set(heard)
    return len(said) >= ECHO_MIN_WORDS and sum(w in heard_words for w in said) >= ECHO_SHARE * len(said)


def answer_profile(answers: Sequence[str], contexts: Sequence[Sequence[str]] | None = None) -> dict[str, float]:
    """Mean length in words, and the share of generic answers (:data:`GENERIC_ANSWERS`), short ones
    (3 words or fewer), repetitive ones (3 words or more, half of them the same word) and, given the
    contexts answered, echoes of their last turn (:func:`is_echo`)."""
    said = [words(a) for a in answers]
    n = max(len(answers), 1)
    generic = {" ".join(words(g)) for g in GENERIC_ANSWERS}
    profile = {
        "mean_words": sum(map(len, said)) / n,
        "generic_share": sum(" ".join(w) in generic for w in said) / n,
        "short_share": sum(len(w) <= 3 for w in said) / n,
        "repetitive_share": sum(len(w) >= 3 and max(w.count(x) for x in w) * 2 >= len(w) for w in said) / n,
    }
    if contexts is not None:
        if len(contexts) != len(answers):
            raise ValueError(f"{len(answers)} answers but {len(contexts)} contexts")
        profile["echo_share"] = sum(bool(c) and is_echo(a, c[-1]) for a, c in zip(answers, contexts)) / n
    return profile
