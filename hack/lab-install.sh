#!/usr/bin/env bash
# `make lab-install`: Atoll installed the way a platform team installs it, into the lab's real
# nodes (make lab-up): `helm install` of charts/atoll into every cluster
# (c1 is the hub and a member: mode both; the others mode member), then `atoll join` of each
# member through the hub, all from the image `make image` built, imported into each node's
# containerd (nothing is pulled). The agents (2 replicas, leader election), the DNS servers,
# the chart's RBAC and admission policies and its CoreDNS wiring hook Job run as Pods with
# in-cluster configuration and the chart's securityContext.
#
# The lab's settings besides the chart's defaults: the heartbeat and grace of the local
# ClusterSet (2 s, 12 s: the lab's dead-cluster tests wait for it), DNS anti-affinity
# `preferred` (one node per cluster: `required` would leave the second replica Pending), and
# CoreDNS wiring on. `atoll join` gives the agents the hub at the lab's address
# (--hub-server), which pods reach; the administrator's kubeconfig says 127.0.0.1.
#
# Re-running upgrades the releases in place (helm upgrade --install) and joins again (join is
# idempotent). Usage: hack/lab-install.sh [--set key=value ...] (passed to every helm call)
set -euo pipefail
. "$(dirname "$0")/lab-env.sh"
ATOLL=${ATOLL:-$REPO_DIR/target/debug/atoll}
HUB=c1
VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$REPO_DIR/Cargo.toml" | head -1)
ARCHIVE=$REPO_DIR/target/image/atoll-$VERSION.oci.tar

[ -d "$LAB_DIR/nodes/$HUB" ] || die "the lab has no real nodes: start it with 'make lab-up'"
[ -s "$ARCHIVE" ] || die "$ARCHIVE is missing: run 'make image' (make lab-install does)"
netns_isolated "$LAB_NETNS" || die "the lab namespace failed its isolation check"

in_lab() { ip netns exec "$LAB_NETNS" "$@"; }
lab_helm() { local c=$1; shift; in_lab helm --kubeconfig "$ATOLL_ENV_DIR/kubeconfig" --kube-context "kwok-$c" "$@"; }

clusters=$(clusters_or)
started=$SECONDS
for c in $clusters; do "$HACK_DIR/lab-node.sh" images "$c"; done
log "image atoll:$VERSION imported into every node ($ARCHIVE)"

hub_server=$(kubectl --kubeconfig "$ATOLL_ENV_DIR/kubeconfig" config view \
  -o jsonpath="{.clusters[?(@.name==\"kwok-$HUB\")].cluster.server}")
hub_server=https://$LAB_ADDRESS:${hub_server##*:}

install() { # cN helm-flags...
  local c=$1 mode=member start=$SECONDS
  shift
  [ "$c" = "$HUB" ] && mode=both
  lab_helm "$c" upgrade --install atoll "$REPO_DIR/charts/atoll" \
    --namespace atoll-system --create-namespace \
    --set mode="$mode" --set image.tag="$VERSION" \
    --set agent.heartbeatSeconds=2 --set agent.memberGraceSeconds=12 \
    --set dns.antiAffinity=preferred --set coredns.wire=true \
    "$@" --timeout 5m >"$ATOLL_ENV_DIR/helm-$c.log" 2>&1 ||
    { tail -20 "$ATOLL_ENV_DIR/helm-$c.log" >&2; die "helm install into $c failed"; }
  log "helm install atoll into $c (mode $mode): $((SECONDS - start)) s"
}

join() { # cN
  local c=$1
  in_lab "$ATOLL" join --kubeconfig "$ATOLL_ENV_DIR/kubeconfig" --context "kwok-$c" \
    --hub-context "kwok-$HUB" --hub-server "$hub_server" --cluster-id "$c" --clusterset local \
    --member-rbac=false >"$ATOLL_ENV_DIR/$c.join.log" 2>&1 ||
    { cat "$ATOLL_ENV_DIR/$c.join.log" >&2; die "atoll join of $c failed"; }
  log "atoll join of $c (hub server $hub_server)"
}

# The hub first: its release brings the hub's CRDs, which every join writes to.
install "$HUB" "$@"
for c in $clusters; do [ "$c" = "$HUB" ] || install "$c" "$@"; done
for c in $clusters; do join "$c"; done
for c in $clusters; do
  for d in atoll-agent atoll-dns; do
    lab_kubectl "$c" -n atoll-system rollout status "deployment/$d" --timeout 180s >/dev/null ||
      { lab_kubectl "$c" -n atoll-system get pods -o wide >&2; die "$d of $c did not become ready"; }
  done
done
# The hook Job has edited the Corefile; CoreDNS answers for clusterset.local once the kubelet
# has updated its ConfigMap volume (its sync, up to a minute or so) and `reload` has read it.
# Asked of each CoreDNS pod from its node (the node routes to its pods, not to Services).
wired() { # cN
  local ip
  ip=$(lab_kubectl "$1" -n kube-system get pod -l k8s-app=kube-dns -o jsonpath='{.items[0].status.podIP}')
  [ -n "$ip" ] && ip netns exec "$(node_netns "$1")" dig +time=1 +tries=1 "@$ip" clusterset.local SOA 2>/dev/null |
    grep -q 'status: NOERROR'
}
for c in $clusters; do
  deadline=$((SECONDS + 180))
  until wired "$c"; do
    [ $SECONDS -lt $deadline ] || die "CoreDNS of $c does not answer for clusterset.local 180 s after the wiring hook"
    sleep 1
  done
done
log "CoreDNS answers for clusterset.local in every cluster, $((SECONDS - started)) s after the start"
log "Atoll installed with Helm into $(wc -w <<<"$clusters") clusters in $((SECONDS - started)) s"
for c in $clusters; do
  echo "--- kubectl get pods -n atoll-system ($c)"
  lab_kubectl "$c" -n atoll-system get pods -o wide
done
# Pod start time of each agent and DNS Pod from its own status: created -> container running ->
# Ready (an agent is ready once its member is joined and its first pass is done).
for c in $clusters; do
  lab_kubectl "$c" -n atoll-system get pods -o json | python3 -c '
import json, sys
from datetime import datetime
t = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00"))
for p in json.load(sys.stdin)["items"]:
    created = t(p["metadata"]["creationTimestamp"])
    running = [c["state"]["running"]["startedAt"] for c in p["status"].get("containerStatuses", []) if "running" in c.get("state", {})]
    ready = [c["lastTransitionTime"] for c in p["status"].get("conditions", []) if c["type"] == "Ready" and c["status"] == "True"]
    fmt = lambda ts: "%d s" % (t(ts[0]) - created).total_seconds() if ts else "-"
    print("pod start %s %s: created -> running %s, -> Ready %s" % (sys.argv[1], p["metadata"]["name"], fmt(running), fmt(ready)))
' "$c"
done
