"""What bfloat16 costs in accuracy against float32, for a model and FED items, in one run.

    python benchmarks/dtype_error.py --model smollm2 --limit 150
    python benchmarks/dtype_error.py --model blenderbot-400m-random --limit 80

Scores the same FED items (turn level) in float32 and in bfloat16 on this machine's CPU and
prints: the largest and the mean per-follow-up log-likelihood difference (nats), the rank
agreement of the two dtypes' scores (Spearman), the Spearman of each with FED's human Overall
rating, and each dtype's speed. Random-weight models (``*-random``) have no meaningful human
correlation; their rows measure speed and difference only.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from scipy.stats import spearmanr

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import make_scorer  # noqa: E402

from full_metric.models import native_bf16  # noqa: E402
from full_metric.files.rated_files import read_fed  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(REPO.parent / "shared" / "data" / "fed_data.json"))
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--limit", type=int, default=150, help="the first N turn-level FED items")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    items = [i for i in read_fed(args.data).items if i.response is not None and "Overall" in i.ratings][: args.limit]
    contexts, responses = [i.context for i in items], [i.response for i in items]
    human = [i.ratings["Overall"] for i in items]
    runs = {}
    for dtype in ("float32", "bfloat16"):
        scorer = make_scorer(args.model, "cpu", dtype, None)
        scorer.score(contexts[:2], responses[:2])  # warm up
        start = time.perf_counter()
        result = scorer.score(contexts, responses)
        runs[dtype] = (time.perf_counter() - start, result, scorer.engine)
        del scorer
    (t32, r32, path), (t16, r16, _) = runs["float32"], runs["bfloat16"]
    diffs = [abs(a - b) for x, y in zip(r32.follow_up_log_likelihoods, r16.follow_up_log_likelihoods) for a, b in zip(x, y)]
    random_weights = args.model.endswith("-random")
    print(f"model: {args.model}, {len(items)} FED turn-level items, {len(r32.follow_ups)} follow-ups, "
          f"CPU threads: {args.threads}, native bfloat16: {native_bf16() or 'no'}, engine: {path}")
    print()
    print("| dtype | dialogs/s | largest difference (nats) | mean difference (nats) | rank agreement with float32 | Spearman with human Overall |")
    print("|---|---|---|---|---|---|")
    for dtype, seconds, result in (("float32", t32, r32), ("bfloat16", t16, r16)):
        rho = "n/a (random weights)" if random_weights else f"{spearmanr(result.scores, human)[0]:.3f}"
        if dtype == "float32":
            print(f"| float32 | {len(items) / seconds:.2f} | - | - | - | {rho} |")
        else:
            agreement = spearmanr(r32.scores, r16.scores)[0]
            print(f"| bfloat16 | {len(items) / seconds:.2f} | {max(diffs):.3f} | {sum(diffs) / len(diffs):.3f} | "
                  f"{agreement:.3f} | {rho} |")
    print()
    print(f"bfloat16 speed-up: {t32 / t16:.2f}x; signatures: float32 `{r32.signature.split('|')[2]}`, "
          f"bfloat16 `{r16.signature.split('|')[2]}`")


if __name__ == "__main__":
    main()
