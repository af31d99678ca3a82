"""Each GRPO run's answers scored by both judges (issue 37, 3b): does a policy trained against one
judge please the other? For each run (grpo-base.json, grpo-shipped.json) and each judge, the mean
FULL of the policy's answers before and after training, with its 95% interval.

    python reports/smollm2-complaints/cross_score.py        (writes reports/smollm2-complaints/cross.json)
"""

from __future__ import annotations

import json
from pathlib import Path

from full_metric import FullScorer
from full_metric.training import summary

HERE = Path(__file__).resolve().parent
JUDGES = {"base": "smollm2-gguf", "shipped": "smollm2-complaints"}


def main() -> None:
    runs = {name: json.loads((HERE / f"grpo-{name}.json").read_text()) for name in JUDGES}
    record: dict = {}
    for judge_name, model in JUDGES.items():
        judge = FullScorer(model, progress=False)
        for run_name, run in runs.items():
            record.setdefault(f"trained against {run_name}", {})[f"scored by {judge_name}"] = {
                when: summary(judge.score(run["contexts"], run[when]["answers"])) for when in ("before", "after")}
    (HERE / "cross.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
