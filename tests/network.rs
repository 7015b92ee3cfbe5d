//! The network allowlist end to end: NIB_SANDBOX=1 with hosts in
//! NIB_SANDBOX_NETWORK, a loopback HTTP server that records what reaches it
//! (the canary), and git over HTTP as the program (it honours the proxy
//! variables nib sets) — with bubblewrap and with Landlock + seccomp alone.

use std::io::{BufRead, Write};
use std::sync::{Arc, Mutex};

use serde_json::json;

use crate::common::*;

/// A server on 127.0.0.1 that answers 404 and keeps the request lines.
fn server() -> (u16, Arc<Mutex<Vec<String>>>) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = Arc::clone(&seen);
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            let mut w = c.try_clone().unwrap();
            let mut first = String::new();
            let _ = std::io::BufReader::new(c).read_line(&mut first);
            s.lock().unwrap().push(first.trim().to_string());
            let _ = w.write_all(
                b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    (port, seen)
}

/// nib in `dir` under NIB_SANDBOX=1 (bubblewrap when `bwrap` is "1"),
/// with `hosts` in NIB_SANDBOX_NETWORK when given.
async fn sandboxed(dir: &std::path::Path, bwrap: &str, hosts: Option<&str>) -> Nib {
    let mut env = vec![("NIB_SANDBOX", "1"), ("NIB_SANDBOX_BWRAP", bwrap)];
    if let Some(h) = hosts {
        env.push(("NIB_SANDBOX_NETWORK", h));
    }
    start_with(Era::Modern, dir, TestClient::new(Roots::Undeclared), &env).await
}

#[tokio::test]
async fn programs_reach_listed_hosts_through_the_proxy_and_nothing_else() {
    let landlock_net = nib_sandbox::probe().landlock_abi >= 4;
    for bwrap in ["1", "0"] {
        let (port, seen) = server();
        let dir = project();
        let nib = sandboxed(dir.path(), bwrap, Some("127.0.0.1")).await;
        let held = bwrap == "1" || landlock_net;

        // NO_PROXY keeps local addresses off the proxy; these requests go
        // through it on purpose.
        let via = "env -u NO_PROXY -u no_proxy git ls-remote";
        // A listed address: the request arrives, through the proxy.
        let (text, _) = nib
            .call(
                "nibash",
                json!({"command": format!("{via} http://127.0.0.1:{port}/listed.git")}),
            )
            .await;
        if held {
            assert!(
                seen.lock()
                    .unwrap()
                    .iter()
                    .any(|l| l.starts_with("GET /listed.git/info/refs")),
                "bwrap={bwrap}: {text}"
            );
        }
        // A name the list does not hold (it leads to the same server):
        // refused by the proxy, named in the answer, never at the server.
        let (text, _) = nib
            .call(
                "nibash",
                json!({"command": format!("{via} http://localhost:{port}/name.git")}),
            )
            .await;
        if held {
            assert!(
                text.contains(&format!(
                    "[network: blocked localhost:{port} — not in NIB_SANDBOX_NETWORK]"
                )),
                "bwrap={bwrap}: {text}"
            );
        }
        // Around the proxy (NO_PROXY sends git straight there): it fails.
        let (text, _) = nib
            .call(
                "nibash",
                json!({"command": format!("git ls-remote http://127.0.0.1:{port}/direct.git")}),
            )
            .await;
        assert!(text.contains("[exit"), "bwrap={bwrap}: {text}");
        // Around the proxy by Multipath TCP (Landlock's TCP rules miss it).
        let mptcp = format!(
            "python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262); s.connect((\"127.0.0.1\", {port})); s.sendall(b\"GET /mptcp HTTP/1.0\\r\\n\\r\\n\"); print(\"CONNECTED\")'"
        );
        let (text, _) = nib.call("nibash", json!({ "command": mptcp })).await;
        assert!(!text.contains("CONNECTED"), "bwrap={bwrap}: {text}");
        let seen_now = seen.lock().unwrap().clone();
        assert!(
            !seen_now.iter().any(|l| l.contains("/name.git")
                || l.contains("/direct.git")
                || l.contains("/mptcp")),
            "bwrap={bwrap}: the canary saw {seen_now:?}"
        );
        let status = nib.ok("nibash_status", json!({})).await;
        if held {
            assert!(
                status.contains("network through nib's proxy: allowed 127.0.0.1"),
                "{status}"
            );
            assert!(
                status.contains(&format!("reached 127.0.0.1:{port}")),
                "{status}"
            );
            assert!(
                status.contains(&format!(
                    "blocked localhost:{port} (not in NIB_SANDBOX_NETWORK)"
                )),
                "{status}"
            );
        }
    }
}

