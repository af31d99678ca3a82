"""Each GRPO run's answers scored by other judges (issue 37, 3b; issue 45, 4): does a policy trained
against one judge please the others? For each run (grpo-NAME.json in the report's folder) and each
judge, the mean FULL of the policy's answers before and after training, with its 95% interval.

    python reports/smollm2-complaints/cross_score.py        (writes reports/smollm2-complaints/cross.json)
    python reports/smollm2-complaints/cross_score.py --report reports/smollm2-relevance \\
        --runs shipped-kl new new-kl --judges smollm2-gguf smollm2-complaints judges/smollm2-relevance-mix-s0
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from make_report import RUNS

from full_metric import FullScorer
from full_metric.models import model_label
from full_metric.training import summary

HERE = Path(__file__).resolve().parent
JUDGES = ("smollm2-gguf", "smollm2-complaints")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--report", type=Path, default=HERE, help="the folder of the runs' records; cross.json goes there")
    parser.add_argument("--runs", nargs="+", default=list(RUNS), help="the runs, by their record's NAME")
    parser.add_argument("--judges", nargs="+", default=list(JUDGES), help="judges by name or folder")
    args = parser.parse_args()
    runs = {name: json.loads((args.report / f"grpo-{name}.json").read_text()) for name in args.runs}
    record: dict = {name: {} for name in runs}
    for model in args.judges:
        judge = FullScorer(model, progress=False)
        label = model_label(model)
        for name, run in runs.items():
            record[name][label] = {
                when: summary(judge.score(run["contexts"], run[when]["answers"])) for when in ("before", "after")}
    (args.report / "cross.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
