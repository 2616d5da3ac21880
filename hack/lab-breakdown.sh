#!/usr/bin/env bash
# Export -> traffic in the running lab (make lab-up && make lab-install first), split into its
# parts with a timestamp from each (hack/lab_breakdown.py says which): c2's agent publishing to
# the hub, c1's agent writing the derived Service, MCS slice and ServiceImport, c1's kube-proxy
# programming the rules, atoll dns and CoreDNS answering, and the first connection from a pod in
# c1; then, for comparison, the same for a plain Service created in c1. LAB_BENCH_SERVICES
# services (default 20), one at a time. Writes target/lab/breakdown.json.
set -euo pipefail
HACK=$(cd "$(dirname "$0")" && pwd)
. "$HACK/lab-env.sh"
. "$HACK/lab-workloads.sh"
NS=lab-breakdown
N=${LAB_BENCH_SERVICES:-20}

"$HACK/lab.sh" check >/dev/null || die "the lab is not isolated: no benchmark runs"
k() { lab_kubectl "$@"; }
cleanup() { for c in c1 c2; do k "$c" delete namespace "$NS" --wait=false >/dev/null 2>&1 || true; done; }
trap cleanup EXIT

# A previous run's namespaces go first (deleting them takes a while; nothing can be created
# in a namespace being deleted).
for c in c1 c2; do
  for _ in $(seq 240); do k "$c" get namespace "$NS" >/dev/null 2>&1 || break; sleep 0.5; done
done
lab_namespace c2 "$NS"
for i in $(seq "$N"); do echo_service_yaml "svc-$i" 1 "c2 svc-$i"; done | k c2 -n "$NS" apply -f - >/dev/null
lab_client_pod c1 "$NS"
# c1's own echo pod, behind the plain Services the comparison creates one at a time.
k c1 -n "$NS" create deployment local --image=atoll.lab/echo:1 --port=8080 \
  -- socat TCP-LISTEN:8080,fork,reuseaddr "SYSTEM:echo c1 local" >/dev/null
log "waiting for $N echo pods in c2 and the client in c1"
k c2 -n "$NS" wait --for=condition=Available --timeout=120s deployment --all >/dev/null
k c1 -n "$NS" wait --for=condition=Available --timeout=120s deployment/local >/dev/null
for _ in $(seq 240); do "$HACK/lab.sh" pod-exec c1 "$NS" client true 2>/dev/null && break; sleep 0.5; done
# socat binds its port just after its container starts (the echo pods have no readiness probe).
sleep 2
mkdir -p "$REPO_DIR/target/lab"
LAB_NETNS=$LAB_NETNS ATOLL_ENV_DIR=$ATOLL_ENV_DIR LAB_BENCH_SERVICES=$N \
  python3 "$HACK/lab_breakdown.py" "$REPO_DIR/target/lab/breakdown.json"
