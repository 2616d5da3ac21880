# The data-plane lab's network, sourced by hack/lab-env.sh. Every namespace and
# link is created from inside a lab namespace (never in the host's) and every namespace is
# recorded in $NETNS_FILE, the only ones `hack/lab.sh down` deletes.
#
#   atoll-lab            control planes, agents on 127.0.0.1; bridge labbr0 joining the nodes
#   atoll-lab-cN         cluster cN's node: 10.255.0.N on the bridge, kube-proxy (nftables),
#                        `atoll dns` and CoreDNS, a route to every other cluster's pod range
#   lab-<uid>            one per Running pod: its pod IP on eth0, a veth to its cluster's node
#
# Routes are only the lab's own prefixes (10.255.0.0/24 nodes, 10.20N.0.0/24 pods, 10.0.0.0/8
# from a pod): no namespace of the lab has a default route, so a packet to anywhere else is
# refused by the kernel at once.
# shellcheck shell=bash
LAB_BRIDGE=labbr0
# The address every pod's default-less route points at: each pod veth's node side holds it.
POD_GATEWAY=169.254.1.1

netns_exists() { ip netns list | awk '{print $1}' | grep -qx "$1"; }

# Creates namespace $1 and records it (a name already recorded is reused; one that exists
# without being recorded is not ours and is refused).
# The pod runners of several clusters create and delete namespaces at once: the record is
# changed under a lock.
netns_create() { # name
  mkdir -p "$LAB_DIR"
  (
    flock 9
    if ! netns_exists "$1"; then
      ip netns add "$1"
      echo "$1" >>"$NETNS_FILE"
    fi
    grep -qx "$1" "$NETNS_FILE" 2>/dev/null ||
      die "network namespace $1 exists but the lab did not create it (not in $NETNS_FILE)"
  ) 9>>"$NETNS_FILE.lock"
  ip -n "$1" link set lo up
}

netns_delete() { # name
  (
    flock 9
    if netns_exists "$1"; then ip netns del "$1"; fi
    rm -rf "/etc/netns/$1"
    [ -f "$NETNS_FILE" ] && sed -i "\\|^$1\$|d" "$NETNS_FILE"
  ) 9>>"$NETNS_FILE.lock"
}

node_netns() { echo "$LAB_NETNS-$1"; }     # cN -> atoll-lab-cN
node_ip() { echo "10.255.0.$(cluster_number "$1")"; }
pod_cidr() { echo "10.$((200 + $(cluster_number "$1"))).0.0/24"; }
# The cluster DNS Service's ClusterIP (kube-system/kube-dns), as kubeadm picks it: the tenth
# address of the service range.
dns_service_ip() { echo "10.$((100 + $(cluster_number "$1"))).0.10"; }

# The node namespace of cluster $1 on the lab bridge, routing to the pod ranges of all $2...
node_net_up() { # cN all-clusters...
  local c=$1 ns n other; shift
  ns=$(node_netns "$c"); n=$(cluster_number "$c")
  ip -n "$LAB_NETNS" link show "$LAB_BRIDGE" >/dev/null 2>&1 || {
    ip -n "$LAB_NETNS" link add "$LAB_BRIDGE" type bridge
    ip -n "$LAB_NETNS" link set "$LAB_BRIDGE" up
  }
  netns_create "$ns"
  if ! ip -n "$ns" link show eth0 >/dev/null 2>&1; then
    ip -n "$LAB_NETNS" link add "node$n" type veth peer name eth0 netns "$ns"
    ip -n "$LAB_NETNS" link set "node$n" master "$LAB_BRIDGE" up
    ip -n "$ns" addr add "$(node_ip "$c")/24" dev eth0
    ip -n "$ns" link set eth0 up
  fi
  ip netns exec "$ns" sysctl -qw net.ipv4.ip_forward=1
  # Replies from another cluster's pod come back over the bridge, not the way they left.
  ip netns exec "$ns" sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.eth0.rp_filter=0
  for other in "$@"; do
    [ "$other" = "$c" ] && continue
    ip -n "$ns" route replace "$(pod_cidr "$other")" via "$(node_ip "$other")" dev eth0
  done
}

# A name for a pod's namespace and its node-side veth (at most 15 characters), from its uid.
# The namespace name is the uid's first 12 hex digits: the conformance suite's exec
# (hack/go/conformance-lab) finds a pod's namespace from its uid alone, whatever its cluster.
pod_netns() { local hex=${1//-/}; echo "lab-${hex:0:12}"; }   # uid
pod_veth() { echo "p${1:0:8}${1:9:4}"; }     # uid

pod_net_up() { # cN uid pod-ip namespace
  local c=$1 uid=$2 ip=$3 kns=$4 ns node veth
  ns=$(pod_netns "$uid"); node=$(node_netns "$c"); veth=$(pod_veth "$uid")
  netns_create "$ns"
  if ! ip -n "$ns" link show eth0 >/dev/null 2>&1; then
    ip -n "$node" link add "$veth" type veth peer name eth0 netns "$ns"
    ip -n "$node" addr add "$POD_GATEWAY/32" dev "$veth"
    ip -n "$node" link set "$veth" up
    ip -n "$node" route replace "$ip/32" dev "$veth"
    ip -n "$ns" addr add "$ip/32" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" route add "$POD_GATEWAY" dev eth0 scope link
    ip -n "$ns" route add 10.0.0.0/8 via "$POD_GATEWAY" dev eth0
  fi
  # `ip netns exec` binds /etc/netns/<ns>/resolv.conf over /etc/resolv.conf: the pod's resolver
  # as the kubelet writes it (ClusterFirst).
  mkdir -p "/etc/netns/$ns"
  cat >"/etc/netns/$ns/resolv.conf" <<EOF
search $kns.svc.cluster.local svc.cluster.local cluster.local
nameserver $(dns_service_ip "$c")
options ndots:5
EOF
}