/// `openssl s_server` serving `dir` over TLS with a self-signed
/// certificate for 127.0.0.1 (written to `dir/cert.pem`); killed on drop.
struct TlsServer {
    child: std::process::Child,
    port: u16,
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tls_server(dir: &std::path::Path) -> TlsServer {
    crate::common::self_signed_cert(dir, &[]);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = std::process::Command::new("openssl")
        .args([
            "s_server",
            "-accept",
            &format!("127.0.0.1:{port}"),
            "-cert",
            "cert.pem",
            "-key",
            "key.pem",
            "-WWW",
            "-quiet",
        ])
        .current_dir(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Ready when it accepts.
    let started = std::time::Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(started.elapsed().as_secs() < 10, "s_server did not start");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    TlsServer { child, port }
}

#[tokio::test]
async fn curl_git_and_python_speak_https_through_the_proxy() {
    let landlock_net = nib_sandbox::probe().landlock_abi >= 4;
    for bwrap in ["1", "0"] {
        if bwrap == "0" && !landlock_net {
            continue;
        }
        let dir = project();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::write(root.join("hello.txt"), "hello over tls\n").unwrap();
        let server = tls_server(&root);
        let port = server.port;
        let env = [
            ("NIB_SANDBOX", "1"),
            ("NIB_SANDBOX_BWRAP", bwrap),
            ("NIB_SANDBOX_NETWORK", "127.0.0.1"),
        ];
        let nib = start_with(
            Era::Handshake,
            &root,
            TestClient::new(Roots::Undeclared),
            &env,
        )
        .await;
        let via = "env -u NO_PROXY -u no_proxy";
        let curl = nib
            .ok("nibash", json!({"command": format!("{via} curl -s --cacert cert.pem https://127.0.0.1:{port}/hello.txt")}))
            .await;
        assert!(curl.contains("hello over tls"), "bwrap={bwrap}: {curl}");
        let python = nib
            .ok(
                "nibash",
                json!({"command": format!("{via} python3 -c 'import ssl, urllib.request as u; c = ssl.create_default_context(cafile=\"cert.pem\"); print(u.urlopen(\"https://127.0.0.1:{port}/hello.txt\", context=c).read().decode())'")}),
            )
            .await;
        assert!(python.contains("hello over tls"), "bwrap={bwrap}: {python}");
        // git's TLS goes through too: what it gets back is the file server's
        // answer (no repository there), not a connection or certificate error.
        let (git, _) = nib
            .call("nibash", json!({"command": format!("{via} GIT_SSL_CAINFO=$PWD/cert.pem git ls-remote https://127.0.0.1:{port}/none.git")}))
            .await;
        assert!(
            !git.contains("Failed to connect") && !git.contains("SSL"),
            "bwrap={bwrap}: {git}"
        );
        assert!(git.contains("127.0.0.1"), "bwrap={bwrap}: {git}");
        // Straight to the server, around the proxy: refused.
        let (direct, _) = nib
            .call("nibash", json!({"command": format!("curl -s --cacert cert.pem https://127.0.0.1:{port}/hello.txt")}))
            .await;
        assert!(
            !direct.contains("hello over tls") && direct.contains("[exit"),
            "bwrap={bwrap}: {direct}"
        );
        drop(server);
    }
}

/// Requests the server received.
type Seen = Arc<Mutex<Vec<String>>>;

/// nib under the sandbox with 127.0.0.1 listed and NIB_CONFIRM_NETWORK on,
/// its client answering `answer`; the canary server's port and requests,
/// and the questions the client was asked.
async fn confirming(era: Era, answer: Elicit) -> (Nib, u16, Seen, Seen, tempfile::TempDir) {
    let (port, seen) = server();
    let dir = project();
    let env = [
        ("NIB_SANDBOX", "1"),
        ("NIB_SANDBOX_NETWORK", "127.0.0.1"),
        ("NIB_CONFIRM_NETWORK", "1"),
    ];
    let client = TestClient::eliciting(answer);
    let asked = Arc::clone(&client.asked);
    let nib = start_with(era, dir.path(), client, &env).await;
    (nib, port, seen, asked, dir)
}

#[tokio::test]
async fn an_unlisted_host_is_put_to_the_user_and_allowed_for_the_session_when_approved() {
    for (answer, allowed) in [(Elicit::Accept(None), true), (Elicit::Decline, false)] {
        let (nib, port, seen, asked, _dir) = confirming(Era::Handshake, answer).await;
        let via = "env -u NO_PROXY -u no_proxy git ls-remote";
        let (text, _) = nib
            .call(
                "nibash",
                json!({"command": format!("{via} http://localhost:{port}/asked.git")}),
            )
            .await;
        let questions = asked.lock().unwrap().clone();
        assert_eq!(questions.len(), 1, "asked once: {questions:?}");
        assert!(
            questions[0].contains(&format!("localhost:{port}")),
            "{questions:?}"
        );
        let arrived = |path: &str| seen.lock().unwrap().iter().any(|l| l.contains(path));
        if allowed {
            assert!(arrived("/asked.git"), "{text}");
            // Allowed for the session: the next call is not asked again.
            nib.call(
                "nibash",
                json!({"command": format!("{via} http://localhost:{port}/again.git")}),
            )
            .await;
            assert!(arrived("/again.git"));
            assert_eq!(asked.lock().unwrap().len(), 1, "asked once per host");
        } else {
            assert!(!arrived("/asked.git"), "declined: the canary saw it");
            assert!(
                text.contains(&format!("[network: blocked localhost:{port} — not in NIB_SANDBOX_NETWORK, and the user did not allow it]")),
                "{text}"
            );
        }
    }
}

#[tokio::test]
async fn in_the_modern_era_the_user_is_asked_after_the_call_and_the_next_call_may_go() {
    for (answer, allowed) in [(Elicit::Accept(None), true), (Elicit::Decline, false)] {
        let (nib, port, seen, asked, dir) = confirming(Era::Modern, answer).await;
        let via = "env -u NO_PROXY -u no_proxy git ls-remote";
        let marker = dir.path().join("ran-count");
        // The command runs once: the retry that carries the answer gives
        // the kept answer without running it again.
        let command = format!("echo x >> ran-count; {via} http://localhost:{port}/first.git");
        let (text, _) = nib.call("nibash", json!({ "command": command })).await;
        assert_eq!(
            std::fs::read_to_string(&marker).unwrap(),
            "x\n",
            "ran once: {text}"
        );
        assert_eq!(asked.lock().unwrap().len(), 1, "{text}");
        assert!(asked.lock().unwrap()[0].contains(&format!("localhost:{port}")));
        let arrived = |path: &str| seen.lock().unwrap().iter().any(|l| l.contains(path));
        assert!(!arrived("/first.git"), "refused while the call ran");
        let (again, _) = nib
            .call(
                "nibash",
                json!({"command": format!("{via} http://localhost:{port}/second.git")}),
            )
            .await;
        if allowed {
            assert!(
                text.contains(&format!("[network: localhost:{port} allowed for this session; run the command again to reach it]")),
                "{text}"
            );
            assert!(arrived("/second.git"), "{again}");
        } else {
            assert!(
                text.contains("[network: not allowed; the hosts stay refused]"),
                "{text}"
            );
            assert!(!arrived("/second.git"), "{again}");
        }
    }
}

/// nib's own default (NIB_CONFIRM_NETWORK unset) under the sandbox, with a
/// client that answers elicitations `answer`, in sandbox mode `bwrap`: the
/// canary server's port and requests, the questions asked, and nib.
async fn by_default(
    era: Era,
    bwrap: &str,
    hosts: Option<&str>,
    confirm: Option<&str>,
    answer: Elicit,
) -> (Nib, u16, Seen, Seen, tempfile::TempDir) {
    let (port, seen) = server();
    let dir = project();
    let mut env = vec![("NIB_SANDBOX", "1"), ("NIB_SANDBOX_BWRAP", bwrap)];
    if let Some(h) = hosts {
        env.push(("NIB_SANDBOX_NETWORK", h));
    }
    if let Some(c) = confirm {
        env.push(("NIB_CONFIRM_NETWORK", c));
    }
    let client = TestClient::eliciting(answer);
    let asked = Arc::clone(&client.asked);
    let nib = start_with(era, dir.path(), client, &env).await;
    (nib, port, seen, asked, dir)
}

/// Issue 60: by default (NIB_CONFIRM_NETWORK unset) a host that is not
/// listed is put to a client that can be asked, in both sandbox modes:
/// declined, the canary never sees the request and the answer names the
/// refusal; approved, the request arrives. With no host listed at all the
/// person is still asked (programs go through the proxy once such a client
/// is there). `NIB_CONFIRM_NETWORK=0` refuses without asking. (A client that
/// cannot be asked keeps the network off and the line that says why:
/// `tests/network_why.rs`.)
#[tokio::test]
async fn by_default_an_unlisted_host_is_put_to_a_client_that_can_ask() {
    let via = "env -u NO_PROXY -u no_proxy git ls-remote";
    for bwrap in ["1", "0"] {
        if bwrap == "1" && !nib_sandbox::bwrap_usable()
            || bwrap == "0" && nib_sandbox::probe().landlock_abi < 4
        {
            // Nothing would hold programs to the proxy in this mode.
            continue;
        }
        for (answer, allowed) in [(Elicit::Accept(None), true), (Elicit::Decline, false)] {
            // 127.0.0.1 listed, localhost (the same server) not.
            let (nib, port, seen, asked, _dir) = by_default(
                Era::Handshake,
                bwrap,
                Some("127.0.0.1"),
                None,
                answer.clone(),
            )
            .await;
            let (text, _) = nib
                .call(
                    "nibash",
                    json!({"command": format!("{via} http://localhost:{port}/asked.git")}),
                )
                .await;
            let questions = asked.lock().unwrap().clone();
            assert_eq!(questions.len(), 1, "bwrap={bwrap}: {questions:?} {text}");
            assert!(
                questions[0].contains(&format!("localhost:{port}")),
                "bwrap={bwrap}: {questions:?}"
            );
            let arrived = seen
                .lock()
                .unwrap()
                .iter()
                .any(|l| l.contains("/asked.git"));
            if allowed {
                assert!(arrived, "bwrap={bwrap}: approved, yet not reached: {text}");
            } else {
                assert!(!arrived, "bwrap={bwrap}: declined, the canary saw it");
                assert!(
                    text.contains(&format!("[network: blocked localhost:{port} — not in NIB_SANDBOX_NETWORK, and the user did not allow it]")),
                    "bwrap={bwrap}: {text}"
                );
            }
            nib.stop().await;

            // No host listed at all: asked all the same. A loopback name
            // stays refused once approved (a private address must be listed
            // exactly), so the canary sees nothing either way.
            let (nib, port, seen, asked, _dir) =
                by_default(Era::Handshake, bwrap, None, None, answer.clone()).await;
            let status = nib.ok("nibash_status", json!({})).await;
            assert!(
                status.contains(
                    "network through nib's proxy: no host listed; other hosts are put to the user"
                ),
                "bwrap={bwrap}: {status}"
            );
            let (text, _) = nib
                .call(
                    "nibash",
                    json!({"command": format!("{via} http://localhost:{port}/unlisted.git")}),
                )
                .await;
            let questions = asked.lock().unwrap().clone();
            assert_eq!(questions.len(), 1, "bwrap={bwrap}: {questions:?} {text}");
            assert!(questions[0].contains(&format!("localhost:{port}")));
            assert!(
                seen.lock().unwrap().is_empty(),
                "bwrap={bwrap}: the canary saw {:?}",
                seen.lock().unwrap()
            );
            let why = if allowed {
                "it resolves to 127.0.0.1, a loopback or private address not listed"
            } else {
                "not in NIB_SANDBOX_NETWORK, and the user did not allow it"
            };
            assert!(
                text.contains(&format!("[network: blocked localhost:{port} — {why}]")),
                "bwrap={bwrap}: {text}"
            );
            nib.stop().await;
        }
        // NIB_CONFIRM_NETWORK=0: the old way, refused and named, nobody asked.
        let (nib, port, seen, asked, _dir) = by_default(
            Era::Handshake,
            bwrap,
            Some("127.0.0.1"),
            Some("0"),
            Elicit::Accept(None),
        )
        .await;
        let (text, _) = nib
            .call(
                "nibash",
                json!({"command": format!("{via} http://localhost:{port}/refused.git")}),
            )
            .await;
        assert!(asked.lock().unwrap().is_empty(), "bwrap={bwrap}: asked");
        assert!(seen.lock().unwrap().is_empty(), "bwrap={bwrap}: reached");
        assert!(
            text.contains(&format!(
                "[network: blocked localhost:{port} — not in NIB_SANDBOX_NETWORK]"
            )),
            "bwrap={bwrap}: {text}"
        );
        nib.stop().await;
    }
    // The 2026-07-28 era, no host listed: the client that declared
    // elicitation is asked after the call; the canary sees nothing.
    let (nib, port, seen, asked, _dir) =
        by_default(Era::Modern, "1", None, None, Elicit::Decline).await;
    let (text, _) = nib
        .call(
            "nibash",
            json!({"command": format!("{via} http://localhost:{port}/modern.git")}),
        )
        .await;
    let questions = asked.lock().unwrap().clone();
    assert_eq!(questions.len(), 1, "{questions:?} {text}");
    assert!(questions[0].contains(&format!("localhost:{port}")));
    assert!(
        text.contains("[network: not allowed; the hosts stay refused]"),
        "{text}"
    );
    assert!(seen.lock().unwrap().is_empty());
}

#[tokio::test]
async fn the_proxys_socket_folder_goes_when_nib_exits() {
    let dir = project();
    let env = [("NIB_SANDBOX", "1"), ("NIB_SANDBOX_NETWORK", "127.0.0.1")];
    let nib = start_with(
        Era::Handshake,
        dir.path(),
        TestClient::new(Roots::Undeclared),
        &env,
    )
    .await;
    nib.ok("nibash", json!({"command": "true"})).await;
    let pid = nib.pid.expect("the server's pid");
    // nib's temporary folder is its test home's (`isolated_env`).
    let folder = nib.home.path().join("tmp").join(format!("nib-proxy-{pid}"));
    assert!(folder.join("proxy.sock").exists(), "{}", folder.display());
    nib.stop().await;
    let gone = std::path::PathBuf::from(format!("/proc/{pid}"));
    for _ in 0..200 {
        if !gone.exists() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(!gone.exists(), "nib did not exit");
    assert!(!folder.exists(), "{} was left behind", folder.display());
}

/// A project's nib.json narrows the network, never widens it: its
/// `network.allow` opens nothing (one note names the user's setting), and
/// its `network.deny` holds for a listed name by the address it resolves
/// to — in both modes.
#[tokio::test]
async fn a_projects_nib_json_never_opens_the_network_and_its_deny_holds_by_address() {
    if !nib_sandbox::bwrap_usable() && nib_sandbox::probe().landlock_abi < 4 {
        // Nothing here could hold programs to the proxy: they get no network
        // (the sandbox's effect test checks that).
        return;
    }
    let via = "env -u NO_PROXY -u no_proxy git ls-remote";
    for bwrap in ["1", "0"] {
        let (port, seen) = server();
        let dir = project();
        std::fs::write(
            dir.path().join("nib.json"),
            json!({"network": {"allow": ["127.0.0.1", "localhost"]}}).to_string(),
        )
        .unwrap();
        let nib = sandboxed(dir.path(), bwrap, None).await;
        let (first, _) = nib
            .call(
                "nibash",
                json!({"command": format!("{via} http://127.0.0.1:{port}/project.git")}),
            )
            .await;
        let (second, _) = nib
            .call(
                "nibash",
                json!({"command": format!("{via} http://localhost:{port}/again.git")}),
            )
            .await;
        let note = "[network: nib.json's network.allow (127.0.0.1, localhost) is ignored: a project's file may narrow the sandbox's network, never widen it; the user allows hosts with NIB_SANDBOX_NETWORK=127.0.0.1,localhost]";
        assert!(first.contains(note), "bwrap={bwrap}: {first}");
        assert!(
            !second.contains(note),
            "bwrap={bwrap}: noted twice: {second}"
        );
        assert!(first.contains("[exit"), "bwrap={bwrap}: {first}");
        let status = nib.ok("nibash_status", json!({})).await;
        assert!(status.contains("network off"), "bwrap={bwrap}: {status}");
        assert!(
            seen.lock().unwrap().is_empty(),
            "bwrap={bwrap}: the canary saw {:?}",
            seen.lock().unwrap()
        );
        nib.stop().await;

        // The user lists a name and an address; the project denies the
        // address: the name that resolves to it is refused too.
        std::fs::write(
            dir.path().join("nib.json"),
            json!({"network": {"deny": ["127.0.0.1"]}}).to_string(),
        )
        .unwrap();
        let nib = sandboxed(dir.path(), bwrap, Some("localhost,127.0.0.1")).await;
        let (by_name, _) = nib
            .call(
                "nibash",
                json!({"command": format!("{via} http://localhost:{port}/by-name.git")}),
            )
            .await;
        assert!(
            by_name.contains(&format!(
                "[network: blocked localhost:{port} — on the deny list]"
            )),
            "bwrap={bwrap}: {by_name}"
        );
        let seen = seen.lock().unwrap().clone();
        assert!(seen.is_empty(), "bwrap={bwrap}: the canary saw {seen:?}");
    }
}

/// Two nibash calls at once: each answer names the hosts refused to its
/// own programs, never the other's — in both modes.
#[tokio::test]
async fn two_calls_at_once_each_name_only_their_own_refusals() {
    if !nib_sandbox::bwrap_usable() && nib_sandbox::probe().landlock_abi < 4 {
        return;
    }
    for bwrap in ["1", "0"] {
        let (port, _seen) = server();
        let dir = project();
        let nib = sandboxed(dir.path(), bwrap, Some("127.0.0.1")).await;
        let curl = "env -u NO_PROXY -u no_proxy curl -s -o /dev/null";
        // The first call's refusal comes while the second runs.
        nib.ok(
            "nibash",
            json!({"command": format!("sleep 1; {curl} http://127.0.0.2:{port}/first; sleep 4"), "background": true}),
        )
        .await;
        let (second, _) = nib
            .call(
                "nibash",
                json!({"command": format!("sleep 3; {curl} http://localhost:{port}/second; true")}),
            )
            .await;
        assert!(
            second.contains(&format!("[network: blocked localhost:{port}")),
            "bwrap={bwrap}: {second}"
        );
        assert!(
            !second.contains("127.0.0.2"),
            "bwrap={bwrap}: the other call's refusal was named: {second}"
        );
        let status = nib.ok("nibash_status", json!({})).await;
        assert!(status.contains(&format!("127.0.0.2:{port}")), "{status}");
        nib.stop().await;
    }
}

/// A listener that accepts and holds every connection (the upstream of
/// tunnels a program keeps open).
fn holder() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in l.incoming().flatten() {
            held.push(c);
        }
    });
    port
}

