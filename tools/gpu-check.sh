#!/usr/bin/env bash
# The one command for the GPU machine: unpack offline dependencies, build,
# run every test (GPU tests included) and the benchmarks, and write logs and
# results under $OUT (default <repo>/out).
#
#   bash tools/gpu-check.sh [--no-bench] [--bench NAME] [--ctest-args "<args>"]
#                           [--targets "<t>..."] [--sanitize | --no-sanitize]
#                           [--demo] [--pytorch] [--all]
#
#   --demo            then run `gpuos demo` on a fresh repository ($OUT/demo.log,
#                     with every timed run listed, and the comparison's task timeline
#                     in $OUT/demo_trace.json; GPUOS_DEMO_TIMEOUT_S, default 120)
#   --pytorch         then frontends/pytorch/tools/gpu-check.sh: the package's
#                     tests and the PyTorch benchmark ($OUT/torch/)
#   --all             --demo and --pytorch: everything in one call
#   --bench NAME      run only bench/run_NAME.sh (default: every bench/run_*.sh)
#   --targets "T..."  build only these CMake targets (default: all); a cheap check
#   --sanitize        run core_runtime_gpu_test under compute-sanitizer: memcheck
#                     (GPUOS_SANITIZE_FILTER, default every test) and racecheck
#                     (GPUOS_RACECHECK_FILTER, default all but the chain of
#                     thousands and the 400 rounds of re-claimed tiles: 148 s
#                     under racecheck), and, with neither filter set, the park
#                     and relaunch test of core_runtime_park_gpu_test under
#                     both; log in $OUT/sanitizer.log. Errors, hazards,
#                     failed or skipped tests, or a timeout (GPUOS_SANITIZE_TIMEOUT
#                     seconds per tool, default 180) fail the run. On by default
#                     (about 130 s on an H200, session 27) unless --targets leaves out
#                     core_runtime_gpu_test; --no-sanitize skips it.
#
# Every ctest test is limited to GPUOS_CTEST_TIMEOUT_S seconds (default 180).
#
# Carry `.deps` (made by `tools/offline-deps.sh fetch` on a networked
# machine) with the tree; the GPU machine has no network.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${OUT:-$ROOT/out}"
BUILD_DIR="${GPUOS_BUILD_DIR:-$ROOT/build/gpu}"
RUN_BENCH=1
BENCH_NAME="*"
CTEST_ARGS=""
TARGETS=""
SANITIZE=auto
RUN_DEMO=0
RUN_PYTORCH=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --no-bench) RUN_BENCH=0 ;;
    --bench)
      [[ $# -ge 2 ]] || { echo "--bench needs a name" >&2; exit 2; }
      BENCH_NAME="$2"; shift ;;
    --targets)
      [[ $# -ge 2 ]] || { echo "--targets needs a value" >&2; exit 2; }
      TARGETS="$2"; shift ;;
    --sanitize) SANITIZE=1 ;;
    --no-sanitize) SANITIZE=0 ;;
    --demo) RUN_DEMO=1 ;;
    --pytorch) RUN_PYTORCH=1 ;;
    --all) RUN_DEMO=1; RUN_PYTORCH=1 ;;
    --ctest-args)
      [[ $# -ge 2 ]] || { echo "--ctest-args needs a value" >&2; exit 2; }
      CTEST_ARGS="$2"; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
if [[ $SANITIZE == auto ]]; then
  SANITIZE=0
  [[ -z "$TARGETS" || " $TARGETS " == *" core_runtime_gpu_test "* ]] && SANITIZE=1
fi
mkdir -p "$OUT"
export PATH="/usr/local/cuda/bin:$PATH"
status=0

# GPUOS_COMMIT, else HEAD with "-modified" when tracked files differ from it:
# the device's copy of the tree may sit beside an older .git (session 37 saw
# one name 49be90c for four later trees), so pass GPUOS_COMMIT there.
commit_label() {
  if [[ -n "${GPUOS_COMMIT:-}" ]]; then echo "$GPUOS_COMMIT"; return; fi
  local head
  head=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null) || { echo unknown; return; }
  if [[ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ]]; then
    echo "$head-modified"
  else
    echo "$head"
  fi
}
{
  echo "commit: $(commit_label)"
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

# core_runtime_gpu_test (and a park test) under compute-sanitizer's memcheck
# and racecheck. The persistent worker is launched with the driver API from an image that
# NVRTC and nvJitLink built at run time; the tool instruments it when it is
# loaded (cuModuleLoadData) like any other module. racecheck tracks every
# shared-memory access of the polling worker and is far slower than
# memcheck (H200, 025c67c: memcheck 3 s for all 8 tests; racecheck 69 s for 7,
# 61 s of it QueueFullBackpressure): it leaves out the chain of thousands.
RACECHECK_DEFAULT_FILTER="-RuntimeGpuTest.ChainOfThousandsOfDependentTasks:RuntimeGpuTest.ReclaimedTilesStayInTheirSubmission"
# core_runtime_park_gpu_test's test of parking and relaunching (both tools;
# its other tests count blocks or relaunches against the clock, which the
# tools slow down). Run when no GPUOS_*_FILTER narrows the run.
PARK_SANITIZE_FILTER="RuntimeParkGpuTest.ParkAndRelaunchUnderIntermittentLoad"
# One tool over one test binary: appends to the log, prints a summary line;
# non-zero when the tool found errors, the tests failed or were skipped, or
# it timed out.
sanitize_one() {
  local tool_path="$1" tool="$2" test_bin="$3" filter="$4" log="$5" part="$6" rc
  local t0=$SECONDS
  timeout --kill-after=10 "${GPUOS_SANITIZE_TIMEOUT:-180}" \
    "$tool_path" --tool "$tool" --error-exitcode 99 --print-limit 50 \
    "$test_bin" --gtest_filter="$filter" >"$part" 2>&1
  rc=$?
  { echo "=== $tool ($tool_path) $(basename "$test_bin"), --gtest_filter='$filter': exit $rc after $((SECONDS - t0)) s"
    cat "$part"; } >>"$log"
  # "ERROR SUMMARY: N errors"; gtest's "[  PASSED  ] N tests." and skips.
  local summary passed skipped
  summary="$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$part" | tail -1 | sed 's/^=* *//')"
  passed="$(grep -E "^\[  PASSED  \]" "$part" | tail -1)"
  skipped="$(grep -cE "^\[  SKIPPED \] [A-Za-z]" "$part")"
  echo "$tool $(basename "$test_bin"): exit $rc after $((SECONDS - t0)) s; ${summary:-no summary}; ${passed:-not all passed}; $skipped skipped"
  case $rc in
    0) ;;
    124|137) echo "$tool: TIMED OUT (GPUOS_SANITIZE_TIMEOUT=${GPUOS_SANITIZE_TIMEOUT:-180})"; return 1 ;;
    99) echo "$tool: REPORTED ERRORS (see sanitizer.log)"; return 1 ;;
    *) echo "$tool: the tests FAILED under the tool (exit $rc)"; return 1 ;;
  esac
  # A skipped test checked nothing (no device seen under the tool?).
  if [[ $skipped -ne 0 ]]; then echo "$tool: tests SKIPPED under the tool"; return 1; fi
  return 0
}
sanitize() {
  local tool_path test_bin="$BUILD_DIR/bin/core_runtime_gpu_test" failed=0 tool filter
  local park_bin="$BUILD_DIR/bin/core_runtime_park_gpu_test"
  local log="$OUT/sanitizer.log" part="$BUILD_DIR/sanitizer-part.log"
  tool_path="$(command -v compute-sanitizer || true)"
  local candidate
  for candidate in /usr/local/cuda*/compute-sanitizer/compute-sanitizer; do
    [[ -z "$tool_path" && -x "$candidate" ]] && tool_path="$candidate"
  done
  : >"$log"
  if [[ -z "$tool_path" ]]; then
    echo "SANITIZER NOT RUN: compute-sanitizer not found (PATH, /usr/local/cuda*/compute-sanitizer)" |
      tee -a "$log"
    return 1
  fi
  if [[ ! -x "$test_bin" ]]; then
    echo "SANITIZER NOT RUN: $test_bin not built" | tee -a "$log"
    return 1
  fi
  local with_park=0
  if [[ -z "${GPUOS_SANITIZE_FILTER:-}${GPUOS_RACECHECK_FILTER:-}" ]]; then
    if [[ -x "$park_bin" ]]; then
      with_park=1
    else
      echo "sanitizer: $park_bin not built; its park test not sanitized" | tee -a "$log"
    fi
  fi
  for tool in memcheck racecheck; do
    if [[ $tool == memcheck ]]; then
      filter="${GPUOS_SANITIZE_FILTER:-*}"
    else
      filter="${GPUOS_RACECHECK_FILTER:-$RACECHECK_DEFAULT_FILTER}"
    fi
    sanitize_one "$tool_path" "$tool" "$test_bin" "$filter" "$log" "$part" || failed=1
    if [[ $with_park -eq 1 ]]; then
      sanitize_one "$tool_path" "$tool" "$park_bin" "$PARK_SANITIZE_FILTER" "$log" "$part" || failed=1
    fi
  done
  return $failed
}

