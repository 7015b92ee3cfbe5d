//! Layer 2, outer: the bubblewrap command line. The argv is a pure function
//! (tested as a whole value); [`bwrap_usable`] checks once that bwrap runs here.
//! Landlock and seccomp, applied inside it, live in `landlock.rs` and
//! `seccomp.rs`; the process-tree rules in `lifetime.rs`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use crate::Policy;

/// Set inside bubblewrap so the confined process knows bwrap already made its namespaces.
pub const IN_BWRAP: &str = "NIB_CONFINE_IN_BWRAP";

/// Unreadable stand-ins mounted over hidden paths: an empty file and an
/// empty folder, both mode 000 (without capabilities, even root cannot
/// open them: `EACCES`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StandIns {
    /// The empty file, for hidden files.
    pub file: PathBuf,
    /// The empty folder, for hidden folders.
    pub dir: PathBuf,
}

impl StandIns {
    /// The stand-ins of this user, made once in the temp folder
    /// (`nib-hidden-UID/`, owned by the user, checked before use).
    pub fn get() -> std::io::Result<&'static StandIns> {
        static MADE: OnceLock<Result<StandIns, String>> = OnceLock::new();
        MADE.get_or_init(|| StandIns::make(&std::env::temp_dir()).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|e| std::io::Error::other(e.clone()))
    }

    fn make(temp: &Path) -> std::io::Result<StandIns> {
        use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
        // SAFETY: getuid takes nothing and cannot fail.
        let uid = unsafe { libc::getuid() };
        let folder = temp.join(format!("nib-hidden-{uid}"));
        match std::fs::DirBuilder::new().mode(0o711).create(&folder) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        let meta = std::fs::symlink_metadata(&folder)?;
        if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o022 != 0 {
            return Err(std::io::Error::other(format!(
                "{} is not a folder of this user's that only it may change",
                folder.display()
            )));
        }
        let file = folder.join("file");
        let dir = folder.join("dir");
        if std::fs::symlink_metadata(&file).is_err() {
            std::fs::File::create(&file)?;
        }
        if std::fs::symlink_metadata(&dir).is_err() {
            std::fs::create_dir(&dir)?;
        }
        for (p, want_dir) in [(&file, false), (&dir, true)] {
            let m = std::fs::symlink_metadata(p)?;
            if m.is_dir() != want_dir || m.uid() != uid || m.len() > 0 && !want_dir {
                return Err(std::io::Error::other(format!(
                    "{} is not nib's empty stand-in",
                    p.display()
                )));
            }
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o000))?;
        }
        Ok(StandIns { file, dir })
    }
}

