#!/usr/bin/env bash
# The PyTorch frontend's CPU tests for CI (no GPU): a virtual environment
# with torch from PyPI, the package installed from this checkout, pytest.
#
#   bash frontends/pytorch/tools/ci.sh
#
# PyPI's torch wheel is the CUDA build; it imports without a GPU when the
# CUDA 13 libraries are found: this machine image has most of them in
# /usr/local/cuda-13.0/lib, and the three it lacks come as small wheels
# (docs/pytorch.md, "Tests and CI"). When torch cannot be installed or
# imported, the tests are SKIPPED with the reason (exit 0), never silently.
#
# Environment: GPUOS_TORCH_VENV (default build/torch-venv, kept between
# runs), GPUOS_BUILD_DIR (CMake build to take the libraries from; default
# build/default, the one tools/dev.sh builds), GPUOS_SKIP_TORCH=1 to skip.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
VENV="${GPUOS_TORCH_VENV:-$ROOT/build/torch-venv}"
TORCH_VERSION=2.11.0
# What torch 2.11's wheel links that /usr/local/cuda-13.0 does not have.
CUDA_EXTRAS=(nvidia-cufile==1.15.1.6 nvidia-cusparselt-cu13==0.8.0 nvidia-nvshmem-cu13==3.4.5)
PY_DEPS=(filelock "typing-extensions>=4.10" "setuptools>=70.1,<82" "sympy>=1.13.3" "networkx>=2.5.1"
         jinja2 "fsspec>=0.8.5" numpy pytest pyyaml)

skip() { echo "gpuos pytorch tests SKIPPED: $*"; exit 0; }
log() { printf '\033[1m[gpuos-pytorch] %s\033[0m\n' "$*" >&2; }

[[ "${GPUOS_SKIP_TORCH:-0}" == 1 ]] && skip "GPUOS_SKIP_TORCH=1"
if [[ ! -x "$VENV/bin/python" ]]; then
  python3 -m venv "$VENV" || skip "python3 -m venv failed (install python3-venv)"
fi
PY="$VENV/bin/python"
if ! "$PY" -c "import torch, pytest, yaml" 2>/dev/null; then
  log "installing torch $TORCH_VERSION (CPU use of the PyPI wheel) into $VENV"
  start=$SECONDS
  "$PY" -m pip install -q --disable-pip-version-check --no-deps "torch==$TORCH_VERSION" \
    "${CUDA_EXTRAS[@]}" || skip "pip could not install torch $TORCH_VERSION"
  "$PY" -m pip install -q --disable-pip-version-check "${PY_DEPS[@]}" ||
    skip "pip could not install torch's Python dependencies"
  log "installed in $((SECONDS - start)) s"
fi
"$PY" -c "import torch" 2>/tmp/gpuos-torch-import.log ||
  skip "torch does not import here: $(tail -1 /tmp/gpuos-torch-import.log)"

log "building and installing the gpuos package"
export GPUOS_BUILD_DIR="${GPUOS_BUILD_DIR:-$ROOT/build/default}"
"$PY" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps \
  "$ROOT/frontends/pytorch"
rm -rf "$ROOT/frontends/pytorch/build" "$ROOT/frontends/pytorch/gpuos.egg-info"
cd "$ROOT"  # not frontends/pytorch: the installed package (with _C) must be the one imported
exec "$PY" -m pytest -q -rs -p no:cacheprovider frontends/pytorch/tests
