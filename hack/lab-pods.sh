#!/usr/bin/env bash
# The lab's pod runner for cluster cN (test harness, not the product): every pod kwok marks
# Running on cN's node gets a network namespace with its pod IP and a veth to the node
# (hack/lab-net.sh), the resolver a kubelet would give it, and, for the images whose programs
# the host has (alpine/socat, atoll.lab/*), its containers' commands with their environment
# (hack/lab_pods.py). Clients (netshoot) get no process: commands run inside their namespace
# (hack/lab.sh pod-exec, the conformance suite's exec). A pod that stops running or goes away
# loses its processes and its namespace. State: $LAB_DIR/pods/cN/<uid>/ (pod, pids, scripts).
# Usage: hack/lab-pods.sh cN
set -euo pipefail
. "$(dirname "$0")/lab-env.sh"
c=${1:?usage: hack/lab-pods.sh cN}
cluster_number "$c" >/dev/null
STATE=$LAB_DIR/pods/$c
mkdir -p "$STATE"

start_pod() { # uid ip namespace name
  local uid=$1 ip=$2 kns=$3 name=$4 ns dir script
  ns=$(pod_netns "$uid")
  dir=$STATE/$uid
  pod_net_up "$c" "$uid" "$ip" "$kns"
  mv "$dir.new" "$dir"
  echo "$ns $kns/$name $ip" >"$dir/pod"
  : >"$dir/pids"
  for script in "$dir"/*.sh; do
    [ -f "$script" ] || continue
    # The script on stdin: the pod's unprivileged user cannot read the lab's state directory.
    pod_run "$ns" sh -s <"$script" >>"$dir/$(basename "$script" .sh).log" 2>&1 &
    echo "$! $(proc_start_time $!)" >>"$dir/pids"
  done
  log "$c: pod $kns/$name running in $ns ($ip)"
}

stop_pod() { # uid
  local dir=$STATE/$1 ns pod pid start
  read -r ns pod _ <"$dir/pod"
  while read -r pid start; do
    if pid_is "$pid" "$start"; then kill "$pid" 2>/dev/null || true; fi
  done <"$dir/pids"
  # What else runs inside (children, a test's command) goes with the namespace, or it would
  # linger (netns_delete kills them, if the namespace is still the lab's).
  netns_delete "$ns"
  rm -rf "$dir"
  log "$c: pod $pod stopped, $ns deleted"
}

stop_all() {
  local dir
  for dir in "$STATE"/*/; do [ -f "$dir/pod" ] && stop_pod "$(basename "$dir")"; done
  return 0
}
trap stop_all EXIT
trap 'exit 0' TERM INT
while true; do
  if listing=$(lab_kubectl "$c" get pods -A --field-selector "spec.nodeName=$c-node-0" -o json 2>/dev/null |
    python3 "$HACK_DIR/lab_pods.py" "$STATE"); then
    declare -A running=()
    while read -r uid ip kns name; do
      [ -n "$uid" ] || continue
      running[$uid]=1
      [ -f "$STATE/$uid/pod" ] || start_pod "$uid" "$ip" "$kns" "$name"
    done <<<"$listing"
    for dir in "$STATE"/*/; do
      uid=$(basename "$dir")
      [[ $uid == *.new ]] && { [ -n "${running[${uid%.new}]:-}" ] || rm -rf "$dir"; continue; }
      [ -f "$dir/pod" ] || continue
      [ -n "${running[$uid]:-}" ] || stop_pod "$uid"
    done
    unset running
  fi
  sleep 0.5
done
