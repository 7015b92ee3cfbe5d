//! nibash against bash, side by side: each script runs as a nibash call and
//! as `bash --norc --noprofile -c SCRIPT`, each in a fresh copy of the same
//! project, and the output (stdout and stderr together), the exit status and
//! the files left in the project must be the same. nib's closing lines
//! (`[exit N]`, `[changed: …]`, trash notes) are its own and are set aside
//! first; docs/nibash.md's "Where nibash differs from bash" lists what is different on
//! purpose, and no script here depends on it.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::json;

use crate::common::*;

/// (what it checks, the script).
const SCRIPTS: &[(&str, &str)] = &[
    ("EXIT trap at the end", "trap 'echo bye' EXIT; echo hi"),
    (
        "EXIT trap after exit",
        "trap 'echo \"bye $?\"' EXIT; echo hi; exit 3; echo no",
    ),
    (
        "exit inside the EXIT trap sets the status",
        "trap 'echo bye; exit 7' EXIT; exit 3",
    ),
    (
        "EXIT trap after set -e",
        "set -e; trap 'echo \"trapped $?\"' EXIT; false; echo no",
    ),
    ("ERR trap", "trap 'echo \"err $?\"' ERR; false; echo after"),
    (
        "set -euo pipefail with a cleanup trap",
        "set -euo pipefail\ncleanup() { echo \"cleanup $?\"; }\ntrap cleanup EXIT\necho start\nfalse | true\necho unreachable",
    ),
    (
        "mktemp and a cleanup trap leave nothing behind",
        "d=$(mktemp -d)\ntrap 'rm -rf \"$d\"' EXIT\necho data > \"$d/f\"\ntest -f \"$d/f\" && echo made\necho kept > kept.txt",
    ),
    (
        "LINENO counts the lines of the call",
        "echo $LINENO\n\necho $LINENO\nf() {\n  echo $LINENO\n}\nf",
    ),
    ("$0 is bash", "echo $0"),
    ("$0 -c re-runs bash", "$0 -c 'echo inner $0'"),
    (
        "$- shows c",
        "case $- in *c*) echo has-c;; *) echo no-c;; esac",
    ),
    (
        "$$ is an ordinary, signalable process",
        "[ \"$$\" -gt 1 ] && kill -0 $$ && echo alive",
    ),
    (
        "kill -s USR1 $$ ends the shell",
        "kill -s USR1 $$; echo after",
    ),
    (
        "kill $$ runs the EXIT trap",
        "trap 'echo \"bye $?\"' EXIT; kill $$; echo no",
    ),
    (
        "a signal from another process runs the EXIT trap",
        "trap 'echo \"bye $?\"' EXIT; sh -c 'kill -HUP $PPID'; sleep 1; echo no",
    ),
    (
        "kill -0 of a live process",
        "sleep 1 & kill -0 $! && echo alive; wait",
    ),
    (
        "command -v and type name the system program",
        "command -v cat; command -v grep; type -t cat; type -t cd; type cat; command -v cd",
    ),
    (
        "enable lists shell builtins only",
        "enable | grep -c -x -e 'enable cat' -e 'enable grep' -e 'enable rm'; enable -a | grep -x 'enable cd'",
    ),
    (
        "a path from command -v runs",
        "p=$(command -v wc); printf 'a\\nb\\n' | \"$p\" -l",
    ),
    (
        "wait $! keeps the status",
        "f() { return 3; }; f & wait $!; echo $?",
    ),
    (
        "a background program's status",
        "sh -c 'exit 5' & wait $!; echo $?",
    ),
    (
        "process substitution output is drained",
        "cp <(echo hi) >(cat)",
    ),
    (
        "output written after the line ends",
        "(sleep 0.2; echo late) & wait",
    ),
    (
        "getopts loop",
        "set -- -a -b val rest1 rest2\nwhile getopts ab: o; do echo \"opt $o ${OPTARG:-}\"; done\nshift $((OPTIND-1))\necho \"rest $*\"",
    ),
    (
        "here-document",
        "tr a-z A-Z <<EOF\nhello $((1+2))\n  indented\nEOF",
    ),
    (
        "quoted here-document",
        "cat <<'EOF' | cat\n$HOME stays\nEOF",
    ),
    (
        "arrays",
        "a=(one two three); echo ${#a[@]} ${a[1]}; a+=(four); printf '%s,' \"${a[@]}\"; echo; unset 'a[0]'; echo \"${a[@]}\"",
    ),
    (
        "associative arrays",
        "declare -A m=([b]=2 [a]=1); for k in \"${!m[@]}\"; do echo \"$k=${m[$k]}\"; done | sort",
    ),
    (
        "read -r loop",
        "printf 'a b\\nc\\\\d e f\\n' | while read -r x y; do echo \"[$x][$y]\"; done",
    ),
    (
        "read into variables in the last stage",
        "echo 'one two' | { read -r a b; echo \"$b $a\"; }",
    ),
    (
        "subshell exit codes",
        "(exit 3); echo $?; ( false ) || echo caught; (exit 4)",
    ),
    ("pipeline status", "false | true; echo ${PIPESTATUS[@]}"),
    (
        "parameter expansion",
        "s=archive.tar.gz; echo ${s%%.*} ${s#*.} ${s%.gz} ${s^^} ${#s}; u=; echo ${u:-dflt} ${u:=set} $u",
    ),
    (
        "arithmetic and loops",
        "i=0; while ((i < 5)); do ((i++)); done; echo $i $((2**10)) $((7 % 3))",
    ),
    (
        "[[ ]] matching",
        "s=v1.2.3; [[ $s =~ ^v([0-9]+)\\. ]] && echo major ${BASH_REMATCH[1]}; [[ abc == a* ]] && echo glob",
    ),
    (
        "functions, locals and return",
        "f() { local x=$1; echo \"in $x\"; return $(( $1 + 1 )); }; f 4; echo $?; echo \"x=${x:-unset}\"",
    ),
    (
        "case and for",
        "for w in apple banana cherry; do case $w in a*) echo A;; b*) echo B;; *) echo other;; esac; done",
    ),
    ("printf -v", "printf -v out '%05d' 42; echo $out"),
    (
        "files written, moved and removed",
        "echo data > out.txt; mkdir -p d/e; touch d/e/f; mv data.txt d/moved.txt; rm -f gone.txt; echo done",
    ),
    (
        "a failed command's status",
        "ls /nonexistent-nib-dir >/dev/null 2>&1; echo $?",
    ),
    (
        "set -e stops at a failure",
        "set -e; echo one; false; echo two",
    ),
    (
        "set -e is off in a condition",
        "set -e; if false; then echo no; fi; false || echo handled; echo end",
    ),
    ("exit status of the last command", "true; false"),
    (
        "nib's plumbing is not among the commands",
        "compgen -A command | grep -c __nib; compgen -A function | grep -c __nib; enable | grep -c __nib; true",
    ),
    (
        "nib's stand-ins for programs are not builtins",
        "compgen -b | grep -c -x -e cat -e grep -e sed -e head -e ls; compgen -A builtin ec",
    ),
    (
        "command -v -p takes the standard PATH",
        "command -v -p cat; command -p cat /dev/null && echo ran",
    ),
    (
        "command -p runs nib's stand-ins from the standard PATH whatever PATH holds",
        "PATH=/nowhere; command -p cat data.txt; printf 'a\\nb\\n' | command -p wc -l; command -pV ls; command -p -- ls -d .; command -p grep -c a data.txt; echo \"$PATH\"",
    ),
    (
        "type says a hash -p path is hashed",
        "hash -p /bin/ls ls; type ls; type -t ls",
    ),
    (
        "$_ after a command whose stderr is discarded",
        "value=world\nbuiltin missing=$value 2>/dev/null\nprintf 'status=%s last=<%s>\\n' \"$?\" \"$_\"\nls nothing-here 2>/dev/null\necho \"[$_]\"",
    ),
];

