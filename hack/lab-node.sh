#!/usr/bin/env bash
# A real node for lab cluster cN: containerd (runc, the CNI bridge and
# host-local IPAM) and the kubelet, run in the node's network namespace atoll-lab-cN (as
# kube-proxy, CoreDNS and `atoll dns` are), registering node cN-node-0. Pods get their network
# from CNI, in namespaces containerd creates under the node's state directory; images come from
# archives imported into the node's containerd (hack/lab-images.sh), nothing is pulled.
#
# Everything is the lab's own: state under $LAB_DIR/nodes/cN (containerd root and state, the
# kubelet's root directory, CNI configuration and IPAM), cgroups under /<lab-netns>-cN in every
# cgroup v1 hierarchy, processes recorded by pid (kubelet, containerd) and, for containerd's
# shims, found by the node's containerd socket in their arguments. Both run in the host's mount
# namespace (`nsenter --net`, not `ip netns exec`, which would give them a private /sys without
# the cgroup mounts, and volumes the kubelet mounts that containerd would not see).
#
# This machine has cgroup v1 and no CAP_SYS_RESOURCE: the kubelet runs with failCgroupV1: false,
# containerd with restrict_oom_score_adj (a container's oom_score_adj is never set below the
# node's own), runc with seccomp (containerd gives every sandbox the runtime/default profile).
#
#   hack/lab-node.sh up cN       start (or keep) cN's node, import the images, wait for Ready
#   hack/lab-node.sh images cN   import the images again (after `make image`)
#   hack/lab-node.sh down cN     remove its pods (CNI releases their namespaces), stop it,
#                                unmount what it mounted, remove its cgroups and state
set -euo pipefail
. "$(dirname "$0")/lab-env.sh"

CGROUP_HIERARCHIES="cpu cpuacct cpuset memory devices freezer blkio pids systemd"

node_dir() { echo "$LAB_DIR/nodes/$1"; }
node_name() { echo "$1-node-0"; }
cgroup_root() { echo "$LAB_NETNS-$1"; }
socket() { echo "$(node_dir "$1")/containerd.sock"; }
crictl_node() { local c=$1; shift; "$NODE_BIN/crictl" --runtime-endpoint "unix://$(socket "$c")" --timeout 20s "$@"; }
ctr_node() { local c=$1; shift; "$NODE_BIN/ctr" --address "$(socket "$c")" --namespace k8s.io "$@"; }

# The kubelet's credentials: a client certificate for system:node:cN-node-0 (group
# system:nodes) from the cluster's CA, so the Node authorizer and NodeRestriction apply to it.
kubelet_kubeconfig() { # cN
  local c=$1 dir pki server
  dir=$(node_dir "$c"); pki=$ATOLL_ENV_DIR/kwok/clusters/$c/pki
  [ -s "$dir/kubelet-client.crt" ] || {
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
      -keyout "$dir/kubelet-client.key" -subj "/O=system:nodes/CN=system:node:$(node_name "$c")" 2>/dev/null |
      openssl x509 -req -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial -days 30 \
        -out "$dir/kubelet-client.crt" 2>/dev/null
  }
  server=$(kubectl --kubeconfig "$ATOLL_ENV_DIR/kubeconfig" config view -o jsonpath="{.clusters[?(@.name==\"kwok-$c\")].cluster.server}")
  cat >"$dir/kubelet.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: $c
  cluster: {server: "$server", certificate-authority: "$pki/ca.crt"}
users:
- name: kubelet
  user: {client-certificate: "$dir/kubelet-client.crt", client-key: "$dir/kubelet-client.key"}
contexts:
- name: kubelet
  context: {cluster: $c, user: kubelet}
current-context: kubelet
EOF
}

