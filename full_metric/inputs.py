"""Checks of user input, raised before any model work, naming the item and the problem."""

from __future__ import annotations

from typing import Any, Sequence

from .errors import UsageError, UsageTypeError
from .turns import strip_speaker


def _check_list(value: Any, name: str) -> None:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise UsageTypeError(f"{name} must be a list, got {type(value).__name__}")


def check_turns(turns: Any, name: str) -> list[str]:
    """A dialog's turns: a list of strings (empty strings allowed)."""
    if isinstance(turns, str):
        raise UsageTypeError(f"{name} is a string; give the dialog as a list of turn strings")
    _check_list(turns, name)
    for j, turn in enumerate(turns):
        if not isinstance(turn, str):
            raise UsageTypeError(f"{name}[{j}] must be a string, got {type(turn).__name__}")
    return list(turns)


def check_dialogs(contexts: Any, responses: Any = None, names: tuple[str, str] = ("contexts", "responses")
                  ) -> list[list[str]]:
    """Validate contexts (and responses, for turn level); return each dialog as one list of turns.

    Turn level (``responses`` given): a dialog is its context followed by its response; a
    context may be empty (a first turn). An empty or blank response is a response, scored as the reply it
    is, in every face: a generation can be empty, and leaving it out of a mean would reward silence.
    Dialog level: a dialog is its context, at least one turn. ``names``: what the caller calls the
    contexts and the responses, for its messages (the metric's ``references`` and ``predictions``).

    Raises:
        TypeError: a container, turn or response of the wrong type, or ``None``.
        ValueError: different numbers of contexts and responses, an empty dialog.
    """
    contexts_name, responses_name = names
    _check_list(contexts, contexts_name)
    if responses is not None:
        _check_list(responses, responses_name)
        if len(responses) != len(contexts):
            raise UsageError(f"got {len(contexts)} {contexts_name} but {len(responses)} {responses_name}; "
                             "they must pair up")
    dialogs = []
    for i, context in enumerate(contexts):
        turns = check_turns(context, f"{contexts_name}[{i}]")
        if responses is None:
            if not turns:
                raise UsageError(f"{contexts_name}[{i}] is an empty dialog; dialog-level scoring needs at least one "
                                 "turn")
        else:
            response = responses[i]
            if not isinstance(response, str):
                raise UsageTypeError(f"{responses_name}[{i}] must be a string, got {type(response).__name__}")
            turns = [*turns, response]
        dialogs.append(turns)
    return dialogs


def strip_speakers(dialogs: list[list[str]], turn_level: bool, name: str = "responses") -> list[list[str]]:
    """Each turn without its speaker label (:func:`full_metric.turns.strip_speaker`); at turn level
    a response that was only a label is refused, naming it (``name``: what the caller calls the responses)."""
    stripped = []
    for i, dialog in enumerate(dialogs):
        turns = [strip_speaker(t) for t in dialog]
        if turn_level and not turns[-1].strip():
            raise UsageError(f"{name}[{i}] is only a speaker label ({dialog[-1]!r})")
        stripped.append(turns)
    return stripped
