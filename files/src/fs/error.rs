//! What went wrong touching a path ([`FsError`]), and how the system's
//! errors map to it.

use super::beneath;

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
    /// The path leads out of every root (NIB_SANDBOX=1).
    #[error(
        "is outside the roots (NIB_SANDBOX=1 keeps every tool inside them; symlinks and `..` that lead out are refused)"
    )]
    OutsideRoots,
    /// A file with several names, read under the sandbox: another name may be outside.
    #[error(
        "has {0} hard links; under NIB_SANDBOX=1 nib reads only files it can tell are inside the roots, and another name of this one may be outside"
    )]
    HardlinkedRead(u64),
    /// A symlink where a write needs a file (NIB_SANDBOX=1).
    #[error("is a symbolic link; under NIB_SANDBOX=1 nib writes files, not through links")]
    Symlink,
    /// A file that makes code run, which a shell command may not remove
    /// under the sandbox.
    #[error(
        "makes code run (hooks, tool configuration); under NIB_SANDBOX=1 it changes only through nib's tools, with a person's approval"
    )]
    RunsCode,
    /// The write needs a person's approval, and this path cannot ask
    /// (undo, a trash restore, the command line).
    #[error("{0}")]
    NeedsApproval(String),
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

impl From<rustix::io::Errno> for FsError {
    fn from(e: rustix::io::Errno) -> FsError {
        std::io::Error::from(e).into()
    }
}

impl From<beneath::Miss> for FsError {
    fn from(m: beneath::Miss) -> FsError {
        match m {
            beneath::Miss::Outside => FsError::OutsideRoots,
            beneath::Miss::Failed(e) => e.into(),
        }
    }
}
