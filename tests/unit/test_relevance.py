"""The relevance yardstick and corruptions (issue 45): the gaming probe's counts and Wilson intervals
checked against a stand-in scorer whose wins are known and bounds worked out by hand (ties are no
win); same-topic replies never come from the pair's own conversation; "other" and "topic" corruptions
never come from the pair's own dialog, for any draw; a far turn is far."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from full_metric.research.pairs import make_pairs
from full_metric.research.probe import FAR, MEASURED_OPENERS, gaming_probe, probe_answers
from full_metric.research.topics import TopicIndex

#: Two-turn dialogs: every cut is at turn 1, so each context and human turn is known whatever the seed.
DIALOGS = [[f"Tell me about {topic}. win" if i < 3 else f"Tell me about {topic}.", f"I love {topic} a lot."]
           for i, topic in enumerate(["boats", "trains", "planes", "bikes", "cars", "ships", "rockets"])]


def _wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson's 95% score interval, written out from its formula (not scipy's)."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def _stand_in(contexts, responses) -> list[float]:
    """Human turns ("I love ...") score 10; "Yes." scores 11 where the context's last turn says "win"
    (3 of 7 contexts) and ties at 10 elsewhere; "Ok." ties everywhere; every other answer scores 9."""
    out = []
    for context, response in zip(contexts, responses):
        if response.startswith("I love") or response == "Ok.":
            out.append(10.0)
        elif response == "Yes.":
            out.append(11.0 if "win" in context[-1] else 10.0)
        else:
            out.append(9.0)
    return out


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_the_probe_counts_wins_not_ties_and_gives_wilsons_95_percent(seed):
    rows = {r.answer: r for r in gaming_probe(_stand_in, DIALOGS, seed)}
    yes = rows["Yes."]
    assert (yes.wins, yes.contexts) == (3, 7)  # the three "win" contexts; four ties are no win
    assert (yes.low, yes.high) == pytest.approx(_wilson(3, 7), abs=1e-12)
    assert (yes.low, yes.high) == pytest.approx((0.158, 0.750), abs=5e-4)  # by hand: 3/7 at z = 1.96
    assert (rows["Ok."].wins, rows["Ok."].contexts) == (0, 7)  # ties everywhere: no win
    assert (rows["Ok."].low, rows["Ok."].high) == pytest.approx((0.0, 0.3543), abs=5e-4)
    assert {r.answer for r in rows.values() if r.wins} == {"Yes."}
    far = rows["same conversation, far"]  # two-turn dialogs have no turn 3 away: counted over no context
    assert far.contexts == 0 and far.wins == 0 and math.isnan(far.low)


@pytest.mark.parametrize("seed", range(5))
def test_same_topic_far_and_opener_answers_for_any_draw(seed):
    rng = random.Random(seed)
    words = ["boats", "trains", "rain", "music", "cooking", "chess", "maths", "dogs"]
    dialogs = [[f"{rng.choice(words)} {rng.choice(words)} turn {d}.{t}" for t in range(rng.randint(2, 9))]
               for d in range(40)]
    contexts, humans, answers = probe_answers(dialogs, seed)
    owner = {turn: d for d, dialog in enumerate(dialogs) for turn in dialog}
    for d, (topic, far, opener) in enumerate(zip(answers["same topic"], answers["same conversation, far"],
                                                 answers["assistant opener"])):
        assert topic is not None and owner[topic] != d  # another conversation, never this one
        cut = dialogs[d].index(humans[d])
        if far is None:
            assert all(abs(m - cut) < FAR for m in range(len(dialogs[d])))
        else:
            assert owner[far] == d and abs(dialogs[d].index(far) - cut) >= FAR
        assert opener in MEASURED_OPENERS


def test_the_topic_index_finds_the_most_similar_other_dialog():
    dialogs = [["I sail boats on the lake", "nice"], ["my boats sail on the lake", "boats reply"],
               ["I cook pasta", "pasta reply"]]
    index = TopicIndex(dialogs)
    assert index.replies_to([["I sail boats on the lake"]], [0]) == ["boats reply"]
    assert index.replies_to([["pasta tonight"]], [2]) == [None]  # only dialog 2 shares a word: no other
    assert index.replies_to([["pasta tonight"]], [0]) == ["pasta reply"]


@pytest.mark.parametrize("seed", range(12))
def test_other_and_topic_corruptions_never_come_from_the_pairs_own_dialog(seed):
    """Few dialogs, so that a draw that could land on the pair's own dialog would, in most seeds."""
    rng = random.Random(seed)
    dialogs = [[f"d{d} says {rng.choice(['boats', 'rain', 'chess'])} {t}" for t in range(rng.randint(2, 6))]
               for d in range(8)]
    pairs = make_pairs(dialogs, random.Random(seed), {"other": 1.0, "topic": 1.0, "opener": 0.5})
    assert pairs and {p.kind for p in pairs} <= {"other", "topic", "opener"}
    for p in pairs:
        own = p.context[0].split()[0]
        if p.kind in ("other", "topic"):
            assert not p.corrupted.startswith(own + " "), (p.kind, p)


