# shellcheck shell=bash
# Sourced by the PyTorch frontend's GPU scripts (gpu-check.sh, ab-profile.sh):
# unpack the repository's offline dependencies where there are some, build
# the bridge (warnings as errors) and install the package into $PYTHON
# (python3), building the extension in place and putting it on PYTHONPATH
# where pip cannot install it. Sets and exports ROOT, OUT (default
# $ROOT/out), BUILD (GPUOS_BUILD_DIR, default $ROOT/build/gpu), PY and
# GPUOS_BUILD_DIR; the offline dependencies are GPUOS_DEPS_DIR's (default
# $ROOT/.deps, tools/offline-deps.sh); logs go to $OUT (deps.log,
# bridge-build.log, pip.log).
# Returns 1 with the log's tail printed when a step fails.
#
#   source frontends/pytorch/tools/install-package.sh || exit 1
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
OUT="${OUT:-$ROOT/out}"
BUILD="${GPUOS_BUILD_DIR:-$ROOT/build/gpu}"
PY="${PYTHON:-python3}"
export ROOT OUT BUILD PY
mkdir -p "$OUT"
export PATH="/usr/local/cuda/bin:$PATH"
DEPS="${GPUOS_DEPS_DIR:-$ROOT/.deps}"
if [[ -f "$DEPS/debs/MANIFEST" ]]; then
  GPUOS_DEPS_DIR="$DEPS" bash "$ROOT/tools/offline-deps.sh" unpack >"$OUT/deps.log" 2>&1 ||
    { tail -20 "$OUT/deps.log"; echo "UNPACKING OFFLINE DEPENDENCIES FAILED"; return 1; }
fi
echo "== bridge ($BUILD)"
install_start=$SECONDS
{ cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DGPUOS_WARNINGS_AS_ERRORS=ON -DGPUOS_DEPS_PREFIX="$DEPS/prefix" &&
  cmake --build "$BUILD" -j "$(nproc)" --target gpuos_torch_bridge; } >"$OUT/bridge-build.log" 2>&1 ||
  { tail -40 "$OUT/bridge-build.log"; echo "BRIDGE BUILD FAILED"; return 1; }
echo "bridge built in $((SECONDS - install_start)) s"
echo "== package"
install_start=$SECONDS
export GPUOS_BUILD_DIR="$BUILD" PIP_BREAK_SYSTEM_PACKAGES=1
if ! "$PY" -m pip install --no-build-isolation --no-deps "$ROOT/frontends/pytorch" >"$OUT/pip.log" 2>&1; then
  tail -15 "$OUT/pip.log"
  echo "pip install failed; building in place instead"
  (cd "$ROOT/frontends/pytorch" && "$PY" setup.py build_ext --inplace) >>"$OUT/pip.log" 2>&1 ||
    { tail -30 "$OUT/pip.log"; echo "EXTENSION BUILD FAILED"; return 1; }
  export PYTHONPATH="$ROOT/frontends/pytorch${PYTHONPATH:+:$PYTHONPATH}"
fi
echo "package installed in $((SECONDS - install_start)) s"
