# The data-plane lab's network, sourced by hack/lab-env.sh. Every namespace and
# link is created from inside a lab namespace (never in the host's) and every namespace is
# recorded in $NETNS_FILE with its inode (`<name> <inode>`, the lab's own namespace first): the
# only ones `hack/lab.sh down` deletes or kills processes in, and only while the name still
# stands for the namespace the lab created (same inode, never the host's own).
#
#   atoll-lab            control planes on 127.0.0.1 and on 10.255.0.254, the lab's address on
#                        bridge labbr0 joining the nodes
#   atoll-lab-cN         cluster cN's node: 10.255.0.N on the bridge, kubelet, containerd,
#                        kube-proxy (nftables), a route to every other cluster's pod range
#   <containerd state>/netns/cni-*   the pod namespaces containerd creates under the node's own
#                        state directory (hack/lab-node.sh; not in /run/netns), wired by the CNI
#                        bridge plugin to the node's cni0; checked like the rest (by path:
#                        `nsenter --net=<file>`), found anew at every check
#
# Routes are only the lab's own prefixes (10.255.0.0/24 nodes, 10.20N.0.0/24 pods, 10.0.0.0/8
# from a pod): no namespace of the lab has a default route, so a packet to anywhere else is
# refused by the kernel at once.
# shellcheck shell=bash
LAB_BRIDGE=labbr0

netns_exists() { [ -e "/run/netns/$1" ] && ip netns list | awk '{print $1}' | grep -qx "$1"; }
# The inode of a named network namespace (what tells two namespaces of one name apart), or of the
# namespace of a process (/proc/<pid>/ns/net).
netns_inode() { stat -L -c %i "/run/netns/$1" 2>/dev/null; }
host_netns_inodes() { stat -L -c %i /proc/1/ns/net /proc/$$/ns/net 2>/dev/null | sort -u; }
# The inode the lab recorded for namespace $1 (nothing if it did not record it).
netns_recorded() { [ -f "$NETNS_FILE" ] && awk -v n="$1" '$1 == n {print $2; exit}' "$NETNS_FILE"; }
# Whether namespace $1 is the one the lab created: recorded, same inode now, not the host's.
netns_ours() { # name
  local inode recorded
  inode=$(netns_inode "$1") && recorded=$(netns_recorded "$1") && [ -n "$inode" ] && [ "$inode" = "$recorded" ] &&
    ! host_netns_inodes | grep -qx "$inode"
}

# Creates namespace $1 and records it with its inode (a name already recorded is reused if it
# is still the namespace the lab created; any other namespace of that name is refused).
# The record is changed under a lock (teardown and a harness test may race a creation).
netns_create() { # name
  mkdir -p "$LAB_DIR"
  (
    flock 9
    if ! netns_exists "$1"; then
      ip netns add "$1"
      echo "$1 $(netns_inode "$1")" >>"$NETNS_FILE"
    fi
    netns_ours "$1" ||
      die "network namespace $1 exists but is not the one the lab created (not in $NETNS_FILE with inode $(netns_inode "$1"))"
  ) 9>>"$NETNS_FILE.lock"
  ip -n "$1" link set lo up
}

# Kills every process in namespace $1 and deletes it, only if it is the lab's (netns_ours); the
# record goes either way. Refuses, with a log line, to touch a namespace of that name that the
# lab did not create.
netns_delete() { # name
  (
    flock 9
    if netns_exists "$1"; then
      if netns_ours "$1"; then
        ip netns pids "$1" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
        ip netns del "$1"
      else
        log "network namespace $1 is not the one the lab created (inode $(netns_inode "$1"), recorded $(netns_recorded "$1" || true)): left alone"
      fi
    fi
    rm -rf "/etc/netns/$1"
    [ -f "$NETNS_FILE" ] && awk -v n="$1" '$1 != n' "$NETNS_FILE" >"$NETNS_FILE.tmp" && mv "$NETNS_FILE.tmp" "$NETNS_FILE"
  ) 9>>"$NETNS_FILE.lock"
}

# `ip` in a namespace given by name (ip -n) or, for containerd's pod namespaces, by path.
netns_ip() { # name-or-path ip-arguments...
  local ns=$1; shift
  case $ns in
    /*) nsenter --net="$ns" ip "$@" ;;
    *) ip -n "$ns" "$@" ;;
  esac
}

# The pod namespaces containerd made for the lab's nodes (paths).
real_node_pod_namespaces() {
  local f
  for f in "$LAB_DIR"/nodes/*/containerd/state/io.containerd.grpc.v1.cri/netns/*; do
    [ -e "$f" ] && echo "$f"
  done
  return 0
}

# Whether link $2 of node namespace $1 is the node's end of the veth of one of that node's pods:
# the pod namespace's eth0 names the node-side interface index as its peer (eth0@if<index>).
is_real_pod_veth() { # node-netns link
  local c index f
  c=${1#"$LAB_NETNS"-}
  index=$(ip -n "$1" -o link show "$2" | cut -d: -f1) || return 1
  for f in "$LAB_DIR/nodes/$c"/containerd/state/io.containerd.grpc.v1.cri/netns/*; do
    [ -e "$f" ] || continue
    nsenter --net="$f" ip -o link show eth0 2>/dev/null | grep -q "^[0-9]*: eth0@if$index:" && return 0
  done
  return 1
}

# Isolation of a namespace, decided without sending a packet, failing on any error of `ip`.
no_default_route() { # netns
  local v4 v6
  v4=$(netns_ip "$1" -4 route show default) && v6=$(netns_ip "$1" -6 route show default) ||
    { echo "  $1: ip route show failed" >&2; return 1; }
  [ -z "$v4$v6" ] || { echo "  $1: default route: $v4 $v6" >&2; return 1; }
}

# Only loopback, bridges and veths to namespaces the lab recorded: nothing that could carry a
# packet off the machine.
only_lab_links() { # netns
  local links line name kind details peer
  links=$(netns_ip "$1" -o link show) || { echo "  $1: ip link show failed" >&2; return 1; }
  while read -r line; do
    name=$(awk -F': ' '{print $2}' <<<"$line" | cut -d@ -f1)
    [ "$name" = lo ] && continue
    details=$(netns_ip "$1" -d link show "$name") || { echo "  $1: ip link show $name failed" >&2; return 1; }
    kind=$(awk '/^ +(veth|bridge|dummy)/ {print $1; exit}' <<<"$details")
    case $kind in
      veth)
        peer=$(sed -n 's/.*link-netns \([^ ]*\).*/\1/p' <<<"$details")
        [ -z "$peer" ] && is_real_pod_veth "$1" "$name" && continue
        [ -n "$peer" ] && [ -n "$(netns_recorded "$peer")" ] ||
          { echo "  $1: link $name leads to namespace '${peer:-the host}'" >&2; return 1; }
        ;;
      bridge | dummy) ;;
      *) echo "  $1: link $name is a ${kind:-physical or unknown} link" >&2; return 1 ;;
    esac
  done <<<"$links"
}

