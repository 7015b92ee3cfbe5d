//! The consumer of a call's worker: one queue, fed by three small threads
//! (output, channel events, the worker's end), taken in order by one
//! [`Consumer`] — which answers the worker's asks ([`super::asks`]),
//! collects the rows it reports as seen, and stops a flood of output.

use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use nib_files::context::Live;
use nib_shell::channel::{Channel, Event};

use crate::nibash::jobs::{Entry, ending_words};

use super::asks::{Asker, name_is_valid};
use super::seen_rows::SeenReport;

/// How long the answer waits for the rest of the output after the command
/// line is done (a process it left may still hold the pipe).
const DRAIN_GRACE: Duration = Duration::from_millis(300);

/// How often a running call reports progress (when the client asked).
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// Output (kept and dropped) past which a call or job is stopped.
pub(super) const OUTPUT_STOP: usize = 64 << 20;

/// The last non-empty line of some output, for progress messages.
pub(super) fn last_line(output: &[u8]) -> String {
    let text = String::from_utf8_lossy(&output[output.len().saturating_sub(4096)..]);
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .chars()
        .take(200)
        .collect()
}

pub(super) enum Msg {
    Out(Vec<u8>),
    Eof,
    Event(Event),
    Exit(i32),
    /// The client cancelled the call: end its whole tree.
    Cancel,
    /// The worker's end mark: the call's output is all read.
    Mark,
}

/// Takes everything a worker does, in order.
pub(super) struct Consumer {
    pub(super) entry: Arc<Entry>,
    pub(super) rx: Receiver<Msg>,
    pub(super) replies: Option<Channel>,
    pub(super) asker: Asker,
    pub(super) seen: Vec<SeenReport>,
    /// Whole outputs of reshaped commands: (command, text).
    pub(super) wholes: Vec<(String, String)>,
    /// One of them left out something that matters.
    pub(super) wholes_named: bool,
    pub(super) done_at: Option<Instant>,
    pub(super) cancelled: bool,
    /// Execs the call's tree was refused (while program rules exist).
    pub(super) exec_log: Option<nib_sandbox::ExecLog>,
    /// How many of them the call's answer named (a job names the rest);
    /// `None` while the call has not answered.
    pub(super) refusals_shown: Option<usize>,
    /// The paths programs could not change in this call (bound read-only):
    /// the sweep at the end leaves them alone.
    pub(super) held: Vec<PathBuf>,
}

impl Consumer {
    /// Takes the worker's messages until the call can answer: the command
    /// line done (and its output drained, for at most [`DRAIN_GRACE`]), the
    /// deadline reached (the call turns into a job), or the call
    /// cancelled and its tree ended. Reports progress to `live` meanwhile.
    pub(super) fn until_answer(&mut self, live: Option<&Live>, deadline: Option<Instant>) {
        let mut next_progress = Instant::now() + PROGRESS_EVERY;
        loop {
            let finished = {
                let s = self.entry.state();
                s.call_finished() || (self.cancelled && s.ended())
            };
            if finished {
                break;
            }
            let now = Instant::now();
            if !self.cancelled && deadline.is_none_or(|d| now >= d) {
                break;
            }
            if now >= next_progress {
                if let Some(live) = live {
                    let last = last_line(&self.entry.state().output);
                    live.progress(self.entry.age().as_secs_f64(), last);
                }
                next_progress = now + PROGRESS_EVERY;
            }
            if let Some(t) = self.done_at
                && now >= t + DRAIN_GRACE
            {
                break;
            }
            let mut until = deadline.map(|d| d.min(next_progress));
            if let Some(t) = self.done_at {
                until = until.map(|d| d.min(t + DRAIN_GRACE));
            }
            if self.cancelled {
                until = Some(now + Duration::from_millis(100));
            }
            if !self.step(until, deadline) {
                break;
            }
        }
    }

    /// For a one-call `nib sh`: waits until what the line left running
    /// ends, or stops it at the deadline. Returns whether it was stopped.
    pub(super) fn until_all_ended(&mut self, deadline: Option<Instant>) -> bool {
        loop {
            let (ended, done) = {
                let s = self.entry.state();
                (s.ended(), s.command_done())
            };
            if ended || (done && !self.entry.state().background && self.done_at.is_some()) {
                break;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                let stopped = self.entry.kill();
                let until = Instant::now() + Duration::from_secs(2);
                while !self.entry.state().ended() && Instant::now() < until {
                    if !self.step(Some(until), None) {
                        break;
                    }
                }
                return stopped;
            }
            if !self.step(deadline, deadline) {
                break;
            }
        }
        false
    }

