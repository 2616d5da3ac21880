#!/usr/bin/env bash
# Stops exactly what env-up started: each cluster's processes by the pids kwokctl recorded in
# our own work directory and the start times env-up recorded beside them (never by process name;
# a pid file whose process is gone or whose pid now belongs to another process, say after a
# reboot, is removed unsignalled before kwokctl reads it), then removes the clusters' state. The
# binary cache stays.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
export KWOK_WORKDIR=$ATOLL_ENV_DIR/kwok
KUBECONFIG_FILE=$ATOLL_ENV_DIR/kubeconfig

# Our processes first (agents, DNS servers): they would only log errors once the clusters are gone.
for pidfile in "$PROCS_DIR"/*.pid; do
  if [ -f "$pidfile" ]; then proc_stop "$(basename "$pidfile" .pid)"; fi
done
[ -d "$KWOK_WORKDIR/clusters" ] || { log "no local ClusterSet to stop"; exit 0; }
for dir in "$KWOK_WORKDIR"/clusters/*/; do
  name=$(basename "$dir")
  drop_stale_env_pids "$name"
  pids=() starts=()
  for f in "$dir"/pids/*.pid; do
    [ -f "$f" ] || continue
    pids+=("$(tr -dc 0-9 <"$f")") starts+=("$(cat "$f.start")")
  done
  kwokctl delete cluster --kubeconfig "$KUBECONFIG_FILE" --name "$name" >/dev/null 2>&1 || true
  # kwokctl signals the processes; give them 10 s to exit before we insist.
  for i in "${!pids[@]}"; do
    pid=${pids[$i]} start=${starts[$i]}
    for _ in $(seq 100); do pid_is "$pid" "$start" || break; sleep 0.1; done
    if pid_is "$pid" "$start"; then
      log "pid $pid of $name survived kwokctl delete: killing it"
      kill -9 "$pid" 2>/dev/null || true
    fi
  done
  rm -rf "$dir"
  log "$name stopped"
done
