#!/usr/bin/env bash
# Maintainers: refresh the committed figures/ (PNGs and demo_results.csv) from a full `probing demo`.
#
# `probing demo` itself writes to ./probing-demo/ and never touches figures/; this script runs the full demo
# (not --quick: the committed figures and README's table show full-size numbers) in a temporary folder and
# copies its figures and results table over the committed ones. Review with `git diff --stat figures/`, then
# update README's demo table from figures/demo_results.csv.
#   usage: scripts/refresh_figures.sh        (PYTHON=... to choose the interpreter)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
(cd "$root" && "${PYTHON:-python}" -m probing.cli demo --out "$out")
cp "$out"/figures/*.png "$root/figures/"
cp "$out/results/results.csv" "$root/figures/demo_results.csv"
echo "refreshed $root/figures from $out"
