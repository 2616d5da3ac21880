#!/usr/bin/env bash
# The main job: brings up the local ClusterSet (3 clusters of real control planes on 127.0.0.1)
# with an Atoll agent per cluster (hub = c1), exports a Service from c2, and shows the
# ServiceImport, derived Service and MCS EndpointSlices that appear in c1, c2 and c3. The
# ClusterSet stays up for you to explore; `make env-down` stops it.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
"$HACK_DIR/env-up.sh"
"$HACK_DIR/agents.sh" start
"$HACK_DIR/dns.sh" start
export KUBECONFIG=$ATOLL_ENV_DIR/kubeconfig
k2=(kubectl --context kwok-c2)

log "creating namespace demo, a 2-replica Deployment 'hello' on c2's kwok node, and its Service"
for ctx in kwok-c1 kwok-c2 kwok-c3; do
  kubectl --context "$ctx" create namespace demo --dry-run=client -o yaml | kubectl --context "$ctx" apply --server-side --field-manager=atoll-demo -f - >/dev/null
done
"${k2[@]}" -n demo apply --server-side --field-manager=atoll-demo -f - >/dev/null <<'YAML'
apiVersion: apps/v1
kind: Deployment
metadata: {name: hello}
spec:
  replicas: 2
  selector: {matchLabels: {app: hello}}
  template:
    metadata: {labels: {app: hello}}
    spec: {containers: [{name: hello, image: hello}]}
---
apiVersion: v1
kind: Service
metadata: {name: hello}
spec:
  selector: {app: hello}
  ports: [{name: tcp, port: 42, protocol: TCP}]
---
apiVersion: multicluster.x-k8s.io/v1beta1
kind: ServiceExport
metadata: {name: hello}
YAML
"${k2[@]}" -n demo rollout status deployment/hello --timeout=60s >/dev/null
echo
echo "== c2: the exported Service, its ServiceExport and the EndpointSlice the real controller wrote"
"${k2[@]}" -n demo get service,serviceexport hello
"${k2[@]}" -n demo get endpointslices -l kubernetes.io/service-name=hello
for ctx in kwok-c1 kwok-c2 kwok-c3; do
  for _ in $(seq 100); do
    ip=$(kubectl --context "$ctx" -n demo get serviceimport hello -o jsonpath='{.spec.ips[0]}' 2>/dev/null || true)
    [ -n "$ip" ] && break
    sleep 0.2
  done
  [ -n "$ip" ] || die "no ServiceImport with an IP in $ctx after 20 s; see $PROCS_DIR/agent-*.log"
  echo
  echo "== ${ctx#kwok-}: ServiceImport, derived Service and MCS EndpointSlices (source-cluster=c2)"
  kubectl --context "$ctx" -n demo get serviceimport hello
  kubectl --context "$ctx" -n demo get services -l app.kubernetes.io/managed-by=atoll
  kubectl --context "$ctx" -n demo get endpointslices -l multicluster.kubernetes.io/service-name=hello \
    -L multicluster.kubernetes.io/source-cluster
done
echo
echo "== c2: the export's conditions"
"${k2[@]}" -n demo get serviceexport hello \
  -o jsonpath='{range .status.conditions[*]}  {.type}={.status} ({.reason}) {.message}{"\n"}{end}'
echo
for i in 1 2 3; do
  port=$(dns_port "c$i")
  echo "== c$i: atoll dns on 127.0.0.1:$port answers hello.demo.svc.clusterset.local"
  for _ in $(seq 50); do
    answer=$(dig +short @127.0.0.1 -p "$port" hello.demo.svc.clusterset.local A 2>/dev/null || true)
    [ -n "$answer" ] && break
    sleep 0.2
  done
  echo "  A    $answer"
  echo "  SRV  $(dig +short @127.0.0.1 -p "$port" hello.demo.svc.clusterset.local SRV)"
done
echo "Explore: export KUBECONFIG=$ATOLL_ENV_DIR/kubeconfig; stop: make env-down"
