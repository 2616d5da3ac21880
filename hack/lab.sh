#!/usr/bin/env bash
# The data-plane lab: the local ClusterSet run inside network namespace `atoll-lab`
# (ATOLL_LAB_NETNS), which has no route out: no default route, no link to the host's namespace,
# only its own loopback, a bridge and veths to the namespaces the lab itself creates and records
# in $LAB_DIR/netns (nodes and pods, hack/lab-net.sh). Whatever runs there — control planes,
# agents, kube-proxy, DNS servers, pods — and whatever a test sends from there, even to a wrong
# address, cannot leave the machine.
#
#   hack/lab.sh up      create the namespace, check its isolation, start the ClusterSet inside
#                       it and each cluster's real node (kubelet, containerd, runc, CNI,
#                       kube-proxy; CoreDNS as a Deployment), check again (state in
#                       ~/.cache/atoll/lab/env); Atoll comes from `make lab-install` (Helm).
#                       LAB_KUBE_PROXY_MIN_SYNC=10ms (a duration) sets kube-proxy's nftables
#                       minSyncPeriod (default: kube-proxy's own, 1 s; 0s in a configuration
#                       file means that default too); run `up` again to change it on a running
#                       lab
#   hack/lab.sh check   the isolation checks alone (exit 1 if one fails)
#   hack/lab.sh down    stop what `up` started (by recorded pids) and delete the namespaces the
#                       lab recorded
#   hack/lab.sh netns   create the namespace only (what the isolation test checks)
#   hack/lab.sh exec CMD...  run CMD inside the lab with ATOLL_ENV_DIR pointing at its state
#   hack/lab.sh pod-exec cN NAMESPACE POD CMD...  run CMD in a pod's container (kubectl exec)
#   hack/lab.sh agent stop|start cN  scale cN's agent Deployment to 0, or back to 2
set -euo pipefail
. "$(dirname "$0")/lab-env.sh"
COREDNS_IMAGE=registry.k8s.io/coredns/coredns:$COREDNS_VERSION
# What hack/env-up.sh reads inside the lab: clusters for real nodes (kubelets register
# themselves, the apiserver reachable from pods at the lab's address on the nodes' bridge).
export ATOLL_LAB_NODES=real ATOLL_LAB_ADDRESS=$LAB_ADDRESS

in_lab() {
  netns_isolated "$LAB_NETNS" || die "the lab namespace $LAB_NETNS failed its isolation check: nothing runs in it"
  ip netns exec "$LAB_NETNS" env ATOLL_ENV_DIR="$ATOLL_ENV_DIR" "$@"
}

create() { netns_create "$LAB_NETNS"; log "network namespace $LAB_NETNS ready"; }


# Loopback carries traffic: a connect to a closed port there is refused (the kernel answered
# with a reset over lo), not unreachable. (127.0.0.1 inside the lab's own namespace.)
loopback_works() {
  local out
  out=$(ip netns exec "$LAB_NETNS" timeout 3 bash -c 'exec 3<>/dev/tcp/127.0.0.1/1' 2>&1) && return 1
  grep -q "Connection refused" <<<"$out" || { echo "  connect to 127.0.0.1:1: ${out:-timed out}" >&2; return 1; }
}

# Every check stops at the first failure (nothing after a failed check runs), and fails closed:
# a missing or empty record, a record that does not start with the lab's own namespace, a
# recorded namespace that is gone or is not the one the lab created, or any error of `ip`.
check_isolation() {
  local namespaces ns SUITE="lab isolation"
  summary() { echo "lab isolation: $passed passed, $failed failed"; [ "$failed" = 0 ]; }
  step() { check "$@"; [ "$failed" = 0 ]; }
  step "the record $NETNS_FILE lists $LAB_NETNS first, and every namespace in it is the one the lab created" \
    lab_record_sound || { summary; return 1; }
  namespaces=$(lab_namespaces | wc -l)
  step "no default route (IPv4, IPv6) in any of the lab's $namespaces namespaces" \
    every_namespace no_default_route || { summary; return 1; }
  step "only loopback, bridges and links between lab namespaces in all $namespaces" \
    every_namespace only_lab_links || { summary; return 1; }
  step "no route to 192.0.2.1 or [2001:db8::1] from any of the $namespaces (ip route get: nothing is sent)" \
    every_namespace no_route_out || { summary; return 1; }
  step "loopback inside the lab carries traffic (127.0.0.1:1 refused)" loopback_works || { summary; return 1; }
  summary
}

# Waits until http://127.0.0.1:<port><path> inside namespace <netns> answers 200.
wait_http_in() { # name netns port path [seconds]
  local deadline=$((SECONDS + ${5:-60}))
  while [ $SECONDS -lt $deadline ]; do
    proc_running "$1" || { tail -20 "$PROCS_DIR/$1.log" >&2; die "$1 exited"; }
    ip netns exec "$2" timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$3 && printf 'GET $4 HTTP/1.0\r\n\r\n' >&3 && head -1 <&3" 2>/dev/null \
      | grep -q " 200" && return 0
    sleep 0.3
  done
  tail -20 "$PROCS_DIR/$1.log" >&2
  die "$1 did not answer $4 on 127.0.0.1:$3 in $2 within ${5:-60} s"
}