@pytest.mark.parametrize("seed", [0, 3])
def test_an_answer_that_is_the_human_turn_itself_ties_however_its_call_was_batched(seed):
    """A one-word human turn is its own first word, a turn that repeats the last one its own echo: the same
    dialog, a tie. A stand-in whose every call adds a little more (as two batchings of one dialog differ in
    their last bits) makes every other answer win, so the wins are exactly the answers that differ."""
    # dialogs of two turns, each cut at its second: the human turns and what ties, counted by hand (issue 62, 7)
    dialogs = [["Say something.", "Hey!"], ["Ahoy!", "Ahoy!"], ["Hello?", "Hi there, friend."],
               ["How are you?", "Fine, thanks."], ["Good day.", "Good day."]]
    calls = itertools.count()

    def drifting(contexts, responses):
        offset = next(calls) * 1e-9
        return [10.0 + offset for _ in responses]

    rows = {r.answer: r for r in gaming_probe(drifting, dialogs, seed)}
    assert (rows["first word"].wins, rows["first word"].contexts) == (3, 5)  # "Hey!" and "Ahoy!" are their own
    assert (rows["echo"].wins, rows["echo"].contexts) == (3, 5)  # "Ahoy!" and "Good day." repeat the last turn
    assert (rows["Yes."].wins, rows["Yes."].contexts) == (5, 5)  # no human turn here says "Yes."


def test_a_probe_record_says_how_it_counted_ties():
    from full_metric.research.probe import TIES, tie_rule

    assert tie_rule({"contexts": 7, "ties": TIES}) == TIES
    assert "counted by its two scores" in tie_rule({"contexts": 7}) and tie_rule(None) == "not run yet"


def test_a_probe_names_the_probes_its_rows_were_taken_from():
    from full_metric.research.probe import taken_from

    judges = {"base": {"taken_from": "a.json"}, "new": {}, "shipped": {"taken_from": "a.json"}, "x": {"taken_from": "b"}}
    assert taken_from({"judges": judges}) == (
        "The rows of base, shipped are taken from `a.json` (the same judge signature, contexts and tie rule). "
        "The rows of x are taken from `b` (the same judge signature, contexts and tie rule).")
    assert taken_from({"judges": {"new": {}}}) == taken_from(None) == ""


@pytest.mark.parametrize("seed", range(5))
def test_the_other_dialog_and_far_turn_rules_are_one_for_pairs_and_probe(seed):
    """Issue 62, 8: one draw of another dialog (never the dialog itself, each other one reachable) and one rule of
    a far turn (at least FAR turns away), which the training pairs and the probe both call."""
    import random

    from full_metric.research import pairs, probe
    from full_metric.research.pairs import far_turns, other_index

    assert probe.far_turns is far_turns and probe.other_index is other_index and probe.FAR == pairs.FAR == 3
    rng = random.Random(seed)
    drawn = {other_index(4, 2, rng) for _ in range(200)}
    assert drawn == {0, 1, 3}
    assert far_turns(7, 3) == [0, 6] and far_turns(3, 1) == [] and far_turns(5, 0) == [3, 4]
