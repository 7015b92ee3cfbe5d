//! How programs are confined under nib's settings: the sandbox policy a
//! call's programs (and the providers) run under, which joins the settings
//! ([`Config`], beneath in `nib-files`) with what only the broker holds —
//! the session's network proxy and its brokered secrets ([`crate::netproxy`]);
//! and the phrases `nib doctor` and nibash_status print about it.

use std::path::PathBuf;

use nib_settings::Config;

/// The broker's view of [`Config`]: what confined programs get.
pub trait Confinement {
    /// The policy sandboxed programs run under for these roots.
    fn sandbox_policy(&self, roots: &[PathBuf]) -> nib_sandbox::Policy;

    /// What sandboxed programs may read: the system, the toolchains and
    /// caches this environment names, `NIB_SANDBOX_BIND`; hidden: the
    /// default credential list, `NIB_SANDBOX_HIDE` and the project's
    /// nib.json `sandbox.hide` (a project may hide more, never show more).
    fn reads(&self) -> nib_sandbox::Reads;

    /// The read policy in force, for `nib doctor` and nibash_status: what
    /// programs may read, what is hidden, which variables are withheld.
    fn read_policy_text(&self) -> String;

    /// The secret-looking variables of nib's environment that sandboxed
    /// programs do not get (none unconfined, where only nib's own keys
    /// are kept back).
    fn withheld_vars(&self) -> Vec<String>;

    /// The route to nib's proxy when programs reach the network through it
    /// (NIB_SANDBOX=1 with hosts in NIB_SANDBOX_NETWORK, or a client that
    /// can be asked about hosts while NIB_CONFIRM_NETWORK is not `0`; a
    /// project's nib.json can only deny some of them); the proxy starts on
    /// first use. `None` otherwise — or when it cannot start, and then
    /// programs get no network.
    fn proxy_route(&self) -> Option<nib_sandbox::ProxyRoute>;

    /// The session's brokered secrets (NIB_SANDBOX=1 with
    /// NIB_SANDBOX_SECRETS); read once, with the proxy when it runs.
    fn brokered(&self) -> Option<std::sync::Arc<crate::netproxy::Brokered>>;

    /// The brokered secrets in one line each, by name and host (for
    /// `nib doctor` and nibash_status); empty when none are declared.
    fn brokered_text(&self) -> String;

    /// How programs reach the network, in one phrase (for `nib doctor` and
    /// nibash_status): which layer holds them to what.
    fn network_mode(&self) -> String;

    /// The sandbox mode programs run in, in one phrase (for `nib doctor`
    /// and nibash_status): the layers in force, and why bubblewrap is not
    /// among them when it is not; or why programs are refused.
    fn sandbox_mode(&self) -> String;

    /// The layers confined programs run under here (each tried once:
    /// `nib_sandbox::choose`), or why they are refused. Only meaningful
    /// under NIB_SANDBOX=1.
    fn confined_mode(&self) -> Result<nib_sandbox::Mode, String>;

    /// Once per process, for the first nibash answer under NIB_SANDBOX=1:
    /// why fewer layers than bubblewrap + Landlock + seccomp hold, when the
    /// machine (not the user's NIB_SANDBOX_BWRAP=0) is why.
    fn first_answer_note(&self) -> Option<String>;
}