# The kernel has no route to outside addresses (TEST-NET-1, the IPv6 documentation prefix):
# `ip route get` asks the routing table and sends nothing. Only "Network is unreachable" passes;
# a route found, or any other error, fails.
no_route_out() { # netns
  local address out
  for address in 192.0.2.1 2001:db8::1; do
    if out=$(netns_ip "$1" route get "$address" 2>&1); then
      echo "  $1: a route to $address exists: $out" >&2; return 1
    fi
    grep -q "Network is unreachable" <<<"$out" || { echo "  $1: ip route get $address: $out" >&2; return 1; }
  done
}

# One namespace is isolated: the lab's, no default route, no link out, no route out.
netns_isolated() { # netns
  netns_ours "$1" || { echo "  $1: not a namespace the lab created" >&2; return 1; }
  no_default_route "$1" && only_lab_links "$1" && no_route_out "$1"
}

# The record is sound: it exists, the lab's own namespace is its first line, and every namespace
# in it exists and is still the one the lab created.
lab_record_sound() {
  local first ns
  [ -s "$NETNS_FILE" ] || { echo "  no record of the lab's namespaces ($NETNS_FILE missing or empty)" >&2; return 1; }
  read -r first _ <"$NETNS_FILE"
  [ "$first" = "$LAB_NETNS" ] || { echo "  $NETNS_FILE starts with '$first', not $LAB_NETNS" >&2; return 1; }
  while read -r ns _; do
    netns_ours "$ns" || { echo "  $ns (recorded) is gone or is not the namespace the lab created" >&2; return 1; }
  done <"$NETNS_FILE"
}

# The recorded namespaces, the lab's own first (callers check lab_record_sound first), then the
# pod namespaces of real nodes (by path).
lab_namespaces() { awk '{print $1}' "$NETNS_FILE"; real_node_pod_namespaces; }

# Runs a check on every recorded namespace; stops at the first that fails. A pod namespace
# containerd removed while the check ran (its pod deleted meanwhile) is gone, not failing: it
# is skipped, its messages dropped; any other failure is printed and fails.
every_namespace() { # check
  local ns out
  for ns in $(lab_namespaces); do
    out=$("$1" "$ns" 2>&1) && continue
    case $ns in /*) [ -e "$ns" ] || continue ;; esac
    echo "$out" >&2
    return 1
  done
}

node_netns() { echo "$LAB_NETNS-$1"; }     # cN -> atoll-lab-cN
node_ip() { echo "10.255.0.$(cluster_number "$1")"; }
LAB_ADDRESS=10.255.0.254
pod_cidr() { echo "10.$((200 + $(cluster_number "$1"))).0.0/24"; }
# The cluster DNS Service's ClusterIP (kube-system/kube-dns), as kubeadm picks it: the tenth
# address of the service range.
dns_service_ip() { echo "10.$((100 + $(cluster_number "$1"))).0.10"; }

lab_bridge_up() {
  ip -n "$LAB_NETNS" link show "$LAB_BRIDGE" >/dev/null 2>&1 || {
    ip -n "$LAB_NETNS" link add "$LAB_BRIDGE" type bridge
    ip -n "$LAB_NETNS" link set "$LAB_BRIDGE" up
  }
}

# With real nodes, the lab namespace itself is on the nodes' bridge at $LAB_ADDRESS: pods reach
# the apiservers there (the `kubernetes` Service's endpoint), the apiservers reach kubelets at
# the node addresses, and replies to pods go back through their node.
lab_address_up() {
  local n
  lab_bridge_up
  ip -n "$LAB_NETNS" addr replace "$LAB_ADDRESS/24" dev "$LAB_BRIDGE"
  for n in $(seq 1 "${ATOLL_CLUSTERS:-3}"); do
    ip -n "$LAB_NETNS" route replace "$(pod_cidr "c$n")" via "$(node_ip "c$n")" dev "$LAB_BRIDGE"
  done
}

# The node namespace of cluster $1 on the lab bridge, routing to the pod ranges of all $2...
node_net_up() { # cN all-clusters...
  local c=$1 ns n other; shift
  ns=$(node_netns "$c"); n=$(cluster_number "$c")
  lab_bridge_up
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
  netns_isolated "$ns" || die "node namespace $ns failed its isolation check: nothing starts in it"
}
