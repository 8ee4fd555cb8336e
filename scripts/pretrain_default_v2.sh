#!/usr/bin/env bash
# Start, or resume, the pretraining run of the v2 bundled default model (issue 20), detached; idempotent.
#
#   scripts/pretrain_default_v2.sh          # builds the corpus if missing, then starts or resumes the run
#   RUN=/elsewhere scripts/pretrain_default_v2.sh
#
# Does nothing if the run is already going (its pid in $RUN/pid is alive) or has spent its token budget
# ($RUN/export/training.json then holds the final model; an interrupted run exports too, with fewer tokens).
# The run survives this shell (setsid nohup), at nice 10, checkpoints every 8 minutes, and resumes exactly from
# $RUN/checkpoint.pt when the session that ran it ended. THREADS=2 uses both cores (default 1, leaving one for
# other work). Progress: $RUN/stdout.log (tqdm) and $RUN/log.csv (held-out perplexity every 0.5M tokens).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
RUN=${RUN:-/work/runs/pretrain-v2}
PY=${PYTHON:-/work/main/.venv/bin/python}
export PROBING_DATA=${PROBING_DATA:-/work/shared/data}
export NLTK_DATA=${NLTK_DATA:-$PROBING_DATA/nltk_data}
MAX_TOKENS=${MAX_TOKENS:-36000000}
THREADS=${THREADS:-1}
export OMP_NUM_THREADS=$THREADS PYTHONPATH=$REPO

mkdir -p "$RUN"
if [[ -f $RUN/pid ]] && kill -0 "$(cat "$RUN/pid")" 2>/dev/null \
    && grep -q "probing.cli" "/proc/$(cat "$RUN/pid")/cmdline" 2>/dev/null; then
    echo "already running: pid $(cat "$RUN/pid"); tail $RUN/stdout.log"
    exit 0
fi
if [[ -f $RUN/export/training.json ]] && "$PY" -c 'import json, sys
sys.exit(json.load(open(sys.argv[1]))["tokens_seen"] < int(sys.argv[2]))' "$RUN/export/training.json" "$MAX_TOKENS"; then
    echo "finished: $RUN/export holds the model after $MAX_TOKENS tokens (training.json); nothing to do"
    exit 0
fi
if [[ ! -s $RUN/corpus/train.txt || ! -s $RUN/corpus/valid.txt ]]; then
    echo "building the corpus in $RUN/corpus"
    nice -n 10 "$PY" "$REPO/scripts/make_pretrain_corpus.py" --out "$RUN/corpus" > "$RUN/corpus.log" 2>&1
fi

args=(--out "$RUN" --export-dtype float16 --threads "$THREADS")
if [[ -f $RUN/checkpoint.pt ]]; then
    args+=(--resume --max-tokens "$MAX_TOKENS")
else
    args+=(
        --train "$RUN/corpus/train.txt" --valid "$RUN/corpus/valid.txt"
        --options "$REPO/probing/resources/configs/elmo-default-v2.json"
        --max-tokens "$MAX_TOKENS" --batch-tokens 4096 --checkpoint-minutes 8 --seed 0
        --precision auto
    )
fi
cd "$RUN"
setsid nohup nice -n 10 "$PY" -m probing.cli pretrain "${args[@]}" >> "$RUN/stdout.log" 2>&1 < /dev/null &
echo $! > "$RUN/pid"
echo "started pid $!: $PY -m probing.cli pretrain ${args[*]}"
echo "progress: tail -c 400 $RUN/stdout.log; cat $RUN/log.csv"
