#!/usr/bin/env bash
# Maintainers: after a new bundled model (scripts/bundle_default_model.py), re-measure everything README and the
# model card report about it, one benchmark after another, each into $LOGS/<name>.log (a step whose log ends
# with "done" is skipped when the script is run again, so an interrupted refresh resumes).
#
#   PROBING_DATA=/path/to/shared/data scripts/refresh_default_model.sh [LOGS]     (default LOGS: ./refresh-logs)
#
# Then: copy the tables from the logs into README (demo, paper subset, structural, MDL/CKA, claims, at scale) and the
# model card (bench_default_model: the targets of issue 20), and review `git diff --stat figures/`.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
logs="$(realpath -m "${1:-refresh-logs}")"
py="${PYTHON:-python}"
: "${PROBING_DATA:?set PROBING_DATA to a folder laid out like shared/data}"
export NLTK_DATA="${NLTK_DATA:-$PROBING_DATA/nltk_data}"
mkdir -p "$logs"
cd "$root"

step() {
    local name=$1
    shift
    if [[ -f $logs/$name.log ]] && [[ $(tail -n 1 "$logs/$name.log") == done ]]; then
        echo "skip $name (done: $logs/$name.log)"
        return
    fi
    echo "$(date +%T) $name: $*"
    /usr/bin/time -v "$@" > "$logs/$name.log" 2>&1
    echo done >> "$logs/$name.log"
}

step demo env PYTHON="$py" scripts/refresh_figures.sh
step targets "$py" benchmarks/bench_default_model.py --out "$logs/targets"
step claims "$py" benchmarks/bench_claims.py --out "$logs/claims"
step structural "$py" benchmarks/bench_structural.py --threads 2
step mdl_similarity "$py" benchmarks/bench_mdl_similarity.py --threads 2
step scale "$py" benchmarks/bench_scale.py --big-rows 0
echo "$(date +%T) all steps done; tables in $logs/*.log"
