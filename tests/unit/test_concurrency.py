"""Protects scores under concurrent calls and under memory pressure: threads scoring different inputs
on one shared model get exactly the numbers of sequential calls; out-of-memory errors of any device
are recognised and retried with smaller batches."""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from full_metric import NAMED_SETS, FullScorer
from full_metric.engines import ENGINES
from full_metric.batching import is_out_of_memory
from full_metric.models import load_model
from tests.unit.test_engines import _dialogs


def _jobs(n: int) -> list[tuple[list[list[str]], list[str], list[str]]]:
    """Different dialogs and different follow-ups (so packed rows differ in width and positions)."""
    return [(*_dialogs(6, seed=100 + k), list(NAMED_SETS["paper"])[: 1 + k % 5]) for k in range(n)]


@pytest.mark.parametrize("kind", ["blenderbot-packed", "reference-preset", "llama-packed", "llama-generic"])
def test_concurrent_calls_give_the_numbers_of_sequential_calls(kind, tiny_models, tokenizer, tiny_blenderbot_path):
    if kind.startswith("llama"):
        loaded = load_model(tiny_models["llama"], tokenizer=tokenizer, device="cpu")
        make = lambda: FullScorer(loaded, device="cpu", progress=False, rendering="speaker")  # noqa: E731
    else:
        loaded = load_model(str(tiny_blenderbot_path), device="cpu")
        preset = "reference" if kind == "reference-preset" else None
        make = lambda: FullScorer(loaded, device="cpu", progress=False, preset=preset)  # noqa: E731
    scorers = [make(), make()]  # two scorers sharing one model, as the metric's instances do
    engine = "generic" if kind == "llama-generic" else "auto"
    jobs = _jobs(16)

    def run(k: int) -> list[list[float]]:
        contexts, responses, follow_ups = jobs[k]
        result = scorers[k % 2].score(contexts, responses, follow_ups=follow_ups, batch_size=1 + k % 3, engine=engine)
        return result.follow_up_log_likelihoods

    sequential = [run(k) for k in range(len(jobs))]
    for _ in range(5):
        with ThreadPoolExecutor(max_workers=8) as pool:
            concurrent = list(pool.map(run, range(len(jobs))))
        assert concurrent == sequential  # exactly, not approximately


@pytest.mark.parametrize("message, expected", [
    ("CUDA out of memory. Tried to allocate 2.00 GiB", True),
    ("MPS backend out of memory (MPS allocated: 8.00 GB)", True),
    ("[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: not enough memory: you tried to allocate 8 GB", True),
    ("DefaultCPUAllocator: can't allocate memory: you tried to allocate 123456789 bytes", True),
    ("The size of tensor a (67) must match the size of tensor b (107)", False),
])
def test_out_of_memory_is_recognised_on_every_device(message, expected):
    assert is_out_of_memory(RuntimeError(message)) is expected


def test_out_of_memory_on_cpu_halves_the_batch_and_keeps_the_scores(tiny_blenderbot_path, monkeypatch):
    scorer = FullScorer(tiny_blenderbot_path, device="cpu", progress=False)
    contexts, responses = _dialogs(9, seed=4)
    expected = scorer.score(contexts, responses, batch_size=1).scores
    real = ENGINES["packed"].score
    sizes = []

    def cpu_pressure(model, contexts, targets, pad_id):
        sizes.append(len(contexts))
        if len(contexts) > 2:
            raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 999 bytes")
        return real(model, contexts, targets, pad_id)

    monkeypatch.setitem(ENGINES, "packed", dataclasses.replace(ENGINES["packed"], score=cpu_pressure))
    assert scorer.score(contexts, responses, batch_size=8).scores == pytest.approx(expected, rel=1e-6)
    assert sizes[:2] == [8, 4] and max(sizes[2:]) <= 2  # halved until it fits
    monkeypatch.setitem(ENGINES, "packed", dataclasses.replace(
        ENGINES["packed"], score=lambda *a: (_ for _ in ()).throw(RuntimeError("shape"))))
    with pytest.raises(RuntimeError, match="shape"):  # other errors are not mistaken for memory trouble
        scorer.score(contexts, responses, batch_size=8)


def test_torch_out_of_memory_error_is_recognised():
    assert is_out_of_memory(torch.OutOfMemoryError("CUDA out of memory"))
