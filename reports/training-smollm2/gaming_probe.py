"""Can FULL as a reward be gamed? On the 64 held-out chit-chat contexts of the training report (the
same seeded split), the offline judge scores the human's real next turn and four answers a policy
could learn instead: a repeated word, "Yes.", "I don't know." and an echo of the context's last
turn. Prints and writes probe.json: each answer's mean score, how often it beats the human's, and
the same with the repetition guard (FULL + WEIGHT x repetition_reward) that docs/training.md
recommends. Run from the repository root: python reports/training-smollm2/gaming_probe.py"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "examples"))

from training_setup import split  # noqa: E402

from full_metric import FullScorer  # noqa: E402
from full_metric.training import repetition_reward  # noqa: E402

#: The guard's weight in docs/training.md: FULL + WEIGHT x repetition_reward (which lies in [-1, 0]).
WEIGHT = 20.0
EXAMPLE = (["Hi! How was your weekend?"], "Great, I went hiking.", "Window window window.")


def main() -> None:
    _, held = split("chitchat", 64, seed=0)
    contexts = [r["context"] for r in held]
    answers = {"human": [r["response"] for r in held], "repeated word": ["Window window window."] * len(held),
               "Yes.": ["Yes."] * len(held), "I don't know.": ["I don't know."] * len(held),
               "echo": [c[-1] for c in contexts]}
    judge = FullScorer("smollm2-gguf", progress=False)
    scores = {name: judge.score(contexts, a).scores for name, a in answers.items()}
    guarded = {name: [s + WEIGHT * g for s, g in zip(scores[name], repetition_reward(contexts, answers[name]))]
               for name in answers}
    rows = {}
    for name in answers:
        rows[name] = {
            "mean": sum(scores[name]) / len(held),
            "beats_human": sum(s > h for s, h in zip(scores[name], scores["human"])) / len(held),
            "beats_human_guarded": sum(s > h for s, h in zip(guarded[name], guarded["human"])) / len(held),
        }
    context, good, bad = EXAMPLE
    example = dict(zip((good, bad), judge.score([context, context], [good, bad]).scores))
    record = {"signature": judge.signature(), "guard_weight": WEIGHT, "contexts": len(held), "answers": rows,
              "example": {"context": context, "scores": example}}
    (HERE / "probe.json").write_text(json.dumps(record, indent=1), encoding="utf-8")
    print(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
