#!/usr/bin/env bash
# The one command for the GPU machine: unpack offline dependencies, build,
# run every test (GPU tests included) and the benchmarks, and write logs and
# results under $OUT (default <repo>/out).
#
#   bash tools/gpu-check.sh [--no-bench] [--ctest-args "<args>"]
#
# Carry `.deps` (made by `tools/offline-deps.sh fetch` on a networked
# machine) with the tree; the GPU machine has no network.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${OUT:-$ROOT/out}"
BUILD_DIR="${GPUOS_BUILD_DIR:-$ROOT/build/gpu}"
RUN_BENCH=1
CTEST_ARGS=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --no-bench) RUN_BENCH=0 ;;
    --ctest-args)
      [[ $# -ge 2 ]] || { echo "--ctest-args needs a value" >&2; exit 2; }
      CTEST_ARGS="$2"; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$OUT"
export PATH="/usr/local/cuda/bin:$PATH"
status=0

{
  # The device copy of the tree is not a git checkout: pass GPUOS_COMMIT.
  echo "commit: ${GPUOS_COMMIT:-$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)}"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
  nvcc --version | tail -1
} | tee "$OUT/environment.txt"

DEPS_DIR="${GPUOS_DEPS_DIR:-$ROOT/.deps}"
if [[ -f "$DEPS_DIR/debs/MANIFEST" ]]; then
  if ! GPUOS_DEPS_DIR="$DEPS_DIR" bash "$ROOT/tools/offline-deps.sh" unpack >"$OUT/deps.log" 2>&1; then
    tail -20 "$OUT/deps.log"
    echo "UNPACKING OFFLINE DEPENDENCIES FAILED"
    exit 1
  fi
  tail -1 "$OUT/deps.log"
fi

echo "== build"
if ! { cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
         -DGPUOS_WARNINGS_AS_ERRORS=ON -DGPUOS_DEPS_PREFIX="$DEPS_DIR/prefix" >"$OUT/build.log" 2>&1 &&
       cmake --build "$BUILD_DIR" -j "$(nproc)" >>"$OUT/build.log" 2>&1; }; then
  tail -40 "$OUT/build.log"
  echo "BUILD FAILED"
  exit 1
fi
echo "build ok"

echo "== tests"
# shellcheck disable=SC2086
ctest --test-dir "$BUILD_DIR" --output-on-failure -j 4 --no-tests=error $CTEST_ARGS \
  >"$OUT/ctest.log" 2>&1 || status=1
grep -E "tests passed|tests failed|\*\*\*Failed|Skipped|Not Run" "$OUT/ctest.log" | tail -30

if [[ $RUN_BENCH -eq 1 && -d "$ROOT/bench" && -x "$BUILD_DIR/bin/gpuos" ]]; then
  echo "== benchmarks"
  for b in "$ROOT"/bench/run_*.sh; do
    [[ -e "$b" ]] || continue
    bash "$b" "$BUILD_DIR" "$OUT" 2>&1 | tee -a "$OUT/bench.log" || status=1
  done
fi
exit $status
