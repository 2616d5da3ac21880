#!/usr/bin/env bash
# Tests of the harness's own safety rules, each by breaking the rule on purpose (no control
# plane needed; run by make test). Prints `harness safety: N passed, N failed`.
#
# - The isolation check decides reachability without sending anything and stops at the first
#   failure: a lab namespace given a default route through a bridge without ports fails the check while
#   the link's transmit counter stays at 0 (before the fix, the check's connect probe sent a SYN
#   there).
# - It fails closed: no record, an empty record, a record not starting with the lab's namespace,
#   a recorded namespace replaced by another of the same name, and an `ip` that errors.
# - Teardown signals nothing it did not start: a pid file pointing at a live unrelated process
#   (as after a reboot) leaves that process alone, in hack/lib.sh's proc_stop and before kwokctl
#   reads its pid files; a namespace recorded by name whose inode differs keeps its processes.
# - Go never falls back to a module's origin (GOPROXY without `direct`).
set -euo pipefail
export ATOLL_LAB_NETNS=atoll-safety-test
SAFETY_DIR=$(mktemp -d /tmp/atoll-safety.XXXXXX)
export ATOLL_LAB_DIR=$SAFETY_DIR/lab
. "$(dirname "$0")/lab-env.sh"
SUITE="harness safety"
LAB=("$HACK_DIR/lab.sh")
sleepers=()
cleanup() {
  local pid
  for pid in "${sleepers[@]}"; do kill "$pid" 2>/dev/null || true; done
  "${LAB[@]}" down >/dev/null 2>&1 || true
  ip netns del atoll-safety-foreign 2>/dev/null || true
  ip netns del atoll-safety-cni 2>/dev/null || true
  umount "$LAB_DIR/nodes/c1/containerd/state/io.containerd.grpc.v1.cri/netns/cni-safety" 2>/dev/null || true
  rm -rf "$SAFETY_DIR"
}
trap cleanup EXIT

# The checks broken on purpose here must not count as lab isolation failures in make test's
# totals: nested runs record nothing.
lab_check() { env -u ATOLL_RESULTS "${LAB[@]}" check >"$SAFETY_DIR/check.out" 2>&1; }
fails() { ! "$@"; }
# A fresh lab namespace with one node namespace, as lab.sh up makes them.
fresh_lab() {
  "${LAB[@]}" down >/dev/null 2>&1 || true
  "${LAB[@]}" netns >/dev/null 2>&1
  node_net_up c1 c1 >/dev/null
}

fresh_lab
check "a fresh lab (its namespace, a node) passes the isolation check" lab_check

# A real node's pod namespace as containerd makes it: a file under the node's state directory
# (not in /run/netns), its eth0 a veth from the node's cni0 side. Made here with ip and a bind
# mount; the check must walk it by path.
cni_ns=$LAB_DIR/nodes/c1/containerd/state/io.containerd.grpc.v1.cri/netns/cni-safety
mkdir -p "$(dirname "$cni_ns")"; touch "$cni_ns"
ip netns add atoll-safety-cni
mount --bind /run/netns/atoll-safety-cni "$cni_ns"
ip -n "$(node_netns c1)" link add vcnisafety type veth peer name eth0 netns atoll-safety-cni
ip netns del atoll-safety-cni
nsenter --net="$cni_ns" ip link set lo up
nsenter --net="$cni_ns" ip link set eth0 up
nsenter --net="$cni_ns" ip addr add 10.201.0.77/24 dev eth0
nsenter --net="$cni_ns" ip route add 10.0.0.0/8 via 10.201.0.1 dev eth0
check "a real node's pod namespace (containerd's, by path) passes the isolation check" lab_check
check "... and was checked (the count includes it)" grep -q 'in all 3$' "$SAFETY_DIR/check.out"
nsenter --net="$cni_ns" ip route add default via 10.201.0.1 dev eth0
check "a default route in that pod namespace fails the check" fails lab_check
check "... naming the namespace's file" grep -q "$cni_ns: default route" "$SAFETY_DIR/check.out"
nsenter --net="$cni_ns" ip route del default
# A node veth whose peer is no pod of the node (the pod's file gone, the namespace kept alive by
# a process in it).
nsenter --net="$cni_ns" sleep 300 &
sleepers+=($!)
sleep 0.2
umount "$cni_ns"; rm -f "$cni_ns"
check "a node veth into a namespace that is no pod of the node fails the check" fails lab_check
check "... at the link check" grep -q '^FAIL only loopback, bridges and links' "$SAFETY_DIR/check.out"
ip -n "$(node_netns c1)" link del vcnisafety
rm -rf "$LAB_DIR/nodes"
check "with the namespace gone, the lab passes again" lab_check

# A default route out of the lab: the check must fail and nothing may be sent on that route.
# A bridge without ports: whatever is sent on it is counted and goes nowhere.
# No IPv6, no multicast, no ARP on it: the kernel sends nothing of its own there, so the counter
# moves only if a probe sends (without ARP, the first packet to the gateway goes out at once).
ip -n "$LAB_NETNS" link add leak0 type bridge
ip netns exec "$LAB_NETNS" sysctl -qw net.ipv6.conf.leak0.disable_ipv6=1
ip -n "$LAB_NETNS" link set leak0 multicast off arp off
ip -n "$LAB_NETNS" addr add 10.99.0.1/24 dev leak0
ip -n "$LAB_NETNS" link set leak0 up
ip -n "$LAB_NETNS" route add default via 10.99.0.2 dev leak0
tx() { ip netns exec "$LAB_NETNS" cat /sys/class/net/leak0/statistics/tx_packets; }
# The link's own start-up packets first (the kernel sends one or two as it comes up).
tx_before=$(tx); sleep 1
while [ "$(tx)" != "$tx_before" ]; do tx_before=$(tx); sleep 1; done
check "a default route in the lab namespace fails the check" fails lab_check
check "... which stopped at that first failure (no later check ran)" \
  bash -c "grep -q '^FAIL no default route' '$SAFETY_DIR/check.out' && ! grep -q 'no route to 192.0.2.1' '$SAFETY_DIR/check.out'"