fn open_descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// What a process's descriptors point at, counted by kind (`socket`,
/// `pipe`, an anonymous inode's name, a path's first two folders), for a
/// failure's message.
fn descriptor_kinds(pid: u32) -> String {
    let mut kinds: std::collections::BTreeMap<String, usize> = Default::default();
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let target = std::fs::read_link(entry.path()).unwrap_or_default();
        let t = target.to_string_lossy();
        let kind = match t.split_once(':') {
            Some((k, _)) if !t.starts_with('/') => k.to_string(),
            _ => t.split('/').take(3).collect::<Vec<_>>().join("/"),
        };
        *kinds.entry(kind).or_default() += 1;
    }
    format!("{kinds:?}")
}

/// A program holding hundreds of tunnels open takes the broker to no more
/// than its share of descriptors: the tools keep working while they are
/// held, and the proxy accepts again once they go — in both modes, with
/// the broker's open-file limit lowered to 256.
#[tokio::test]
async fn held_tunnels_never_take_the_descriptors_the_tools_need() {
    if !nib_sandbox::bwrap_usable() && nib_sandbox::probe().landlock_abi < 4 {
        return;
    }
    for bwrap in ["1", "0"] {
        let (port, seen) = server();
        let hold = holder();
        let dir = project();
        std::fs::write(dir.path().join("a.txt"), "a\n").unwrap();
        let nib = sandboxed(dir.path(), bwrap, Some("127.0.0.1")).await;
        let pid = nib.pid.unwrap();
        let limited = std::process::Command::new("prlimit")
            .args(["--pid", &pid.to_string(), "--nofile=256:256"])
            .status()
            .unwrap();
        assert!(limited.success());
        let script = format!(
            r#"
import base64, os, socket, time
from urllib.parse import urlparse
u = urlparse(os.environ["HTTP_PROXY"])
auth = base64.b64encode(f"{{u.username}}:{{u.password}}".encode()).decode()
held = []
for i in range(220):
    try:
        s = socket.create_connection((u.hostname, u.port), timeout=5)
        s.sendall(f"CONNECT 127.0.0.1:{hold} HTTP/1.1\r\nProxy-Authorization: Basic {{auth}}\r\n\r\n".encode())
        held.append(s)
    except OSError:
        pass
print("opened", len(held), flush=True)
time.sleep(8)
"#
        );
        std::fs::write(dir.path().join("hold.py"), script).unwrap();
        nib.ok(
            "nibash",
            json!({"command": "python3 hold.py", "background": true}),
        )
        .await;
        tokio::time::sleep(std::time::Duration::from_secs(3)).await;
        let most = open_descriptors(pid);
        let (read, failed) = nib.call("read", json!({"paths": ["a.txt"]})).await;
        assert!(
            !failed && read.contains("1:a"),
            "bwrap={bwrap}: {read}\nthe broker's descriptors before the read: {most}; now: {}",
            descriptor_kinds(pid)
        );
        nib.ok("write", json!({"path": "b.txt", "content": "b\n"}))
            .await;
        let echo = nib
            .ok("nibash", json!({"command": "echo alive; cat b.txt"}))
            .await;
        assert!(
            echo.contains("alive") && echo.contains('b'),
            "bwrap={bwrap}: {echo}"
        );
        assert!(
            most < 200,
            "bwrap={bwrap}: the broker held {most} descriptors of 256"
        );
        // Once the program and its tunnels are gone (a tunnel whose client
        // ended lives 10 s more at most), the proxy accepts again.
        let after =
            format!("env -u NO_PROXY -u no_proxy git ls-remote http://127.0.0.1:{port}/after.git");
        let until = std::time::Instant::now() + std::time::Duration::from_secs(40);
        let mut last = String::new();
        while !seen
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("/after.git"))
        {
            assert!(
                std::time::Instant::now() < until,
                "bwrap={bwrap}: the proxy no longer accepts; the last try: {last}"
            );
            tokio::time::sleep(std::time::Duration::from_secs(2)).await;
            last = nib.call("nibash", json!({ "command": after })).await.0;
        }
        nib.stop().await;
    }
}

