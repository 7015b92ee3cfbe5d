//! `nibash_status` only reads, as its annotations say (read-only,
//! idempotent); what stops a job, puts a trashed file back or switches the
//! session is `nibash_control` (destructive, not idempotent). The old
//! `nibash_status` arguments are refused with the new tool's name and do
//! nothing — a job they name goes on and writes its marker, a trashed file
//! stays in the trash — in every sandbox mode.

use std::time::Duration;

use serde_json::json;

use crate::common::*;

/// Unconfined, bubblewrap, Landlock + seccomp alone.
const MODES: [&[(&str, &str)]; 3] = [
    &[],
    &[("NIB_SANDBOX", "1")],
    &[("NIB_SANDBOX", "1"), ("NIB_SANDBOX_BWRAP", "0")],
];

/// The `%N` an answer names first.
fn job_in(text: &str) -> String {
    let at = text
        .find('%')
        .unwrap_or_else(|| panic!("no job in {text:?}"));
    let digits: String = text[at + 1..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    assert!(!digits.is_empty(), "no job number in {text:?}");
    format!("%{digits}")
}

#[tokio::test]
async fn nibash_status_stops_and_restores_nothing_and_nibash_control_does_both_in_every_mode() {
    for mode in MODES {
        let dir = project();
        std::fs::write(dir.path().join("gone.txt"), "kept words\n").unwrap();
        let nib = start_with(
            Era::Handshake,
            dir.path(),
            TestClient::new(Roots::Undeclared),
            mode,
        )
        .await;
        let go_on = nib
            .ok(
                "nibash",
                json!({"command": "sleep 2; touch went-on", "background": true}),
            )
            .await;
        let go_on = job_in(&go_on);
        let stop_me = nib
            .ok(
                "nibash",
                json!({"command": "sleep 2; touch not-stopped", "background": true}),
            )
            .await;
        let stop_me = job_in(&stop_me);

        // The old arguments on the status: refused, naming the new tool.
        let refused = nib.err("nibash_status", json!({"stop": go_on})).await;
        assert!(
            refused.contains("nibash_control") && refused.contains("nothing was stopped"),
            "{mode:?}: {refused}"
        );
        let stopped = nib.ok("nibash_control", json!({"stop": stop_me})).await;
        assert!(
            stopped.contains(&format!("stopped {stop_me}")),
            "{mode:?}: {stopped}"
        );
        std::thread::sleep(Duration::from_millis(3500));
        assert!(
            dir.path().join("went-on").exists(),
            "{mode:?}: a job nibash_status was asked to stop did not go on"
        );
        assert!(
            !dir.path().join("not-stopped").exists(),
            "{mode:?}: a job nibash_control stopped went on"
        );

        // Restore: the status leaves the trash alone, the control puts it back.
        let removed = nib.ok("nibash", json!({"command": "rm gone.txt"})).await;
        assert!(!dir.path().join("gone.txt").exists(), "{mode:?}: {removed}");
        let refused = nib
            .err("nibash_status", json!({"restore": "gone.txt"}))
            .await;
        assert!(refused.contains("nibash_control"), "{mode:?}: {refused}");
        assert!(
            !dir.path().join("gone.txt").exists(),
            "{mode:?}: nibash_status restored a file"
        );
        let restored = nib
            .ok("nibash_control", json!({"restore": "gone.txt"}))
            .await;
        assert!(
            restored.contains("restored gone.txt"),
            "{mode:?}: {restored}"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("gone.txt")).unwrap(),
            "kept words\n",
            "{mode:?}"
        );

        // Summaries: only the control switches them.
        let refused = nib.err("nibash_status", json!({"summaries": false})).await;
        assert!(refused.contains("summaries"), "{mode:?}: {refused}");
        let status = nib.ok("nibash_status", json!({})).await;
        assert!(
            !status.contains("off for this session"),
            "{mode:?}: {status}"
        );

        // A control with nothing to do says so and changes nothing.
        let nothing = nib.err("nibash_control", json!({})).await;
        assert!(
            nothing.contains("nothing was changed"),
            "{mode:?}: {nothing}"
        );
        nib.stop().await;
    }
}
