"""Dialog text helpers: a dialog string split into turns, speaker prefixes removed."""

from __future__ import annotations

import ast
import re

_SPEAKER = re.compile(r"^\s*(?:User|System|Human|Assistant|Bot|Agent|Customer|(?:Speaker|Person)\s*\d+|[AB])\s*:\s?")


def split_turns(text: str) -> list[str]:
    """One turn per line (``"\\n"``, ``"\\r\\n"``); an empty string is a dialog of no turns. A string
    that is a list of strings written out (``["Hi!", "How was your weekend?"]`` as JSON writes it, or
    ``['Hi!', ...]`` as pandas writes a list column to CSV) is that list of turns: decided here, for every
    reader and the metric alike."""
    stripped = text.strip()
    if stripped.startswith("[") and stripped.endswith("]"):
        try:
            turns = ast.literal_eval(stripped)  # a Python literal: JSON's lists of strings are ones too
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            turns = None
        if isinstance(turns, list) and all(isinstance(t, str) for t in turns):
            return turns
    return text.splitlines() if text else []


def strip_speaker(turn: str) -> str:
    """Remove one leading speaker label such as ``User: ``, ``System: ``, ``A: `` or ``Speaker 2: ``."""
    return _SPEAKER.sub("", turn, count=1)