    /// Handles one message, waiting at most until `until`. Returns false when
    /// nothing more can come.
    pub(super) fn step(&mut self, until: Option<Instant>, deadline: Option<Instant>) -> bool {
        let msg = match until {
            None => match self.rx.recv() {
                Ok(m) => m,
                Err(_) => return false,
            },
            Some(t) => match self
                .rx
                .recv_timeout(t.saturating_duration_since(Instant::now()))
            {
                Ok(m) => m,
                Err(RecvTimeoutError::Timeout) => return true,
                Err(RecvTimeoutError::Disconnected) => return false,
            },
        };
        self.handle(msg, deadline);
        true
    }

    pub(super) fn handle(&mut self, msg: Msg, deadline: Option<Instant>) {
        self.take(msg, deadline);
        // The command line is done only when the worker said so on the
        // channel *and* its end mark came through the pipe: neither a
        // program's output nor a lone event can end a call. From then on
        // the answer waits (a short grace at most) for processes that still
        // hold the pipe to finish writing.
        if self.done_at.is_none() && self.entry.state().command_done() {
            self.done_at = Some(Instant::now());
        }
    }

    pub(super) fn take(&mut self, msg: Msg, deadline: Option<Instant>) {
        match msg {
            Msg::Out(b) => {
                let mut over = false;
                self.entry.update(|s| {
                    s.append(&b);
                    over = s.output.len() + s.dropped > OUTPUT_STOP && !s.flooded;
                    if over {
                        s.flooded = true;
                    }
                });
                if over {
                    // A program that floods its output is stopped, as the
                    // sandbox stops one that passes its cap.
                    self.entry.kill();
                }
            }
            Msg::Eof => self.entry.update(|s| s.eof = true),
            Msg::Mark => self.entry.update(|s| s.marked = true),
            Msg::Exit(code) => {
                // A job's tree is gone: the execs refused after its call
                // answered end its output, before it counts as ended.
                if let (Some(shown), Some(log)) = (self.refusals_shown, &self.exec_log) {
                    let all = log.refusals();
                    let later = exec_refusals(all.get(shown..).unwrap_or_default());
                    if !later.is_empty() {
                        self.entry.update(|s| s.append(later.as_bytes()));
                    }
                }
                self.entry.record_exit(code)
            }
            Msg::Cancel => {
                self.cancelled = true;
                self.entry.kill();
            }
            Msg::Event(Event::Seen { path, tag, lines }) => self.seen.push((path, tag, lines)),
            Msg::Event(Event::Whole {
                command,
                text,
                named,
            }) => {
                self.wholes_named |= named;
                // Bounded like the call's own output.
                let kept: usize = self.wholes.iter().map(|(_, t)| t.len()).sum();
                if kept + text.len() <= OUTPUT_STOP {
                    self.wholes.push((command, text));
                }
            }
            Msg::Event(Event::Name { name, dir }) => {
                // Untrusted like every event: a name nib would accept from
                // `hash -d`, for a folder the call's scope can reach.
                if name_is_valid(&name) && self.asker.is_folder(&dir) {
                    // A conflict keeps the first definition; the worker
                    // already told the agent what it defined.
                    let _ = self.asker.workspace.define_name(
                        &name,
                        &dir,
                        nib_files::names::Source::Hash,
                    );
                }
            }
            Msg::Event(Event::Done {
                code,
                background,
                hidden,
                tmp_named,
            }) => {
                if tmp_named {
                    self.asker.nib.note_tmp_named(&self.entry.owner);
                }
                self.entry.update(|s| {
                    s.done = Some(code);
                    s.background = background;
                    s.hidden = hidden;
                });
            }
            Msg::Event(Event::Ask { id, ask }) => {
                let mut reply = self.asker.answer(ask, deadline);
                reply.id = id;
                if let Some(c) = &mut self.replies {
                    let _ = c.send(&reply);
                }
            }
        }
    }

