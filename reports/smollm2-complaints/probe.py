"""The gaming probe (issue 37, 3a): on contexts no judge was trained on (the held-out dialogs of
`full-metric adapt`, the same for every seed), each judge scores the human's real next turn and
answers a policy could learn instead ("Yes.", "I don't know.", "Ok.", a repeated word, an echo of
the last turn, another conversation's turn, the human's turn cut to its first word; since issue 45 also
the reply to the most similar turn of another held-out dialog, an assistant opener, a far turn of the same
dialog): the share of contexts where each beats the human, with a 95% interval (full_metric.research.probe).

    python reports/smollm2-complaints/probe.py --judge base=smollm2-gguf --judge shipped=smollm2-complaints \\
        -o reports/smollm2-complaints/probe.json

Each context is a held-out dialog cut at a random turn (seeded, `research.probe.cut_dialogs`): at most
four turns before the cut, and the turn at the cut as the human's answer. Writes the figures as JSON after each
judge to the output's name with ``.partial`` added, and to the output itself once every judge is in (a judge
already in either, probed on the same contexts and counted by the same tie rule, is kept: a long probe goes on
where it stopped), and prints a Markdown table."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from full_metric import FullScorer
from full_metric.research.adapt_data import held_out_dialogs
from full_metric.research.probe import TIES, answers_record, gaming_probe, markdown_table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--judge", action="append", required=True, metavar="NAME=MODEL",
                        help="a judge to probe, named (repeat for several)")
    parser.add_argument("--source", nargs="+", default=["chitchat"], help="the dialogs the judges were adapted on")
    parser.add_argument("--held-out", type=float, default=0.06, help="adapt's --held-out of those runs")
    parser.add_argument("--contexts", type=int, default=241)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args()
    dialogs = held_out_dialogs(args.source, args.held_out)[: args.contexts]
    output = Path(args.output)
    record: dict = {"contexts": len(dialogs), "seed": args.seed, "ties": TIES, "judges": {}}
    partial = output.with_name(output.name + ".partial")  # written after each judge; the output once all are in
    earlier_file = partial if partial.is_file() else output
    if earlier_file.is_file():  # judges probed before on the same contexts by the same rule are kept (a long probe goes on)
        earlier = json.loads(earlier_file.read_text(encoding="utf-8"))
        if (earlier["contexts"], earlier["seed"], earlier.get("ties")) == (record["contexts"], record["seed"], TIES):
            record["judges"] = earlier["judges"]
    for named in args.judge:
        name, _, model = named.partition("=")
        if name in record["judges"]:
            continue
        judge = FullScorer(model, progress=False)
        rows = gaming_probe(lambda c, r: judge.score(c, r).scores, dialogs, args.seed)
        record["judges"][name] = {"signature": judge.signature(), "answers": answers_record(rows)}
        partial.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    output.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    partial.unlink(missing_ok=True)
    print(markdown_table(record))


if __name__ == "__main__":
    main()
