#!/usr/bin/env bash
# `make bench`: propagation benchmark on the local ClusterSet with release builds of the agent.
# Prints p50/p99 latencies, writes per change and idle writes, each against its target.
# BENCH_SERVICES (default 100) and BENCH_IDLE_SECONDS (default 300) tune it.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$REPO_DIR"
cargo build --locked --release -p atoll -p atoll-bench
# A fresh ClusterSet: leftovers of earlier runs (namespaces still being deleted, their pods)
# would compete for the two CPUs and distort the numbers.
"$HACK_DIR/env-down.sh"
"$HACK_DIR/env-up.sh"
ATOLL=$REPO_DIR/target/release/atoll "$HACK_DIR/agents.sh" start
ATOLL_KUBECONFIG=$ATOLL_ENV_DIR/kubeconfig "$REPO_DIR/target/release/atoll-bench"
