//! The one module through which the broker touches the filesystem.
//!
//! Every tool reads, lists, stats and writes through these functions, so the
//! confinement issue can replace their bodies with kernel-resolved access
//! (openat2 beneath an open root fd) without touching a tool. Today they use
//! plain paths: without NIB_SANDBOX the original restricts nothing beyond the
//! operating system, and neither does this.
//!
//! What this module already guarantees: special files (FIFOs, sockets, devices)
//! are refused without blocking; writes are atomic (a temp file in the target's
//! directory, fsync, rename, fsync of the directory) and keep the replaced
//! file's mode and owner; a hardlinked target is refused.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// What went wrong touching a path. Messages say what happened; callers add the next step.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FsError {
    /// Nothing exists at the path.
    #[error("no such file or folder")]
    NotFound,
    /// A folder where a file was needed.
    #[error("is a folder, not a file")]
    IsDirectory,
    /// A FIFO, socket or device.
    #[error("is a {0}, not a regular file")]
    Special(&'static str),
    /// Larger than the caller's limit.
    #[error("is {size} bytes, over the {limit}-byte limit")]
    TooLarge {
        /// The file's size.
        size: u64,
        /// The limit that applied.
        limit: u64,
    },
    /// The target has other hard links, which a rename would silently detach.
    #[error("has {0} hard links; writing would detach it from the others")]
    Hardlinked(u64),
    /// A parent of the path is a file.
    #[error("a parent of the path is not a folder")]
    NotADirectory,
    /// The operating system refused.
    #[error("permission denied")]
    PermissionDenied,
    /// Any other I/O failure.
    #[error("{0}")]
    Io(std::io::Error),
}

impl From<std::io::Error> for FsError {
    fn from(e: std::io::Error) -> FsError {
        match e.kind() {
            std::io::ErrorKind::NotFound => FsError::NotFound,
            std::io::ErrorKind::PermissionDenied => FsError::PermissionDenied,
            std::io::ErrorKind::IsADirectory => FsError::IsDirectory,
            std::io::ErrorKind::NotADirectory => FsError::NotADirectory,
            _ => FsError::Io(e),
        }
    }
}

/// The kind of thing at a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A folder.
    Dir,
    /// Anything else; the name says what.
    Special(&'static str),
}

/// Facts about a path (symlinks followed).
#[derive(Clone, Debug)]
pub struct Stat {
    /// What it is.
    pub kind: Kind,
    /// Size in bytes.
    pub size: u64,
    /// Last modification.
    pub modified: Option<SystemTime>,
    /// Permission bits.
    pub mode: u32,
    /// Owner and group.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Hard link count.
    pub nlink: u64,
}

fn kind_of(ft: fs::FileType) -> Kind {
    use std::os::unix::fs::FileTypeExt;
    if ft.is_file() {
        Kind::File
    } else if ft.is_dir() {
        Kind::Dir
    } else if ft.is_fifo() {
        Kind::Special("FIFO")
    } else if ft.is_socket() {
        Kind::Special("socket")
    } else if ft.is_block_device() || ft.is_char_device() {
        Kind::Special("device")
    } else {
        Kind::Special("special file")
    }
}

fn stat_of(m: &fs::Metadata) -> Stat {
    Stat {
        kind: kind_of(m.file_type()),
        size: m.len(),
        modified: m.modified().ok(),
        mode: m.permissions().mode(),
        uid: m.uid(),
        gid: m.gid(),
        nlink: m.nlink(),
    }
}

/// Facts about the thing at `path`, following symlinks.
pub fn stat(path: &Path) -> Result<Stat, FsError> {
    Ok(stat_of(&fs::metadata(path)?))
}

/// A file's bytes and the facts read with them (from the same open file).
#[derive(Debug)]
pub struct FileBytes {
    /// The content.
    pub bytes: Vec<u8>,
    /// Facts from the open file.
    pub stat: Stat,
}

/// Reads a regular file of at most `limit` bytes. Special files are refused
/// before any read, and the open never blocks (O_NONBLOCK guards a FIFO swapped
/// in between the check and the open).
pub fn read_file(path: &Path, limit: u64) -> Result<FileBytes, FsError> {
    let pre = stat(path)?;
    match pre.kind {
        Kind::Dir => return Err(FsError::IsDirectory),
        Kind::Special(s) => return Err(FsError::Special(s)),
        Kind::File => {}
    }
    let mut file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let st = stat_of(&file.metadata()?);
    match st.kind {
        Kind::File => {}
        Kind::Dir => return Err(FsError::IsDirectory),
        Kind::Special(s) => return Err(FsError::Special(s)),
    }
    if st.size > limit {
        return Err(FsError::TooLarge {
            size: st.size,
            limit,
        });
    }
    let mut bytes = Vec::with_capacity(st.size as usize);
    // Read one byte past the limit to notice a file that grew after the stat.
    Read::by_ref(&mut file)
        .take(limit + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(FsError::TooLarge {
            size: bytes.len() as u64,
            limit,
        });
    }
    Ok(FileBytes { bytes, stat: st })
}

