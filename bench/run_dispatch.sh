#!/usr/bin/env bash
# Runs the dispatch benchmarks: bash bench/run_dispatch.sh BUILD_DIR OUT
# Writes OUT/dispatch.json and OUT/dispatch.png (copy them to bench/results/).
set -euo pipefail
BUILD_DIR="$1"
OUT="$2"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mkdir -p "$OUT"
"$BUILD_DIR/bin/gpuos_bench_dispatch" "$OUT/dispatch.json" "${GPUOS_BENCH_ITERATIONS:-200}"
python3 "$ROOT/bench/plot_dispatch.py" "$OUT/dispatch.json" "$OUT/dispatch.png" ||
  echo "plot skipped (no matplotlib?)"
