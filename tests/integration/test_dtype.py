"""Protects the CPU bfloat16 mode: ``dtype="auto"`` picks bfloat16 only where the CPU computes it
natively (the detection is injected, so both branches run on any machine), explicit bfloat16 on a
CPU without it warns, the signature names the dtype that ran, and bfloat16 scores stay within
the stated bound of float32 on the tiny models."""

from __future__ import annotations

import logging

import pytest
import torch

import full_metric.models as models
from full_metric import FullScorer
from tests.unit.test_engines import _dialogs
from tests.tiny_architectures import build

#: The largest per-follow-up difference bfloat16 may make on the tiny test models (nats); the
#: README states it with the real models' figures.
TINY_BOUND = 0.1


@pytest.mark.parametrize("flags, expected", [
    ({"fpu", "avx2", "avx512f", "avx512_bf16"}, "avx512_bf16"), ({"amx_bf16", "amx_tile"}, "amx_bf16"),
    ({"fp", "asimd", "bf16"}, "bf16"), ({"fpu", "avx2", "avx512f"}, None), (set(), None),
])
def test_native_bfloat16_is_detected_from_the_cpu_flags(flags, expected):
    assert models.native_bf16(flags) == expected


def test_auto_picks_bfloat16_only_on_a_cpu_that_computes_it_natively(caplog):
    with caplog.at_level(logging.INFO, logger="full_metric.models"):
        assert models.resolve_dtype("auto", "cpu", flags={"avx512_bf16"}) is torch.bfloat16
        assert "picks bfloat16" in caplog.text and "avx512_bf16" in caplog.text
        caplog.clear()
        assert models.resolve_dtype("auto", "cpu", flags={"avx2"}) is torch.float32
        assert "keeps float32: this CPU has no native bfloat16" in caplog.text
        assert models.resolve_dtype("auto", "cuda", flags={"avx512_bf16"}) is torch.float32
    assert models.resolve_dtype(None, "cpu") is None  # the default stays the model's own (float32)


def test_explicit_bfloat16_on_a_cpu_without_it_warns_that_it_will_be_slow(caplog):
    with caplog.at_level(logging.WARNING, logger="full_metric.models"):
        assert models.resolve_dtype("bfloat16", "cpu", flags={"avx2"}) is torch.bfloat16
    assert "bfloat16 on this CPU will be slow" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="full_metric.models"):
        models.resolve_dtype("bfloat16", "cpu", flags={"avx512_bf16"})
    assert caplog.text == ""


@pytest.mark.parametrize("native, expected", [("avx512_bf16", "bfloat16"), (None, "float32")])
def test_the_signature_names_the_dtype_that_ran(native, expected, tiny_blenderbot_path, monkeypatch):
    monkeypatch.setattr(models, "native_bf16", lambda flags=None: native)
    scorer = FullScorer(tiny_blenderbot_path, device="cpu", progress=False, dtype="auto")
    assert scorer.loaded.dtype is getattr(torch, expected)
    assert f"|dtype:{expected}|" in scorer.score([["Hi!"]], ["Hello."]).signature


@pytest.mark.parametrize("name", ["blenderbot", "llama", "mistral-window"])
def test_bfloat16_stays_within_the_stated_bound_of_float32(name, tokenizer):
    contexts, responses = _dialogs(10, seed=3)
    rendering = None if name == "blenderbot" else "speaker"
    runs = [FullScorer(build(name), tokenizer=tokenizer, device="cpu", progress=False, rendering=rendering, dtype=d)
            .score(contexts, responses).follow_up_log_likelihoods for d in ("float32", "bfloat16")]
    differences = [abs(a - b) for x, y in zip(*runs) for a, b in zip(x, y)]
    assert 0 < max(differences) <= TINY_BOUND  # not zero: bfloat16 really ran


def test_auto_reaches_the_metric_and_the_command_line(tiny_blenderbot_path, monkeypatch):
    from full_metric.faces.cli import _parser
    from full_metric.faces.metric import FULL

    monkeypatch.setattr(models, "native_bf16", lambda flags=None: "avx512_bf16")
    metric = FULL(model=str(tiny_blenderbot_path), device="cpu", dtype="auto", progress=False)
    assert "|dtype:bfloat16|" in metric.compute(predictions=["Hello."], references=[["Hi!"]])["signature"]
    assert _parser().parse_args(["score", "in.jsonl", "-o", "out.jsonl", "--dtype", "auto"]).dtype == "auto"
