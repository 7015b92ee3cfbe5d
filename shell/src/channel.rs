//! The channel between the broker and a nibash worker: one JSON object per
//! line over a Unix socketpair (fd 3 in the worker).
//!
//! The broker writes one [`Request`] first; the worker then sends [`Event`]s
//! as the call runs and ends with [`Event::Done`]. Events that need an answer
//! (trash, job control) carry an id, and the broker answers with a [`Reply`]
//! of the same id. Both sides use these types; only this module knows the
//! framing.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The argument that starts a nibash worker.
pub const NIBASH_ARG: &str = "__nibash";

/// The argument after [`NIBASH_ARG`] that starts the session's zygote,
/// which forks a worker for each call (`nib_sandbox::serve_zygote`).
pub const ZYGOTE_ARG: &str = "--zygote";

/// The bytes a worker writes to its output when the command line is done,
/// before it says so on the channel: everything before them in the pipe is
/// the call's output (the channel and the pipe are not ordered otherwise).
pub fn end_mark(token: &str) -> Vec<u8> {
    format!("\u{0}nib-end:{token}\u{0}").into_bytes()
}

/// What the broker asks a worker to run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// The command line.
    pub command: String,
    /// The directory it starts in (the project directory).
    pub cwd: PathBuf,
    /// The named directories (`hash -d`), name → folder.
    pub names: BTreeMap<String, PathBuf>,
    /// Where each was defined, as nibash_status labels it (`seen often`:
    /// nib made it from what the agent was shown, and an agent's own
    /// `hash -d` may take its name).
    #[serde(default)]
    pub name_sources: BTreeMap<String, String>,
    /// The job number this call gets if it leaves jobs running (`$!` is `%N`).
    pub job: u32,
    /// Program rules the interpreter enforces again as commands start.
    pub rules: Vec<RuntimeRule>,
    /// The token of the end mark the worker writes to its output.
    pub mark: String,
    /// When the worker's temp folder is the sandbox's private one: what
    /// becomes of it, for the line naming what the call wrote there.
    #[serde(default)]
    pub private_tmp: Option<String>,
}

/// A program rule as the worker enforces it: by the name a command is
/// started with, and its arguments.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeRule {
    /// Program base names.
    pub programs: Vec<String>,
    /// A regex over the arguments, if the rule has one.
    pub args: Option<String>,
    /// The refusal, naming the rule and its why.
    pub message: String,
}

/// What a worker tells the broker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Event {
    /// nib's own command printed these lines of `path` (at `tag`) to the model.
    Seen {
        /// The file, absolute.
        path: PathBuf,
        /// The tag printed in its header.
        tag: String,
        /// Inclusive line ranges printed as anchored rows.
        lines: Vec<(usize, usize)>,
    },
    /// A request the broker answers with a [`Reply`] of the same id.
    Ask {
        /// Matches the reply.
        id: u64,
        /// What is asked.
        ask: Ask,
    },
    /// `hash -d name=dir` defined a named directory.
    Name {
        /// The name.
        name: String,
        /// The folder, absolute.
        dir: PathBuf,
    },
    /// A command printed a reshaped form of this output (git's): the whole
    /// of it goes to the call's log.
    Whole {
        /// The command, as the log names it.
        command: String,
        /// What it printed (stdout, then stderr).
        text: String,
        /// Something the answer left out matters (advice, progress, a
        /// failure's details): the answer names the log.
        named: bool,
    },
    /// The command line finished; `background` when jobs it started still run.
    Done {
        /// Its exit status.
        code: i32,
        /// Jobs started with `&` are still running.
        background: bool,
        /// A failure the status hides, for the closing line.
        hidden: Option<String>,
        /// The output named what the call wrote to the private /tmp.
        #[serde(default)]
        tmp_named: bool,
    },
}

