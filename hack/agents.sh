#!/usr/bin/env bash
# Runs one `atoll agent` per cluster of the local ClusterSet (hub = c1) as `hack/env-up.sh`
# joined them: in the member as its agent ServiceAccount, on the hub with the credentials in the
# member's Secret atoll-system/atoll-hub. cN's admin server (metrics, health) listens on
# 127.0.0.1:$(agent_admin_port cN) (lib.sh).
# ATOLL_AGENT_ARGS adds arguments (split on spaces) to every agent started.
# Usage: hack/agents.sh start|stop|restart [cN ...]
set -euo pipefail
. "$(dirname "$0")/lib.sh"
ATOLL=${ATOLL:-$REPO_DIR/target/debug/atoll}
start() {
  [ -x "$ATOLL" ] || die "$ATOLL is missing: run 'cargo build -p atoll'"
  local admin
  admin=$(agent_admin_port "$1")
  # Heartbeats every 2 s and a 12 s grace (defaults 10 s and 60 s) keep liveness tests short.
  proc_start "agent-$1" "$ATOLL" agent --kubeconfig "$ATOLL_ENV_DIR/agent-$1.kubeconfig" \
    --heartbeat-seconds "${ATOLL_HEARTBEAT_SECONDS:-2}" \
    --member-grace-seconds "${ATOLL_MEMBER_GRACE_SECONDS:-12}" \
    --admin-address "127.0.0.1:$admin" ${ATOLL_AGENT_ARGS:-}
}
proc_command agent agent_admin_port start "$@"
