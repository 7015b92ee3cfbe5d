//! `nib doctor`: which sandbox layers this machine offers, each tried once,
//! and what NIB_SANDBOX=1 applies. The probes are `nib-sandbox`'s; the
//! policy's words are `crate::confinement`'s.

use crate::confinement::Confinement;
use nib_settings::Config;
use std::io::Write;

/// Prints the sandbox layers this machine offers — each tried once, with
/// a fixed configuration — and what NIB_SANDBOX=1 applies; no line names a
/// limit that is not in force. Exit status 1 when NIB_SANDBOX=1 and no
/// confined mode holds (programs are refused).
pub fn doctor(config: &Config) -> i32 {
    let layers = nib_sandbox::probe();
    let tried = nib_sandbox::trial();
    let policy = config.sandbox_policy(std::slice::from_ref(&config.project_dir));
    let mut out = String::from("nib doctor: sandbox layers on this machine, each tried once\n");
    let bwrap = nib_sandbox::trusted_usable(std::slice::from_ref(&config.project_dir));
    out.push_str(&match &bwrap {
        Ok(path) => format!(
            "bubblewrap: yes ({} started with --proc, --dev and a worker's namespaces)\n",
            path.display()
        ),
        Err(why) => format!("bubblewrap: no ({why})\n"),
    });
    out.push_str(&match &tried.landlock {
        Ok(abi) => format!("Landlock ABI: {abi} (fully enforced, checked)\n"),
        Err(why) => format!("Landlock ABI: none ({why})\n"),
    });
    out.push_str(&match &tried.seccomp {
        Ok(()) => "seccomp: yes (filter installed, checked)\n".to_string(),
        Err(why) => format!("seccomp: no ({why})\n"),
    });
    let yes = |b: bool| if b { "yes" } else { "no" };
    out.push_str(&format!(
        "PID namespace: {}\npids cgroup: {}\nmemory cgroup: {}\n",
        yes(layers.pid_namespace),
        yes(layers.pids_cgroup),
        yes(layers.memory_cgroup)
    ));
    // The confining entry is a helper the broker starts: it must lie outside
    // every root, or confined programs are refused.
    let entry = std::env::current_exe()
        .map_err(|e| format!("cannot find nib's own binary: {e}"))
        .and_then(|exe| {
            let entry = nib_sandbox::entry_beside(&exe);
            nib_sandbox::trusted_entry(&entry, std::slice::from_ref(&config.project_dir))
                .map(|()| entry)
        });
    match &entry {
        Ok(path) => out.push_str(&format!(
            "confining entry: {} (outside the roots)\n",
            path.display()
        )),
        // Under NIB_SANDBOX=1 the mode line says it.
        Err(why) if !config.sandbox => {
            out.push_str(&format!("confining entry (under NIB_SANDBOX=1): {why}\n"))
        }
        Err(_) => {}
    }
    let mode = config
        .confined_mode()
        .and_then(|m| entry.as_ref().map(|_| m).map_err(|why| why.clone()));
    let in_force = if !config.sandbox {
        format!(
            "mode: {} — programs run in their own session, with empty stdin, fds 0-2, a scrubbed environment and limits; their tree ends with the call",
            config.sandbox_mode()
        )
    } else if let Err(why) = &mode {
        format!("mode: {why}")
    } else {
        format!(
            "mode: {}; {}; writable: {}",
            config.sandbox_mode(),
            config.network_mode(),
            policy
                .writable
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    out.push_str(&in_force);
    out.push('\n');
    if !config.sandbox || mode.is_ok() {
        out.push_str(&config.read_policy_text());
        out.push_str(&config.brokered_text());
    }
    out.push_str(&match &tried.exec_notify {
        Ok(()) => "exec-time rules: while nib.json has program rules, every exec of a nibash call is checked by the file it runs (seccomp user notification, in every mode)\n".to_string(),
        Err(why) => format!(
            "exec-time rules: cannot be enforced here (seccomp user notification is refused: {why}); while nib.json has program rules, programs are refused\n"
        ),
    });
    if !config.sandbox && mode.is_ok() {
        out.push_str("to confine programs: remove NIB_SANDBOX=0 from nib's environment (Claude Code: the \"env\" of nib's entry in .mcp.json or ~/.claude.json; `nib setup` without --no-sandbox takes it out); the sandbox is nib's default, docs/sandbox.md says what it holds\n");
    }
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(crate::terminal::visible(&out).as_bytes());
    i32::from(config.sandbox && mode.is_err())
}
