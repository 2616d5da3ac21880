#!/usr/bin/env bash
# Traffic tests in the running data-plane lab (make lab-up && make lab-install first): real packets from a pod of
# c1 through kube-proxy's nftables rules to pods of c2 and c3, names resolved by the pod's
# resolver through c1's CoreDNS and `atoll dns`; then KEP-5939 locality (hack/lab-locality.sh).
# The isolation checks run first; nothing runs if one fails. Prints "lab traffic: N passed, N failed". Usage: hack/lab-test.sh
set -euo pipefail
HACK=$(cd "$(dirname "$0")" && pwd)
. "$HACK/lab-env.sh"
. "$HACK/lab-workloads.sh"
SUITE="lab traffic"
NS=lab-traffic
SVC=echo
CONNECTIONS=${LAB_CONNECTIONS:-100}
# Propagation allowance for "within the propagation time" checks.
PROPAGATION=${LAB_PROPAGATION_SECONDS:-20}

"$HACK/lab.sh" check || die "the lab is not isolated: no traffic test runs"

k() { lab_kubectl "$@"; }
in_pod() { local c=$1 pod=$2; shift 2; "$HACK/lab.sh" pod-exec "$c" "$NS" "$pod" "$@"; }


# Waits up to $1 seconds for a command to succeed.
eventually() { # seconds command...
  local deadline=$((SECONDS + $1)); shift
  until "$@"; do [ $SECONDS -lt $deadline ] || return 1; sleep 0.5; done
}

echo_workload() { # cluster -> a Deployment of 2 echo pods ("<cluster> <pod>") and the Service, exported
  lab_namespace "$1" "$NS"
  {
    echo_service_yaml "$SVC" 2 "$1 \$HOSTNAME"
    printf -- '---\napiVersion: multicluster.x-k8s.io/v1alpha1\nkind: ServiceExport\nmetadata: {name: %s}\n' "$SVC"
  } | k "$1" -n "$NS" apply -f - >/dev/null
}

# A headless StatefulSet of 2 in c2 (pods web-0, web-1 with hostnames), exported.
headless_workload() {
  k c2 -n "$NS" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  clusterIP: None
  selector: {app: web}
  ports: [{name: tcp, port: 8080}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web}
spec:
  serviceName: web
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: echo
        image: atoll.lab/echo:1
        command: ["socat", "TCP-LISTEN:8080,fork,reuseaddr", "SYSTEM:echo c2 \$HOSTNAME"]
        ports: [{name: tcp, containerPort: 8080}]
---
apiVersion: multicluster.x-k8s.io/v1alpha1
kind: ServiceExport
metadata: {name: web}
EOF
}
hostname_reaches_pod() { # pod
  local out; out=$(in_pod c1 client nc -w 2 "$1.c2.web.$NS.svc.clusterset.local" 8080 </dev/null 2>/dev/null)
  echo "  $1.c2.web.$NS.svc.clusterset.local:8080 -> ${out:-no answer}"
  [ "$out" = "c2 $1" ]
}

clusterset_ip() { k c1 -n "$NS" get serviceimport "$SVC" -o jsonpath='{.spec.ips[0]}' 2>/dev/null; }
pod_ready() { in_pod "$1" "$2" true 2>/dev/null; }

# CONNECTIONS connections to $1:$2 from c1's client; prints "<cluster> <count>" per answering cluster.
spread() { # address port
  in_pod c1 client sh -c "for i in \$(seq $CONNECTIONS); do nc -w 2 $1 $2 </dev/null; done" 2>/dev/null |
    awk '{print $1}' | sort | uniq -c | awk '{print $2, $1}'
}
count() { awk -v c="$1" '$1 == c {print $2}' <<<"$2"; }

answers_from_both() {
  local out; out=$(spread "$1" 80)
  echo "  $CONNECTIONS connections to $1:80: $(tr '\n' ' ' <<<"$out")"
  [ "$(count c2 "$out")" -gt 0 ] 2>/dev/null && [ "$(count c3 "$out")" -gt 0 ] 2>/dev/null &&
    [ $(( $(count c2 "$out") + $(count c3 "$out") )) -eq "$CONNECTIONS" ]
}
only_from() { # cluster address
  local out; out=$(spread "$2" 80)
  [ "$(count "$1" "$out")" = "$CONNECTIONS" ] || { echo "  still: $(tr '\n' ' ' <<<"$out")" >&2; return 1; }
  echo "  $CONNECTIONS connections to $2:80: $(tr '\n' ' ' <<<"$out")"
}

