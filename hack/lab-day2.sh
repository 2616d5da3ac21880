#!/usr/bin/env bash
# Day-2 operations on the Helm-installed Atoll of the real-node lab (make lab-up, make
# lab-install): an exported service (echo, in c2 and c3, imported everywhere), then
#   1. `helm upgrade` of every cluster to a new image tag, one cluster after another, rolling
#      one pod at a time: no ServiceImport, derived Service or EndpointSlice in the service's
#      namespace may change (uid and resourceVersion compared before and after, in every
#      cluster), and connections from c1 keep being answered during the upgrade;
#   2. the leading agent Pod of c2 deleted: another replica takes the Lease (time measured),
#      and a change in c2 still reaches c1;
#   3. `helm uninstall` of c3: the pre-delete hook removes Atoll's block from CoreDNS's
#      Corefile, and the CRDs, the ServiceExport and the ServiceImport stay; then c3 is
#      installed again (helm install; its join Secret stayed).
# The new tag is the same archive imported under another name (what changes is what Helm and
# the kubelet see: a new pod template, pods replaced). Measurements go to target/lab/day2.json.
# Prints "lab day-2: N passed, N failed". Usage: hack/lab-day2.sh
set -euo pipefail
HACK=$(cd "$(dirname "$0")" && pwd)
. "$HACK/lab-env.sh"
. "$HACK/lab-workloads.sh"
SUITE="lab day-2"
NS=lab-day2
SVC=echo
VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$REPO_DIR/Cargo.toml" | head -1)
ARCHIVE=$REPO_DIR/target/image/atoll-$VERSION.oci.tar
NEW_TAG=$VERSION-day2
OUT=$REPO_DIR/target/lab/day2.json
passed=0 failed=0

[ -d "$LAB_DIR/nodes/c1" ] || die "no real nodes: make lab-up && make lab-install first"
"$HACK/lab.sh" check >/dev/null || die "the lab is not isolated: nothing runs"
k() { lab_kubectl "$@"; }
lab_helm() { local c=$1; shift; ip netns exec "$LAB_NETNS" helm --kubeconfig "$ATOLL_ENV_DIR/kubeconfig" --kube-context "kwok-$c" "$@"; }
eventually() { local deadline=$((SECONDS + $1)); shift; until "$@"; do [ $SECONDS -lt $deadline ] || return 1; sleep 0.5; done; }
now_ms() { date +%s%3N; }

# Every ServiceImport, Service and EndpointSlice of the namespace in every cluster, as
# "<cluster> <kind>/<name> <uid> <resourceVersion>".
snapshot() {
  local c
  for c in c1 c2 c3; do
    k "$c" -n "$NS" get serviceimports,services,endpointslices \
      -o jsonpath='{range .items[*]}{.kind}/{.metadata.name} {.metadata.uid} {.metadata.resourceVersion}{"\n"}{end}' |
      sed "s/^/$c /"
  done | sort
}

answers() { # -> "<cluster> <count>" of 20 connections from c1's client
  "$HACK/lab.sh" pod-exec c1 "$NS" client sh -c \
    "for i in \$(seq 20); do nc -w 2 $SVC.$NS.svc.clusterset.local 80 </dev/null; done" 2>/dev/null |
    awk '{print $1}' | sort | uniq -c | awk '{printf "%s %s ", $2, $1}'
}
both_answer() { local out; out=$(answers); [[ $out == *c2* && $out == *c3* ]]; }

log "workload: $SVC in c2 and c3, exported; client in c1"
for c in c2 c3; do
  lab_namespace "$c" "$NS"
  {
    echo_service_yaml "$SVC" 2 "$c \$HOSTNAME"
    printf -- '---\napiVersion: multicluster.x-k8s.io/v1alpha1\nkind: ServiceExport\nmetadata: {name: %s}\n' "$SVC"
  } | k "$c" -n "$NS" apply -f - >/dev/null
done
lab_client_pod c1 "$NS"
k c1 -n "$NS" wait --for condition=Ready pod/client --timeout 120s >/dev/null
eventually 60 both_answer || die "the service does not answer from both clusters before the upgrade"
sleep 5 # let every writer settle before the snapshot
before=$(snapshot)

log "1. helm upgrade to atoll:$NEW_TAG, one cluster after another"
for c in c1 c2 c3; do
  "$NODE_BIN/ctr" --address "$LAB_DIR/nodes/$c/containerd.sock" --namespace k8s.io images import \
    --index-name "docker.io/library/atoll:$NEW_TAG" "$ARCHIVE" >/dev/null 2>&1
done
# Connections from c1 all along: a refused or unanswered one is counted.
traffic_log=$(mktemp)
(
  while [ -e "$traffic_log" ]; do
    out=$("$HACK/lab.sh" pod-exec c1 "$NS" client nc -w 2 "$SVC.$NS.svc.clusterset.local" 80 </dev/null 2>/dev/null || true)
    echo "${out:-none $(date +%T.%3N)}" >>"$traffic_log"
    sleep 0.2
  done
) &
traffic=$!
upgrade_started=$SECONDS
for c in c1 c2 c3; do
  start=$(now_ms)
  lab_helm "$c" upgrade atoll "$REPO_DIR/charts/atoll" -n atoll-system --reuse-values \
    --set image.tag="$NEW_TAG" --wait --timeout 5m >/dev/null
  log "$c upgraded in $(( ($(now_ms) - start) / 1000 )) s"
