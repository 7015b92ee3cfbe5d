//! The sandbox's start per layer (`--only start`): `true` started under each layer against a plain spawn.

use super::*;

/// Starting `true` per sandbox layer, against a plain spawn.
pub(crate) fn start_scenarios(nib: &Path, work: &Path, n: usize) -> Result<()> {
    let root = work.to_path_buf();
    let layer = |confine: bool, bwrap: bool| nib_sandbox::Policy {
        confine,
        writable: vec![root.clone()],
        use_bwrap: bwrap,
        ..nib_sandbox::Policy::default()
    };
    let mut layers = vec![
        (
            "start `true`: layer 1 (session, fds, env, limits, PID namespace)",
            layer(false, false),
        ),
        ("start `true`: Landlock + seccomp", layer(true, false)),
    ];
    if nib_sandbox::bwrap_usable() {
        layers.push((
            "start `true`: bubblewrap + Landlock + seccomp",
            layer(true, true),
        ));
    }
    // The read policy of a user whose $HOME holds 200 entries (projects,
    // dotfiles, credentials, toolchains), PATH as this machine's; the
    // home beside the root, not in it.
    let home = work.with_file_name("bench-home");
    for i in 0..180 {
        let _ = std::fs::create_dir_all(home.join(format!("project-{i}")));
    }
    for d in [
        ".ssh",
        ".aws",
        ".cargo/registry",
        ".cargo/bin",
        ".rustup",
        ".npm",
        ".cache/pip",
        ".config/gh",
        ".gnupg",
        ".m2/repository",
        ".gradle/caches",
        ".docker",
        ".kube",
        ".pyenv",
        ".local/bin",
        ".config/git",
    ] {
        let _ = std::fs::create_dir_all(home.join(d));
    }
    for f in [
        ".cargo/credentials.toml",
        ".npmrc",
        ".netrc",
        ".gitconfig",
        ".git-credentials",
        ".m2/settings.xml",
        ".bash_history",
    ] {
        let _ = std::fs::write(home.join(f), "x\n");
    }
    let user_reads = nib_sandbox::Reads::for_user(&nib_sandbox::UserReads {
        home: Some(home.clone()),
        path: std::env::var_os("PATH"),
        toolchain_vars: Vec::new(),
        allow: Vec::new(),
        hide: Vec::new(),
    });
    let with_reads = |bwrap: bool| nib_sandbox::Policy {
        reads: user_reads.clone(),
        ..layer(true, bwrap)
    };
    layers.push((
        "start `true`: Landlock + seccomp, read policy of a $HOME of 200 entries",
        with_reads(false),
    ));
    if nib_sandbox::bwrap_usable() {
        layers.push((
            "start `true`: bubblewrap + Landlock + seccomp, read policy of a $HOME of 200 entries",
            with_reads(true),
        ));
    }
    for (scenario, policy) in layers {
        let sandbox = nib_sandbox::Sandbox::new(&nib_sandbox::entry_beside(nib), policy);
        let mut f = || -> Result<(Duration, usize)> {
            let t = Instant::now();
            let w = sandbox
                .spawn(&["true".into()], work, &[])
                .map_err(|e| e.to_string())?;
            let o = w.wait(Some(Duration::from_secs(10)));
            if o.code != Some(0) {
                return Err(format!(
                    "{scenario}: true failed: {}",
                    String::from_utf8_lossy(&o.stderr)
                ));
            }
            Ok((t.elapsed(), 0))
        };
        let mut bases: Baselines<'_> = vec![(
            "spawn true".into(),
            Box::new(|| run_program(work, &["true"])),
        )];
        let (s, _, b) = interleave(n, Some(&mut f), &mut bases)?;
        Row {
            scenario: scenario.into(),
            nib: s,
            chars: None,
            baselines: b,
        }
        .print();
    }
    Ok(())
}
