#!/usr/bin/env python3
"""Runs the SandboxTemplate's pod the way a kubelet on runc would, with podman, and checks nib in it.

The pod is read from deploy/kubernetes/agent-sandbox/sandboxtemplate.yaml (and the ConfigMap from
mcp-config.yaml), not restated here: each container gets its image, command, user, capabilities,
privilege escalation, read-only root, working folder, environment and volume mounts from the
manifest; emptyDir volumes are fresh folders, the ConfigMap's keys and the
downward API's files are written out (emptyDirs as the kubelet makes them: writable by all,
with the fsGroup's set-group-ID bit), and the runtime's default seccomp profile is podman's. Init
containers run first and must succeed. The agent container's image stands for an agent image with
no nib in it; its command is replaced by a small MCP client (the agent's part) that reads
/etc/nib/mcp.json, starts the server it names over stdio as the agent would, and makes one nibash
call with canaries. Checked:

- the init container copied nib and nib-confine, and the agent image itself holds no nib;
- nib chose a confining mode by itself (`nib doctor`), and on runc it is Landlock + seccomp;
- the call wrote a file in /workspace (seen from outside the pod);
- a key planted at ~/.ssh/id_rsa stays unread (its text is in no answer) and is named hidden;
- a write to the home folder by a program is refused (the file never appears).

Usage: pod_check.py NIB_IMAGE AGENT_IMAGE (podman image names standing for nib:0.1.0 and
my-agent:1.0). deploy/kubernetes/pod-check.sh builds both and runs this.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
TEMPLATE = HERE / "agent-sandbox" / "sandboxtemplate.yaml"
CONFIGMAPS = HERE / "mcp-config.yaml"
CANARY = "CANARY-KEY-5f0c2e"

CLIENT = r'''
import json, os, subprocess, sys
cfg = json.load(open("/etc/nib/mcp.json"))["mcpServers"]["nib"]
env = dict(os.environ, **cfg.get("env", {}))
home = os.environ["HOME"]
os.makedirs(home + "/.ssh", exist_ok=True)
open(home + "/.ssh/id_rsa", "w").write("%(canary)s\n")
doctor = subprocess.run([cfg["command"], "doctor"], capture_output=True, text=True, env=env, timeout=60)
print("== doctor"); print(doctor.stdout + doctor.stderr)
msgs = [
  {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "pod-check", "version": "1"}}},
  {"jsonrpc": "2.0", "method": "notifications/initialized"},
  {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "nibash", "arguments": {"command": "echo made-in-the-pod > made.txt; cat made.txt; cat ~/.ssh/id_rsa; echo x > ~/out.txt"}}},
]
p = subprocess.run([cfg["command"], *cfg.get("args", [])], input="".join(json.dumps(m) + "\n" for m in msgs),
                   capture_output=True, text=True, env=env, cwd="/workspace", timeout=120)
print("== answers"); print(p.stdout)
print("== stderr"); print(p.stderr[-3000:])
print("== nib on the agent image's PATH:", subprocess.run(["sh", "-c", "command -v nib || echo none"], capture_output=True, text=True).stdout.strip())
''' % {"canary": CANARY}


def fail(msg: str) -> None:
    print(f"pod-check: {msg}", file=sys.stderr)
    sys.exit(1)


def podman_args(pod: dict, c: dict, vols: dict[str, Path], images: dict[str, str]) -> tuple[list[str], str]:
    psc = pod.get("securityContext") or {}
    sc = c.get("securityContext") or {}
    uid = sc.get("runAsUser", psc.get("runAsUser"))
    gid = sc.get("runAsGroup", psc.get("runAsGroup", uid))
    args = ["podman", "run", "--rm", "-i", "--network", "none", "--user", f"{uid}:{gid}"]
    if (sc.get("capabilities") or {}).get("drop") == ["ALL"]:
        args.append("--cap-drop=ALL")
    if sc.get("allowPrivilegeEscalation") is False:
        args += ["--security-opt", "no-new-privileges"]
    if sc.get("readOnlyRootFilesystem"):
        # No tmpfs of podman's own on /tmp, /var/tmp and /run: the pod has only its volumes.
        args += ["--read-only", "--read-only-tmpfs=false"]
    if (sc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type") != "RuntimeDefault":
        fail("pod_check knows only RuntimeDefault (podman's default profile)")
    for m in c.get("volumeMounts") or []:
        spec = f"{vols[m['name']]}:{m['mountPath']}" + (":ro" if m.get("readOnly") else "")
        args += ["-v", spec]
    if c.get("workingDir"):
        args += ["-w", c["workingDir"]]
    for e in c.get("env") or []:
        args += ["-e", f"{e['name']}={e['value']}"]
    image = images.get(c["image"])
    if image is None:
        fail(f"no stand-in image for {c['image']!r}")
    return args, image


def main() -> int:
    if len(sys.argv) != 3:
        fail("usage: pod_check.py NIB_IMAGE AGENT_IMAGE")
    template = yaml.safe_load(TEMPLATE.read_text())
    pod = template["spec"]["podTemplate"]["spec"]
    maps = {d["metadata"]["name"]: d for d in yaml.safe_load_all(CONFIGMAPS.read_text()) if d and d["kind"] == "ConfigMap"}
    images = {}
    for c in pod.get("initContainers", []) + pod["containers"]:
        images[c["image"]] = sys.argv[1] if c["image"].startswith("nib:") else sys.argv[2]
    fs_group = (pod.get("securityContext") or {}).get("fsGroup", 1000)

    work = Path(tempfile.mkdtemp(prefix="nib-pod-check-"))
    try:
        vols: dict[str, Path] = {}
        for v in pod["volumes"]:
            d = work / "volumes" / v["name"]
            d.mkdir(parents=True)
            if "configMap" in v:
                for key, value in maps[v["configMap"]["name"]]["data"].items():
                    (d / key).write_text(value)
            elif "downwardAPI" in v:
                for item in v["downwardAPI"]["items"]:
                    (d / item["path"]).write_text('nib.example/task="pod check"\n')
            elif "emptyDir" not in v:
                fail(f"pod_check cannot stand in for volume {v['name']!r}")
            if "emptyDir" in v:
                # As the kubelet makes an emptyDir: root's, writable by all, and with
                # fsGroup its group and set-group-ID bit.
                os.chown(d, 0, fs_group)
                d.chmod(0o2777)
            else:
                for f in d.iterdir():
                    f.chmod(0o644)
                d.chmod(0o755)
            vols[v["name"]] = d
        client = work / "client.py"
        client.write_text(CLIENT)

        for c in pod.get("initContainers", []):
            args, image = podman_args(pod, c, vols, images)
            cmd = c.get("command") or []
            args += ["--entrypoint", json.dumps(cmd), image, *(c.get("args") or [])]
            r = subprocess.run(args, capture_output=True, text=True, timeout=300)
            if r.returncode != 0:
                fail(f"init container {c['name']} failed ({r.returncode}): {r.stderr}")
            print(f"pod-check: init container {c['name']} ran: {' '.join(cmd)}")
        agent = next(c for c in pod["containers"] if c["name"] == "agent")
        args, image = podman_args(pod, agent, vols, images)
        args += ["-v", f"{client}:/etc/pod-check/client.py:ro", "--entrypoint", '["python3", "/etc/pod-check/client.py"]', image]
        r = subprocess.run(args, capture_output=True, text=True, timeout=300)
        said = r.stdout + r.stderr
        if r.returncode != 0:
            fail(f"the agent container failed ({r.returncode}): {said}")
        print(said)

        # Where mcp.json's command lies, seen from outside the pod: in the volume mounted on it.
        command = json.loads(maps["nib-agent-mcp"]["data"]["mcp.json"])["mcpServers"]["nib"]["command"]
        mount = max((m for m in agent["volumeMounts"] if command.startswith(m["mountPath"].rstrip("/") + "/")),
                    key=lambda m: len(m["mountPath"]), default=None)
        if mount is None:
            fail(f"mcp.json's command {command} is on no volume of the agent container")
        nib = vols[mount["name"]] / os.path.relpath(command, mount["mountPath"])
        for f in (nib, nib.with_name("nib-confine")):
            if not f.is_file():
                fail(f"the init container left no {f.name} where mcp.json's command points ({command})")
        if "nib on the agent image's PATH: none" not in said:
            fail("the agent image has a nib of its own, so the check proves nothing about the copied one")
        mode = next((l for l in said.splitlines() if l.startswith("mode:")), "")
        if "NIB_SANDBOX=1" not in mode or "Landlock" not in mode:
            fail(f"nib did not confine with Landlock + seccomp here: {mode or said}")
        made = vols["workspace"] / "made.txt"
        if not made.is_file() or made.read_text().strip() != "made-in-the-pod":
            fail(f"the nibash call wrote nothing in /workspace: {said}")
        if CANARY in said.split("== answers", 1)[-1]:
            fail(f"a program read the planted key: {said}")
        if "hidden from programs" not in said:
            fail(f"the answer did not say the key is hidden: {said}")
        if (vols["home"] / "out.txt").exists():
            fail(f"a program wrote in the home folder: {said}")
        print(f"pod-check: the template's pod ran ({mode.strip()}); the copied nib served MCP over stdio from mcp.json, "
              "wrote in /workspace, kept the planted key unread and refused a write to the home folder")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