impl Confinement for Config {
    /// The policy sandboxed programs run under for these roots.
    fn sandbox_policy(&self, roots: &[PathBuf]) -> nib_sandbox::Policy {
        // Unconfined, nothing holds these paths: no walk to make.
        let (mut protected, mut pinned) = (Vec::new(), Vec::new());
        if self.sandbox {
            for r in roots {
                let found = nib_files::fs::runs_code::protected_for_programs_kept(r);
                protected.extend(found.read_only);
                pinned.extend(found.git_dirs);
            }
        }
        nib_sandbox::Policy {
            confine: self.sandbox,
            writable: roots.to_vec(),
            read_only: bound_read_only(self),
            // Unconfined programs read what the user can: no policy to make.
            reads: if self.sandbox {
                self.reads()
            } else {
                nib_sandbox::Reads {
                    readable: Vec::new(),
                    hidden: Vec::new(),
                }
            },
            pass_env: self.sandbox_env.clone(),
            set_env: brokered_env(self),
            stand_in_files: self
                .brokered()
                .map(|b| b.stand_ins.clone())
                .unwrap_or_default(),
            network: self.sandbox_network,
            protected,
            pinned,
            limits: match self.sandbox_memory {
                Some(bytes) => nib_sandbox::Limits {
                    memory_bytes: bytes,
                    tree_memory_bytes: bytes,
                    ..nib_sandbox::Limits::default()
                },
                None => nib_sandbox::Limits::default(),
            },
            use_bwrap: self.sandbox_bwrap,
            masked: Vec::new(),
            supervise_exec: false,
            proxy: self.proxy_route(),
        }
    }

