"""The judge this package is to ship (issue 37): ``smollm2-complaints``, a LoRA adapter in
``full_metric/judges/``, chosen among the seeds' judges by a rule fixed before the runs. (The tests of the
shipped adapter itself, loaded by name offline, come with it: commit 0ac9e81 holds them.)"""

from __future__ import annotations

from pathlib import Path

import pytest


FOLDER = Path(__file__).resolve().parents[2] / "full_metric" / "judges" / "smollm2-complaints"


def test_the_shipping_rule_takes_the_best_held_out_accuracy_whose_lm_loss_did_not_rise():
    import importlib.util

    spec = importlib.util.spec_from_file_location("ship", FOLDER.parents[2] / "reports" / "smollm2-complaints" / "ship.py")
    ship = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ship)

    def record(accuracy: float, before: float, after: float) -> dict:
        return {"held_out_pair_accuracy_after": accuracy, "held_out_loss_before": before, "held_out_loss_after": after}

    assert ship.choose({0: record(0.70, 3.6, 3.5), 1: record(0.75, 3.6, 3.4)}) == 1
    assert ship.choose({0: record(0.70, 3.6, 3.5), 1: record(0.90, 3.6, 3.7)}) == 0  # its LM loss rose
    assert ship.choose({0: record(0.80, 3.6, 3.5), 1: record(0.80, 3.6, 3.4)}) == 0  # a tie: the lower seed
    with pytest.raises(SystemExit, match="none is shipped"):
        ship.choose({0: record(0.9, 3.6, 3.7)})
