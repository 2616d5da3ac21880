#!/usr/bin/env bash
# Runs one `atoll agent` per cluster of the local ClusterSet (hub = c1), as background processes
# with pid files and logs in ~/.cache/atoll/env/agents.
# Usage: hack/agents.sh start|stop|restart [cN ...]   (default: every cluster)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
ATOLL=${ATOLL:-$REPO_DIR/target/debug/atoll}
KUBECONFIG_FILE=$ATOLL_ENV_DIR/kubeconfig
DIR=$ATOLL_ENV_DIR/agents
mkdir -p "$DIR"

action=${1:-}
shift || true
clusters=("$@")
if [ ${#clusters[@]} -eq 0 ]; then
  for d in "$ATOLL_ENV_DIR"/kwok/clusters/*/; do [ -d "$d" ] && clusters+=("$(basename "$d")"); done
fi

# Admin (metrics/health) port of cluster cN's agent: 9470 + N.
admin_port() { echo $((9470 + ${1#c})); }

running() { [ -f "$DIR/$1.pid" ] && kill -0 "$(cat "$DIR/$1.pid")" 2>/dev/null; }

start() {
  local c=$1
  if running "$c"; then return 0; fi
  [ -x "$ATOLL" ] || die "$ATOLL is missing: run 'cargo build -p atoll'"
  RUST_LOG=${RUST_LOG:-info,kube=warn} NO_COLOR=1 nohup "$ATOLL" agent --cluster-id "$c" \
    --kubeconfig "$KUBECONFIG_FILE" --context "kwok-$c" --hub-context kwok-c1 \
    --admin-address "127.0.0.1:$(admin_port "$c")" >>"$DIR/$c.log" 2>&1 &
  echo $! >"$DIR/$c.pid"
  log "agent $c started (pid $!, log $DIR/$c.log)"
}

stop() {
  local c=$1 pid
  running "$c" || { rm -f "$DIR/$c.pid"; return 0; }
  pid=$(cat "$DIR/$c.pid")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$DIR/$c.pid"
  log "agent $c stopped"
}

case $action in
  start) for c in "${clusters[@]}"; do start "$c"; done ;;
  stop) for c in "${clusters[@]}"; do stop "$c"; done ;;
  restart) for c in "${clusters[@]}"; do stop "$c"; start "$c"; done ;;
  *) die "usage: $0 start|stop|restart [cluster ...]" ;;
esac
