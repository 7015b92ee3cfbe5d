//! The server's surface as a client sees it: `tools/list` from the built
//! binary, in both protocol eras, against a committed snapshot
//! (`tests/snapshots/all__tool_schemas__tools_list.snap`). Any change to a
//! tool's name, description, input schema or annotations fails here until
//! the snapshot is accepted (`cargo insta review`), so each change to the
//! schemas is a stated one, in the commit that makes it.

use crate::common::*;

/// `tools/list` as pretty JSON, the tools in the order served.
async fn listed(era: Era, env: &[(&str, &str)]) -> String {
    let dir = project();
    let nib = start_with(era, dir.path(), TestClient::new(Roots::Undeclared), env).await;
    let tools = nib.client.list_all_tools().await.expect("tools/list");
    nib.stop().await;
    serde_json::to_string_pretty(&tools).expect("tools serialize")
}

#[tokio::test]
async fn tools_list_matches_the_snapshot_in_both_eras() {
    let handshake = listed(Era::Handshake, &[]).await;
    let modern = listed(Era::Modern, &[]).await;
    assert_eq!(
        handshake, modern,
        "the two protocol eras list different tools"
    );
    insta::assert_snapshot!("tools_list", handshake);
}

#[tokio::test]
async fn tools_list_is_the_same_under_the_sandbox() {
    let unconfined = listed(Era::Handshake, &[]).await;
    for env in [
        &[("NIB_SANDBOX", "1")][..],
        &[("NIB_SANDBOX", "1"), ("NIB_SANDBOX_BWRAP", "0")][..],
    ] {
        let confined = listed(Era::Handshake, env).await;
        assert_eq!(unconfined, confined, "{env:?}");
    }
}
