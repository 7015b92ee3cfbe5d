//! The call context: what a tool call sees of the server ([`Ctx`]), what it
//! answers ([`ToolOutput`]), the write approvals it may need
//! ([`ApprovalRequest`]), its lenient arguments ([`args`]) and the limit on
//! the text of one file ([`TEXT_LIMIT`]), where the tools' own programs run
//! ([`Programs`]). It sits beneath the file tools and the shell, which all
//! import it; it imports none of them.

pub mod args;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use std::sync::atomic::{AtomicBool, Ordering};

use crate::fs::{Approval, FsError, WriteTarget};
use crate::seen::{Agent, Seen};
use crate::workspace::Workspace;
use nib_settings::FileTools;

/// The largest text file nib reads, edits or writes (8 MiB).
pub const TEXT_LIMIT: u64 = 8 * 1024 * 1024;

/// What a tool call sees of the server.
#[derive(Clone)]
pub struct Ctx<'a> {
    /// Paths and roots.
    pub workspace: &'a Workspace,
    /// What this agent has been shown, and its refused edits.
    pub agent: &'a Mutex<Agent>,
    /// What the file tools read of nib's settings (the state folder, fault
    /// injection, whether the sandbox and programs are on); nothing of the
    /// broker's.
    pub settings: &'a FileTools,
    /// How paths are resolved and confined for this call.
    pub scope: crate::fs::Scope,
    /// Refuse edits that anchor on unseen lines. On for MCP agents; off for
    /// the CLI, where a person or bot with a tagged patch is the author.
    pub enforce_seen: bool,
    /// The client's cancellation and progress, for calls that run long.
    pub live: Option<&'a Live>,
    /// Where the tools' own programs run (read's `path@REV` runs git).
    pub programs: &'a dyn Programs,
    /// Told of each file an edit or write is about to put in place, before
    /// it is there (the broker's nibash reports tell them from a program's
    /// changes); `None` where nothing needs to know.
    pub placing: Option<&'a dyn Placing>,
}

/// Who is told what the file tools are about to write ([`Ctx::placing`]).
/// A trait so the file tools need nothing of the broker's shell.
pub trait Placing: Sync {
    /// `bytes` are about to replace, or create, the file at `path`.
    fn about_to_place(&self, path: &Path, bytes: &[u8]);
}

/// Where a tool's own program runs (read's `path@REV` runs git). The
/// broker confines it as it confines nibash's programs, under the command
/// rules; inside nibash's sandbox the worker's process is confined already.
/// A trait so the file tools need nothing of either.
pub trait Programs: Sync {
    /// The sandbox a program this call starts runs in, for these roots.
    fn sandbox(&self, roots: &[PathBuf]) -> Result<nib_sandbox::Sandbox, String>;
}

impl Ctx<'_> {
    /// Tells [`Ctx::placing`] that `bytes` are about to be put at `path`.
    pub fn about_to_place(&self, path: &Path, bytes: &[u8]) {
        if let Some(p) = self.placing {
            p.about_to_place(path, bytes);
        }
    }

    /// Runs `f` with the agent's state locked.
    pub fn with_agent<R>(&self, f: impl FnOnce(&mut Agent) -> R) -> R {
        let mut guard = self.agent.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut guard)
    }

    /// Where a write to `path` goes. A target that needs approval is used
    /// only once approved (through the folder fd opened before asking);
    /// until then it waits and the call reports [`TargetError::NeedsApproval`].
    pub fn write_target(&self, path: &Path) -> Result<WriteTarget, TargetError> {
        if let Some(t) = self.with_agent(|a| a.approvals.approved(path).cloned()) {
            return crate::fs::refresh(&t).map_err(TargetError::Fs);
        }
        let target = crate::fs::write_target(&self.scope, path).map_err(TargetError::Fs)?;
        match target.approval.clone() {
            None => Ok(target),
            Some(reason) => {
                let req = ApprovalRequest {
                    key: path.to_path_buf(),
                    reason,
                    place: crate::fs::describe(&target),
                };
                self.with_agent(|a| a.approvals.wait(path, target));
                Err(TargetError::NeedsApproval(req))
            }
        }
    }

    /// Forgets the approvals a finished write used.
    pub fn consume_approvals<'p>(&self, paths: impl IntoIterator<Item = &'p Path>) {
        self.with_agent(|a| paths.into_iter().for_each(|p| a.approvals.consume(p)));
    }

    /// Runs `f` with the agent's seen lines locked.
    pub fn with_seen<R>(&self, f: impl FnOnce(&mut Seen) -> R) -> R {
        self.with_agent(|a| f(&mut a.seen))
    }
}

/// A write that must be approved by a person before it happens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApprovalRequest {
    /// The path as the tool resolved it (the key of the waiting target).
    pub key: PathBuf,
    /// Why: outside the roots, or a file that makes code run.
    pub reason: Approval,
    /// Where the write would land, as the kernel holds it (control characters escaped).
    pub place: String,
}

