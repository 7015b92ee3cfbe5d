#!/usr/bin/env python3
"""Measures the rule for automatic names (how many sightings, how long a
folder must be) on real repository histories.

No agent session is recorded anywhere we can use, so each commit of a real
repository stands for one task an agent did, and five consecutive commits
for one session (names are reset between sessions; nib keeping names used
in two sessions would only add to what is saved). In a task the agent sees:

- a grep for a word the commit added (`git grep -l` at the commit, up to
  20 files), each file's path once;
- a read and an edit of each file the commit changed, its path once each;
- `git status`, each changed folder once (nib groups files by folder).

Each path shown is a sighting of its folder, written as nib writes it: JVM
source roots' package folders already carry their names (the rule nib
uses: the single-folder chain below `src/<set>/java|kotlin`, 24 characters
or more). For each rule (S sightings, C characters) the script replays the
sessions as nib would: a folder shown with C or more characters gets a name
at its S-th sighting, announced once in a note (whose characters count
against the rule), and every later path in it is shortened. It prints the
characters saved per session, net of the notes, for each rule.

usage: names_rule.py REPO [REPO...] [--commits N]
"""

import re
import subprocess
import sys
from collections import defaultdict

SESSION = 5
GREP_FILES = 20
NOTE = "names: ~{name} now stands for {folder} (shown {s} times; NIB_AUTO_NAMES=0 turns automatic names off)"
# The same note once a session has had one: the name and its folder only.
SHORT_NOTE = "names: ~{name} = {folder}"
SIGHTINGS = [2, 3, 4, 6, 8, 12, 16]
MIN_CHARS = [12, 16, 20, 24, 30, "pays"]
# "pays": no fixed length; from the s-th sighting a folder gets its name
# once the name would have saved, over the sightings so far, what its note
# costs.
JVM_PREFIX = 24
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{5,}")


def git(repo, *args):
    return subprocess.run(
        ["git", "-C", repo, *args], capture_output=True, text=True, errors="replace"
    ).stdout


def jvm_names(repo):
    """The names nib gives JVM source roots' package folders, at HEAD."""
    subdirs = defaultdict(set)
    files_in = defaultdict(int)
    for f in git(repo, "ls-tree", "-r", "--name-only", "HEAD").splitlines():
        parts = f.split("/")
        files_in["/".join(parts[:-1])] += 1
        for i in range(1, len(parts) - 1):
            subdirs["/".join(parts[:i])].add(parts[i])
    names = {}
    roots = sorted(d for d in subdirs if re.fullmatch(r"(.*/)?src/[^/]+/(java|kotlin)", d))
    for root in roots:
        # Down the folders that each hold exactly one folder and no file.
        at = root
        while len(subdirs.get(at, ())) == 1 and files_in.get(at, 0) == 0:
            at = at + "/" + next(iter(subdirs[at]))
        if len(at) - len(root) - 1 < JVM_PREFIX:
            continue
        last = at.rsplit("/", 1)[-1]
        for name in (last, root.split("/")[-2] + "-" + last):
            if name not in names:
                names[name] = at
                break
    return names


def shown(folder, names):
    """`folder` as nib writes it: the longest named prefix replaced."""
    best = None
    for name, d in names.items():
        if folder == d or folder.startswith(d + "/"):
            if best is None or len(d) > len(names[best]):
                best = name
    if best is None:
        return folder
    return "~" + best + folder[len(names[best]):]


def tasks(repo, commits):
    """For each commit (oldest first): the folders of the paths shown."""
    out = []
    log = git(repo, "log", f"-{commits}", "--no-merges", "--format=%H").split()
    for sha in reversed(log):
        changed = [
            f for f in git(repo, "show", "--format=", "--name-only", "--diff-filter=AMR", sha).splitlines()
            if f
        ]
        if not changed:
            continue
        diff = git(repo, "show", "--format=", "-U0", sha)
        word = None
        for line in diff.splitlines():
            if line.startswith("+") and not line.startswith("+++"):
                m = WORD.search(line)
                if m:
                    word = m.group(0)
                    break
        grepped = []
        if word:
            grepped = git(repo, "grep", "-l", "-F", word, sha).splitlines()[:GREP_FILES]
            grepped = [g.split(":", 1)[1] if ":" in g else g for g in grepped]
        folder = lambda p: p.rsplit("/", 1)[0] if "/" in p else ""
        seen = [folder(p) for p in grepped]
        seen += [folder(p) for p in changed] * 2  # read, edit
        seen += sorted({folder(p) for p in changed})  # git status, by folder
        out.append([f for f in seen if f])
    return out


def replay(sessions, base, s, c, short):
    """Characters saved by rule (s, c), net of its notes; notes made. With
    `short`, a session's notes after its first are SHORT_NOTE."""
    saved = 0
    notes = 0
    for session in sessions:
        first = True
        names = dict(base)
        count = defaultdict(int)
        for task in session:
            for f in task:
                now = shown(f, names)
                saved += len(shown(f, base)) - len(now)
                if c != "pays" and len(now) < c:
                    continue
                count[f] += 1
                # nib tries once, at the s-th sighting; "pays" from then on
                # until the name pays.
                due = count[f] >= s if c == "pays" else count[f] == s
                if not due or f in names.values():
                    continue
                parts = f.split("/")
                for name in (parts[-1], "-".join(parts[-2:])):
                    clash = any(n.startswith(name) or name.startswith(n) for n in names)
                    if clash or not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", name):
                        continue
                    note = SHORT_NOTE if short and not first else NOTE
                    cost = len(note.format(name=name, folder=now, s=s)) + 1
                    # "pays": what the name would have saved on the
                    # sightings so far must cover its note.
                    if c == "pays" and count[f] * (len(now) - len(name) - 1) < cost:
                        break
                    names[name] = f
                    saved -= cost
                    notes += 1
                    first = False
                    break
    return saved, notes


def main():
    args = sys.argv[1:]
    commits = 500
    if "--commits" in args:
        i = args.index("--commits")
        commits = int(args[i + 1])
        del args[i : i + 2]
    if not args:
        print(__doc__)
        sys.exit(2)
    results = {False: defaultdict(int), True: defaultdict(int)}
    for repo in args:
        base = jvm_names(repo)
        all_tasks = tasks(repo, commits)
        sessions = [all_tasks[i : i + SESSION] for i in range(0, len(all_tasks), SESSION)]
        path_chars = sum(len(shown(f, base)) for t in all_tasks for f in t)
        print(f"{repo}: {len(all_tasks)} tasks in {len(sessions)} sessions, "
              f"{path_chars} characters of folders shown; JVM names: {sorted(base) or 'none'}")
        for short in (False, True):
            print("  characters a session saved net of the notes (notes made), by sightings × "
                  + ("min characters; later notes short" if short else "min characters"))
            print("      " + "".join(f"{c:>14}" for c in MIN_CHARS))
            for s in SIGHTINGS:
                row = []
                for c in MIN_CHARS:
                    saved, notes = replay(sessions, base, s, c, short)
                    results[short][(s, c)] += saved / max(len(sessions), 1)
                    row.append(f"{saved / max(len(sessions), 1):>7.0f} ({notes:>4})")
                print(f"  {s:>3} " + "".join(f"{r:>14}" for r in row))
    for short in (False, True):
        r = results[short]
        best = max(r, key=r.get)
        print(f"{'later notes short' if short else 'every note whole'}: best {best[0]} sightings, "
              f"{best[1]} characters ({r[best]:.0f} a session over the repositories); "
              f"8 and 20: {r[(8, 20)]:.0f}")


if __name__ == "__main__":
    main()
