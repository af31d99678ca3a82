"""The errors a user can fix: bad input or bad settings, each raised before any model work with a
message that names the item and what to do. Anything else that escapes is a bug: the command line
shows it as one (``full-metric --debug ...`` for its traceback)."""

from __future__ import annotations


class UsageError(ValueError):
    """Bad input or settings; the message says which item and what is wrong. A ``ValueError``, so
    code that catches ``ValueError`` keeps working."""


class UsageTypeError(UsageError, TypeError):
    """A value of the wrong type given by the user (also a ``TypeError``)."""


def install_hint(extra: str, packages: str) -> str:
    """How to install what an optional feature needs, said the one way: the packages by name (this
    package is installed from a checkout or the Space, not from the package index), or its extra in a
    checkout (``pip install -e ".[EXTRA]"``)."""
    return f'pip install {packages} (in a checkout: pip install -e ".[{extra}]")'
