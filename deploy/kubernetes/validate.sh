#!/usr/bin/env bash
# Validates deploy/kubernetes/ offline (see validate.py's first lines for what is
# checked) and proves the check refuses broken manifests (--self-check).
# Installs what it needs, pinned, into a Python virtual environment
# (NIB_K8S_VENV, default target/mcp-venv, the one .ci/run makes); the
# validation itself runs without a network: inside a network namespace of its
# own where the machine lets one be made, so a schema fetched at run time
# would fail it.
set -euo pipefail
cd "$(dirname "$0")/../.."

venv="${NIB_K8S_VENV:-target/mcp-venv}"
# kubernetes-validate carries Kubernetes' JSON schemas (1.25-1.37) in its wheel.
pins=(kubernetes-validate==1.37.0 jsonschema==4.26.0 referencing==0.37.0 PyYAML==6.0.3)

if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
if ! "$venv/bin/python" - "${pins[@]}" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
for pin in sys.argv[1:]:
    name, want = pin.split("==")
    if version(name) != want:
        sys.exit(1)
PY
then
  echo "== installing ${pins[*]} into $venv"
  "$venv/bin/pip" install -q "${pins[@]}"
fi

run=("$venv/bin/python" deploy/kubernetes/validate.py --self-check "$@")
if unshare --net true 2>/dev/null; then
  echo "== validating with no network (a network namespace of its own)"
  exec unshare --net "${run[@]}"
fi
echo "== validating (no network namespace could be made here; the schemas are local files all the same)"
exec "${run[@]}"
