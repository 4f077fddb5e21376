#!/usr/bin/env bash
# Runs the round-trip probe: bash bench/run_roundtrip.sh BUILD_DIR OUT
# Writes OUT/roundtrip.json (a diagnostic of where a small submission's time
# goes; copy it to bench/results/ when it backs a claim).
set -euo pipefail
BUILD_DIR="$1"
OUT="$2"
mkdir -p "$OUT"
"$BUILD_DIR/bin/gpuos_bench_roundtrip" "$OUT/roundtrip.json" "${GPUOS_ROUNDTRIP_ITERATIONS:-2000}"
