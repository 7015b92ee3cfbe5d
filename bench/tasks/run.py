#!/usr/bin/env python3
"""The task benchmark: real editing tasks on pinned public sources, done by a
real client (Claude Code, OpenCode) with its built-in tools and with nib, N
runs each, checked by each task's checker.

Modes (only `run --live` calls a model):
  plan      what `run` would do, and its cost at list prices
  validate  each task's checker fails at its start and passes on its
            reference change
  run       the runs not stored yet; without --live (and a key) it says
            what it would do
  replay    the whole pipeline against a loopback mock model answering
            from each task's recorded transcript (replay/ARM.json): setup,
            client, nib, checker, results, report — no key, no network
  recheck   the checkers again over stored runs (each run keeps its diff)
  report    tables per task, arm, client and model, with spreads

Each task is a folder holding task.json (the source and its pin, the prompt,
the checker), start.patch (what makes the start from the pristine source:
a failing test, a bug, a broken build; may be absent), reference.patch (a
correct change) and check/ (files the checker copies in at check time, so
the agent never sees or edits them). Sources come from package registries
by their own tools (cargo, pip, npm) and Debian's JDK sources, each pinned
by a SHA-256.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
CACHE = Path(os.environ.get("NIB_TASKS_CACHE", REPO / "target" / "tasks-cache"))
RESULTS = HERE / "results"
ARMS = ("builtin", "nib")
CLIENTS = ("claude", "opencode")
TYPESCRIPT = "5.6.3"
EDIT_TOOLS = re.compile(r"^(Edit|Write|MultiEdit|NotebookEdit|edit|write|patch|mcp__nib__(edit|write)|nib_(edit|write))$")


class TaskError(Exception):
    """A task that cannot be prepared or checked, with what to do next."""


def sh(argv, cwd=None, env=None, timeout=1800, check=True):
    """Runs a command; returns (code, output). Raises on failure when check."""
    if cwd is not None:
        # Some programs (OpenCode) take their folder from $PWD, not the cwd.
        env = dict(env if env is not None else os.environ, PWD=str(cwd))
    proc = subprocess.run(
        [str(a) for a in argv],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=timeout,
        text=True,
        errors="replace",
    )
    if check and proc.returncode != 0:
        raise TaskError(f"{' '.join(map(str, argv))} exited {proc.returncode}:\n{proc.stdout[-4000:]}")
    return proc.returncode, proc.stdout


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load_tasks(only=None):
    tasks = []
    for f in sorted(HERE.glob("*/task.json")):
        t = json.loads(f.read_text())
        t["id"] = f.parent.name
        t["dir"] = f.parent
        if only and t["id"] not in only:
            continue
        tasks.append(t)
    if only and len(tasks) != len(only):
        missing = sorted(set(only) - {t["id"] for t in tasks})
        raise TaskError(f"no task named {', '.join(missing)}; `run.py plan` lists them")
    return tasks


# ---------------------------------------------------------------- sources


def fetch(source: dict) -> Path:
    """The pinned archive (or, for the JDK, a folder of the listed files) in
    the cache, its pin checked."""
    CACHE.mkdir(parents=True, exist_ok=True)
    kind = source["kind"]
    if kind == "crate":
        name = f"{source['name']}-{source['version']}.crate"
        found = CACHE / name
        if not found.exists():
            proj = Path(tempfile.mkdtemp(prefix="fetch-", dir=CACHE))
            (proj / "src").mkdir()
            (proj / "src" / "lib.rs").write_text("")
            (proj / "Cargo.toml").write_text(
                f'[package]\nname = "fetch"\nversion = "0.0.0"\nedition = "2021"\n'
                f'[workspace]\n[dependencies]\n{source["name"]} = {{ version = "={source["version"]}", default-features = false }}\n'
            )
            sh(["cargo", "fetch", "-q"], cwd=proj)
            home = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo"))
            hits = glob.glob(str(home / "registry" / "cache" / "*" / name))
            if not hits:
                raise TaskError(f"cargo fetched no {name}")
            shutil.copy(hits[0], found)
            shutil.rmtree(proj, ignore_errors=True)
        archive = found
    elif kind == "pypi":
        pattern = f"{source['name']}-{source['version']}.tar.gz"
        found = CACHE / pattern
        if not found.exists():
            sh([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                f"{source['name']}=={source['version']}", "-d", CACHE])
        archive = found
    elif kind == "npm":
        safe = source["name"].lstrip("@").replace("/", "-")
        found = CACHE / f"{safe}-{source['version']}.tgz"
        if not found.exists():
            sh(["npm", "pack", "--silent", f"{source['name']}@{source['version']}", "--pack-destination", CACHE])
        archive = found
    elif kind == "jdk":
        return fetch_jdk(source)
    else:
        raise TaskError(f"unknown source kind {kind!r}")
    if not archive.exists():
        raise TaskError(f"{archive.name} was not fetched")
    got = sha256(archive)
    if got != source["sha256"]:
        raise TaskError(f"{archive.name}: SHA-256 {got}, pinned {source['sha256']}; the registry served other bytes")
    return archive


def jdk_home(major: int) -> Path:
    for d in sorted(glob.glob(f"/usr/lib/jvm/*{major}*")):
        if (Path(d) / "bin" / "javac").exists() and (Path(d) / "lib" / "src.zip").exists():
            return Path(d)
    raise TaskError(f"no JDK {major} with its sources (src.zip); apt-get install openjdk-{major}-jdk-headless openjdk-{major}-source")


def fetch_jdk(source: dict) -> Path:
    home = jdk_home(source["major"])
    out = CACHE / f"jdk{source['major']}-src"
    with zipfile.ZipFile(home / "lib" / "src.zip") as z:
        for path, pin in source["files"].items():
            target = out / path
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(z.read(path))
            got = sha256(target)
            if got != pin:
                raise TaskError(f"{path} in {home}/lib/src.zip: SHA-256 {got}, pinned {pin}; another JDK build")
    return out


def extract(source: dict, archive: Path, dest: Path):
    dest.mkdir(parents=True)
    if source["kind"] == "jdk":
        for path in source["files"]:
            (dest / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(archive / path, dest / path)
        return
    with tarfile.open(archive) as tar:
        for m in tar.getmembers():
            parts = Path(m.name).parts
            if len(parts) < 2 or m.issym() or m.islnk() or ".." in parts:
                continue
            m.name = str(Path(*parts[1:]))
            tar.extract(m, dest, filter="data") if hasattr(tarfile, "data_filter") else tar.extract(m, dest)


def git(tree: Path, *args, check=True):
    env = dict(os.environ, GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@localhost",
               GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@localhost")
    return sh(["git", "-c", "core.hooksPath=/dev/null", *args], cwd=tree, env=env, check=check)[1]


def prepare(task: dict, dest: Path) -> Path:
    """The task's start in `dest`, a git repository whose HEAD is the start."""
    archive = fetch(task["source"])
    extract(task["source"], archive, dest)
    # The archive's old mtimes would let a build cache (cargo's, shared per
    # task) take the start for a tree it built before: every file is new.
    now = time.time()
    for f in dest.rglob("*"):
        os.utime(f, (now, now), follow_symlinks=False)
    git(dest, "init", "-q")
    git(dest, "add", "-A")
    git(dest, "commit", "-qm", "pristine")
    start = task["dir"] / "start.patch"
    if start.exists():
        git(dest, "apply", "--whitespace=nowarn", str(start))
        git(dest, "add", "-A")
        git(dest, "commit", "-qm", "start")
    return dest


