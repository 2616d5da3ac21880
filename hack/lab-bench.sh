#!/usr/bin/env bash
# Data-plane propagation in the running lab (make lab-up && make lab-install first): for LAB_BENCH_SERVICES services
# (default 20) served by an echo pod in c2, the time from `kubectl create serviceexport` in c2 to
# the first successful connection from a pod in c1, (a) to the ClusterSetIP (as soon as the
# ServiceImport names it) and (b) by name through the pod's resolver (c1's CoreDNS, whose Atoll
# block caches answers, also NXDOMAIN, for up to 5 s). Each attempt is a TCP connect with a 1 s
# timeout, retried every 0.1 s. Prints p50/p99 of both and the lab's RSS.
set -euo pipefail
HACK=$(cd "$(dirname "$0")" && pwd)
. "$HACK/lab-env.sh"
. "$HACK/lab-workloads.sh"
NS=lab-bench
N=${LAB_BENCH_SERVICES:-20}

"$HACK/lab.sh" check >/dev/null || die "the lab is not isolated: no benchmark runs"
k() { lab_kubectl "$@"; }
in_client() { "$HACK/lab.sh" pod-exec c1 "$NS" client "$@"; }
now_ms() { date +%s%3N; }

lab_namespace c2 "$NS"
for i in $(seq "$N"); do echo_service_yaml "svc-$i" 1 "c2 svc-$i"; done | k c2 -n "$NS" apply -f - >/dev/null
lab_client_pod c1 "$NS"
log "waiting for $N echo pods in c2 and the client in c1"
k c2 -n "$NS" wait --for=condition=Available --timeout=120s deployment --all >/dev/null
for _ in $(seq 240); do in_client true 2>/dev/null && break; sleep 0.5; done
# socat binds its port just after its container starts (the echo pods have no readiness probe).
sleep 2

by_ip=() by_name=()
for i in $(seq "$N"); do
  start=$(now_ms)
  k c2 -n "$NS" apply -f - >/dev/null <<EOF
apiVersion: multicluster.x-k8s.io/v1alpha1
kind: ServiceExport
metadata: {name: svc-$i}
EOF
  ip=""
  while [ -z "$ip" ]; do
    ip=$(k c1 -n "$NS" get serviceimport "svc-$i" -o jsonpath='{.spec.ips[0]}' 2>/dev/null || true)
    [ -n "$ip" ] || sleep 0.1
    [ $(( $(now_ms) - start )) -lt 60000 ] || die "svc-$i: no ServiceImport in c1 after 60 s"
  done
  in_client sh -c "until nc -w 1 $ip 80 </dev/null 2>/dev/null | grep -q svc-$i; do sleep 0.1; done"
  by_ip+=($(( $(now_ms) - start )))
  in_client sh -c "until nc -w 1 svc-$i.$NS.svc.clusterset.local 80 </dev/null 2>/dev/null | grep -q svc-$i; do sleep 0.1; done"
  by_name+=($(( $(now_ms) - start )))
  echo "svc-$i: ClusterSetIP $ip connects after ${by_ip[-1]} ms, by name after ${by_name[-1]} ms"
done

percentiles() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {i50=int((NR+1)/2); i99=int(NR*0.99+0.999); if (i99>NR) i99=NR; printf "p50 %d ms, p99 %d ms (n=%d)", v[i50], v[i99], NR}'; }
echo "export -> first connection to the ClusterSetIP from c1: $(percentiles "${by_ip[@]}")"
echo "export -> first connection by name (clusterset.local) from c1: $(percentiles "${by_name[@]}")"

# Every process of the lab: control planes (kwokctl's pids), ours (kube-proxies, apiserver links,
# kubelets, containerd), the containers (the nodes' cgroups: Atoll's agents and DNS servers,
# CoreDNS, the workloads) and containerd's shims.
lab_pids() {
  local f
  env_pids
  for f in "$PROCS_DIR"/*.pid; do proc_running "$(basename "$f" .pid)" && proc_pid "$(basename "$f" .pid)"; done
  find /sys/fs/cgroup/memory/ -maxdepth 1 -name "$LAB_NETNS-*" -exec find {} -name cgroup.procs \; 2>/dev/null | xargs -r cat
  pgrep -f "containerd-shim-runc-v2 .*-address $LAB_DIR/nodes/" || true
}
rss=0 processes=0
for pid in $(lab_pids | sort -un); do
  r=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
  rss=$((rss + ${r:-0})) processes=$((processes + 1))
done
echo "lab RSS ($processes processes: control planes, kube-proxies, kubelets, containerd, shims, containers): $((rss / 1024)) MiB"
for c in c1 c2; do k "$c" delete namespace "$NS" --wait=false >/dev/null 2>&1 || true; done