/// One mount of the layered part of the view, applied in order of depth so
/// a folder is mounted before anything inside it.
enum Layer<'a> {
    Read(&'a Path),
    Write(&'a Path),
    /// A pinned folder (a git dir or one above it), bound over itself
    /// where it still is: in order of depth, so a hidden path inside it is
    /// covered after the bind, not uncovered by it.
    Pin(&'a Path),
    Hide(&'a Path, bool),
}

impl Layer<'_> {
    fn path(&self) -> &Path {
        match self {
            Layer::Read(p) | Layer::Write(p) | Layer::Pin(p) | Layer::Hide(p, _) => p,
        }
    }
}

/// The bubblewrap argv that runs `inner` (the confining entry and its args).
/// Nothing of the host is there but what the read policy names: the
/// system folders (top-level links such as `/bin -> usr/bin` kept as
/// links), the toolchains, the user's binds, read-only; the roots
/// writable; hidden paths inside any of them covered by the unreadable
/// `stand_ins`; a fresh `/dev` and `/proc`, private `/tmp` and `/run`
/// (before the rest, so roots under `/tmp` stay visible); the root
/// remounted read-only. Then the pinned folders over themselves and the
/// protected paths read-only, the entry
/// binary visible, own PID, IPC and UTS namespaces, no network unless
/// allowed, a new session, death with the parent, and no capabilities
/// (even when started by root).
pub fn bwrap_argv(
    policy: &Policy,
    entry: &Path,
    inner: &[OsString],
    stand_ins: &StandIns,
) -> Vec<OsString> {
    let mut a: Vec<OsString> = Vec::new();
    let mut push = |items: &[&std::ffi::OsStr]| a.extend(items.iter().map(|s| s.to_os_string()));
    push(&["bwrap".as_ref()]);
    push(&[
        "--dev".as_ref(),
        "/dev".as_ref(),
        "--proc".as_ref(),
        "/proc".as_ref(),
    ]);
    push(&[
        "--tmpfs".as_ref(),
        "/tmp".as_ref(),
        "--tmpfs".as_ref(),
        "/run".as_ref(),
    ]);
    let hidden = policy
        .reads
        .hidden_inside(&policy.writable, &policy.read_only);
    let mut layers: Vec<Layer<'_>> = Vec::new();
    layers.extend(policy.reads.readable.iter().map(|p| Layer::Read(p)));
    layers.extend(policy.read_only.iter().map(|p| Layer::Read(p)));
    layers.extend(policy.writable.iter().map(|p| Layer::Write(p)));
    layers.extend(policy.pinned.iter().map(|p| Layer::Pin(p)));
    for h in &hidden {
        let is_dir = std::fs::symlink_metadata(h).is_ok_and(|m| m.is_dir());
        if std::fs::symlink_metadata(h).is_ok_and(|m| !m.file_type().is_symlink()) {
            layers.push(Layer::Hide(h, is_dir));
        }
    }
    // Stable: at one depth, reads before writes before pins before hides.
    layers.sort_by_key(|l| l.path().components().count());
    for layer in &layers {
        match layer {
            Layer::Read(p) => match top_level_link(p) {
                Some(target) => push(&["--symlink".as_ref(), target.as_os_str(), p.as_os_str()]),
                None => push(&["--ro-bind-try".as_ref(), p.as_os_str(), p.as_os_str()]),
            },
            Layer::Write(p) => push(&["--bind".as_ref(), p.as_os_str(), p.as_os_str()]),
            Layer::Pin(p) => push(&["--bind-try".as_ref(), p.as_os_str(), p.as_os_str()]),
            Layer::Hide(p, is_dir) => {
                let stand_in = if *is_dir {
                    &stand_ins.dir
                } else {
                    &stand_ins.file
                };
                push(&["--ro-bind".as_ref(), stand_in.as_os_str(), p.as_os_str()]);
            }
        }
    }
    // The proxy's socket, for the bridge in the network namespace.
    if let Some(r) = policy.proxy.as_ref().filter(|_| !policy.network) {
        push(&[
            "--bind".as_ref(),
            r.socket.as_os_str(),
            r.socket.as_os_str(),
        ]);
    }
    // The read-only paths after the pinned folders (among the layers):
    // bound over the pinned mount, not hidden beneath it.
    for p in &policy.protected {
        push(&["--ro-bind-try".as_ref(), p.as_os_str(), p.as_os_str()]);
    }
    for (file, stand_in) in &policy.stand_in_files {
        push(&["--ro-bind".as_ref(), stand_in.as_os_str(), file.as_os_str()]);
    }
    for m in &policy.masked {
        if m.exists() {
            push(&["--ro-bind".as_ref(), "/dev/null".as_ref(), m.as_os_str()]);
        }
    }
    push(&["--ro-bind".as_ref(), entry.as_os_str(), entry.as_os_str()]);
    push(&["--remount-ro".as_ref(), "/".as_ref()]);
    push(&[
        "--unshare-pid".as_ref(),
        "--unshare-ipc".as_ref(),
        "--unshare-uts".as_ref(),
    ]);
    if !policy.network {
        push(&["--unshare-net".as_ref()]);
    }
    push(&["--new-session".as_ref(), "--die-with-parent".as_ref()]);
    push(&["--cap-drop".as_ref(), "ALL".as_ref()]);
    push(&["--setenv".as_ref(), IN_BWRAP.as_ref(), "1".as_ref()]);
    push(&["--".as_ref(), entry.as_os_str()]);
    a.extend(inner.iter().cloned());
    a
}

/// Where a top-level link such as `/bin -> usr/bin` points, kept as a link
/// inside (its target is readable on its own).
fn top_level_link(p: &Path) -> Option<PathBuf> {
    if p.parent() != Some(Path::new("/")) {
        return None;
    }
    let meta = std::fs::symlink_metadata(p).ok()?;
    if !meta.file_type().is_symlink() {
        return None;
    }
    std::fs::read_link(p).ok()
}

/// Whether a trusted bubblewrap ([`trusted`]) starts here with the flags a
/// confined process uses (see [`trusted_usable`]), for roots the caller does not
/// know: the current folder and every root a sandbox was made for.
pub fn bwrap_usable() -> bool {
    trusted_usable(&known_roots()).is_ok()
}

/// The roots of every sandbox made in this process (a PATH folder inside
/// one is never searched for a helper).
static ROOTS: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Notes `roots` as roots: no helper is ever taken from inside them.
pub fn note_roots(roots: &[PathBuf]) {
    let mut known = ROOTS.lock().unwrap_or_else(|e| e.into_inner());
    for r in roots {
        if !known.contains(r) {
            known.push(r.clone());
        }
    }
}

/// The roots noted, with the current folder.
pub fn known_roots() -> Vec<PathBuf> {
    let mut roots = ROOTS.lock().unwrap_or_else(|e| e.into_inner()).clone();
    roots.extend(std::env::current_dir().ok());
    roots
}

/// The PATH nib started with, read once: the PATH a program of a call sees
/// is never where nib looks for its helpers.
fn start_path() -> &'static Option<OsString> {
    static PATH: OnceLock<Option<OsString>> = OnceLock::new();
    PATH.get_or_init(|| std::env::var_os("PATH"))
}

/// Why a folder is no place to take a helper from, if it is not: a
/// relative PATH entry, one inside a root (programs write there), one
/// other users may change, or one this user cannot read.
pub fn untrusted_folder(dir: &Path, roots: &[PathBuf]) -> Option<String> {
    trusted_folder(dir, &real_roots(roots)).err()
}

/// The roots with their links resolved (as given when they cannot be).
fn real_roots(roots: &[PathBuf]) -> Vec<PathBuf> {
    roots
        .iter()
        .map(|r| std::fs::canonicalize(r).unwrap_or_else(|_| r.clone()))
        .collect()
}

/// `dir` with its links resolved when it is a place to take a helper from
/// ([`untrusted_folder`], for roots already resolved by [`real_roots`]);
/// else why not.
fn trusted_folder(dir: &Path, real_roots: &[PathBuf]) -> Result<PathBuf, String> {
    use std::os::unix::fs::MetadataExt;
    if !dir.is_absolute() {
        return Err("a relative PATH entry".into());
    }
    let real = std::fs::canonicalize(dir).map_err(|e| format!("cannot be resolved: {e}"))?;
    if let Some(root) = real_roots.iter().find(|root| real.starts_with(root)) {
        return Err(format!(
            "inside the root {}, where programs write",
            root.display()
        ));
    }
    match std::fs::metadata(&real) {
        Ok(m) if m.mode() & 0o022 != 0 && m.mode() & 0o1000 == 0 => {
            Err("writable by other users".into())
        }
        Ok(_) => Ok(real),
        Err(e) => Err(format!("cannot be read: {e}")),
    }
}

/// The helper `name` (bubblewrap) as nib runs it: the first executable
/// file of that name in the PATH nib started with, taken only from folders
/// outside every root and that programs cannot write
/// ([`untrusted_folder`]); an error naming the folders skipped otherwise.
pub fn trusted(name: &str, roots: &[PathBuf]) -> Result<PathBuf, String> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    let path = start_path()
        .clone()
        .unwrap_or_else(|| OsString::from("/usr/local/bin:/usr/bin:/bin"));
    let mut skipped = Vec::new();
    let real_roots = real_roots(roots);
    for dir in path.as_bytes().split(|b| *b == b':') {
        let dir = Path::new(std::ffi::OsStr::from_bytes(dir));
        let is_exe = |p: &Path| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        };
        let real_dir = match trusted_folder(dir, &real_roots) {
            Ok(real) => real,
            Err(why) => {
                if is_exe(&dir.join(name)) {
                    skipped.push(format!("{} ({why})", dir.join(name).display()));
                }
                continue;
            }
        };
        // The file as resolved now, in the folder as resolved now: what is
        // kept and run is never a path through a link a program could later
        // point elsewhere (a project's `.venv/bin` linked to /usr/bin).
        let candidate = real_dir.join(name);
        if !is_exe(&candidate) {
            continue;
        }
        let file = std::fs::canonicalize(&candidate)
            .map_err(|e| format!("cannot be resolved: {e}"))
            .and_then(|file| {
                let folder = file.parent().unwrap_or(Path::new("/"));
                trusted_folder(folder, &real_roots).map(|_| file)
            });
        match file {
            Ok(file) => return Ok(file),
            Err(why) => skipped.push(format!("{} ({why})", candidate.display())),
        }
    }
    Err(if skipped.is_empty() {
        format!("no {name} on nib's PATH")
    } else {
        format!(
            "no {name} on nib's PATH outside the roots; skipped {}",
            skipped.join(", ")
        )
    })
}