write_if_changed() { # file < content; true when the file changed
  local tmp; tmp=$(mktemp)
  cat >"$tmp"
  if cmp -s "$tmp" "$1"; then rm -f "$tmp"; return 1; fi
  mv "$tmp" "$1"
}

# Cluster cN's node, in its node namespace: kubelet, containerd and CNI (hack/lab-node.sh),
# kube-proxy (nftables), and the cluster DNS (CoreDNS as a Deployment).
node_up() { # cN all-clusters...
  local c=$1 ns server port
  ns=$(node_netns "$c")
  node_net_up "$@"
  # The apiserver listens on the lab's loopback; on the node's own loopback, socat takes each
  # connection into the lab namespace with `ip netns exec`, so kubeconfigs work unchanged.
  server=$(kubectl --kubeconfig "$ATOLL_ENV_DIR/kubeconfig" config view -o jsonpath="{.clusters[?(@.name==\"kwok-$c\")].cluster.server}")
  port=${server##*:}
  printf '#!/bin/sh\nexec ip netns exec %s socat STDIO TCP:127.0.0.1:%s\n' "$LAB_NETNS" "$port" >"$ATOLL_ENV_DIR/apiserver-link-$c.sh"
  chmod +x "$ATOLL_ENV_DIR/apiserver-link-$c.sh"
  proc_start "apiserver-link-$c" ip netns exec "$ns" socat "TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr,fork" "EXEC:$ATOLL_ENV_DIR/apiserver-link-$c.sh"
  kubectl --kubeconfig "$ATOLL_ENV_DIR/kubeconfig" config view --raw --minify --flatten --context "kwok-$c" >"$ATOLL_ENV_DIR/node-$c.kubeconfig"

  "$HACK_DIR/lab-node.sh" up "$c"
  # Written only when it changes: kube-proxy exits when its configuration file does (stopped
  # here, so that the one started below reads the new file).
  write_if_changed "$ATOLL_ENV_DIR/kube-proxy-$c.yaml" <<EOF && proc_stop "kube-proxy-$c"
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
hostnameOverride: $c-node-0
clientConnection:
  kubeconfig: $ATOLL_ENV_DIR/node-$c.kubeconfig
bindAddress: $(node_ip "$c")
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: ["$(node_ip "$c")/32"]
# The conntrack table size and timeouts are the host kernel's: left as they are.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
  udpTimeout: 0s
  udpStreamTimeout: 0s
${LAB_KUBE_PROXY_MIN_SYNC:+nftables: {minSyncPeriod: $LAB_KUBE_PROXY_MIN_SYNC\}}
EOF
  proc_start "kube-proxy-$c" ip netns exec "$ns" kube-proxy --config "$ATOLL_ENV_DIR/kube-proxy-$c.yaml"

  cluster_dns_pods "$c"
  wait_http_in "kube-proxy-$c" "$ns" 10256 /healthz
}

# The cluster DNS on a real node, as clusters run it: CoreDNS as a Deployment behind the kube-dns
# Service, its Corefile in the ConfigMap kube-system/coredns, which it reloads when it changes;
# clusterset.local is not in it until Atoll's chart wires it (coredns.wire, `make lab-install`).
cluster_dns_pods() { # cN
  local c=$1
  # The Corefile only when there is none: `up` run again (to change kube-proxy's settings)
  # leaves Atoll's wiring in place.
  lab_kubectl "$c" -n kube-system get configmap coredns >/dev/null 2>&1 ||
    lab_kubectl "$c" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: ConfigMap
metadata: {name: coredns, namespace: kube-system}
data:
  Corefile: |
    .:53 {
        errors
        health {
            lameduck 2s
        }
        ready
        kubernetes cluster.local in-addr.arpa ip6.arpa {
            pods insecure
            fallthrough in-addr.arpa ip6.arpa
        }
        cache 30
        reload 2s
    }
EOF
  lab_kubectl "$c" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: ServiceAccount
metadata: {name: coredns, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:coredns"}
rules:
- {apiGroups: [""], resources: [endpoints, services, pods, namespaces], verbs: [list, watch]}
- {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns"}
subjects: [{kind: ServiceAccount, name: coredns, namespace: kube-system}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: coredns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  replicas: 1
  selector: {matchLabels: {k8s-app: kube-dns}}
  template:
    metadata: {labels: {k8s-app: kube-dns}}
    spec:
      serviceAccountName: coredns
      dnsPolicy: Default
      containers:
      - name: coredns
        image: $COREDNS_IMAGE
        imagePullPolicy: IfNotPresent
        args: ["-conf", "/etc/coredns/Corefile"]
        env: [{name: GOMAXPROCS, value: "1"}]
        ports:
        - {name: dns, containerPort: 53, protocol: UDP}
        - {name: dns-tcp, containerPort: 53, protocol: TCP}
        livenessProbe: {httpGet: {path: /health, port: 8080}, periodSeconds: 10}
        readinessProbe: {httpGet: {path: /ready, port: 8181}, periodSeconds: 2}
        volumeMounts: [{name: config, mountPath: /etc/coredns, readOnly: true}]
      volumes: [{name: config, configMap: {name: coredns}}]
---
apiVersion: v1
kind: Service
metadata: {name: kube-dns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  clusterIP: $(dns_service_ip "$c")
  selector: {k8s-app: kube-dns}
  ports:
  - {name: dns, port: 53, protocol: UDP}
  - {name: dns-tcp, port: 53, protocol: TCP}
EOF
  lab_kubectl "$c" -n kube-system rollout status deployment/coredns --timeout 120s >/dev/null ||
    die "CoreDNS of $c did not become ready"
}

up() {
  create
  # Isolation first: nothing starts in a namespace that could reach out.
  check_isolation
  local started=$SECONDS c clusters
  "$HACK_DIR/build-tools.sh" k8s kube-proxy etcd kwok coredns helm >/dev/null
  "$HACK_DIR/build-tools.sh" node >/dev/null
  "$HACK_DIR/lab-images.sh" build
  # kube-proxy's nft, the apiserver links' socat, dig for the DNS checks from the nodes.
  require nsenter openssl nft socat dig ip python3 kubectl kube-proxy etcd kwokctl coredns helm
  lab_address_up
  in_lab "$HACK_DIR/env-up.sh"
  clusters=$(clusters_or)
  # shellcheck disable=SC2086 # cluster names are single words
  for c in $clusters; do node_up "$c" $clusters; done
  # And again, now that every namespace and link of the lab exists.
  passed=0 failed=0
  check_isolation
  log "lab up in $((SECONDS - started)) s; kubeconfig $ATOLL_ENV_DIR/kubeconfig (hack/lab.sh exec kubectl ...; hack/lab.sh pod-exec cN NAMESPACE POD CMD...)"
}

down() {
  local node
  # Real nodes first: their pods go through CRI (CNI releases them), then kubelet, containerd,
  # shims, mounts and cgroups.
  for node in "$LAB_DIR"/nodes/*/; do
    [ -d "$node" ] && "$HACK_DIR/lab-node.sh" down "$(basename "$node")"
  done
  if netns_ours "$LAB_NETNS"; then
    # kube-proxies and the apiserver links by pid, then the control planes
    # (stopping sends nothing: no isolation check stands in the way of teardown).
    ip netns exec "$LAB_NETNS" env ATOLL_ENV_DIR="$ATOLL_ENV_DIR" "$HACK_DIR/env-down.sh" || true
  fi
  if [ -f "$NETNS_FILE" ]; then
    # Last created first: pod and node namespaces before the lab's own. Only namespaces that
    # are still the ones the lab created lose their processes (netns_delete).
    tac "$NETNS_FILE" | while read -r ns _; do
      [ -n "$ns" ] || continue
      netns_ours "$ns" && log "network namespace $ns deleted"
      netns_delete "$ns"
    done
    rm -f "$NETNS_FILE" "$NETNS_FILE.lock"
  fi
}

# Runs a command inside pod NAMESPACE/POD of cluster cN, in its container (kubectl exec, through
# the apiserver and the kubelet).
pod_exec() { # cN namespace pod command...
  lab_kubectl "$1" exec -n "$2" "$3" -- "${@:4}"
}

# Stops or starts cN's agent: its Deployment atoll-agent scaled to 0, then back to the chart's
# 2 replicas.
agent() { # stop|start cN
  case $1 in
    stop) lab_kubectl "$2" -n atoll-system scale deployment/atoll-agent --replicas 0 >/dev/null
      lab_kubectl "$2" -n atoll-system wait --for delete pod -l app.kubernetes.io/component=agent --timeout 60s >/dev/null ;;
    start) lab_kubectl "$2" -n atoll-system scale deployment/atoll-agent --replicas 2 >/dev/null
      lab_kubectl "$2" -n atoll-system rollout status deployment/atoll-agent --timeout 120s >/dev/null ;;
    *) die "usage: hack/lab.sh agent stop|start cN" ;;
  esac
}

case ${1:-} in
  up) up ;;
  agent) shift; agent "$@" ;;
  down) down ;;
  check) check_isolation ;;
  netns) create ;;
  exec) shift; in_lab "$@" ;;
  pod-exec) shift; pod_exec "$@" ;;
  *) die "usage: hack/lab.sh up|down|check|netns|exec CMD...|pod-exec cN NAMESPACE POD CMD...|agent stop|start cN" ;;
esac
