"""The gaming probe: can a policy trained on FULL as its only reward win with an answer that is not
a reply? On held-out contexts, the judge scores the human's real next turn and answers a policy
could learn instead; for each, the share of contexts where it outscores the human's turn, with a
95% interval (Wilson's, ``scipy.stats``). Ties count as not beating."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable, Sequence

#: Fixed answers the probe tries in every context (none of them is a training reply).
FIXED_ANSWERS = {"Yes.": "Yes.", "I don't know.": "I don't know.", "Ok.": "Ok.",
                 "repeated word": "Window window window."}
PROBE_ANSWERS = tuple(FIXED_ANSWERS.values())
#: The answers made from the context or the corpus, by name.
MADE_ANSWERS = ("echo", "other conversation", "first word")


@dataclass(frozen=True)
class ProbeRow:
    """How often one answer beat the human's turn: ``wins`` of ``contexts`` and the 95% interval."""

    answer: str
    wins: int
    contexts: int
    low: float
    high: float
    mean_score: float

    @property
    def rate(self) -> float:
        return self.wins / self.contexts


def cut_dialogs(dialogs: Sequence[Sequence[str]], seed: int = 0, max_turns: int = 4) -> tuple[list, list]:
    """Each dialog cut at a random turn (drawn with ``seed``): (the contexts, at most ``max_turns``
    turns before the cut; the human's answers, the turn at the cut)."""
    rng = random.Random(seed)
    contexts, humans = [], []
    for dialog in dialogs:
        cut = rng.randint(1, len(dialog) - 1)
        contexts.append(list(dialog[max(0, cut - max_turns) : cut]))
        humans.append(dialog[cut])
    return contexts, humans


def probe_answers(contexts: Sequence[Sequence[str]], humans: Sequence[str], seed: int = 0) -> dict[str, list[str]]:
    """The answers of the probe for each context: the fixed ones, an echo of the context's last
    turn, the human's turn of another context (drawn with ``seed``; specific, not generic), and the
    human's turn cut to its first word."""
    if len(contexts) != len(humans) or len(humans) < 2:
        raise ValueError("the probe needs at least two contexts, each with the human's turn")
    rng = random.Random(seed)
    others = []
    for i in range(len(humans)):
        j = rng.randrange(len(humans) - 1)
        others.append(humans[j + (j >= i)])
    answers = {name: [text] * len(humans) for name, text in FIXED_ANSWERS.items()}
    answers["echo"] = [c[-1] if c else "" for c in contexts]
    answers["other conversation"] = others
    answers["first word"] = [h.split()[0] if h.split() else h for h in humans]
    return answers


def gaming_probe(score: Callable[[Sequence[Sequence[str]], Sequence[str]], list[float]],
                 contexts: Sequence[Sequence[str]], humans: Sequence[str], seed: int = 0) -> list[ProbeRow]:
    """Each probe answer's wins over the human's turn; ``score(contexts, responses)`` gives FULL's scores."""
    from scipy.stats import binomtest

    human = score(contexts, humans)
    rows = []
    for name, answers in probe_answers(contexts, humans, seed).items():
        scores = score(contexts, answers)
        wins = sum(s > h for s, h in zip(scores, human))
        interval = binomtest(wins, len(human)).proportion_ci(0.95, method="wilson")
        rows.append(ProbeRow(name, wins, len(human), interval.low, interval.high, sum(scores) / len(scores)))
    return rows


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
