//! A blocked network says why (issue 60): under the sandbox with no host
//! allowed, a program's failed name lookup or connection ends the answer
//! with a line naming the setting that would allow hosts; with hosts
//! listed, a program that goes around the proxy is told it must use it;
//! unconfined, or with every host open, no such line. Both sandbox modes.

use serde_json::json;

use crate::common::*;

const SANDBOXED: [&[(&str, &str)]; 2] = [
    &[("NIB_SANDBOX", "1")],
    &[("NIB_SANDBOX", "1"), ("NIB_SANDBOX_BWRAP", "0")],
];

#[tokio::test]
async fn a_failed_lookup_under_the_sandbox_is_explained_in_the_answer() {
    let lookup = "python3 -c \"import socket; socket.getaddrinfo('example.invalid', 443)\"; \
                  curl -sS -m 5 http://example.invalid/ 2>&1 | head -1";
    for mode in SANDBOXED {
        let t = project();
        let nib = start_with(
            Era::Handshake,
            t.path(),
            TestClient::new(Roots::Undeclared),
            mode,
        )
        .await;
        let (said, _) = nib.call("nibash", json!({ "command": lookup })).await;
        assert!(
            said.contains("[network: off in the sandbox")
                && said.contains("NIB_SANDBOX_NETWORK=HOST"),
            "{mode:?}: {said}"
        );
        // A call whose programs did not touch the network gets no such line,
        // a python traceback naming FileNotFoundError (ENOTFOUND inside a
        // word) included.
        let quiet = "echo fine; python3 -c \"open('/nope')\"";
        let (quiet, _) = nib.call("nibash", json!({ "command": quiet })).await;
        assert!(
            quiet.contains("FileNotFoundError") && !quiet.contains("[network:"),
            "{mode:?}: {quiet}"
        );
        // Hosts listed: a direct connection around the proxy is explained.
        let mut listed = mode.to_vec();
        listed.push(("NIB_SANDBOX_NETWORK", "127.0.0.1"));
        let nib = start_with(
            Era::Handshake,
            t.path(),
            TestClient::new(Roots::Undeclared),
            &listed,
        )
        .await;
        let direct = "curl -sS --noproxy '*' -m 3 http://127.0.0.1:9/";
        let (said, _) = nib.call("nibash", json!({ "command": direct })).await;
        assert!(
            said.contains("only through nib's proxy"),
            "{mode:?}: {said}"
        );
    }
    // Unconfined (the control): the program's own error and nothing more.
    let t = project();
    let nib = start_with(
        Era::Handshake,
        t.path(),
        TestClient::new(Roots::Undeclared),
        &[],
    )
    .await;
    let (said, _) = nib.call("nibash", json!({ "command": lookup })).await;
    assert!(!said.contains("[network:"), "{said}");
}
