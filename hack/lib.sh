# Shared settings for hack/ scripts. Source it; it defines no side effects beyond variables.
# shellcheck shell=bash
HACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$HACK_DIR/.." && pwd)
# shellcheck source=versions.env
. "$HACK_DIR/versions.env"
ATOLL_CACHE=${ATOLL_CACHE:-$HOME/.cache/atoll}
K8S_BIN=$ATOLL_CACHE/k8s-$K8S_VERSION/bin
ETCD_BIN=$ATOLL_CACHE/etcd-$ETCD_VERSION/bin
KWOK_BIN=$ATOLL_CACHE/kwok-$KWOK_VERSION/bin
COREDNS_BIN=$ATOLL_CACHE/coredns-$COREDNS_VERSION/bin
CRANE_BIN=$ATOLL_CACHE/crane-$CRANE_VERSION/bin
HELM_BIN=$ATOLL_CACHE/helm-$HELM_VERSION/bin
PROMETHEUS_BIN=$ATOLL_CACHE/prometheus-$PROMETHEUS_VERSION/bin
# kubelet goes to $K8S_BIN with the rest of Kubernetes; the node runtime here.
NODE_BIN=$ATOLL_CACHE/node-containerd-$CONTAINERD_VERSION-runc-$RUNC_VERSION-cni-$CNI_PLUGINS_VERSION/bin
# Where a running local ClusterSet keeps its state (kwok workdir, kubeconfig, pids, logs).
ATOLL_ENV_DIR=${ATOLL_ENV_DIR:-$ATOLL_CACHE/env}
export PATH="$K8S_BIN:$ETCD_BIN:$KWOK_BIN:$COREDNS_BIN:$CRANE_BIN:$HELM_BIN:$PROMETHEUS_BIN:$PATH"

