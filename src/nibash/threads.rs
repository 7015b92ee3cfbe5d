//! The helper threads of calls (the reader of a call's output, the reader
//! of its worker's events, the waiter for its end), kept between calls: a
//! thread whose task is done waits a while for the next task instead of
//! ending, so a turn's parallel calls do not each start and end three
//! threads. What the tasks do is `call.rs`'s.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, mpsc};
use std::time::Duration;

type Task = Box<dyn FnOnce() + Send + 'static>;

/// How long an idle thread waits for a task before it ends.
const IDLE: Duration = Duration::from_secs(30);

/// The threads waiting for a task: each one's number and its inbox.
static WAITING: Mutex<Vec<(u64, mpsc::Sender<Task>)>> = Mutex::new(Vec::new());

fn waiting() -> MutexGuard<'static, Vec<(u64, mpsc::Sender<Task>)>> {
    WAITING.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs `task` on a waiting thread, or on a new one when none waits.
pub fn run(task: impl FnOnce() + Send + 'static) {
    let mut task: Task = Box::new(task);
    loop {
        let Some((_, inbox)) = waiting().pop() else {
            break;
        };
        // A thread taken off the list always reads its inbox (see `serve`),
        // so a task sent is a task run.
        match inbox.send(task) {
            Ok(()) => return,
            Err(mpsc::SendError(back)) => task = back,
        }
    }
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    std::thread::Builder::new()
        .name("nib-call".into())
        .spawn(move || serve(id, task))
        .map(drop)
        .unwrap_or_else(|e| panic!("cannot start a thread for a call: {e}"));
}

/// A thread's life: its first task, then the tasks it is sent while it
/// waits, until it waited [`IDLE`] for none.
fn serve(id: u64, first: Task) {
    let (tx, inbox) = mpsc::channel::<Task>();
    let mut next = Some(first);
    while let Some(task) = next.take() {
        task();
        waiting().push((id, tx.clone()));
        next = match inbox.recv_timeout(IDLE) {
            Ok(t) => Some(t),
            Err(_) => {
                let mut list = waiting();
                match list.iter().position(|(n, _)| *n == id) {
                    // Still listed: nobody can send any more once it is off.
                    Some(at) => {
                        list.swap_remove(at);
                        None
                    }
                    // Taken by a sender just now: its task is on the way.
                    None => {
                        drop(list);
                        inbox.recv().ok()
                    }
                }
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_task_runs_and_threads_are_reused() {
        let (tx, rx) = mpsc::channel();
        let mut threads = std::collections::HashSet::new();
        for round in 0..3 {
            for i in 0..8 {
                let tx = tx.clone();
                run(move || {
                    let _ = tx.send((i, std::thread::current().id()));
                });
            }
            let mut got: Vec<_> = (0..8)
                .map(|_| rx.recv_timeout(Duration::from_secs(5)))
                .collect::<Result<_, _>>()
                .unwrap_or_default();
            assert_eq!(got.len(), 8, "a task of round {round} did not run");
            got.sort_by_key(|(i, _)| *i);
            assert!(got.iter().enumerate().all(|(k, (i, _))| *i == k));
            threads.extend(got.into_iter().map(|(_, t)| t));
            // Let the threads come back to the list.
            std::thread::sleep(Duration::from_millis(50));
        }
        // 24 tasks in rounds of eight ran on fewer than 24 threads (other
        // tests may take some of the waiting ones meanwhile).
        assert!(threads.len() < 24, "no thread was reused");
    }
}
