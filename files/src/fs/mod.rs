//! The one module through which the broker touches files.
//!
//! Every tool stats, reads, lists and writes through these functions, under a
//! [`Scope`] the server builds for each call:
//!
//! First, [`Scope::Open`] (the default, as in the original): no restriction
//! beyond the operating system's. Second, [`Scope::Confirm`]
//! (`NIB_CONFIRM_OUTSIDE_ROOTS=1`): reads are open; a write whose folder does
//! not resolve beneath a root is marked [`Approval::OutsideRoots`] and happens
//! only after the user approves it, through the folder fd opened before
//! asking. Third, [`Scope::Sandbox`] (`NIB_SANDBOX=1`): every path, reads
//! included, must resolve beneath a root, as the kernel decides
//! ([`beneath`]); symlinks that lead out and magic links are refused, writes do
//! not follow a symlink at the target, and writes to files that make code run
//! are marked [`Approval::RunsCode`].
//!
//! Everywhere: special files (FIFOs, sockets, devices) are refused without
//! blocking (opened non-blocking, judged by fstat); writes create a temp file
//! in the target's folder fd, fsync it and rename it within that fd, keeping
//! the replaced file's mode and owner; a hardlinked target is refused; deletes
//! go to the freedesktop trash by renaming from the folder fd ([`trash`]).

pub mod beneath;
mod error;
pub mod git_guard;
pub mod planted;
pub mod runs_code;
pub mod settings_targets;
pub mod submodules;
pub mod trash;

use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

pub use beneath::Root;
pub use error::FsError;

/// How paths are resolved for one call (see the module doc, in order).
#[derive(Clone, Debug)]
pub enum Scope {
    /// No restriction beyond the operating system's.
    Open,
    /// Reads open; writes outside the roots need approval.
    Confirm(Arc<[Root]>),
    /// Everything beneath the roots; writes to files that run code need approval.
    Sandbox(Arc<[Root]>),
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
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Hard link count.
    pub nlink: u64,
}

fn kind_of(ft: FileType) -> Kind {
    match ft {
        FileType::RegularFile => Kind::File,
        FileType::Directory => Kind::Dir,
        FileType::Fifo => Kind::Special("FIFO"),
        FileType::Socket => Kind::Special("socket"),
        FileType::BlockDevice | FileType::CharacterDevice => Kind::Special("device"),
        FileType::Symlink => Kind::Special("symbolic link"),
        _ => Kind::Special("special file"),
    }
}

fn stat_of(st: &rustix::fs::Stat) -> Stat {
    let modified = (st.st_mtime >= 0).then(|| {
        SystemTime::UNIX_EPOCH + Duration::new(st.st_mtime as u64, st.st_mtime_nsec as u32)
    });
    Stat {
        kind: kind_of(FileType::from_raw_mode(st.st_mode)),
        size: st.st_size.max(0) as u64,
        modified,
        mode: st.st_mode & 0o7777,
        uid: st.st_uid,
        gid: st.st_gid,
        nlink: st.st_nlink,
    }
}

fn fstat(fd: impl AsFd) -> Result<Stat, FsError> {
    Ok(stat_of(&rustix::fs::fstat(fd)?))
}

/// Opens `path` under the scope. Reads are confined only by [`Scope::Sandbox`].
fn open(scope: &Scope, path: &Path, flags: OFlags) -> Result<OwnedFd, FsError> {
    match scope {
        Scope::Sandbox(roots) => Ok(beneath::open(roots, path, flags, Mode::empty())?.0),
        Scope::Open | Scope::Confirm(_) => {
            if path.as_os_str().as_encoded_bytes().contains(&0) {
                return Err(FsError::Io(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "the path contains a NUL byte",
                )));
            }
            Ok(rustix::fs::open(
                path,
                flags | OFlags::CLOEXEC,
                Mode::empty(),
            )?)
        }
    }
}