/// A tunnel flood (issue 58): a program opens as many `CONNECT` tunnels
/// as it can (more than the sandbox's 512 processes could each give the
/// bubblewrap bridge a thread), holds them, then lets them all go. The
/// proxy — and under bubblewrap the bridge to it — survives: once they
/// are gone an allowed host is reached again, in both modes.
#[tokio::test]
async fn after_a_tunnel_flood_an_allowed_host_is_reached_again() {
    if !nib_sandbox::bwrap_usable() && nib_sandbox::probe().landlock_abi < 4 {
        return;
    }
    for bwrap in ["1", "0"] {
        if bwrap == "1" && !nib_sandbox::bwrap_usable()
            || bwrap == "0" && nib_sandbox::probe().landlock_abi < 4
        {
            continue;
        }
        let (port, seen) = server();
        let hold = holder();
        let dir = project();
        let nib = sandboxed(dir.path(), bwrap, Some("127.0.0.1")).await;
        let script = format!(
            r#"
import base64, os, socket
from urllib.parse import urlparse
u = urlparse(os.environ["HTTP_PROXY"])
auth = base64.b64encode(f"{{u.username}}:{{u.password}}".encode()).decode()
held, answered = [], 0
for i in range(1200):
    try:
        s = socket.create_connection((u.hostname, u.port), timeout=5)
        s.sendall(f"CONNECT 127.0.0.1:{hold} HTTP/1.1\r\nProxy-Authorization: Basic {{auth}}\r\n\r\n".encode())
        held.append(s)
    except OSError:
        pass
for s in held:
    try:
        s.settimeout(2)
        if s.recv(12).startswith(b"HTTP/1.1 200"):
            answered += 1
    except OSError:
        pass
print("opened", len(held), "answered", answered, flush=True)
for s in held:
    s.close()
"#
        );
        std::fs::write(dir.path().join("flood.py"), script).unwrap();
        let flood = nib
            .ok(
                "nibash",
                json!({"command": "ulimit -n 4096 2>/dev/null; python3 flood.py", "timeout": 120}),
            )
            .await;
        eprintln!("bwrap={bwrap}: {flood}");
        assert!(flood.contains("opened"), "bwrap={bwrap}: {flood}");
        let after =
            format!("env -u NO_PROXY -u no_proxy git ls-remote http://127.0.0.1:{port}/after.git");
        let until = std::time::Instant::now() + std::time::Duration::from_secs(40);
        while !seen
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("/after.git"))
        {
            assert!(
                std::time::Instant::now() < until,
                "bwrap={bwrap}: after the flood ({flood}) the proxy no longer accepts"
            );
            tokio::time::sleep(std::time::Duration::from_secs(2)).await;
            nib.call("nibash", json!({ "command": after })).await;
        }
        nib.stop().await;
    }
}
