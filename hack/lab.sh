#!/usr/bin/env bash
# The data-plane lab: the local ClusterSet run inside network namespace `atoll-lab`
# (ATOLL_LAB_NETNS), which has no route out: no default route, no link to the host's namespace,
# only its own loopback (and, later, veths to namespaces the lab itself creates and records in
# $LAB_DIR/netns). Whatever runs there — control planes, agents, DNS servers — and whatever a
# test sends from there, even to a wrong address, cannot leave the machine.
#
#   hack/lab.sh up      create the namespace, check its isolation, start the ClusterSet, agents
#                       and DNS servers inside it (state in ~/.cache/atoll/lab/env)
#   hack/lab.sh check   the isolation checks alone (exit 1 if one fails)
#   hack/lab.sh down    stop what `up` started (by recorded pids) and delete the namespaces the
#                       lab recorded
#   hack/lab.sh netns   create the namespace only (what the isolation test checks)
#   hack/lab.sh exec CMD...  run CMD inside the lab with ATOLL_ENV_DIR pointing at its state
set -euo pipefail
. "$(dirname "$0")/lib.sh"
LAB_NETNS=${ATOLL_LAB_NETNS:-atoll-lab}
LAB_DIR=${ATOLL_LAB_DIR:-$ATOLL_CACHE/lab}
LAB_ENV_DIR=$LAB_DIR/env
# Every namespace the lab created, one per line: the only ones `down` deletes, and the only
# ones a lab veth may lead to.
NETNS_FILE=$LAB_DIR/netns

netns_exists() { ip netns list | awk '{print $1}' | grep -qx "$1"; }

in_lab() { ip netns exec "$LAB_NETNS" env ATOLL_ENV_DIR="$LAB_ENV_DIR" "$@"; }

create() {
  mkdir -p "$LAB_DIR"
  if ! netns_exists "$LAB_NETNS"; then
    ip netns add "$LAB_NETNS"
    echo "$LAB_NETNS" >>"$NETNS_FILE"
    log "network namespace $LAB_NETNS created"
  fi
  grep -qx "$LAB_NETNS" "$NETNS_FILE" 2>/dev/null ||
    die "network namespace $LAB_NETNS exists but the lab did not create it (not in $NETNS_FILE); remove it or set ATOLL_LAB_NETNS"
  ip -n "$LAB_NETNS" link set lo up
}

passed=0 failed=0
expect() { # description command...
  local what=$1; shift
  if "$@"; then
    passed=$((passed + 1)); echo "ok   $what"
  else
    failed=$((failed + 1)); echo "FAIL $what"
  fi
}

no_default_route() {
  [ -z "$(ip -n "$LAB_NETNS" -4 route show default)" ] && [ -z "$(ip -n "$LAB_NETNS" -6 route show default)" ]
}

# Only routes over loopback or lab veths: nothing that could carry a packet off the machine.
only_lab_links() {
  local line name kind peer
  while read -r line; do
    name=$(awk -F': ' '{print $2}' <<<"$line" | cut -d@ -f1)
    [ "$name" = lo ] && continue
    kind=$(ip -n "$LAB_NETNS" -d link show "$name" | awk '/^ +(veth|bridge|dummy)/ {print $1; exit}')
    case $kind in
      veth)
        peer=$(ip -n "$LAB_NETNS" -d link show "$name" | sed -n 's/.*link-netns \([^ ]*\).*/\1/p')
        [ -n "$peer" ] && grep -qx "$peer" "$NETNS_FILE" || { echo "  link $name leads to namespace '${peer:-the host}'" >&2; return 1; }
        ;;
      bridge | dummy) ;;
      *) echo "  link $name is a ${kind:-physical or unknown} link" >&2; return 1 ;;
    esac
  done < <(ip -n "$LAB_NETNS" -o link show)
}

# A connect to an outside address (TEST-NET-1 and the IPv6 documentation prefix, never routed
# anywhere) must fail at once with "Network is unreachable": the kernel finds no route, so no
# packet is ever sent.
unreachable() { # address
  local out start=$SECONDS
  out=$(ip netns exec "$LAB_NETNS" timeout 3 bash -c "exec 3<>/dev/tcp/$1/80" 2>&1) && return 1
  grep -q "Network is unreachable" <<<"$out" && [ $((SECONDS - start)) -le 1 ] ||
    { echo "  connect to $1: ${out:-timed out}" >&2; return 1; }
}

# Loopback carries traffic: a connect to a closed port there is refused (the kernel answered
# with a reset over lo), not unreachable.
loopback_works() {
  local out
  out=$(ip netns exec "$LAB_NETNS" timeout 3 bash -c 'exec 3<>/dev/tcp/127.0.0.1/1' 2>&1) && return 1
  grep -q "Connection refused" <<<"$out" || { echo "  connect to 127.0.0.1:1: ${out:-timed out}" >&2; return 1; }
}

check() {
  netns_exists "$LAB_NETNS" || die "no network namespace $LAB_NETNS (run hack/lab.sh up)"
  expect "lab namespace $LAB_NETNS has no default route (IPv4, IPv6)" no_default_route
  expect "lab namespace has only loopback and links to lab namespaces" only_lab_links
  expect "connect to 192.0.2.1 fails at once: Network is unreachable" unreachable 192.0.2.1
  expect "connect to [2001:db8::1] fails at once: Network is unreachable" unreachable 2001:db8::1
  expect "loopback inside the lab carries traffic (127.0.0.1:1 refused)" loopback_works
  echo "lab isolation: $passed passed, $failed failed"
  [ "$failed" = 0 ]
}

up() {
  create
  # Isolation first: nothing starts in a namespace that could reach out.
  check
  local started=$SECONDS
  in_lab "$HACK_DIR/env-up.sh"
  in_lab "$HACK_DIR/agents.sh" start
  in_lab "$HACK_DIR/dns.sh" start
  log "lab up in $((SECONDS - started)) s; kubeconfig $LAB_ENV_DIR/kubeconfig (use: hack/lab.sh exec kubectl ...)"
}

down() {
  if netns_exists "$LAB_NETNS"; then
    in_lab "$HACK_DIR/env-down.sh" || true
  fi
  if [ -f "$NETNS_FILE" ]; then
    # Last created first: pod and node namespaces before the lab's own.
    tac "$NETNS_FILE" | while read -r ns; do
      [ -n "$ns" ] && netns_exists "$ns" && ip netns del "$ns" && log "network namespace $ns deleted"
    done
    rm -f "$NETNS_FILE"
  fi
}

case ${1:-} in
  up) up ;;
  down) down ;;
  check) check ;;
  netns) create ;;
  exec) shift; in_lab "$@" ;;
  *) die "usage: hack/lab.sh up|down|check|netns|exec CMD..." ;;
esac