resolves_to_clusterset_ip() {
  local got; got=$(in_pod c1 client dig +short +search "$SVC.$NS.svc.clusterset.local" A 2>/dev/null)
  echo "  $SVC.$NS.svc.clusterset.local -> ${got:-nothing} (ClusterSetIP $1)"
  [ "$got" = "$1" ]
}
name_connects() {
  local out; out=$(in_pod c1 client nc -w 2 "$SVC.$NS.svc.clusterset.local" 80 </dev/null 2>/dev/null)
  echo "  connect by name: ${out:-no answer}"
  [[ $out == c2\ * || $out == c3\ * ]]
}

log "workloads: echo in c2 and c3, client in c1"
echo_workload c2
echo_workload c3
lab_client_pod c1 "$NS"
eventually 60 pod_ready c1 client || die "the client pod has no lab namespace"
eventually 60 test -n "$(clusterset_ip)" || die "no ServiceImport $NS/$SVC in c1"
ip=$(clusterset_ip)
check "ServiceImport in c1 has endpoints from c2 and c3 (100 connections answered by both)" \
  eventually "$PROPAGATION" answers_from_both "$ip"
check "the pod's resolver answers $SVC.$NS.svc.clusterset.local with the ClusterSetIP" \
  eventually "$PROPAGATION" resolves_to_clusterset_ip "$ip"
check "a connection by name reaches an exporting cluster" name_connects

headless_workload
check "headless: web-0.c2.web.$NS.svc.clusterset.local reaches pod web-0 of c2" \
  eventually 60 hostname_reaches_pod web-0
check "headless: web-1.c2.web.$NS.svc.clusterset.local reaches pod web-1 of c2" \
  eventually "$PROPAGATION" hostname_reaches_pod web-1

log "c2's agent stops for longer than the member grace: its endpoints are withdrawn"
"$HACK/lab.sh" agent stop c2 >/dev/null 2>&1
check "with c2's agent gone, every connection reaches c3" \
  eventually $((PROPAGATION + ${ATOLL_MEMBER_GRACE_SECONDS:-12} + 10)) only_from c3 "$ip"
"$HACK/lab.sh" agent start c2 >/dev/null 2>&1
check "c2's agent back: both clusters answer again" eventually "$PROPAGATION" answers_from_both "$ip"

log "c3 unexports"
k c3 -n "$NS" delete serviceexport "$SVC" >/dev/null
check "after c3's unexport, every connection reaches c2 (within ${PROPAGATION} s)" \
  eventually "$PROPAGATION" only_from c2 "$ip"

log "c3's echo pods go away: their network namespaces go with them"
# A pod's network namespace: the one containerd made for its sandbox (crictl inspectp), a file
# under the node's state directory.
pod_namespace_of() { # uid
  local id
  id=$("$NODE_BIN/crictl" --runtime-endpoint "unix://$LAB_DIR/nodes/c3/containerd.sock" pods -q --label "io.kubernetes.pod.uid=$1")
  "$NODE_BIN/crictl" --runtime-endpoint "unix://$LAB_DIR/nodes/c3/containerd.sock" inspectp "$id" |
    python3 -c 'import json,sys; print(next(n["path"] for n in json.load(sys.stdin)["info"]["runtimeSpec"]["linux"]["namespaces"] if n["type"] == "network"))'
}
namespace_gone() { [ ! -e "$1" ]; }
c3_namespaces=$(k c3 -n "$NS" get pods -l app=$SVC -o jsonpath='{range .items[*]}{.metadata.uid}{"\n"}{end}' |
  while read -r uid; do pod_namespace_of "$uid"; done)
gone() { local ns; [ -n "$c3_namespaces" ] || return 1; for ns in $c3_namespaces; do namespace_gone "$ns" || return 1; done; }
k c3 -n "$NS" delete deployment "$SVC" --wait=false >/dev/null
check "the $(wc -w <<<"$c3_namespaces") deleted pods of c3 lost their network namespaces" \
  eventually 60 gone

for c in c1 c2 c3; do k "$c" delete namespace "$NS" --wait=false >/dev/null 2>&1 || true; done

# shellcheck source=lab-locality.sh
. "$HACK/lab-locality.sh"
echo "lab traffic: $passed passed, $failed failed"
[ "$failed" = 0 ]