/// The trusted bubblewrap for `roots`, once it has started here with the
/// flags a confined process uses (`--proc` and `--dev` included): a container that
/// refuses a new `/proc` or user namespaces fails here, not at each call.
/// Each binary is tried once; the error says why it cannot be used.
pub fn trusted_usable(roots: &[PathBuf]) -> Result<PathBuf, String> {
    static TRIED: std::sync::Mutex<Vec<(PathBuf, Result<(), String>)>> =
        std::sync::Mutex::new(Vec::new());
    let path = trusted_for(roots)?;
    let mut tried = TRIED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, r)) = tried.iter().find(|(p, _)| *p == path) {
        return r.clone().map(|()| path);
    }
    let r = try_start(&path);
    tried.push((path.clone(), r.clone()));
    r.map(|()| path)
}

/// [`trusted`] bubblewrap for `roots`, looked up once per set of roots: a
/// confined call asks several times, and the lookup resolves every folder
/// of PATH. Programs cannot write the folders it may take bubblewrap from,
/// so what it found stays right while the roots stay the same; a folder a
/// new root takes in is looked at again.
fn trusted_for(roots: &[PathBuf]) -> Result<PathBuf, String> {
    static FOUND: ByRoots<Result<PathBuf, String>> = ByRoots::new();
    FOUND.get(roots, || trusted("bwrap", roots))
}

