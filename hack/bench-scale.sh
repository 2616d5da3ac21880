#!/usr/bin/env bash
# `make bench-scale`: the scale envelope (crates/atoll-bench/src/bin/atoll-bench-scale.rs). A
# fresh local ClusterSet with only c2's agent running (release build); the benchmark writes the
# simulated member clusters into the hub itself. BENCH_SIZES (default 10x100,20x100,50x200),
# BENCH_SAMPLES, BENCH_NEW_EXPORTS, BENCH_IDLE_SECONDS and BENCH_IMPORTERS (below) tune it; ATOLL=<binary> measures
# another build of the agent (say an older commit's) in exactly the same way.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$REPO_DIR"
cargo build --locked --release -p atoll -p atoll-bench
agent=${ATOLL:-$REPO_DIR/target/release/atoll}
"$HACK_DIR/env-down.sh"
trap '"$HACK_DIR/env-down.sh"' EXIT
"$HACK_DIR/env-up.sh"
# BENCH_IMPORTERS=c2 (the default): one importing member, the numbers of one agent alone.
# BENCH_IMPORTERS=all: every member's agent runs and imports everything, as in production (three
# agents and three apiservers share the two CPUs); the numbers are still c2's.
case ${BENCH_IMPORTERS:-c2} in
  c2) ATOLL=$agent "$HACK_DIR/agents.sh" start c2 ;;
  all) ATOLL=$agent "$HACK_DIR/agents.sh" start ;;
  *) die "BENCH_IMPORTERS is '$BENCH_IMPORTERS': c2 or all" ;;
esac
log "agent: $agent ($("$agent" --version)), importers: ${BENCH_IMPORTERS:-c2}"
BENCH_AGENT_PID=$(proc_pid agent-c2) ATOLL_KUBECONFIG=$ATOLL_ENV_DIR/kubeconfig \
  "$REPO_DIR/target/release/atoll-bench-scale"
