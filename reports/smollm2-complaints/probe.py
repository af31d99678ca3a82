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
judge to the output's partial record in the cache folder outside the checkout (``full_metric.cache.checkpoint_for``:
a stop or a checkout laid anew loses no judge probed), and to the output itself once every judge is in (a judge
already in either with the same signature, probed on the same contexts and counted by the same tie rule, is kept:
a long probe goes on where it stopped; so is one found in a ``--reuse`` probe, its file named in its record's
``taken_from``), and prints a Markdown table. A judge whose folder is gone (a new machine) is named by
``--kept NAME=ADAPTATION_JSON``: its earlier record in the output is kept when its signature names the adaptation
digest of that record (the judge was made by that run), and the probe stops otherwise."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from full_metric import FullScorer
from full_metric.cache import checkpoint_for
from full_metric.research.adapt_data import held_out_dialogs
from full_metric.research.probe import TIES, answers_record, gaming_probe, markdown_table


def _same_probe(path: Path, record: dict) -> dict:
    """The judges of the probe in ``path`` when it was made on ``record``'s contexts by the same tie rule."""
    if not path.is_file():
        return {}
    earlier = json.loads(path.read_text(encoding="utf-8"))
    same = (earlier["contexts"], earlier["seed"], earlier.get("ties")) == (record["contexts"], record["seed"], TIES)
    return earlier["judges"] if same else {}


def _kept(own: dict, name: str, adaptation: Path) -> dict:
    """The earlier record of judge ``name``, whose folder is gone, when it is the judge ``adaptation`` records."""
    digest = json.loads(adaptation.read_text(encoding="utf-8"))["digest"]
    if f"+adapted:{digest}|" not in own.get(name, {}).get("signature", ""):
        raise SystemExit(f"judge {name!r}: its folder is gone and this probe holds no record of the judge {adaptation} "
                         f"describes (adaptation digest {digest}) on the same contexts and tie rule: rebuild it")
    return own[name]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--judge", dest="judges", action="append", required=True, metavar="NAME=MODEL",
                        type=lambda named: ("judge", named), help="a judge to probe, named (repeat for several)")
    parser.add_argument("--kept", dest="judges", action="append", metavar="NAME=ADAPTATION_JSON",
                        type=lambda named: ("kept", named),
                        help="a judge probed before whose folder is gone: its earlier record is kept (in this order "
                             "among the judges) when its signature names the digest of the adaptation record given")
    parser.add_argument("--source", nargs="+", default=["chitchat"], help="the dialogs the judges were adapted on")
    parser.add_argument("--held-out", type=float, default=0.06, help="adapt's --held-out of those runs")
    parser.add_argument("--contexts", type=int, default=241)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--reuse", nargs="+", default=[], metavar="PROBE_JSON",
                        help="other probes' records: a judge with the same signature there, probed on the same contexts "
                             "by the same rule, is taken from them, not probed again")
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args()
    dialogs = held_out_dialogs(args.source, args.held_out)[: args.contexts]
    output = Path(args.output)
    record: dict = {"contexts": len(dialogs), "seed": args.seed, "ties": TIES, "judges": {}}
    partial = checkpoint_for(output)  # written after each judge; the output once all are in
    partial.parent.mkdir(parents=True, exist_ok=True)
    own = {**_same_probe(output, record), **_same_probe(partial, record)}
    others = {name: _same_probe(Path(name), record) for name in args.reuse}
    for kind, named in args.judges:
        name, _, model = named.partition("=")
        if kind == "kept":
            record["judges"][name] = _kept(own, name, Path(model))
            continue
        judge = FullScorer(model, progress=False)
        signature = judge.signature()
        if own.get(name, {}).get("signature") == signature:  # probed before (a long probe goes on)
            record["judges"][name] = own[name]
            continue
        taken = next(((source, r) for source, judges in others.items() for r in judges.values()
                      if r["signature"] == signature), None)
        if taken:
            record["judges"][name] = {**taken[1], "taken_from": taken[1].get("taken_from", taken[0])}
        else:
            rows = gaming_probe(lambda c, r: judge.score(c, r).scores, dialogs, args.seed)
            record["judges"][name] = {"signature": signature, "answers": answers_record(rows)}
        partial.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    output.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    partial.unlink(missing_ok=True)
    print(markdown_table(record))


if __name__ == "__main__":
    main()