/// Facts about the thing at `path`, following symlinks (within the roots under the sandbox).
pub fn stat(scope: &Scope, path: &Path) -> Result<Stat, FsError> {
    fstat(open(scope, path, OFlags::PATH)?)
}

/// Whether anything (a dangling link included) is at `path`.
pub fn exists(scope: &Scope, path: &Path) -> bool {
    open(scope, path, OFlags::PATH | OFlags::NOFOLLOW).is_ok()
}

/// A file's bytes and the facts read with them (from the same open file).
#[derive(Debug)]
pub struct FileBytes {
    /// The content.
    pub bytes: Vec<u8>,
    /// Facts from the open file.
    pub stat: Stat,
}

/// Opens a regular file for reading without blocking: a FIFO or device is
/// refused by the fstat that follows the open.
pub fn open_regular(scope: &Scope, path: &Path) -> Result<File, FsError> {
    let fd = open(
        scope,
        path,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY,
    )?;
    let st = fstat(&fd)?;
    match st.kind {
        Kind::File if st.nlink > 1 && matches!(scope, Scope::Sandbox(_)) => {
            Err(FsError::HardlinkedRead(st.nlink))
        }
        Kind::File => Ok(File::from(fd)),
        Kind::Dir => Err(FsError::IsDirectory),
        Kind::Special(s) => Err(FsError::Special(s)),
    }
}

/// Reads a regular file of at most `limit` bytes.
pub fn read_file(scope: &Scope, path: &Path, limit: u64) -> Result<FileBytes, FsError> {
    let mut file = open_regular(scope, path)?;
    let st = fstat(&file)?;
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

/// One entry of a folder listing.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The entry's name within its folder.
    pub name: String,
    /// Its full path.
    pub path: PathBuf,
    /// Facts (symlinks followed, within the roots under the sandbox); `None`
    /// for a dangling link or one that leads out.
    pub stat: Option<Stat>,
}

/// Lists a folder's entries, unsorted.
pub fn list_dir(scope: &Scope, path: &Path) -> Result<Vec<Entry>, FsError> {
    let dir = open(scope, path, OFlags::RDONLY | OFlags::DIRECTORY)?;
    let mut out = Vec::new();
    for entry in rustix::fs::Dir::read_from(&dir)? {
        let entry = entry?;
        let name_bytes = entry.file_name().to_bytes();
        if name_bytes == b"." || name_bytes == b".." {
            continue;
        }
        let name = String::from_utf8_lossy(name_bytes).into_owned();
        let os_name = std::ffi::OsStr::from_encoded_bytes_checked(name_bytes);
        let full = path.join(os_name);
        let stat = match scope {
            Scope::Sandbox(_) => {
                // A link is followed only where it stays beneath the roots.
                let own =
                    rustix::fs::statat(&dir, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW).ok();
                match own.map(|s| stat_of(&s)) {
                    Some(s) if s.kind == Kind::Special("symbolic link") => stat(scope, &full).ok(),
                    other => other,
                }
            }
            _ => rustix::fs::statat(&dir, entry.file_name(), AtFlags::empty())
                .ok()
                .map(|s| stat_of(&s)),
        };
        out.push(Entry {
            name,
            path: full,
            stat,
        });
    }
    Ok(out)
}

/// `OsStr` from raw bytes (Unix: any bytes are a valid name).
trait FromBytes {
    fn from_encoded_bytes_checked(b: &[u8]) -> &std::ffi::OsStr;
}

impl FromBytes for std::ffi::OsStr {
    fn from_encoded_bytes_checked(b: &[u8]) -> &std::ffi::OsStr {
        use std::os::unix::ffi::OsStrExt;
        std::ffi::OsStr::from_bytes(b)
    }
}

/// The canonical path, used only as a file's identity in remembered state
/// (never to decide access).
pub fn canonical(path: &Path) -> Result<PathBuf, FsError> {
    Ok(std::fs::canonicalize(path)?)
}