    /// What sandboxed programs may read: the system, the toolchains and
    /// caches this environment names, `NIB_SANDBOX_BIND`; hidden: the
    /// default credential list, `NIB_SANDBOX_HIDE` and the project's
    /// nib.json `sandbox.hide` (a project may hide more, never show more).
    fn reads(&self) -> nib_sandbox::Reads {
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from);
        let mut hide = self.sandbox_hide.clone();
        // Brokered files: hidden (bubblewrap then binds their stand-ins).
        hide.extend(self.brokered().into_iter().flat_map(|b| {
            b.secrets
                .placeholders
                .iter()
                .filter_map(|(s, _)| crate::netproxy::secrets::file_of(s).map(|p| p.to_path_buf()))
                .collect::<Vec<_>>()
        }));
        hide.extend(project_hides(&self.project_dir, home.as_deref()));
        nib_sandbox::Reads::for_user(&nib_sandbox::UserReads {
            home,
            path: std::env::var_os("PATH").map(|p| readable_path(&p)),
            // A toolchain folder this user cannot read is left out, as
            // PATH's are (`readable_path`).
            toolchain_vars: nib_sandbox::UserReads::toolchain_vars_from(|n| {
                std::env::var_os(n).filter(|v| !read_denied(std::path::Path::new(v)))
            }),
            allow: bound_read_only(self),
            hide,
        })
    }

    /// The read policy in force, for `nib doctor` and nibash_status: what
    /// programs may read, what is hidden, which variables are withheld.
    fn read_policy_text(&self) -> String {
        if !self.sandbox {
            return "reads: unconfined (NIB_SANDBOX=0): programs read what the user can; nib's own keys (NIB_DECIDER_KEY, OPENROUTER_API_KEY) never reach them\n".into();
        }
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let withheld = self.withheld_vars();
        format!(
            "reads: {}withheld variables: {} (NIB_SANDBOX_ENV=NAME,… passes named ones; nib's own keys never reach programs)\n",
            self.reads().describe(home.as_deref()),
            if withheld.is_empty() {
                "none".to_string()
            } else {
                withheld.join(", ")
            }
        )
    }

    /// The secret-looking variables of nib's environment that sandboxed
    /// programs do not get (none unconfined, where only nib's own keys
    /// are kept back).
    fn withheld_vars(&self) -> Vec<String> {
        if !self.sandbox {
            return Vec::new();
        }
        let mut vars: Vec<(std::ffi::OsString, std::ffi::OsString)> =
            nib_sandbox::scrub(std::env::vars_os());
        let mut withheld = nib_sandbox::withhold_secrets(&mut vars, &self.sandbox_env);
        // Brokered ones are not withheld: programs hold their placeholders.
        if let Some(b) = self.brokered() {
            withheld.retain(|n| !b.secrets.placeholders.iter().any(|(v, _)| v == n));
        }
        withheld
    }

    fn proxy_route(&self) -> Option<nib_sandbox::ProxyRoute> {
        if !self.sandbox || self.sandbox_network {
            return None;
        }
        match crate::netproxy::running(
            self.network_hosts.as_deref(),
            self.confirm_network,
            &self.project_dir,
            self.sandbox_secrets.as_deref(),
        ) {
            Ok(Some(r)) => Some(r.route()),
            Ok(None) => None,
            Err(e) => {
                tracing::warn!("the network proxy cannot start: {e}; programs get no network");
                None
            }
        }
    }

    /// The session's brokered secrets (NIB_SANDBOX=1 with
    /// NIB_SANDBOX_SECRETS); read once, with the proxy when it runs.
    fn brokered(&self) -> Option<std::sync::Arc<crate::netproxy::Brokered>> {
        if !self.sandbox || self.sandbox_secrets.is_none() {
            return None;
        }
        // The proxy reads them against its allowlist when it starts; with
        // no proxy, every entry is refused (nothing could carry it).
        let _ = self.proxy_route();
        Some(crate::netproxy::brokered(
            self.sandbox_secrets.as_deref(),
            None,
            &self.project_dir,
        ))
    }

    /// The brokered secrets in one line each, by name and host (for
    /// `nib doctor` and nibash_status); empty when none are declared.
    fn brokered_text(&self) -> String {
        let Some(b) = self.brokered() else {
            return String::new();
        };
        let lines = b.secrets.describe();
        if lines.is_empty() {
            return String::new();
        }
        format!(
            "brokered secrets (NIB_SANDBOX_SECRETS; programs see placeholders):\n  {}\n",
            lines.join("\n  ")
        )
    }

    /// How programs reach the network, in one phrase (for `nib doctor` and
    /// nibash_status): which layer holds them to what.
    fn network_mode(&self) -> String {
        if !self.sandbox {
            return "network open (NIB_SANDBOX=0)".into();
        }
        if self.sandbox_network {
            return "network open to every host (NIB_SANDBOX_NETWORK=1)".into();
        }
        let Some(running) = self.proxy_route().and(crate::netproxy::current()) else {
            return if self.confirm_network {
                "network off (no host in NIB_SANDBOX_NETWORK, and no client that can be asked about one)".into()
            } else {
                "network off".into()
            };
        };
        let asking = self.confirm_network && crate::netproxy::askable();
        let how = match self.confined_mode() {
            Err(_) => return "network off (programs are refused)".into(),
            Ok(nib_sandbox::Mode::Bubblewrap { .. }) => {
                "bubblewrap's empty network namespace, a bridge to the proxy inside it; no UDP"
            }
            Ok(nib_sandbox::Mode::Landlock { abi, .. }) if abi >= 4 => {
                "Landlock holds TCP to the proxy's port, on any address since its rules name ports; seccomp refuses UDP and raw sockets"
            }
            Ok(_) => {
                return format!(
                    "network off: {}, but without bubblewrap or Landlock ABI 4 nothing would hold programs to the proxy",
                    if running.described.is_empty() {
                        "hosts would be put to the user".to_string()
                    } else {
                        format!("hosts are listed ({})", running.described)
                    }
                );
            }
        };
        let allowed = match running.described.as_str() {
            "" => "no host listed".to_string(),
            d if d.starts_with(';') => format!("no host listed{d}"),
            d => format!("allowed {d}"),
        };
        let others = if asking {
            "; other hosts are put to the user (NIB_CONFIRM_NETWORK=0 refuses them)"
        } else {
            ""
        };
        format!("network through nib's proxy: {allowed}{others} ({how})")
    }

    /// The sandbox mode programs run in, in one phrase (for `nib doctor`
    /// and nibash_status): the layers in force, and why bubblewrap is not
    /// among them when it is not.
    fn sandbox_mode(&self) -> String {
        if !self.sandbox {
            return "unconfined (NIB_SANDBOX=0): programs run with your full authority (layer 1 only); remove NIB_SANDBOX=0 to confine them".into();
        }
        match self.confined_mode() {
            Ok(mode) => format!("NIB_SANDBOX=1: {}", mode.describe()),
            Err(why) => format!("NIB_SANDBOX=1, and programs are refused: {why}"),
        }
    }

    fn first_answer_note(&self) -> Option<String> {
        static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        if !self.sandbox {
            let note = "[sandbox: off (NIB_SANDBOX=0): programs run unconfined, with your full authority: they can read your credentials and write anywhere you can; remove NIB_SANDBOX=0 to confine them]".to_string();
            return (!SAID.swap(true, std::sync::atomic::Ordering::Relaxed)).then_some(note);
        }
        let mode = self.confined_mode().ok()?;
        let note = match &mode {
            nib_sandbox::Mode::Landlock { why, abi } if self.sandbox_bwrap => format!(
                "[sandbox: bubblewrap cannot start here ({why}); programs run under Landlock ABI {abi} + seccomp instead; nib doctor says more]"
            ),
            nib_sandbox::Mode::Bubblewrap { landlock: 0, .. } => format!(
                "[sandbox: this kernel has no Landlock; programs run under {}; nib doctor says more]",
                mode.describe()
            ),
            _ => return None,
        };
        (!SAID.swap(true, std::sync::atomic::Ordering::Relaxed)).then_some(note)
    }

    fn confined_mode(&self) -> Result<nib_sandbox::Mode, String> {
        nib_sandbox::choose(nib_sandbox::Wanted {
            use_bwrap: self.sandbox_bwrap,
            roots: std::slice::from_ref(&self.project_dir),
        })
    }
}

