"""Follow-up utterances as data: the paper's five, the authors' package default, and Table 3's 63 candidates."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Literal, Sequence

from .errors import UsageError, UsageTypeError

Level = Literal["turn", "dialog"]
Polarity = Literal["negative", "positive"]


@dataclass(frozen=True)
class FollowUp:
    """One candidate follow-up of the paper's Table 3 (apostrophes normalised to ASCII).

    ``turn_spearman`` and ``dialog_spearman`` are the paper's Spearman correlations of the
    follow-up's log-likelihood under blenderbot-400M-distill with FED's Overall ratings.
    """

    text: str
    category: str
    level: Level
    polarity: Polarity
    turn_spearman: float
    dialog_spearman: float


#: All 63 candidate follow-ups of the paper's Table 3 (from the FED metric), in the table's order.
CANDIDATES: tuple[FollowUp, ...] = (
    FollowUp('Not really relevant here.', 'specific', 'turn', 'negative', 0.48, 0.65),
    FollowUp("You're really confusing.", 'error recovery', 'dialog', 'negative', 0.46, 0.67),
    FollowUp("I don't understand what you're saying.", 'correct', 'turn', 'negative', 0.46, 0.58),
    FollowUp("That's not really relevant here.", 'specific', 'turn', 'negative', 0.45, 0.7),
    FollowUp('You are so confusing.', 'coherent', 'dialog', 'negative', 0.45, 0.64),
    FollowUp("You're really boring.", 'informative', 'dialog', 'negative', 0.44, 0.65),
    FollowUp("That's not very interesting.", 'interesting', 'turn', 'negative', 0.44, 0.6),
    FollowUp('That was a really boring response.', 'interesting', 'turn', 'negative', 0.43, 0.63),
    FollowUp("You don't seem interested.", 'inquisitive', 'dialog', 'negative', 0.43, 0.61),
    FollowUp('I am so confused right now.', 'error recovery', 'dialog', 'negative', 0.43, 0.6),
    FollowUp("I'm so confused!", 'understandable', 'turn', 'negative', 0.43, 0.59),
    FollowUp("I don't really care. That's pretty boring.", 'engaging', 'turn', 'negative', 0.43, 0.61),
    FollowUp('I want to talk about something else.', 'engaging', 'turn', 'negative', 0.43, 0.65),
    FollowUp("That's not even related to what I said.", 'relevant', 'turn', 'negative', 0.42, 0.58),
    FollowUp('What are you trying to say?', 'understanding', 'dialog', 'negative', 0.42, 0.68),
    FollowUp('I am so confused right now!', 'correct', 'turn', 'negative', 0.42, 0.57),
    FollowUp('That makes no sense!', 'semantically appropriate', 'turn', 'negative', 0.42, 0.56),
    FollowUp("I don't understand at all!", 'understandable', 'turn', 'negative', 0.41, 0.54),
    FollowUp("That's really boring.", 'interesting', 'turn', 'negative', 0.41, 0.54),
    FollowUp("I don't like you.", 'likeable', 'dialog', 'negative', 0.4, 0.58),
    FollowUp("I'm so confused right now!", 'fluent', 'turn', 'negative', 0.4, 0.56),
    FollowUp("Don't change the topic!", 'relevant', 'turn', 'negative', 0.4, 0.58),
    FollowUp("You're not understanding me!", 'correct', 'turn', 'negative', 0.4, 0.62),
    FollowUp("That's a very generic response.", 'specific', 'turn', 'negative', 0.39, 0.5),
    FollowUp("You don't really know much.", 'informative', 'dialog', 'negative', 0.39, 0.52),
    FollowUp("You're not very nice.", 'likeable', 'dialog', 'negative', 0.38, 0.56),
    FollowUp("You're not very fun to talk to.", 'likeable', 'dialog', 'negative', 0.37, 0.55),
    FollowUp('Is that real English?', 'fluent', 'turn', 'negative', 0.37, 0.49),
    FollowUp("That's a lot of questions!", 'inquisitive', 'dialog', 'positive', 0.36, 0.52),
    FollowUp('Why are you repeating yourself?', 'diverse', 'dialog', 'negative', 0.35, 0.5),
    FollowUp("You're making no sense at all.", 'coherent', 'dialog', 'negative', 0.35, 0.43),
    FollowUp('You ask a lot of questions!', 'inquisitive', 'dialog', 'positive', 0.35, 0.54),
    FollowUp("Let's change the topic.", 'engaging', 'turn', 'negative', 0.35, 0.45),
    FollowUp("You don't ask many questions.", 'inquisitive', 'dialog', 'negative', 0.35, 0.54),
    FollowUp('Why are you changing the topic?', 'relevant', 'turn', 'negative', 0.34, 0.51),
    FollowUp('Stop saying the same thing repeatedly.', 'diverse', 'dialog', 'negative', 0.34, 0.5),
    FollowUp('Do you know how to talk about something else?', 'flexible', 'dialog', 'negative', 0.33, 0.49),
    FollowUp("You're changing the topic so much!", 'coherent', 'dialog', 'negative', 0.33, 0.47),
    FollowUp('You know a lot of facts!', 'informative', 'dialog', 'positive', 0.32, 0.48),
    FollowUp('Tell me more!', 'engaging', 'turn', 'positive', 0.32, 0.34),
    FollowUp('I like you!', 'likeable', 'dialog', 'positive', 0.31, 0.43),
    FollowUp("Wow that's a lot of information.", 'informative', 'dialog', 'positive', 0.31, 0.38),
    FollowUp('Stop changing the topic so much.', 'depth', 'dialog', 'negative', 0.31, 0.44),
    FollowUp('What does that even mean?', 'understandable', 'turn', 'negative', 0.3, 0.35),
    FollowUp("I don't want to talk about that!", 'flexible', 'dialog', 'negative', 0.29, 0.5),
    FollowUp("That's not what you said earlier!", 'consistent', 'dialog', 'negative', 0.29, 0.37),
    FollowUp('You have a good point.', 'semantically appropriate', 'turn', 'positive', 0.29, 0.43),
    FollowUp("I see, that's interesting.", 'specific', 'turn', 'positive', 0.28, 0.31),
    FollowUp('Stop contradicting yourself!', 'consistent', 'dialog', 'negative', 0.28, 0.36),
    FollowUp("You're very easy to talk to!", 'flexible', 'dialog', 'positive', 0.28, 0.4),
    FollowUp('Stop repeating yourself!', 'diverse', 'dialog', 'negative', 0.27, 0.4),
    FollowUp("That's good to know. Cool!", 'specific', 'turn', 'positive', 0.25, 0.3),
    FollowUp("That's a good point.", 'specific', 'turn', 'positive', 0.25, 0.34),
    FollowUp('Wow you can talk about a lot of things!', 'flexible', 'dialog', 'positive', 0.23, 0.27),
    FollowUp("I'm really interested in learning more about this.", 'engaging', 'turn', 'positive', 0.22, 0.26),
    FollowUp('That makes sense!', 'semantically appropriate', 'turn', 'positive', 0.21, 0.21),
    FollowUp('Thanks for all the information!', 'informative', 'dialog', 'positive', 0.21, 0.15),
    FollowUp("You're super polite and fun to talk to", 'likeable', 'dialog', 'positive', 0.17, 0.23),
    FollowUp('Wow that is really interesting.', 'interesting', 'turn', 'positive', 0.17, 0.14),
    FollowUp("That's really interesting!", 'interesting', 'turn', 'positive', 0.16, 0.11),
    FollowUp('Great talking to you.', 'likeable', 'dialog', 'positive', 0.15, 0.1),
    FollowUp('Cool! That sounds super interesting.', 'interesting', 'turn', 'positive', 0.08, -0.01),
    FollowUp("Wow! That's really cool!", 'engaging', 'turn', 'positive', 0.04, -0.08),
)

#: The five follow-ups the paper selects (section 5.2): the default of this package.
PAPER_FIVE: tuple[str, ...] = (
    "Not really relevant here.",
    "You're really confusing.",
    "You're really boring.",
    "What are you trying to say?",
    "You don't seem interested.",
)

#: The default list of the authors' package ``full`` 0.0.3.1. A missing comma there joins two
#: follow-ups into one string, so it has four items; the ``reference`` preset reproduces it.
REFERENCE_PACKAGE_DEFAULT: tuple[str, ...] = (
    "Not really relevant here.",
    "You're really confusing.You're really boring.",
    "What are you trying to say?",
    "You don't seem interested.",
)


def select(
    *,
    level: Level | None = None,
    polarity: Polarity | None = None,
    category: str | Iterable[str] | None = None,
) -> list[FollowUp]:
    """Filter :data:`CANDIDATES`, e.g. ``select(level="turn", polarity="negative")``."""
    if level is not None and level not in ("turn", "dialog"):
        raise UsageError(f"level must be 'turn' or 'dialog', got {level!r}")
    if polarity is not None and polarity not in ("negative", "positive"):
        raise UsageError(f"polarity must be 'negative' or 'positive', got {polarity!r}")
    categories = {category} if isinstance(category, str) else set(category or ())
    unknown = categories - {c.category for c in CANDIDATES}
    if unknown:
        raise UsageError(f"unknown follow-up categories: {sorted(unknown)}")
    return [
        c
        for c in CANDIDATES
        if (level is None or c.level == level)
        and (polarity is None or c.polarity == polarity)
        and (not categories or c.category in categories)
    ]


def _named_sets() -> dict[str, tuple[str, ...]]:
    negative = [c for c in CANDIDATES if c.polarity == "negative"]
    return {
        "paper": PAPER_FIVE,
        "reference-default": REFERENCE_PACKAGE_DEFAULT,
        "all": tuple(c.text for c in CANDIDATES),
        "negative": tuple(c.text for c in negative),
        "positive": tuple(c.text for c in CANDIDATES if c.polarity == "positive"),
        "negative-turn": tuple(c.text for c in negative if c.level == "turn"),
        "negative-dialog": tuple(c.text for c in negative if c.level == "dialog"),
    }


#: Built-in follow-up sets by name, accepted wherever a follow-up list is.
NAMED_SETS: dict[str, tuple[str, ...]] = _named_sets()


def validate_follow_ups(follow_ups: Sequence[str]) -> tuple[str, ...]:
    """Check a user list of follow-ups (non-empty strings, no duplicates) and return it as a tuple.

    Raises:
        TypeError: the list is a plain string, or an item is not a string.
        ValueError: the list is empty, an item is blank, or an item repeats.
    """
    if isinstance(follow_ups, str):
        raise UsageTypeError(
            "follow_ups must be a list of strings or a built-in set name resolved with "
            f"resolve_follow_ups(), got the string {follow_ups!r}"
        )
    items = list(follow_ups)
    if not items:
        raise UsageError("follow_ups is empty: give at least one follow-up")
    seen: dict[str, int] = {}
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise UsageTypeError(f"follow_ups[{i}] must be a string, got {type(text).__name__}")
        if not text.strip():
            raise UsageError(f"follow_ups[{i}] is empty")
        if text in seen:
            raise UsageError(f"follow_ups[{i}] repeats follow_ups[{seen[text]}]: {text!r}")
        seen[text] = i
    return tuple(items)


def resolve_follow_ups(follow_ups: str | Sequence[str] | None, default: Sequence[str] = PAPER_FIVE) -> tuple[str, ...]:
    """Turn ``None`` (the default), a built-in set name or a list into a validated tuple."""
    if follow_ups is None:
        return tuple(default)
    if isinstance(follow_ups, str):
        if follow_ups not in NAMED_SETS:
            raise UsageError(f"unknown follow-up set {follow_ups!r}; built-in sets: {sorted(NAMED_SETS)}")
        return NAMED_SETS[follow_ups]
    return validate_follow_ups(follow_ups)