/// What a worker asks the broker to do.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ask {
    /// Move these paths (absolute) to the trash.
    Trash {
        /// The paths.
        paths: Vec<PathBuf>,
        /// Folders are trashed whole (`rm -r`).
        recursive: bool,
        /// Missing paths are not an error (`rm -f`).
        force: bool,
    },
    /// `trash list`.
    TrashList,
    /// `trash restore [-f] PATH`.
    TrashRestore {
        /// The original path.
        path: PathBuf,
        /// Replace a file that is there now.
        force: bool,
    },
    /// `jobs`.
    Jobs,
    /// `wait [%N…]`: the jobs' output since last shown, and their status.
    Wait {
        /// Job numbers; empty waits for all.
        jobs: Vec<u32>,
    },
    /// Before `git submodule init` or `git submodule update --init`: add
    /// the submodules `top`'s `.gitmodules` declares to its git dir's
    /// config (read-only for programs), only their url and `active`.
    RegisterSubmodules {
        /// The work tree (absolute).
        top: PathBuf,
        /// The submodules' paths asked for, relative to `top`; empty for all.
        paths: Vec<String>,
        /// `--recursive`: also those of submodules already checked out.
        recursive: bool,
    },
    /// Before `git submodule update`: take the `core.worktree` line git
    /// would rewrite (and cannot: the config is read-only for programs)
    /// out of the configs of the submodules at `paths`, until
    /// [`Ask::RestoreWorktrees`] or the call's end.
    HideWorktrees {
        /// The work tree (absolute).
        top: PathBuf,
        /// The submodules' paths, relative to `top`.
        paths: Vec<String>,
        /// `--recursive`: also the submodules nested in those.
        recursive: bool,
    },
    /// After that git: write back what [`Ask::HideWorktrees`] took out.
    RestoreWorktrees,
    /// `kill [-SIG] %N…`.
    Kill {
        /// Job numbers.
        jobs: Vec<u32>,
        /// Signal number.
        signal: i32,
    },
}

/// The broker's answer to an [`Event::Ask`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reply {
    /// The id of the question.
    pub id: u64,
    /// Text for stdout.
    pub out: String,
    /// Text for stderr.
    pub err: String,
    /// The exit status of the command that asked.
    pub code: i32,
}

/// One side of the channel.
pub struct Channel {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Channel {
    /// Wraps a connected socket.
    pub fn new(stream: UnixStream) -> std::io::Result<Channel> {
        let writer = stream.try_clone()?;
        Ok(Channel {
            reader: BufReader::new(stream),
            writer,
        })
    }

    /// Sends one message.
    pub fn send<T: Serialize>(&mut self, msg: &T) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(msg).map_err(std::io::Error::other)?;
        line.push(b'\n');
        self.writer.write_all(&line)
    }

    /// Receives one message; `None` when the other side closed.
    pub fn recv<T: for<'de> Deserialize<'de>>(&mut self) -> std::io::Result<Option<T>> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        serde_json::from_str(&line)
            .map(Some)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
    }

    /// Whether a message (or the other side's end) is there to read now.
    pub fn has_message(&self) -> bool {
        use rustix::event::{PollFd, PollFlags, poll};
        if !self.reader.buffer().is_empty() {
            return true;
        }
        let mut fds = [PollFd::new(self.reader.get_ref(), PollFlags::IN)];
        poll(&mut fds, Some(&rustix::time::Timespec::default())).is_ok_and(|n| n > 0)
    }

    /// A second handle for sending from another thread.
    pub fn sender(&self) -> std::io::Result<UnixStream> {
        self.writer.try_clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_cross_the_channel_whole() {
        let (a, b) = match UnixStream::pair() {
            Ok(p) => p,
            Err(e) => panic!("socketpair: {e}"),
        };
        let (mut a, mut b) = match (Channel::new(a), Channel::new(b)) {
            (Ok(a), Ok(b)) => (a, b),
            _ => panic!("channel"),
        };
        let ev = Event::Ask {
            id: 7,
            ask: Ask::Trash {
                paths: vec![PathBuf::from("/p/a b\nc")],
                recursive: true,
                force: false,
            },
        };
        a.send(&ev).ok();
        let got: Option<Event> = b.recv().ok().flatten();
        assert_eq!(got, Some(ev));
        drop(a);
        let end: Option<Event> = b.recv().ok().flatten();
        assert_eq!(end, None);
    }
}
