#!/usr/bin/env bash
# Writes the SHA-256 sums of released binaries that the Claude Code plugin's
# launcher (claude/bin/nib) checks before it starts a nib it fetched from npm.
# A release runs it on the binaries it publishes and commits the file with
# the release; without the file the plugin starts only a nib found on PATH.
#
# Usage: dist/plugin-sums.sh [--out FILE] PLATFORM=BIN_DIR [PLATFORM=BIN_DIR …]
#   PLATFORM as in dist/npm.sh (linux-x64, linux-arm64); BIN_DIR holds that
#   platform's nib and nib-confine. FILE defaults to claude/bin/nib.sums.
set -euo pipefail
cd "$(dirname "$0")/.."
out=claude/bin/nib.sums
if [ "${1:-}" = --out ]; then out="$2"; shift 2; fi
[ $# -gt 0 ] || { echo "usage: dist/plugin-sums.sh [--out FILE] PLATFORM=BIN_DIR …" >&2; exit 2; }
tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT
for arg in "$@"; do
  platform="${arg%%=*}"
  bin="${arg#*=}"
  case "$platform" in linux-x64|linux-arm64) ;; *) echo "dist/plugin-sums: unknown platform $platform" >&2; exit 2 ;; esac
  for f in nib nib-confine; do
    [ -f "$bin/$f" ] || { echo "dist/plugin-sums: $bin/$f is missing" >&2; exit 1; }
    printf '%s  %s/%s\n' "$(sha256sum "$bin/$f" | cut -d' ' -f1)" "$platform" "$f" >>"$tmp"
  done
done
install -m 644 "$tmp" "$out"
echo "dist/plugin-sums: wrote $out ($(wc -l <"$out") sums)"
