//! Brokered secrets end to end (NIB_SANDBOX_SECRETS), in both sandbox
//! modes: an HTTPS server of the test's own (its own CA, which nib trusts
//! through `SSL_CERT_FILE` in its environment) records every request it
//! gets, and serves git's `http-backend` behind a Basic challenge. The
//! canary is the real token: it must arrive at the server in the declared
//! header, and nowhere else — not in a program's environment, not in
//! `/proc/self/environ`, not in a request's body, URL or other headers,
//! not at another host, not in any answer nib gives.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::json;
use tokio_rustls::rustls;

use crate::common::*;

const REAL: &str = "ghp_R3alCanaryT0ken0123456789abcdefXYZ";
/// The value of a brokered file.
const FILE_REAL: &str = "apikey-F1leCanary0123456789";

/// What the server received: each request's head and body.
type Seen = Arc<Mutex<Vec<String>>>;

/// The test's HTTPS server on 127.0.0.1 (a certificate for `127.0.0.1` and
/// `localhost` from its own CA, written to `ca.pem` in `dir`).
struct Server {
    port: u16,
    seen: Seen,
    ca: PathBuf,
}

fn https_server(dir: &Path, repos: &Path) -> Server {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "test server CA");
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()])
        .unwrap()
        .signed_by(&leaf_key, &issuer)
        .unwrap();
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, ca_cert.pem()).unwrap();
    let config = Arc::new(
        rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into()),
        )
        .unwrap(),
    );
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Seen::default();
    let (s, repos) = (Arc::clone(&seen), repos.to_path_buf());
    std::thread::spawn(move || {
        for tcp in listener.incoming().flatten() {
            let (config, s, repos) = (Arc::clone(&config), Arc::clone(&s), repos.clone());
            std::thread::spawn(move || {
                let Ok(conn) = rustls::ServerConnection::new(config) else {
                    return;
                };
                let tls = rustls::StreamOwned::new(conn, tcp);
                let _ = serve_one(tls, &s, &repos);
            });
        }
    });
    Server { port, seen, ca }
}

/// Reads one request, records it, answers it and closes.
fn serve_one<S: Read + Write>(stream: S, seen: &Seen, repos: &Path) -> std::io::Result<()> {
    let mut r = BufReader::new(stream);
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if r.read_line(&mut line)? == 0 {
            return Ok(());
        }
        head.push_str(&line);
        if line == "\r\n" {
            break;
        }
    }
    let field = |name: &str| {
        head.lines().find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    };
    let mut body = Vec::new();
    if let Some(n) = field("content-length").and_then(|n| n.parse::<usize>().ok()) {
        body.resize(n, 0);
        r.read_exact(&mut body)?;
    } else if field("transfer-encoding").is_some_and(|t| t.contains("chunked")) {
        loop {
            let mut size = String::new();
            r.read_line(&mut size)?;
            let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk)?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    }
    seen.lock()
        .unwrap()
        .push(format!("{head}{}", String::from_utf8_lossy(&body)));
    let target = head.split(' ').nth(1).unwrap_or("/").to_string();
    let (status, headers, out) = if target.starts_with("/echo64") {
        // Echoes the head base64-encoded.
        (
            "200 OK",
            String::new(),
            base64_encode(head.as_bytes()).into_bytes(),
        )
    } else if target.starts_with("/gzip") {
        // Echoes the head gzipped, whatever the request accepted.
        (
            "200 OK",
            "Content-Encoding: gzip\r\n".to_string(),
            gzipped(head.as_bytes()),
        )
    } else if target.starts_with("/echo") {
        // Echoes the request's head back, as some APIs echo what they got.
        ("200 OK", String::new(), head.clone().into_bytes())
    } else if let Some(path) = target.strip_prefix("/git") {
        let wanted = format!("Basic {}", base64_encode(format!("bot:{REAL}").as_bytes()));
        if field("authorization").as_deref() != Some(wanted.as_str()) {
            (
                "401 Unauthorized",
                "WWW-Authenticate: Basic realm=\"test\"\r\n".to_string(),
                b"who are you\n".to_vec(),
            )
        } else {
            http_backend(repos, &head, path, field("content-type"), &body)
        }
    } else {
        ("404 Not Found", String::new(), Vec::new())
    };
    let mut w = r.into_inner();
    w.write_all(
        format!(
            "HTTP/1.1 {status}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n",
            out.len()
        )
        .as_bytes(),
    )?;
    w.write_all(&out)?;
    w.flush()
}