    /// Runs until the worker ended and its output is read (a job's thread).
    pub(super) fn finish(mut self) {
        while !self.entry.state().ended() {
            if !self.step(None, None) {
                break;
            }
        }
        // What the job left in git dirs for the person's git is taken out
        // now that it ended, and said in its output.
        let since = std::time::SystemTime::now() - self.entry.age();
        let mut swept = nib_files::fs::git_guard::sweep(&self.asker.scope, &self.held, since);
        swept.extend(nib_files::fs::planted::sweep(
            &self.asker.scope,
            &self.held,
            since,
        ));
        if !swept.is_empty() {
            let mut s = self.entry.state();
            for line in swept {
                s.output.extend_from_slice(line.as_bytes());
                s.output.push(b'\n');
            }
        }
        // A client with nib's channel hears of the end at once.
        let text = {
            let s = self.entry.state();
            let output = String::from_utf8_lossy(&s.output);
            let rows: Vec<&str> = output.lines().collect();
            let last = rows[rows.len().saturating_sub(20)..].join("\n");
            format!(
                "[job %{} {}: {}]\n{last}{}",
                self.entry.id,
                ending_words(&s),
                self.entry.command,
                if last.is_empty() { "" } else { "\n" }
            )
        };
        self.asker
            .nib
            .announce(&self.entry.owner, self.entry.id, text);
    }
}

/// How many bytes at the end of `held` could be the start of `mark`.
pub(super) fn partial_mark(held: &[u8], mark: &[u8]) -> usize {
    (1..mark.len().min(held.len() + 1))
        .rev()
        .find(|&k| held.ends_with(&mark[..k]))
        .unwrap_or(0)
}

