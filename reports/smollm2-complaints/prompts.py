"""The GRPO runs' prompts (issue 37, 3b): contexts for the policy to train on, cut from the dialogs the
judges were adapted on, and contexts to measure it on, cut from the dialogs every judge's adaptation
held out (the gaming probe's contexts, in its order). Both as JSON Lines (``context``, ``response``:
the human's turn) for ``examples/grpo_with_full.py --prompts TRAIN --held-out-prompts HELD``.

    python reports/smollm2-complaints/prompts.py --train 200 -o runs/smollm2-complaints
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from full_metric.research.adapt_data import held_out_size, read_dialogs, split_held_out
from full_metric.research.probe import cut_dialogs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", nargs="+", default=["chitchat"], help="the dialogs the judges were adapted on")
    parser.add_argument("--held-out", type=float, default=0.06, help="adapt's --held-out of those runs")
    parser.add_argument("--train", type=int, default=200, help="training contexts to write")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-o", "--output", required=True, help="the folder for train.jsonl and held.jsonl")
    args = parser.parse_args()
    dialogs = read_dialogs(args.source)
    split_held_out(dialogs)
    n_held = held_out_size(len(dialogs), args.held_out)
    folder = Path(args.output)
    folder.mkdir(parents=True, exist_ok=True)
    for name, part in (("held", dialogs[:n_held]), ("train", dialogs[n_held : n_held + args.train])):
        contexts, humans = cut_dialogs(part, args.seed)
        rows = (json.dumps({"context": c, "response": h}) for c, h in zip(contexts, humans))
        (folder / f"{name}.jsonl").write_text("".join(r + "\n" for r in rows), encoding="utf-8")
        print(f"{name}.jsonl: {len(contexts)} contexts")


if __name__ == "__main__":
    main()