# ---------------------------------------------------------------- checkers


def tool_env(task: dict) -> dict:
    """The placeholders checker commands may name."""
    vals = {"python": sys.executable, "cache": str(CACHE)}
    check = task["check"]
    if "tsc" in json.dumps(check):
        node = CACHE / f"typescript-{TYPESCRIPT}"
        tsc = node / "node_modules" / "typescript" / "bin" / "tsc"
        if not tsc.exists():
            node.mkdir(parents=True, exist_ok=True)
            sh(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", node, f"typescript@{TYPESCRIPT}"])
        vals["tsc"] = str(tsc)
    if "{javac}" in json.dumps(check) or "{java}" in json.dumps(check):
        home = jdk_home(task["source"].get("major", 17))
        vals["javac"] = str(home / "bin" / "javac")
        vals["java"] = str(home / "bin" / "java")
    return vals


def hidden_bytes(task: dict, src: str) -> bytes:
    """A checker file: `pristine:PATH` is PATH as the pinned source has it
    (its own tests, restored over whatever the agent did to them); anything
    else is a file beside task.json (`../_shared/…` for one several tasks
    use)."""
    if not src.startswith("pristine:"):
        return (task["dir"] / src).read_bytes()
    path = src.removeprefix("pristine:")
    archive = fetch(task["source"])
    if task["source"]["kind"] == "jdk":
        return (archive / path).read_bytes()
    with tarfile.open(archive) as tar:
        for m in tar.getmembers():
            parts = Path(m.name).parts
            if len(parts) > 1 and str(Path(*parts[1:])) == path and m.isfile():
                f = tar.extractfile(m)
                if f is not None:
                    return f.read()
    raise TaskError(f"{task['id']}: the pinned source has no {path}")


def run_check(task: dict, tree: Path) -> tuple[bool, str]:
    """Runs the task's checker on `tree` (its hidden files copied in over
    whatever the agent left); returns whether it passed and its log."""
    check = task["check"]
    for rel, src in check.get("hidden", {}).items():
        target = tree / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(hidden_bytes(task, src))
    log = []
    for rule in check.get("absent", []):
        for f in sorted(tree.glob(rule["glob"])):
            text = f.read_text(errors="replace")
            if re.search(rule["pattern"], text):
                return False, f"{f.relative_to(tree)} still has {rule['pattern']!r}"
    for rule in check.get("present", []):
        files = sorted(tree.glob(rule["glob"]))
        if not any(re.search(rule["pattern"], f.read_text(errors="replace")) for f in files):
            return False, f"no {rule['glob']} has {rule['pattern']!r}"
    vals = tool_env(task)
    env = dict(os.environ, CARGO_TARGET_DIR=str(CACHE / "target" / task["id"]), CARGO_TERM_COLOR="never")
    env.pop("RUSTFLAGS", None)
    for argv in check.get("run", []):
        argv = [a.format(**vals) for a in argv]
        try:
            code, out = sh(argv, cwd=tree, env=env, timeout=900, check=False)
        except subprocess.TimeoutExpired:
            return False, "\n".join(log + [f"$ {' '.join(argv)}: timed out"])
        log.append(f"$ {' '.join(argv)}  (exit {code})\n{out[-3000:]}")
        if code != 0:
            return False, "\n".join(log)
    return True, "\n".join(log)


def validate(tasks) -> int:
    failures = 0
    for t in tasks:
        with tempfile.TemporaryDirectory(prefix=f"task-{t['id']}-") as tmp:
            started = time.monotonic()
            try:
                tree = prepare(t, Path(tmp) / "tree")
                ok, log = run_check(t, tree)
                if ok:
                    raise TaskError(f"the checker passes at the start; it must fail there\n{log[-1500:]}")
                git(tree, "checkout", "-q", "--", ".")
                git(tree, "clean", "-qfdx")
                git(tree, "apply", "--whitespace=nowarn", str(t["dir"] / "reference.patch"))
                ok, log = run_check(t, tree)
                if not ok:
                    raise TaskError(f"the checker fails on the reference change\n{log[-3000:]}")
                print(f"ok    {t['id']:32} fails at the start, passes on the reference ({time.monotonic() - started:.0f}s)")
            except TaskError as e:
                failures += 1
                print(f"FAIL  {t['id']:32} {e}")
    print(f"{len(tasks) - failures} of {len(tasks)} tasks validate")
    return 1 if failures else 0


# ---------------------------------------------------------------- clients


def nib_bin() -> str:
    for p in (os.environ.get("NIB_BIN"), REPO / "target" / "release" / "nib", REPO / "target" / "debug" / "nib", shutil.which("nib")):
        if p and Path(p).exists():
            return str(p)
    raise TaskError("no nib binary: cargo build --release, or set NIB_BIN")


def client_bin(client: str) -> str:
    name = "claude" if client == "claude" else "opencode"
    local = REPO / "target" / ("claude-code" if client == "claude" else "opencode") / "node_modules" / ".bin" / name
    for p in (os.environ.get(f"NIB_{client.upper()}"), local, shutil.which(name)):
        if p and Path(p).exists():
            return str(p)
    raise TaskError(f"{client} is not installed: npm install {'@anthropic-ai/claude-code' if client == 'claude' else 'opencode-ai'} into target/")


def set_up_arm(arm: str, client: str, tree: Path, env: dict, base_url: str | None = None):
    """nib set up as a user would (built-ins denied) for the nib arm; the
    client's defaults for the other. OpenCode gets a project opencode.json
    (pointing its Anthropic provider at `base_url` in a replay), which
    `nib setup` then adds nib to."""
    if client == "opencode":
        config = {"$schema": "https://opencode.ai/config.json", "autoupdate": False, "share": "disabled"}
        if base_url:
            config["provider"] = {"anthropic": {"options": {"baseURL": f"{base_url}/v1", "apiKey": "sk-replay-offline"}}}
        (tree / "opencode.json").write_text(json.dumps(config, indent=1) + "\n")
    if arm == "nib":
        sh([nib_bin(), "setup"], cwd=tree, env=env)


def client_command(client: str, arm: str, model: str, prompt: str) -> list[str]:
    if client == "claude":
        allowed = "mcp__nib" if arm == "nib" else "Bash,Read,Edit,Write,Grep,Glob,MultiEdit"
        return [client_bin("claude"), "-p", prompt, "--output-format", "stream-json", "--verbose",
                "--model", model, "--allowedTools", allowed]
    return [client_bin("opencode"), "run", "--format", "json", "--model", model, prompt]


def parse_claude(stream: str) -> dict:
    calls, failed, result = 0, 0, {}
    edit_ids = set()
    for line in stream.splitlines():
        try:
            ev = json.loads(line)
        except json.JSONDecodeError:
            continue
        msg = ev.get("message") or {}
        for block in msg.get("content") or [] if isinstance(msg.get("content"), list) else []:
            if block.get("type") == "tool_use":
                calls += 1
                if EDIT_TOOLS.match(block.get("name", "")):
                    edit_ids.add(block.get("id"))
            if block.get("type") == "tool_result" and block.get("is_error") and block.get("tool_use_id") in edit_ids:
                failed += 1
        if ev.get("type") == "result":
            result = ev
    usage = result.get("usage") or {}
    return {
        "input_tokens": usage.get("input_tokens", 0) + usage.get("cache_read_input_tokens", 0) + usage.get("cache_creation_input_tokens", 0),
        "output_tokens": usage.get("output_tokens", 0),
        "cost_usd": result.get("total_cost_usd"),
        "tool_calls": calls,
        "failed_edits": failed,
        "turns": result.get("num_turns"),
    }


def parse_opencode(stream: str) -> dict:
    calls, failed, tin, tout, cost = 0, 0, 0, 0, 0.0
    for line in stream.splitlines():
        try:
            ev = json.loads(line)
        except json.JSONDecodeError:
            continue
        part = ev.get("part") or {}
        if part.get("type") == "tool":
            calls += 1
            state = part.get("state") or {}
            if state.get("status") == "error" and EDIT_TOOLS.match(part.get("tool", "")):
                failed += 1
        if part.get("type") == "step-finish":
            tokens = part.get("tokens") or {}
            tin += tokens.get("input", 0) + (tokens.get("cache") or {}).get("read", 0)
            tout += tokens.get("output", 0)
            cost += part.get("cost") or 0
    return {"input_tokens": tin, "output_tokens": tout, "cost_usd": cost, "tool_calls": calls, "failed_edits": failed, "turns": None}


def one_run(task: dict, arm: str, client: str, model: str, extra_env: dict, base_url: str | None = None) -> dict:
    """One run in a fresh tree and HOME; returns its record."""
    with tempfile.TemporaryDirectory(prefix=f"run-{task['id']}-") as tmp:
        tree = prepare(task, Path(tmp) / "tree")
        home = Path(tmp) / "home"
        home.mkdir()
        env = dict(os.environ, HOME=str(home), DISABLE_AUTOUPDATER="1",
                   CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", **extra_env)
        for k in ("CLAUDE_CONFIG_DIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "NIB_STATE_DIR"):
            env.pop(k, None)
        set_up_arm(arm, client, tree, env, base_url)
        git(tree, "add", "-A")
        git(tree, "commit", "-qm", "set up", check=False)
        started = time.monotonic()
        try:
            code, out = sh(client_command(client, arm, model, task["prompt"]), cwd=tree, env=env, timeout=3600, check=False)
        except subprocess.TimeoutExpired:
            code, out = -1, ""
        wall = time.monotonic() - started
        git(tree, "add", "-A")
        diff = git(tree, "diff", "--cached", "HEAD", "--", ".", ":(exclude).mcp.json", ":(exclude).claude", ":(exclude)opencode.json")
        ok, log = run_check(task, tree)
        stats = parse_claude(out) if client == "claude" else parse_opencode(out)
        return {"task": task["id"], "arm": arm, "client": client, "model": model, "exit": code,
                "success": ok, "wall_s": round(wall, 2), **stats, "diff": diff, "check_log": log[-4000:],
                "client_log": out[-2000:] if code != 0 else ""}


def result_path(root: Path, mode: str, client: str, model: str, arm: str, task: str, n: int) -> Path:
    return root / mode / client / model.replace("/", "_") / arm / task / f"{n}.json"


def combos(tasks, args):
    for t in tasks:
        for client in args.clients:
            for arm in args.arms:
                for n in range(1, args.runs + 1):
                    yield t, client, arm, n


def load_prices() -> dict:
    return json.loads((HERE / "prices.json").read_text())


def plan(tasks, args, root: Path) -> list:
    todo = [(t, c, a, n) for t, c, a, n in combos(tasks, args)
            if not result_path(root, "live", c, args.model, a, t["id"], n).exists()]
    prices = load_prices()
    price = prices["models"].get(args.model)
    stored = [json.loads(p.read_text()) for p in root.glob("live/**/*.json")]
    cost = 0.0
    for t, c, a, n in todo:
        same = [r for r in stored if r["arm"] == a and r["model"] == args.model]
        tin = statistics.median([r["input_tokens"] for r in same]) if same else prices["default_tokens"]["input"]
        tout = statistics.median([r["output_tokens"] for r in same]) if same else prices["default_tokens"]["output"]
        if price:
            cost += tin / 1e6 * price["input"] + tout / 1e6 * price["output"]
    print(f"{len(todo)} runs to make ({len(tasks)} tasks × {len(args.arms)} arms × {len(args.clients)} clients × {args.runs} runs, "
          f"{sum(1 for _ in combos(tasks, args)) - len(todo)} already stored under {root}/live)")
    for t, c, a, n in todo[:40]:
        print(f"  {t['id']:32} {c:8} {a:8} run {n}")
    if len(todo) > 40:
        print(f"  … {len(todo) - 40} more")
    if price:
        print(f"estimated cost at list prices ({prices['as_of']}): ${cost:.2f} for {args.model}")
    else:
        print(f"no list price for {args.model} in prices.json; add it to estimate the cost")
    return todo


# ---------------------------------------------------------------- replay


def mock_model(script: Path, log: Path):
    exe = None
    for p in (os.environ.get("NIB_MOCK_MODEL"), REPO / "target" / "release" / "nib-mock-model", REPO / "target" / "debug" / "nib-mock-model"):
        if p and Path(p).exists():
            exe = str(p)
            break
    if exe is None:
        sh(["cargo", "build", "-q", "-p", "nib-mock-model"], cwd=REPO)
        exe = str(REPO / "target" / "debug" / "nib-mock-model")
    proc = subprocess.Popen([exe, "--script", str(script), "--log", str(log)], stdout=subprocess.PIPE, text=True)
    url = proc.stdout.readline().strip()
    if not url.startswith("http://127.0.0.1:"):
        proc.kill()
        raise TaskError(f"nib-mock-model did not start (it printed {url!r})")
    return proc, url


# OpenCode takes only a model it knows; the mock answers any.
REPLAY_MODEL = {"claude": "claude-replay", "opencode": "anthropic/claude-sonnet-4-5"}


def replay(tasks, args, root: Path) -> int:
    """Each task's transcripts (`replay/ARM.json` for Claude Code,
    `replay/opencode-ARM.json` for OpenCode) through the real client."""
    failures = 0
    for t, client, arm in ((t, c, a) for t in tasks for c in args.clients for a in args.arms):
        script = t["dir"] / "replay" / (f"{arm}.json" if client == "claude" else f"{client}-{arm}.json")
        if not script.exists():
            continue
        model = REPLAY_MODEL[client]
        with tempfile.TemporaryDirectory(prefix="mock-") as tmp:
            log = Path(tmp) / "requests.jsonl"
            proc, url = mock_model(script, log)
            try:
                rec = one_run(t, arm, client, model, {"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": "sk-replay-offline"}, url)
            finally:
                proc.kill()
            rec["model_requests"] = sum(1 for _ in log.open()) if log.exists() else 0
        out = result_path(root, "replay", client, model, arm, t["id"], 1)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(rec, indent=1) + "\n")
        mark = "ok  " if rec["success"] else "FAIL"
        failures += 0 if rec["success"] else 1
        print(f"{mark}  replay {t['id']:32} {client:8} {arm:8} checker {'passed' if rec['success'] else 'failed'}; "
              f"{rec['tool_calls']} tool calls, {rec['failed_edits']} failed edits, {rec['model_requests']} model requests")
        if not rec["success"]:
            print(rec["check_log"][-2000:])
    return 1 if failures else 0


# ---------------------------------------------------------------- recheck and report


def recheck(tasks, root: Path) -> int:
    by_id = {t["id"]: t for t in tasks}
    changed = 0
    for p in sorted(root.glob("**/*.json")):
        rec = json.loads(p.read_text())
        t = by_id.get(rec.get("task"))
        if t is None:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            tree = prepare(t, Path(tmp) / "tree")
            if rec.get("diff"):
                patch = Path(tmp) / "run.patch"
                patch.write_text(rec["diff"])
                git(tree, "apply", "--whitespace=nowarn", str(patch), check=False)
            ok, log = run_check(t, tree)
        if ok != rec["success"]:
            changed += 1
            print(f"{p.relative_to(root)}: was {'pass' if rec['success'] else 'fail'}, now {'pass' if ok else 'fail'}")
            rec["success"], rec["check_log"] = ok, log[-4000:]
            p.write_text(json.dumps(rec, indent=1) + "\n")
    print(f"rechecked; {changed} verdicts changed")
    return 0


def spread(values):
    values = [v for v in values if v is not None]
    if not values:
        return "–"
    med = statistics.median(values)
    return f"{med:.0f} ({min(values):.0f}–{max(values):.0f})" if len(values) > 1 else f"{med:.0f}"


def report(root: Path) -> int:
    rows = {}
    for p in sorted(root.glob("**/*.json")):
        rec = json.loads(p.read_text())
        mode = p.relative_to(root).parts[0]
        rows.setdefault((mode, rec["client"], rec["model"], rec["task"], rec["arm"]), []).append(rec)
    if not rows:
        print(f"no stored runs under {root}")
        return 0
    print("| mode | client | model | task | arm | runs | success | input tokens | output tokens | tool calls | failed edits | wall s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (mode, client, model, task, arm), recs in sorted(rows.items()):
        ok = sum(r["success"] for r in recs)
        print(f"| {mode} | {client} | {model} | {task} | {arm} | {len(recs)} | {ok}/{len(recs)} | "
              f"{spread([r['input_tokens'] for r in recs])} | {spread([r['output_tokens'] for r in recs])} | "
              f"{spread([r['tool_calls'] for r in recs])} | {spread([r['failed_edits'] for r in recs])} | {spread([r['wall_s'] for r in recs])} |")
    totals = {}
    for (mode, client, model, _, arm), recs in rows.items():
        totals.setdefault((mode, client, model, arm), []).extend(recs)
    print("\n| mode | client | model | arm | runs | success | median input tokens | median tool calls | failed edits | cost per success |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (mode, client, model, arm), recs in sorted(totals.items()):
        ok = sum(r["success"] for r in recs)
        cost = sum(r.get("cost_usd") or 0 for r in recs)
        per = f"${cost / ok:.3f}" if ok and cost else "–"
        print(f"| {mode} | {client} | {model} | {arm} | {len(recs)} | {ok}/{len(recs)} | "
              f"{spread([r['input_tokens'] for r in recs])} | {spread([r['tool_calls'] for r in recs])} | "
              f"{sum(r['failed_edits'] for r in recs)} | {per} |")
    return 0


# ---------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["plan", "validate", "run", "replay", "recheck", "report"])
    ap.add_argument("tasks", nargs="*", help="task ids (default: all)")
    ap.add_argument("--clients", default="claude,opencode")
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--model", default="claude-sonnet-4-5")
    ap.add_argument("--results", default=str(RESULTS))
    ap.add_argument("--live", action="store_true", help="make model calls (needs a key)")
    args = ap.parse_args()
    args.clients = [c for c in args.clients.split(",") if c]
    args.arms = [a for a in args.arms.split(",") if a]
    for c in args.clients:
        if c not in CLIENTS:
            ap.error(f"unknown client {c}; the clients are {', '.join(CLIENTS)}")
    for a in args.arms:
        if a not in ARMS:
            ap.error(f"unknown arm {a}; the arms are {', '.join(ARMS)}")
    root = Path(args.results)
    try:
        tasks = load_tasks(args.tasks)
        if args.mode == "plan":
            plan(tasks, args, root)
            return 0
        if args.mode == "validate":
            return validate(tasks)
        if args.mode == "replay":
            return replay(tasks, args, root)
        if args.mode == "recheck":
            return recheck(tasks, root)
        if args.mode == "report":
            return report(root)
        todo = plan(tasks, args, root)
        keyed = os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("CLAUDE_CODE_OAUTH_TOKEN")
        if not args.live or not keyed:
            print("nothing was run: `run` makes paid model calls only with --live and a key (ANTHROPIC_API_KEY); the plan above is what it would do")
            return 0
        for t, client, arm, n in todo:
            rec = one_run(t, arm, client, args.model, {})
            out = result_path(root, "live", client, args.model, arm, t["id"], n)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(rec, indent=1) + "\n")
            print(f"{'ok  ' if rec['success'] else 'FAIL'}  {t['id']:32} {client:8} {arm:8} run {n}: "
                  f"{rec['input_tokens']} in, {rec['output_tokens']} out, {rec['tool_calls']} calls, {rec['wall_s']}s")
        return 0
    except TaskError as e:
        print(f"run.py: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