impl ApprovalRequest {
    /// The question put to the person.
    pub fn question(&self) -> String {
        match self.reason {
            Approval::OutsideRoots => format!(
                "nib wants to write {}, which is outside this session's roots. Allow this one write?",
                self.place
            ),
            Approval::RunsCode => format!(
                "nib wants to write {}, a file that makes code run (hooks, tool configuration). Allow this one write?",
                self.place
            ),
        }
    }

    /// What the agent reads when the write is not approved.
    pub fn refusal(&self, why: &str) -> String {
        let how = match self.reason {
            Approval::OutsideRoots => {
                "approve the prompt when it comes, add the folder as a root in the client, or run nib without NIB_CONFIRM_OUTSIDE_ROOTS"
            }
            Approval::RunsCode => {
                "approve the prompt when it comes, or make this change outside nib; under NIB_SANDBOX=1 such files change only with a person's approval"
            }
        };
        let what = match self.reason {
            Approval::OutsideRoots => "is outside the roots",
            Approval::RunsCode => "makes code run",
        };
        format!(
            "{} {what}, and writing it needs a person's approval, which {why}. Nothing was written.\nhint: {how}\n",
            self.place
        )
    }
}

/// A tool's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolOutput {
    /// The text shown to the model.
    pub text: String,
    /// The call failed (the text says why, whether anything was written, and what next).
    pub is_error: bool,
    /// The call stopped at a write that needs approval: ask, then run it again.
    pub approval: Option<ApprovalRequest>,
    /// Images to send as image content: (base64 data, MIME type).
    pub images: Vec<(String, String)>,
    /// The exit status of a command the tool ran (nibash), for `nib sh`.
    pub exit: Option<i32>,
    /// Files the call wrote, as shown, with their new tags (`nib … --json`).
    pub written: Vec<(String, String)>,
    /// Hosts nib's proxy refused this call's programs, `(host:port, why)`,
    /// each once (nibash; named in the answer, asked about in the
    /// 2026-07-28 era).
    pub network_refused: Vec<(String, String)>,
}

impl ToolOutput {
    /// A failed call.
    pub fn error(text: String) -> ToolOutput {
        ToolOutput {
            text,
            is_error: true,
            approval: None,
            images: Vec::new(),
            exit: None,
            written: Vec::new(),
            network_refused: Vec::new(),
        }
    }

    /// A successful call.
    pub fn ok(text: String) -> ToolOutput {
        ToolOutput {
            text,
            is_error: false,
            approval: None,
            images: Vec::new(),
            exit: None,
            written: Vec::new(),
            network_refused: Vec::new(),
        }
    }

    /// A call waiting for approval of a write.
    pub fn needs_approval(req: ApprovalRequest) -> ToolOutput {
        ToolOutput {
            text: req.refusal("has not been given yet"),
            is_error: true,
            approval: Some(req),
            images: Vec::new(),
            exit: None,
            written: Vec::new(),
            network_refused: Vec::new(),
        }
    }
}

/// Appends the `[note: …]` line of a tool's answer, when there are notes.
pub fn push_notes(out: &mut String, notes: &[String]) {
    if !notes.is_empty() {
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&format!("[note: {}]\n", notes.join("; ")));
    }
}

/// Why a write target cannot be used now.
#[derive(Debug)]
pub enum TargetError {
    /// The filesystem refused.
    Fs(FsError),
    /// A person must approve it first.
    NeedsApproval(ApprovalRequest),
}

/// A reporter of progress: seconds so far, and the latest output line.
pub type ProgressFn = Box<dyn Fn(f64, String) + Send + Sync>;

/// What the server hands a running call: the client's cancellation, and
/// where progress goes (when the client asked for progress).
#[derive(Default)]
pub struct Live {
    cancelled: AtomicBool,
    on_cancel: Mutex<Option<Box<dyn FnOnce() + Send>>>,
    progress: Option<ProgressFn>,
}

impl Live {
    /// A call whose progress goes to `f`.
    pub fn with_progress(f: ProgressFn) -> Live {
        Live {
            progress: Some(f),
            ..Live::default()
        }
    }

    /// The client cancelled the call.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
        let f = self
            .on_cancel
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(f) = f {
            f();
        }
    }

    /// Runs `f` when the call is cancelled (at once if it already was).
    pub fn on_cancel(&self, f: Box<dyn FnOnce() + Send>) {
        let mut slot = self.on_cancel.lock().unwrap_or_else(|p| p.into_inner());
        if self.cancelled.load(Ordering::SeqCst) {
            drop(slot);
            f();
        } else {
            *slot = Some(f);
        }
    }

    /// Reports progress, if the client wants it.
    pub fn progress(&self, seconds: f64, message: String) {
        if let Some(p) = &self.progress {
            p(seconds, message);
        }
    }
}
