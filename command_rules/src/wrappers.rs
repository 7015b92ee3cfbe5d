//! Programs that run other programs, and where in their words the inner
//! command (or command text) is: `env`, `xargs`, `find -exec`, `timeout`,
//! `nice`, `nohup`, `setsid`, `stdbuf`, `command`, `builtin`, `exec`,
//! `time`, `sudo`, `doas`, `watch`, `flock`, `chroot`, `ionice`, `taskset`,
//! `chrt`, `unbuffer`, `nsenter`, `unshare`, `strace`, `ltrace`,
//! `valgrind`, `busybox`, `su`, `runuser`, `script`, `parallel`, and the
//! shells with `-c`, a script, or their input; `eval`, `source`, `.`,
//! `trap`, `alias`, `hash -p`.
//!
//! Option syntax is followed where it is known; a wrapper given an option
//! this table does not know makes every later literal word a candidate
//! command (fail closed).

use crate::arg::Arg;

/// Where a wrapper's inner command is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Inner {
    /// Not a wrapper.
    None,
    /// The command starts at this word.
    Command(usize),
    /// Several commands: (start, end) word ranges.
    Commands(Vec<(usize, usize)>),
    /// Any literal word from here on may be the command.
    Candidates(usize),
    /// This word is command text to parse (`sh -c TEXT`).
    Text(usize),
    /// The words from here on, joined by spaces, are command text (`eval`).
    JoinedText(usize),
    /// This word names a script to read and parse.
    Script(usize),
    /// The commands come from the program's input.
    Stdin,
    /// `alias` definitions from here on.
    Alias(usize),
    /// A construct that hides what runs.
    Refuse(&'static str),
}

const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh", "rbash",
];

/// Skips options; returns the index of the first operand, or `Err(i)` at
/// an option not in the table.
fn operand(args: &[Arg], from: usize, with_value: &[&str], flags: &[&str]) -> Result<usize, usize> {
    let mut i = from;
    while i < args.len() {
        let Some(a) = args[i].literal() else {
            // An option built at run time: nothing after it is certain.
            if args[i].text().starts_with('-') || args[i].text().starts_with('$') {
                return Err(i);
            }
            return Ok(i);
        };
        if a == "--" {
            return Ok(i + 1);
        }
        if !a.starts_with('-') || a == "-" {
            return Ok(i);
        }
        if let Some((opt, _)) = a.split_once('=')
            && (with_value.contains(&opt) || flags.contains(&opt))
        {
            i += 1;
            continue;
        }
        if with_value.contains(&a) {
            i += 2;
            continue;
        }
        if flags.contains(&a) {
            i += 1;
            continue;
        }
        // Short options run together (-nu, -n5).
        if !a.starts_with("--") && a.len() > 2 {
            let first = &a[..2];
            if with_value.contains(&first) {
                i += 1;
                continue;
            }
            if a[1..]
                .chars()
                .all(|c| flags.contains(&format!("-{c}").as_str()))
            {
                i += 1;
                continue;
            }
        }
        return Err(i);
    }
    Ok(i)
}

fn command_at(r: Result<usize, usize>, len: usize) -> Inner {
    match r {
        Ok(i) if i < len => Inner::Command(i),
        Ok(_) => Inner::None,
        Err(i) => Inner::Candidates(i),
    }
}

/// xargs' options that take a value.
const XARGS_VALUED: &[&str] = &[
    "-a",
    "-d",
    "-E",
    "-I",
    "-L",
    "-n",
    "-P",
    "-s",
    "--arg-file",
    "--delimiter",
    "--max-args",
    "--max-procs",
    "--max-lines",
    "--max-chars",
    "--process-slot-var",
];

/// xargs' options that stand alone.
const XARGS_FLAGS: &[&str] = &[
    "-0",
    "-e",
    "-i",
    "-l",
    "-o",
    "-p",
    "-r",
    "-t",
    "-x",
    "--null",
    "--interactive",
    "--no-run-if-empty",
    "--verbose",
    "--exit",
    "--open-tty",
];

