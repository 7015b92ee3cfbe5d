//! A probe program for the sandbox's effect tests: it tries one thing named
//! by its first argument and reports on stdout; it also serves as the confining
//! entry when called with the entry argument.

#![deny(missing_docs)]
#![allow(clippy::print_stdout, unsafe_code)]

use std::ffi::OsString;
use std::io::Write;

fn main() {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    if args.first().is_some_and(|a| a == nib_sandbox::ENTRY_ARG) {
        nib_sandbox::entry_main(&args[1..]);
    }
    let a: Vec<String> = args
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    let arg = |i: usize| a.get(i).cloned().unwrap_or_default();
    match arg(0).as_str() {
        "write-temp" | "write" | "read" => files(&arg(0), &arg),
        "tcp" | "mptcp" | "udp" | "proxy-get" | "unix" | "abstract" => network(&arg(0), &arg),
        "ptrace" | "keyctl" | "userns" | "status" | "pid" | "fds" | "tty" | "tiocsti" | "env" => {
            process(&arg(0))
        }
        "orphan" | "forkbomb" | "yes" | "sleep" => load(&arg(0), &arg),
        "broker" | "proxied" => brokers(&arg(0), &arg),
        other => {
            println!("unknown probe {other}");
            std::process::exit(2);
        }
    }
}

/// Writes and reads of files.
fn files(what: &str, arg: &dyn Fn(usize) -> String) {
    match what {
        "write-temp" => {
            let p = std::env::temp_dir().join("probe-temp-file");
            match std::fs::write(&p, "temp\n") {
                Ok(()) => println!("wrote {}", p.display()),
                Err(e) => {
                    println!("temp write failed: {e}");
                    std::process::exit(1)
                }
            }
        }
        "write" => match std::fs::write(arg(1), "written by the probe\n") {
            Ok(()) => report(true, arg(1)),
            Err(e) => report(false, e.to_string()),
        },
        "read" => match std::fs::read_to_string(arg(1)) {
            Ok(s) => report(true, s.len().to_string()),
            Err(e) => report(false, e.to_string()),
        },
        _ => unreachable_probe(what),
    }
}

/// Connections: TCP, MPTCP, UDP, through the proxy, unix sockets.
fn network(what: &str, arg: &dyn Fn(usize) -> String) {
    match what {
        "tcp" => match std::net::TcpStream::connect(arg(1)) {
            Ok(_) => report(true, "connected".into()),
            Err(e) => report(false, e.to_string()),
        },
        // `mptcp IPV4:PORT`: a Multipath TCP stream (protocol 262), which
        // Landlock's TCP rules do not cover.
        "mptcp" => match arg(1).parse::<std::net::SocketAddrV4>() {
            Ok(addr) => report_os(mptcp_connect(addr), "connected"),
            Err(e) => report(false, e.to_string()),
        },
        // `udp ADDR`: one datagram (DNS and other UDP must not pass).
        "udp" => {
            match std::net::UdpSocket::bind("0.0.0.0:0").and_then(|u| u.send_to(b"probe", arg(1))) {
                Ok(_) => report(true, "sent".into()),
                Err(e) => report(false, e.to_string()),
            }
        }
        // `proxy-get URL`: GET through $HTTP_PROXY, as curl would.
        "proxy-get" => {
            use std::io::Read;
            let proxy = std::env::var("HTTP_PROXY").unwrap_or_default();
            let addr = proxy.trim_start_matches("http://").trim_end_matches('/');
            // `user:password@` names the confined process; the probe sends none.
            let addr = addr.rsplit_once('@').map_or(addr, |(_, a)| a).to_string();
            let url = arg(1);
            let host = url
                .trim_start_matches("http://")
                .split('/')
                .next()
                .unwrap_or_default()
                .to_string();
            match std::net::TcpStream::connect(&addr) {
                Ok(mut s) => {
                    let _ = write!(
                        s,
                        "GET {url} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
                    );
                    let mut answer = String::new();
                    let _ = s.read_to_string(&mut answer);
                    let first = answer.lines().next().unwrap_or_default().to_string();
                    let body = answer
                        .split("\r\n\r\n")
                        .nth(1)
                        .unwrap_or_default()
                        .trim()
                        .to_string();
                    report(first.contains(" 200 "), format!("{first} | {body}"));
                }
                Err(e) => report(false, format!("proxy {addr:?}: {e}")),
            }
        }
        "unix" => match std::os::unix::net::UnixStream::connect(arg(1)) {
            Ok(_) => report(true, "connected".into()),
            Err(e) => report(false, e.to_string()),
        },
        "abstract" => {
            use std::os::linux::net::SocketAddrExt;
            let r = std::os::unix::net::SocketAddr::from_abstract_name(arg(1).as_bytes())
                .and_then(|addr| std::os::unix::net::UnixStream::connect_addr(&addr));
            match r {
                Ok(_) => report(true, "connected".into()),
                Err(e) => report(false, e.to_string()),
            }
        }
        _ => unreachable_probe(what),
    }
}

