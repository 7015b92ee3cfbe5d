//! The sandbox's memory limits, through nibash over MCP in every mode
//! (unconfined, bubblewrap, Landlock + seccomp alone): runtimes that
//! reserve large address ranges they never touch run (V8's WebAssembly
//! guard regions crashed vitest under an address-space limit), while what
//! programs write stays bounded — per process everywhere, and for the
//! whole tree together where a memory cgroup can be made.

use std::path::Path;

use serde_json::json;

use crate::common::*;

const MODES: [&[(&str, &str)]; 3] = [
    &[],
    &[("NIB_SANDBOX", "1")],
    &[("NIB_SANDBOX", "1"), ("NIB_SANDBOX_BWRAP", "0")],
];

async fn sh_in(dir: &Path, env: &[(&str, &str)], command: &str) -> String {
    let nib = start_with(Era::Handshake, dir, TestClient::new(Roots::Undeclared), env).await;
    let out = nib.ok("nibash", json!({ "command": command })).await;
    nib.stop().await;
    out
}

/// Two `WebAssembly.Memory` objects reserve about 20 GiB of address space
/// between them (the guard regions) and touch a few KiB.
#[tokio::test]
async fn runtimes_that_reserve_large_ranges_run_in_every_mode() {
    let dir = project();
    let script = "const a = new WebAssembly.Memory({initial: 1, maximum: 65536}); \
                  const b = new WebAssembly.Memory({initial: 1, maximum: 65536}); \
                  console.log('memories', a.buffer.byteLength + b.buffer.byteLength)";
    std::fs::write(dir.path().join("wasm.js"), script).unwrap();
    for env in MODES {
        let out = sh_in(dir.path(), env, "node wasm.js").await;
        assert!(out.starts_with("memories 131072\n"), "{env:?}: {out}");
    }
}

/// One process writing more than `NIB_SANDBOX_MEMORY` is refused the
/// memory, in every mode; one writing less gets it.
#[tokio::test]
async fn a_process_writing_more_than_the_limit_is_stopped_in_every_mode() {
    let dir = project();
    std::fs::write(
        dir.path().join("fill.py"),
        "import sys\n\
         mib = int(sys.argv[1])\n\
         block = bytearray(mib << 20)\n\
         for i in range(0, len(block), 4096):\n    block[i] = 1\n\
         print('held', mib)\n",
    )
    .unwrap();
    for env in MODES {
        let mut env = env.to_vec();
        env.push(("NIB_SANDBOX_MEMORY", "256M"));
        let out = sh_in(dir.path(), &env, "python3 fill.py 64; python3 fill.py 400").await;
        assert!(out.contains("held 64\n"), "{env:?}: {out}");
        assert!(
            !out.contains("held 400"),
            "{env:?}: 400 MiB were written under a 256 MiB limit: {out}"
        );
    }
}

/// Where a memory cgroup can be made, processes that each stay under the
/// limit cannot together go over it: three writers of 150 MiB each under
/// 256 MiB do not all hold their memory at once.
#[tokio::test]
async fn the_trees_memory_together_is_capped_where_a_cgroup_can_be_made() {
    if !nib_sandbox::probe().memory_cgroup {
        eprintln!("no memory cgroup can be made here: the per-process limit holds alone");
        return;
    }
    let dir = project();
    std::fs::write(
        dir.path().join("hold.py"),
        "import time\n\
         block = bytearray(150 << 20)\n\
         for i in range(0, len(block), 4096):\n    block[i] = 1\n\
         time.sleep(2)\n\
         print('held')\n",
    )
    .unwrap();
    for env in MODES {
        let mut env = env.to_vec();
        env.push(("NIB_SANDBOX_MEMORY", "256M"));
        let out = sh_in(
            dir.path(),
            &env,
            "python3 hold.py & python3 hold.py & python3 hold.py & wait",
        )
        .await;
        let held = out.matches("held\n").count();
        assert!(
            held < 3,
            "{env:?}: three 150 MiB writers held 450 MiB together under 256 MiB: {out}"
        );
    }
}
