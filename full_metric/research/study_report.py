"""The settings study's report: every configuration on every development set, and the honest choice.

Reads nothing and scores nothing: it takes log-likelihood tables (see ``full-metric
score-candidates``) and writes Markdown and JSON.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ..errors import UsageError
from ..follow_ups import CANDIDATES
from .human_eval import LEVELS
from .loglik_tables import LogLikTable
from .study import (
    STUDY_AGGREGATIONS, Config, Slice, SliceData, choose, covers, data_set_mean, evaluate, follow_up_rules,
    leave_one_out, length_baseline, rule_scores, signed_scores, slice_data, spearman,
)

#: The issue's targets (Spearman, out-of-selection) per slice name.
TARGETS = {"fed-turn": 0.40, "fed-dialog": 0.60, "usr-topicalchat": 0.35, "usr-personachat": 0.35}


def _variant_name(table: LogLikTable) -> str:
    name = f"{table.model} · {table.rendering}"
    if table.max_turns != 50:
        name += f" · last {table.max_turns} turns"
    if table.context_budget is not None:
        name += f" · {table.context_budget} tokens"
    if len(table.follow_ups) != len(CANDIDATES):
        name += f" · {len(table.follow_ups)} candidates"
    return name


def build_variants(
    tables: Sequence[LogLikTable],
) -> tuple[dict[str, dict[Slice, SliceData]], dict[str, str], dict[str, dict[str, Any]]]:
    """Single-model variants (one per model, rendering and context window) and the average of
    every pair of different models with the same context window (on their common candidates);
    also each variant's model family (``"average"`` for averages) and each single-model
    variant's scorer settings."""
    groups: dict[str, dict[str, LogLikTable]] = {}
    for table in tables:
        by_set = groups.setdefault(_variant_name(table), {})
        if table.data_set in by_set:
            raise UsageError(f"two tables for {_variant_name(table)} on {table.data_set}")
        by_set[table.data_set] = table
    data_sets = sorted({t.data_set for t in tables})
    incomplete = [name for name, by_set in groups.items() if sorted(by_set) != data_sets]
    if incomplete:
        raise UsageError(f"variants without a table for every data set {data_sets}: {incomplete}")
    variants: dict[str, dict[Slice, SliceData]] = {}
    family: dict[str, str] = {}
    settings: dict[str, dict[str, Any]] = {}
    for name, by_set in groups.items():
        variants[name] = _slices([[t] for t in by_set.values()])
        first = next(iter(by_set.values()))
        family[name] = first.model
        settings[name] = {"model": first.model, "rendering": first.rendering, "max_turns": first.max_turns,
                          "context_budget": first.context_budget}
    names = list(groups)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            ta, tb = next(iter(groups[a].values())), next(iter(groups[b].values()))
            common = [f for f in ta.follow_ups if f in set(tb.follow_ups)]
            if ta.model == tb.model or (ta.max_turns, ta.context_budget) != (tb.max_turns, tb.context_budget):
                continue
            name = f"average of {a} and {b}"
            if len(common) < len(ta.follow_ups) or len(common) < len(tb.follow_ups):
                name += f" (on their {len(common)} common candidates)"
            variants[name] = _slices([[groups[a][d], groups[b][d]] for d in data_sets], common)
            family[name] = "average"
    return variants, family, settings


def _slices(per_set: list[list[LogLikTable]], follow_ups: list[str] | None = None) -> dict[Slice, SliceData]:
    out = {}
    for tables in per_set:
        for level in LEVELS:
            if tables[0].level(level):
                out[Slice(tables[0].data_set, level)] = slice_data(tables, level, follow_ups)
    return out


def _cell(value: float | None, slice_name: str | None = None) -> str:
    if value is None:
        return "–"
    mark = ""
    if slice_name is not None and slice_name in TARGETS:
        mark = " ✓" if value >= TARGETS[slice_name] else ""
    return f"{value:.3f}{mark}"


@dataclass
class Study:
    """What the study found: the tables every variant has on every set (``tables``) and those it
    left out (``partial``), the variants' slices, the follow-up rules, the length baseline, every
    configuration (``grid``), each family's leave-one-out ``protocols`` and the paper's settings
    per variant (``default_rows``)."""

    tables: list[LogLikTable]
    partial: list[LogLikTable]
    variants: dict[str, Any]
    family: dict[str, str]
    settings: dict[str, Any]
    rules: dict[str, Any]
    slices: list[Slice]
    baseline: dict[Slice, float]
    grid: list[dict[str, Any]]
    protocols: list[dict[str, Any]]
    default_rows: list[tuple[str, Any]]

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.slices]


