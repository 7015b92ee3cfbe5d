//! The confined side: what runs in the spawned process before the program.
//!
//! `ENTRY __nib-confine POLICY_JSON PRIVATE_TMP [--output] -- PROGRAM ARGS…`
//! (`--output`: stdout and stderr are taken from [`OUTPUT_FD`] first): outside
//! bubblewrap, as PID 1 of the namespace the broker started it in, fork (PID
//! 1 reaps and passes the program's exit status on; the program is PID 2);
//! where the broker could not make the namespace, make one and fork twice
//! (the first parent waits, its child is PID 1); then,
//! in the process that will become the program, die
//! with the parent, set the rlimits, and when the policy confines: no new
//! privileges, Landlock, seccomp; when execs are supervised (in every mode),
//! the exec filter last. A confining policy runs nothing unless seccomp is
//! in force, and Landlock too outside bubblewrap (`launch.rs`).

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::launch::{self, Launch, Namespace, REFUSED};
use crate::{Policy, bridge, bwrap};

pub use crate::launch::ENTRY_ARG;

/// The entry's argument (before `--`) that says the program's stdout and
/// stderr are at [`OUTPUT_FD`]. Under bubblewrap the output pipe is handed
/// over this way, not as bubblewrap's own stdio: bubblewrap's monitor and
/// init close every other fd, so the pipe's end is the program's end, not
/// bubblewrap's (which came over a millisecond later).
pub const OUTPUT_ARG: &str = "--output";

/// Where the broker puts the output pipe for an entry given [`OUTPUT_ARG`].
pub const OUTPUT_FD: i32 = 5;

/// Makes [`OUTPUT_FD`] the process's stdout and stderr.
fn take_output() {
    // SAFETY: dup2 and close take plain integers; the broker put the output
    // pipe at OUTPUT_FD for this process and nothing else here owns it.
    unsafe {
        if libc::dup2(OUTPUT_FD, 1) < 0 || libc::dup2(OUTPUT_FD, 2) < 0 {
            die("cannot take the output pipe", REFUSED);
        }
        libc::close(OUTPUT_FD);
    }
}

fn die(msg: &str, code: i32) -> ! {
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!("nib sandbox: {msg}\n").as_bytes(),
    );
    std::process::exit(code)
}

/// The file name of the small confining entry installed beside the main binary.
pub const ENTRY_BINARY: &str = "nib-confine";

/// The confining entry to use for a main binary at `exe`: the small
/// [`ENTRY_BINARY`] beside it when that is an executable file (it starts
/// faster: fewer pages to map, relocate and copy on fork), else `exe`
/// itself, whose `main` must then call [`entry_main`] for [`ENTRY_ARG`].
pub fn entry_beside(exe: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let small = exe.with_file_name(ENTRY_BINARY);
    match std::fs::metadata(&small) {
        Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => small,
        _ => exe.to_path_buf(),
    }
}

/// Whether `entry` may start confined processes for `roots`: the file (its
/// links followed) lies outside every root and in a folder programs cannot
/// write (`bwrap.rs`'s `untrusted_folder`). nib inside the project (an
/// npm or pip install there) would let a program replace the entry that
/// sets up the next start's confinement; such a start is refused.
pub fn trusted_entry(entry: &Path, roots: &[PathBuf]) -> Result<(), String> {
    let real = std::fs::canonicalize(entry).map_err(|e| {
        format!(
            "nib's confining entry {} cannot be found: {e}",
            entry.display()
        )
    })?;
    let why = match real.parent() {
        Some(dir) => bwrap::untrusted_folder(dir, roots),
        None => Some("it has no folder".into()),
    };
    match why {
        None => Ok(()),
        Some(why) => Err(format!(
            "nib's confining entry {} is in a folder programs could change ({why}): \
             a program could replace it and run unconfined at the next start, so no program is started. \
             Install nib outside the project (npm -g, cargo install, a release archive) and start that one",
            real.display()
        )),
    }
}

/// Runs the confining entry; `args` are the arguments after [`ENTRY_ARG`].
pub fn entry_main(args: &[OsString]) -> ! {
    if args.first().is_some_and(|a| a == launch::REAP_ARG) {
        launch::reap_program();
    }
    let (Some(policy_json), Some(tmp)) = (args.first(), args.get(1)) else {
        die("confining entry without policy", REFUSED);
    };
    let mut at = 2;
    if args.get(at).is_some_and(|a| a == OUTPUT_ARG) {
        take_output();
        at += 1;
    }
    if args.get(at).is_none_or(|a| a != "--") || args.len() < at + 2 {
        die("confining entry without a program", REFUSED);
    }
    let policy: Policy = match serde_json::from_slice(policy_json.as_bytes()) {
        Ok(p) => p,
        Err(e) => die(&format!("bad policy: {e}"), REFUSED),
    };
    let in_bwrap_early = std::env::var_os(bwrap::IN_BWRAP).is_some();
    // Inside bubblewrap, /tmp is its private tmpfs: the confined process's temp folder,
    // writable under Landlock too. Outside, the broker made a private folder.
    let private_tmp = if tmp.is_empty() && in_bwrap_early {
        Some(PathBuf::from("/tmp"))
    } else {
        (!tmp.is_empty()).then(|| PathBuf::from(tmp))
    };
    let program = &args[at + 1..];
    let in_bwrap = in_bwrap_early;
    if in_bwrap
        && let Some(route) = policy
            .proxy
            .as_ref()
            .filter(|_| policy.confine && !policy.network)
        && let Err(e) = bridge::start(route)
    {
        die(&e, REFUSED);
    }
    let mut env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    if let Some(t) = &private_tmp {
        env.push(("TMPDIR".into(), t.clone().into_os_string()));
    }
    let namespace = if in_bwrap {
        Namespace::Bubblewrap
    } else {
        Namespace::Own
    };
    let launch = match Launch::prepare(
        &policy,
        namespace,
        private_tmp.as_ref(),
        program,
        &launch::merge_env(env),
        None,
    ) {
        Ok(l) => l,
        Err(e) => die(&e, REFUSED),
    };
    let failure = launch.run();
    failure.report(launch.program());
    std::process::exit(failure.status())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_small_entry_is_used_only_when_it_is_an_executable_file_beside_the_binary() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("nib");
        std::fs::write(&exe, b"").unwrap();
        // Missing: nib itself.
        assert_eq!(entry_beside(&exe), exe);
        // Present but not executable: nib itself.
        let small = dir.path().join(ENTRY_BINARY);
        std::fs::write(&small, b"").unwrap();
        std::fs::set_permissions(&small, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(entry_beside(&exe), exe);
        // Executable: the small entry.
        std::fs::set_permissions(&small, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(entry_beside(&exe), small);
        // A folder of that name is not an entry.
        std::fs::remove_file(&small).unwrap();
        std::fs::create_dir(&small).unwrap();
        assert_eq!(entry_beside(&exe), exe);
    }
}
