"""Ship the chosen judge when issue 61's gate says so (make_report.ship_gate, ship_decision: fewer relevance wins
than smollm2-complaints, no issue-37 answer above its upper bound, no agreement measure worse beyond its interval, a
GRPO policy without KL that stays a conversation partner): its adapter
into the package as ``smollm2-relevance`` (``gemma3-relevance`` on the Gemma base; a folder of
full_metric/judges, loadable by name offline), with its card. Short of that nothing ships and the package's judges
stay as they are (smollm2-complaints stays rebuildable by reports/smollm2-complaints/reproduce.sh).

    python reports/smollm2-relevance/ship.py JUDGE_FOLDER [DATA_FOLDER]     (default ../shared/data)

JUDGE_FOLDER is the chosen seed's judge (reproduce.sh's $NEW); it is checked to be the judge chosen.json names
(its adaptation digest) before anything is copied.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

from full_metric.model_sources import GEMMA3_INSTALL, SMOLLM2_INSTALL
from full_metric.research.judge_folder import ADAPTER_FOLDER, package_adapter

HERE = Path(__file__).resolve().parent
#: The package's judges folder: the shipped judge goes to a folder of its name there.
JUDGES = HERE.parents[1] / "full_metric" / "judges"
#: The bases a shipped judge may have: a packaged model's file -> the judge's name on it, the base's Hub id, its
#: licence (the card's front matter, and in words) and the command that installs it.
BASES = {"SmolLM2-135M-Instruct.Q4_1.gguf": ("smollm2-relevance", "HuggingFaceTB/SmolLM2-135M-Instruct", "apache-2.0",
                                             "SmolLM2-135M-Instruct (Apache-2.0, HuggingFaceTB)", SMOLLM2_INSTALL),
         "gemma-3-270m-q4_k_m.gguf": ("gemma3-relevance", "google/gemma-3-270m", "gemma",
                                      "Gemma-3-270M (Google's Gemma Terms of Use, https://ai.google.dev/gemma/terms, "
                                      "which apply to the adapter as a model derivative, use restrictions included)",
                                      GEMMA3_INSTALL)}


_spec = importlib.util.spec_from_file_location("relevance_report", HERE / "make_report.py")
report = importlib.util.module_from_spec(_spec)  # the report's measures and the decision (make_report.py)
_spec.loader.exec_module(report)  # type: ignore[union-attr]


def grpo_line(run: dict[str, Any]) -> str:
    """A GRPO run's distinct answers before -> after, and its most frequent answer after."""
    complaints = report.complaints_report
    share, answer = report.top_share(run["after"]["answers"])
    return (f"- against {complaints.label(run)}: distinct {complaints.distinct_share(run['before']['answers']):.0%} -> "
            f"{complaints.distinct_share(run['after']['answers']):.0%}; most frequent after: \"{answer}\" {share:.0%}")


def card(record: dict[str, Any], m: dict[str, Any]) -> str:
    """The shipped judge's card: what it is and how to load it, how it was made, its figures, its licences."""
    name, hub, licence, base_words, install = BASES[record["base_model"]]
    chosen, probe = m["chosen"], m["probe"]
    seeds = ", ".join(f"seed {s}: {r['held_out_pair_accuracy_after']:.3f}" for s, r in sorted(chosen["seeds"].items()))
    judges = {"smollm2-gguf": "base", "smollm2-complaints": "shipped", name: chosen["ships_judge"]}
    answers = {judge: probe["judges"][key]["answers"] for judge, key in judges.items()}
    rows = "\n".join(f"| {a} | " + " | ".join(f"{answers[j][a]['beats_human']:.0%}" for j in judges) + " |"
                     for a in answers[name])
    grpo = "\n".join(grpo_line(run) for run in m["runs"].values())
    return f"""---
license: {licence}
library_name: peft
base_model: {hub}
tags: [full-metric, dialog-evaluation, lora]
---
# {name}: a FULL judge that hears relevance

A LoRA adapter (rank {record['lora_rank']}, float16) on {hub.split('/')[1]} (`{record['base_model']}`, digest
`{record['base_revision']}`), trained so that FULL's negative follow-ups are likelier after a corrupted reply, a
fluent reply from elsewhere included, than after the real next turn. Load it by name, offline:
`FullScorer("{name}")`, `full_reward(model="{name}")`, `full-metric score ... --model {name}` (needs `{install}`
and `peft`). FULL's signature names it: `model:{name}@{record['base_revision']}+adapter:...+adapted:{record['digest']}`;
its numbers never mix with smollm2-complaints'.

- Data: {record['dialogs']:,} conversations of the `chitchat-dataset` package (MIT), {record['held_out_pairs']} held
  out; training only, never rated data.
- Objective: `complaints`, {record['pairs']:,} pairs of a real next turn and a corrupted reply (mix:
  {", ".join(f"{k} {v:g}" for k, v in record['corruption_mix'].items())}), margin {record['margin']}, plus
  {record['lm_weight']} x the language-modelling loss; learning rate {record['learning_rate']}, batch
  {record['batch_size']}, contexts cut to {record['max_length']} tokens, FULL's paper preset.
- Setting: the lever `{chosen['chosen']}`, chosen among the levers tried by a rule fixed before the first run.
- Seeds: {seeds} (held-out pair accuracy; before training {record['held_out_pair_accuracy_before']:.3f});
  shipped: seed {chosen['seed']}. Adaptation digest `{record['digest']}`.

Share of the {probe['contexts']} held-out contexts where an answer beats the human's real next turn:

| answer | {' | '.join(judges)} |
|---|---|---|---|
{rows}

GRPO with it as the only reward (100 steps, lr 5e-5), the policy's greedy answers on 64 held-out contexts, before ->
after:

{grpo}

Issue 61's gate, part by part (all met: shipped, and recommended as a reward for `full_reward` and
`FullCallback`):

{chr(10).join(m['gate'])}

Issue 45's bar, the goal (where this judge stands):

{chr(10).join(m['verdict'])}

Figures, commands and the agreement with people: `reports/smollm2-relevance/report.md` in the full-metric repository.

Licences: the adapter is a derivative of {base_words}; it was trained on chitchat-dataset (MIT); full-metric
itself is MIT.
"""


def main(judge_folder: str, data_folder: str = "../shared/data") -> None:
    m = report.measured(data_folder)
    decision = report.ship_decision(m["chosen"], m["gate"])
    print(report.ship_line(m["chosen"], m["gate"]))
    if not decision:
        return
    judge, chosen = Path(judge_folder), m["chosen"]
    expected = m["records"][f"{chosen['chosen']}-s{chosen['seed']}"]["digest"]
    record = json.loads((judge / ADAPTER_FOLDER / "adaptation.json").read_text(encoding="utf-8"))
    if record["digest"] != expected:
        raise SystemExit(f"{judge.name}: its adaptation digest {record['digest']} is not the chosen judge's "
                         f"({chosen['chosen']} seed {chosen['seed']}: {expected})")
    if record["base_model"] not in BASES:
        raise SystemExit(f"{judge.name}: its base {record['base_model']} has no card text here (BASES): "
                         "its Hub id and licence are needed before it ships")
    packaged = JUDGES / BASES[record["base_model"]][0]
    package_adapter(judge, packaged)
    (packaged / "README.md").write_text(card(record, m), encoding="utf-8")
    print(f"shipped as {packaged.name}: {packaged}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