/// Where `program`'s inner command is, given its arguments.
pub fn inner(program: &str, args: &[Arg]) -> Inner {
    let n = args.len();
    let lit = |i: usize| args.get(i).and_then(Arg::literal);
    match program {
        "env" => env_inner(args),
        "xargs" => command_at(operand(args, 0, XARGS_VALUED, XARGS_FLAGS), n),
        "find" => find_inner(args),
        "timeout" => match operand(
            args,
            0,
            &["-s", "-k", "--signal", "--kill-after"],
            &["-v", "--verbose", "--preserve-status", "--foreground"],
        ) {
            // The first operand is the duration.
            Ok(i) if i + 1 < n => Inner::Command(i + 1),
            Ok(_) => Inner::None,
            Err(i) => Inner::Candidates(i),
        },
        "nice" => command_at(operand(args, 0, &["-n", "--adjustment"], &[]), n),
        "nohup" | "unbuffer" | "builtin" => command_at(operand(args, 0, &[], &[]), n),
        "setsid" => command_at(
            operand(
                args,
                0,
                &[],
                &["-c", "-f", "-w", "--ctty", "--fork", "--wait"],
            ),
            n,
        ),
        "stdbuf" => command_at(
            operand(
                args,
                0,
                &["-i", "-o", "-e", "--input", "--output", "--error"],
                &[],
            ),
            n,
        ),
        "command" => command_inner(args),
        "exec" => command_at(operand(args, 0, &["-a"], &["-c", "-l"]), n),
        "time" => command_at(
            operand(
                args,
                0,
                &["-f", "-o", "--format", "--output"],
                &[
                    "-p",
                    "-a",
                    "-v",
                    "-q",
                    "--append",
                    "--verbose",
                    "--portability",
                    "--quiet",
                ],
            ),
            n,
        ),
        "sudo" => sudo_inner(args),
        "doas" => command_at(operand(args, 0, &["-u", "-C"], &["-n", "-s"]), n),
        "watch" => watch_inner(args),
        "flock" => flock_inner(args),
        "chroot" => match operand(args, 0, &["--userspec", "--groups"], &["--skip-chdir"]) {
            Ok(i) if i + 1 < n => Inner::Command(i + 1),
            Ok(_) => Inner::None,
            Err(i) => Inner::Candidates(i),
        },
        "ionice" => command_at(
            operand(
                args,
                0,
                &["-c", "-n", "--class", "--classdata"],
                &["-t", "--ignore"],
            ),
            n,
        ),
        "taskset" => taskset_inner(args),
        "chrt" => match operand(
            args,
            0,
            &["-T", "-P", "-D"],
            &["-a", "-b", "-d", "-f", "-i", "-o", "-r", "-R", "-v", "-m"],
        ) {
            Ok(i) if i + 1 < n => Inner::Command(i + 1),
            Ok(_) => Inner::None,
            Err(i) => Inner::Candidates(i),
        },
        "nsenter" | "unshare" | "strace" | "ltrace" | "valgrind" | "parallel" | "systemd-run"
        | "firejail" | "proot" | "fakeroot" | "catchsegv" | "gdb" | "xvfb-run"
        | "dbus-run-session" => Inner::Candidates(0),
        "busybox" => command_at(operand(args, 0, &[], &[]), n),
        "su" | "runuser" => match args
            .iter()
            .position(|a| matches!(a.literal(), Some("-c" | "--command")))
        {
            Some(k) => Inner::Text(k + 1),
            None => Inner::Candidates(0),
        },
        "script" => match args
            .iter()
            .position(|a| matches!(a.literal(), Some("-c" | "--command")))
        {
            Some(k) => Inner::Text(k + 1),
            None => Inner::None,
        },
        "eval" => {
            if n == 0 {
                Inner::None
            } else if args.iter().all(|a| a.literal().is_some()) {
                Inner::JoinedText(0)
            } else {
                Inner::Refuse("eval of text built at run time")
            }
        }
        "source" | "." => {
            if n == 0 {
                Inner::None
            } else {
                Inner::Script(0)
            }
        }
        "trap" => {
            if n >= 2 && lit(0).is_some_and(|a| !a.starts_with('-')) {
                Inner::Text(0)
            } else if n >= 2 && args[0].literal().is_none() {
                Inner::Refuse("a trap running text built at run time")
            } else {
                Inner::None
            }
        }
        "alias" => Inner::Alias(0),
        "hash" => hash_inner(args),
        "enable" => {
            if args.iter().any(|a| matches!(a.literal(), Some("-f"))) {
                Inner::Refuse("enable -f loads a builtin from a file")
            } else {
                Inner::None
            }
        }
        p if SHELLS.contains(&p) => shell(args),
        _ => Inner::None,
    }
}