def run_study(tables: Sequence[LogLikTable]) -> Study:
    """Every configuration on ``tables``, and each family's leave-one-out choice (no file written)."""
    counts = Counter(_variant_name(t) for t in tables)
    every = max(counts.values())
    partial = [t for t in tables if counts[_variant_name(t)] < every]
    tables = [t for t in tables if counts[_variant_name(t)] == every]
    variants, family, settings = build_variants(tables)
    rules = follow_up_rules()
    slices = sorted({s for v in variants.values() for s in v}, key=lambda s: (s.data_set != "fed", s.data_set, s.level != "turn"))
    baseline = length_baseline(next(iter(variants.values())))

    grid = []
    for variant, data in variants.items():
        for rule_name, (rule, driven) in rules.items():
            for aggregation in STUDY_AGGREGATIONS:
                scores = rule_scores(data, rule, driven, aggregation)
                if scores is None:
                    continue
                grid.append({"variant": variant, "follow_ups": rule_name, "chosen_from_data": driven,
                             "aggregation": aggregation, **{s.name: scores[s] for s in slices},
                             "mean": data_set_mean(scores)})
    grid.sort(key=lambda r: -r["mean"])

    families = {"any (models and averages)": lambda c: True}
    for name in sorted(set(family.values()) - {"average"}):
        families[name] = lambda c, name=name: family[c.variant] == name
    protocols = []
    for label, allowed in families.items():
        folds = leave_one_out(variants, rules, STUDY_AGGREGATIONS, allowed)
        final = choose(variants, None, rules, STUDY_AGGREGATIONS, allowed)
        in_sample = evaluate(final[1], final[2], variants[final[1].variant])
        protocols.append({"family": label, "folds": folds, "final": final, "in_sample": in_sample})

    default_rows = []
    for variant, data in variants.items():
        if family[variant] == "average":
            continue
        scores = evaluate(Config(variant, "paper five", "sum"), rules["paper five"][0]([]), data)
        default_rows.append((variant, scores))

    return Study(tables, partial, variants, family, settings, rules, slices, baseline, grid, protocols, default_rows)