pub(super) fn spawn_reader(mut pipe: std::io::PipeReader, tx: Sender<Msg>, mark: Vec<u8>) {
    crate::nibash::threads::run(move || {
        let mut buf = vec![0u8; 64 * 1024];
        // Bytes held back because they may be the start of the mark.
        let mut held: Vec<u8> = Vec::new();
        let mut marked = false;
        loop {
            match pipe.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    held.extend_from_slice(&buf[..n]);
                    if !marked && let Some(at) = memchr::memmem::find(&held, &mark) {
                        let after = held.split_off(at + mark.len());
                        held.truncate(at);
                        let before = std::mem::replace(&mut held, after);
                        marked = true;
                        if tx.send(Msg::Out(before)).is_err() || tx.send(Msg::Mark).is_err() {
                            break;
                        }
                    }
                    let keep = if marked {
                        0
                    } else {
                        partial_mark(&held, &mark)
                    };
                    // The bytes to pass on, without copying them again.
                    let rest = held.split_off(held.len() - keep);
                    let out = std::mem::replace(&mut held, rest);
                    if !out.is_empty() && tx.send(Msg::Out(out)).is_err() {
                        break;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        if !held.is_empty() {
            let _ = tx.send(Msg::Out(held));
        }
        let _ = tx.send(Msg::Eof);
    });
}

/// Forwards the worker's events; the receiver hears when the channel closed.
pub(super) fn spawn_events(mut chan: Channel, tx: Sender<Msg>) -> mpsc::Receiver<()> {
    let (closed_tx, closed) = mpsc::channel();
    crate::nibash::threads::run(move || {
        while let Ok(Some(ev)) = chan.recv::<Event>() {
            if tx.send(Msg::Event(ev)).is_err() {
                break;
            }
        }
        let _ = closed_tx.send(());
    });
    closed
}

/// Reports the worker's end — after every event it sent (`events_closed`
/// hears when the channel is read to its end), so a call that ends with its
/// worker never loses a `Done` or a name still in the channel.
pub(super) fn spawn_waiter(
    mut worker: crate::nibash::warm::Process,
    entry: Arc<Entry>,
    tx: Sender<Msg>,
    events_closed: mpsc::Receiver<()>,
) {
    crate::nibash::threads::run(move || {
        worker.wait_exited();
        entry.forget_killer();
        // The worker's end of the channel closed with it (no program holds
        // it); a descendant that kept it open only delays this briefly.
        let _ = events_closed.recv_timeout(Duration::from_secs(2));
        let status = worker.wait_blocking();
        // What bubblewrap said when it could not set the sandbox up.
        let said = worker.start_messages();
        if !said.is_empty() {
            let _ = tx.send(Msg::Out(said));
        }
        let code = status
            .map(|s| {
                use std::os::unix::process::ExitStatusExt;
                s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(9))
            })
            .unwrap_or(1);
        let _ = tx.send(Msg::Exit(code));
    });
}

/// One closing line per exec the rules refused while the call ran.
pub(super) fn exec_refusals(refusals: &[nib_sandbox::ExecRefusal]) -> String {
    let mut out = String::new();
    for r in refusals.iter().take(5) {
        out.push_str(&format!(
            "[exec refused: {} tried to run {}; {}. It failed with \"Permission denied\" and the call went on]\n",
            // The worker itself (brush) shows as nib's binary.
            if r.caller == "nib" { "nibash" } else { &r.caller },
            r.program.display(),
            r.why
        ));
    }
    if refusals.len() > 5 {
        out.push_str(&format!(
            "[{} more execs were refused by the rules]\n",
            refusals.len() - 5
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use nib_shell::channel::end_mark;

    #[test]
    fn the_end_mark_splits_the_output_even_across_reads() {
        let mark = end_mark("t0k");
        assert_eq!(partial_mark(b"abc", &mark), 0);
        assert_eq!(partial_mark(b"abc\0nib", &mark), 4);
        let (r, mut w) = match std::io::pipe() {
            Ok(p) => p,
            Err(e) => panic!("{e}"),
        };
        let (tx, rx) = mpsc::channel();
        let m2 = mark.clone();
        spawn_reader(r, tx, m2);
        use std::io::Write;
        let _ = w.write_all(b"before\n\0nib");
        std::thread::sleep(Duration::from_millis(50));
        let _ = w.write_all(&mark[4..]);
        let _ = w.write_all(b"after\n");
        drop(w);
        let mut seen = Vec::new();
        while let Ok(m) = rx.recv_timeout(Duration::from_secs(5)) {
            match m {
                Msg::Out(b) => seen.push(String::from_utf8_lossy(&b).into_owned()),
                Msg::Mark => seen.push("<mark>".into()),
                Msg::Eof => break,
                _ => {}
            }
        }
        let joined = seen.concat();
        assert_eq!(joined, "before\n<mark>after\n", "{seen:?}");
    }
}

/// Forged worker events (as a program that reached the channel, or a worker
/// gone wrong, could send them) cannot make the broker count lines as seen,
/// trash or name anything outside the roots, or end a call early.
#[cfg(test)]
mod forged {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use std::path::Path;

    use nib_files::workspace::Workspace;
    use nib_shell::channel::{Ask, end_mark};
    use nib_text::text::Text;

    use crate::nibash::Nibash;
    use crate::nibash::call::seen_rows::ShownRows;

    /// A small deterministic generator, so every run tries the same cases.
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            self.0 >> 33
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    #[test]
    fn seen_reports_count_only_rows_the_output_shows() {
        let text = Text::decode(b"fn main() {\n    let a = 1;\n    a\n}\n\n// 3:x\n");
        let tag = "1A2B";
        let path = Path::new("/p/src/main.rs");
        let mut rng = Lcg(7);
        for _ in 0..2000 {
            let mut out = String::new();
            let mut truly = std::collections::BTreeSet::new();
            for _ in 0..rng.below(12) {
                let k = 1 + rng.below(text.len() as u64 + 2) as usize;
                let line = text.line(k).unwrap_or("ghost");
                match rng.below(8) {
                    0 => out.push_str(&format!("[src/main.rs#{tag}]\n")),
                    1 => out.push_str("[src/main.rs#FFFF]\n"),
                    2 => out.push_str(&format!("[src/other.rs#{tag}]\n")),
                    3 => out.push_str(&format!("{k}:{line} forged\n")),
                    4 => out.push_str(&format!("{k}|{line}\n")),
                    5 => out.push_str(&format!("0{k}:{line}\n")),
                    _ => {
                        let mark = ["", "*", " "][rng.below(3) as usize];
                        out.push_str(&format!("{mark}{k}:{line}\n"));
                    }
                }
            }
            // What a careful reader of `out` would count as shown.
            let mut header_ok = false;
            for l in out.lines() {
                if l.starts_with('[') {
                    header_ok = l == format!("[src/main.rs#{tag}]");
                    continue;
                }
                let row = l.trim_start_matches(['*', ' ']);
                if let Some((n, t)) = row.split_once(':')
                    && header_ok
                    && !n.starts_with('0')
                    && let Ok(n) = n.parse::<usize>()
                    && text.line(n) == Some(t)
                {
                    truly.insert(n);
                }
            }
            let claimed = [(1, text.len() + 5)];
            let got = ShownRows::of(&out).lines_of(path, tag, &text, &claimed);
            let got: std::collections::BTreeSet<usize> = got.into_iter().collect();
            assert_eq!(got, truly, "{out}");
        }
    }

    #[test]
    fn forged_marks_in_the_output_never_end_the_call() {
        let token = nib_files::fs::unique_id();
        let mark = end_mark(&token);
        let mut rng = Lcg(11);
        for round in 0..200 {
            let (r, mut w) = std::io::pipe().unwrap();
            let (tx, rx) = mpsc::channel();
            spawn_reader(r, tx, mark.clone());
            let mut sent = Vec::new();
            for _ in 0..rng.below(20) {
                let piece: Vec<u8> = match rng.below(5) {
                    0 => end_mark("forged-token"),
                    1 => mark[..1 + rng.below(mark.len() as u64 - 1) as usize].to_vec(),
                    2 => end_mark(&token[..token.len() - 1]),
                    3 => b"\0nib-end:".to_vec(),
                    _ => (0..rng.below(64)).map(|_| rng.below(256) as u8).collect(),
                };
                use std::io::Write;
                w.write_all(&piece).unwrap();
                sent.extend_from_slice(&piece);
            }
            drop(w);
            let mut got = Vec::new();
            let mut marked = false;
            loop {
                match rx.recv_timeout(Duration::from_secs(5)).unwrap() {
                    Msg::Out(b) => got.extend_from_slice(&b),
                    Msg::Mark => marked = true,
                    Msg::Eof => break,
                    _ => {}
                }
            }
            if sent.windows(mark.len()).any(|w| w == mark.as_slice()) {
                // The pieces happened to spell the real mark (a prefix of it
                // and a piece starting with its last byte): not a forgery.
                continue;
            }
            assert!(!marked, "round {round}: a forged mark ended the output");
            assert_eq!(got, sent, "round {round}: output bytes changed");
        }
    }

    #[test]
    fn forged_events_cannot_reach_outside_the_roots_or_end_the_call() {
        let base = tempfile::tempdir().unwrap();
        let base_path = std::fs::canonicalize(base.path()).unwrap();
        let root = base_path.join("root");
        let outside = base_path.join("outside");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("canary"), "keep").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("out")).unwrap();
        let workspace = Workspace::new(root.clone());
        let scope = workspace.scope(true, false).unwrap();
        let nib = Arc::new(Nibash::default());
        let entry = nib.jobs.start(&Arc::from(""), "forged", None);
        let (_tx, rx) = mpsc::channel();
        let mut consumer = Consumer {
            entry: Arc::clone(&entry),
            rx,
            replies: None,
            asker: Asker {
                scope,
                nib: Arc::clone(&nib),
                owner: Arc::clone(&entry.owner),
                workspace,
                trashed: Vec::new(),
                hidden: Vec::new(),
            },
            seen: Vec::new(),
            wholes: Vec::new(),
            wholes_named: false,
            done_at: None,
            cancelled: false,
            exec_log: None,
            refusals_shown: None,
            held: Vec::new(),
        };
        let targets = [
            outside.join("canary"),
            root.join("out/canary"),
            root.join("../outside/canary"),
            PathBuf::from("../outside/canary"),
            outside.clone(),
            PathBuf::from("/"),
        ];
        let mut rng = Lcg(3);
        for i in 0..300 {
            let t = targets[rng.below(targets.len() as u64) as usize].clone();
            let event = match rng.below(5) {
                0 => Event::Ask {
                    id: i,
                    ask: Ask::Trash {
                        paths: vec![t],
                        recursive: rng.below(2) == 0,
                        force: rng.below(2) == 0,
                    },
                },
                1 => Event::Ask {
                    id: i,
                    ask: Ask::TrashRestore {
                        path: t,
                        force: true,
                    },
                },
                2 => Event::Name {
                    name: ["out", "../x", "a\nb", "-x", "ok"][rng.below(5) as usize].into(),
                    dir: t,
                },
                3 => Event::Done {
                    code: 0,
                    background: false,
                    hidden: None,
                    tmp_named: false,
                },
                _ => Event::Seen {
                    path: t,
                    tag: "0000".into(),
                    lines: vec![(1, 9)],
                },
            };
            consumer.handle(Msg::Event(event), None);
            consumer.handle(Msg::Out(end_mark("forged")), None);
            assert!(
                outside.join("canary").exists(),
                "a forged ask trashed the canary"
            );
            assert!(
                !entry.state().call_finished() && consumer.done_at.is_none(),
                "forged events ended the call"
            );
        }
        let names = consumer.asker.workspace.names();
        assert!(
            names.list().iter().all(|n| n.dir.starts_with(&root)),
            "a forged name points outside the roots: {names:?}"
        );
        // The worker's own end (its mark through the pipe) still ends it.
        consumer.handle(Msg::Mark, None);
        assert!(entry.state().command_done() && consumer.done_at.is_some());
    }
}
