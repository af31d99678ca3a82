"""The follow-up data module: the paper's sets and Table 3's 63 candidates."""

from __future__ import annotations

import pytest

from full_metric import CANDIDATES, NAMED_SETS, PAPER_FIVE, REFERENCE_PACKAGE_DEFAULT, select
from full_metric.follow_ups import resolve_follow_ups


def test_table_3():
    """The 63 candidates of the paper's Table 3, with their categories and correlations, as printed."""
    assert len(CANDIDATES) == 63
    assert len({c.text for c in CANDIDATES}) == 63
    assert set(PAPER_FIVE) <= {c.text for c in CANDIDATES}
    top = CANDIDATES[0]
    assert (top.text, top.category, top.level, top.polarity) == ("Not really relevant here.", "specific", "turn", "negative")
    assert (top.turn_spearman, top.dialog_spearman) == (0.48, 0.65)
    assert CANDIDATES[-1].text == "Wow! That's really cool!" and CANDIDATES[-1].dialog_spearman == -0.08
    assert sum(c.polarity == "negative" for c in CANDIDATES) == 42


def test_reference_default_has_the_missing_comma():
    assert len(REFERENCE_PACKAGE_DEFAULT) == 4
    assert "You're really confusing.You're really boring." in REFERENCE_PACKAGE_DEFAULT


def test_select():
    """Selecting candidates by level, polarity and category; unknown values refused."""
    negative_turn = select(level="turn", polarity="negative")
    assert negative_turn and all(c.level == "turn" and c.polarity == "negative" for c in negative_turn)
    assert [c.text for c in negative_turn] == list(NAMED_SETS["negative-turn"])
    assert {c.category for c in select(category=["likeable", "fluent"])} == {"likeable", "fluent"}
    with pytest.raises(ValueError, match="unknown follow-up categories"):
        select(category="tasty")
    with pytest.raises(ValueError, match="level"):
        select(level="word")


def test_resolve():
    """Follow-up arguments (None, a set name, a list) resolve to the follow-ups, bad items refused."""
    assert resolve_follow_ups(None) == PAPER_FIVE
    assert resolve_follow_ups("all") == tuple(c.text for c in CANDIDATES)
    assert resolve_follow_ups(["A?", "B!"]) == ("A?", "B!")
    with pytest.raises(TypeError, match="must be a string"):
        resolve_follow_ups(["A?", 1])
