#!/usr/bin/env bash
# Runs one `atoll agent` per cluster of the local ClusterSet (hub = c1); cN's admin server
# (metrics, health) listens on 127.0.0.1:947N. Usage: hack/agents.sh start|stop|restart [cN ...]
set -euo pipefail
. "$(dirname "$0")/lib.sh"
ATOLL=${ATOLL:-$REPO_DIR/target/debug/atoll}
action=${1:-}; shift || true
start() {
  [ -x "$ATOLL" ] || die "$ATOLL is missing: run 'cargo build -p atoll'"
  proc_start "agent-$1" "$ATOLL" agent --cluster-id "$1" --kubeconfig "$ATOLL_ENV_DIR/kubeconfig" \
    --context "kwok-$1" --hub-context kwok-c1 --admin-address "127.0.0.1:$((9470 + ${1#c}))"
}
started=()
for c in $(clusters_or "$@"); do
  case $action in
    start) start "$c"; started+=("$c") ;;
    stop) proc_stop "agent-$c" ;;
    restart) proc_stop "agent-$c"; start "$c"; started+=("$c") ;;
    *) die "usage: $0 start|stop|restart [cluster ...]" ;;
  esac
done
# Started processes serve /readyz once every watch has listed and the first pass ran.
for c in "${started[@]}"; do wait_ready "agent-$c" "$((9470 + ${c#c}))"; done
