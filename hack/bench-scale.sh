#!/usr/bin/env bash
# `make bench-scale`: the scale envelope (crates/atoll-bench/src/bin/atoll-bench-scale.rs). A
# fresh local ClusterSet with only c2's agent running (release build); the benchmark writes the
# simulated member clusters into the hub itself. BENCH_SIZES (default 10x100,20x100,50x200),
# BENCH_SAMPLES, BENCH_NEW_EXPORTS and BENCH_IDLE_SECONDS tune it; ATOLL=<binary> measures
# another build of the agent (say an older commit's) in exactly the same way.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$REPO_DIR"
cargo build --locked --release -p atoll -p atoll-bench
agent=${ATOLL:-$REPO_DIR/target/release/atoll}
"$HACK_DIR/env-down.sh"
trap '"$HACK_DIR/env-down.sh"' EXIT
"$HACK_DIR/env-up.sh"
# One importing member: other agents would compete for the two CPUs and distort the numbers.
ATOLL=$agent "$HACK_DIR/agents.sh" start c2
log "agent: $agent ($("$agent" --version))"
BENCH_AGENT_PID=$(proc_pid agent-c2) ATOLL_KUBECONFIG=$ATOLL_ENV_DIR/kubeconfig \
  "$REPO_DIR/target/release/atoll-bench-scale"
