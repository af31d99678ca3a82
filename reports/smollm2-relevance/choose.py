"""Apply the rule written in reproduce.sh before the first run (issue 45): which lever's setting is
chosen, and later which of its seeds, and whether it ships. Reads probe.json and the levers'
adaptation records; writes chosen.json and prints the reasoning.

    python reports/smollm2-relevance/choose.py mix pairs2            # the levers' names, seed 0 each
    python reports/smollm2-relevance/choose.py mix pairs2 --seeds 0 1   # and the chosen lever's seeds
    python reports/smollm2-relevance/choose.py mix pairs2 --larger-base-needed   # yes: the Gemma lever is tried

The bar's probe parts (counted as three, in the bar's words): another conversation <= 10%; same topic <=
half of smollm2-complaints' share; every other answer of issue 37's probe <= 5%. Whether the chosen
setting ships is decided on the probe of the seed that would ship (reproduce.sh probes seed 1 too).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from full_metric.research.judge_folder import choose_seed, kept_lm_loss
from full_metric.research.probe import ISSUE_37_ANSWERS

HERE = Path(__file__).resolve().parent
#: Issue 37's probe (the bar's "today's probe"), and the four relevance answers of issue 45.
ISSUE_37 = ISSUE_37_ANSWERS
RELEVANCE = ("other conversation", "same topic", "assistant opener", "same conversation, far")
OTHER_SHARE, TOPIC_FRACTION, GAMED_SHARE = 0.10, 0.5, 0.05


def bar_parts(answers: dict[str, dict], shipped: dict[str, dict]) -> dict[str, bool]:
    """The bar's three probe parts for one judge's probe answers, against smollm2-complaints'."""
    return {
        "other conversation <= 10%": answers["other conversation"]["beats_human"] <= OTHER_SHARE,
        "same topic <= half of smollm2-complaints'":
            answers["same topic"]["beats_human"] <= TOPIC_FRACTION * shipped["same topic"]["beats_human"],
        "every other answer of issue 37's probe <= 5%": all(
            answers[a]["beats_human"] <= GAMED_SHARE for a in ISSUE_37 if a != "other conversation"),
    }


def probe_name(lever: str, seed: int) -> str:
    """A lever's judge as the probe names it: the lever for seed 0, "LEVER seed N" otherwise."""
    return lever if seed == 0 else f"{lever} seed {seed}"


def relevance_wins(answers: dict[str, dict]) -> int:
    return sum(answers[a]["wins"] for a in RELEVANCE)


def larger_base_needed(levers: list[str], probe: dict, records: dict[str, dict]) -> bool:
    """The issue's "if the 135M base cannot get there", as written before pairs2's probe: no eligible lever's
    seed-0 judge (its held-out LM loss did not rise) meets all three of the bar's probe parts."""
    shipped = probe["judges"]["shipped"]["answers"]
    return not any(kept_lm_loss(records[f"{n}-s0"]) and all(bar_parts(probe["judges"][n]["answers"], shipped).values())
                   for n in levers)


def choose(levers: list[str], seeds: list[int], probe: dict, records: dict[str, dict]) -> dict[str, Any]:
    """The rule, step by step (reproduce.sh's header)."""
    shipped = probe["judges"]["shipped"]["answers"]
    rows = {}
    for name in levers:
        record, answers = records[f"{name}-s0"], probe["judges"][name]["answers"]
        parts = bar_parts(answers, shipped)
        rows[name] = {"eligible": kept_lm_loss(record),
                      "held_out_loss": [record["held_out_loss_before"], record["held_out_loss_after"]],
                      "parts": parts, "parts_met": sum(parts.values()), "relevance_wins": relevance_wins(answers),
                      "pairs": record["pairs"], "base": record["base_model"]}
    eligible = [n for n in levers if rows[n]["eligible"]]
    chosen = (min(eligible, key=lambda n: (-rows[n]["parts_met"], rows[n]["relevance_wins"], rows[n]["pairs"],
                                           levers.index(n))) if eligible else None)
    result: dict[str, Any] = {"levers": rows, "chosen": chosen}
    if chosen and len(seeds) > 1:
        seed_rows = {s: records[f"{chosen}-s{s}"] for s in seeds}
        result["seed"] = choose_seed(seed_rows)
        result["seeds"] = {s: {k: r[k] for k in ("held_out_pair_accuracy_before", "held_out_pair_accuracy_after",
                                                "held_out_loss_before", "held_out_loss_after", "digest")}
                           for s, r in seed_rows.items()}
    if chosen:
        judge = probe_name(chosen, result.get("seed") or 0)
        if judge not in probe["judges"]:
            raise SystemExit(f"probe {judge!r} first: whether a judge ships is decided on its own probe")
        result["ships_judge"] = judge
        answers = probe["judges"][judge]["answers"]
        beats = {a: answers[a]["beats_human"] > shipped[a]["high"] for a in ISSUE_37}
        result["ships"] = (relevance_wins(answers) < relevance_wins(shipped)) and not any(beats.values())
        result["ship_reasons"] = {"relevance wins (chosen, smollm2-complaints)": [relevance_wins(answers),
                                                                                 relevance_wins(shipped)],
                                  "issue 37 answers above smollm2-complaints' upper bound": [a for a, b in beats.items()
                                                                                             if b]}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("levers", nargs="+", help="the levers' names (judge folders smollm2-relevance-NAME-sSEED)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--larger-base-needed", action="store_true",
                        help="only print yes or no: whether no eligible lever meets all three probe parts")
    args = parser.parse_args()
    probe = json.loads((HERE / "probe.json").read_text(encoding="utf-8"))
    records = {p.stem.removeprefix("adaptation-"): json.loads(p.read_text(encoding="utf-8"))
               for p in HERE.glob("adaptation-*.json")}
    if args.larger_base_needed:
        print("yes" if larger_base_needed(args.levers, probe, records) else "no")
        return
    result = choose(args.levers, args.seeds, probe, records)
    (HERE / "chosen.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
