"""Write reports/smollm2-relevance/report.md from what reproduce.sh measured: the levers' adaptation
records (adaptation-NAME-sSEED.json) and wall times (wall.json), the probe (probe.json), the rule's
outcome (chosen.json), the chosen judge against people (agreement/, paired with smollm2-complaints'
reports/smollm2-complaints/shipped), the GRPO runs (grpo-NAME.json) and their cross scoring (cross.json).
A part not measured yet is named as such, never filled in; the bar's verdict is given part by part.

    python reports/smollm2-relevance/make_report.py [DATA_FOLDER]      (default ../shared/data)
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from full_metric.answers import words
from full_metric.research.probe import markdown_table, tie_rule

HERE = Path(__file__).resolve().parent


def _module(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


rule = _module(HERE / "choose.py", "relevance_choose")
complaints_report = _module(HERE.parent / "smollm2-complaints" / "make_report.py", "complaints_report")
#: The GRPO runs of reproduce.sh, by the name of their record (grpo-NAME.json), with what each is.
RUNS = {"shipped-kl": "smollm2-complaints, KL 0.04", "new": "the chosen judge, no KL", "new-kl": "the chosen judge, KL 0.04"}
#: The bar's GRPO part: without a KL term the policy keeps at least this share of distinct answers, and
#: no answer is more than this share of them.
DISTINCT_BAR, TOP_ANSWER_BAR = 0.85, 0.05


#: An answer that offers help, the assistant opener GRPO drifts to ("How can I help you today?", "How can I
#: assist you?"): the distinct share alone hides that drift when the wording varies.
OFFERS_HELP = re.compile(r"\bhow can i (help|assist)\b", re.IGNORECASE)


def offers_help(answers: list[str]) -> int:
    """How many answers offer help (:data:`OFFERS_HELP`)."""
    return sum(bool(OFFERS_HELP.search(a)) for a in answers)


def openers_section(runs: dict[str, dict]) -> str:
    """Each GRPO run's answers that offer help, before -> after, beside issue 37's run against
    smollm2-complaints at the same learning rate without a KL term."""
    path = complaints_report.HERE / "grpo-shipped-lr5e-5.json"
    named = {complaints_report.label(r) + " (issue 37)": r for r in ([json.loads(path.read_text(encoding="utf-8"))]
                                                                       if path.is_file() else [])}
    named.update({complaints_report.label(r): r for r in runs.values()})
    return "\n".join(f"- against {name}: {offers_help(r['before']['answers'])} -> {offers_help(r['after']['answers'])} "
                     f"of {len(r['after']['answers'])}" for name, r in named.items())


def _load(name: str) -> Any:
    path = HERE / name
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() and path.stat().st_size else None


def _times_and_hosts(records: dict[str, dict], parts: list[str]) -> str:
    """What the levers' table cannot say in its cells: the runs whose wall time counts only their last part
    (``parts``), and base losses that differ by machine."""
    befores = sorted({f"{r['held_out_loss_before']:.4f}" for r in records.values()})
    text = ("\nTraining time is the steps' own time from each record, summed over the parts of a run resumed after "
            "it was stopped; wall time (wall.json) counts only the part that finished"
            + (f" ({', '.join(parts)})" if parts else "") + ".")
    if len(befores) > 1:
        text += (f" The base's held-out LM loss before training reads {' and '.join(befores)} in runs made on "
                 "different machines (the same dialogs; bfloat16 matrix products differ by CPU): compare each "
                 "lever's loss after with its own before.")
    return text


def levers_section(records: dict[str, dict], wall: dict, held: dict | None = None) -> str:
    """The levers' held-out figures, and the judges made before measured by today's adapt (held-out.json)."""
    rows = ["| judge | pairs | per dialog | held-out pair accuracy | held-out LM loss | training time | wall time | "
            "adaptation digest |", "|---|---|---|---|---|---|---|---|"]
    parts: list[str] = []  # the runs whose wall time counts only their last part
    for name, r in sorted(records.items()):
        lever, _, seed = name.rpartition("-s")
        seconds = wall.get(f"adapt {lever} seed {seed}")
        parts += [name] if seconds is not None and seconds < r["seconds"] else []
        rows.append(f"| {name} | {r['pairs']:,} | {r.get('pairs_per_dialog', 1)} | "
                    f"{r['held_out_pair_accuracy_before']:.3f} -> **{r['held_out_pair_accuracy_after']:.3f}** | "
                    f"{r['held_out_loss_before']:.4f} -> {r['held_out_loss_after']:.4f} | {r['seconds'] / 60:.0f} min | "
                    f"{'-' if seconds is None else f'{seconds / 60:.0f} min'} | `{r['digest']}` |")
    if not held:
        return "\n".join(rows) + "\n" + _times_and_hosts(records, parts) + (
            "\n\nThe judges made before issue 45 on this yardstick: not measured yet.")
    for name, r in held["judges"].items():
        digest = r["signature"].split("+adapted:")[1].split("|")[0] if "+adapted:" in r["signature"] else "-"
        rows.append(f"| {name} (made before) | - | - | **{r['pair_accuracy']:.3f}** | {r['loss']:.4f} | - | - | "
                    f"{'-' if digest == '-' else f'`{digest}`'} |")
    seed = json.loads((complaints_report.HERE / "chosen.json").read_text(encoding="utf-8"))["seed"]
    kept = json.loads((complaints_report.HERE / f"adaptation-s{seed}.json").read_text(encoding="utf-8"))
    return "\n".join(rows) + f"""

