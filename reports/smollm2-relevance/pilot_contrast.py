"""The pilot of lever 3 (reproduce.sh says what it decides: whether to build the contrast setting, nothing
in the rule): smollm2-complaints on the first CONTEXTS of the probe's held-out dialogs, with plain FULL and
with FULL minus the same response's FULL with no context, scored here by two plain calls of the scorer.
The probe's dialogs are these few, so the same-topic answers come from among them: compare the two rows
of an answer with each other, not with probe.json.

    python reports/smollm2-relevance/pilot_contrast.py --contexts 40      (writes pilot-contrast.json)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from full_metric import FullScorer
from full_metric.research.adapt_data import held_out_dialogs
from full_metric.research.probe import TIES, answers_record, gaming_probe, markdown_table

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--contexts", type=int, default=40)
    parser.add_argument("--judge", default="smollm2-complaints")
    args = parser.parse_args()
    dialogs = held_out_dialogs(["chitchat"], 0.06)[: args.contexts]
    judge = FullScorer(args.judge, progress=False)
    alone: dict[str, float] = {}  # a response's FULL with no context, scored once

    def plain(contexts, responses):
        return judge.score(contexts, responses).scores

    def contrast(contexts, responses):
        new = sorted({r for r in responses if r not in alone})
        if new:
            alone.update(zip(new, judge.score([[]] * len(new), new).scores))
        return [s - alone[r] for s, r in zip(plain(contexts, responses), responses)]

    record: dict = {"contexts": len(dialogs), "seed": 0, "ties": TIES, "judges": {}}
    for name, score in (("plain", plain), ("contrast", contrast)):
        record["judges"][name] = {"signature": judge.signature(), "answers": answers_record(gaming_probe(score, dialogs, 0))}
    (HERE / "pilot-contrast.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(markdown_table(record))


if __name__ == "__main__":
    main()
