"""Check that a judge rebuilt by reproduce.sh is the judge its kept record describes: every field of the
two adaptation records agrees except the wall time (``seconds``): the settings, the digest, and the held-out
LM loss and pair accuracy the trained judge gives (to the last bit, which a judge trained otherwise does not
reach). Exits with a message naming each field that differs (and both values) otherwise.

    python reports/smollm2-complaints/same_judge.py KEPT_RECORD REBUILT_RECORD
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

#: Fields a rebuild may change: how long it took.
MAY_DIFFER = frozenset({"seconds"})


def differences(kept: dict, rebuilt: dict) -> list[str]:
    """One line per field (other than :data:`MAY_DIFFER`) that the two records do not share."""
    fields = sorted((kept.keys() | rebuilt.keys()) - MAY_DIFFER)
    return [f"{field}: kept {kept.get(field, '(absent)')!r}, rebuilt {rebuilt.get(field, '(absent)')!r}"
            for field in fields if kept.get(field, "(absent)") != rebuilt.get(field, "(absent)")]


def main(argv: list[str]) -> None:
    kept_path, rebuilt_path = (Path(a) for a in argv)
    lines = differences(json.loads(kept_path.read_text()), json.loads(rebuilt_path.read_text()))
    if lines:
        raise SystemExit(f"the judge rebuilt in {rebuilt_path.parent} is not the one {kept_path} records:\n  "
                         + "\n  ".join(lines))
    print(f"{rebuilt_path.parent}: the judge {kept_path} records (digest {json.loads(kept_path.read_text())['digest']})")


if __name__ == "__main__":
    main(sys.argv[1:])