echo "== build"
if ! { cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
         -DGPUOS_WARNINGS_AS_ERRORS=ON -DGPUOS_DEPS_PREFIX="$DEPS_DIR/prefix" >"$OUT/build.log" 2>&1 &&
       cmake --build "$BUILD_DIR" -j "$(nproc)" ${TARGETS:+--target $TARGETS} >>"$OUT/build.log" 2>&1; }; then
  tail -40 "$OUT/build.log"
  echo "BUILD FAILED"
  exit 1
fi
echo "build ok"

echo "== tests"
# shellcheck disable=SC2086
# Each test gets GPUOS_CTEST_TIMEOUT_S (default 180 s; the runtime's longest
# GPU test took 12.2 s in session 38, bench/results/experiments/
# gpu_checks_session38.txt): a hung test fails with its name instead of
# taking the rest of the device call (session 38's first call lost nine
# minutes to one). A --timeout in --ctest-args comes later and wins.
ctest --test-dir "$BUILD_DIR" --output-on-failure -j 4 --no-tests=error \
  --timeout "${GPUOS_CTEST_TIMEOUT_S:-180}" $CTEST_ARGS >"$OUT/ctest.log" 2>&1 || status=1
grep -E "tests passed|tests failed|\*\*\*Failed|\*\*\*Timeout|Skipped|Not Run" "$OUT/ctest.log" | tail -30

