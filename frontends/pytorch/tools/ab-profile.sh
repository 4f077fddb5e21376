#!/usr/bin/env bash
# A same-instance A/B of kernel-image variants (JIT defines) on stitched
# calls, for the GPU machine (a diagnostic, not a benchmark): builds and
# installs the package as gpu-check.sh does (install-package.sh; no tests),
# then in each of --rounds rounds runs frontends/pytorch/bench/
# stitch_profile.py once per variant, the variants in the order given, each
# in a process of its own with its own kernel-image cache so that their
# images never mix; with --phase, phase_timing.py once per variant after the
# rounds. Prints each run's summary; everything lands in $OUT/ab_profile.tgz
# (each run's JSON and log: the device machine returns only a few files)
# and $OUT/ab_profile.log (the summaries). Reading: compare a variant with
# another within a round, and rounds with each other for the spread.
#
#   GPUOS_COMMIT=<sha> bash frontends/pytorch/tools/ab-profile.sh [--rounds 2] \
#       [--calls 300] [--case "attention_small seq=128"]... [--phase] \
#       [--tile-starts] [--dry-run] NAME=DEFINES NAME=DEFINES...
#
# A variant is NAME=DEFINES: a name (letters, digits, _ and -; each once)
# and its GPUOS_JIT_DEFINES, blank-separated, empty for the default image;
# at least two, e.g.  new=  blocked=GPUOS_STITCH_KEYS_BLOCKED
# A word env:VAR=VALUE among the defines is instead set in the variant's
# environment (the host side: e.g.  query_first=env:GPUOS_TORCH_OPEN_LATER=0).
# --case as stitch_profile.py's (repeat it; default every workload); with
# --phase, phase_timing.py takes the first case. --tile-starts: after each
# stitch_profile.py run, tile_starts.py over each case's trace (when every
# helper's first tile started, and which blocks were last), in the log.
# --dry-run prints the plan
# and exits without building. GPUOS_AB_TIMEOUT_S (default 150) bounds each
# run. Exit status 1 when a run failed (the others still run), 2 for bad
# arguments.
set -uo pipefail
usage() {  # this header
  sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | grep '^#' | sed 's/^# \{0,1\}//'
}
fail_usage() {
  echo "ab-profile.sh: $1" >&2
  echo "usage: ab-profile.sh [--rounds N] [--calls N] [--case NAME]... [--phase] [--tile-starts]" \
    "[--dry-run]" \
    "NAME=DEFINES NAME=DEFINES..." >&2
  exit 2
}
positive() { [[ "$1" =~ ^[1-9][0-9]*$ ]]; }
# split_words WORDS: a variant's words into jit (its GPUOS_JIT_DEFINES) and
# env_set (its env:VAR=VALUE words, without env:), split on blanks, never
# globbed.
split_words() {
  local -a all=()
  local word
  read -ra all <<<"$1"
  jit=""
  env_set=()
  for word in "${all[@]+"${all[@]}"}"; do
    if [[ "$word" == env:* ]]; then env_set+=("${word#env:}"); else jit+="${jit:+ }$word"; fi
  done
}

rounds=2
calls=300
phase=0
tile_starts=0
dry_run=0
cases=()
names=()
defines=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --help | -h) usage; exit 0 ;;
    --rounds)
      if [[ $# -lt 2 ]] || ! positive "$2"; then fail_usage "--rounds wants a positive whole number"; fi
      rounds=$2; shift 2 ;;
    --calls)
      if [[ $# -lt 2 ]] || ! positive "$2"; then fail_usage "--calls wants a positive whole number"; fi
      calls=$2; shift 2 ;;
    --case)
      [[ $# -ge 2 && -n "$2" ]] || fail_usage "--case wants a case name"
      cases+=("$2"); shift 2 ;;
    --phase) phase=1; shift ;;
    --tile-starts) tile_starts=1; shift ;;
    --dry-run) dry_run=1; shift ;;
    -*) fail_usage "unknown option $1" ;;
    *=*)
      name=${1%%=*}
      [[ "$name" =~ ^[A-Za-z0-9_-]+$ ]] ||
        fail_usage "variant name '$name' (in '$1'): letters, digits, _ and - only"
      for seen in "${names[@]+"${names[@]}"}"; do
        [[ "$seen" != "$name" ]] || fail_usage "variant '$name' given twice"
      done
      split_words "${1#*=}"
      for word in "${env_set[@]+"${env_set[@]}"}"; do
        [[ "$word" =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] ||
          fail_usage "'env:$word' (in '$1'): env: takes VAR=VALUE"
      done
      names+=("$name"); defines+=("${1#*=}"); shift ;;
    *) fail_usage "'$1' is neither an option nor NAME=DEFINES" ;;
  esac