done
upgrade_seconds=$((SECONDS - upgrade_started))
mv "$traffic_log" "$traffic_log.done"; wait "$traffic" 2>/dev/null || true
connections=$(wc -l <"$traffic_log.done"); unanswered=$(grep -vc '^c[23] ' "$traffic_log.done" || true)
grep -v '^c[23] ' "$traffic_log.done" | sed 's/^/  unanswered: /' || true
rm -f "$traffic_log.done"
new_images() { # the 4 agent and DNS pods of every cluster, and no other, on the new tag
  local c images
  for c in c1 c2 c3; do
    images=$(k "$c" -n atoll-system get pods -l 'app.kubernetes.io/component in (agent,dns)' \
      -o jsonpath='{range .items[*]}{.spec.containers[0].image}{"\n"}{end}')
    [ "$(grep -c ":$NEW_TAG$" <<<"$images")" -eq 4 ] && ! grep -qv ":$NEW_TAG$" <<<"$images" || return 1
  done
}
check "every agent and DNS pod runs atoll:$NEW_TAG after the upgrade ($upgrade_seconds s)" eventually 60 new_images
sleep 5
after=$(snapshot)
unchanged() {
  if [ "$before" = "$after" ]; then
    echo "  $(wc -l <<<"$before") objects, uid and resourceVersion unchanged"
  else
    diff <(echo "$before") <(echo "$after") | sed 's/^/  /' >&2; return 1
  fi
}
check "the upgrade changed no ServiceImport, derived Service or EndpointSlice in any cluster" unchanged
check "connections from c1 during the upgrade: $connections, unanswered: $unanswered" test "$unanswered" -eq 0

log "2. the leading agent Pod of c2 is deleted"
leader=$(k c2 -n atoll-system get lease atoll-agent -o jsonpath='{.spec.holderIdentity}')
start=$(now_ms)
k c2 -n atoll-system delete pod "$leader" --wait=false >/dev/null
new_leader() {
  local holder
  holder=$(k c2 -n atoll-system get lease atoll-agent -o jsonpath='{.spec.holderIdentity}')
  [ -n "$holder" ] && [ "$holder" != "$leader" ] && k c2 -n atoll-system get pod "$holder" >/dev/null 2>&1
}
eventually 60 new_leader || true
handover_ms=$(( $(now_ms) - start ))
holder=$(k c2 -n atoll-system get lease atoll-agent -o jsonpath='{.spec.holderIdentity}')
check "another replica of c2 leads after its leader Pod was deleted: $leader -> $holder in $handover_ms ms" new_leader
k c2 -n "$NS" scale deployment "$SVC" --replicas 3 >/dev/null
c2_endpoints() { [ "$(k c1 -n "$NS" get endpointslices -l multicluster.kubernetes.io/source-cluster=c2 -o jsonpath='{range .items[*].endpoints[*]}{.addresses[0]}{"\n"}{end}' | grep -c .)" = 3 ]; }
check "after the hand-over, c2 scaled to 3 pods: c1's slice from c2 has 3 endpoints" eventually 60 c2_endpoints

log "3. helm uninstall in c3"
lab_helm c3 uninstall atoll -n atoll-system --wait --timeout 5m >/dev/null
unwired() { ! k c3 -n kube-system get configmap coredns -o jsonpath='{.data.Corefile}' | grep -q 'BEGIN atoll'; }
check "the pre-delete hook removed Atoll's block from c3's Corefile" unwired
kept() {
  k c3 get crd serviceexports.multicluster.x-k8s.io serviceimports.multicluster.x-k8s.io >/dev/null &&
    k c3 -n "$NS" get serviceexport "$SVC" >/dev/null && k c3 -n "$NS" get serviceimport "$SVC" >/dev/null
}
check "the CRDs, c3's ServiceExport and its ServiceImport remain after the uninstall" kept
gone() { [ -z "$(k c3 -n atoll-system get deployments -o name 2>/dev/null)" ]; }
check "no Atoll Deployment remains in c3" gone
lab_helm c3 install atoll "$REPO_DIR/charts/atoll" -n atoll-system \
  --set mode=member --set image.tag="$VERSION" --set agent.heartbeatSeconds=2 \
  --set agent.memberGraceSeconds=12 --set dns.antiAffinity=preferred --set coredns.wire=true \
  --wait --timeout 5m >/dev/null
check "c3 installed again: both clusters answer c1's connections" eventually 120 both_answer

for c in c1 c2 c3; do k "$c" delete namespace "$NS" --wait=false >/dev/null 2>&1 || true; done
mkdir -p "$(dirname "$OUT")"
printf '{"upgrade_seconds": %s, "connections_during_upgrade": %s, "unanswered_during_upgrade": %s, "leader_handover_ms": %s}\n' \
  "$upgrade_seconds" "$connections" "$unanswered" "$handover_ms" >"$OUT"
echo "lab day-2: $passed passed, $failed failed (measurements in $OUT)"
[ "$failed" = 0 ]
