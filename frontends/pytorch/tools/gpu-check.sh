#!/usr/bin/env bash
# The PyTorch frontend on the GPU machine: build the bridge (warnings as
# errors) and the extension, install the package, run its tests (GPU tests
# included) and the chain100 timing, then the benchmark
# (frontends/pytorch/bench/run_workloads.py -> $OUT/pytorch_workloads.json
# and .png). Logs and results go to $OUT.
#
#   GPUOS_COMMIT=<sha> bash frontends/pytorch/tools/gpu-check.sh [pytest args]
#
# GPUOS_SKIP_BENCH=1 skips the benchmark; GPUOS_BENCH_BUDGET_S (default 120)
# and GPUOS_BENCH_TIMEOUT_S (default 240) bound it. Then the task profile
# (bench/profile_tasks.py -> $OUT/profile/; GPUOS_SKIP_PROFILE=1 skips it).
#
# Needs torch in python3 (the GPU machine has 2.11) and, offline, the
# repository's .deps (tools/offline-deps.sh); the build and install are
# install-package.sh's.
set -uo pipefail
# shellcheck source=frontends/pytorch/tools/install-package.sh
source "$(dirname "${BASH_SOURCE[0]}")/install-package.sh" || exit 1
echo "== tests"
cd "$ROOT" && GPUOS_BENCH_OUT="$OUT/pytorch_chain100.json" GPUOS_TORCH_CACHE="$BUILD/torch-cache.db" \
  "$PY" -m pytest -rs -q -p no:cacheprovider frontends/pytorch/tests "$@" 2>&1 | tee "$OUT/pytest.log" | tail -40
status=${PIPESTATUS[0]}
cat "$OUT/pytorch_chain100.json" 2>/dev/null
echo
if [[ "${GPUOS_SKIP_BENCH:-0}" != 1 ]]; then
  # The issue-5 workloads x variants (docs/pytorch.md, "Benchmarks"): 400 timed
  # calls per variant and case; cases not started within GPUOS_BENCH_BUDGET_S
  # are recorded as skipped; the JSON is rewritten after each case.
  echo "== benchmark: pytorch_workloads"
  start=$SECONDS
  GPUOS_TORCH_CACHE="$BUILD/torch-cache.db" timeout "${GPUOS_BENCH_TIMEOUT_S:-240}" \
    "$PY" "$ROOT/frontends/pytorch/bench/run_workloads.py" --out "$OUT" \
    --budget-s "${GPUOS_BENCH_BUDGET_S:-120}" 2>&1 | tee "$OUT/bench-pytorch.log" | tail -75
  bench_status=${PIPESTATUS[0]}
  echo "benchmark ran in $((SECONDS - start)) s (exit $bench_status)"
  [[ $bench_status -ne 0 && $status -eq 0 ]] && status=$bench_status
fi
if [[ "${GPUOS_SKIP_PROFILE:-0}" != 1 ]]; then
  # Diagnostics: host wall time of a compiled call against the device's task
  # timeline (bench/profile_tasks.py); never fails the check.
  echo "== task profile"
  GPUOS_TORCH_CACHE="$BUILD/torch-cache.db" timeout 120 \
    "$PY" "$ROOT/frontends/pytorch/bench/profile_tasks.py" --out "$OUT/profile" 2>&1 |
    tee "$OUT/profile.log" | tail -80 || true
fi
exit "$status"
