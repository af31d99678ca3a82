"""Issue 61's lever 3, its pilot: FULL plus a weight times the response's mutual information with its context
(log P(response | context) - log P(response), full_metric.research.response_pmi), on the first CONTEXTS of the
probe's 241 held-out dialogs, as the contrast pilot (pilot_contrast.py) was run. The weight is chosen on the
held-out pairs only (adapt's fixed yardstick: the default mix, one pair per held-out dialog), leaving out the
pairs of the dialogs probed here, so that no probed context chooses it. It decides whether the setting is built.

    python reports/smollm2-relevance/pilot_mi.py --contexts 40      (writes pilot-mi.json)
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from full_metric import FullScorer
from full_metric.research.adapt import HELD_OUT_SEED
from full_metric.research.adapt_data import held_out_dialogs
from full_metric.research.complaints import DEFAULT_MIX, make_pairs
from full_metric.research.probe import TIES, answers_record, gaming_probe, markdown_table
from full_metric.research.response_pmi import choose_weight, response_pmi

HERE = Path(__file__).resolve().parent
WEIGHTS = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--contexts", type=int, default=40)
    parser.add_argument("--judge", default="smollm2-complaints")
    parser.add_argument("--pairs", type=int, default=None, help="at most this many held-out pairs (default: all)")
    parser.add_argument("-o", "--output", type=Path, default=HERE / "pilot-mi.json")
    args = parser.parse_args()
    held = held_out_dialogs(["chitchat"], 0.06)
    pairs = make_pairs(held, random.Random(HELD_OUT_SEED + 1), DEFAULT_MIX)
    assert len(pairs) == len(held) and all(p.real in d for p, d in zip(pairs, held)), "a pair per held-out dialog"
    choosing = pairs[args.contexts :][: args.pairs]
    judge = FullScorer(args.judge, progress=False)
    alone: dict[str, float] = {}

    def margins(score):
        contexts = [list(p.context) for p in choosing]
        real = score(contexts, [p.real for p in choosing])
        corrupted = score(contexts, [p.corrupted for p in choosing])
        return [r - c for r, c in zip(real, corrupted)]

    def plain(contexts, responses):
        return judge.score(contexts, responses).scores

    def pmi(contexts, responses):
        return response_pmi(judge, contexts, responses, alone)

    weight, accuracy = choose_weight(margins(plain), margins(pmi), WEIGHTS)

    def combined(contexts, responses):
        return [f + weight * m for f, m in zip(plain(contexts, responses), pmi(contexts, responses))]

    dialogs = held[: args.contexts]
    record: dict = {"contexts": len(dialogs), "seed": 0, "ties": TIES, "weight": weight,
                    "weight_chosen_on": f"{len(choosing)} held-out pairs of the other held-out dialogs",
                    "pair_accuracy": {str(w): a for w, a in accuracy.items()}, "judges": {}}
    for name, score in (("plain", plain), ("plus mutual information", combined), ("mutual information alone", pmi)):
        record["judges"][name] = {"signature": judge.signature(), "answers": answers_record(gaming_probe(score, dialogs, 0))}
    args.output.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"weight {weight} (held-out pair accuracy {accuracy[weight]:.3f}; plain {accuracy[0.0]:.3f})")
    print(markdown_table(record))


if __name__ == "__main__":
    main()
