//! Inside bubblewrap's network namespace, the way out to nib's proxy: a
//! small process that listens on `127.0.0.1:PORT` (the namespace's own
//! loopback; nothing else is there) and joins each connection to the
//! proxy's Unix socket, bound into the sandbox. It holds no authority a
//! program lacks (programs could reach the socket themselves), keeps none
//! of the confined process's descriptors (so the call's output ends with the program),
//! and ends when the confined process (the program, exec'd in its place)
//! ends: bubblewrap's init waits for every process of the namespace, so a
//! bridge still listening would keep the sandbox alive after a broker that
//! died without ending its call.

use std::io;
use std::net::TcpListener;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use crate::ProxyRoute;

/// Copies one way until either side closes, then closes both directions.
fn pump(mut from: impl io::Read, mut to: impl io::Write, done: impl FnOnce()) {
    let _ = io::copy(&mut from, &mut to);
    done();
}

/// A thread for `f`, or `None` when none can be made (the call's pids
/// cgroup is full, say). `std::thread::spawn` would panic there, and a
/// panic on the accepting thread ended the bridge — and with it every
/// connection to the proxy for the rest of the session (issue 58's tunnel
/// flood). A small stack: a thread only copies bytes.
fn thread(f: impl FnOnce() + Send + 'static) -> Option<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .stack_size(64 * 1024)
        .spawn(f)
        .ok()
}

/// After a failed `accept` or a thread that could not be made, the bridge
/// waits this long before accepting again (no busy loop while the
/// descriptors or threads a flood holds are in use).
const BACKOFF: std::time::Duration = std::time::Duration::from_millis(50);

fn join(tcp: std::net::TcpStream, socket: &Path) {
    let Ok(unix) = UnixStream::connect(socket) else {
        return;
    };
    let (Ok(tcp2), Ok(unix2)) = (tcp.try_clone(), unix.try_clone()) else {
        return;
    };
    // Without a second thread the connection is closed (all four
    // descriptors dropped here), and the client sees it end.
    let Some(up) = thread(move || {
        pump(&tcp, &unix, || {
            let _ = unix.shutdown(std::net::Shutdown::Write);
        })
    }) else {
        return;
    };
    pump(&unix2, &tcp2, || {
        let _ = tcp2.shutdown(std::net::Shutdown::Write);
    });
    let _ = up.join();
}

fn serve(listener: TcpListener, socket: PathBuf, confined: libc::pid_t) -> ! {
    std::thread::spawn(move || {
        wait_for_exit(confined);
        std::process::exit(0)
    });
    loop {
        let Ok((conn, _)) = listener.accept() else {
            std::thread::sleep(BACKOFF);
            continue;
        };
        // No Nagle delay on the program's side of the bridge (TLS records).
        let _ = conn.set_nodelay(true);
        let socket = socket.clone();
        // No thread to be had: the connection is closed (dropped with the
        // closure) and the bridge accepts again once threads end.
        if thread(move || join(conn, &socket)).is_none() {
            std::thread::sleep(BACKOFF);
        }
    }
}

/// Returns when process `pid` (of this PID namespace) has ended.
fn wait_for_exit(pid: libc::pid_t) {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor
    // or -1; nothing else owns the descriptor it returns.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if let Ok(fd) = i32::try_from(fd)
        && fd >= 0
    {
        let mut poll = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        loop {
            // SAFETY: poll on one pollfd this function owns; a pidfd turns
            // readable when its process ends.
            let ready = unsafe { libc::poll(&mut poll, 1, -1) };
            if ready > 0 {
                return;
            }
            if ready < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                break;
            }
        }
    }
    // Without pidfds (before Linux 5.3): look every 200 ms. A PID namespace
    // this young does not reuse the confined process's pid in that time.
    // SAFETY: kill with signal 0 only checks that the process exists.
    while unsafe { libc::kill(pid, 0) } == 0 {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// Starts the bridge for `route` (a grandchild, so the program never
/// waits for it), ending when this process ends. Call while the process is
/// single-threaded.
pub fn start(route: &ProxyRoute) -> Result<(), String> {
    let listener = TcpListener::bind(("127.0.0.1", route.port)).map_err(|e| {
        format!(
            "the proxy bridge cannot listen on 127.0.0.1:{}: {e}",
            route.port
        )
    })?;
    // SAFETY: getpid has no preconditions.
    let confined = unsafe { libc::getpid() };
    // SAFETY: the confined process is single-threaded here, so the child may run
    // arbitrary code after fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err("fork for the proxy bridge failed".into());
    }
    if pid > 0 {
        let mut status = 0;
        // SAFETY: waitpid on our own child with a pointer to a local.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        return Ok(());
    }
    // The child: fork the bridge and leave, so it is reparented to the
    // namespace's init.
    // SAFETY: still single-threaded (the child of a single-threaded fork).
    if unsafe { libc::fork() } != 0 {
        // SAFETY: _exit ends this intermediate process without running
        // anything of the parent's (no atexit handlers, no flushes).
        unsafe { libc::_exit(0) };
    }
    // The bridge: stdio to /dev/null, the listener as fd 3, nothing else.
    // SAFETY: plain descriptor calls on descriptors this process owns;
    // nothing else in this process uses them afterwards.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        for fd in 0..3 {
            libc::dup2(null, fd);
        }
        libc::dup2(listener.as_raw_fd(), 3);
        libc::syscall(libc::SYS_close_range, 4u32, u32::MAX, 0u32);
    }
    std::mem::forget(listener);
    // SAFETY: fd 3 is the listening socket, duplicated above and owned by
    // nothing else now.
    let listener = unsafe { TcpListener::from_raw_fd(3) };
    serve(listener, route.socket.clone(), confined)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bridge of a confined process that ended stops listening (nothing keeps
    /// the sandbox's namespace alive on its account), even though nobody
    /// kills it: here there is no namespace and no cgroup to do that.
    #[test]
    #[allow(clippy::unwrap_used)]
    fn the_bridge_ends_when_its_process_ends() {
        let port = TcpListener::bind(("127.0.0.1", 0))
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dir = std::env::temp_dir().join(format!("nib-bridge-test-{}", std::process::id()));
        let route = ProxyRoute {
            port,
            socket: dir.join("proxy.sock"),
        };
        // SAFETY: the child only starts the bridge (which forks from a
        // single-threaded process: the child has only the forking thread)
        // and ends with _exit, running nothing else of the test's.
        let confined = unsafe { libc::fork() };
        assert!(confined >= 0);
        if confined == 0 {
            let code = i32::from(start(&route).is_err());
            // SAFETY: ends the child without running the parent's handlers.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: waitpid on our own child with a pointer to a local.
        unsafe { libc::waitpid(confined, &mut status, 0) };
        assert_eq!(status, 0, "the bridge did not start");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            assert!(
                std::time::Instant::now() < deadline,
                "the bridge still listens after its confined process ended"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}