tx_after=$(tx)
check "... and sent nothing on it (leak0 transmitted $((tx_after - tx_before)) packets)" test "$tx_after" = "$tx_before"
# The route lookup itself: with the default route gone but a route to the outside address,
# `ip route get` finds it and the check fails, again without sending.
ip -n "$LAB_NETNS" route del default
ip -n "$LAB_NETNS" route add 192.0.2.0/24 via 10.99.0.2 dev leak0
check "a route to an outside address fails the check (found by ip route get)" fails lab_check
check "... at the route check" grep -q '^FAIL no route to 192.0.2.1' "$SAFETY_DIR/check.out"
tx_after=$(tx)
check "... without sending (leak0 transmitted $((tx_after - tx_before)) packets)" test "$tx_after" = "$tx_before"
ip -n "$LAB_NETNS" link del leak0

# Failing closed.
cp "$NETNS_FILE" "$SAFETY_DIR/netns.saved"
rm -f "$NETNS_FILE"
check "no namespace record: the check fails" fails lab_check
: >"$NETNS_FILE"
check "an empty namespace record: the check fails" fails lab_check
grep -v "^$LAB_NETNS " "$SAFETY_DIR/netns.saved" >"$NETNS_FILE"
check "a record that does not list the lab's namespace first: the check fails" fails lab_check
cp "$SAFETY_DIR/netns.saved" "$NETNS_FILE"
mkdir -p "$SAFETY_DIR/bin"
printf '#!/bin/sh\ncase " $* " in *" route "*) echo "ip: simulated failure" >&2; exit 2 ;; esac\nexec /usr/sbin/ip "$@"\n' >"$SAFETY_DIR/bin/ip"
chmod +x "$SAFETY_DIR/bin/ip"
check "an ip command that errors: the check fails" fails env -u ATOLL_RESULTS PATH="$SAFETY_DIR/bin:$PATH" "${LAB[@]}" check
check "the record restored, the check passes again" lab_check

# A namespace of a recorded name that is not the one the lab created.
node_ns=$(node_netns c1)
sed -i "s/^$node_ns [0-9]*$/$node_ns 1/" "$NETNS_FILE"
check "a recorded namespace whose inode differs fails the check" fails lab_check
cp "$SAFETY_DIR/netns.saved" "$NETNS_FILE"
ip netns add atoll-safety-foreign
ip netns exec atoll-safety-foreign sleep 300 &
sleepers+=($!)
foreign_sleeper=$!
echo "atoll-safety-foreign 1" >>"$NETNS_FILE"
"${LAB[@]}" down >/dev/null 2>&1 || true
check "teardown leaves a namespace it did not create (same name, other inode) and its processes alone" \
  bash -c "ip netns list | grep -q '^atoll-safety-foreign' && kill -0 $foreign_sleeper"
ip netns del atoll-safety-foreign

# Stale pid files: a live process that is not the one started.
sleep 300 &
sleepers+=($!)
unrelated=$!
mkdir -p "$PROCS_DIR"
echo "$unrelated" >"$PROCS_DIR/stale.pid"
echo 1 >"$PROCS_DIR/stale.start"
proc_stop stale 2>/dev/null
check "proc_stop leaves a live process alone when its start time differs from the record" kill -0 "$unrelated"
echo "$unrelated" >"$PROCS_DIR/stale.pid"
rm -f "$PROCS_DIR/stale.start"
proc_stop stale 2>/dev/null
check "... and when no start time was recorded (an old pid file)" kill -0 "$unrelated"
mkdir -p "$ATOLL_ENV_DIR/kwok/clusters/c9/pids"
echo "$unrelated" >"$ATOLL_ENV_DIR/kwok/clusters/c9/pids/kube-apiserver.pid"
echo 1 >"$ATOLL_ENV_DIR/kwok/clusters/c9/pids/kube-apiserver.pid.start"
drop_stale_env_pids c9 2>/dev/null
check "a stale kwokctl pid file is removed before kwokctl could signal it, the process left alone" \
  bash -c "[ ! -e '$ATOLL_ENV_DIR/kwok/clusters/c9/pids/kube-apiserver.pid' ] && kill -0 $unrelated"
check "env_pids never lists a stale pid" bash -c "! grep -qx $unrelated <<<\"\$(ATOLL_ENV_DIR='$ATOLL_ENV_DIR' bash -c '. $HACK_DIR/lib.sh; env_pids')\""
proc_start own sleep 300
own=$(proc_pid own)
proc_stop own 2>/dev/null
check "proc_stop still stops the process it started" fails kill -0 "$own"

# The Go toolchain's module fetches.
check "Go reaches modules through the proxy only (GOPROXY has no direct: $GOPROXY)" \
  bash -c "[[ ',$GOPROXY,' != *,direct,* && -n '$GOPROXY' ]] && [ \"\$(go env GOPROXY)\" = '$GOPROXY' ]"

echo "harness safety: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