/// `b` gzipped by the system's gzip.
fn gzipped(b: &[u8]) -> Vec<u8> {
    let mut child = std::process::Command::new("gzip")
        .arg("-c")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b).unwrap();
    child.wait_with_output().unwrap().stdout
}

fn base64_encode(b: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(b)
}

/// git's own smart-HTTP server as a CGI program.
fn http_backend(
    repos: &Path,
    head: &str,
    path: &str,
    content_type: Option<String>,
    body: &[u8],
) -> (&'static str, String, Vec<u8>) {
    let method = head.split(' ').next().unwrap_or("GET");
    let (path_info, query) = path.split_once('?').unwrap_or((path, ""));
    let mut child = std::process::Command::new("git")
        .arg("http-backend")
        .env("GIT_PROJECT_ROOT", repos)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("REMOTE_USER", "bot")
        .env("REQUEST_METHOD", method)
        .env("PATH_INFO", path_info)
        .env("QUERY_STRING", query)
        .env("CONTENT_TYPE", content_type.unwrap_or_default())
        .env("CONTENT_LENGTH", body.len().to_string())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(body).unwrap();
    let out = child.wait_with_output().unwrap().stdout;
    let split = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4))
        .or_else(|| out.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2)));
    let Some((at, gap)) = split else {
        return ("500 Internal Server Error", String::new(), out);
    };
    let cgi = String::from_utf8_lossy(&out[..at]).to_string();
    let mut status = "200 OK";
    let mut headers = String::new();
    for line in cgi.lines() {
        if let Some(s) = line.strip_prefix("Status:") {
            status = if s.trim().starts_with("404") {
                "404 Not Found"
            } else if s.trim().starts_with("403") {
                "403 Forbidden"
            } else {
                "500 Internal Server Error"
            };
        } else if !line.trim().is_empty() {
            headers.push_str(line.trim());
            headers.push_str("\r\n");
        }
    }
    (status, headers, out[at + gap..].to_vec())
}

fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

