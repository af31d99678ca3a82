"""The judges made before issue 45, measured on the levers' held-out yardstick by today's adapt
(full_metric.research.adapt.measure_held_out): held-out LM loss and held-out pair accuracy on the same
241 dialogs and pairs with the settings of the levers' runs. smollm2-complaints' own record was measured
by the adapt of the revision that trained it, which cut a long context mid-turn (today: between whole
turns), so its figures there are not on the levers' rendering; these are.

    python reports/smollm2-relevance/held_out.py --judge NAME=MODEL [--judge ...] [--source chitchat]
        [--held-out 0.06] [--max-length 256] [--batch-size 4] -o held-out.json

Each judge's row: loss, pair_accuracy and the judge's signature.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from full_metric import FullScorer
from full_metric.research.adapt import measure_held_out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judge", action="append", required=True, metavar="NAME=MODEL")
    parser.add_argument("--source", nargs="+", default=["chitchat"], help="the dialogs the levers were adapted on")
    parser.add_argument("--held-out", type=float, default=0.06)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("-o", "--output", type=Path, required=True)
    args = parser.parse_args(argv)
    judges = dict(j.split("=", 1) for j in args.judge)
    record = {"sources": args.source, "held_out": args.held_out, "max_length": args.max_length,
              "batch_size": args.batch_size, "judges": {}}
    for name, model in judges.items():
        scorer = FullScorer(model, dtype="float32", progress=False)  # as adapt loads its judge
        measured = measure_held_out(scorer, record["sources"], held_out=args.held_out, max_length=args.max_length,
                                    batch_size=args.batch_size)
        record["judges"][name] = {**measured, "signature": scorer.signature()}
    args.output.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
