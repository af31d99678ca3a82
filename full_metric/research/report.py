"""The reproduction report: FULL against FED's Overall ratings, several configurations, one pass.

Every configuration is computed from one scoring pass over the union of their follow-ups
(aggregation is arithmetic on the per-follow-up log-likelihoods), so the report costs one run.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from .correlation import correlate
from ..follow_ups import CANDIDATES, PAPER_FIVE, REFERENCE_PACKAGE_DEFAULT
from .human_eval import LEVELS, rank_follow_ups, score_items, split_holdout, subset_result
from ..files.rated_files import FED_ASPECT, RatedData
from ..scorer import FullScorer

#: FULL's published figures and the other metrics of the paper's Table 2 (Spearman with FED
#: Overall; turn, dialog). Quoted from the paper, not measured here.
PAPER_TABLE_2 = [
    ("FULL (paper, blenderbot-400M-distill)", 0.51, 0.69), ("DynaEval", 0.32, 0.55), ("DEB", 0.19, -0.01),
    ("USL-H", 0.19, 0.15), ("GRADE", 0.12, -0.06), ("USR", 0.12, 0.06), ("HolisticEval", 0.12, -0.30),
    ("PredictiveEngage", 0.09, 0.15), ("FED", 0.09, 0.32), ("FlowScore", -0.05, -0.00), ("MAUDE", -0.09, -0.28),
    ("DialoRPT", -0.09, -0.21),
]


def _spearman(values: list[float], items: list[Any], bootstrap: int) -> tuple[float, float, float, int]:
    rated = [k for k, item in enumerate(items) if FED_ASPECT in item.ratings]
    c = correlate([values[k] for k in rated], [items[k].ratings[FED_ASPECT] for k in rated],
                  methods=("spearman",), bootstrap=bootstrap)["spearman"]
    return c.value, c.ci_low, c.ci_high, c.n


def _figures(out: Path, scorer: FullScorer, data: RatedData, results: dict, levels: list[str],
             candidates: list[str]) -> None:
    """The report's figures: FULL against FED Overall per level, and each candidate follow-up's correlation."""
    from .plots import follow_up_bars, scatter

    main = {lvl: subset_result(results[lvl], PAPER_FIVE, scorer.aggregation) for lvl in levels}
    panels = []
    for lvl in levels:
        items = data.level(lvl)
        rated = [k for k, item in enumerate(items) if FED_ASPECT in item.ratings]
        rho = _spearman(main[lvl], items, 0)[0]
        panels.append((f"{lvl} level", [main[lvl][k] for k in rated], [items[k].ratings[FED_ASPECT] for k in rated], rho))
    scatter(out / "scatter.png", panels)
    follow_up_bars(out / "follow-ups.png", rank_follow_ups(data, results, only=candidates), levels)


def build_report(
    scorer: FullScorer, data: RatedData, out_dir: str | Path, command: str, *, top_k: int = 5,
    holdout: float = 0.5, seed: int = 0, bootstrap: int = 1000,
) -> Path:
    """Score ``data`` once, write ``report.md`` and its figures into ``out_dir``; return the report path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    union = tuple(dict.fromkeys([*PAPER_FIVE, *REFERENCE_PACKAGE_DEFAULT, *(c.text for c in CANDIDATES)]))
    results = {lvl: score_items(scorer, data.level(lvl), union) for lvl in LEVELS}
    configs = [(f"paper's five, {agg}", PAPER_FIVE, agg) for agg in ("sum", "mean", "perplexity")]
    configs.append(("`reference` settings: the package's four follow-ups, perplexity", REFERENCE_PACKAGE_DEFAULT, "perplexity"))
    rows = []
    for name, follow_ups, agg in configs:
        cells = [_spearman(subset_result(results[lvl], follow_ups, agg), data.level(lvl), bootstrap)
                 if results[lvl] is not None else None for lvl in LEVELS]
        rows.append((name, "all items", cells))
    select, report = split_holdout(data, holdout, seed)
    select_results = {lvl: _subset_items(results[lvl], data.level(lvl), select.level(lvl)) for lvl in LEVELS}
    candidates = [c.text for c in CANDIDATES]
    ranking = rank_follow_ups(select, select_results, only=candidates)
    top = [r["follow_up"] for r in ranking[:top_k]]
    report_results = {lvl: _subset_items(results[lvl], data.level(lvl), report.level(lvl)) for lvl in LEVELS}
    for name, follow_ups in ((f"top {top_k} selected on the other {1 - holdout:.0%}", top), ("paper's five", PAPER_FIVE)):
        cells = [_spearman(subset_result(report_results[lvl], follow_ups, "sum"), report.level(lvl), bootstrap)
                 if report_results[lvl] is not None else None for lvl in LEVELS]
        rows.append((f"{name}, sum", f"held-out {holdout:.0%}", cells))

    levels = [lvl for lvl in LEVELS if results[lvl] is not None]  # a set may have one level only
    _figures(out, scorer, data, results, levels, candidates)
    signature = scorer.signature(PAPER_FIVE, levels[0])
    lines = [
        "# FULL on FED: reproduction report", "",
        f"Produced by `{command}`.", "",
        f"- Model: `{scorer.loaded.name}` (rendering `{scorer.rendering}`); signature of the default "
        f"configuration: `{signature}`",
        f"- Data: FED, {len(data.level('turn'))} turn-level and {len(data.level('dialog'))} dialog-level items, "
        "human *Overall* rating = mean of the annotators' ratings.",
        f"- Spearman correlation with 95% bootstrap intervals ({bootstrap} resamples). One scoring pass over "
        f"{len(union)} follow-ups; every configuration is computed from its log-likelihoods.", "",
        "## Measured here", "",
        "| configuration | items | turn Spearman [95% CI] | dialog Spearman [95% CI] |", "|---|---|---|---|",
    ]
    for name, part, cells in rows:
        text = [f"{c[0]:.3f} [{c[1]:.2f}, {c[2]:.2f}] (n={c[3]})" if c is not None else "no items" for c in cells]
        lines.append(f"| {name} | {part} | {text[0]} | {text[1]} |")
    lines += [
        "",
        f"The held-out rows split each level's items at random (seed {seed}): follow-ups are ranked on "
        f"{1 - holdout:.0%} of the items by the paper's combined turn and dialog rank, and both sets are "
        f"reported on the other {holdout:.0%} only. Selected: " + "; ".join(f"*{f}*" for f in top) + ".",
        "",
        "The `reference` rows use the authors' package's follow-ups and perplexity aggregation; its tab "
        "rendering and right truncation apply to encoder-decoder models only, so this decoder-only model "
        "reads the dialog through its chat template.",
        "",
        "![FULL against FED Overall, paper's five follow-ups](scatter.png)",
        "",
        "![Correlation of each candidate follow-up on all of FED (descriptive: selecting on these "
        "numbers and reporting on the same data overstates them)](follow-ups.png)",
        "",
        "## Quoted from the paper (not measured here)", "",
        "Spearman with FED Overall, the paper's Table 2 (FULL with blenderbot-400M-distill; the other "
        "metrics from Yeh et al., 2021):", "",
        "| metric | turn | dialog |", "|---|---|---|",
        *[f"| {name} | {t:.2f} | {d:.2f} |" for name, t, d in PAPER_TABLE_2],
        "",
    ]
    path = out / "report.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def _subset_items(result: Any, items: list[Any], chosen: list[Any]) -> Any:
    """The rows of ``result`` (scored on ``items``) for the ``chosen`` items, in their order."""
    if result is None:
        return None
    position = {id(item): k for k, item in enumerate(items)}
    keep = [position[id(item)] for item in chosen]
    return replace(
        result,
        scores=[result.scores[k] for k in keep],
        follow_up_log_likelihoods=[result.follow_up_log_likelihoods[k] for k in keep],
        dropped_tokens=[result.dropped_tokens[k] for k in keep],
        category_scores={c: [v[k] for k in keep] for c, v in result.category_scores.items()},
    )
