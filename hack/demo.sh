#!/usr/bin/env bash
# The main job: brings up the local ClusterSet (3 clusters of real control planes on 127.0.0.1)
# with an Atoll agent per cluster (hub = c1), exports a Service from c2, and shows the
# ServiceImport, derived Service and MCS EndpointSlices that appear in c1, c2 and c3. The
# ClusterSet stays up for you to explore; `make env-down` stops it.
# Every step is checked: the demo exits non-zero, naming the step, when an import, a DNS answer
# (the ServiceImport's IP) or the SRV record is missing or wrong, and ends with `demo: OK`.
set -Eeuo pipefail
. "$(dirname "$0")/lib.sh"
# Any command that fails without its own message still names itself.
trap 'log "demo: FAILED at hack/demo.sh line $LINENO: $BASH_COMMAND"' ERR
fail() { die "demo: FAILED at step '$1': $2"; }
require dig
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
"${k2[@]}" -n demo rollout status deployment/hello --timeout=60s >/dev/null ||
  fail "deployment" "c2's Deployment hello did not roll out within 60 s"
echo
echo "== c2: the exported Service, its ServiceExport and the EndpointSlice the real controller wrote"
"${k2[@]}" -n demo get service,serviceexport hello
"${k2[@]}" -n demo get endpointslices -l kubernetes.io/service-name=hello
declare -A import_ip
for ctx in kwok-c1 kwok-c2 kwok-c3; do
  ip=""
  for _ in $(seq 100); do
    ip=$(kubectl --context "$ctx" -n demo get serviceimport hello -o jsonpath='{.spec.ips[0]}' 2>/dev/null || true)
    [ -n "$ip" ] && break
    sleep 0.2
  done
  [ -n "$ip" ] || fail "import in ${ctx#kwok-}" "no ServiceImport demo/hello with an IP after 20 s; see $PROCS_DIR/agent-*.log"
  import_ip[${ctx#kwok-}]=$ip
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
name=hello.demo.svc.clusterset.local
ask() { # port type: dig's short answer, or its error (";; ...") when it got none
  dig +short +time=1 +tries=1 @127.0.0.1 -p "$1" "$name" "$2" 2>&1 || true
}
for c in c1 c2 c3; do
  port=$(dns_port "$c")
  want=${import_ip[$c]}
  echo "== $c: atoll dns on 127.0.0.1:$port answers $name"
  answer=""
  for _ in $(seq 50); do
    answer=$(ask "$port" A)
    [ "$answer" = "$want" ] && break
    sleep 0.2
  done
  case $answer in
    "$want") ;;
    "" | ";;"*) fail "DNS A in $c" "no answer for $name from 127.0.0.1:$port after 10 s (dig: ${answer:-empty answer}); see $PROCS_DIR/dns-$c.log" ;;
    *) fail "DNS A in $c" "127.0.0.1:$port answered '$answer' for $name, but the ServiceImport's IP is $want" ;;
  esac
  echo "  A    $answer"
  # The Service has one port, tcp/42: one SRV record "<priority> <weight> 42 <target>".
  srv=$(ask "$port" SRV)
  [ "$(awk 'NR == 1 { print $3 }' <<<"$srv")" = 42 ] ||
    fail "DNS SRV in $c" "no SRV record for port 42 of $name from 127.0.0.1:$port (dig: ${srv:-empty answer})"
  echo "  SRV  $srv"
done
echo "Explore: export KUBECONFIG=$ATOLL_ENV_DIR/kubeconfig; stop: make env-down"
echo "demo: OK"
