#!/usr/bin/env bash
# Runs nib's container as a restricted pod runs it and checks the sandbox
# holds there with nothing set beyond the image's NIB_SANDBOX=1: non-root
# (uid 1000), every capability dropped, no privilege escalation, podman's
# default seccomp profile, a read-only root file system, no network but
# loopback, the workspace and home as volumes. There bubblewrap cannot mount
# /proc, so nib must pick Landlock + seccomp by itself. Checked, each with a
# canary:
#   - a nibash call runs and writes in the workspace (over MCP on stdio, the
#     image's entry point, and through `nib sh`);
#   - a credential in the home stays unread by nib's own cat and /bin/cat;
#   - a write outside the workspace is refused (the file never appears);
#   - a loopback listener sees no connection from a program (a control from
#     outside nib shows it listens).
# Usage: dist/container/check.sh BIN_DIR   (nib and nib-confine for the image)
# Needs podman with runc; containers.conf here sets what these machines need.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="${1:?usage: dist/container/check.sh BIN_DIR}"
image=nib:check
mkdir -p target/container
# crun cannot set rlimits on these machines: runc, and no default ulimits.
cat > target/container/containers.conf <<'CONF'
[containers]
default_ulimits = []
[engine]
runtime = "runc"
CONF
export CONTAINERS_CONF="$PWD/target/container/containers.conf"
dist/container/rootfs.sh "$bin" "$image"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/home" "$work/workspace"
chown -R 1000:1000 "$work/home" "$work/workspace"
restricted=(podman run --rm -i --network none --user 1000:1000 --cap-drop=ALL
  --security-opt no-new-privileges --read-only --tmpfs /tmp:mode=1777
  -v "$work/home:/home/agent" -v "$work/workspace:/workspace")
fail() { echo "container-check: $*" >&2; exit 1; }

# Over MCP on stdio, the image's own entry point.
answer="$(printf '%s\n' \
  '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"container-check","version":"1"}}}' \
  '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
  '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"nibash","arguments":{"command":"echo made-in-a-pod > made.txt && cat made.txt"}}}' \
  | timeout 120 "${restricted[@]}" "$image")" || fail "the server failed: $answer"
grep -q 'made-in-a-pod' <<<"$answer" || fail "the nibash call did not run: $answer"
[ "$(cat "$work/workspace/made.txt" 2>/dev/null)" = made-in-a-pod ] || fail "the call wrote nothing in the workspace"

# Canaries, through `nib sh` inside the same restricted container.
said="$(timeout 120 "${restricted[@]}" --entrypoint sh "$image" -c '
  set -u
  mkdir -p ~/.ssh && echo CANARY-KEY-d41d8 > ~/.ssh/id_rsa
  python3 -m http.server --bind 127.0.0.1 8765 >/tmp/listener.log 2>&1 &
  for i in $(seq 50); do curl -s -o /dev/null http://127.0.0.1:8765/control && break; sleep 0.1; done
  cd /workspace
  nib sh "cat ~/.ssh/id_rsa; /bin/cat ~/.ssh/id_rsa; echo x > ~/out.txt; curl -sS -m 5 http://127.0.0.1:8765/from-a-program; echo inside > in.txt"
  echo "== listener"; cat /tmp/listener.log
  echo "== home"; ls -A ~
' 2>&1)" || true
grep -q 'CANARY-KEY-d41d8' <<<"$said" && fail "a program read the credential: $said"
grep -q 'GET /control' <<<"$said" || fail "the control never reached the listener, so the network check proves nothing: $said"
grep -q 'from-a-program' <<<"$(sed -n '/^== listener/,/^== home/p' <<<"$said")" && fail "a program reached the loopback listener: $said"
[ -e "$work/home/out.txt" ] && fail "a program wrote outside the workspace: $said"
[ "$(cat "$work/workspace/in.txt" 2>/dev/null)" = inside ] || fail "a write inside the workspace failed: $said"
grep -q 'hidden from programs' <<<"$said" || fail "the answer did not say the credential is hidden: $said"
echo "container-check: a restricted container (uid 1000, no capabilities, read-only root, default seccomp) with only NIB_SANDBOX=1 ran nibash over MCP and nib sh; the credential stayed unread, nothing was written outside the workspace, the loopback listener saw no program"
