#!/usr/bin/env bash
# Stops or starts the control plane of one cluster of the local ClusterSet, keeping its etcd
# data (for tests of apiserver and hub outages). Usage: hack/cluster.sh stop|start cN
set -euo pipefail
. "$(dirname "$0")/lib.sh"
export KWOK_WORKDIR=$ATOLL_ENV_DIR/kwok
[ $# -eq 2 ] || die "usage: $0 stop|start cluster"
case $1 in
  stop) drop_stale_env_pids "$2"; kwokctl stop cluster --name "$2" >/dev/null 2>&1 ;;
  start)
    if kubectl --kubeconfig "$ATOLL_ENV_DIR/kubeconfig" --context "kwok-$2" get --raw /readyz >/dev/null 2>&1; then
      exit 0
    fi
    kwokctl start cluster --name "$2" >/dev/null 2>&1
    record_env_starts "$2"
    for _ in $(seq 300); do
      kubectl --kubeconfig "$ATOLL_ENV_DIR/kubeconfig" --context "kwok-$2" get --raw /readyz >/dev/null 2>&1 && exit 0
      sleep 0.2
    done
    die "cluster $2 did not become ready within 60 s"
    ;;
  *) die "usage: $0 stop|start cluster" ;;
esac
log "cluster $2: $1"
