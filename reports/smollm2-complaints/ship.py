"""Choose the shipped judge by the rule written in reproduce.sh before any run, and put its adapter in
the package (full_metric/judges/smollm2-complaints): of the seeds' judges, the highest held-out pair
accuracy among those whose held-out LM loss did not rise, ties to the lower seed.

    python reports/smollm2-complaints/ship.py JUDGES_FOLDER PAIRS SEED [SEED...]

Writes reports/smollm2-complaints/chosen.json (the seeds' figures and the choice) and copies the chosen
judge's adapter folder (adapter_config.json, adapter_model.safetensors, adaptation.json); the card
(README.md there) is written by make_report.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from full_metric.research.judge_folder import choose_seed, package_adapter

HERE = Path(__file__).resolve().parent
PACKAGED = HERE.parents[1] / "full_metric" / "judges" / "smollm2-complaints"


def choose(records: dict[int, dict]) -> int:
    """The rule (:func:`~full_metric.research.judge_folder.choose_seed`); stops when no seed is fit."""
    chosen = choose_seed(records)
    if chosen is None:
        raise SystemExit("no seed's judge kept its held-out LM loss from rising: none is shipped")
    return chosen


def main(judges: str, pairs: str, *seeds: str) -> None:
    folders = {int(s): Path(judges) / f"smollm2-complaints-{pairs}-s{s}" for s in seeds}
    records = {s: json.loads((HERE / f"adaptation-s{s}.json").read_text()) for s in folders}
    chosen = choose(records)
    # the base is found by its packaged file's name (runs before the scrub in adapt wrote this machine's path)
    package_adapter(folders[chosen], PACKAGED)
    (HERE / "chosen.json").write_text(json.dumps({"seed": chosen, "seeds": {
        s: {k: r[k] for k in ("held_out_pair_accuracy_before", "held_out_pair_accuracy_after", "held_out_loss_before",
                              "held_out_loss_after", "digest", "seconds")} for s, r in records.items()}}, indent=1) + "\n")
    print(f"seed {chosen} shipped")


if __name__ == "__main__":
    main(*sys.argv[1:])
