#!/usr/bin/env bash
# Checks nib's npm packages as a user meets them, offline: packs them from
# this commit's release binaries (dist/npm.sh), publishes them to a
# Verdaccio registry on loopback (installed under target/verdaccio, pinned),
# then, in a fresh HOME with only node and npm pointed at that registry:
#   - `npx -y nib-mcp --version` prints this commit's version;
#   - `npx -y nib-mcp` answers MCP initialize and tools/list on stdio and
#     runs a nibash call;
#   - `npx nib-mcp doctor` runs a verb;
#   - an install without optional dependencies (as on a platform with no
#     package) says which package is missing and how to get it.
# Usage: dist/npm-check.sh BIN_DIR   (holding nib and nib-confine)
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:?usage: dist/npm-check.sh BIN_DIR}"
VERDACCIO_VERSION=6.0.5   # runs on Node 18 and 20 (6.10 needs Node 22)
version="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)"
case "$(uname -m)" in
  x86_64) platform=linux-x64 ;;
  aarch64) platform=linux-arm64 ;;
  *) echo "npm-check: no npm package for $(uname -m)" >&2; exit 1 ;;
esac

verdaccio=target/verdaccio/node_modules/.bin/verdaccio
if [ ! -x "$verdaccio" ] || [ "$("$verdaccio" --version 2>/dev/null)" != "v$VERDACCIO_VERSION" ]; then
  mkdir -p target/verdaccio
  npm install --prefix target/verdaccio --no-audit --no-fund --silent "verdaccio@$VERDACCIO_VERSION"
fi

dist/npm.sh "$platform=$bin" >/dev/null

work="$(mktemp -d)"
registry_pid=""
cleanup() {
  [ -n "$registry_pid" ] && kill "$registry_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
registry="http://127.0.0.1:$port/"
cat > "$work/verdaccio.yaml" <<YAML
storage: $work/storage
uplinks: {}
max_body_size: 100mb
packages:
  '**':
    access: \$all
    publish: \$all
    unpublish: \$all
log: { type: stdout, format: pretty, level: warn }
YAML
"$verdaccio" --config "$work/verdaccio.yaml" --listen "127.0.0.1:$port" >"$work/verdaccio.log" 2>&1 &
registry_pid=$!
for _ in $(seq 100); do
  curl -sf "${registry}-/ping" >/dev/null 2>&1 && break
  sleep 0.2
done
curl -sf "${registry}-/ping" >/dev/null || { cat "$work/verdaccio.log" >&2; echo "npm-check: the registry did not start" >&2; exit 1; }

# A fresh HOME: npm knows only the loopback registry (any token serves to
# publish there).
home="$work/home"
mkdir -p "$home" "$work/project"
printf 'registry=%s\n//127.0.0.1:%s/:_authToken=npm-check\n' "$registry" "$port" > "$home/.npmrc"
as_user() { env -i PATH="$(dirname "$(command -v node)"):/usr/bin:/bin" HOME="$home" "$@"; }
for tgz in dist/out/npm/nib-mcp-linux-*.tgz dist/out/npm/nib-mcp-"$version".tgz; do
  as_user npm publish "$PWD/$tgz" >"$work/publish.log" 2>&1 || { cat "$work/publish.log" "$work/verdaccio.log" >&2; echo "npm-check: publishing $tgz failed" >&2; exit 1; }
done

started=$(date +%s.%N)
said="$(cd "$work/project" && as_user npx -y nib-mcp --version)"
took=$(python3 -c "print(f'{$(date +%s.%N) - $started:.1f}')")
[[ "$said" == *"$version"* ]] || { echo "npm-check: npx -y nib-mcp --version said \"$said\", not $version" >&2; exit 1; }

answer="$(cd "$work/project" && printf '%s\n' \
  '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"npm-check","version":"1"}}}' \
  '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
  '{"jsonrpc":"2.0","id":2,"method":"tools/list"}' \
  '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"nibash","arguments":{"command":"echo from-npm"}}}' \
  | as_user timeout 60 npx -y nib-mcp)"
for want in '"id":1' '"name":"edit"' 'from-npm'; do
  grep -q "$want" <<<"$answer" || { echo "npm-check: the server's answers lack $want: $answer" >&2; exit 1; }
done
(cd "$work/project" && as_user npx -y nib-mcp doctor >/dev/null)

# Without the platform package (what a machine with none gets).
mkdir -p "$work/bare"
(cd "$work/bare" && as_user npm install --silent --omit=optional nib-mcp >/dev/null)
if missing="$(cd "$work/bare" && as_user node_modules/.bin/nib-mcp --version 2>&1)"; then
  echo "npm-check: the launcher ran without its platform package: $missing" >&2; exit 1
fi
[[ "$missing" == *"nib-mcp-$platform@$version"*"npm install nib-mcp-$platform@$version"* ]] \
  || { echo "npm-check: the launcher's message does not name the missing package: $missing" >&2; exit 1; }

echo "npm-check: nib-mcp $version from a loopback registry: npx -y answered in ${took}s from a cold cache, served MCP, ran doctor; a missing platform package is named"

