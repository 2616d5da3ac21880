#!/usr/bin/env bash
# `make bench`: propagation benchmark on the local ClusterSet with release builds of the agent.
# Prints p50/p99 latencies, writes per change and idle writes, each against its target.
# BENCH_SERVICES (default 100) and BENCH_IDLE_SECONDS (default 300) tune it.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$REPO_DIR"
cargo build --locked --release -p atoll -p atoll-bench
"$HACK_DIR/env-up.sh"
# Agents from the release build; restarted so the bench measures exactly this binary.
"$HACK_DIR/agents.sh" stop
ATOLL=$REPO_DIR/target/release/atoll "$HACK_DIR/agents.sh" start
ATOLL_KUBECONFIG=$ATOLL_ENV_DIR/kubeconfig "$REPO_DIR/target/release/atoll-bench"
