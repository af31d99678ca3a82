"""Write ``full_metric/study_presets.py`` from the study's ``results.json``: one preset per model family,
the configuration chosen for it on all three development sets.

Usage (from the repository root, after ``full-metric study ... -o reports/study``):
    python reports/study/make_presets.py [reports/study/results.json] [full_metric/study_presets.py]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from full_metric.research.study import SIGN

#: The Hub repository of each family label used in the study's tables (the study scored GGUF files).
HUB_MODELS = {
    "smollm2": "HuggingFaceTB/SmolLM2-135M-Instruct",
    "gemma3": "google/gemma-3-270m",
}

#: The line that opens the presets; ``study_presets.py`` keeps what stands above it (docstring, imports).
OPENING = "STUDY_PRESETS: dict[str, dict[str, Any]] = {"


def _tuple(items: list[str]) -> str:
    return "(\n" + "".join(f"            {json.dumps(t)},\n" for t in items) + "        )"


def presets_source(results: dict, current: str) -> str:
    """The source of ``study_presets.py`` for a study's results: ``current`` (the module's source) up to
    and including :data:`OPENING`, then one entry per model family."""
    lines = [current[: current.index(OPENING)] + OPENING]
    for protocol in sorted(results["protocols"], key=lambda p: p["family"]):
        family, final = protocol["family"], protocol["final"]
        if family not in HUB_MODELS:
            continue  # "any (models and averages)": not one model family
        chosen = final["follow_ups"]
        lines += [
            f"    {json.dumps(family)}: {{",
            f"        \"family\": {json.dumps(family)},",
            f"        \"model\": {json.dumps(HUB_MODELS[family])},",
            f"        \"rendering\": {json.dumps(final['settings']['rendering'])},",
            f"        \"max_turns\": {final['settings']['max_turns']},",
            f"        \"aggregation\": {json.dumps(final['aggregation'])},",
            f"        \"follow_ups\": {_tuple([f for f in chosen if SIGN[f] < 0])},",
            f"        \"positive_follow_ups\": {_tuple([f for f in chosen if SIGN[f] > 0])},",
            "    },",
        ]
    return "\n".join(lines + ["}", ""])


def main(argv: list[str]) -> None:
    results = Path(argv[0] if argv else "reports/study/results.json")
    target = Path(argv[1] if len(argv) > 1 else "full_metric/study_presets.py")
    source = presets_source(json.loads(results.read_text(encoding="utf-8")), target.read_text(encoding="utf-8"))
    target.write_text(source, encoding="utf-8")
    print(f"wrote {target}")


if __name__ == "__main__":
    main(sys.argv[1:])
