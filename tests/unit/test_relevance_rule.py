"""The choosing rule of issue 45 (reports/smollm2-relevance/choose.py) on made-up probe figures whose
outcome is worked out by hand: an ineligible lever (its held-out LM loss rose) is never chosen, more
bar parts win, then fewer relevance wins, then the cheaper lever; the seed by issue 37's rule; it ships
only with fewer relevance wins and no issue-37 answer above smollm2-complaints' upper bound."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "reports" / "smollm2-relevance" / "choose.py"
spec = importlib.util.spec_from_file_location("choose", SCRIPT)
choose_module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(choose_module)  # type: ignore[union-attr]

ANSWERS = ("Yes.", "I don't know.", "Ok.", "repeated word", "echo", "other conversation", "first word", "same topic",
           "assistant opener", "same conversation, far")


def _answers(**shares: float) -> dict[str, dict]:
    """Each answer at 2% of 100 contexts (upper bound 7%) unless given; wins = share * 100."""
    out = {}
    for a in ANSWERS:
        share = shares.get(a.replace(" ", "_").replace(",", "").replace(".", "").replace("'", ""), 0.02)
        out[a] = {"beats_human": share, "wins": round(share * 100), "contexts": 100, "low": 0.0, "high": share + 0.05}
    return out


def _record(loss_after: float, pairs: int = 2000, accuracy: float = 0.9) -> dict:
    return {"held_out_loss_before": 3.0, "held_out_loss_after": loss_after, "pairs": pairs, "base_model": "m",
            "held_out_pair_accuracy_before": 0.6, "held_out_pair_accuracy_after": accuracy, "digest": "d"}


SHIPPED = _answers(other_conversation=0.22, same_topic=0.30, assistant_opener=0.40)


def test_more_bar_parts_win_over_fewer_relevance_wins():
    probe = {"judges": {"shipped": {"answers": SHIPPED},
                        # a: other 9% (part met), topic 14% (met: <= 15%), gamed all 2% (met): 3 parts, 9+14+2+2 = 27 wins
                        "a": {"answers": _answers(other_conversation=0.09, same_topic=0.14)},
                        # b: other 3%, topic 16% (not met), 2 parts but only 3+16+2+2 = 23 wins
                        "b": {"answers": _answers(other_conversation=0.03, same_topic=0.16)}}}
    records = {"a-s0": _record(2.9, pairs=4000), "b-s0": _record(2.9)}
    result = choose_module.choose(["b", "a"], [0], probe, records)
    assert result["levers"]["a"]["parts_met"] == 3 and result["levers"]["b"]["parts_met"] == 2
    assert (result["levers"]["a"]["relevance_wins"], result["levers"]["b"]["relevance_wins"]) == (27, 23)
    assert result["chosen"] == "a" and result["ships"]  # 27 < 22 + 30 + 40 + 2 = 94 shipped wins


@pytest.mark.parametrize("order", [["a", "b"], ["b", "a"]])
def test_ties_go_to_fewer_relevance_wins_then_the_cheaper_lever(order):
    same = _answers(other_conversation=0.05, same_topic=0.10)
    probe = {"judges": {"shipped": {"answers": SHIPPED}, "a": {"answers": same}, "b": {"answers": dict(same)}}}
    assert choose_module.choose(order, [0], probe, {"a-s0": _record(2.9, 4000), "b-s0": _record(2.9, 2000)}
                                )["chosen"] == "b"
    fewer = _answers(other_conversation=0.04, same_topic=0.10)
    probe["judges"]["a"]["answers"] = fewer
    assert choose_module.choose(order, [0], probe, {"a-s0": _record(2.9, 4000), "b-s0": _record(2.9, 2000)}
                                )["chosen"] == "a"


def test_a_lever_whose_lm_loss_rose_is_not_chosen_and_the_seed_follows_issue_37s_rule():
    probe = {"judges": {"shipped": {"answers": SHIPPED}, "a": {"answers": _answers(other_conversation=0.01)},
                        "b": {"answers": _answers(other_conversation=0.09)},
                        "b seed 1": {"answers": _answers(other_conversation=0.09)}}}
    records = {"a-s0": _record(3.1), "b-s0": _record(2.9, accuracy=0.8), "b-s1": _record(2.95, accuracy=0.85)}
    result = choose_module.choose(["a", "b"], [0, 1], probe, records)
    assert result["chosen"] == "b" and not result["levers"]["a"]["eligible"] and result["seed"] == 1
    records["b-s1"] = _record(3.2, accuracy=0.99)  # the better seed's loss rose: seed 0
    assert choose_module.choose(["a", "b"], [0, 1], probe, records)["seed"] == 0
    records["b-s1"] = _record(2.9, accuracy=0.8)  # a tie: the lower seed
    assert choose_module.choose(["a", "b"], [0, 1], probe, records)["seed"] == 0


def test_an_issue_37_answer_above_the_shipped_judges_upper_bound_stops_shipping():
    probe = {"judges": {"shipped": {"answers": SHIPPED}, "a": {"answers": _answers(Ok=0.08)}}}
    result = choose_module.choose(["a"], [0], probe, {"a-s0": _record(2.9)})
    assert result["chosen"] == "a" and not result["ships"]  # "Ok." 8% > shipped's 2% + 5%
    assert result["ship_reasons"]["issue 37 answers above smollm2-complaints' upper bound"] == ["Ok."]


def test_whether_a_judge_ships_is_read_on_the_probe_of_the_seed_that_would_ship():
    """Seed 1 of the chosen lever has the higher held-out pair accuracy, so it would ship; its own probe
    decides (its relevance wins are above smollm2-complaints' although seed 0's are below), and without
    its probe no decision is made."""
    spec = importlib.util.spec_from_file_location("relevance_report", SCRIPT.parent / "make_report.py")
    report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(report)  # type: ignore[union-attr]
    probe = {"judges": {"shipped": {"answers": SHIPPED}, "mix": {"answers": _answers(other_conversation=0.08)}}}
    records = {"mix-s0": _record(2.9, accuracy=0.85), "mix-s1": _record(2.9, accuracy=0.9)}
    with pytest.raises(SystemExit, match="probe 'mix seed 1' first"):
        choose_module.choose(["mix"], [0, 1], probe, records)
    probe["judges"]["mix seed 1"] = {"answers": _answers(other_conversation=0.4, same_topic=0.3, assistant_opener=0.4)}
    result = choose_module.choose(["mix"], [0, 1], probe, records)
    assert (result["seed"], result["ships_judge"], result["ships"]) == (1, "mix seed 1", False)
    assert report.bar_verdict(probe, result, {})[0] == "- other conversation <= 10%: **not met** (40%)"
    assert choose_module.choose(["mix"], [0], probe, records)["ships"] is True  # seed 0 alone: its own probe


def test_the_larger_base_is_needed_when_no_eligible_lever_meets_all_three_probe_parts():
    """choose.larger_base_needed, figures worked out by hand: 'a' meets all three parts (other 9%, topic 14% <=
    half of 30%, the rest 2%); 'b' two (topic 16%); 'c' all three, but its held-out LM loss rose."""
    probe = {"judges": {"shipped": {"answers": SHIPPED},
                        "a": {"answers": _answers(other_conversation=0.09, same_topic=0.14)},
                        "b": {"answers": _answers(other_conversation=0.03, same_topic=0.16)},
                        "c": {"answers": _answers(other_conversation=0.09, same_topic=0.14)}}}
    records = {"a-s0": _record(2.9), "b-s0": _record(2.9), "c-s0": _record(3.1)}
    assert not choose_module.larger_base_needed(["a", "b"], probe, records)
    assert choose_module.larger_base_needed(["b"], probe, records)
    assert choose_module.larger_base_needed(["b", "c"], probe, records)
    probe["judges"]["a"]["answers"]["Ok."]["beats_human"] = 0.06  # an answer of issue 37's probe above 5%
    assert choose_module.larger_base_needed(["a", "b"], probe, records)


def test_a_tie_of_relevance_wins_with_the_shipped_judge_ships_nothing():
    """Issue 62, 6: 'fewer relevance wins' is strict. Shipped: 22 + 30 + 40 + 2 = 94 relevance wins; a judge with
    94 (20 + 32 + 40 + 2) does not ship, one with 93 (20 + 31 + 40 + 2) does (no issue-37 answer above the bound)."""
    tie = _answers(other_conversation=0.20, same_topic=0.32, assistant_opener=0.40)
    probe = {"judges": {"shipped": {"answers": SHIPPED}, "a": {"answers": tie}}}
    result = choose_module.choose(["a"], [0], probe, {"a-s0": _record(2.9)})
    assert result["levers"]["a"]["relevance_wins"] == 94 and not result["ships"]
    probe["judges"]["a"]["answers"] = _answers(other_conversation=0.20, same_topic=0.31, assistant_opener=0.40)
    assert choose_module.choose(["a"], [0], probe, {"a-s0": _record(2.9)})["ships"]