/// Opens a regular file for reading without blocking (a FIFO swapped in is
/// refused by the fstat that follows the open).
pub fn open_regular(path: &Path) -> Result<File, FsError> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    match kind_of(file.metadata()?.file_type()) {
        Kind::File => Ok(file),
        Kind::Dir => Err(FsError::IsDirectory),
        Kind::Special(s) => Err(FsError::Special(s)),
    }
}

/// One entry of a folder listing.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The entry's name within its folder.
    pub name: String,
    /// Its full path.
    pub path: PathBuf,
    /// Facts (symlinks followed; a dangling link shows as a special file).
    pub stat: Option<Stat>,
}

/// Lists a folder's entries, unsorted.
pub fn list_dir(path: &Path) -> Result<Vec<Entry>, FsError> {
    let mut out = Vec::new();
    for entry in fs::read_dir(path)? {
        let entry = entry?;
        let p = entry.path();
        out.push(Entry {
            name: entry.file_name().to_string_lossy().into_owned(),
            stat: stat(&p).ok(),
            path: p,
        });
    }
    Ok(out)
}

/// The canonical path, used as a file's identity in remembered state.
pub fn canonical(path: &Path) -> Result<PathBuf, FsError> {
    Ok(fs::canonicalize(path)?)
}

/// What a write did.
#[derive(Debug, PartialEq, Eq)]
pub enum Written {
    /// The file did not exist before.
    Created,
    /// An existing file was replaced.
    Replaced,
}

/// New content written and fsynced beside its target, not yet in place.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Prepared {
    /// The temp file.
    pub tmp: PathBuf,
    /// Where it goes (a symlink's destination, not the link).
    pub target: PathBuf,
    /// The target existed when the temp file was made.
    pub replaces: bool,
}

/// Checks that `path` may be replaced: a regular file with one link, or nothing.
/// Returns its facts when it exists.
pub fn check_replaceable(path: &Path) -> Result<Option<Stat>, FsError> {
    let old = match fs::metadata(path) {
        Ok(m) => Some(stat_of(&m)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e.into()),
    };
    if let Some(old) = &old {
        match old.kind {
            Kind::File => {}
            Kind::Dir => return Err(FsError::IsDirectory),
            Kind::Special(s) => return Err(FsError::Special(s)),
        }
        if old.nlink > 1 {
            return Err(FsError::Hardlinked(old.nlink));
        }
    }
    Ok(old)
}

/// The temp path a prepared write of `target` will use: hidden, beside the
/// target, unique to `id`.
pub fn temp_path(target: &Path, id: &str) -> Result<PathBuf, FsError> {
    let target = final_target(target)?;
    let dir = target.parent().ok_or(FsError::IsDirectory)?;
    let name = target.file_name().ok_or(FsError::IsDirectory)?;
    Ok(dir.join(format!(".{}.nib-{id}.tmp", name.to_string_lossy())))
}

/// A symlink is written where it points, as an editor would.
fn final_target(path: &Path) -> Result<PathBuf, FsError> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => match fs::canonicalize(path) {
            Ok(p) => Ok(p),
            // A dangling link: write to the link's own place would replace the
            // link; refuse instead of guessing.
            Err(_) => Err(FsError::Special("dangling symbolic link")),
        },
        _ => Ok(path.to_path_buf()),
    }
}

/// Writes `bytes` to a temp file beside `target` (named by [`temp_path`] with
/// `id`), with the mode and owner of `like` (else 0644 less the umask), and
/// fsyncs it. Missing parent folders are created.
pub fn prepare(
    target: &Path,
    bytes: &[u8],
    like: Option<&Stat>,
    id: &str,
) -> Result<Prepared, FsError> {
    let parent = target.parent().ok_or(FsError::IsDirectory)?;
    fs::create_dir_all(parent)?;
    let old = check_replaceable(target)?;
    let final_path = final_target(target)?;
    let tmp = temp_path(target, id)?;
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)?;
    let result = (|| -> Result<(), FsError> {
        file.write_all(bytes)?;
        if let Some(st) = like.or(old.as_ref()) {
            file.set_permissions(fs::Permissions::from_mode(st.mode & 0o7777))?;
            // Keeping the owner needs privilege; without it the writer owns the file.
            let _ = std::os::unix::fs::fchown(&file, Some(st.uid), Some(st.gid));
        }
        file.sync_all()?;
        Ok(())
    })();
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(Prepared {
        tmp,
        target: final_path,
        replaces: old.is_some(),
    })
}

