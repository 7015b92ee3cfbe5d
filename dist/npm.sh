#!/usr/bin/env bash
# Makes nib's npm packages from release binaries: one package per platform
# holding `nib` and `nib-confine` (selected by npm through `os` and `cpu`),
# and the launcher package `nib-mcp`, which names them all as optional
# dependencies and runs the one of its platform (dist/npm/nib.js). No
# package has an install script; nothing is downloaded but the packages.
#
# Usage: dist/npm.sh PLATFORM=BIN_DIR [PLATFORM=BIN_DIR …]
#   PLATFORM is node's `process.platform-process.arch` (linux-x64,
#   linux-arm64); BIN_DIR holds that platform's nib and nib-confine.
# The packed tarballs go to dist/out/npm/; publish them with
#   npm publish dist/out/npm/nib-mcp-linux-x64-VERSION.tgz … (platforms first)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || { echo "usage: dist/npm.sh PLATFORM=BIN_DIR [PLATFORM=BIN_DIR …]" >&2; exit 2; }
version="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)"
out="$PWD/dist/out/npm"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
rm -rf "$out"
mkdir -p "$out"

# Every platform nib is released for: the launcher names them all, so one
# launcher version serves each machine (npm skips the ones that do not fit).
all=(linux-x64 linux-arm64)
platforms_json=""
optional_json=""
for p in "${all[@]}"; do
  platforms_json+="${platforms_json:+, }\"$p\": \"nib-mcp-$p\""
  optional_json+="${optional_json:+, }\"nib-mcp-$p\": \"$version\""
done

for arg in "$@"; do
  platform="${arg%%=*}"
  bin="${arg#*=}"
  case " ${all[*]} " in *" $platform "*) ;; *) echo "dist/npm: unknown platform $platform (known: ${all[*]})" >&2; exit 2 ;; esac
  for f in nib nib-confine; do
    [ -x "$bin/$f" ] || { echo "dist/npm: $bin/$f is missing; build it first" >&2; exit 1; }
  done
  os="${platform%%-*}"
  cpu="${platform#*-}"
  dir="$stage/nib-mcp-$platform"
  mkdir -p "$dir/bin"
  install -m 755 "$bin/nib" "$bin/nib-confine" "$dir/bin/"
  cat > "$dir/package.json" <<JSON
{
  "name": "nib-mcp-$platform",
  "version": "$version",
  "description": "nib's binaries for $platform (installed by the nib-mcp package; use that one)",
  "license": "MIT",
  "os": ["$os"],
  "cpu": ["$cpu"],
  "files": ["bin/"],
  "preferUnplugged": true
}
JSON
  (cd "$out" && npm pack --silent "$dir" >/dev/null)
done

dir="$stage/nib-mcp"
mkdir -p "$dir/bin"
install -m 755 dist/npm/nib.js "$dir/bin/nib.js"
cp README.md "$dir/"
cat > "$dir/package.json" <<JSON
{
  "name": "nib-mcp",
  "version": "$version",
  "description": "nib: hashline file tools and a sandboxed shell for coding agents, as an MCP server (npx -y nib-mcp)",
  "license": "MIT",
  "keywords": ["mcp", "edit", "hashline", "sandbox", "shell"],
  "bin": { "nib": "bin/nib.js", "nib-mcp": "bin/nib.js" },
  "files": ["bin/", "README.md"],
  "engines": { "node": ">=18" },
  "nibPlatforms": { $platforms_json },
  "optionalDependencies": { $optional_json }
}
JSON
(cd "$out" && npm pack --silent "$dir" >/dev/null)
ls "$out"