def write_study(
    tables: Sequence[LogLikTable], out_dir: str | Path, command: str
) -> tuple[Path, dict[str, Any]]:
    """Run the study on ``tables``; write ``report.md`` and ``results.json`` into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    study = run_study(tables)
    lines = [*_header_lines(study, command), *_selection_lines(study), *_partial_lines(study), *_grid_lines(study)]
    path = out / "report.md"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    results = _results(study, command)
    (out / "results.json").write_text(json.dumps(results, indent=1), encoding="utf-8")
    return path, results


def _header_lines(study: Study, command: str) -> list[str]:
    """The tables and protocol, the length baseline, the paper's settings, the leave-one-out table's head."""
    tables, variants, slices, names, baseline = study.tables, study.variants, study.slices, study.names, study.baseline
    default_rows = study.default_rows
    return [
        "# Which FULL settings agree with people? A study on three development sets", "",
        f"Produced by `{command}` from these log-likelihood tables (each made by the command shown):", "",
        *[f"- {t.data_set}, {_variant_name(t)}: `{t.command or '(command not recorded)'}`" for t in tables], "",
        "Spearman correlation with the human *Overall* rating (FED: mean of the annotators; USR: mean "
        "of 3). Slices: " + ", ".join(f"{s.name} (n={len(variants[next(iter(variants))][s].human)})" for s in slices)
        + ". Every configuration is arithmetic on the tables: one scoring pass per model, rendering "
        "and context window over Table 3's candidates (all 63, or the number the variant's name "
        "gives); a follow-up set is tried only on variants that scored all its follow-ups.", "",
        "**Selection protocol.** Leave one data set out: for each of FED, USR-TopicalChat and "
        "USR-PersonaChat, every choice (model or average, rendering, follow-up set, the follow-ups of "
        "a data-chosen set, aggregation) is made on the other two sets only (mean Spearman, each set's "
        "slices averaged first), and the chosen configuration is reported on the held-out set. Those "
        "are the numbers to trust. Positive follow-ups (Table 3's polarity) enter with the opposite sign.", "",
        "## Length baseline", "",
        "| | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|",
        "| length in words (response; whole dialog at dialog level) | "
        + " | ".join(_cell(baseline[s]) for s in slices) + " |", "",
        "## The paper's settings (five negative follow-ups, sum), no selection", "",
        "| model · rendering | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|",
        *[f"| {v} | " + " | ".join(_cell(sc[s], s.name) for s in slices) + " |" for v, sc in default_rows], "",
        "## Chosen without the reported set (leave one data set out)", "",
        f"✓: at or above the issue's target ({', '.join(f'{k} {v:.2f}' for k, v in TARGETS.items())}).", "",
        "| choosing among | held out | chosen on the other sets | selection mean | "
        + " | ".join(names) + " |", "|---" * (len(names) + 4) + "|",
    ]


def _selection_lines(study: Study) -> list[str]:
    """The leave-one-out rows, the targets, and the presets chosen on all three sets."""
    protocols, slices, names, baseline = study.protocols, study.slices, study.names, study.baseline
    lines: list[str] = []
    for p in protocols:
        for fold in p["folds"]:
            c = fold.config
            cells = [_cell(fold.held_out_scores.get(s), s.name) for s in slices]
            lines.append(f"| {p['family']} | {fold.held_out} | {c.variant}; {c.rule}; {c.aggregation} | "
                         f"{fold.selection_score:.3f} | " + " | ".join(cells) + " |")
    lines += ["", "Each row's numbers are on the held-out set only; '–' marks the sets it was chosen on.", "",
              "## Against the targets", "",
              "Per slice: the issue's target, the length baseline, and the leave-one-out figure of each "
              "choice (the honest estimate).", "",
              "| slice | target | length | " + " | ".join(f"chosen among {p['family']}" for p in protocols) + " |",
              "|---" * (len(protocols) + 3) + "|"]
    for s in slices:
        held = [next(f.held_out_scores[s] for f in p["folds"] if f.held_out == s.data_set) for p in protocols]
        lines.append(f"| {s.name} | {TARGETS.get(s.name, float('nan')):.2f} | {baseline[s]:.3f} | "
                     + " | ".join(_cell(v, s.name) + (" (> length)" if v > baseline[s] else "") for v in held) + " |")
    lines += ["",
              "## The presets: chosen on all three sets", "",
              "The same choice made on all three sets (the numbers are in-sample, so optimistic; the "
              "leave-one-out rows above estimate how the choice generalises):", "",
              "| choosing among | configuration | follow-ups | " + " | ".join(names) + " |",
              "|---" * (len(names) + 3) + "|"]
    for p in protocols:
        _, c, follow_ups = p["final"]
        lines.append(f"| {p['family']} | {c.variant}; {c.rule}; {c.aggregation} | "
                     + "; ".join(follow_ups[:10]) + (" ..." if len(follow_ups) > 10 else "") + " | "
                     + " | ".join(_cell(p["in_sample"][s]) for s in slices) + " |")
    return lines


def _partial_lines(study: Study) -> list[str]:
    """The variants not scored on every set, described only."""
    partial, rules = study.partial, study.rules
    lines: list[str] = []
    if partial:
        lines += ["", "## Descriptive only: variants not scored on every set", "",
                  "These tables miss a data set, so they take no part in any choice; fixed follow-up sets only.", "",
                  "| model · rendering | set | follow-ups | " + " | ".join(STUDY_AGGREGATIONS) + " |",
                  "|---" * (len(STUDY_AGGREGATIONS) + 3) + "|"]
        for table in partial:
            data = _slices([[table]])
            for rule_name, (rule, driven) in rules.items():
                if driven or not covers(data, rule([])):
                    continue
                for s_, d in data.items():
                    cells = [_cell(spearman(signed_scores(d, rule([]), a), d.human), s_.name) for a in STUDY_AGGREGATIONS]
                    lines.append(f"| {_variant_name(table)} | {s_.name} | {rule_name} | " + " | ".join(cells) + " |")
            for s_, v in length_baseline(data).items():
                lines.append(f"| {_variant_name(table)} | {s_.name} | length baseline | {_cell(v)} |"
                             + " |" * (len(STUDY_AGGREGATIONS) - 1))
        lines += ["", "Commands: " + "; ".join(f"`{t.command}`" for t in partial)]
    return lines


def _grid_lines(study: Study) -> list[str]:
    """Every configuration, best first."""
    names, grid = study.names, study.grid
    lines: list[str] = []
    lines += ["", "## Every configuration", "",
              "Data-chosen follow-up sets are chosen without the set each number is on (leave one set "
              "out); the rest involve no data. Picking the best row of this table after seeing it is "
              "itself a selection on all sets: use the leave-one-out rows for honest figures.", "",
              "| model · rendering | follow-ups | aggregation | " + " | ".join(names) + " | mean |",
              "|---" * (len(names) + 4) + "|"]
    for r in grid:
        lines.append(f"| {r['variant']} | {r['follow_ups']} | {r['aggregation']} | "
                     + " | ".join(_cell(r[n], n) for n in names) + f" | {r['mean']:.3f} |")
    return lines


def _results(study: Study, command: str) -> dict[str, Any]:
    """``results.json``: the command, the baseline, each protocol's folds and final choice, the grid."""
    slices, baseline, protocols, settings, grid = study.slices, study.baseline, study.protocols, study.settings, study.grid
    return {
        "command": command,
        "length_baseline": {s.name: baseline[s] for s in slices},
        "protocols": [
            {"family": p["family"],
             "folds": [{"held_out": f.held_out, "variant": f.config.variant, "follow_up_rule": f.config.rule,
                        "aggregation": f.config.aggregation, "follow_ups": f.follow_ups,
                        "selection_score": f.selection_score,
                        "held_out_scores": {s.name: v for s, v in f.held_out_scores.items()}} for f in p["folds"]],
             "final": {"variant": p["final"][1].variant, "settings": settings.get(p["final"][1].variant),
                       "follow_up_rule": p["final"][1].rule,
                       "aggregation": p["final"][1].aggregation, "follow_ups": p["final"][2],
                       "in_sample": {s.name: v for s, v in p["in_sample"].items()}}}
            for p in protocols
        ],
        "grid": grid,
    }
