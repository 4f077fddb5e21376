#!/usr/bin/env bash
# Carry gpuos's Debian build dependencies to an air-gapped machine.
#
#   tools/offline-deps.sh fetch     (networked machine) download the .deb files
#                                   of tools/debian-packages.txt into .deps/debs
#   tools/offline-deps.sh unpack    (offline machine) unpack into .deps/prefix
#                                   every fetched package that is not installed
#                                   there; CMake searches .deps/prefix first
#   tools/offline-deps.sh status    what is fetched, installed, unpacked
#
# .deps/ is git-ignored; copy it (or carry it) with the source tree. Only
# packages missing on the offline machine are unpacked, so its own libraries
# (say yaml-cpp 0.8) are not shadowed by the fetching machine's versions.
# Variables: GPUOS_DEPS_DIR (default <repo>/.deps), GPUOS_OFFLINE_PACKAGES
# (space-separated list overriding the packages file for `fetch`).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEPS="${GPUOS_DEPS_DIR:-$ROOT/.deps}"
DEBS="$DEPS/debs"
PREFIX="$DEPS/prefix"

log() { printf '[offline-deps] %s\n' "$*" >&2; }

package_list() {
  if [[ -n "${GPUOS_OFFLINE_PACKAGES:-}" ]]; then
    tr ' ' '\n' <<<"$GPUOS_OFFLINE_PACKAGES"
  else
    # Tools (cmake, g++, clang, ...) are not carried: only libraries' -dev
    # packages and the runtime libraries they pull in.
    grep -v '^\s*#' "$ROOT/tools/debian-packages.txt" | grep -v '^\s*$' |
      grep -E '^lib|-dev$' | grep -v -E '^libclang-rt' # fuzzing runtimes: CI only
  fi
}

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

fetch() {
  mkdir -p "$DEBS"
  command -v apt-get >/dev/null || { log "apt-get not found: fetch on a Debian/Ubuntu machine"; exit 1; }
  local pkg deps manifest="$DEBS/MANIFEST"
  : >"$manifest"
  for pkg in $(package_list); do
    # Direct library dependencies (libboost-dev -> libboost1.74-dev,
    # libsqlite3-dev -> libsqlite3-0), so a package unpacked offline is whole.
    deps="$(apt-cache depends --important "$pkg" 2>/dev/null | awk '/Depends:/{print $2}' |
            { grep -E '^lib' || true; } | { grep -v -E '^lib(c6|gcc-s1|stdc\+\+6)$' || true; } |
            sort -u | tr '\n' ' ')"
    (cd "$DEBS" && apt-get download "$pkg" $deps >/dev/null) ||
      { log "could not download $pkg $deps"; exit 1; }
    echo "$pkg: $deps" >>"$manifest"
    log "fetched $pkg ${deps:+(with $deps)}"
  done
  log "$(ls "$DEBS"/*.deb | wc -l) packages in $DEBS"
}

deb_of() { ls "$DEBS/${1}_"*.deb 2>/dev/null | head -1; }

unpack() {
  [[ -f "$DEBS/MANIFEST" ]] || { log "no $DEBS/MANIFEST: run '$0 fetch' on a networked machine first"; exit 1; }
  mkdir -p "$PREFIX"
  local line pkg deps dep deb count=0
  while IFS= read -r line; do
    pkg="${line%%:*}"
    deps="${line#*:}"
    # A package installed here is used as installed, with its own versions
    # of what it depends on (the GPU machine's Boost 1.83, yaml-cpp 0.8).
    if installed "$pkg"; then continue; fi
    for dep in $pkg $deps; do
      installed "$dep" && continue
      deb="$(deb_of "$dep")"
      [[ -n "$deb" ]] || { log "missing $dep in $DEBS; fetch again"; exit 1; }
      dpkg-deb -x "$deb" "$PREFIX"
      log "unpacked $dep (for $pkg)"
      count=$((count + 1))
    done
  done <"$DEBS/MANIFEST"
  log "$count packages unpacked into $PREFIX"
}

status() {
  local deb name state
  for deb in "$DEBS"/*.deb; do
    [[ -e "$deb" ]] || { log "nothing fetched"; return; }
    name="$(dpkg-deb -f "$deb" Package)"
    state="missing"
    installed "$name" && state="installed"
    printf '%-28s %s\n' "$name" "$state"
  done
}

case "${1:-}" in
  fetch) fetch ;;
  unpack) unpack ;;
  status) status ;;
  *) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
     [[ "${1:-}" =~ ^(-h|--help)$ ]] || exit 2 ;;
esac
