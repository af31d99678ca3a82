"""Dialog text helpers: a dialog string split into turns, speaker prefixes removed."""

from __future__ import annotations

import ast
import io
import re
import tokenize

_SPEAKER = re.compile(r"^\s*(?:User|System|Human|Assistant|Bot|Agent|Customer|(?:Speaker|Person)\s*\d+|[AB])\s*:\s?")


def split_turns(text: str) -> list[str]:
    """One turn per line (``"\\n"``, ``"\\r\\n"``); an empty string is a dialog of no turns. A string
    that is a list of strings written out is that list of turns, each string literal one turn, whether
    commas part them (``["Hi!", "How was your weekend?"]`` as JSON writes it, ``['Hi!', ...]`` as pandas
    writes a list column to CSV) or only spaces and line breaks (``['Hi!' 'How was your weekend?']``, a
    NumPy array as ``datasets(...).to_pandas().to_csv()`` writes it): never two literals glued into one
    turn, as Python's own reading would. Decided here, for every reader and the metric alike."""
    stripped = text.strip()
    if stripped.startswith("[") and stripped.endswith("]"):
        turns = _written_list(stripped)
        if turns is not None:
            return turns
    return text.splitlines() if text else []


def _written_list(text: str) -> list[str] | None:
    """The string literals of a written-out list, one item each (``None``: not a list of string literals)."""
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(text).readline)
                  if t.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.ENDMARKER)]
    except (tokenize.TokenError, SyntaxError):
        return None
    if len(tokens) < 2 or tokens[0].string != "[" or tokens[-1].string != "]":
        return None
    turns: list[str] = []
    comma = True  # where a comma may not stand: first, or after another comma
    for token in tokens[1:-1]:
        if token.type == tokenize.OP and token.string == ",":
            if comma:
                return None
            comma = True
            continue
        comma = False
        if token.type != tokenize.STRING:
            return None
        try:
            value = ast.literal_eval(token.string)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
        if not isinstance(value, str):
            return None
        turns.append(value)
    return turns


def strip_speaker(turn: str) -> str:
    """Remove one leading speaker label such as ``User: ``, ``System: ``, ``A: `` or ``Speaker 2: ``."""
    return _SPEAKER.sub("", turn, count=1)