/// What the process may do to itself and its terminal, and what it holds.
fn process(what: &str) {
    match what {
        "ptrace" => {
            // SAFETY: PTRACE_TRACEME takes no pointers.
            let r = unsafe { libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) };
            report(r == 0, std::io::Error::last_os_error().to_string());
        }
        "keyctl" => {
            // SAFETY: keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0) takes no pointers.
            let r = unsafe { libc::syscall(libc::SYS_keyctl, 0, -3i64, 0) };
            report(r >= 0, std::io::Error::last_os_error().to_string());
        }
        "userns" => {
            // SAFETY: unshare takes only flags.
            let r = unsafe { libc::unshare(libc::CLONE_NEWUSER) };
            report(r == 0, std::io::Error::last_os_error().to_string());
        }
        "status" => {
            let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
            for l in s
                .lines()
                .filter(|l| l.starts_with("NoNewPrivs") || l.starts_with("Seccomp:"))
            {
                println!("{l}");
            }
        }
        // `pid`: this process's pid and its parent's, as its namespace sees them.
        "pid" => {
            // SAFETY: getppid takes nothing and cannot fail.
            let parent = unsafe { libc::getppid() };
            println!("{} {parent}", std::process::id());
        }
        "fds" => {
            // Probe each number without opening anything new.
            let open: Vec<String> = (0..4096)
                // SAFETY: fcntl(F_GETFD) on an integer; no memory is passed.
                .filter(|&fd| unsafe { libc::fcntl(fd, libc::F_GETFD) } != -1)
                .map(|fd| fd.to_string())
                .collect();
            println!("{}", open.join(" "));
        }
        "tty" => match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")
        {
            Ok(_) => report(true, "opened /dev/tty".into()),
            Err(e) => report(false, e.to_string()),
        },
        "tiocsti" => {
            let c = b'x';
            // SAFETY: ioctl(0, TIOCSTI, &c) with a pointer to a live byte.
            let r = unsafe { libc::ioctl(0, libc::TIOCSTI, &c) };
            report(r == 0, std::io::Error::last_os_error().to_string());
        }
        "env" => {
            for (k, v) in std::env::vars() {
                println!("{k}={v}");
            }
        }
        _ => unreachable_probe(what),
    }
}

/// Processes that outlive, multiply or flood.
fn load(what: &str, arg: &dyn Fn(usize) -> String) {
    match what {
        "orphan" => {
            // A grandchild that leaves the session, outlives its parent, and
            // keeps counting in a file while it lives.
            // SAFETY: fork in a single-threaded probe.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                // SAFETY: setsid and a second fork take no pointers.
                unsafe {
                    libc::setsid();
                    if libc::fork() != 0 {
                        libc::_exit(0);
                    }
                }
                for i in 0..600u32 {
                    let _ = std::fs::write(arg(1), i.to_string());
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                std::process::exit(0);
            }
            std::thread::sleep(std::time::Duration::from_millis(300));
            report(true, "left an orphan".into());
        }
        "forkbomb" => loop {
            // SAFETY: fork in a single-threaded probe; children loop too.
            unsafe {
                libc::fork();
            }
        },
        "yes" => {
            let mut out = std::io::stdout().lock();
            let line = [b'y', b'\n'].repeat(4096);
            while out.write_all(&line).is_ok() {}
        }
        "sleep" => std::thread::sleep(std::time::Duration::from_secs(arg(1).parse().unwrap_or(1))),
        _ => unreachable_probe(what),
    }
}