/// The project each run starts from.
fn seed(dir: &Path) {
    std::fs::write(dir.join("data.txt"), "alpha\nbeta\n").unwrap();
    std::fs::write(dir.join("gone.txt"), "to be removed\n").unwrap();
}

/// Every file and folder under `dir`, with file contents.
fn files(dir: &Path) -> BTreeMap<String, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(dir).unwrap().display().to_string();
            if e.file_type().unwrap().is_dir() {
                out.insert(rel, None);
                todo.push(p);
            } else {
                out.insert(rel, Some(std::fs::read(&p).unwrap_or_default()));
            }
        }
    }
    out
}

/// bash's output (stdout and stderr in one pipe, read to its end), status.
fn run_bash(dir: &Path, script: &str) -> (String, i32) {
    let (mut reader, writer) = std::io::pipe().unwrap();
    let mut child = std::process::Command::new("bash")
        .args(["--norc", "--noprofile", "-c", script])
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .stdout(writer.try_clone().unwrap())
        .stderr(writer)
        .spawn()
        .unwrap();
    let mut out = String::new();
    use std::io::Read;
    reader.read_to_string(&mut out).unwrap();
    let status = child.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    let code = status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
    (out, code)
}

/// nib's answer without its own closing lines, and the status it reports.
fn split_answer(text: &str) -> (String, i32) {
    let mut code = 0;
    let mut out = String::new();
    for line in text.lines() {
        let closing = line.starts_with('[') && line.ends_with(']');
        if closing && let Some(rest) = line.strip_prefix("[exit ") {
            let n: String = rest.chars().take_while(char::is_ascii_digit).collect();
            code = n.parse().unwrap_or(-1);
            continue;
        }
        if closing
            && (line.starts_with("[changed: ")
                || line.starts_with("[moved to the trash: ")
                || line.contains(", but an earlier pipeline stage failed"))
        {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    (out, code)
}

#[tokio::test]
async fn nibash_behaves_like_bash_on_these_scripts() {
    let mut differences = Vec::new();
    for (what, script) in SCRIPTS {
        let bash_dir = project();
        let nib_dir = project();
        seed(bash_dir.path());
        seed(nib_dir.path());
        let (bash_out, bash_code) = run_bash(bash_dir.path(), script);
        let nib = start(Era::Handshake, nib_dir.path()).await;
        let (text, _) = nib.call("nibash", json!({ "command": script })).await;
        nib.stop().await;
        let (nib_out, nib_code) = split_answer(&text);
        let bash_out = bash_out.replace(&bash_dir.path().display().to_string(), "<dir>");
        let nib_out = nib_out.replace(&nib_dir.path().display().to_string(), "<dir>");
        if nib_out != bash_out || nib_code != bash_code {
            differences.push(format!(
                "{what}: {script:?}\n  bash ({bash_code}): {bash_out:?}\n  nib  ({nib_code}): {nib_out:?}\n  nib's whole answer: {text:?}"
            ));
        }
        let (bash_files, nib_files) = (files(bash_dir.path()), files(nib_dir.path()));
        if bash_files != nib_files {
            differences.push(format!(
                "{what}: files differ\n  bash: {:?}\n  nib:  {:?}",
                bash_files.keys().collect::<Vec<_>>(),
                nib_files.keys().collect::<Vec<_>>()
            ));
        }
    }
    assert!(
        differences.is_empty(),
        "{} of {} scripts differ from bash:\n{}",
        differences.len(),
        SCRIPTS.len(),
        differences.join("\n")
    );
}
