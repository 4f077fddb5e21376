#!/usr/bin/env bash
# Runs the elementwise_large_f32 benchmark: bash bench/run_elementwise.sh BUILD_DIR OUT
# Writes OUT/elementwise_large.json and OUT/elementwise_large.png (copy them to
# bench/results/). GPUOS_BENCH_ITERATIONS (default 100), GPUOS_BENCH_TILES,
# GPUOS_BENCH_ELEMENTS, GPUOS_BENCH_BLOCKS: see bench/elementwise.cpp.
set -euo pipefail
BUILD_DIR="$1"
OUT="$2"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="$BUILD_DIR/bin/gpuos_bench_elementwise"
[[ -x "$BIN" ]] || { echo "elementwise benchmark: $BIN not built"; exit 1; }
mkdir -p "$OUT"
rm -f "$OUT/elementwise_large.json"
"$BIN" "$OUT/elementwise_large.json" "${GPUOS_BENCH_ITERATIONS:-100}"
[[ -f "$OUT/elementwise_large.json" ]] || exit 0  # skipped: no GPU
python3 "$ROOT/bench/plot_elementwise.py" "$OUT/elementwise_large.json" "$OUT/elementwise_large.png" ||
  echo "plot skipped (no matplotlib?)"
