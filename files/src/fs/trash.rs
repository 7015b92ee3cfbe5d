//! The user's freedesktop trash (`$XDG_DATA_HOME/Trash`, else
//! `~/.local/share/Trash`): a file is moved there by `renameat` from the folder
//! fd it was resolved through, so swapping a parent folder for a symlink after
//! the checks cannot make nib trash a file elsewhere. Across filesystems the
//! file is copied into the trash and then unlinked from its folder fd.
//!
//! The trash lives outside the roots by design: the broker trashes, a
//! sandboxed worker never does. [`list`] reads what is there and [`restore`]
//! puts one entry back (nibash's `trash list` and `trash restore`).

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;

use super::error::FsError;

/// The home trash folder.
pub fn trash_home() -> Result<PathBuf, FsError> {
    if let Some(d) = std::env::var_os("XDG_DATA_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(d).join("Trash"));
    }
    match std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        Some(h) => Ok(PathBuf::from(h).join(".local/share/Trash")),
        None => Err(FsError::Io(std::io::Error::other(
            "neither XDG_DATA_HOME nor HOME is set, so there is no trash",
        ))),
    }
}

fn percent_encode(path: &Path) -> String {
    let mut out = String::new();
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `YYYY-MM-DDThh:mm:ss` (UTC) for `DeletionDate`.
fn deletion_date() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let (days, rem) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn candidate(name: &OsStr, k: usize) -> OsString {
    if k == 0 {
        return name.to_os_string();
    }
    let p = Path::new(name);
    let stem = p.file_stem().unwrap_or(name);
    let mut c = stem.to_os_string();
    c.push(format!(".{k}"));
    if let Some(ext) = p.extension() {
        c.push(".");
        c.push(ext);
    }
    c
}

/// Moves `name` in folder `parent` to the trash. `shown` is the path recorded
/// in the `.trashinfo` file when the folder's own path cannot be read.
pub fn move_to_trash(parent: &OwnedFd, name: &OsStr, shown: &Path) -> Result<(), FsError> {
    let home = trash_home()?;
    let files = home.join("files");
    let info = home.join("info");
    for d in [&files, &info] {
        std::fs::create_dir_all(d)?;
        let _ = std::fs::set_permissions(d, std::os::unix::fs::PermissionsExt::from_mode(0o700));
    }
    let original = super::beneath::fd_path(parent)
        .map(|p| p.join(name))
        .unwrap_or_else(|| shown.to_path_buf());
    let files_fd = rustix::fs::open(
        &files,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let info_fd = rustix::fs::open(
        &info,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    for k in 0..1000 {
        let trash_name = candidate(name, k);
        let mut info_name = trash_name.clone();
        info_name.push(".trashinfo");
        // The info file reserves the name (O_EXCL), as the specification asks.
        let fd = match rustix::fs::openat(
            &info_fd,
            &info_name,
            OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        ) {
            Ok(fd) => fd,
            Err(Errno::EXIST) => continue,
            Err(e) => return Err(e.into()),
        };
        if rustix::fs::statat(&files_fd, &trash_name, AtFlags::SYMLINK_NOFOLLOW).is_ok() {
            let _ = rustix::fs::unlinkat(&info_fd, &info_name, AtFlags::empty());
            continue;
        }
        let mut f = File::from(fd);
        let body = format!(
            "[Trash Info]\nPath={}\nDeletionDate={}\n",
            percent_encode(&original),
            deletion_date()
        );
        let moved = f
            .write_all(body.as_bytes())
            .map_err(FsError::from)
            .and_then(|_| move_file(parent, name, &files_fd, &trash_name));
        if let Err(e) = moved {
            let _ = rustix::fs::unlinkat(&info_fd, &info_name, AtFlags::empty());
            return Err(e);
        }
        return Ok(());
    }
    Err(FsError::Io(std::io::Error::other(
        "no free name in the trash",
    )))
}

fn move_file(
    parent: &OwnedFd,
    name: &OsStr,
    files: &OwnedFd,
    trash_name: &OsStr,
) -> Result<(), FsError> {
    match rustix::fs::renameat(parent, name, files, trash_name) {
        Ok(()) => Ok(()),
        Err(Errno::XDEV) => {
            // Another filesystem: copy the file in, then unlink it from its folder.
            let src = rustix::fs::openat(
                parent,
                name,
                OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
                Mode::empty(),
            )?;
            if rustix::fs::fstat(&src)?.st_mode & 0o170000 != 0o100000 {
                return Err(FsError::Special("non-regular file"));
            }
            let dst = rustix::fs::openat(
                files,
                trash_name,
                OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o600),
            )?;
            let (mut src, mut dst) = (File::from(src), File::from(dst));
            std::io::copy(&mut src, &mut dst)?;
            dst.sync_all()?;
            rustix::fs::unlinkat(parent, name, AtFlags::empty())?;
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// One entry of the trash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trashed {
    /// Where it was.
    pub original: PathBuf,
    /// When it was trashed (`YYYY-MM-DDThh:mm:ss`).
    pub deleted: String,
    /// Its name under `files/`.
    pub name: OsString,
}

fn percent_decode(text: &str) -> PathBuf {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(v) = text
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    PathBuf::from(OsStr::from_bytes(&out))
}

/// What the trash holds, oldest first.
pub fn list() -> Result<Vec<Trashed>, FsError> {
    let info = trash_home()?.join("info");
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(&info) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e.into()),
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(name) = file_name.as_bytes().strip_suffix(b".trashinfo") else {
            continue;
        };
        let Ok(body) = std::fs::read_to_string(entry.path()) else {
            continue;
        };
        let field = |key: &str| {
            body.lines()
                .find_map(|l| l.strip_prefix(key))
                .map(str::to_string)
        };
        if let Some(path) = field("Path=") {
            out.push(Trashed {
                original: percent_decode(&path),
                deleted: field("DeletionDate=").unwrap_or_default(),
                name: OsStr::from_bytes(name).to_os_string(),
            });
        }
    }
    out.sort_by(|a, b| a.deleted.cmp(&b.deleted).then(a.name.cmp(&b.name)));
    Ok(out)
}

/// What the trash holds from beneath `roots`, oldest first: the trash is
/// the user's, shared by every project, and an agent is told only of its
/// own roots' entries (the names of other projects' files stay unsaid).
pub fn list_beneath(roots: &[PathBuf]) -> Result<Vec<Trashed>, FsError> {
    let roots: Vec<PathBuf> = roots
        .iter()
        .map(|r| std::fs::canonicalize(r).unwrap_or_else(|_| r.clone()))
        .collect();
    Ok(list()?
        .into_iter()
        .filter(|t| roots.iter().any(|r| t.original.starts_with(r)))
        .collect())
}

/// Moves the newest trashed entry that was at `original` back into the
/// folder `parent` (resolved by the caller) as `name`. An entry there now is
/// replaced only with `force` (it goes to the trash in its place).
///
/// With `no_git_dirs` (under the sandbox) a folder that holds a git dir is
/// not brought back: its config and hooks were never swept (a call can
/// make a repository and remove it before its end), and the person's git
/// would run them.
pub fn restore(
    original: &Path,
    parent: &OwnedFd,
    name: &OsStr,
    force: bool,
    no_git_dirs: bool,
) -> Result<(), FsError> {
    let entry = list()?
        .into_iter()
        .rev()
        .find(|t| t.original == original)
        .ok_or(FsError::NotFound)?;
    let home = trash_home()?;
    if no_git_dirs && holds_a_git_dir(&home.join("files").join(&entry.name), 0) {
        return Err(FsError::NeedsApproval(format!(
            "holds a git repository, whose config and hooks could run commands in your own git; \
             under NIB_SANDBOX=1 a restore never brings one back — the person can move it back \
             from {} by hand",
            home.join("files").join(&entry.name).display()
        )));
    }
    let files_fd = rustix::fs::open(
        home.join("files"),
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    if rustix::fs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW).is_ok() {
        if !force {
            return Err(FsError::Io(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "something is there now; trash restore -f PATH moves it to the trash and restores",
            )));
        }
        move_to_trash(parent, name, original)?;
    }
    match rustix::fs::renameat(&files_fd, &entry.name, parent, name) {
        Ok(()) => {}
        Err(Errno::XDEV) => {
            return Err(FsError::Io(std::io::Error::other(
                "the trash is on another filesystem than the file's folder; copy it back from the trash by hand",
            )));
        }
        Err(e) => return Err(e.into()),
    }
    let mut info_name = entry.name.clone();
    info_name.push(".trashinfo");
    let _ = std::fs::remove_file(home.join("info").join(info_name));
    Ok(())
}

/// Whether the folder at `dir` (not followed if a link) is, or holds
/// within a few thousand entries, a git dir (or a `.git` entry).
fn holds_a_git_dir(dir: &Path, depth: usize) -> bool {
    let Ok(meta) = std::fs::symlink_metadata(dir) else {
        return false;
    };
    if !meta.is_dir() {
        return false;
    }
    if dir.join("HEAD").is_file() && dir.join("refs").is_dir() {
        return true;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    // A folder too deep or too wide to look through is judged as holding one.
    if depth > 32 {
        return true;
    }
    for (n, e) in entries.flatten().enumerate() {
        if n > 10_000 || e.file_name() == ".git" {
            return true;
        }
        if e.file_type().is_ok_and(|t| t.is_dir()) && holds_a_git_dir(&e.path(), depth + 1) {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_names() {
        let d = deletion_date();
        assert_eq!(d.len(), 19, "{d}");
        assert_eq!(&d[4..5], "-");
        assert_eq!(candidate(OsStr::new("a.txt"), 0), OsString::from("a.txt"));
        assert_eq!(candidate(OsStr::new("a.txt"), 2), OsString::from("a.2.txt"));
        assert_eq!(percent_encode(Path::new("/a b/c%")), "/a%20b/c%25");
        assert_eq!(percent_decode("/a%20b/c%25"), PathBuf::from("/a b/c%"));
    }
}
