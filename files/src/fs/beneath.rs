//! Kernel-checked path resolution: `openat2` beneath an open root directory.
//!
//! A [`Root`] is a directory opened once (`O_PATH`). A path is turned into a
//! path relative to the root *lexically* (it may hold `..`), and the kernel
//! resolves it with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`: a `..`, an
//! absolute symlink or a relative one that climbs out, and `/proc/*/root`-style
//! magic links all fail with `EXDEV` or `ELOOP`, and no string comparison of
//! canonical paths decides anything. `EAGAIN` (a concurrent rename seen by the
//! kernel) is retried a bounded number of times.
//!
//! This file owns only resolution; `fs/mod.rs` owns what is done with the fds.

use std::ffi::OsStr;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

/// How many times an `EAGAIN` from openat2 is retried.
const EAGAIN_RETRIES: usize = 16;

/// An open root directory.
#[derive(Debug)]
pub struct Root {
    fd: OwnedFd,
    /// The root's canonical path (for messages and relative paths).
    pub path: PathBuf,
}

impl Root {
    /// Opens a root directory.
    pub fn open(path: &Path) -> std::io::Result<Root> {
        let path = std::fs::canonicalize(path)?;
        let fd = rustix::fs::open(
            &path,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Root { fd, path })
    }

    /// The directory fd.
    pub fn fd(&self) -> impl AsFd + '_ {
        &self.fd
    }
}

/// Why a path did not resolve beneath any root.
#[derive(Debug)]
pub enum Miss {
    /// It leads out of every root (`..`, a symlink out, a magic link).
    Outside,
    /// It resolves beneath a root but fails there (not found, not a folder…).
    Failed(std::io::Error),
}

/// The path from `root` to `path`, lexically (`..` kept for the kernel to judge).
pub fn relative(root: &Path, path: &Path) -> PathBuf {
    if let Ok(rest) = path.strip_prefix(root) {
        return if rest.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            rest.to_path_buf()
        };
    }
    let rc: Vec<Component> = root.components().collect();
    let pc: Vec<Component> = path.components().collect();
    let common = rc.iter().zip(&pc).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in common..rc.len() {
        out.push("..");
    }
    for c in &pc[common..] {
        out.push(c.as_os_str());
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

/// openat2 beneath `dir`, retrying `EAGAIN`.
pub fn openat2_beneath(
    dir: impl AsFd,
    rel: &Path,
    flags: OFlags,
    mode: Mode,
) -> std::io::Result<OwnedFd> {
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
    let mut tries = 0;
    loop {
        match rustix::fs::openat2(&dir, rel, flags | OFlags::CLOEXEC, mode, resolve) {
            Err(Errno::AGAIN) if tries < EAGAIN_RETRIES => tries += 1,
            other => return other.map_err(std::io::Error::from),
        }
    }
}

fn is_escape(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(code) if code == Errno::XDEV.raw_os_error() || code == Errno::LOOP.raw_os_error()
    )
}

/// Opens `path` beneath the first root it resolves under. Returns the fd, the
/// index of the root and the relative path used.
pub fn open(
    roots: &[Root],
    path: &Path,
    flags: OFlags,
    mode: Mode,
) -> Result<(OwnedFd, usize, PathBuf), Miss> {
    if path.as_os_str().as_encoded_bytes().contains(&0) {
        return Err(Miss::Failed(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the path contains a NUL byte",
        )));
    }
    let mut failure = None;
    for (i, root) in roots.iter().enumerate() {
        let rel = relative(&root.path, path);
        match openat2_beneath(&root.fd, &rel, flags, mode) {
            Ok(fd) => return Ok((fd, i, rel)),
            Err(e) if is_escape(&e) => {}
            Err(e) => {
                // Resolved beneath this root but failed (missing, not a folder…):
                // that is the answer, unless another root takes the path whole.
                if !rel.starts_with("..") {
                    failure.get_or_insert(e);
                }
            }
        }
    }
    match failure {
        Some(e) => Err(Miss::Failed(e)),
        None => Err(Miss::Outside),
    }
}