if [[ $SANITIZE -eq 1 ]]; then
  echo "== compute-sanitizer"
  sanitize || status=1
fi

if [[ $RUN_BENCH -eq 1 && -d "$ROOT/bench" ]]; then
  echo "== benchmarks"
  for b in "$ROOT"/bench/run_$BENCH_NAME.sh; do
    [[ -e "$b" ]] || continue
    bash "$b" "$BUILD_DIR" "$OUT" 2>&1 | tee -a "$OUT/bench.log" || status=1
  done
fi

if [[ $RUN_DEMO -eq 1 ]]; then
  echo "== gpuos demo (fresh repository)"
  demo_home="$(mktemp -d)"
  (cd "$demo_home" && HOME="$demo_home" XDG_DATA_HOME="$demo_home" \
    GPUOS_DEMO_SAMPLES=1 GPUOS_DEMO_TRACE="$OUT/demo_trace.json" timeout "${GPUOS_DEMO_TIMEOUT_S:-120}" "$BUILD_DIR/bin/gpuos" demo) \
    >"$OUT/demo.log" 2>&1 ||
    { echo "DEMO FAILED"; status=1; }
  tail -25 "$OUT/demo.log"
  rm -rf "$demo_home"
fi

if [[ $RUN_PYTORCH -eq 1 ]]; then
  echo "== PyTorch frontend"
  OUT="$OUT/torch" GPUOS_BUILD_DIR="$BUILD_DIR" bash "$ROOT/frontends/pytorch/tools/gpu-check.sh" \
    >"$OUT/torch_console.log" 2>&1 || { echo "PYTORCH CHECK FAILED"; status=1; }
  tail -70 "$OUT/torch_console.log"
fi
exit $status