The judges made before (the last rows) are measured by today's adapt on the same held-out dialogs and
pairs (`held_out.py`). smollm2-complaints' own record ({kept['held_out_pair_accuracy_before']:.3f} ->
{kept['held_out_pair_accuracy_after']:.3f}, LM loss {kept['held_out_loss_before']:.4f} -> {kept['held_out_loss_after']:.4f})
was measured by the adapt of the revision that trained it, which cut a context longer than 256 tokens
mid-turn (today's adapt cuts it between whole turns): compare the levers with these rows, not with it.
{_times_and_hosts(records, parts)}"""


def parts_section(probe: dict) -> str:
    """Each judge probed against the bar's probe parts, and its wins summed over the relevance answers."""
    shipped = probe["judges"]["shipped"]["answers"]
    names = list(rule.bar_parts(shipped, shipped))
    rows = ["| judge | " + " | ".join(names) + " | relevance wins (of " +
            f"{sum(shipped[a]['contexts'] for a in rule.RELEVANCE)}) |", "|---|" + "---|" * (len(names) + 1)]
    for judge, record in probe["judges"].items():
        parts = rule.bar_parts(record["answers"], shipped)
        rows.append(f"| {judge} | " + " | ".join("met" if parts[n] else "not met" for n in names)
                    + f" | {rule.relevance_wins(record['answers'])} |")
    return "\n".join(rows)


def top_share(answers: list[str]) -> tuple[float, str]:
    """The most frequent answer's share (answers compared as their words, lower-cased) and the answer."""
    keys = [tuple(words(a)) for a in answers]
    key, n = Counter(keys).most_common(1)[0]
    return n / max(len(answers), 1), answers[keys.index(key)]


def pilot_section(pilot: dict) -> str:
    """Lever 3's pilot (pilot_contrast.py): smollm2-complaints with plain FULL and contrasted, the bar's probe
    parts for each (same topic against plain FULL's share on these contexts), and what it decided."""
    plain, contrast = (pilot["judges"][name]["answers"] for name in ("plain", "contrast"))
    parts = {name: rule.bar_parts(answers, plain) for name, answers in (("plain", plain), ("contrast", contrast))}
    met = {name: sum(p.values()) for name, p in parts.items()}
    worse = [a for a in rule.ISSUE_37 if contrast[a]["beats_human"] > plain[a]["high"]]
    built = met["contrast"] > met["plain"] and not worse
    return (markdown_table(pilot) + f"\n\nThe bar's probe parts met: plain {met['plain']} of {len(parts['plain'])}, "
            f"contrast {met['contrast']}; answers of issue 37's probe that beat the human more often contrasted than "
            f"plain FULL's upper bound: {', '.join(f'“{a}”' for a in worse) or 'none'}. "
            + ("The setting is worth building." if built else
               "Not built: it does not get closer to the bar, and it pays for the openers it stops with the generic "
               "answers issue 37 stopped (a reply that is poor alone gains from any context)."))


def pilot_mi_section(pilot: dict) -> str:
    """Issue 61's lever (pilot_mi.py): FULL plus a weight, chosen on held-out pairs only, times the response's
    mutual information with its context; the weight's pair accuracy, the probe of the three, and what it decided."""
    plain, combined = (pilot["judges"][name]["answers"] for name in ("plain", "plus mutual information"))
    accuracy = {float(w): a for w, a in pilot["pair_accuracy"].items()}
    moved = [a for a in rule.RELEVANCE if combined[a]["high"] < plain[a]["low"]]
    worse = [a for a in rule.ISSUE_37 if combined[a]["beats_human"] > plain[a]["high"]]
    built = bool(moved) and not worse
    alone, chosen = pilot["judges"]["mutual information alone"]["answers"], float(pilot["weight"])
    larger = [a for w, a in accuracy.items() if w > chosen]
    why = ("at the weight the held-out pairs choose it moves no relevance answer beyond the intervals"
           + (f"; every larger weight ranks fewer held-out pairs right (at most {max(larger):.3f})"
              if larger and max(larger) < accuracy[chosen] else "")
           + f"; the mutual information alone ranks an echo of the last turn above the human's turn in "
           f"{alone['echo']['beats_human']:.0%} of the contexts")
    return (f"The weight chosen on {pilot['weight_chosen_on']}: **{pilot['weight']}** (pair accuracy "
            f"{accuracy[float(pilot['weight'])]:.3f}; plain FULL {accuracy[0.0]:.3f}; by weight: "
            + ", ".join(f"{w:g} {a:.3f}" for w, a in sorted(accuracy.items())) + ").\n\n" + markdown_table(pilot)
            + "\n\nRelevance answers that beat the human less often with it, beyond both intervals: "
            + (", ".join(f"“{a}”" for a in moved) or "none")
            + "; answers of issue 37's probe that beat the human more often than plain FULL's upper bound: "
            + (", ".join(f"“{a}”" for a in worse) or "none") + ". "
            + ("The setting is worth building." if built else f"Not built, and not run on all 241 contexts: {why}."))


def agreement_part(worse: list[str] | None) -> str:
    """The bar's agreement part from the measures where the chosen judge is worse than smollm2-complaints
    beyond its interval (``None``: not measured yet)."""
    part = "- worse than smollm2-complaints beyond its interval on no agreement measure"
    if worse is None:
        return part + ": not measured yet"
    return part + (": **met**" if not worse else f": **not met** (worse on {'; '.join(worse)})")


def bar_verdict(probe: dict | None, chosen: dict | None, runs: dict[str, dict],
                worse: list[str] | None = None) -> list[str]:
    """The bar of issue 45, part by part, for the chosen judge (the seed that would ship, once both seeds
    are in); a part not measured yet says so."""
    name = chosen.get("ships_judge", chosen.get("chosen")) if chosen else None
    lines = []
    if probe and name and name in probe["judges"]:
        answers, shipped = probe["judges"][name]["answers"], probe["judges"]["shipped"]["answers"]
        for part, met in rule.bar_parts(answers, shipped).items():
            lines.append(f"- {part}: **{'met' if met else 'not met'}**")
        lines[0] += f" ({answers['other conversation']['beats_human']:.0%})"
        lines[1] += (f" ({answers['same topic']['beats_human']:.0%}; smollm2-complaints "
                     f"{shipped['same topic']['beats_human']:.0%})")
        worst = max((a for a in rule.ISSUE_37 if a != "other conversation"), key=lambda a: answers[a]["beats_human"])
        lines[2] += f" (the most: {worst} {answers[worst]['beats_human']:.0%})"
    else:
        lines.append("- the probe's parts: not decided yet (no lever chosen)")
    lines.append(agreement_part(worse))
    if "new" in runs:
        after = runs["new"]["after"]["answers"]
        distinct = complaints_report.distinct_share(after)
        share, answer = top_share(after)
        met = distinct >= DISTINCT_BAR and share <= TOP_ANSWER_BAR
        lines.append(f"- GRPO without KL keeps >= {DISTINCT_BAR:.0%} distinct answers, none above "
                     f"{TOP_ANSWER_BAR:.0%}: **{'met' if met else 'not met'}** (distinct {distinct:.0%}; "
                     f"most frequent \"{answer}\" {share:.0%})")
    else:
        lines.append("- GRPO without KL keeps >= 85% distinct answers, none above 5%: not measured yet")
    return lines


#: Issue 61's GRPO part: at most this many of the 64 held-out answers are assistant openers (offer help).
OPENERS_BAR = 5


def ship_gate(probe: dict | None, chosen: dict | None, runs: dict[str, dict], worse: list[str] | None = None
              ) -> list[str]:
    """Issue 61's gate, part by part, for the judge that would ship (the chosen seed's): (a) fewer wins over the four
    relevance answers than smollm2-complaints; (b) no answer of issue 37's probe beats the human more often than
    smollm2-complaints' upper 95% bound; (c) worse than it beyond its interval on no agreement measure; (d) GRPO
    without a KL term keeps >= 85% distinct answers, none above 5%, at most 5 assistant openers. Each line says
    **met**, **not met** or not measured yet, with its figures; issue 45's bar (:func:`bar_verdict`) stays the goal."""
    name = chosen.get("ships_judge", chosen.get("chosen")) if chosen else None
    lines = []
    if probe and name and name in probe["judges"]:
        answers, shipped = probe["judges"][name]["answers"], probe["judges"]["shipped"]["answers"]
        mine, theirs = rule.relevance_wins(answers), rule.relevance_wins(shipped)
        lines.append(f"- (a) fewer relevance wins than smollm2-complaints: **{'met' if mine < theirs else 'not met'}** "
                     f"({mine} against {theirs})")
        above = [a for a in rule.ISSUE_37 if answers[a]["beats_human"] > shipped[a]["high"]]
        lines.append("- (b) no answer of issue 37's probe above smollm2-complaints' upper bound: "
                     + ("**met**" if not above else f"**not met** ({', '.join(above)})"))
    else:
        lines += ["- (a) fewer relevance wins than smollm2-complaints: not measured yet (no lever chosen)",
                  "- (b) no answer of issue 37's probe above smollm2-complaints' upper bound: not measured yet"]
    lines.append(agreement_part(worse).replace("- worse", "- (c) worse", 1))
    if "new" in runs:
        after = runs["new"]["after"]["answers"]
        distinct, (share, answer), openers = complaints_report.distinct_share(after), top_share(after), offers_help(after)
        met = distinct >= DISTINCT_BAR and share <= TOP_ANSWER_BAR and openers <= OPENERS_BAR
        lines.append(f"- (d) GRPO without KL keeps >= {DISTINCT_BAR:.0%} distinct answers, none above "
                     f"{TOP_ANSWER_BAR:.0%}, at most {OPENERS_BAR} assistant openers: **{'met' if met else 'not met'}** "
                     f"(distinct {distinct:.0%}; most frequent \"{answer}\" {share:.0%}; openers {openers} of {len(after)})")
    else:
        lines.append(f"- (d) GRPO without KL keeps >= {DISTINCT_BAR:.0%} distinct answers, none above "
                     f"{TOP_ANSWER_BAR:.0%}, at most {OPENERS_BAR} assistant openers: not measured yet")
    return lines


def ship_decision(chosen: dict | None, gate: list[str]) -> bool | None:
    """Whether the judge that would ship ships as the package's relevance judge and becomes the one the docs
    recommend: every part of issue 61's gate (:func:`ship_gate`) met; ``False`` as soon as one part is not
    (short of the gate nothing new ships), ``None`` while a part is not measured yet."""
    if not chosen or not chosen.get("chosen"):
        return None
    if any("**not met**" in line for line in gate):
        return False
    if any("not measured yet" in line or "not decided yet" in line for line in gate):
        return None
    return True


def ship_line(chosen: dict | None, gate: list[str]) -> str:
    """:func:`ship_decision` in words, with the parts that decided it."""
    decision = ship_decision(chosen, gate)
    if decision is None:
        return ("- ships as the package's relevance judge: not decided yet ("
                + ("no lever chosen)" if not chosen or not chosen.get("chosen") else "parts of the gate not measured yet)"))
    if decision:
        return "- ships as the package's relevance judge, recommended for `full_reward` and `FullCallback`: **yes**"
    failed = [line.split(":", 1)[0].removeprefix("- ") for line in gate if "**not met**" in line]
    return (f"- ships as the package's relevance judge: **no**, the gate is not met ({'; '.join(failed)}) and short of "
            "it nothing new ships")


def measured(data_folder: str) -> dict[str, Any]:
    """Everything reproduce.sh has measured so far, read from its records, and the bar's verdict on it."""
    records = {p.stem.removeprefix("adaptation-"): json.loads(p.read_text(encoding="utf-8"))
               for p in sorted(HERE.glob("adaptation-*.json"))}
    probe, chosen = _load("probe.json"), _load("chosen.json")
    runs = {name: run for name in RUNS if (run := _load(f"grpo-{name}.json"))}
    name = chosen.get("chosen") if chosen else None
    agreement, worse, commands = complaints_report.agreement_section(
        data_folder, (complaints_report.HERE / "shipped", "smollm2-complaints"),
        (HERE / "agreement", f"smollm2-relevance-{name}-s{chosen.get('seed', 0)}" if name else "the chosen judge"))
    return {"records": records, "probe": probe, "chosen": chosen, "runs": runs, "cross": _load("cross.json"),
            "wall": _load("wall.json") or {}, "pilot": _load("pilot-contrast.json"), "agreement": agreement,
            "commands": commands, "verdict": bar_verdict(probe, chosen, runs, worse),
            "gate": ship_gate(probe, chosen, runs, worse), "pilot_mi": _load("pilot-mi.json")}


def main(data_folder: str = "../shared/data") -> None:
    m = measured(data_folder)
    records, probe, chosen, wall, pilot = m["records"], m["probe"], m["chosen"], m["wall"], m["pilot"]
    pilot_mi = m["pilot_mi"]
    runs, cross, agreement, commands, verdict = m["runs"], m["cross"], m["agreement"], m["commands"], m["verdict"]
    missing = ([] if chosen and "seeds" in chosen else ["the chosen setting's seed 1"]) \
        + ([] if agreement else ["agreement with people"]) \
        + [f"GRPO {n} ({what})" for n, what in RUNS.items() if n not in runs] + ([] if cross else ["cross scoring"])
    rule_text = "Not applied yet (it needs every lever's probe)."
    if chosen:
        rule_text = "```json\n" + json.dumps(chosen, indent=1) + "\n```"
    text = f"""# A judge that hears relevance (issue 45)

Made by `bash reports/smollm2-relevance/reproduce.sh` (each step's command, the yardstick and the choosing
rule, written before the first run, are in it; wall times on a 2-core CPU machine in `wall.json`; the training runs
from pairs2 on preload jemalloc where the system has it, which trains the same weights with a shorter step than
glibc's malloc, docs/performance.md, so their times are not comparable with mix's; from the Gemma lever on, the
frozen weights are cast to bfloat16 once for the loop, not at every call: the same weights again). Every
lever is judged on held-out data only: adapt's held-out LM loss and pairs, and the gaming probe's
held-out contexts; never on rated data.

## The levers (seed 0; held-out synthetic pairs and LM loss)

{levers_section(records, wall, _load("held-out.json")) if records else "None finished yet."}

## The yardstick: the gaming probe

On {probe['contexts'] if probe else '(not run)'} held-out contexts, the share of contexts where each answer
scores above the human's real next turn, with Wilson 95% intervals (`reports/smollm2-complaints/probe.py`;
base = smollm2-gguf, shipped = smollm2-complaints, the others the levers' seed-0 judges). Counted as: {tie_rule(probe)}.

{markdown_table(probe) if probe else "Not run yet."}

{"Each judge against the bar's probe parts (same topic: against smollm2-complaints' share):" + chr(10) + chr(10)
 + parts_section(probe) if probe and "shipped" in probe["judges"] else ""}

## Lever 3, the contrast scoring option: its pilot

FULL in context minus FULL with no context, smollm2-complaints, on the first {pilot['contexts'] if pilot else 40}
held-out dialogs (`pilot_contrast.py`; the same-topic answers come from among these few, so compare the two
columns with each other, not with the probe above):

{pilot_section(pilot) if pilot else "Not run yet."}

## Issue 61's lever: the response's mutual information with its context, its pilot

FULL + w (log P(response | context) - log P(response)), smollm2-complaints, on the same first
{pilot_mi['contexts'] if pilot_mi else 40} held-out dialogs (`pilot_mi.py`; the weight chosen on the held-out pairs
of the other held-out dialogs only; "mutual information alone" ranks by it without FULL):

{pilot_mi_section(pilot_mi) if pilot_mi else "Not run yet."}

## The rule's outcome (choose.py)

{rule_text}

## GRPO (100 steps, lr 5e-5, issue 37's prompts and seed)

{complaints_report.grpo_section(runs, cross) if runs else "Not run yet."}

{"Answers that offer help (ask how they can help or assist: the assistant opener), before -> after training; "
 "the distinct share hides this drift when the wording varies:" + chr(10) + chr(10) + openers_section(runs)
 if runs else ""}

## Against people (the chosen judge, paired with smollm2-complaints)

{agreement or "Not measured yet."}

## The gate (issue 61), part by part: whether it ships and is recommended

{chr(10).join(m["gate"])}
{ship_line(chosen, m["gate"])}

## The bar (issue 45), part by part: the goal, where the judge stands

{chr(10).join(verdict)}
{"" if not missing else chr(10) + "Not measured yet, and made by reproduce.sh as it goes on: " + ", ".join(missing) + "."}
{chr(10).join(commands)}
"""
    (HERE / "report.md").write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main(*sys.argv[1:2])