/// PATH without the folders this user cannot read (another user's
/// `~/.cargo/bin` on a PATH set for root): bubblewrap cannot bind them
/// ("Can't find source path: Permission denied", every call failing) and
/// Landlock cannot open them; programs could not read them either.
fn readable_path(path: &std::ffi::OsStr) -> std::ffi::OsString {
    let kept: Vec<PathBuf> = std::env::split_paths(path)
        .filter(|d| !read_denied(d))
        .collect();
    std::env::join_paths(kept).unwrap_or_else(|_| path.to_os_string())
}

/// Whether this user is refused reading `dir` (a folder, or its parent's).
fn read_denied(dir: &std::path::Path) -> bool {
    std::fs::read_dir(dir)
        .err()
        .is_some_and(|e| e.kind() == std::io::ErrorKind::PermissionDenied)
}

/// Folders bound read-only for programs: NIB_SANDBOX_BIND's, and the
/// brokered secrets' trust folder (the session authority's certificate).
fn bound_read_only(config: &Config) -> Vec<PathBuf> {
    let mut out = config.sandbox_bind.clone();
    out.extend(config.brokered().and_then(|b| b.trust_dir.clone()));
    out
}

/// What confined programs get for the brokered secrets: placeholders,
/// the session authority's trust, git's helper.
fn brokered_env(config: &Config) -> Vec<(String, String)> {
    config
        .brokered()
        .map(|b| b.program_env())
        .unwrap_or_default()
}

/// A project's nib.json `sandbox.hide` entries (relative ones from the
/// project, `~/` from the home folder).
fn project_hides(project: &std::path::Path, home: Option<&std::path::Path>) -> Vec<PathBuf> {
    let Some(json) = std::fs::read(project.join("nib.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
    else {
        return Vec::new();
    };
    json.get("sandbox")
        .and_then(|s| s.get("hide"))
        .and_then(|h| h.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str())
                .filter_map(|p| match (p.strip_prefix("~/"), home) {
                    (Some(rest), Some(h)) => Some(h.join(rest)),
                    (Some(_), None) => None,
                    (None, _) => Some(nib_text::path_text::lexical_normalize(&project.join(p))),
                })
                .collect()
        })
        .unwrap_or_default()
}
