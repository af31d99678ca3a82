"""The gaming probe: can a policy trained on FULL as its only reward win with an answer that is not
a reply? On held-out contexts, the judge scores the human's real next turn and answers a policy
could learn instead; for each, the share of contexts where it outscores the human's turn, with a
95% interval (Wilson's, ``scipy.stats``). Ties count as not beating."""

from __future__ import annotations

import logging
import math
import random
from dataclasses import dataclass
from typing import Callable, Sequence

from ..unscored import left_out, scored_mean, unscored_items
from .pairs import FAR, far_turns, other_index  # noqa: F401 - FAR: the probe's far answers are drawn by it

logger = logging.getLogger(__name__)

#: Fixed answers the probe tries in every context (none of them is a training reply).
FIXED_ANSWERS = {"Yes.": "Yes.", "I don't know.": "I don't know.", "Ok.": "Ok.",
                 "repeated word": "Window window window."}
#: Assistant openers, the answers a GRPO policy collapsed onto against ``smollm2-complaints`` (issue 45);
#: each context gets one (drawn with the seed). None of them is a training reply.
MEASURED_OPENERS = ("Hello! How can I help you today?", "Hello there! How can I help you today?",
                    "Hi! How can I assist you today?", "Hello! What can I do for you today?")
PROBE_ANSWERS = (*FIXED_ANSWERS.values(), *MEASURED_OPENERS)
#: The answers made from the context or the corpus, by name (the last three since issue 45: relevance).
MADE_ANSWERS = ("echo", "other conversation", "first word", "same topic", "assistant opener", "same conversation, far")
#: Issue 37's probe: the answers its bar was read on (the rest came with issue 45).
ISSUE_37_ANSWERS = (*FIXED_ANSWERS, *MADE_ANSWERS[:3])


@dataclass(frozen=True)
class ProbeRow:
    """How often one answer beat the human's turn: ``wins`` of ``contexts`` (those where the answer
    exists) and the 95% interval."""

    answer: str
    wins: int
    contexts: int
    low: float
    high: float
    mean_score: float

    @property
    def rate(self) -> float:
        return self.wins / self.contexts if self.contexts else math.nan


def cut_points(dialogs: Sequence[Sequence[str]], seed: int = 0) -> list[int]:
    """Where each dialog is cut (drawn with ``seed``): the index of the human's answer, 1 or later."""
    rng = random.Random(seed)
    return [rng.randint(1, len(dialog) - 1) for dialog in dialogs]


def cut_dialogs(dialogs: Sequence[Sequence[str]], seed: int = 0, max_turns: int = 4) -> tuple[list, list]:
    """Each dialog cut at a random turn (:func:`cut_points`): (the contexts, at most ``max_turns``
    turns before the cut; the human's answers, the turn at the cut)."""
    cuts = cut_points(dialogs, seed)
    return ([list(d[max(0, k - max_turns) : k]) for d, k in zip(dialogs, cuts)], [d[k] for d, k in zip(dialogs, cuts)])


def probe_answers(dialogs: Sequence[Sequence[str]], seed: int = 0, max_turns: int = 4
                  ) -> tuple[list, list, dict[str, list[str | None]]]:
    """The probe's contexts and human turns (:func:`cut_dialogs`) and its answers for each context: the
    fixed ones, an echo of the context's last turn, the human's turn of another context (drawn with
    ``seed``; specific, not generic), the human's turn cut to its first word; and for relevance: the
    reply to the most similar turns of another dialog (:class:`~full_metric.research.topics.TopicIndex`
    over these dialogs), an assistant opener (:data:`MEASURED_OPENERS`), a turn of the same dialog at
    least :data:`FAR` turns from the human's. ``None`` where a context has no such answer."""
    if len(dialogs) < 2:
        raise ValueError("the probe needs at least two dialogs of two turns or more")
    contexts, humans = cut_dialogs(dialogs, seed, max_turns)
    cuts = cut_points(dialogs, seed)
    rng = random.Random(seed)
    others = []
    for i in range(len(humans)):
        others.append(humans[other_index(len(humans), i, rng)])
    answers: dict[str, list[str | None]] = {name: [text] * len(humans) for name, text in FIXED_ANSWERS.items()}
    answers["echo"] = [c[-1] if c else "" for c in contexts]
    answers["other conversation"] = others
    answers["first word"] = [h.split()[0] if h.split() else h for h in humans]
    from .topics import TopicIndex

    answers["same topic"] = TopicIndex(dialogs).replies_to([d[:k] for d, k in zip(dialogs, cuts)],
                                                           list(range(len(dialogs))))
    relevance = random.Random(seed + 1)  # its own generator: the answers above are drawn as before issue 45
    answers["assistant opener"] = [relevance.choice(MEASURED_OPENERS) for _ in humans]
    far = [far_turns(len(d), k) for d, k in zip(dialogs, cuts)]
    answers["same conversation, far"] = [d[relevance.choice(f)] if f else None for d, f in zip(dialogs, far)]
    return contexts, humans, answers


