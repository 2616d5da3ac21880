#!/usr/bin/env bash
# Runs one `atoll dns` per cluster of the local ClusterSet, serving clusterset.local from that
# cluster's objects: cN answers on 127.0.0.1:$(dns_port cN) (UDP and TCP), admin on
# 127.0.0.1:$(dns_admin_port cN) (lib.sh).
# Usage: hack/dns.sh start|stop|restart [cN ...]
set -euo pipefail
. "$(dirname "$0")/lib.sh"
ATOLL=${ATOLL:-$REPO_DIR/target/debug/atoll}
start() {
  [ -x "$ATOLL" ] || die "$ATOLL is missing: run 'cargo build -p atoll'"
  local port admin
  port=$(dns_port "$1")
  admin=$(dns_admin_port "$1")
  # As the chart runs it: the ServiceAccount atoll-dns (a token env-up minted for it).
  proc_start "dns-$1" "$ATOLL" dns --kubeconfig "$ATOLL_ENV_DIR/dns-$1.kubeconfig" \
    --listen "127.0.0.1:$port" --admin-address "127.0.0.1:$admin"
}
proc_command dns dns_admin_port start "$@"