/// A stand-in broker starting a sandboxed process of its own.
fn brokers(what: &str, arg: &dyn Fn(usize) -> String) {
    match what {
        "broker" => {
            // A stand-in broker: start a sandboxed orphan-maker (with a
            // proxy route when given a port and socket), then wait to be killed.
            let entry = std::env::current_exe().unwrap_or_default();
            let policy = nib_sandbox::Policy {
                confine: arg(1) == "confine",
                writable: vec![std::path::PathBuf::from(arg(2))],
                use_bwrap: arg(3) == "bwrap",
                proxy: arg(5).parse().ok().map(|port| nib_sandbox::ProxyRoute {
                    port,
                    socket: arg(6).into(),
                }),
                ..nib_sandbox::Policy::default()
            };
            let sandbox = nib_sandbox::Sandbox::new(&entry, policy);
            let program: Vec<OsString> = vec![entry.clone().into(), "orphan".into(), arg(4).into()];
            let confined = sandbox.spawn(&program, std::path::Path::new(&arg(2)), &[]);
            report(confined.is_ok(), "started".into());
            let _ = std::io::stdout().flush();
            std::thread::sleep(std::time::Duration::from_secs(60));
            drop(confined);
        }
        "proxied" => {
            // A broker's call under bubblewrap with a proxy route: run
            // `true` to its end and say how it ended.
            let entry = std::env::current_exe().unwrap_or_default();
            let policy = nib_sandbox::Policy {
                confine: true,
                writable: vec![std::path::PathBuf::from(arg(1))],
                use_bwrap: true,
                proxy: Some(nib_sandbox::ProxyRoute {
                    port: 3128,
                    socket: arg(2).into(),
                }),
                ..nib_sandbox::Policy::default()
            };
            let sandbox = nib_sandbox::Sandbox::new(&entry, policy);
            let program: Vec<OsString> = vec![entry.clone().into(), "sleep".into(), "0".into()];
            match sandbox.spawn(&program, std::path::Path::new(&arg(1)), &[]) {
                Ok(confined) => {
                    let o = confined.wait(Some(std::time::Duration::from_secs(10)));
                    report(!o.timed_out && o.code == Some(0), format!("{:?}", o.code));
                }
                Err(e) => report(false, e.to_string()),
            }
        }
        _ => unreachable_probe(what),
    }
}

/// `OK WHAT` or `DENIED WHY`, the line the effect tests read.
fn report(ok: bool, what: String) {
    println!("{} {what}", if ok { "OK" } else { "DENIED" });
}

/// A probe name main routed to a family that does not have it.
fn unreachable_probe(what: &str) {
    println!("unknown probe {what}");
    std::process::exit(2);
}

fn report_os(result: std::io::Result<()>, what: &str) {
    match result {
        Ok(()) => println!("OK {what}"),
        Err(e) => println!("DENIED {e}"),
    }
}

/// An MPTCP socket connected to `addr`.
fn mptcp_connect(addr: std::net::SocketAddrV4) -> std::io::Result<()> {
    const IPPROTO_MPTCP: libc::c_int = 262;
    // SAFETY: socket takes integers; the fd is closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, IPPROTO_MPTCP) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: addr.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*addr.ip()).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: connect reads a sockaddr_in of the size given from a live
    // local; close takes the fd we made.
    unsafe {
        let r = libc::connect(
            fd,
            (&sin as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        );
        let err = std::io::Error::last_os_error();
        libc::close(fd);
        if r == 0 { Ok(()) } else { Err(err) }
    }
}
