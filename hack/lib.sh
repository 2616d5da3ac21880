# Shared settings for hack/ scripts. Source it; it defines no side effects beyond variables.
# shellcheck shell=bash
HACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$HACK_DIR/.." && pwd)
# shellcheck source=versions.env
. "$HACK_DIR/versions.env"
ATOLL_CACHE=${ATOLL_CACHE:-$HOME/.cache/atoll}
K8S_BIN=$ATOLL_CACHE/k8s-$K8S_VERSION/bin
ETCD_BIN=$ATOLL_CACHE/etcd-$ETCD_VERSION/bin
KWOK_BIN=$ATOLL_CACHE/kwok-$KWOK_VERSION/bin
COREDNS_BIN=$ATOLL_CACHE/coredns-$COREDNS_VERSION/bin
# Where a running local ClusterSet keeps its state (kwok workdir, kubeconfig, pids, logs).
ATOLL_ENV_DIR=${ATOLL_ENV_DIR:-$ATOLL_CACHE/env}
export PATH="$K8S_BIN:$ETCD_BIN:$KWOK_BIN:$COREDNS_BIN:$PATH"

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# Pids of every process of the running local ClusterSet, one per line (from kwokctl's pid files).
env_pids() {
  local f
  for f in "$ATOLL_ENV_DIR"/kwok/clusters/*/pids/*.pid; do
    [ -f "$f" ] && { cat "$f"; echo; }
  done
}
