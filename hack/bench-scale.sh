#!/usr/bin/env bash
# `make bench-scale`: the scale envelope (crates/atoll-bench/src/bin/atoll-bench-scale.rs). A
# fresh local ClusterSet; the benchmark writes the simulated member clusters into the hub itself
# and measures c2's agent (release build). BENCH_SIZES (default 10x100,50x200,100x200),
# BENCH_SAMPLES, BENCH_NEW_EXPORTS, BENCH_IDLE_SECONDS and BENCH_IMPORTERS (below) tune it;
# ATOLL=<binary> measures another build of the agent (say an older commit's) in exactly the same
# way. Heartbeats and grace are the chart's defaults (10 s, 60 s: what a fleet runs), unless
# ATOLL_HEARTBEAT_SECONDS / ATOLL_MEMBER_GRACE_SECONDS say otherwise; the simulated clusters
# renew at the same interval. Beside c2's agent run `atoll dns` and CoreDNS (`kubernetes {
# multicluster }`) on c2's objects, for their RSS at each size.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$REPO_DIR"
cargo build --locked --release -p atoll -p atoll-bench
"$HACK_DIR/build-tools.sh" coredns
require coredns
export ATOLL=${ATOLL:-$REPO_DIR/target/release/atoll}
export ATOLL_HEARTBEAT_SECONDS=${ATOLL_HEARTBEAT_SECONDS:-10}
export ATOLL_MEMBER_GRACE_SECONDS=${ATOLL_MEMBER_GRACE_SECONDS:-60}
coredns_pid=""
stop_all() {
  [ -n "$coredns_pid" ] && kill "$coredns_pid" 2>/dev/null || true
  "$HACK_DIR/env-down.sh"
}
"$HACK_DIR/env-down.sh"
trap stop_all EXIT
"$HACK_DIR/env-up.sh"
# BENCH_IMPORTERS=c2 (the default): one importing member, the numbers of one agent alone.
# BENCH_IMPORTERS=all: every member's agent runs and imports everything, as in production (three
# agents and three apiservers share the two CPUs); the numbers are still c2's.
case ${BENCH_IMPORTERS:-c2} in
  c2) "$HACK_DIR/agents.sh" start c2 ;;
  all) "$HACK_DIR/agents.sh" start ;;
  *) die "BENCH_IMPORTERS is '$BENCH_IMPORTERS': c2 or all" ;;
esac
# The DNS server of c2, as released (not the debug build dns.sh defaults to).
"$HACK_DIR/dns.sh" start c2
work=$ATOLL_ENV_DIR/bench-scale
mkdir -p "$work"
coredns_port=15393
cat >"$work/Corefile" <<CORE
clusterset.local:$coredns_port {
    bind 127.0.0.1
    kubernetes clusterset.local {
        kubeconfig $ATOLL_ENV_DIR/kubeconfig kwok-c2
        multicluster clusterset.local
    }
}
CORE
"$COREDNS_BIN/coredns" -conf "$work/Corefile" >"$work/coredns.log" 2>&1 &
coredns_pid=$!
echo "$coredns_pid" >"$work/coredns.pid"
log "agent: $ATOLL ($("$ATOLL" --version)), importers: ${BENCH_IMPORTERS:-c2}, heartbeat ${ATOLL_HEARTBEAT_SECONDS} s, grace ${ATOLL_MEMBER_GRACE_SECONDS} s"
BENCH_AGENT_PIDFILE=$PROCS_DIR/agent-c2.pid \
  BENCH_RESTART_COMMAND="$HACK_DIR/agents.sh restart c2" \
  BENCH_HUB_DIR=$ATOLL_ENV_DIR/kwok/clusters/c1 \
  BENCH_DNS_PIDFILES="atoll dns=$PROCS_DIR/dns-c2.pid,CoreDNS=$work/coredns.pid" \
  BENCH_IMPORTERS=${BENCH_IMPORTERS:-c2} \
  ATOLL_KUBECONFIG=$ATOLL_ENV_DIR/kubeconfig \
  "$REPO_DIR/target/release/atoll-bench-scale"
