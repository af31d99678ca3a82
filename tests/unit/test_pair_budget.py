"""A larger pair budget from the same dialogs (issue 45, lever 2: ``pairs_per_dialog``): each dialog
gives its pairs at distinct turns, for any draw; one pair per dialog draws exactly the pairs of the
algorithm before the option (written out here as the oracle), so issue 37's judges stay rebuildable;
runs and judges made before the option keep their checkpoint fingerprint and digest."""

from __future__ import annotations

import dataclasses
import random

import pytest

from full_metric.research.judge_folder import Adaptation, digest, settings
from full_metric.research.optimise import fingerprint
from full_metric.research.pairs import CORRUPTIONS, DEFAULT_MIX, Pair, _corrupt, _other, make_pairs


def _dialogs(seed: int) -> list[list[str]]:
    """Dialogs of 2 to 9 turns; every turn names its dialog and position, so a pair says where it was cut."""
    rng = random.Random(seed)
    return [[f"dialog {d} turn {t}: {rng.choice(['boats', 'trains', 'tea'])}" for t in range(rng.randint(2, 9))]
            for d in range(80)]


def _before_the_option(dialogs: list[list[str]], rng: random.Random, mix: dict[str, float]) -> list[Pair]:
    """The one-pair-per-dialog draw as it was written before ``per_dialog`` existed (no topic kind)."""
    kinds, weights = zip(*mix.items())
    pairs = []
    for i, dialog in enumerate(dialogs):
        k = rng.randint(1, len(dialog) - 1)
        kind = rng.choices(kinds, weights)[0]
        corrupted = _corrupt(kind, dialogs, i, k, rng)
        if corrupted is None or corrupted.strip() == dialog[k].strip():
            kind, corrupted = "other", _other(dialogs, i, rng)
        if corrupted is not None and corrupted.strip() != dialog[k].strip():
            pairs.append(Pair(tuple(dialog[:k]), dialog[k], corrupted, kind))
    return pairs


@pytest.mark.parametrize("seed", range(5))
def test_one_pair_per_dialog_draws_as_before_the_option(seed):
    mix = {k: 1.0 for k in CORRUPTIONS if k != "topic"}
    for weights in (DEFAULT_MIX, mix):
        dialogs = _dialogs(seed)
        assert make_pairs(dialogs, random.Random(seed), weights) == _before_the_option(dialogs, random.Random(seed),
                                                                                        weights)


@pytest.mark.parametrize("per_dialog", [2, 3, 20])
@pytest.mark.parametrize("seed", range(4))
def test_each_dialog_gives_its_pairs_at_distinct_turns(seed, per_dialog):
    dialogs = _dialogs(seed)
    pairs = make_pairs(dialogs, random.Random(seed), {**DEFAULT_MIX, "topic": 0.2, "opener": 0.1}, per_dialog)
    by_dialog: dict[int, list[int]] = {}
    for p in pairs:
        d = int(p.real.split()[1])
        assert p.context == tuple(dialogs[d][: len(p.context)]) and p.real == dialogs[d][len(p.context)]
        assert p.corrupted.strip() != p.real.strip()
        by_dialog.setdefault(d, []).append(len(p.context))
    for d, dialog in enumerate(dialogs):  # every dialog gives min(per_dialog, its cuts), each cut once
        cuts = by_dialog.get(d, [])
        assert len(cuts) == min(per_dialog, len(dialog) - 1) and len(set(cuts)) == len(cuts), d


def test_pairs_per_dialog_below_one_is_refused():
    with pytest.raises(ValueError, match="pairs per dialog must be at least 1, got 0"):
        make_pairs(_dialogs(0), random.Random(0), DEFAULT_MIX, 0)


def _record(**change) -> Adaptation:
    record = Adaptation(base_model="m", base_revision="r", sources=["s"], dialogs=10, training_examples=8,
                        training_tokens=80, held_out_examples=2, held_out_loss_before=0.0, held_out_loss_after=0.0,
                        method="lora", rendering="plain", preset="p", max_tokens=1, batch_size=4, max_length=256,
                        learning_rate=2e-4, lora_rank=16, seed=0, autocast="none", steps=2, seconds=0.0,
                        full_metric="0", objective="complaints", pairs=8, held_out_pairs=2, margin=1.0,
                        lm_weight=0.1, corruption_mix=dict(DEFAULT_MIX), schedule="linear", warmup_steps=1)
    return dataclasses.replace(record, **change)


def test_runs_made_before_the_option_keep_their_fingerprint_and_digest():
    """A checkpoint written before ``pairs_per_dialog`` existed fingerprinted the record without it: one
    pair per dialog fingerprints and digests as that record did; two pairs per dialog do not."""
    record = _record()
    before = {k: v for k, v in dataclasses.asdict(record).items() if k != "pairs_per_dialog"}
    assert fingerprint(settings(record)) == fingerprint(before)
    assert fingerprint(settings(_record(pairs_per_dialog=2))) != fingerprint(before)
    assert digest(_record(pairs_per_dialog=2)) != digest(record)