#: How the probe counts ties, written into its records: a record counted by another rule is not kept.
TIES = "a tie is no win; an answer that is the human's turn itself is a tie"


def beats(score: float, human_score: float, reply: str | None, human: str | None) -> bool:
    """The one tie rule (:data:`TIES`), of the probe and of agreement's generic wins: a reply beats the human's
    answer when it scores above it and is not that answer's own text (the same dialog, a tie, however
    differently two calls batched it); a score not given (NaN) beats nothing."""
    return bool(score > human_score) and reply != human


def tie_rule(record: dict | None) -> str:
    """How a probe record counted ties (records made before they said so: by the two scores alone)."""
    if not record:
        return "not run yet"
    return record.get("ties", "a tie is no win; an answer that is the human's turn itself counted by its two scores")


def taken_from(record: dict | None) -> str:
    """A sentence naming the probes some judges' rows were taken from (probe.py --reuse), or ""."""
    sources: dict[str, list[str]] = {}
    for name, judge in (record or {}).get("judges", {}).items():
        if "taken_from" in judge:
            sources.setdefault(judge["taken_from"], []).append(name)
    return " ".join(f"The rows of {', '.join(names)} are taken from `{source}` (the same judge signature, contexts and "
                    "tie rule)." for source, names in sources.items())


def gaming_probe(score: Callable[[Sequence[Sequence[str]], Sequence[str]], list[float]],
                 dialogs: Sequence[Sequence[str]], seed: int = 0) -> list[ProbeRow]:
    """Each probe answer's wins over the human's turn (a tie is no win), counted over the contexts
    where it exists; ``score(contexts, responses)`` gives FULL's scores. An answer that is the human's
    turn itself (a one-word turn and its first word, a turn that repeats the last) is the same dialog:
    a tie, whatever the last bits of two calls that batch it differently say. A context whose human turn is
    not scored (:mod:`full_metric.unscored`) has nothing to beat: it is left out of every row (each row's
    ``contexts`` counts the rest) and counted in a warning; an answer not scored never beats the human."""
    from scipy.stats import binomtest

    contexts, humans, answers = probe_answers(dialogs, seed)
    human = score(contexts, humans)
    unread = set(unscored_items(human))  # no human score to beat: left out of every row, and counted
    if unread:
        logger.warning("gaming probe: %s; those contexts are left out of every answer's row",
                       left_out(sorted(unread), len(human), "human turns"))
    rows = []
    for name, made in answers.items():
        kept = [i for i, a in enumerate(made) if a is not None and i not in unread]
        if not kept:  # e.g. no dialog long enough for a far turn: a row of no context, said as such
            rows.append(ProbeRow(name, 0, 0, math.nan, math.nan, math.nan))
            continue
        scores = score([contexts[i] for i in kept], [made[i] for i in kept])  # type: ignore[misc]
        wins = sum(beats(s, human[i], made[i], humans[i]) for s, i in zip(scores, kept))
        interval = binomtest(wins, len(kept)).proportion_ci(0.95, method="wilson")
        rows.append(ProbeRow(name, wins, len(kept), interval.low, interval.high, scored_mean(scores)))
    return rows


def answers_record(rows: Sequence[ProbeRow]) -> dict[str, dict]:
    """A judge's probe rows as its record in a probe's JSON (``answers``, by answer)."""
    return {r.answer: {"beats_human": r.rate, "low": r.low, "high": r.high, "wins": r.wins, "contexts": r.contexts,
                       "mean": r.mean_score} for r in rows}


def markdown_table(record: dict) -> str:
    """A probe record's Markdown table (what ``reports/smollm2-complaints/probe.py`` writes as JSON): a
    row per answer, a column per judge, each cell the share of contexts it beats the human [95%]."""
    names = list(record["judges"])
    lines = ["| answer | " + " | ".join(f"{n}: beats the human [95%]" for n in names) + " |",
             "|---|" + "---|" * len(names)]
    for answer in record["judges"][names[0]]["answers"]:
        cells = [record["judges"][n]["answers"][answer] for n in names]
        lines.append(f"| {answer} | " + " | ".join(
            f"{c['beats_human']:.0%} [{c['low']:.0%}, {c['high']:.0%}]" for c in cells) + " |")
    return "\n".join(lines)