/// Why a person must approve a write before it happens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Approval {
    /// The target is outside the roots (`NIB_CONFIRM_OUTSIDE_ROOTS=1`).
    OutsideRoots,
    /// The target makes code run (a git dir's hooks and config, a git dir
    /// anywhere in the roots, `nib.json`, `.mcp.json`,
    /// `.claude/settings*.json`: [`runs_code`]) and the sandbox is on.
    RunsCode,
}

/// A write's destination: its folder, opened once, and the name in it.
#[derive(Clone, Debug)]
pub struct WriteTarget {
    parent: Arc<OwnedFd>,
    name: OsString,
    /// The path as named (a symlink's destination under the open scope).
    pub path: PathBuf,
    /// The file there now, if any.
    pub old: Option<Stat>,
    /// Why the write needs approval, if it does.
    pub approval: Option<Approval>,
}

/// What is at `name` in a folder now, checked for a write: nothing, or a
/// regular file with one link (a folder, special file, symlink or hardlinked
/// file is refused).
fn existing(parent: &OwnedFd, name: &std::ffi::OsStr) -> Result<Option<Stat>, FsError> {
    let old = match rustix::fs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => Some(stat_of(&st)),
        Err(rustix::io::Errno::NOENT) => None,
        Err(e) => return Err(e.into()),
    };
    if let Some(old) = &old {
        match old.kind {
            Kind::File => {}
            Kind::Dir => return Err(FsError::IsDirectory),
            Kind::Special("symbolic link") => return Err(FsError::Symlink),
            Kind::Special(s) => return Err(FsError::Special(s)),
        }
        if old.nlink > 1 {
            return Err(FsError::Hardlinked(old.nlink));
        }
    }
    Ok(old)
}

/// Re-checks a target resolved earlier (an approved one) through its folder fd.
pub fn refresh(target: &WriteTarget) -> Result<WriteTarget, FsError> {
    let old = existing(&target.parent, &target.name)?;
    Ok(WriteTarget {
        old,
        ..target.clone()
    })
}

/// Where a write target really is: its folder as the kernel holds it, and its
/// name, with control characters escaped (what a person is asked to approve).
pub fn describe(target: &WriteTarget) -> String {
    let place = beneath::fd_path(&*target.parent)
        .map(|p| p.join(&target.name))
        .unwrap_or_else(|| target.path.clone());
    nib_text::path_text::escape_control(&place.to_string_lossy())
}

/// Where `name` in the folder `fd` (opened beneath `root`) really is,
/// relative to the root: the folder as the kernel holds it, so a folder
/// reached through a symlink counts as where it leads (`cfg -> .git` makes
/// `cfg/config` the git dir's `config`). Falls back to `path` as written.
fn real_relative(fd: &OwnedFd, root: &Root, name: &std::ffi::OsStr, path: &Path) -> PathBuf {
    beneath::fd_path(fd)
        .and_then(|real| real.strip_prefix(&root.path).ok().map(|r| r.join(name)))
        .unwrap_or_else(|| beneath::relative(&root.path, path))
}

/// Resolves where a write to `path` goes, creating missing folders, and
/// checks the file there (a folder, a special file or a hardlinked file is
/// refused; under the sandbox a symlink is refused too).
pub fn write_target(scope: &Scope, path: &Path) -> Result<WriteTarget, FsError> {
    let (parent, name, approval, path) = match scope {
        Scope::Sandbox(roots) => {
            let (fd, i, name) = beneath::open_parent_creating(roots, path)?;
            let rel = real_relative(&fd, &roots[i], &name, path);
            let approval =
                runs_code::write_needs_approval(&roots[i].path, &rel).then_some(Approval::RunsCode);
            (fd, name, approval, path.to_path_buf())
        }
        Scope::Confirm(roots) => match beneath::open_parent_creating(roots, path) {
            Ok((fd, _, name)) => (fd, name, None, path.to_path_buf()),
            Err(beneath::Miss::Outside) => {
                let (fd, name, real) = open_parent_by_path(path)?;
                (fd, name, Some(Approval::OutsideRoots), real)
            }
            Err(e) => return Err(e.into()),
        },
        Scope::Open => {
            let (fd, name, real) = open_parent_by_path(path)?;
            (fd, name, None, real)
        }
    };
    let old = existing(&parent, &name)?;
    Ok(WriteTarget {
        parent: Arc::new(parent),
        name,
        path,
        old,
        approval,
    })
}