/// A value found for a set of roots, kept until asked for other roots.
struct ByRoots<T>(std::sync::Mutex<Option<(Vec<PathBuf>, T)>>);

impl<T: Clone> ByRoots<T> {
    const fn new() -> Self {
        Self(std::sync::Mutex::new(None))
    }

    /// The value kept for exactly these roots, else `find`'s (then kept).
    fn get(&self, roots: &[PathBuf], find: impl FnOnce() -> T) -> T {
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((for_roots, v)) = &*kept
            && for_roots == roots
        {
            return v.clone();
        }
        let v = find();
        *kept = Some((roots.to_vec(), v.clone()));
        v
    }
}

/// Starts `bwrap` with a fixed configuration that owes nothing to the
/// project: the system read-only, a fresh /dev and /proc, private /tmp and
/// /run, the namespaces, session and capabilities of a confined process.
fn try_start(bwrap: &Path) -> Result<(), String> {
    let out = Command::new(bwrap)
        .args([
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--tmpfs",
            "/tmp",
            "--tmpfs",
            "/run",
            "--remount-ro",
            "/",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-net",
            "--new-session",
            "--die-with-parent",
            "--cap-drop",
            "ALL",
            "--",
            "true",
        ])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("{} cannot be started: {e}", bwrap.display()))?;
    if out.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&out.stderr);
    let said = said.trim();
    Err(if said.is_empty() {
        format!("{} failed to start ({})", bwrap.display(), out.status)
    } else {
        said.chars().take(300).collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lookup_is_kept_for_the_same_roots_and_made_again_for_others() {
        let kept: ByRoots<usize> = ByRoots::new();
        let lookups = std::cell::Cell::new(0);
        let find = || {
            lookups.set(lookups.get() + 1);
            lookups.get()
        };
        let (a, b) = (
            vec![PathBuf::from("/p")],
            vec![PathBuf::from("/p"), PathBuf::from("/q")],
        );
        assert_eq!(kept.get(&a, find), 1);
        assert_eq!(kept.get(&a, find), 1, "the same roots: kept");
        assert_eq!(kept.get(&b, find), 2, "a root more: looked up again");
        assert_eq!(kept.get(&a, find), 3, "back to fewer: looked up again");
        assert_eq!(lookups.get(), 3);
    }

    #[test]
    fn argv_is_whole_and_ordered() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path().to_string_lossy().into_owned();
        std::fs::create_dir_all(home.path().join(".cargo")).unwrap();
        std::fs::write(home.path().join(".cargo/credentials.toml"), "t").unwrap();
        std::fs::create_dir_all(home.path().join("proj/.ssh")).unwrap();
        let policy = Policy {
            confine: true,
            writable: vec![home.path().join("proj")],
            read_only: vec![PathBuf::from("/opt/sdk")],
            protected: vec![home.path().join("proj/.git/hooks")],
            network: false,
            reads: crate::Reads {
                readable: vec![PathBuf::from("/usr"), home.path().join(".cargo")],
                hidden: vec![
                    home.path().join(".cargo/credentials.toml"),
                    home.path().join(".ssh"),
                    home.path().join("proj/.ssh"),
                ],
            },
            ..Policy::default()
        };
        let stand_ins = StandIns {
            file: PathBuf::from("/s/file"),
            dir: PathBuf::from("/s/dir"),
        };
        let argv: Vec<String> = bwrap_argv(
            &policy,
            Path::new("/usr/bin/nib"),
            &["__w".into(), "x".into()],
            &stand_ins,
        )
        .into_iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
        let want = format!(
            "bwrap --dev /dev --proc /proc --tmpfs /tmp --tmpfs /run \
            --ro-bind-try /usr /usr --ro-bind-try /opt/sdk /opt/sdk \
            --ro-bind-try {h}/.cargo {h}/.cargo --bind {h}/proj {h}/proj \
            --ro-bind /s/file {h}/.cargo/credentials.toml --ro-bind /s/dir {h}/proj/.ssh \
            --ro-bind-try {h}/proj/.git/hooks {h}/proj/.git/hooks --ro-bind /usr/bin/nib /usr/bin/nib \
            --remount-ro / \
            --unshare-pid --unshare-ipc --unshare-uts --unshare-net --new-session --die-with-parent \
            --cap-drop ALL --setenv NIB_CONFINE_IN_BWRAP 1 -- /usr/bin/nib __w x"
        );
        assert_eq!(
            argv.join(" "),
            want.split_whitespace().collect::<Vec<_>>().join(" ")
        );
        let open = Policy {
            network: true,
            ..policy
        };
        let argv = bwrap_argv(&open, Path::new("/n"), &[], &stand_ins);
        assert!(!argv.iter().any(|a| a == "--unshare-net"));
    }

    #[test]
    fn a_pinned_folder_is_bound_before_a_hidden_path_inside_it() {
        let home = tempfile::tempdir().unwrap();
        let proj = home.path().join("proj");
        std::fs::create_dir_all(proj.join("vendor/lib/.git")).unwrap();
        std::fs::write(proj.join("vendor/.env"), "t").unwrap();
        let policy = Policy {
            confine: true,
            writable: vec![proj.clone()],
            pinned: vec![proj.join("vendor"), proj.join("vendor/lib/.git")],
            reads: crate::Reads {
                readable: vec![PathBuf::from("/usr")],
                hidden: vec![proj.join("vendor/.env")],
            },
            ..Policy::default()
        };
        let stand_ins = StandIns {
            file: PathBuf::from("/s/file"),
            dir: PathBuf::from("/s/dir"),
        };
        let argv: Vec<String> = bwrap_argv(&policy, Path::new("/n"), &[], &stand_ins)
            .into_iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        let at = |flag: &str, path: &Path| {
            let p = path.to_string_lossy();
            argv.windows(3)
                .position(|w| w[0] == flag && w[2] == p)
                .unwrap_or_else(|| panic!("{flag} {p} in {argv:?}"))
        };
        let pin = at("--bind-try", &proj.join("vendor"));
        assert!(at("--bind", &proj) < pin);
        assert!(pin < at("--ro-bind", &proj.join("vendor/.env")));
        assert!(pin < at("--bind-try", &proj.join("vendor/lib/.git")));
    }

    #[test]
    fn stand_ins_are_empty_and_unreadable() {
        use std::os::unix::fs::PermissionsExt;
        let temp = tempfile::tempdir().unwrap();
        let s = StandIns::make(temp.path()).unwrap();
        for p in [&s.file, &s.dir] {
            let m = std::fs::metadata(p).unwrap();
            assert_eq!(m.permissions().mode() & 0o777, 0, "{}", p.display());
        }
        assert_eq!(StandIns::make(temp.path()).unwrap(), s, "made again");
    }
}
