"""Each GRPO run's answers scored by both judges (issue 37, 3b): does a policy trained against one
judge please the other? For each run (grpo-NAME.json, NAME in make_report.RUNS) and each judge, the
mean FULL of the policy's answers before and after training, with its 95% interval.

    python reports/smollm2-complaints/cross_score.py        (writes reports/smollm2-complaints/cross.json)
"""

from __future__ import annotations

import json
from pathlib import Path

from make_report import RUNS

from full_metric import FullScorer
from full_metric.training import summary

HERE = Path(__file__).resolve().parent
JUDGES = ("smollm2-gguf", "smollm2-complaints")


def main() -> None:
    runs = {name: json.loads((HERE / f"grpo-{name}.json").read_text()) for name in RUNS}
    record: dict = {name: {} for name in runs}
    for model in JUDGES:
        judge = FullScorer(model, progress=False)
        for name, run in runs.items():
            record[name][model] = {
                when: summary(judge.score(run["contexts"], run[when]["answers"])) for when in ("before", "after")}
    (HERE / "cross.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