write_configs() { # cN
  local c=$1 dir
  dir=$(node_dir "$c")
  mkdir -p "$dir/cni-conf" "$dir/kubelet"
  cat >"$dir/containerd.toml" <<EOF
version = 3
root = "$dir/containerd/root"
state = "$dir/containerd/state"
[grpc]
  address = "$(socket "$c")"
[ttrpc]
  address = "$(socket "$c").ttrpc"
[plugins."io.containerd.cri.v1.runtime"]
  # Pod namespaces under the node's state, not in the host's /run/netns.
  netns_mounts_under_state_dir = true
  # No CAP_SYS_RESOURCE here: a sandbox's oom_score_adj may not go below containerd's.
  restrict_oom_score_adj = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = "$NODE_BIN/runc"
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["$NODE_BIN/cni"]
    conf_dir = "$dir/cni-conf"
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".registry]
    # Every registry is 127.0.0.1:1: an image the node lacks fails at once, with no name
    # looked up and no packet sent anywhere.
    config_path = "$dir/registries"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "$PAUSE_IMAGE"
EOF
  mkdir -p "$dir/registries/_default"
  cat >"$dir/registries/_default/hosts.toml" <<EOF
server = "http://127.0.0.1:1"
[host."http://127.0.0.1:1"]
  capabilities = ["pull", "resolve"]
EOF
  # The cluster's pod range on the node's bridge; pods route only 10.0.0.0/8 (services, other
  # clusters' pods, the lab's addresses) through it: no default route, as everywhere in the lab.
  cat >"$dir/cni-conf/10-atoll-lab.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "atoll-lab", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$dir/cni-ipam",
            "ranges": [[{"subnet": "$(pod_cidr "$c")"}]], "routes": [{"dst": "10.0.0.0/8"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
EOF
  # The resolver the kubelet hands pods with dnsPolicy Default: nothing outside the lab.
  printf 'nameserver %s\n' "$(node_ip "$c")" >"$dir/resolv.conf"
  cat >"$dir/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /$(cgroup_root "$c")
failSwapOn: false
containerRuntimeEndpoint: unix://$(socket "$c")
address: $(node_ip "$c")
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$ATOLL_ENV_DIR/kwok/clusters/$c/pki/ca.crt"}
authorization: {mode: Webhook}
clusterDNS: ["$(dns_service_ip "$c")"]
clusterDomain: cluster.local
resolvConf: $dir/resolv.conf
protectKernelDefaults: false
makeIPTablesUtilChains: false
# The host's disk is shared with everything else: no evictions, no image garbage collection.
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
localStorageCapacityIsolation: false
serializeImagePulls: false
# A ConfigMap volume is refreshed when the kubelet syncs the pod, every syncFrequency (default
# 1 min): CoreDNS sees the chart's wiring of its Corefile within seconds instead.
syncFrequency: 5s
EOF
}

cgroups_create() { # cN
  local root h
  root=$(cgroup_root "$1")
  for h in $CGROUP_HIERARCHIES; do
    [ -d "/sys/fs/cgroup/$h" ] || continue
    mkdir -p "/sys/fs/cgroup/$h/$root"
  done
  # A new cpuset starts empty: give it the parent's CPUs and memory nodes.
  cat /sys/fs/cgroup/cpuset/cpuset.cpus >"/sys/fs/cgroup/cpuset/$root/cpuset.cpus"
  cat /sys/fs/cgroup/cpuset/cpuset.mems >"/sys/fs/cgroup/cpuset/$root/cpuset.mems"
}

cgroups_remove() { # cN
  local root h dir pid
  root=$(cgroup_root "$1")
  for h in $CGROUP_HIERARCHIES; do
    dir=/sys/fs/cgroup/$h/$root
    [ -d "$dir" ] || continue
    # Whatever still runs in the node's cgroups is the node's: its containers.
    find "$dir" -name cgroup.procs -exec cat {} + 2>/dev/null | while read -r pid; do kill -9 "$pid" 2>/dev/null || true; done
    find "$dir" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    [ ! -d "$dir" ] || log "cgroup $dir could not be removed"
  done
}

wait_node_ready() { # cN seconds
  local deadline=$((SECONDS + $2))
  while [ $SECONDS -lt $deadline ]; do
    [ "$(lab_kubectl "$1" get node "$(node_name "$1")" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ] && return 0
    proc_running "kubelet-$1" || { tail -20 "$PROCS_DIR/kubelet-$1.log" >&2; die "the kubelet of $1 exited"; }
    sleep 0.5
  done
  tail -20 "$PROCS_DIR/kubelet-$1.log" >&2
  die "node $(node_name "$1") did not become Ready within $2 s"
}

# Every image of hack/lab-images.sh into the node's containerd (an import of an image it has
# changes nothing; a rebuilt archive replaces the name's target).
import_images() { # cN
  local c=$1 name archive
  while read -r name archive; do
    ctr_node "$c" images import --index-name "$name" "$archive" >/dev/null 2>&1 ||
      die "importing $archive as $name into the containerd of $c failed"
  done < <("$HACK_DIR/lab-images.sh" archives)
}

up() { # cN
  local c=$1 ns dir name archive
  ns=$(node_netns "$c"); dir=$(node_dir "$c")
  netns_isolated "$ns" || die "node namespace $ns failed its isolation check: no node starts in it"
  mkdir -p "$dir"
  write_configs "$c"
  kubelet_kubeconfig "$c"
  cgroups_create "$c"
  proc_start "containerd-$c" nsenter --net="/run/netns/$ns" env PATH="$NODE_BIN:$PATH" \
    "$NODE_BIN/containerd" --config "$dir/containerd.toml"
  for _ in $(seq 100); do ctr_node "$c" version >/dev/null 2>&1 && break; sleep 0.1; done
  ctr_node "$c" version >/dev/null 2>&1 || { tail -20 "$PROCS_DIR/containerd-$c.log" >&2; die "containerd of $c did not start"; }
  import_images "$c"
  proc_start "kubelet-$c" nsenter --net="/run/netns/$ns" "$K8S_BIN/kubelet" \
    --config "$dir/kubelet.yaml" --kubeconfig "$dir/kubelet.kubeconfig" \
    --root-dir "$dir/kubelet" --cert-dir "$dir/kubelet/pki" \
    --hostname-override "$(node_name "$c")" --node-ip "$(node_ip "$c")" \
    --node-labels "topology.kubernetes.io/zone=$c-zone-a"
  wait_node_ready "$c" 90
  log "node $(node_name "$c") of $c Ready (kubelet $K8S_VERSION, containerd $CONTAINERD_VERSION, runc $RUNC_VERSION)"
}

# The node's shims: containerd-shim-runc-v2 processes started with this node's socket.
shim_pids() { # cN
  local sock pid
  sock=$(socket "$1")
  for pid in $(pgrep -f containerd-shim-runc-v2 || true); do
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "-address $sock " && echo "$pid"
  done
  return 0
}

down() { # cN
  local c=$1 dir mount
  dir=$(node_dir "$c")
  [ -d "$dir" ] || return 0
  # The kubelet first (it would restart what is removed), then every pod through CRI, so that
  # CNI releases its address and containerd deletes its namespace.
  proc_stop "kubelet-$c"
  if proc_running "containerd-$c"; then
    crictl_node "$c" rmp --force --all >/dev/null 2>&1 || log "crictl rmp of $c failed: cleaning up by hand"
  fi
  proc_stop "containerd-$c"
  shim_pids "$c" | xargs -r kill -9 2>/dev/null || true
  cgroups_remove "$c"
  # Mounts under the node's directory (container root filesystems, volumes, namespaces), the
  # deepest first.
  awk -v d="$dir/" 'index($2, d) == 1 {print $2}' /proc/self/mounts | sort -r | while read -r mount; do
    umount -l "$mount" 2>/dev/null || log "could not unmount $mount"
  done
  rm -rf "$dir"
  log "node $(node_name "$c") of $c removed"
}

PAUSE_IMAGE=$("$HACK_DIR/lab-images.sh" pause-name)
case ${1:-} in
  up) up "${2:?usage: $0 up cN}" ;;
  images) import_images "${2:?usage: $0 images cN}" ;;
  down) down "${2:?usage: $0 down cN}" ;;
  *) die "usage: $0 up|images|down cN" ;;
esac