/// Opens (creating missing folders beneath the root) the parent folder of
/// `path`, as an `O_PATH` directory fd. Returns the fd, the root index and
/// the file name.
pub fn open_parent_creating(
    roots: &[Root],
    path: &Path,
) -> Result<(OwnedFd, usize, std::ffi::OsString), Miss> {
    let name = path
        .file_name()
        .ok_or_else(|| {
            Miss::Failed(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the path names no file",
            ))
        })?
        .to_os_string();
    let parent = path.parent().unwrap_or(Path::new("/"));
    let dir_flags = OFlags::PATH | OFlags::DIRECTORY;
    match open(roots, parent, dir_flags, Mode::empty()) {
        Ok((fd, i, _)) => return Ok((fd, i, name)),
        Err(Miss::Failed(e)) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(other) => return Err(other),
    }
    // Create the missing folders one at a time, each beneath the root.
    for (i, root) in roots.iter().enumerate() {
        let rel = relative(&root.path, parent);
        if rel.starts_with("..") {
            continue;
        }
        let mut prefix = PathBuf::new();
        let mut dir = openat2_beneath(&root.fd, Path::new("."), dir_flags, Mode::empty())
            .map_err(Miss::Failed)?;
        for comp in rel.components() {
            prefix.push(comp.as_os_str());
            match openat2_beneath(&root.fd, &prefix, dir_flags, Mode::empty()) {
                Ok(fd) => dir = fd,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    let comp_name: &OsStr = comp.as_os_str();
                    match rustix::fs::mkdirat(&dir, comp_name, Mode::from_raw_mode(0o755)) {
                        Ok(()) | Err(Errno::EXIST) => {}
                        Err(e) => return Err(Miss::Failed(e.into())),
                    }
                    dir = openat2_beneath(&root.fd, &prefix, dir_flags, Mode::empty()).map_err(
                        |e| {
                            if is_escape(&e) {
                                Miss::Outside
                            } else {
                                Miss::Failed(e)
                            }
                        },
                    )?;
                }
                Err(e) if is_escape(&e) => return Err(Miss::Outside),
                Err(e) => return Err(Miss::Failed(e)),
            }
        }
        return Ok((dir, i, name));
    }
    Err(Miss::Outside)
}

/// The folder path the kernel holds for an fd (for pattern checks and messages).
pub(super) fn fd_path(fd: impl AsFd) -> Option<PathBuf> {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_fd().as_raw_fd())).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_keep_dotdot_for_the_kernel() {
        assert_eq!(
            relative(Path::new("/r"), Path::new("/r/a/b")),
            PathBuf::from("a/b")
        );
        assert_eq!(
            relative(Path::new("/r"), Path::new("/r")),
            PathBuf::from(".")
        );
        assert_eq!(
            relative(Path::new("/r/x"), Path::new("/etc/passwd")),
            PathBuf::from("../../etc/passwd")
        );
        assert_eq!(
            relative(Path::new("/r"), Path::new("/rx/a")),
            PathBuf::from("../rx/a")
        );
    }

    #[test]
    fn the_kernel_refuses_escapes() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        let rootdir = tempfile::tempdir().unwrap();
        std::fs::write(rootdir.path().join("ok"), "o").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), rootdir.path().join("link"))
            .unwrap();
        std::os::unix::fs::symlink("../", rootdir.path().join("up")).unwrap();
        let roots = [Root::open(rootdir.path()).unwrap()];
        let r = |p: PathBuf| open(&roots, &p, OFlags::RDONLY, Mode::empty());
        assert!(r(roots[0].path.join("ok")).is_ok());
        assert!(matches!(r(roots[0].path.join("link")), Err(Miss::Outside)));
        assert!(matches!(r(roots[0].path.join("up/x")), Err(Miss::Outside)));
        assert!(matches!(r(roots[0].path.join("../x")), Err(Miss::Outside)));
        assert!(matches!(
            r(outside.path().join("secret")),
            Err(Miss::Outside)
        ));
        assert!(matches!(
            r(PathBuf::from("/proc/self/root/etc/hostname")),
            Err(Miss::Outside)
        ));
        assert!(matches!(
            r(roots[0].path.join("missing")),
            Err(Miss::Failed(_))
        ));
    }
}