/// Where `env` keeps its inner command.
fn env_inner(args: &[Arg]) -> Inner {
    let n = args.len();
    let lit = |i: usize| args.get(i).and_then(Arg::literal);
    let mut i = 0;
    while i < n {
        match lit(i) {
            Some("-S") | Some("--split-string") => return Inner::Text(i + 1),
            Some(a) if a.starts_with("--split-string=") || (a.starts_with("-S") && a.len() > 2) => {
                return Inner::Refuse("env -S with its text joined to the option");
            }
            Some("-u") | Some("--unset") | Some("-C") | Some("--chdir") => i += 2,
            Some("-i")
            | Some("--ignore-environment")
            | Some("-0")
            | Some("--null")
            | Some("-v")
            | Some("--debug")
            | Some("-") => i += 1,
            Some("--") => i += 1,
            Some(a) if a.starts_with("--unset=") || a.starts_with("--chdir=") => i += 1,
            Some(a) if a.contains('=') && !a.starts_with('-') => i += 1,
            Some(a) if a.starts_with('-') => return Inner::Candidates(i),
            Some(_) => return Inner::Command(i),
            None => return Inner::Candidates(i),
        }
    }
    Inner::None
}

/// Where `find` keeps its inner command.
fn find_inner(args: &[Arg]) -> Inner {
    let n = args.len();
    let lit = |i: usize| args.get(i).and_then(Arg::literal);
    let mut cmds = Vec::new();
    let mut i = 0;
    while i < n {
        if matches!(lit(i), Some("-exec" | "-execdir" | "-ok" | "-okdir")) {
            let start = i + 1;
            let mut end = start;
            while end < n && !matches!(lit(end), Some(";" | "+")) {
                end += 1;
            }
            cmds.push((start, end));
            i = end;
        }
        i += 1;
    }
    if cmds.is_empty() {
        Inner::None
    } else {
        Inner::Commands(cmds)
    }
}

/// Where `command` keeps its inner command.
fn command_inner(args: &[Arg]) -> Inner {
    let n = args.len();
    if args
        .iter()
        .any(|a| matches!(a.literal(), Some("-v" | "-V")))
    {
        Inner::None
    } else {
        command_at(operand(args, 0, &[], &["-p"]), n)
    }
}

/// Where `sudo` keeps its inner command.
fn sudo_inner(args: &[Arg]) -> Inner {
    let n = args.len();
    if args.iter().any(|a| {
        matches!(
            a.literal(),
            Some("-e" | "--edit" | "-l" | "--list" | "-v" | "--validate" | "-k" | "-K")
        )
    }) && n < 2
    {
        return Inner::None;
    }
    command_at(
        operand(
            args,
            0,
            &[
                "-u",
                "-g",
                "-C",
                "-D",
                "-h",
                "-p",
                "-r",
                "-t",
                "-U",
                "-T",
                "-R",
                "--user",
                "--group",
                "--close-from",
                "--chdir",
                "--host",
                "--prompt",
                "--role",
                "--type",
                "--other-user",
                "--command-timeout",
                "--chroot",
            ],
            &[
                "-A",
                "-b",
                "-E",
                "-H",
                "-i",
                "-n",
                "-P",
                "-S",
                "-s",
                "-B",
                "-N",
                "--askpass",
                "--background",
                "--preserve-env",
                "--set-home",
                "--login",
                "--non-interactive",
                "--preserve-groups",
                "--stdin",
                "--shell",
                "--bell",
                "--no-update",
            ],
        ),
        n,
    )
}

/// Where `watch` keeps its inner command.
fn watch_inner(args: &[Arg]) -> Inner {
    let n = args.len();
    let r = operand(
        args,
        0,
        &["-n", "-q", "--interval", "--equexit"],
        &[
            "-b",
            "-c",
            "-d",
            "-e",
            "-f",
            "-g",
            "-p",
            "-r",
            "-t",
            "-w",
            "-x",
            "--beep",
            "--color",
            "--no-color",
            "--differences",
            "--errexit",
            "--follow",
            "--chgexit",
            "--precise",
            "--no-rerun",
            "--no-title",
            "--no-wrap",
            "--exec",
            "--no-linewrap",
        ],
    );
    let exec = args
        .iter()
        .any(|a| matches!(a.literal(), Some("-x" | "--exec")));
    match r {
        Ok(i) if i < n && exec => Inner::Command(i),
        Ok(i) if i < n => Inner::JoinedText(i),
        Ok(_) => Inner::None,
        Err(i) => Inner::Candidates(i),
    }
}

