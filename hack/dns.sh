#!/usr/bin/env bash
# Runs one `atoll dns` per cluster of the local ClusterSet, serving clusterset.local from that
# cluster's objects: cN answers on 127.0.0.1:1535N (UDP and TCP), admin on 127.0.0.1:948N.
# Usage: hack/dns.sh start|stop|restart [cN ...]
set -euo pipefail
. "$(dirname "$0")/lib.sh"
ATOLL=${ATOLL:-$REPO_DIR/target/debug/atoll}
action=${1:-}; shift || true
start() {
  [ -x "$ATOLL" ] || die "$ATOLL is missing: run 'cargo build -p atoll'"
  proc_start "dns-$1" "$ATOLL" dns --kubeconfig "$ATOLL_ENV_DIR/kubeconfig" --context "kwok-$1" \
    --listen "127.0.0.1:$((15350 + ${1#c}))" --admin-address "127.0.0.1:$((9480 + ${1#c}))"
}
started=()
for c in $(clusters_or "$@"); do
  case $action in
    start) start "$c"; started+=("$c") ;;
    stop) proc_stop "dns-$c" ;;
    restart) proc_stop "dns-$c"; start "$c"; started+=("$c") ;;
    *) die "usage: $0 start|stop|restart [cluster ...]" ;;
  esac
done
# Started processes serve /readyz once every watch has listed and the first pass ran.
for c in "${started[@]}"; do wait_ready "dns-$c" "$((9480 + ${c#c}))"; done
