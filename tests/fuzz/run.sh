#!/usr/bin/env bash
# Builds and runs the pack loader fuzzer: tests/fuzz/run.sh [seconds] (default 60).
#
# Configures $GPUOS_FUZZ_BUILD_DIR (default <source>/build-fuzz) with clang,
# the whole tree compiled with -fsanitize=fuzzer-no-link,address,undefined,
# builds only pack_loader_fuzz, and fuzzes a temporary copy of the seed
# corpus tests/fuzz/corpus/pack_loader/. Crash inputs are kept in
# <build>/fuzz-artifacts/. Exits non-zero on a crash; prints one summary line.
set -euo pipefail

seconds="${1:-60}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${GPUOS_FUZZ_BUILD_DIR:-$root/build-fuzz}"
sanitize="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"

mkdir -p "$build"
log="$build/fuzz-run.log"
if ! cmake -S "$root" -B "$build" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_FLAGS="$sanitize" -DCMAKE_C_FLAGS="$sanitize" \
    -DGPUOS_FUZZ=ON -DGPUOS_BUILD_TESTS=OFF >"$log" 2>&1; then
  cat "$log" >&2
  echo "pack_loader_fuzz: FAILED to configure (log: $log)"
  exit 2
fi
if ! ninja -C "$build" pack_loader_fuzz >>"$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "pack_loader_fuzz: FAILED to build (log: $log)"
  exit 2
fi

corpus="$(mktemp -d)"
trap 'rm -rf "$corpus"' EXIT
cp "$root/tests/fuzz/corpus/pack_loader/"* "$corpus/"
artifacts="$build/fuzz-artifacts/"
mkdir -p "$artifacts"

status=0
"$build/bin/pack_loader_fuzz" "$corpus" -max_total_time="$seconds" -seed=1 \
  -rss_limit_mb=2048 -timeout=10 -artifact_prefix="$artifacts" >>"$log" 2>&1 || status=$?

runs="$(grep -o 'Done [0-9]* runs' "$log" | tail -n 1 | grep -o '[0-9]*' || true)"
inputs="$(ls "$corpus" | wc -l)"
if [[ $status -ne 0 ]]; then
  grep -E 'ERROR|SUMMARY|pack_loader_fuzz:|Test unit written' "$log" | tail -n 20 >&2 || true
  echo "pack_loader_fuzz: CRASH (exit $status) after ${seconds}s; inputs in $artifacts; log: $log"
  exit 1
fi
echo "pack_loader_fuzz: OK, ${runs:-?} runs in ${seconds}s, corpus grew to $inputs inputs, no crash (log: $log)"