#[tokio::test]
async fn a_brokered_token_reaches_its_host_in_its_header_and_nowhere_else() {
    let landlock_net = nib_sandbox::probe().landlock_abi >= 4;
    for bwrap in ["1", "0"] {
        if bwrap == "0" && !landlock_net {
            eprintln!(
                "Landlock ABI < 4: the Landlock-alone mode cannot hold programs to the proxy here"
            );
            continue;
        }
        let outside = tempfile::tempdir().unwrap();
        let repos = outside.path().join("repos");
        std::fs::create_dir_all(&repos).unwrap();
        git(&repos, &["init", "-q", "--bare", "-b", "main", "r.git"]);
        git(
            &repos.join("r.git"),
            &["config", "http.receivepack", "true"],
        );
        let seed = outside.path().join("seed");
        std::fs::create_dir_all(&seed).unwrap();
        git(&seed, &["init", "-q", "-b", "main"]);
        std::fs::write(seed.join("a.txt"), "a\n").unwrap();
        git(&seed, &["add", "a.txt"]);
        git(
            &seed,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-qm",
                "seed",
            ],
        );
        git(
            &seed,
            &["push", "-q", repos.join("r.git").to_str().unwrap(), "main"],
        );
        let server = https_server(outside.path(), &repos);
        let port = server.port;

        let dir = project();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        // A project's nib.json cannot declare or redirect a secret.
        std::fs::write(
            root.join("nib.json"),
            r#"{"sandbox": {"secrets": "GH_TOKEN@localhost"}, "secrets": ["GH_TOKEN@localhost"], "network": {"allow": ["localhost"]}}"#,
        )
        .unwrap();
        // A token in a file of the user's, outside the project.
        let token_file = outside.path().join("tokens").join("api.txt");
        std::fs::create_dir_all(token_file.parent().unwrap()).unwrap();
        std::fs::write(&token_file, format!("{FILE_REAL}\n")).unwrap();
        std::fs::write(root.join(".token"), "inside-the-project-0123456789\n").unwrap();
        let secrets = format!(
            "GH_TOKEN@127.0.0.1; GH_TOKEN@127.0.0.1=basic:bot; file:{}@127.0.0.1=header:X-Api-Key; file:{}@127.0.0.1",
            token_file.display(),
            root.join(".token").display()
        );
        let ca = server.ca.to_string_lossy().into_owned();
        let env = [
            ("NIB_SANDBOX", "1"),
            ("NIB_SANDBOX_BWRAP", bwrap),
            ("NIB_SANDBOX_NETWORK", "127.0.0.1,localhost"),
            ("NIB_SANDBOX_SECRETS", secrets.as_str()),
            ("GH_TOKEN", REAL),
            ("SSL_CERT_FILE", ca.as_str()),
        ];
        let nib = start_with(
            Era::Handshake,
            &root,
            TestClient::new(Roots::Undeclared),
            &env,
        )
        .await;
        let mut answers = Vec::new();
        let via = "env -u NO_PROXY -u no_proxy";

        // The program holds a placeholder of the token's shape.
        let seen_env = nib
            .ok("nibash", json!({"command": "printenv GH_TOKEN; tr '\\0' '\\n' < /proc/self/environ | grep '^GH_TOKEN='"}))
            .await;
        let placeholder = seen_env
            .lines()
            .find_map(|l| l.strip_prefix("GH_TOKEN="))
            .unwrap_or_else(|| panic!("bwrap={bwrap}: {seen_env}"))
            .trim()
            .to_string();
        assert_eq!(placeholder.len(), REAL.len(), "bwrap={bwrap}: {seen_env}");
        assert!(placeholder.starts_with("ghp_") && placeholder != REAL);
        answers.push(seen_env);

        // Bearer in Authorization: the server gets the real token; the
        // program sees the echo with the placeholder.
        let echo = nib
            .ok("nibash", json!({"command": format!("{via} curl -sS -H \"Authorization: Bearer $GH_TOKEN\" https://127.0.0.1:{port}/echo")}))
            .await;
        assert!(
            echo.contains(&format!("Bearer {placeholder}")),
            "bwrap={bwrap}: {echo}"
        );
        assert!(
            server
                .seen
                .lock()
                .unwrap()
                .iter()
                .any(|r| r.starts_with("GET /echo")
                    && r.contains(&format!("Authorization: Bearer {REAL}\r\n"))),
            "bwrap={bwrap}: {:?}",
            server.seen.lock().unwrap()
        );
        answers.push(echo);

        // The placeholder in a body, the URL and another header: never filled.
        let before = server.seen.lock().unwrap().len();
        let stray = nib
            .ok("nibash", json!({"command": format!("{via} curl -sS -H \"X-Other: $GH_TOKEN\" -d \"note=$GH_TOKEN\" \"https://127.0.0.1:{port}/echo?t=$GH_TOKEN\"")}))
            .await;
        answers.push(stray);
        // To another allowed host (an opaque tunnel): the placeholder only.
        let other = nib
            .ok("nibash", json!({"command": format!("{via} curl -sS -H \"Authorization: Bearer $GH_TOKEN\" https://localhost:{port}/echo")}))
            .await;
        assert!(
            other.contains(&format!("Bearer {placeholder}")),
            "bwrap={bwrap}: {other}"
        );
        answers.push(other);
        // In plain HTTP to any host: refused before it leaves, and named.
        let (plain, _) = nib
            .call("nibash", json!({"command": format!("{via} curl -sS -H \"Authorization: Bearer $GH_TOKEN\" http://localhost:{port}/plain")}))
            .await;
        assert!(plain.contains("placeholder"), "bwrap={bwrap}: {plain}");
        answers.push(plain);
        let after: Vec<String> = server.seen.lock().unwrap()[before..].to_vec();
        assert!(after.len() >= 2, "bwrap={bwrap}: {after:?}");
        assert!(
            after
                .iter()
                .all(|r| !r.contains(REAL) && !r.contains("/plain")),
            "bwrap={bwrap}: {after:?}"
        );
        assert!(
            after
                .iter()
                .any(|r| r.contains(&format!("note={placeholder}")))
        );

        // git: clone and push over HTTPS, with nothing but the placeholder
        // inside (nib's credential helper answers the server's challenge).
        let url = format!("https://127.0.0.1:{port}/git/r.git");
        let cloned = nib
            .ok("nibash", json!({"command": format!("{via} git clone -q {url} work && cd work && echo b > b.txt && git add b.txt && git -c user.name=bot -c user.email=bot@t commit -qm pushed-through-nib && {via} git push -q origin main && echo PUSHED")}))
            .await;
        assert!(cloned.contains("PUSHED"), "bwrap={bwrap}: {cloned}");
        answers.push(cloned);
        let log = std::process::Command::new("git")
            .args(["log", "--format=%s", "main"])
            .current_dir(repos.join("r.git"))
            .output()
            .unwrap();
        assert!(
            String::from_utf8_lossy(&log.stdout).contains("pushed-through-nib"),
            "bwrap={bwrap}: {log:?}"
        );

        // The brokered file: under bubblewrap programs read a stand-in
        // holding its placeholder, and the header carries the real value
        // to the server; with Landlock alone the file is hidden.
        let file_use = nib
            .ok("nibash", json!({"command": format!("cat {0}; {via} curl -sS -H \"X-Api-Key: $(cat {0})\" https://127.0.0.1:{port}/echo", token_file.display())}))
            .await;
        let got_file = server
            .seen
            .lock()
            .unwrap()
            .iter()
            .any(|r| r.contains(&format!("X-Api-Key: {FILE_REAL}\r\n")));
        assert_eq!(got_file, bwrap == "1", "bwrap={bwrap}: {file_use}");
        answers.push(file_use);

        // A brokered host whose certificate nib does not trust (another
        // CA's): nothing reaches it, and the program is told why.
        let rogue_dir = outside.path().join("rogue");
        std::fs::create_dir_all(&rogue_dir).unwrap();
        let rogue = https_server(&rogue_dir, &repos);
        let (refused, _) = nib
            .call("nibash", json!({"command": format!("{via} curl -sS -H \"Authorization: Bearer $GH_TOKEN\" https://127.0.0.1:{}/echo", rogue.port)}))
            .await;
        assert!(
            refused.contains("did not verify"),
            "bwrap={bwrap}: {refused}"
        );
        assert!(rogue.seen.lock().unwrap().is_empty(), "bwrap={bwrap}");
        answers.push(refused);

        // No process a program can see holds the token in its environment.
        let procs = nib
            .ok("nibash", json!({"command": "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c '^GH_TOKEN=' ; cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep '^GH_TOKEN='"}))
            .await;
        answers.push(procs);

        // Listed by name and host, never by value.
        let status = nib.ok("nibash_status", json!({})).await;
        assert!(
            status.contains("inside the project's folder"),
            "bwrap={bwrap}: {status}"
        );
        assert!(
            status.contains("GH_TOKEN → 127.0.0.1"),
            "bwrap={bwrap}: {status}"
        );
        answers.push(status);
        // The project's file changed nothing: localhost got no secret.
        assert!(!answers.join("\n").contains("GH_TOKEN → localhost"));
        for a in &answers {
            assert!(
                !a.contains(REAL) && !a.contains(FILE_REAL),
                "bwrap={bwrap}: the real token in an answer: {a}"
            );
        }
    }
}