/// Renames a prepared temp file over its target and fsyncs the folder.
pub fn commit(p: &Prepared) -> Result<(), FsError> {
    fs::rename(&p.tmp, &p.target)?;
    if let Some(dir) = p.target.parent()
        && let Ok(d) = File::open(dir)
    {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Removes a prepared temp file that will not be committed.
pub fn discard(p: &Prepared) {
    let _ = fs::remove_file(&p.tmp);
}

/// Writes `bytes` to `path` atomically: a temp file in the same folder,
/// fsync, rename over the target, fsync of the folder. Missing parent folders
/// are created. A replaced file's mode and owner are kept; a new file gets
/// 0644 less the umask.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<Written, FsError> {
    let p = prepare(path, bytes, None, &unique_id())?;
    if let Err(e) = commit(&p) {
        discard(&p);
        return Err(e);
    }
    Ok(if p.replaces {
        Written::Replaced
    } else {
        Written::Created
    })
}

/// An id unique to this process and call, for temp and journal names.
pub fn unique_id() -> String {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{}-{nanos:x}-{n}", std::process::id())
}

/// Whether anything (a dangling link included) is at `path`.
pub fn exists(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok()
}

/// Removes a file (not a folder).
pub fn remove_file(path: &Path) -> Result<(), FsError> {
    Ok(fs::remove_file(path)?)
}

/// Moves a file or folder to the user's trash (freedesktop layout).
pub fn trash(path: &Path) -> Result<(), FsError> {
    trash::delete(path)
        .map_err(|e| FsError::Io(std::io::Error::other(format!("moving to the trash: {e}"))))
}

/// Opens (creating) a lock file and takes an exclusive lock without waiting.
/// `None` when another process holds it.
pub fn try_lock(path: &Path) -> Result<Option<File>, FsError> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    match f.try_lock() {
        Ok(()) => Ok(Some(f)),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => Err(e.into()),
    }
}

/// Creates a folder and its parents.
pub fn create_dir_all(path: &Path) -> Result<(), FsError> {
    Ok(fs::create_dir_all(path)?)
}

/// Reads a small state file whole (no size or kind checks beyond a limit).
pub fn read_small(path: &Path) -> Result<Vec<u8>, FsError> {
    Ok(read_file(path, 16 * 1024 * 1024)?.bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_keeps_mode_and_replaces_atomically() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.sh");
        fs::write(&p, "old").unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o750)).unwrap();
        assert_eq!(write_atomic(&p, b"new").unwrap(), Written::Replaced);
        assert_eq!(fs::read(&p).unwrap(), b"new");
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o750
        );
        let leftovers: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temp file is left behind");
    }

    #[test]
    fn write_creates_parents() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x/y/z.txt");
        assert_eq!(write_atomic(&p, b"hi").unwrap(), Written::Created);
        assert_eq!(fs::read(&p).unwrap(), b"hi");
    }

    #[test]
    fn hardlinked_target_is_refused_and_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a");
        fs::write(&p, "keep").unwrap();
        fs::hard_link(&p, dir.path().join("b")).unwrap();
        assert!(matches!(
            write_atomic(&p, b"x"),
            Err(FsError::Hardlinked(2))
        ));
        assert_eq!(fs::read(dir.path().join("b")).unwrap(), b"keep");
    }

    #[test]
    fn fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("fifo");
        let status = std::process::Command::new("mkfifo")
            .arg(&p)
            .status()
            .unwrap();
        assert!(status.success());
        assert!(matches!(
            read_file(&p, 1 << 20),
            Err(FsError::Special("FIFO"))
        ));
        assert!(matches!(
            write_atomic(&p, b"x"),
            Err(FsError::Special("FIFO"))
        ));
    }

    #[test]
    fn read_limit_is_enforced() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("big");
        fs::write(&p, vec![b'a'; 100]).unwrap();
        assert!(matches!(
            read_file(&p, 99),
            Err(FsError::TooLarge { size: 100, .. })
        ));
        assert_eq!(read_file(&p, 100).unwrap().bytes.len(), 100);
    }
}