/// Without roots: follow a symlink at the target (as an editor would), create
/// missing folders, open the folder.
fn open_parent_by_path(path: &Path) -> Result<(OwnedFd, OsString, PathBuf), FsError> {
    let real = match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => match std::fs::canonicalize(path) {
            Ok(p) => p,
            Err(_) => return Err(FsError::Special("dangling symbolic link")),
        },
        _ => path.to_path_buf(),
    };
    let name = real.file_name().ok_or(FsError::IsDirectory)?.to_os_string();
    let parent = real.parent().ok_or(FsError::IsDirectory)?;
    if name.as_encoded_bytes().contains(&0) {
        return Err(nul_in_path());
    }
    let fd = open_folder_creating(parent)?;
    Ok((fd, name, real))
}

fn nul_in_path() -> FsError {
    FsError::Io(std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        "the path contains a NUL byte",
    ))
}

/// Without roots: creates the folder (and its parents) and opens it as an
/// `O_PATH` directory fd.
fn open_folder_creating(folder: &Path) -> Result<OwnedFd, FsError> {
    if folder.as_os_str().as_encoded_bytes().contains(&0) {
        return Err(nul_in_path());
    }
    std::fs::create_dir_all(folder)?;
    Ok(rustix::fs::open(
        folder,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
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
#[derive(Debug)]
pub struct Prepared {
    target: WriteTarget,
    tmp_name: OsString,
    /// The temp file's path (for the journal).
    pub tmp_path: PathBuf,
}

impl Prepared {
    /// The target path (for the journal).
    pub fn target_path(&self) -> &Path {
        &self.target.path
    }
}

/// The temp file name a prepared write with `id` uses: hidden, unique.
fn temp_name(name: &std::ffi::OsStr, id: &str) -> OsString {
    let mut t = OsString::from(".");
    t.push(name);
    t.push(format!(".nib-{id}.tmp"));
    t
}

/// Whether a file name is one [`temp_name`] makes: a write of nib's in
/// progress, not a file of the person's.
pub fn is_temp_name(name: &std::ffi::OsStr) -> bool {
    let name = name.as_encoded_bytes();
    name.starts_with(b".") && name.ends_with(b".tmp") && name.windows(5).any(|w| w == b".nib-")
}

/// The temp path [`prepare`] will use for `target` with `id` (for the journal).
pub fn temp_path(target: &WriteTarget, id: &str) -> PathBuf {
    target
        .path
        .parent()
        .unwrap_or(Path::new("/"))
        .join(temp_name(&target.name, id))
}

/// Writes `bytes` to a temp file in the target's folder, with the mode and
/// owner of `like` (else of the file it replaces, else 0644 less the umask),
/// and fsyncs it.
pub fn prepare(
    target: &WriteTarget,
    bytes: &[u8],
    like: Option<&Stat>,
    id: &str,
) -> Result<Prepared, FsError> {
    let tmp_name = temp_name(&target.name, id);
    let fd = rustix::fs::openat(
        &*target.parent,
        &tmp_name,
        OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    )?;
    let mut file = File::from(fd);
    let result = (|| -> Result<(), FsError> {
        file.write_all(bytes)?;
        if let Some(st) = like.or(target.old.as_ref()) {
            file.set_permissions(std::fs::Permissions::from_mode(st.mode & 0o7777))?;
            // Keeping the owner needs privilege; without it the writer owns the file.
            let _ = std::os::unix::fs::fchown(&file, Some(st.uid), Some(st.gid));
        }
        file.sync_all()?;
        Ok(())
    })();
    if let Err(e) = result {
        let _ = rustix::fs::unlinkat(&*target.parent, &tmp_name, AtFlags::empty());
        return Err(e);
    }
    let tmp_path = temp_path(target, id);
    Ok(Prepared {
        target: target.clone(),
        tmp_name,
        tmp_path,
    })
}

fn sync_dir(parent: &OwnedFd) {
    if let Ok(d) = rustix::fs::openat(
        parent,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        let _ = rustix::fs::fsync(d);
    }
}

/// Renames a prepared temp file over its target within the folder fd, and
/// fsyncs the folder.
pub fn commit(p: &Prepared) -> Result<(), FsError> {
    let parent = &*p.target.parent;
    rustix::fs::renameat(parent, &p.tmp_name, parent, &p.target.name)?;
    sync_dir(parent);
    Ok(())
}

/// Removes a prepared temp file that will not be committed.
pub fn discard(p: &Prepared) {
    let _ = rustix::fs::unlinkat(&*p.target.parent, &p.tmp_name, AtFlags::empty());
}

/// Writes `bytes` to `path` atomically under the scope. There is no one to
/// ask here: a target that needs a person's approval (it makes code run
/// under the sandbox, wherever its real folder leads, or lies outside the
/// roots in confirm mode) is refused with [`FsError::NeedsApproval`] and
/// nothing is written. Callers with an approval flow use [`write_target`].
pub fn write_atomic(scope: &Scope, path: &Path, bytes: &[u8]) -> Result<Written, FsError> {
    let target = write_target(scope, path)?;
    if let Some(why) = &target.approval {
        return Err(needs_approval(why, &target));
    }
    let p = prepare(&target, bytes, None, &unique_id())?;
    if let Err(e) = commit(&p) {
        discard(&p);
        return Err(e);
    }
    Ok(if target.old.is_some() {
        Written::Replaced
    } else {
        Written::Created
    })
}

/// The refusal of a write that needs approval where no one can be asked.
fn needs_approval(why: &Approval, target: &WriteTarget) -> FsError {
    let what = match why {
        Approval::OutsideRoots => "is outside the roots",
        Approval::RunsCode => "makes code run (a git dir, hooks, tool configuration)",
    };
    FsError::NeedsApproval(format!(
        "leads to {}, which {what}: writing it needs a person's approval, and nothing can ask for it here",
        describe(target)
    ))
}

/// Removes the file at a target (the source of a move).
pub fn remove(target: &WriteTarget) -> Result<(), FsError> {
    Ok(rustix::fs::unlinkat(
        &*target.parent,
        &target.name,
        AtFlags::empty(),
    )?)
}

/// Moves the file at a target to the user's trash.
pub fn trash(target: &WriteTarget) -> Result<(), FsError> {
    trash::move_to_trash(&target.parent, &target.name, &target.path)
}

/// Moves the entry at `path` (a file, a folder or a link, never followed) to
/// the user's trash, for `rm` in nibash. Resolved like a write: beneath the
/// roots under the sandbox, where files that make code run are refused; in
/// confirm mode an entry outside the roots is refused (no one is asked from
/// inside a shell command). `recursive` allows folders. Nothing is created.
pub fn trash_entry(scope: &Scope, path: &Path, recursive: bool) -> Result<(), FsError> {
    let name = path.file_name().ok_or(FsError::IsDirectory)?.to_os_string();
    let parent_path = path.parent().unwrap_or(Path::new("/"));
    let dir_flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let parent = match scope {
        Scope::Sandbox(roots) | Scope::Confirm(roots) => {
            match beneath::open(roots, parent_path, dir_flags, Mode::empty()) {
                Ok((fd, i, _)) => {
                    let rel = real_relative(&fd, &roots[i], &name, path);
                    if matches!(scope, Scope::Sandbox(_)) && runs_code::makes_code_run(&rel) {
                        return Err(FsError::RunsCode);
                    }
                    fd
                }
                Err(beneath::Miss::Outside) => return Err(FsError::OutsideRoots),
                Err(beneath::Miss::Failed(e)) => return Err(e.into()),
            }
        }
        Scope::Open => rustix::fs::open(parent_path, dir_flags, Mode::empty())?,
    };
    let st = match rustix::fs::statat(&parent, &name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => stat_of(&st),
        Err(rustix::io::Errno::NOENT) => return Err(FsError::NotFound),
        Err(e) => return Err(e.into()),
    };
    if st.kind == Kind::Dir && !recursive {
        return Err(FsError::IsDirectory);
    }
    trash::move_to_trash(&parent, &name, path)
}

/// Puts the newest trashed entry that was at `path` back there (nibash's
/// `trash restore`), resolving its folder like a write's (created if it is
/// gone). Something at the path now is replaced only with `force`. Under
/// the sandbox a restore is a write like any other: where the folder
/// really leads decides, and a place that makes code run (a git dir
/// anywhere, hooks, tool configuration) is refused — a restore asks no one.
pub fn restore_entry(scope: &Scope, path: &Path, force: bool) -> Result<(), FsError> {
    let (parent, name) = match scope {
        Scope::Sandbox(roots) | Scope::Confirm(roots) => {
            let (fd, i, name) = beneath::open_parent_creating(roots, path)?;
            let rel = real_relative(&fd, &roots[i], &name, path);
            if matches!(scope, Scope::Sandbox(_))
                && runs_code::write_needs_approval(&roots[i].path, &rel)
            {
                return Err(FsError::RunsCode);
            }
            (fd, name)
        }
        Scope::Open => {
            let name = path.file_name().ok_or(FsError::IsDirectory)?.to_os_string();
            let fd = open_folder_creating(path.parent().unwrap_or(Path::new("/")))?;
            (fd, name)
        }
    };
    trash::restore(
        path,
        &parent,
        &name,
        force,
        matches!(scope, Scope::Sandbox(_)),
    )
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

// State files: nib's own folder (the journal), trusted paths, no scope.

/// Opens (creating) a lock file and takes an exclusive lock without waiting.
/// `None` when another process holds it.
pub fn try_lock(path: &Path) -> Result<Option<File>, FsError> {
    let f = std::fs::OpenOptions::new()
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

/// Writes one of nib's own state files (the status file, what agents saw,
/// command-line tokens) whole: a temp file beside it renamed over it, so a
/// reader never sees half of it, but without fsync — it is not the user's
/// file, and a crash costs at most the last record, so no durable work is
/// put on a call's path for it.
pub fn write_state(path: &Path, bytes: &[u8]) -> Result<(), FsError> {
    let name = path.file_name().ok_or(FsError::IsDirectory)?;
    let tmp = path.with_file_name(temp_name(name, &unique_id()));
    if let Err(e) = std::fs::write(&tmp, bytes) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e.into());
    }
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        e.into()
    })
}

/// Creates a folder and its parents (state folders).
pub fn create_dir_all(path: &Path) -> Result<(), FsError> {
    Ok(std::fs::create_dir_all(path)?)
}

/// Reads a small state file whole.
pub fn read_small(path: &Path) -> Result<Vec<u8>, FsError> {
    Ok(read_file(&Scope::Open, path, 16 * 1024 * 1024)?.bytes)
}

/// Recovery of an interrupted commit, by path: rename `tmp` over `target` if
/// `tmp` is still there.
pub fn recover_place(tmp: &Path, target: &Path) -> Result<(), FsError> {
    if std::fs::symlink_metadata(tmp).is_ok() {
        std::fs::rename(tmp, target)?;
    }
    Ok(())
}

/// Recovery: remove a file if it is still there.
pub fn recover_remove(path: &Path) -> Result<(), FsError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Recovery: trash a file if it is still there.
pub fn recover_trash(path: &Path) -> Result<(), FsError> {
    if std::fs::symlink_metadata(path).is_err() {
        return Ok(());
    }
    trash(&write_target(&Scope::Open, path)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPEN: Scope = Scope::Open;

    #[test]
    fn write_keeps_mode_and_replaces_atomically() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.sh");
        std::fs::write(&p, "old").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o750)).unwrap();
        assert_eq!(write_atomic(&OPEN, &p, b"new").unwrap(), Written::Replaced);
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o750
        );
        let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temp file is left behind");
    }

    #[test]
    fn temp_names_are_known_and_others_are_not() {
        let name = std::ffi::OsStr::new("f.ts");
        assert!(is_temp_name(&temp_name(name, &unique_id())));
        for other in ["f.ts", ".f.ts", ".f.ts.tmp", "f.nib-1.tmp", ".nib-"] {
            assert!(!is_temp_name(std::ffi::OsStr::new(other)), "{other}");
        }
    }

    #[test]
    fn write_creates_parents() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x/y/z.txt");
        assert_eq!(write_atomic(&OPEN, &p, b"hi").unwrap(), Written::Created);
        assert_eq!(std::fs::read(&p).unwrap(), b"hi");
    }

    #[test]
    fn hardlinked_target_is_refused_and_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a");
        std::fs::write(&p, "keep").unwrap();
        std::fs::hard_link(&p, dir.path().join("b")).unwrap();
        assert!(matches!(
            write_atomic(&OPEN, &p, b"x"),
            Err(FsError::Hardlinked(2))
        ));
        assert_eq!(std::fs::read(dir.path().join("b")).unwrap(), b"keep");
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
            read_file(&OPEN, &p, 1 << 20),
            Err(FsError::Special("FIFO"))
        ));
        assert!(matches!(
            write_atomic(&OPEN, &p, b"x"),
            Err(FsError::Special("FIFO"))
        ));
    }

    #[test]
    fn read_limit_is_enforced() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("big");
        std::fs::write(&p, vec![b'a'; 100]).unwrap();
        assert!(matches!(
            read_file(&OPEN, &p, 99),
            Err(FsError::TooLarge { size: 100, .. })
        ));
        assert_eq!(read_file(&OPEN, &p, 100).unwrap().bytes.len(), 100);
    }

    #[test]
    fn sandbox_writes_stay_beneath_the_root() {
        let outside = tempfile::tempdir().unwrap();
        let rootdir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), rootdir.path().join("out")).unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("new.txt"),
            rootdir.path().join("dangling"),
        )
        .unwrap();
        let scope = Scope::Sandbox(Arc::from(vec![Root::open(rootdir.path()).unwrap()]));
        let root = std::fs::canonicalize(rootdir.path()).unwrap();
        assert!(matches!(
            write_atomic(&scope, &root.join("out/x.txt"), b"x"),
            Err(FsError::OutsideRoots)
        ));
        assert!(matches!(
            write_atomic(&scope, &root.join("dangling"), b"x"),
            Err(FsError::Symlink)
        ));
        assert!(matches!(
            write_atomic(&scope, &root.join("../escape.txt"), b"x"),
            Err(FsError::OutsideRoots)
        ));
        assert_eq!(
            std::fs::read_dir(outside.path()).unwrap().count(),
            0,
            "nothing appeared outside"
        );
        assert_eq!(
            write_atomic(&scope, &root.join("in/side.txt"), b"ok").unwrap(),
            Written::Created
        );
        let t = write_target(&scope, &root.join(".git/hooks/pre-commit")).unwrap();
        assert_eq!(t.approval, Some(Approval::RunsCode));
    }
}