# Go reaches modules only through the configured module proxy, never a module's origin: the
# `direct` (and `off`) entries of GOPROXY are dropped for every Go call of every script (and of
# the scripts they run), no module is private (private modules bypass the proxy), and the
# toolchain is the installed one (no toolchain download). With no proxy left, Go is offline.
go_proxy_only() { # GOPROXY value -> the same list without direct/off ("off" if nothing is left)
  local entry out=()
  for entry in $(tr ',|' '  ' <<<"$1"); do
    case $entry in direct | off | "") ;; *) out+=("$entry") ;; esac
  done
  if [ ${#out[@]} -eq 0 ]; then echo off; else (IFS=,; echo "${out[*]}"); fi
}
if [ -z "${ATOLL_GO_PINNED:-}" ] && command -v go >/dev/null 2>&1; then
  GOPROXY=$(go_proxy_only "$(go env GOPROXY)")
  export GOPROXY GOPRIVATE= GONOPROXY= GOTOOLCHAIN=local ATOLL_GO_PINNED=1
fi

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# Where each program a script may need comes from: the make target that provides it (and the
# package or tool name behind it). `require` checks a script's programs up front and names it.
declare -A PROVIDER=(
  [kube-apiserver]="make tools (hack/build-tools.sh k8s)" [kubectl]="make tools (hack/build-tools.sh k8s)"
  [kube-controller-manager]="make tools (hack/build-tools.sh k8s)" [kube-scheduler]="make tools (hack/build-tools.sh k8s)"
  [kube-proxy]="make lab-up (hack/build-tools.sh kube-proxy)" [etcd]="make tools (hack/build-tools.sh etcd)"
  [kwokctl]="make tools (hack/build-tools.sh kwok)" [kwok]="make tools (hack/build-tools.sh kwok)"
  [coredns]="make tools (hack/build-tools.sh coredns)" [helm]="make tools (hack/build-tools.sh helm)"
  [crane]="make image (hack/build-tools.sh crane)"
  [promtool]="make alerts-test (hack/build-tools.sh prometheus)" [prometheus]="make alerts-test (hack/build-tools.sh prometheus)"
  [dig]="make setup (Debian bind9-dnsutils)" [openssl]="make setup (Debian openssl)"
  [musl-gcc]="make setup (Debian musl-tools)" [nft]="make setup (Debian nftables)"
  [socat]="make setup (Debian socat)" [nc]="make setup (Debian netcat-openbsd)"
  [ip]="make setup (Debian iproute2)" [dnsperf]="make setup (Debian dnsperf)"
  [unshare]="make setup (Debian util-linux)" [python3]="make setup (Debian python3)"
  [go]="the machine's Go toolchain (preinstalled)" [cargo]="the machine's Rust toolchain (preinstalled)"
)
require() { # program...
  local p missing=()
  for p in "$@"; do command -v "$p" >/dev/null 2>&1 || missing+=("$p: run ${PROVIDER[$p]:-make setup}")
  done
  [ ${#missing[@]} -eq 0 ] || die "$(basename "$0"): missing programs: $(printf '%s; ' "${missing[@]}")"
}

# The checks of our own suites (image, chart, lab): each prints `ok   <what>` or `FAIL <what>`
# and counts into passed/failed. With ATOLL_RESULTS set (hack/test.sh), each also appends the
# record libtest's --logfile writes, `ok|failed <suite>: <what>`, to $ATOLL_RESULTS/<suite>.log:
# hack/test_totals.py totals those records, never the human output. SUITE names the suite.
passed=0 failed=0
check() { # description command...
  local what=$1 verdict; shift
  if "$@"; then passed=$((passed + 1)); verdict=ok; echo "ok   $what"
  else failed=$((failed + 1)); verdict=failed; echo "FAIL $what"; fi
  record_result "$verdict" "$what"
}
record_result() { # ok|failed description
  [ -n "${ATOLL_RESULTS:-}" ] || return 0
  mkdir -p "$ATOLL_RESULTS"
  printf '%s %s: %s\n' "$1" "${SUITE:?set SUITE before using check}" "${2//$'\n'/ }" >>"$ATOLL_RESULTS/${SUITE// /-}.log"
}

# Atoll's version for conformance reports: the crate version plus the git revision (and -dirty
# when the work tree has uncommitted changes).
atoll_version() {
  local version rev
  version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$REPO_DIR/Cargo.toml" | head -1)
  rev=$(git -C "$REPO_DIR" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
  git -C "$REPO_DIR" diff --quiet HEAD 2>/dev/null || rev+=-dirty
  echo "$version+$rev"
}

# A process is identified by its pid *and* its start time (field 22 of /proc/<pid>/stat, in clock
# ticks since boot): a pid recorded before a reboot, or of a process that exited, may now name
# someone else's process, whose start time differs. Nothing is signalled without both matching.
proc_start_time() { # pid -> start time, or nothing when no such process
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  # The command name (field 2) may hold spaces and parentheses: count fields after its last ')'.
  awk '{print $20}' <<<"${stat##*) }"
}
# Whether <pid> is alive and started at <start time>.
pid_is() { [ -n "$1" ] && [ -n "$2" ] && [ "$(proc_start_time "$1")" = "$2" ]; }

# Pids of the running local ClusterSet's processes (kwokctl's pid files), one per line: only
# those whose start time env-up or cluster.sh recorded beside the pid file (<file>.start).
env_pids() {
  local f pid
  for f in "$ATOLL_ENV_DIR"/kwok/clusters/*/pids/*.pid; do
    [ -f "$f" ] || continue
    pid=$(tr -dc 0-9 <"$f")
    pid_is "$pid" "$(cat "$f.start" 2>/dev/null)" && echo "$pid"
  done
  return 0
}
# Removes, unsignalled, the kwokctl pid files of cluster <name> whose process is gone or is not
# the one started (start time differs, or none recorded): kwokctl signals every pid in its files.
drop_stale_env_pids() { # cluster
  local f pid
  for f in "$ATOLL_ENV_DIR"/kwok/clusters/"$1"/pids/*.pid; do
    [ -f "$f" ] || continue
    pid=$(tr -dc 0-9 <"$f")
    pid_is "$pid" "$(cat "$f.start" 2>/dev/null)" && continue
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      log "$1: pid $pid ($(basename "$f")) is not the process env-up started (start time differs): leaving it alone"
    fi
    rm -f "$f" "$f.start"
  done
  return 0
}
# Records the start time of each process kwokctl just started for cluster <name>.
record_env_starts() { # cluster
  local f
  for f in "$ATOLL_ENV_DIR"/kwok/clusters/"$1"/pids/*.pid; do
    [ -f "$f" ] && proc_start_time "$(tr -dc 0-9 <"$f")" >"$f.start"
  done
  return 0
}

# Background processes of ours (agents, DNS servers), tracked by pid files under
# $ATOLL_ENV_DIR/procs (<name>.pid and its start time, <name>.start), logs beside them. Stopped
# by pid and start time, never by name.
PROCS_DIR=$ATOLL_ENV_DIR/procs

# Empty (and true) when there is no pid file: proc_stop of a process never started is a no-op.
proc_pid() { { tr -dc 0-9 <"$PROCS_DIR/$1.pid"; } 2>/dev/null || true; }
proc_running() { [ -f "$PROCS_DIR/$1.pid" ] && pid_is "$(proc_pid "$1")" "$(cat "$PROCS_DIR/$1.start" 2>/dev/null)"; }

proc_start() { # name command...
  local name=$1; shift
  mkdir -p "$PROCS_DIR"
  proc_running "$name" && return 0
  NO_COLOR=1 RUST_LOG=${RUST_LOG:-info,kube=warn} nohup "$@" >>"$PROCS_DIR/$name.log" 2>&1 &
  echo $! >"$PROCS_DIR/$name.pid"
  proc_start_time $! >"$PROCS_DIR/$name.start"
  log "$name started (pid $!, log $PROCS_DIR/$name.log)"
}

proc_stop() { # name
  local name=$1 pid start
  if ! proc_running "$name"; then
    pid=$(proc_pid "$name")
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null &&
      log "$name: pid $pid is alive but is not the process we started (start time differs): leaving it alone"
    rm -f "$PROCS_DIR/$name.pid" "$PROCS_DIR/$name.start"
    return 0
  fi
  pid=$(proc_pid "$name"); start=$(cat "$PROCS_DIR/$name.start")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 50); do pid_is "$pid" "$start" || break; sleep 0.1; done
  if pid_is "$pid" "$start"; then kill -9 "$pid" 2>/dev/null || true; fi
  rm -f "$PROCS_DIR/$name.pid" "$PROCS_DIR/$name.start"
  log "$name stopped"
}

# Waits until http://127.0.0.1:<port>/readyz answers 200 (bash's /dev/tcp: no curl needed);
# fails after <seconds> (default 60) with the last answer and the process's log tail.
wait_ready() { # name port [seconds]
  local name=$1 port=$2 deadline=$((SECONDS + ${3:-60})) answer=""
  while [ $SECONDS -lt $deadline ]; do
    proc_running "$name" || { tail -20 "$PROCS_DIR/$name.log" >&2; die "$name exited"; }
    # The braces keep 2>/dev/null temporary: on a bare exec it would silence this shell's
    # stderr for good once the connection succeeds.
    if { exec 3<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null; then
      printf 'GET /readyz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
      answer=$(cat <&3 2>/dev/null || true)
      exec 3<&- 3>&-
      case $answer in "HTTP/1."?" 200"*) return 0 ;; esac
    fi
    sleep 0.2
  done
  tail -20 "$PROCS_DIR/$name.log" >&2
  die "$name is not ready after ${3:-60} s (last /readyz answer: $(printf '%s' "$answer" | tail -1))"
}

# Ports of cluster cN's processes, N = 1..$PORTS_MAX_CLUSTERS: base + N, the bases in
# hack/ports.env (the one source: crates/atoll-testing/src/ports.rs reads the same file).
# Call as `port=$(agent_admin_port c3)`: an assignment, so that set -e stops on a bad name.
# shellcheck source=ports.env
. "$HACK_DIR/ports.env"
cluster_number() { # cN -> N
  local n=${1#c}
  [[ $1 == c* && $n =~ ^[0-9]{1,3}$ ]] && [ $((10#$n)) -ge 1 ] && [ $((10#$n)) -le "$PORTS_MAX_CLUSTERS" ] ||
    die "cluster '$1': the port scheme covers c1..c$PORTS_MAX_CLUSTERS"
  echo $((10#$n))
}
agent_admin_port() { local n; n=$(cluster_number "$1") && echo $((PORTS_AGENT_ADMIN_BASE + n)); }
dns_port() { local n; n=$(cluster_number "$1") && echo $((PORTS_DNS_BASE + n)); }
dns_admin_port() { local n; n=$(cluster_number "$1") && echo $((PORTS_DNS_ADMIN_BASE + n)); }

# The clusters of the running local ClusterSet (c1 c2 ...), or the arguments if given.
clusters_or() {
  if [ $# -gt 0 ]; then echo "$@"; return; fi
  local d
  for d in "$ATOLL_ENV_DIR"/kwok/clusters/*/; do [ -d "$d" ] && basename "$d"; done
}

# The command line of hack/agents.sh and hack/dns.sh: `start|stop|restart [cluster ...]` (default:
# every cluster of the running ClusterSet) on the processes <kind>-cN. `<start_fn> cN` starts one;
# the started ones are then waited for until /readyz answers on `<admin_port_fn> cN`.
proc_command() { # kind admin_port_fn start_fn [action [cluster ...]]
  local kind=$1 admin_port_fn=$2 start_fn=$3 action=${4:-} c port started=()
  shift $(($# < 4 ? $# : 4))
  for c in $(clusters_or "$@"); do
    case $action in
      start) "$start_fn" "$c"; started+=("$c") ;;
      stop) proc_stop "$kind-$c" ;;
      restart) proc_stop "$kind-$c"; "$start_fn" "$c"; started+=("$c") ;;
      *) die "usage: $0 start|stop|restart [cluster ...]" ;;
    esac
  done
  # Started processes serve /readyz once every watch has listed and the first pass ran
  # (ATOLL_NO_WAIT_READY=1: a test starting one that must stay not ready).
  [ -z "${ATOLL_NO_WAIT_READY:-}" ] || return 0
  for c in "${started[@]}"; do
    port=$("$admin_port_fn" "$c")
    wait_ready "$kind-$c" "$port"
  done
}
