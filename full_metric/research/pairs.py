"""The pairs of the ``complaints`` objective: from each dialog, the real next turn and a corrupted
reply to the same context. Plain Python (no torch), so the command line can name the defaults."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Sequence

from ..errors import UsageError

CORRUPTIONS = ("other", "echo", "far", "truncated", "generic", "acknowledgement", "repeated", "topic", "opener")
#: How often each corruption is drawn (a corruption that does not apply to a dialog falls back to "other").
#: ``acknowledgement`` and ``repeated`` were added (weights fixed before any run with them) because the
#: gaming probe found a bare acknowledgement ("Ok.") and a repeated word beating the human's turn with the
#: base judge, answers the first five kinds do not draw.
DEFAULT_MIX = {"other": 0.3, "echo": 0.15, "far": 0.1, "truncated": 0.15, "generic": 0.1, "acknowledgement": 0.1,
               "repeated": 0.1}
#: The relevance kinds (issue 45; weight 0 in the default mix, so that the shipped judge's pairs are
#: drawn as before): ``topic``, the reply a person gave to the most similar turn of another training
#: dialog (:class:`~full_metric.research.topics.TopicIndex`), and ``opener``, an assistant's opening line
#: from :data:`TRAINING_OPENERS` (what a GRPO policy collapsed onto against the shipped judge).
RELEVANCE_KINDS = ("topic", "opener")
#: Short generic replies for training pairs; none of them is a measured answer (:func:`normalised`).
TRAINING_GENERIC_REPLIES = ("Okay.", "Hmm.", "Right.", "I see.", "Nice.", "Oh.", "Maybe.", "Cool.")
#: Bare acknowledgements for training pairs; none of them is a measured answer (:func:`normalised`).
TRAINING_ACKNOWLEDGEMENTS = ("Alright.", "Got it.", "Yep.", "Mhm.", "Gotcha.", "Fine.", "Uh-huh.", "Sounds good.")
#: Assistant openers for training pairs; none of them is a measured answer (:func:`normalised`).
TRAINING_OPENERS = ("Hi there! What can I do for you?", "Good morning! How may I assist you?",
                    "Welcome! Is there anything I can help you with?", "Hey! What would you like to talk about?",
                    "Hi! I'm here to help. What do you need?", "Greetings! How can I be of service?",
                    "Hello, nice to meet you! What brings you here?", "Hey there! Anything I can do for you?")
#: A far turn is at least this many turns from the real next turn.
FAR = 3


@dataclass(frozen=True)
class Pair:
    """A context, its real next turn and a corrupted reply (``kind``: one of :data:`CORRUPTIONS`)."""

    context: tuple[str, ...]
    real: str
    corrupted: str
    kind: str


def normalised(reply: str) -> str:
    """A reply lower-cased, without punctuation or extra spaces: how training replies are compared
    with the answers measured, so that "Ok" and "ok." count as one."""
    return " ".join("".join(ch for ch in reply.lower() if ch.isalnum() or ch.isspace()).split())


def check_mix(mix: dict[str, float]) -> dict[str, float]:
    """A corruption mix: known kinds, non-negative weights, not all zero."""
    unknown = sorted(set(mix) - set(CORRUPTIONS))
    if unknown:
        raise UsageError(f"unknown corruption(s) {unknown}; choose from {CORRUPTIONS}")
    if any(w < 0 for w in mix.values()) or not sum(mix.values()) > 0:
        raise UsageError(f"corruption weights must be non-negative and not all zero, got {mix}")
    return dict(mix)


def make_pairs(dialogs: Sequence[Sequence[str]], rng: random.Random, mix: dict[str, float] = DEFAULT_MIX,
               per_dialog: int = 1) -> list[Pair]:
    """``per_dialog`` pairs per dialog (of two turns or more; fewer where it has fewer turns to cut at), each
    cut at a different random turn, the corruption drawn from ``mix`` for each; one per dialog draws exactly
    as before the option existed. A dialog's pairs sit together: shuffle them for training. The ``topic``
    kind indexes ``dialogs`` (:class:`~full_metric.research.topics.TopicIndex`): only when it weighs more
    than 0."""
    if per_dialog < 1:
        raise UsageError(f"pairs per dialog must be at least 1, got {per_dialog}")
    kinds, weights = zip(*check_mix(mix).items())
    topics = None
    if mix.get("topic", 0) > 0:
        from .topics import TopicIndex

        topics = TopicIndex(dialogs)
    pairs = []
    for i, dialog in enumerate(dialogs):
        cuts = ([rng.randint(1, len(dialog) - 1)] if per_dialog == 1
                else rng.sample(range(1, len(dialog)), min(per_dialog, len(dialog) - 1)))
        for k in cuts:
            kind = rng.choices(kinds, weights)[0]
            if kind == "topic":
                corrupted = topics.replies_to([dialog[:k]], [i])[0]  # type: ignore[union-attr]
            else:
                corrupted = _corrupt(kind, dialogs, i, k, rng)
            if corrupted is None or corrupted.strip() == dialog[k].strip():
                kind, corrupted = "other", _other(dialogs, i, rng)
            if corrupted is not None and corrupted.strip() != dialog[k].strip():
                pairs.append(Pair(tuple(dialog[:k]), dialog[k], corrupted, kind))
    return pairs


def other_index(count: int, i: int, rng: random.Random) -> int:
    """Another dialog than the ``i``-th of ``count`` (at least two), drawn with ``rng``: the one draw of "a reply
    from another conversation", for the training pairs and the gaming probe."""
    j = rng.randrange(count - 1)
    return j + (j >= i)


def far_turns(turns: int, k: int) -> list[int]:
    """The turns of a dialog of ``turns`` turns at least :data:`FAR` from its ``k``-th: the one rule of "the same
    conversation, far", for the training pairs and the gaming probe."""
    return [m for m in range(turns) if abs(m - k) >= FAR]


def _other(dialogs: Sequence[Sequence[str]], i: int, rng: random.Random) -> str | None:
    if len(dialogs) < 2:
        return None
    return rng.choice(list(dialogs[other_index(len(dialogs), i, rng)]))


def _corrupt(kind: str, dialogs: Sequence[Sequence[str]], i: int, k: int, rng: random.Random) -> str | None:
    dialog = dialogs[i]
    if kind == "other":
        return _other(dialogs, i, rng)
    if kind == "echo":
        return dialog[k - 1]
    if kind == "far":
        far = far_turns(len(dialog), k)
        return dialog[rng.choice(far)] if far else None
    if kind == "truncated":
        words = dialog[k].split()
        return " ".join(words[: max(1, len(words) // 3)]) if len(words) >= 4 else None
    if kind == "repeated":  # one word of the real turn, said two to four times
        words = [w.strip(".,!?;:\"'()").lower() for w in dialog[k].split()]
        words = [w for w in words if len(w) > 2]
        return (" ".join([rng.choice(words)] * rng.randint(2, 4)).capitalize() + ".") if words else None
    if kind == "acknowledgement":
        return rng.choice(TRAINING_ACKNOWLEDGEMENTS)
    if kind == "opener":
        return rng.choice(TRAINING_OPENERS)
    return rng.choice(TRAINING_GENERIC_REPLIES)
