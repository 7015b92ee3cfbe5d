#!/usr/bin/env bash
# Builds nib and the harness in release mode and runs the benchmark.
# Usage: bench/run.sh [--quick] [--tree PATH] [--iterations N]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --quiet -p nib-tools -p nib-bench
cargo build --release --locked --quiet -p nib-tools --example nib-test-provider
exec target/release/nib-bench --nib target/release/nib "$@"
