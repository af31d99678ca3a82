"""Dialog text helpers: a dialog string split into turns, speaker prefixes removed."""

from __future__ import annotations

import re

_SPEAKER = re.compile(r"^\s*(?:User|System|Human|Assistant|Bot|Agent|Customer|(?:Speaker|Person)\s*\d+|[AB])\s*:\s?")


def split_turns(text: str) -> list[str]:
    """One turn per line (``"\\n"``, ``"\\r\\n"``); an empty string is a dialog of no turns."""
    return text.splitlines() if text else []


def strip_speaker(turn: str) -> str:
    """Remove one leading speaker label such as ``User: ``, ``System: ``, ``A: `` or ``Speaker 2: ``."""
    return _SPEAKER.sub("", turn, count=1)
