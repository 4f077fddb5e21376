#!/usr/bin/env bash
# Runs the live-update benchmarks: bash bench/run_live.sh BUILD_DIR OUT
# Writes OUT/live_update.json and OUT/live_update.png (copy them to bench/results/).
set -euo pipefail
BUILD_DIR="$1"
OUT="$2"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mkdir -p "$OUT"
"$BUILD_DIR/bin/gpuos_bench_live" "$OUT/live_update.json" "$BUILD_DIR/bin/gpuos-registry" \
  "${GPUOS_BENCH_SWITCHES:-200}"
python3 "$ROOT/bench/plot_live.py" "$OUT/live_update.json" "$OUT/live_update.png" ||
  echo "plot skipped (no matplotlib?)"
