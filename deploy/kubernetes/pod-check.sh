#!/usr/bin/env bash
# Runs the SandboxTemplate's pod with podman on runc, as a kubelet would, and
# checks nib in it (deploy/kubernetes/pod_check.py says what). Builds nib's
# image with dist/container/rootfs.sh from BIN_DIR, and an agent image with no
# nib in it from the same Debian base.
# Usage: deploy/kubernetes/pod-check.sh BIN_DIR   (nib and nib-confine)
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="${1:?usage: deploy/kubernetes/pod-check.sh BIN_DIR}"
venv="${NIB_K8S_VENV:-target/mcp-venv}"
"$venv/bin/python" -c 'import yaml' 2>/dev/null || "$venv/bin/pip" install -q PyYAML==6.0.3
mkdir -p target/pod-check
# crun cannot set rlimits on these machines: runc, and no default ulimits
# (as dist/container/check.sh).
cat > target/pod-check/containers.conf <<'CONF'
[containers]
default_ulimits = []
[engine]
runtime = "runc"
CONF
export CONTAINERS_CONF="$PWD/target/pod-check/containers.conf"
dist/container/rootfs.sh "$bin" nib:pod-check
base="$(ls -t target/container/base-*.tar | head -1)"
podman import --quiet --change 'USER 1000' --change 'WORKDIR /workspace' \
  --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' "$base" my-agent:pod-check >/dev/null
exec "$venv/bin/python" deploy/kubernetes/pod_check.py localhost/nib:pod-check localhost/my-agent:pod-check