/// Where `flock` keeps its inner command.
fn flock_inner(args: &[Arg]) -> Inner {
    let n = args.len();
    if let Some(k) = args
        .iter()
        .position(|a| matches!(a.literal(), Some("-c" | "--command")))
    {
        return Inner::Text(k + 1);
    }
    match operand(
        args,
        0,
        &["-w", "-E", "--timeout", "--conflict-exit-code"],
        &[
            "-s",
            "-x",
            "-u",
            "-n",
            "-o",
            "-F",
            "--shared",
            "--exclusive",
            "--unlock",
            "--nonblock",
            "--close",
            "--no-fork",
            "--verbose",
        ],
    ) {
        // The first operand is the lock file.
        Ok(i) if i + 1 < n => Inner::Command(i + 1),
        Ok(_) => Inner::None,
        Err(i) => Inner::Candidates(i),
    }
}

/// Where `taskset` keeps its inner command.
fn taskset_inner(args: &[Arg]) -> Inner {
    let n = args.len();
    if args
        .iter()
        .any(|a| matches!(a.literal(), Some("-p" | "--pid")))
    {
        return Inner::None;
    }
    match operand(args, 0, &[], &["-a", "-c", "--all-tasks", "--cpu-list"]) {
        // The first operand is the mask or list.
        Ok(i) if i + 1 < n => Inner::Command(i + 1),
        Ok(_) => Inner::None,
        Err(i) => Inner::Candidates(i),
    }
}

/// Where `hash` keeps its inner command.
fn hash_inner(args: &[Arg]) -> Inner {
    if args.iter().any(|a| {
        a.literal()
            .is_some_and(|t| t.starts_with("-p") || t.starts_with("-d") && t.contains('p'))
    }) {
        Inner::Refuse("hash -p maps a name to another program")
    } else {
        Inner::None
    }
}

/// `sh -c TEXT`, `sh SCRIPT`, or `sh` reading its input.
fn shell(args: &[Arg]) -> Inner {
    let mut i = 0;
    let mut text_next = false;
    while i < args.len() {
        let Some(a) = args[i].literal() else {
            return Inner::Refuse("a shell whose options or script are built at run time");
        };
        if text_next && !a.starts_with('-') {
            return Inner::Text(i);
        }
        match a {
            "--" => {
                i += 1;
                break;
            }
            "-o" | "+o" | "-O" | "+O" | "--rcfile" | "--init-file" => i += 2,
            "-s" => return Inner::Stdin,
            _ if a.starts_with("--") => i += 1,
            _ if (a.starts_with('-') || a.starts_with('+')) && a.len() > 1 => {
                if a[1..].contains('c') {
                    text_next = true;
                }
                if a[1..].contains('s') {
                    return Inner::Stdin;
                }
                i += 1;
            }
            _ => return Inner::Script(i),
        }
    }
    if text_next {
        return Inner::Refuse("a shell with -c and no command text");
    }
    if i < args.len() {
        return Inner::Script(i);
    }
    Inner::Stdin
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lits(words: &[&str]) -> Vec<Arg> {
        words.iter().map(|w| Arg::Literal(w.to_string())).collect()
    }

    #[test]
    fn inner_commands_are_found_past_options() {
        assert_eq!(
            inner("env", &lits(&["-u", "X", "A=1", "cmd"])),
            Inner::Command(3)
        );
        assert_eq!(
            inner("timeout", &lits(&["-k", "1", "5", "cmd"])),
            Inner::Command(3)
        );
        assert_eq!(inner("nice", &lits(&["-n5", "cmd"])), Inner::Command(1));
        assert_eq!(
            inner("sudo", &lits(&["-Eu", "root", "cmd"])),
            Inner::Candidates(0)
        );
        assert_eq!(
            inner("sudo", &lits(&["-E", "-u", "root", "cmd"])),
            Inner::Command(3)
        );
        assert_eq!(
            inner("xargs", &lits(&["-0", "-n", "1", "cmd"])),
            Inner::Command(3)
        );
        assert_eq!(
            inner("nice", &lits(&["--weird", "cmd"])),
            Inner::Candidates(0)
        );
        assert_eq!(inner("command", &lits(&["-v", "cmd"])), Inner::None);
        assert_eq!(inner("bash", &lits(&["-lc", "cmd"])), Inner::Text(1));
        assert_eq!(inner("bash", &lits(&["-x", "s.sh"])), Inner::Script(1));
        assert_eq!(inner("bash", &lits(&[])), Inner::Stdin);
        assert_eq!(
            inner("watch", &lits(&["-n", "1", "a", "b"])),
            Inner::JoinedText(2)
        );
        assert_eq!(
            inner("find", &lits(&[".", "-exec", "a", ";", "-ok", "b", "+"])),
            Inner::Commands(vec![(2, 3), (5, 6)])
        );
    }
}