# The plugin brings its own nib: Claude Code (installed under
# target/claude-code by .ci/run) in another fresh HOME with no nib on PATH
# and the packages only in the loopback registry installs the plugin from
# this repository's marketplace and makes an edit through it, answered by
# the loopback mock model.
claude="$PWD/target/claude-code/node_modules/.bin/claude"
if [ ! -x "$claude" ]; then
  [ -z "${NIB_REQUIRE_THIRD_PARTY:-}" ] || { echo "npm-check: Claude Code is not installed under target/claude-code" >&2; exit 1; }
  echo "npm-check: Claude Code is not installed; the plugin check is skipped"
  exit 0
fi
mock="${NIB_MOCK_MODEL:-$PWD/target/debug/nib-mock-model}"
[ -x "$mock" ] || { cargo build -q -p nib-mock-model; mock="$PWD/target/debug/nib-mock-model"; }
home="$work/plugin-home"
project="$work/plugin-project"
mkdir -p "$home" "$project"
cp "$work/home/.npmrc" "$home/.npmrc"
printf 'alpha\nbeta\ngamma\n' > "$project/notes.txt"
path="$(dirname "$(command -v node)"):/usr/bin:/bin"
if PATH="$path" command -v nib >/dev/null 2>&1; then
  echo "npm-check: a nib is on the plugin check's PATH ($path); it must have none" >&2; exit 1
fi
in_project() { (cd "$project" && env -i PATH="$path" HOME="$home" DISABLE_AUTOUPDATER=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 "$@"); }
cat > "$work/script.json" <<'JSON'
{"steps": [
  {"tool": "mcp__plugin_nib_nib__read", "input": {"paths": ["notes.txt"]}},
  {"tool": "mcp__plugin_nib_nib__edit", "input": {"patch": "[notes.txt#{{tag notes.txt}}]\nSUB 2: beta\n+delta\n"}},
  {"text": "Changed beta to delta."}
]}
JSON
"$mock" --script "$work/script.json" --log "$work/mock.log" > "$work/mock.url" &
mock_pid=$!
trap 'kill "$mock_pid" 2>/dev/null || true; cleanup' EXIT
for _ in $(seq 50); do [ -s "$work/mock.url" ] && break; sleep 0.1; done
url="$(head -1 "$work/mock.url")"
# The repository's plugin carries no sums until a release writes them: with
# no nib on PATH it starts nothing (and fetches nothing), and says how to
# install nib.
if said="$(in_project "$PWD/claude/bin/nib" --version 2>&1)"; then
  echo "npm-check: the plugin without sums started a nib: $said" >&2; exit 1
fi
[[ "$said" == *"carries no checksums"*"cargo install"* ]] \
  || { echo "npm-check: the plugin without sums did not say how to install nib: $said" >&2; exit 1; }
[ ! -e "$home/.cache/nib" ] || { echo "npm-check: the plugin without sums fetched something" >&2; exit 1; }
# A marketplace as a release makes it: this repository's plugin with the
# sums of the binaries the loopback registry serves (dist/plugin-sums.sh).
market="$work/marketplace"
mkdir -p "$market"
cp -r .claude-plugin claude "$market/"
rm -rf "$market/claude/node_modules"
dist/plugin-sums.sh --out "$market/claude/bin/nib.sums" "$platform=$bin" >/dev/null
# A sum that does not match: the fetched package is never started.
sed 's/^[0-9a-f]/0/' "$market/claude/bin/nib.sums" >"$work/bad.sums"
mkdir -p "$work/bad-plugin/bin" "$work/bad-plugin/.claude-plugin"
cp claude/bin/nib "$work/bad-plugin/bin/nib"
cp claude/.claude-plugin/plugin.json "$work/bad-plugin/.claude-plugin/"
cp "$work/bad.sums" "$work/bad-plugin/bin/nib.sums"
if said="$(in_project env XDG_CACHE_HOME="$work/bad-cache" "$work/bad-plugin/bin/nib" --version 2>&1)"; then
  echo "npm-check: the plugin started a package whose sum does not match: $said" >&2; exit 1
fi
[[ "$said" == *"does not match"* ]] || { echo "npm-check: a wrong sum was not named: $said" >&2; exit 1; }
started=$(date +%s.%N)
in_project "$claude" plugin marketplace add "$market" >"$work/claude.log" 2>&1 \
  || { cat "$work/claude.log" >&2; echo "npm-check: marketplace add failed" >&2; exit 1; }
in_project "$claude" plugin install nib@nib >>"$work/claude.log" 2>&1 \
  || { cat "$work/claude.log" >&2; echo "npm-check: plugin install failed" >&2; exit 1; }
in_project env ANTHROPIC_BASE_URL="$url" ANTHROPIC_API_KEY=sk-test-offline \
  "$claude" -p "change beta to delta in notes.txt" --output-format stream-json --verbose \
  --allowedTools mcp__plugin_nib_nib >"$work/session.jsonl" 2>&1 \
  || { tail -c 4000 "$work/session.jsonl" >&2; echo "npm-check: claude -p failed" >&2; exit 1; }
took=$(python3 -c "print(f'{$(date +%s.%N) - $started:.1f}')")
if [ "$(cat "$project/notes.txt")" != "$(printf 'alpha\ndelta\ngamma')" ]; then
  tail -c 4000 "$work/session.jsonl" >&2
  echo "npm-check: the plugin's nib did not make the edit; notes.txt holds: $(cat "$project/notes.txt")" >&2
  exit 1
fi
echo "npm-check: the plugin without sums started nothing and said how to install nib; a wrong sum was refused; with a release's sums and no nib on PATH it ran nib from the package, checked, and made the edit; marketplace add to edit done in ${took}s"
