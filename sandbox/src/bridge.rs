//! Inside bubblewrap's network namespace, the way out to nib's proxy: a
//! small process that listens on `127.0.0.1:PORT` (the namespace's own
//! loopback; nothing else is there) and joins each connection to the
//! proxy's Unix socket, bound into the sandbox. It holds no authority a
//! program lacks (programs could reach the socket themselves), keeps none
//! of the worker's descriptors (so the call's output ends with the program),
//! and ends with the namespace.

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

fn join(tcp: std::net::TcpStream, socket: &Path) {
    let Ok(unix) = UnixStream::connect(socket) else {
        return;
    };
    let (Ok(tcp2), Ok(unix2)) = (tcp.try_clone(), unix.try_clone()) else {
        return;
    };
    let up = std::thread::spawn(move || {
        pump(&tcp, &unix, || {
            let _ = unix.shutdown(std::net::Shutdown::Write);
        })
    });
    pump(&unix2, &tcp2, || {
        let _ = tcp2.shutdown(std::net::Shutdown::Write);
    });
    let _ = up.join();
}

fn serve(listener: TcpListener, socket: PathBuf) -> ! {
    for conn in listener.incoming().flatten() {
        // No Nagle delay on the program's side of the bridge (TLS records).
        let _ = conn.set_nodelay(true);
        let socket = socket.clone();
        std::thread::spawn(move || join(conn, &socket));
    }
    std::process::exit(0)
}

/// Starts the bridge for `route` (a grandchild, so the program never
/// waits for it). Call while the process is single-threaded.
pub fn start(route: &ProxyRoute) -> Result<(), String> {
    let listener = TcpListener::bind(("127.0.0.1", route.port)).map_err(|e| {
        format!(
            "the proxy bridge cannot listen on 127.0.0.1:{}: {e}",
            route.port
        )
    })?;
    // SAFETY: the worker is single-threaded here, so the child may run
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
    serve(listener, route.socket.clone())
}
