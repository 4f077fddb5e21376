#!/usr/bin/env bash
# One entry point for a fresh Debian/Ubuntu machine.
#
#   tools/dev.sh demo    install what is missing, build, run `gpuos demo`
#   tools/dev.sh test    install what is missing, build, run every test
#                        (GPU tests skip with a reason where there is no GPU)
#   tools/dev.sh build   install what is missing and build
#   tools/dev.sh setup   only install what is missing
#
# Environment: GPUOS_BUILD_DIR (default build/default), GPUOS_JOBS (default
# nproc), GPUOS_FUZZ_SECONDS (default 30; 0 skips the fuzz run in `test`),
# CUDA_HOME (default /usr/local/cuda), GPUOS_DEPS_DIR (offline packages,
# default .deps; see tools/offline-deps.sh).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${GPUOS_BUILD_DIR:-$ROOT/build/default}"
JOBS="${GPUOS_JOBS:-$(nproc)}"
CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
DEPS_PREFIX="${GPUOS_DEPS_DIR:-$ROOT/.deps}/prefix"

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

log() { printf '\033[1m[gpuos] %s\033[0m\n' "$*" >&2; }

missing_packages() {
  local pkg
  grep -v '^\s*#' "$ROOT/tools/debian-packages.txt" | grep -v '^\s*$' | while read -r pkg; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || echo "$pkg"
  done
}

setup() {
  local missing
  missing="$(missing_packages | tr '\n' ' ')"
  if [[ -n "${missing// /}" ]]; then
    if [[ -d "$DEPS_PREFIX/usr" ]]; then
      log "not installed here: $missing(using the offline prefix $DEPS_PREFIX for what it holds)"
    else
      local sudo=""
      [[ $(id -u) -ne 0 ]] && sudo="sudo"
      log "installing: $missing"
      $sudo apt-get update -qq
      # shellcheck disable=SC2086
      $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
    fi
  fi
  if [[ ! -x "$CUDA_HOME/bin/nvcc" && ! -f "$CUDA_HOME/include/nvrtc.h" ]]; then
    log "the CUDA toolkit (13.x: NVRTC, nvJitLink, cuda.h) was not found at $CUDA_HOME."
    log "install it from NVIDIA or set CUDA_HOME; no GPU or driver is needed to build."
    exit 1
  fi
  export PATH="$CUDA_HOME/bin:$PATH"
}

build() {
  setup
  log "configuring $BUILD_DIR"
  cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DGPUOS_WARNINGS_AS_ERRORS=ON -DGPUOS_BUILD_TESTS=ON \
    -DCUDAToolkit_ROOT="$CUDA_HOME" -DGPUOS_DEPS_PREFIX="$DEPS_PREFIX" >/dev/null
  log "building with $JOBS jobs"
  cmake --build "$BUILD_DIR" -j "$JOBS"
}

check_format() {
  if ! git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    log "not a git checkout: skipping the clang-format check"
    return
  fi
  log "checking formatting (clang-format $(clang-format --version | grep -o '[0-9][0-9.]*' | head -1))"
  git -C "$ROOT" ls-files -z '*.cpp' '*.h' '*.cu' '*.cuh' |
    (cd "$ROOT" && xargs -0 clang-format --dry-run --Werror) ||
    { log "files above are not formatted: run clang-format -i on them"; exit 1; }
}

run_tests() {
  build
  check_format
  local seconds="${GPUOS_FUZZ_SECONDS:-30}"
  if [[ "$seconds" != "0" ]]; then
    log "fuzzing the pack loader for ${seconds}s"
    GPUOS_FUZZ_BUILD_DIR="${BUILD_DIR}-fuzz" bash "$ROOT/tests/fuzz/run.sh" "$seconds"
  fi
  # The PyTorch frontend's CPU tests (docs/pytorch.md): torch from PyPI in a
  # virtual environment; skipped with the reason when torch is unavailable.
  log "PyTorch frontend tests"
  GPUOS_BUILD_DIR="$BUILD_DIR" bash "$ROOT/frontends/pytorch/tools/ci.sh"
  # Last, so ctest's summary is the closing line.
  log "running the tests"
  ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" --no-tests=error
}

run_demo() {
  build
  log "running gpuos demo"
  "$BUILD_DIR/bin/gpuos" demo
}

case "${1:-}" in
  demo) run_demo ;;
  test) run_tests ;;
  build) build ;;
  setup) setup ;;
  -h|--help|help) usage ;;
  *) usage; exit 2 ;;
esac
