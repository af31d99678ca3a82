"""Does FULL rank dialog systems as people do? System-level agreement on human-rated data.

For one rated set whose items name the ``system`` that wrote them: each system's human and FULL
means, the Spearman correlation of the two over systems, and for each pair of systems whether
FULL's paired test and the human ratings' own paired test (the same test, on the ratings) find a
significant difference in the same direction. Sets whose systems answered the same contexts
(USR) are compared paired; others (FED's conversations) unpaired, and the output says so.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any, Sequence

from ..comparison import PairingError, compare_systems, pair_items
from ..files.rated_files import RatedItem
from ..errors import UsageError

VERDICTS = ("agree", "disagree", "FULL only", "people only", "neither")


def _verdict(full_p: float, full_delta: float, human_p: float, human_delta: float, alpha: float) -> str:
    full_sig, human_sig = full_p < alpha, human_p < alpha
    if full_sig and human_sig:
        return "agree" if (full_delta > 0) == (human_delta > 0) else "disagree"
    return "FULL only" if full_sig else "people only" if human_sig else "neither"


def system_agreement(
    items: Sequence[RatedItem], full_scores: Sequence[float], aspect: str, *, resamples: int = 1000,
    seed: int = 12345, alpha: float = 0.05,
) -> dict[str, Any]:
    """Compare the systems of ``items`` (scored ``full_scores``, same order) by FULL and by the
    human rating ``aspect``: per system the two means; over systems the Spearman correlation; per
    pair of systems both paired bootstrap tests (uncorrected, two-sided, at ``alpha``) and the
    verdict (see :data:`VERDICTS`). Items without the aspect or a system are left out (counted)."""
    from scipy.stats import spearmanr

    kept = [(i, s) for i, s in zip(items, full_scores) if i.system is not None and aspect in i.ratings]
    by_system: dict[str, list[tuple[RatedItem, float]]] = {}
    for item, score in kept:
        by_system.setdefault(str(item.system), []).append((item, score))
    if len(by_system) < 2:
        raise UsageError(f"need at least two systems, found {sorted(by_system)}")
    names = sorted(by_system)
    try:
        order = pair_items({n: [tuple(i.context) for i, _ in by_system[n]]
                            for n in names}, names[0])
        paired = True
    except PairingError:
        order, paired = {n: list(range(len(by_system[n]))) for n in names}, False
    full = {n: [by_system[n][k][1] for k in order[n]] for n in names}
    human = {n: [by_system[n][k][0].ratings[aspect] for k in order[n]] for n in names}
    options = {"resamples": resamples, "seed": seed, "paired": paired, "alpha": alpha}
    systems = [{"system": n, "n": len(full[n]), "human_mean": sum(human[n]) / len(human[n]),
                "full_mean": sum(full[n]) / len(full[n])} for n in names]
    pairs = []
    for a, b in itertools.combinations(names, 2):
        f = compare_systems({a: full[a], b: full[b]}, **options).systems[1]
        h = compare_systems({a: human[a], b: human[b]}, **options).systems[1]
        pairs.append({"a": a, "b": b, "full_delta": f.delta, "full_p": f.p_value, "human_delta": h.delta,
                      "human_p": h.p_value, "same_sign": (f.delta > 0) == (h.delta > 0),
                      "verdict": _verdict(f.p_value, f.delta, h.p_value, h.delta, alpha)})
    rho = spearmanr([s["full_mean"] for s in systems], [s["human_mean"] for s in systems]).statistic
    return {"aspect": aspect, "paired": paired, "left_out": len(items) - len(kept), "systems": systems,
            "spearman": float(rho), "pairs": pairs,
            "counts": {v: sum(p["verdict"] == v for p in pairs) for v in VERDICTS}}


def write_system_report(rows: list[dict[str, Any]], folder: str | Path, command: str) -> Path:
    """``results.json`` (every row) and ``report.md`` (a summary table, then each set's systems and pairs)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(json.dumps({"command": command, "rows": rows}, indent=2))
    lines = ["# Does FULL rank systems like people?", "", f"Made by `{command}`.", "",
             "Pairs: for each pair of systems, FULL's paired bootstrap test and the human ratings' own test "
             "(two-sided, p < 0.05, uncorrected; unpaired where the systems did not answer the same contexts). "
             "*agree*: both significant, same direction; *disagree*: both significant, opposite; *FULL only* / "
             "*people only*: one significant; *neither*. *Same sign*: the two mean differences point the same way.",
             "", "| data set | level | model | preset | systems | paired | Spearman (systems) | agree | disagree "
             "| FULL only | people only | neither | same sign |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        c = r["counts"]
        same = sum(p["same_sign"] for p in r["pairs"])
        lines.append(f"| {r['data_set']} | {r['level']} | {r['model']} | {r['preset']} | {len(r['systems'])} | "
                     f"{'yes' if r['paired'] else 'no'} | {r['spearman']:.2f} | {c['agree']} | {c['disagree']} | "
                     f"{c['FULL only']} | {c['people only']} | {c['neither']} | {same}/{len(r['pairs'])} |")
    for r in rows:
        lines += ["", f"## {r['data_set']}, {r['level']} level, {r['model']}, preset {r['preset']}", "",
                  f"`{r['signature']}`", "", "| system | n | human mean | FULL mean |", "|---|---|---|---|"]
        lines += [f"| {s['system']} | {s['n']} | {s['human_mean']:.3f} | {s['full_mean']:.3f} |" for s in r["systems"]]
        lines += ["", "| a | b | human b - a (p) | FULL b - a (p) | verdict |", "|---|---|---|---|---|"]
        lines += [f"| {p['a']} | {p['b']} | {p['human_delta']:+.3f} ({p['human_p']:.3f}) | "
                  f"{p['full_delta']:+.3f} ({p['full_p']:.3f}) | {p['verdict']} |" for p in r["pairs"]]
    path = folder / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path
