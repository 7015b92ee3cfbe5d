#!/usr/bin/env bash
# Makes the release archive for one target: nib and nib-confine, built in
# release mode (or taken from $NIB_DIST_BIN_DIR when given), packed as
# dist/out/nib-VERSION-TARGET.tar.gz with its SHA-256 beside it, then
# unpacked into a scratch folder and smoke-tested there (version, doctor,
# an MCP initialize and tools/list over stdio).
# Usage: dist/archive.sh [TARGET]   (default: the host's)
set -euo pipefail
cd "$(dirname "$0")/.."
target="${1:-$(rustc -vV | sed -n 's/^host: //p')}"
version="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)"
name="nib-$version-$target"
if [ -n "${NIB_DIST_BIN_DIR:-}" ]; then
  bin="$NIB_DIST_BIN_DIR"
else
  cargo build --release --locked --target "$target" -p nib-tools
  bin="target/$target/release"
fi
for f in nib nib-confine; do
  [ -x "$bin/$f" ] || { echo "dist: $bin/$f is missing; build it first" >&2; exit 1; }
done
out=dist/out
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$out" "$stage/$name"
cp "$bin/nib" "$bin/nib-confine" README.md "$stage/$name/"
tar -C "$stage" -czf "$out/$name.tar.gz" "$name"
(cd "$out" && sha256sum "$name.tar.gz" > "$name.tar.gz.sha256")

# The smoke test: the archive as a user gets it.
check="$stage/check"
mkdir -p "$check/project"
(cd "$out" && sha256sum -c "$name.tar.gz.sha256" >/dev/null)
tar -C "$check" -xzf "$out/$name.tar.gz"
nib="$check/$name/nib"
said="$("$nib" --version)"
[[ "$said" == *"$version"* ]] || { echo "dist: --version says \"$said\", not $version" >&2; exit 1; }
"$nib" doctor >/dev/null
answer="$(cd "$check/project" && printf '%s\n' \
  '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"dist","version":"1"}}}' \
  '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
  '{"jsonrpc":"2.0","id":2,"method":"tools/list"}' \
  '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"nibash","arguments":{"command":"echo from-the-archive"}}}' \
  | HOME="$check" timeout 60 "$nib")"
for want in '"id":1' '"name":"edit"' 'from-the-archive'; do
  grep -q "$want" <<<"$answer" || { echo "dist: the server's answers lack $want: $answer" >&2; exit 1; }
done
echo "dist: $out/$name.tar.gz ($(cut -d' ' -f1 "$out/$name.tar.gz.sha256")) passed the smoke test"