done
[[ ${#names[@]} -ge 2 ]] || fail_usage "an A/B needs at least two variants (NAME=DEFINES)"

case_args=()
for c in "${cases[@]+"${cases[@]}"}"; do case_args+=(--case "$c"); done
phase_case=()
[[ ${#cases[@]} -gt 0 ]] && phase_case=(--case "${cases[0]}")
if [[ $dry_run == 1 ]]; then  # the arguments quoted as a shell would need them
  for ((r = 1; r <= rounds; r++)); do
    for i in "${!names[@]}"; do
      split_words "${defines[$i]}"
      printf "round %d: %s (GPUOS_JIT_DEFINES=%q%s): stitch_profile.py --calls %d" \
        "$r" "${names[$i]}" "$jit" "${env_set[*]+; env ${env_set[*]}}" "$calls"
      [[ ${#case_args[@]} -eq 0 ]] || printf " %q" "${case_args[@]}"
      echo
    done
  done
  if [[ $phase == 1 ]]; then
    for i in "${!names[@]}"; do
      split_words "${defines[$i]}"
      printf "phase: %s (GPUOS_JIT_DEFINES=%q%s): phase_timing.py" "${names[$i]}" "$jit" \
        "${env_set[*]+; env ${env_set[*]}}"
      [[ ${#phase_case[@]} -eq 0 ]] || printf " %q" "${phase_case[@]}"
      echo
    done
  fi
  exit 0
fi

# shellcheck source=frontends/pytorch/tools/install-package.sh
source "$(dirname "${BASH_SOURCE[0]}")/install-package.sh" || exit 1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT  # what is kept goes to $OUT/ab_profile.tgz
mkdir -p "$work/keep"
log="$OUT/ab_profile.log"
: >"$log"
status=0
limit=${GPUOS_AB_TIMEOUT_S:-150}
# One run: run TAG CACHE DEFINES SCRIPT ARGS...; its result (SCRIPT's
# name with .json: stitch_profile.json, phase_timing.json; stitch_profile
# also writes a trace a case, not kept) and log kept as TAG's. CACHE names
# the run's kernel-image cache (one a variant, another for its
# instrumented image).
run() {
  local tag=$1 cache=$2 words=$3 script=$4
  shift 4
  local jit
  local -a env_set
  split_words "$words"
  mkdir -p "$work/$tag"
  echo "== $tag (GPUOS_JIT_DEFINES='$jit'${env_set[*]+; env ${env_set[*]}})" | tee -a "$log"
  (cd "$ROOT" && env "${env_set[@]+"${env_set[@]}"}" GPUOS_JIT_DEFINES="$jit" \
    GPUOS_TORCH_CACHE="$work/cache_$cache.db" \
    timeout "$limit" "$PY" "frontends/pytorch/bench/$script" --out "$work/$tag" "$@") \
    >"$work/keep/$tag.log" 2>&1
  local rc=$?
  if [[ $rc -ne 0 ]]; then
    echo "   FAILED (exit $rc): $(tail -3 "$work/keep/$tag.log" | tr '\n' ' ')" | tee -a "$log"
    status=1
  fi
  grep -E "wall|queue|tiles|a call|slot " "$work/keep/$tag.log" | tee -a "$log"
  if [[ $tile_starts == 1 && $script == stitch_profile.py ]]; then
    local trace
    for trace in "$work/$tag"/trace_*.json; do
      [[ -e "$trace" ]] || continue
      echo "   tile starts, ${trace##*/}:" | tee -a "$log"
      (cd "$ROOT" && "$PY" frontends/pytorch/bench/tile_starts.py "$trace" --count "$calls") 2>&1 |
        sed 's/^/     /' | tee -a "$log" "$work/keep/$tag.log"
    done
  fi
  cp "$work/$tag/${script%.py}.json" "$work/keep/$tag.json" 2>/dev/null ||
    echo "   no ${script%.py}.json from $tag" | tee -a "$log"
}
for ((r = 1; r <= rounds; r++)); do
  for i in "${!names[@]}"; do
    run "${names[$i]}@round$r" "${names[$i]}" "${defines[$i]}" stitch_profile.py --calls "$calls" \
      "${case_args[@]+"${case_args[@]}"}"
  done
done
if [[ $phase == 1 ]]; then
  for i in "${!names[@]}"; do
    # Its own cache: the instrumented image (phase_timing.py sets
    # GPUOS_PHASE_TIMING) must not replace the plain one.
    run "${names[$i]}@phase" "${names[$i]}@phase" "${defines[$i]}" phase_timing.py \
      "${phase_case[@]+"${phase_case[@]}"}"
  done
fi
tar czf "$OUT/ab_profile.tgz" -C "$work" keep
echo "records: $OUT/ab_profile.tgz (keep/<variant>@<round>.json and .log)"
exit "$status"