/// Issue 58's findings against a terminated tunnel, in both modes through
/// nibash: the real token never goes to another authority on the declared
/// host's connection (a `Host` of another name, an absolute-form target:
/// domain fronting), an answer the server gzipped anyway is refused with a
/// 502 saying why, an echo in base64 comes back as the placeholder, and a
/// request framed two ways gets 400. The canaries: the requests the test's
/// server records, and the real token in any answer.
#[tokio::test]
async fn a_brokered_token_goes_to_no_other_authority_and_comes_back_in_no_encoding() {
    let landlock_net = nib_sandbox::probe().landlock_abi >= 4;
    for bwrap in ["1", "0"] {
        if bwrap == "0" && !landlock_net {
            eprintln!(
                "Landlock ABI < 4: the Landlock-alone mode cannot hold programs to the proxy here"
            );
            continue;
        }
        let outside = tempfile::tempdir().unwrap();
        let server = https_server(outside.path(), outside.path());
        let port = server.port;
        let dir = project();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let ca = server.ca.to_string_lossy().into_owned();
        let env = [
            ("NIB_SANDBOX", "1"),
            ("NIB_SANDBOX_BWRAP", bwrap),
            ("NIB_SANDBOX_NETWORK", "127.0.0.1"),
            ("NIB_SANDBOX_SECRETS", "GH_TOKEN@127.0.0.1"),
            ("GH_TOKEN", REAL),
            ("SSL_CERT_FILE", ca.as_str()),
        ];
        let nib = start_with(
            Era::Handshake,
            &root,
            TestClient::new(Roots::Undeclared),
            &env,
        )
        .await;
        let via = "env -u NO_PROXY -u no_proxy";
        let auth = "-H \"Authorization: Bearer $GH_TOKEN\"";
        let url = format!("https://127.0.0.1:{port}");
        let mut answers = Vec::new();
        let placeholder = nib
            .ok("nibash", json!({"command": "printenv GH_TOKEN"}))
            .await;
        let placeholder = placeholder
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .to_string();
        assert_eq!(
            placeholder.len(),
            REAL.len(),
            "bwrap={bwrap}: {placeholder}"
        );

        // Domain fronting: another Host, another absolute-form target.
        for (how, cmd) in [
            (
                "Host",
                format!("{via} curl -sS -H 'Host: evil.example' {auth} {url}/echo/fronted"),
            ),
            (
                "target",
                format!(
                    "{via} curl -sS {auth} --request-target https://other.example/echo/fronted {url}/"
                ),
            ),
        ] {
            let (fronted, _) = nib.call("nibash", json!({ "command": cmd })).await;
            assert!(
                fronted.contains("421") || fronted.contains("the host this tunnel was opened to"),
                "bwrap={bwrap} {how}: {fronted}"
            );
            answers.push(fronted);
        }
        let seen = server.seen.lock().unwrap().clone();
        assert!(
            !seen
                .iter()
                .any(|r| r.contains("fronted") || r.contains(REAL)),
            "bwrap={bwrap}: a fronted request reached the server: {seen:?}"
        );

        // An answer gzipped despite Accept-Encoding: identity.
        let (gz, _) = nib
            .call(
                "nibash",
                json!({"command": format!("{via} curl -sS --compressed -D - {auth} {url}/gzip")}),
            )
            .await;
        assert!(
            gz.contains("502") && gz.contains("Content-Encoding: gzip"),
            "bwrap={bwrap}: {gz}"
        );
        answers.push(gz);

        // An echo in base64: decoded, the placeholder (all but the last
        // character, whose bits the encoding shares with the next byte).
        let b64 = nib
            .ok(
                "nibash",
                json!({"command": format!("{via} curl -sS {auth} {url}/echo64 | base64 -d")}),
            )
            .await;
        assert!(
            b64.contains(&format!("Bearer {}", &placeholder[..placeholder.len() - 1])),
            "bwrap={bwrap}: {b64} (placeholder {placeholder})"
        );
        assert!(
            !b64.contains(&REAL[..REAL.len() - 1]),
            "bwrap={bwrap}: {b64}"
        );
        answers.push(b64);
        assert!(
            server
                .seen
                .lock()
                .unwrap()
                .iter()
                .any(|r| r.starts_with("GET /echo64") && r.contains(REAL)),
            "bwrap={bwrap}: the declared host got the token"
        );

        // Content-Length and Transfer-Encoding both: 400, nothing sent.
        let (smuggled, _) = nib
            .call("nibash", json!({"command": format!("{via} curl -sS -H 'Content-Length: 5' -H 'Transfer-Encoding: chunked' --data-binary hello {auth} {url}/echo/smuggled")}))
            .await;
        assert!(
            smuggled.contains("both Content-Length and Transfer-Encoding"),
            "bwrap={bwrap}: {smuggled}"
        );
        assert!(
            !server
                .seen
                .lock()
                .unwrap()
                .iter()
                .any(|r| r.contains("smuggled")),
            "bwrap={bwrap}"
        );
        answers.push(smuggled);
        for a in &answers {
            assert!(
                !a.contains(REAL),
                "bwrap={bwrap}: the real token in an answer: {a}"
            );
        }
        nib.stop().await;
    }
}
