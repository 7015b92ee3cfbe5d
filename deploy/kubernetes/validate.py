#!/usr/bin/env python3
"""Checks the manifests under deploy/kubernetes/, offline, the way a cluster would take them.

First, each agent-sandbox object (SandboxTemplate, SandboxWarmPool, SandboxClaim) against the
openAPIV3Schema of its CustomResourceDefinition of agent-sandbox v0.5.6 (the files in
../shared/reference/agent-sandbox-v0.5.6/crds/ beside the checkout, or --crds DIR). The schema is
read as the API server reads a structural schema: an object field the schema does not declare is
refused (the server would prune it; a misspelt field would silently do nothing), unless the schema
preserves unknown fields; int-or-string, the int32/int64 and date-time formats and the list types
(a map list's keys are unique) are enforced; a CRD's `metadata` is Kubernetes' ObjectMeta. CEL rules
(x-kubernetes-validations) are not evaluated: the checker says how many it met.
Second, each core object (ConfigMap, Deployment, Service, NetworkPolicy) and the pod spec inside the
SandboxTemplate against Kubernetes' own schemas for every version from KUBE_MIN to the newest that
the kubernetes-validate package bundles, in their strict form (unknown fields refused). The package
carries those schemas in its wheel: nothing is fetched.
Third, what the schemas cannot say: every pod runs under the restricted profile nib's manifests
promise (non-root uid 1000, no privilege escalation, all capabilities dropped, the runtime's
seccomp profile, a read-only root with /tmp and the workspace on volumes), the nib an MCP
configuration starts lies on a read-only mount in a folder others cannot write (nib starts its
worker from no other), images name no registry host, and the objects point at each other correctly (pool -> template, claim -> pool, volumes ->
ConfigMap, Service and NetworkPolicy -> the pod's labels and ports; a claim's env or volume claims
need the template's leave).
Fourth, the YAML blocks of docs/kubernetes.md that hold whole objects get the first two checks.

`--self-check` then breaks the good manifests on purpose (a misspelt field, a wrong type, a field
from another version, a weakened securityContext, a broken reference, ...) and fails unless every
broken set is refused by the check that should catch it: the validation cannot pass vacuously.
The last line is `kubernetes: N passed, M failed`; the exit status is 0 only when M is 0.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

try:
    import jsonschema
    import kubernetes_validate
    import yaml
    from referencing import Registry, Resource
except ImportError as err:  # pragma: no cover - the wrapper installs these
    sys.exit(
        f"validate.py: {err}; nothing was checked. Run deploy/kubernetes/validate.sh, which installs "
        "kubernetes-validate, jsonschema and PyYAML (pinned) into target/mcp-venv."
    )

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DEFAULT_CRDS = REPO.parent / "shared" / "reference" / "agent-sandbox-v0.5.6" / "crds"
DOCS = REPO / "docs" / "kubernetes.md"
# The oldest Kubernetes minor the core objects are checked against (agent-sandbox v0.5.6's own
# manifests need about as much); every bundled newer one is checked too.
KUBE_MIN = (1, 30)
OBJECT_META = "https://kubernetes.io/api/_definitions.json#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
CORE_KINDS = {"ConfigMap", "Deployment", "Service", "NetworkPolicy", "Pod"}
NIB_IMAGE = "nib:0.1.0"
NIB_UID = 1000


@dataclass
class Doc:
    """One object of one file, as YAML gave it."""

    source: str  # file, relative to the repository, and the document's index
    obj: dict


@dataclass
class Finding:
    """One reason an object would be refused: `kind` is crd, core, policy or refs."""

    kind: str
    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.where}: {self.message}"


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    passed: list[str] = field(default_factory=list)
    cel_rules: int = 0

    def add(self, kind: str, where: str, message: str) -> None:
        self.findings.append(Finding(kind, where, message))


# ---------------------------------------------------------------------------------------------
# CRD schemas, read as structural schemas


def structural(node: Any, at_root: bool = False) -> Any:
    """The JSON Schema for an openAPIV3Schema node, with the API server's pruning made a refusal.

    An object that neither preserves unknown fields nor says what its other keys hold
    (`additionalProperties`) gets `additionalProperties: false`: a field it does not declare would
    be dropped by the server, so here it is an error.
    """
    if isinstance(node, list):
        return [structural(n) for n in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "properties":
            out[key] = {name: structural(sub) for name, sub in value.items()}
        elif key in ("items", "not") or (key == "additionalProperties" and isinstance(value, dict)):
            out[key] = structural(value)
        elif key in ("anyOf", "allOf", "oneOf"):
            out[key] = structural(value)
        else:
            out[key] = value
    if node.get("nullable") is True and "type" in node:
        out["type"] = [node["type"], "null"]
    if node.get("x-kubernetes-int-or-string") and "anyOf" not in node:
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if node.get("x-kubernetes-embedded-resource"):
        props = out.setdefault("properties", {})
        props.setdefault("apiVersion", {"type": "string"})
        props.setdefault("kind", {"type": "string"})
        props.setdefault("metadata", {"$ref": OBJECT_META})
    is_object = node.get("type") == "object" or "properties" in node
    if (
        is_object
        and not node.get("x-kubernetes-preserve-unknown-fields")
        and "additionalProperties" not in node
    ):
        out["additionalProperties"] = False
    if at_root:
        props = out.setdefault("properties", {})
        props["metadata"] = {"$ref": OBJECT_META}
    return out


def count_cel(node: Any) -> int:
    if isinstance(node, list):
        return sum(count_cel(n) for n in node)
    if not isinstance(node, dict):
        return 0
    own = len(node.get("x-kubernetes-validations") or [])
    return own + sum(count_cel(v) for v in node.values())


def list_type(validator, value, instance, schema):
    """x-kubernetes-list-type: a `map` list's items are unique by their keys, a `set`'s items unique."""
    if not isinstance(instance, list):
        return
    if value == "map":
        keys = schema.get("x-kubernetes-list-map-keys") or []
        seen: dict[tuple, int] = {}
        for i, item in enumerate(instance):
            if not isinstance(item, dict):
                continue
            # A missing key that the schema defaults (protocol: TCP) counts as its default.
            props = (schema.get("items") or {}).get("properties") or {}
            key = tuple(item.get(k, (props.get(k) or {}).get("default")) for k in keys)
            if key in seen:
                yield jsonschema.ValidationError(
                    f"items {seen[key]} and {i} have the same key {dict(zip(keys, key))} in a list "
                    "whose items are keyed by it (x-kubernetes-list-type: map)"
                )
            seen[key] = i
    elif value == "set":
        for i, item in enumerate(instance):
            if item in instance[:i]:
                yield jsonschema.ValidationError(f"item {i} repeats an earlier one in a set list")


def formats() -> jsonschema.FormatChecker:
    checker = jsonschema.FormatChecker()

    @checker.checks("int32", raises=ValueError)
    def int32(value: Any) -> bool:
        return not isinstance(value, int) or -(2**31) <= value < 2**31

    @checker.checks("int64", raises=ValueError)
    def int64(value: Any) -> bool:
        return not isinstance(value, int) or -(2**63) <= value < 2**63

    @checker.checks("date-time", raises=ValueError)
    def date_time(value: Any) -> bool:
        if not isinstance(value, str):
            return True
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})", value):
            raise ValueError(f"{value!r} is not an RFC 3339 date-time")
        datetime.datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
        return True

    return checker


KubeValidator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator, {"x-kubernetes-list-type": list_type}
)


class Schemas:
    """The CRDs' schemas by (apiVersion, kind) and Kubernetes' own by version."""

    def __init__(self, crd_dir: Path):
        bundled = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
        self.kube_dirs: dict[tuple[int, int], Path] = {}
        for d in bundled.glob("v*-local-strict"):
            m = re.match(r"v(\d+)\.(\d+)\.", d.name)
            if m and (int(m[1]), int(m[2])) >= KUBE_MIN:
                self.kube_dirs[(int(m[1]), int(m[2]))] = d
        if not self.kube_dirs:
            raise SystemExit(f"validate.py: no strict Kubernetes schemas at or above {KUBE_MIN} in {bundled}")
        self.registries: dict[tuple[int, int], Registry] = {}
        for version, d in self.kube_dirs.items():
            defs = json.loads((d / "_definitions.json").read_text())
            self.registries[version] = Resource.from_contents(defs) @ Registry()
        self.newest = max(self.kube_dirs)
        self.format_checker = formats()
        self.crds: dict[tuple[str, str], tuple[dict, int, str]] = {}
        files = sorted(crd_dir.glob("*.yaml"))
        if not files:
            raise SystemExit(
                f"validate.py: no CustomResourceDefinitions in {crd_dir}; nothing was checked. "
                "Put agent-sandbox v0.5.6's crds/ there or pass --crds DIR."
            )
        for path in files:
            for crd in yaml.safe_load_all(path.read_text()):
                if not crd or crd.get("kind") != "CustomResourceDefinition":
                    continue
                group = crd["spec"]["group"]
                kind = crd["spec"]["names"]["kind"]
                for version in crd["spec"]["versions"]:
                    if not version.get("served"):
                        continue
                    raw = version["schema"]["openAPIV3Schema"]
                    note = " (deprecated)" if version.get("deprecated") else ""
                    self.crds[(f"{group}/{version['name']}", kind)] = (
                        structural(raw, at_root=True),
                        count_cel(raw),
                        f"{path.name}{note}",
                    )

    def crd_errors(self, obj: dict) -> tuple[list[str], int, str] | None:
        entry = self.crds.get((obj.get("apiVersion"), obj.get("kind")))
        if entry is None:
            return None
        schema, cel, name = entry
        validator = KubeValidator(
            schema, registry=self.registries[self.newest], format_checker=self.format_checker
        )
        return [describe(e) for e in sorted(validator.iter_errors(obj), key=str)], cel, name

    def core_errors(self, obj: dict) -> dict[tuple[int, int], list[str]] | None:
        api = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", obj.get("apiVersion", ""))
        name = f"{str(obj.get('kind', '')).lower()}-{api}.json"
        out: dict[tuple[int, int], list[str]] = {}
        for version, d in sorted(self.kube_dirs.items()):
            path = d / name
            if not path.exists():
                return None if not out else out
            schema = json.loads(path.read_text())
            validator = jsonschema.Draft202012Validator(
                schema, registry=self.registries[version], format_checker=self.format_checker
            )
            out[version] = [describe(e) for e in sorted(validator.iter_errors(obj), key=str)]
        return out


def describe(error: jsonschema.ValidationError) -> str:
    """A schema error with its path, and for a refused field its name and the nearest declared one."""
    path = ".".join(str(p) for p in error.absolute_path) or "(top)"
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        declared = list((error.schema.get("properties") or {}).keys())
        unknown = [k for k in error.instance if k not in declared]
        hints = []
        for k in unknown:
            near = nearest(k, declared)
            hints.append(f"{k!r} (did you mean {near!r}?)" if near else repr(k))
        return f"{path}: unknown field {', '.join(hints)}; the API server would drop it"
    return f"{path}: {error.message}"


def nearest(word: str, names: list[str]) -> str | None:
    def distance(a: str, b: str) -> int:
        prev = list(range(len(b) + 1))
        for i, ca in enumerate(a, 1):
            cur = [i]
            for j, cb in enumerate(b, 1):
                cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca.lower() != cb.lower())))
            prev = cur
        return prev[-1]

    best = min(names, key=lambda n: distance(word, n), default=None)
    return best if best is not None and distance(word, best) <= max(2, len(word) // 4) else None


# ---------------------------------------------------------------------------------------------
# Reading the files


def load_manifests() -> list[Doc]:
    docs = []
    for path in sorted(HERE.rglob("*.yaml")):
        rel = path.relative_to(REPO)
        for i, obj in enumerate(yaml.safe_load_all(path.read_text())):
            if obj is not None:
                docs.append(Doc(f"{rel}#{i}", obj))
    return docs


def load_doc_blocks() -> list[Doc]:
    """The ```yaml blocks of docs/kubernetes.md that are whole objects (they name apiVersion and kind)."""
    if not DOCS.exists():
        return []
    docs = []
    text = DOCS.read_text()
    for m in re.finditer(r"^```yaml\n(.*?)^```", text, re.S | re.M):
        line = text[: m.start()].count("\n") + 1
        for i, obj in enumerate(yaml.safe_load_all(m.group(1))):
            if isinstance(obj, dict) and "apiVersion" in obj and "kind" in obj:
                docs.append(Doc(f"{DOCS.relative_to(REPO)}:{line}#{i}", obj))
    return docs


def name_of(doc: Doc) -> str:
    meta = doc.obj.get("metadata") if isinstance(doc.obj.get("metadata"), dict) else {}
    return f"{doc.source} {doc.obj.get('kind')}/{meta.get('name')}"


# ---------------------------------------------------------------------------------------------
# The schema checks


def check_schemas(docs: list[Doc], schemas: Schemas, report: Report) -> None:
    for doc in docs:
        where = name_of(doc)
        kind = doc.obj.get("kind")
        crd = schemas.crd_errors(doc.obj)
        if crd is not None:
            errors, cel, crd_name = crd
            for e in errors:
                report.add("crd", where, e)
            report.cel_rules += cel
            if not errors:
                report.passed.append(f"{where}: {crd_name}")
            pod = pod_spec(doc.obj)
            if pod is not None:
                check_core(
                    where + " (its pod, as a core Pod)",
                    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pod"}, "spec": pod},
                    schemas,
                    report,
                )
        elif kind in CORE_KINDS:
            check_core(where, doc.obj, schemas, report)
        else:
            report.add(
                "crd",
                where,
                f"no schema for apiVersion {doc.obj.get('apiVersion')!r} kind {kind!r}: neither an "
                "agent-sandbox v0.5.6 CRD (served versions) nor a core kind these manifests use",
            )


def check_core(where: str, obj: dict, schemas: Schemas, report: Report) -> None:
    by_version = schemas.core_errors(obj)
    if by_version is None:
        report.add("core", where, f"Kubernetes has no schema for {obj.get('apiVersion')} {obj.get('kind')}")
        return
    seen: dict[str, list[str]] = {}
    for version, errors in by_version.items():
        for e in errors:
            seen.setdefault(e, []).append(f"{version[0]}.{version[1]}")
    for e, versions in seen.items():
        report.add("core", where, f"{e} (Kubernetes {', '.join(versions)})")
    if not seen:
        lo, hi = min(by_version), max(by_version)
        report.passed.append(f"{where}: Kubernetes {lo[0]}.{lo[1]}-{hi[0]}.{hi[1]} (strict)")


# ---------------------------------------------------------------------------------------------
# What the schemas cannot say


def pod_spec(obj: dict) -> dict | None:
    kind = obj.get("kind")
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    if kind == "SandboxTemplate" or kind == "Sandbox":
        tpl = spec.get("podTemplate") or {}
    elif kind == "Deployment":
        tpl = spec.get("template") or {}
    else:
        return None
    pod = tpl.get("spec") if isinstance(tpl, dict) else None
    return pod if isinstance(pod, dict) else None


def pod_labels(obj: dict) -> dict:
    spec = obj.get("spec") or {}
    tpl = spec.get("podTemplate") or spec.get("template") or {}
    return ((tpl.get("metadata") or {}).get("labels")) or {}


def registry_host(image: str) -> str | None:
    first, _, rest = image.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return first
    return None


def check_pod(where: str, pod: dict, report: Report) -> None:
    """The restricted profile, per container, and the volumes nib needs."""
    psc = pod.get("securityContext") or {}
    for flag in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(flag):
            report.add("policy", where, f"{flag} is set: the pod would share the node's")
    if pod.get("automountServiceAccountToken") is not False:
        report.add("policy", where, "automountServiceAccountToken must be false: the agent needs no API token")
    if psc.get("runAsNonRoot") is not True or psc.get("runAsUser") != NIB_UID:
        report.add("policy", where, f"the pod's securityContext must set runAsNonRoot: true and runAsUser: {NIB_UID}")
    if (psc.get("seccompProfile") or {}).get("type") != "RuntimeDefault":
        report.add("policy", where, "the pod's seccompProfile must be RuntimeDefault")
    volumes = {v.get("name"): v for v in pod.get("volumes") or [] if isinstance(v, dict)}
    for v in volumes.values():
        if "hostPath" in v:
            report.add("policy", where, f"volume {v.get('name')!r} is a hostPath")
    images = []
    containers = [("initContainers", c) for c in pod.get("initContainers") or []]
    containers += [("containers", c) for c in pod.get("containers") or []]
    for group, c in containers:
        if not isinstance(c, dict):
            continue
        cw = f"{where} {group}[{c.get('name')}]"
        image = str(c.get("image", ""))
        images.append(image)
        host = registry_host(image)
        if host:
            report.add("policy", cw, f"image {image!r} names a registry host ({host}); name the image only, users push it to their own registry")
        sc = c.get("securityContext") or {}
        want = {
            "runAsNonRoot": True,
            "runAsUser": NIB_UID,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
        }
        for key, value in want.items():
            if sc.get(key) != value:
                report.add("policy", cw, f"securityContext.{key} must be {json.dumps(value)} (is {json.dumps(sc.get(key))})")
        if sc.get("privileged"):
            report.add("policy", cw, "securityContext.privileged is set")
        caps = sc.get("capabilities") or {}
        if caps.get("drop") != ["ALL"] or caps.get("add"):
            report.add("policy", cw, "capabilities must drop [ALL] and add none")
        if (sc.get("seccompProfile") or {}).get("type") != "RuntimeDefault":
            report.add("policy", cw, "securityContext.seccompProfile.type must be RuntimeDefault")
        mounts = {m.get("mountPath"): m for m in c.get("volumeMounts") or [] if isinstance(m, dict)}
        for m in mounts.values():
            if m.get("name") not in volumes:
                report.add("refs", cw, f"volumeMount {m.get('mountPath')} names volume {m.get('name')!r}, which the pod does not have")
        if group == "containers":
            for path in ("/tmp", "/workspace"):
                m = mounts.get(path)
                if m is None or m.get("readOnly"):
                    report.add("policy", cw, f"{path} must be a writable volume (the root file system is read-only)")
            tmp = volumes.get((mounts.get("/tmp") or {}).get("name")) or {}
            if "emptyDir" not in tmp:
                report.add("policy", cw, "/tmp must be an emptyDir")
            if c.get("workingDir") != "/workspace":
                report.add("policy", cw, "workingDir must be /workspace, nib's root")
    if NIB_IMAGE not in images:
        report.add("policy", where, f"no container runs {NIB_IMAGE}")


def check_nib_folder(where: str, pod: dict, config_maps: dict[str, Doc], report: Report) -> None:
    """The nib an MCP configuration starts lies on a read-only mount, in a folder of its own.

    nib starts its worker from no folder others may write, and an emptyDir's own folder is
    writable by all: nib must sit in a folder the init container made inside the volume.
    """
    volumes = {v.get("name"): v for v in pod.get("volumes") or [] if isinstance(v, dict)}
    for c in pod.get("containers") or []:
        mounts = [m for m in c.get("volumeMounts") or [] if isinstance(m, dict)]
        for m in mounts:
            cm = (volumes.get(m.get("name")) or {}).get("configMap") or {}
            data = ((config_maps.get(cm.get("name")) or Doc("", {})).obj.get("data")) or {}
            for key, text in data.items():
                try:
                    servers = json.loads(text).get("mcpServers", {}) if key.endswith(".json") else {}
                except (ValueError, AttributeError, TypeError):
                    continue
                for name, server in servers.items():
                    command = str(server.get("command", ""))
                    holder = max(
                        (h for h in mounts if command.startswith(str(h.get("mountPath", "")).rstrip("/") + "/")),
                        key=lambda h: len(h.get("mountPath", "")),
                        default=None,
                    )
                    cw = f"{where} containers[{c.get('name')}] {key} server {name!r}"
                    if holder is None:
                        report.add("policy", cw, f"command {command} lies on no volume of the container (the image would need its own nib)")
                        continue
                    if not holder.get("readOnly"):
                        report.add("policy", cw, f"the volume holding {command} is mounted writable: the agent could change nib")
                    vol = volumes.get(holder.get("name")) or {}
                    if "emptyDir" in vol and str(Path(command).parent) == str(holder.get("mountPath", "")).rstrip("/"):
                        report.add("policy", cw, f"{command} lies in the emptyDir's own folder, which is writable by all: nib would refuse to start its worker there")


def check_policy(docs: list[Doc], report: Report) -> None:
    by_kind: dict[str, dict[str, Doc]] = {}
    for doc in docs:
        meta = doc.obj.get("metadata") if isinstance(doc.obj.get("metadata"), dict) else {}
        by_kind.setdefault(str(doc.obj.get("kind")), {})[str(meta.get("name"))] = doc
    before = len(report.findings)
    for doc in docs:
        where = name_of(doc)
        obj = doc.obj
        kind = obj.get("kind")
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        pod = pod_spec(obj)
        if pod is not None:
            check_pod(where, pod, report)
            for v in pod.get("volumes") or []:
                cm = (v.get("configMap") or {}).get("name") if isinstance(v, dict) else None
                if cm and cm not in by_kind.get("ConfigMap", {}):
                    report.add("refs", where, f"volume {v.get('name')!r} names ConfigMap {cm!r}, which no manifest defines")
        if pod is not None:
            check_nib_folder(where, pod, by_kind.get("ConfigMap", {}), report)
        if kind == "ConfigMap":
            for key, value in (obj.get("data") or {}).items():
                if key.endswith(".json") and isinstance(value, str):
                    try:
                        json.loads(value)
                    except ValueError as err:
                        report.add("policy", where, f"data.{key} is not JSON: {err}")
        if kind == "SandboxWarmPool":
            ref = (spec.get("sandboxTemplateRef") or {}).get("name")
            if ref not in by_kind.get("SandboxTemplate", {}):
                report.add("refs", where, f"sandboxTemplateRef {ref!r} names no SandboxTemplate here")
        if kind == "SandboxClaim":
            ref = (spec.get("warmPoolRef") or {}).get("name")
            pool = by_kind.get("SandboxWarmPool", {}).get(ref)
            if pool is None:
                report.add("refs", where, f"warmPoolRef {ref!r} names no SandboxWarmPool here")
                continue
            tref = ((pool.obj.get("spec") or {}).get("sandboxTemplateRef") or {}).get("name")
            tpl = by_kind.get("SandboxTemplate", {}).get(tref)
            tspec = (tpl.obj.get("spec") or {}) if tpl else {}
            for field_name, policy in (("env", "envVarsInjectionPolicy"), ("volumeClaimTemplates", "volumeClaimTemplatesPolicy")):
                if spec.get(field_name) and tspec.get(policy, "Disallowed") == "Disallowed":
                    report.add("refs", where, f"sets {field_name} but template {tref!r} has {policy}: Disallowed, so the controller refuses the claim")
        if kind in ("Service", "NetworkPolicy"):
            selector = spec.get("selector") if kind == "Service" else (spec.get("podSelector") or {}).get("matchLabels")
            targets = [
                d for d in by_kind.get("Deployment", {}).values()
                if selector and all(pod_labels(d.obj).get(k) == v for k, v in selector.items())
            ]
            if not targets:
                report.add("refs", where, f"selector {selector} matches no Deployment's pods")
            names = {
                p.get("name")
                for d in targets
                for c in (pod_spec(d.obj) or {}).get("containers") or []
                for p in c.get("ports") or []
            }
            if kind == "Service":
                wanted = [p.get("targetPort") for p in spec.get("ports") or []]
            else:
                wanted = [p.get("port") for rule in spec.get("ingress") or [] for p in rule.get("ports") or []]
            for port in wanted:
                if isinstance(port, str) and targets and port not in names:
                    report.add("refs", where, f"port {port!r} is no named port of the selected pods ({sorted(n for n in names if n)})")
    if len(report.findings) == before:
        report.passed.append("restricted profile, images and references of every manifest")


# ---------------------------------------------------------------------------------------------
# Running, and the self-check


def validate(docs: list[Doc], doc_blocks: list[Doc], schemas: Schemas) -> Report:
    report = Report()
    check_schemas(docs, schemas, report)
    check_policy(docs, report)
    check_schemas(doc_blocks, schemas, report)
    return report


def find(docs: list[Doc], kind: str) -> dict:
    for doc in docs:
        if doc.obj.get("kind") == kind:
            return doc.obj
    raise SystemExit(f"validate.py --self-check: no {kind} among the manifests to break")


def agent(obj: dict) -> dict:
    pod = pod_spec(obj) or {}
    return next(c for c in pod["containers"] if c.get("name") == "agent")


def rename(d: dict, old: str, new: str) -> None:
    d[new] = d.pop(old)


# Each case: what it breaks, which check must refuse it, the text the refusal must hold, the change.
BREAKS: list[tuple[str, str, str, Callable[[list[Doc]], None]]] = [
    ("a misspelt securityContext field in the SandboxTemplate's container", "crd", "readOnlyRootFilesytem",
     lambda ds: rename(agent(find(ds, "SandboxTemplate"))["securityContext"], "readOnlyRootFilesystem", "readOnlyRootFilesytem")),
    ("runAsUser as a string in the SandboxTemplate", "crd", "is not of type 'integer'",
     lambda ds: agent(find(ds, "SandboxTemplate"))["securityContext"].update(runAsUser="1000")),
    ("a misspelt volumeMount field in the SandboxTemplate's pod", "crd", "mountpath",
     lambda ds: rename(agent(find(ds, "SandboxTemplate"))["volumeMounts"][0], "mountPath", "mountpath")),
    ("the same misspelling, seen by the core Pod schema", "core", "mountpath",
     lambda ds: rename(agent(find(ds, "SandboxTemplate"))["volumeMounts"][0], "mountPath", "mountpath")),
    ("a misspelt top-level metadata field (CRD metadata is ObjectMeta)", "crd", "lables",
     lambda ds: rename(find(ds, "SandboxTemplate")["metadata"], "labels", "lables")),
    ("the pod template one level down, as in older agent-sandbox examples (spec.sandboxSpec)", "crd", "sandboxSpec",
     lambda ds: find(ds, "SandboxTemplate").__setitem__("spec", {"sandboxSpec": find(ds, "SandboxTemplate")["spec"]})),
    ("two containers with the same name (a map list keyed by name)", "crd", "have the same key",
     lambda ds: (pod_spec(find(ds, "SandboxTemplate")) or {})["containers"].append(copy.deepcopy(agent(find(ds, "SandboxTemplate"))))),
    ("a wrong enum value in the SandboxTemplate", "crd", "is not one of",
     lambda ds: find(ds, "SandboxTemplate")["spec"].update(envVarsInjectionPolicy="Always")),
    ("the warm pool's replicas as a string", "crd", "is not of type 'integer'",
     lambda ds: find(ds, "SandboxWarmPool")["spec"].update(replicas="2")),
    ("the warm pool's replicas past int32", "crd", "is not a 'int32'",
     lambda ds: find(ds, "SandboxWarmPool")["spec"].update(replicas=2**40)),
    ("the v1alpha1 claim field sandboxTemplateRef in a v1beta1 claim", "crd", "sandboxTemplateRef",
     lambda ds: rename(find(ds, "SandboxClaim")["spec"], "warmPoolRef", "sandboxTemplateRef")),
    ("a claim field newer than v0.5.6 (safeToEvict)", "crd", "safeToEvict",
     lambda ds: find(ds, "SandboxClaim")["spec"].update(safeToEvict="false")),
    ("a claim shutdownTime that is no date-time", "crd", "date-time",
     lambda ds: find(ds, "SandboxClaim")["spec"]["lifecycle"].update(shutdownTime="tomorrow")),
    ("an apiVersion the CRDs do not serve", "crd", "no schema",
     lambda ds: find(ds, "SandboxClaim").update(apiVersion="extensions.agents.x-k8s.io/v2")),
    ("a misspelt capabilities field in the Deployment", "core", "dorp",
     lambda ds: rename(agent(find(ds, "Deployment"))["securityContext"]["capabilities"], "drop", "dorp")),
    ("the Deployment's replicas as a string", "core", "is not of type 'integer'",
     lambda ds: find(ds, "Deployment")["spec"].update(replicas="1")),
    ("the Service's port as a string", "core", "is not of type 'integer'",
     lambda ds: find(ds, "Service")["spec"]["ports"][0].update(port="8080")),
    ("a misspelt NetworkPolicy field", "core", "policyType",
     lambda ds: rename(find(ds, "NetworkPolicy")["spec"], "policyTypes", "policyType")),
    ("a ConfigMap value that is not a string", "core", "is not of type 'string'",
     lambda ds: find(ds, "ConfigMap")["data"].update({"mcp.json": {"mcpServers": {}}})),
    ("the MCP configuration broken as JSON", "policy", "is not JSON",
     lambda ds: find(ds, "ConfigMap")["data"].update({"mcp.json": find(ds, "ConfigMap")["data"]["mcp.json"].replace("}", "", 1)})),
    ("nib's folder as the emptyDir's own (writable by all)", "policy", "writable by all",
     lambda ds: [m.update(mountPath="/opt/nib/bin") for m in agent(find(ds, "SandboxTemplate"))["volumeMounts"] if m["name"] == "nib-bin"]),
    ("nib's volume mounted writable in the agent container", "policy", "mounted writable",
     lambda ds: [m.pop("readOnly") for m in agent(find(ds, "Deployment"))["volumeMounts"] if m["name"] == "nib-bin"]),
    ("allowPrivilegeEscalation true in the SandboxTemplate", "policy", "allowPrivilegeEscalation",
     lambda ds: agent(find(ds, "SandboxTemplate"))["securityContext"].update(allowPrivilegeEscalation=True)),
    ("a writable root file system in the Deployment", "policy", "readOnlyRootFilesystem",
     lambda ds: agent(find(ds, "Deployment"))["securityContext"].update(readOnlyRootFilesystem=False)),
    ("capabilities kept in the init container", "policy", "capabilities",
     lambda ds: (pod_spec(find(ds, "Deployment")) or {})["initContainers"][0]["securityContext"]["capabilities"].update(add=["SYS_ADMIN"])),
    ("an Unconfined seccomp profile on the pod", "policy", "seccompProfile",
     lambda ds: (pod_spec(find(ds, "SandboxTemplate")) or {})["securityContext"].update(seccompProfile={"type": "Unconfined"})),
    ("/tmp not on a volume", "policy", "/tmp",
     lambda ds: agent(find(ds, "Deployment")).update(volumeMounts=[m for m in agent(find(ds, "Deployment"))["volumeMounts"] if m["mountPath"] != "/tmp"])),
    ("an image named with a registry host", "policy", "registry host",
     lambda ds: (pod_spec(find(ds, "SandboxTemplate")) or {})["initContainers"][0].update(image="registry.example.com/nib:0.1.0")),
    ("a warm pool naming a template that is not there", "refs", "names no SandboxTemplate",
     lambda ds: find(ds, "SandboxWarmPool")["spec"]["sandboxTemplateRef"].update(name="nib-agnet")),
    ("a claim naming a pool that is not there", "refs", "names no SandboxWarmPool",
     lambda ds: find(ds, "SandboxClaim")["spec"]["warmPoolRef"].update(name="nib-pool")),
    ("a claim setting env while the template disallows it", "refs", "controller refuses the claim",
     lambda ds: find(ds, "SandboxClaim")["spec"].update(env=[{"name": "NIB_SANDBOX_NETWORK", "value": "1"}])),
    ("a Service selecting no pod", "refs", "matches no Deployment",
     lambda ds: find(ds, "Service")["spec"].update(selector={"app.kubernetes.io/name": "nib"})),
    ("a Service targeting a port the pod does not name", "refs", "no named port",
     lambda ds: find(ds, "Service")["spec"]["ports"][0].update(targetPort="http")),
    ("a volume naming a ConfigMap that is not there", "refs", "which no manifest defines",
     lambda ds: next(v for v in (pod_spec(find(ds, "Deployment")) or {})["volumes"] if "configMap" in v)["configMap"].update(name="nib-mcp")),
]


def self_check(docs: list[Doc], doc_blocks: list[Doc], schemas: Schemas) -> tuple[list[str], list[str]]:
    passed, failed = [], []
    if doc_blocks:
        # The page's objects get the schema checks too: a misspelt field in the first is refused.
        broken_blocks = copy.deepcopy(doc_blocks)
        spec = broken_blocks[0].obj.get("spec")
        if isinstance(spec, dict):
            spec["warmPoolReference"] = spec.get("warmPoolRef")
        report = validate(docs, broken_blocks, schemas)
        hits = [f for f in report.findings if f.kind == "crd" and "warmPoolReference" in f.message]
        what = f"a misspelt field in {broken_blocks[0].source}"
        if hits:
            passed.append(f"refused: {what} ({hits[0]})")
        else:
            failed.append(f"self-check: NOT refused by the crd check: {what}")
    for what, kind, text, breaker in BREAKS:
        broken = copy.deepcopy(docs)
        try:
            breaker(broken)
        except (KeyError, IndexError, StopIteration, TypeError) as err:
            failed.append(f"self-check: could not break the manifests for {what!r} ({err!r}): the case no longer fits them")
            continue
        report = validate(broken, [], schemas)
        hits = [f for f in report.findings if f.kind == kind and text in f.message]
        if hits:
            passed.append(f"refused: {what} ({hits[0]})")
        else:
            seen = "; ".join(str(f) for f in report.findings[:3]) or "nothing"
            failed.append(f"self-check: NOT refused by the {kind} check: {what} (it reported {seen})")
    return passed, failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--crds", type=Path, default=DEFAULT_CRDS, help="agent-sandbox v0.5.6's crds/ folder")
    parser.add_argument("--self-check", action="store_true", help="also prove that broken manifests are refused")
    args = parser.parse_args()

    schemas = Schemas(args.crds)
    docs = load_manifests()
    if not docs:
        print(f"validate.py: no manifests under {HERE}; nothing was checked", file=sys.stderr)
        return 1
    doc_blocks = load_doc_blocks()
    report = validate(docs, doc_blocks, schemas)
    for line in report.passed:
        print(f"ok    {line}")
    failed = [str(f) for f in report.findings]
    for line in failed:
        print(f"FAIL  {line}")
    passed = list(report.passed)
    lo, hi = min(schemas.kube_dirs), schemas.newest
    print(
        f"      {len(docs)} objects in deploy/kubernetes, {len(doc_blocks)} in {DOCS.name}; CRDs from "
        f"{args.crds}; Kubernetes {lo[0]}.{lo[1]}-{hi[0]}.{hi[1]} from kubernetes-validate "
        f"{kubernetes_validate.__version__}; {report.cel_rules} CEL rule(s) met and not evaluated"
    )
    if args.self_check:
        if failed:
            print("      the self-check needs manifests that pass; skipped")
        else:
            ok, bad = self_check(docs, doc_blocks, schemas)
            for line in ok:
                print(f"ok    {line}")
            for line in bad:
                print(f"FAIL  {line}")
            passed += ok
            failed += bad
    print(f"kubernetes: {len(passed)} passed, {len(failed)} failed")
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
