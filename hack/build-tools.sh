#!/usr/bin/env bash
# Builds, once per version, the real Kubernetes control plane and its helpers from the Go module
# proxy into ~/.cache/atoll/<tool>-<version>/bin: kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl (k8s.io/kubernetes through the wrapper module in hack/go/k8s, which
# replaces every staging module with the matching v0.x.y), etcd (3.6, never Debian's 3.4), kwok,
# kwokctl, CoreDNS and Helm (crane for `make image` and Prometheus, from Debian, on demand). A tool whose binaries exist and report the right version is skipped, so a
# warm machine spends seconds here. Usage: hack/build-tools.sh [k8s|kube-proxy|node|etcd|kwok|coredns|helm|crane|prometheus ...]
set -euo pipefail
. "$(dirname "$0")/lib.sh"
export CGO_ENABLED=0 GOFLAGS=-mod=mod

# Builds commands of k8s.io/kubernetes into $K8S_BIN, stamped with $K8S_VERSION.
go_build_k8s() { # package...
  local minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  local ld="-s -w" p
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean -X $p.buildDate=2026-01-01T00:00:00Z"
  done
  mkdir -p "$K8S_BIN"
  (cd "$HACK_DIR/go/k8s" && go build -trimpath -tags notest -ldflags "$ld" -o "$K8S_BIN/" "$@")
}

build_k8s() {
  if [ -x "$K8S_BIN/kubectl" ] && "$K8S_BIN/kube-apiserver" --version 2>/dev/null | grep -qx "Kubernetes $K8S_VERSION"; then
    return 0
  fi
  log "building Kubernetes $K8S_VERSION (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl)"
  go_build_k8s k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
}

# The data-plane lab only: kube-proxy (nftables mode) for each cluster's node namespace.
build_kube-proxy() {
  if "$K8S_BIN/kube-proxy" --version 2>/dev/null | grep -qx "Kubernetes $K8S_VERSION"; then
    return 0
  fi
  log "building kube-proxy $K8S_VERSION"
  go_build_k8s k8s.io/kubernetes/cmd/kube-proxy
}

build_etcd() {
  if "$ETCD_BIN/etcd" --version 2>/dev/null | grep -q "etcd Version: ${ETCD_VERSION#v}$"; then
    return 0
  fi
  log "building etcd $ETCD_VERSION"
  mkdir -p "$ETCD_BIN"
  (cd "$HACK_DIR/go/etcd" && go build -trimpath -ldflags "-s -w" -o "$ETCD_BIN/etcd" go.etcd.io/etcd/server/v3)
}

build_kwok() {
  if "$KWOK_BIN/kwokctl" --version 2>/dev/null | grep -q "${KWOK_VERSION#v}" && [ -x "$KWOK_BIN/kwok" ]; then
    return 0
  fi
  log "building kwok and kwokctl $KWOK_VERSION"
  GOBIN="$KWOK_BIN" go install -trimpath -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}" \
    "sigs.k8s.io/kwok/cmd/kwokctl@$KWOK_VERSION" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
}

build_coredns() {
  if "$COREDNS_BIN/coredns" -version 2>/dev/null | grep -q "CoreDNS-${COREDNS_VERSION#v}"; then
    return 0
  fi
  log "building CoreDNS $COREDNS_VERSION"
  GOBIN="$COREDNS_BIN" go install -trimpath -ldflags "-s -w" "github.com/coredns/coredns@$COREDNS_VERSION"
}

build_crane() {
  if "$CRANE_BIN/crane" version 2>/dev/null | grep -qx "$CRANE_VERSION"; then
    return 0
  fi
  log "building crane $CRANE_VERSION"
  GOBIN="$CRANE_BIN" go install -trimpath -ldflags "-s -w" \
    "github.com/google/go-containerregistry/cmd/crane@$CRANE_VERSION"
}

build_helm() {
  if "$HELM_BIN/helm" version --short 2>/dev/null | grep -q "^$HELM_VERSION"; then
    return 0
  fi
  log "building Helm $HELM_VERSION"
  GOBIN="$HELM_BIN" go install -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" \
    "helm.sh/helm/v4/cmd/helm@$HELM_VERSION"
}

# The lab's real nodes: kubelet (from the Kubernetes module, as the
# control plane), containerd with its runc shim and ctr, runc (cgo, with seccomp from Debian's
# libseccomp: containerd gives every sandbox the runtime/default profile), the CNI plugins the
# node's network uses (bridge, host-local, loopback, portmap) and crictl. cgroup v1 is what this
# machine has: containerd 2.4 and runc 1.5 still run on it (deprecated), kubelet with
# failCgroupV1: false.
build_node() {
  local ok=1
  "$K8S_BIN/kubelet" --version 2>/dev/null | grep -qx "Kubernetes $K8S_VERSION" || ok=0
  "$NODE_BIN/containerd" --version 2>/dev/null | grep -q " $CONTAINERD_VERSION " || ok=0
  "$NODE_BIN/runc" --version 2>/dev/null | grep -q "^runc version ${RUNC_VERSION#v}$" || ok=0
  "$NODE_BIN/runc" --version 2>/dev/null | grep -q "^libseccomp: " || ok=0
  [ -x "$NODE_BIN/cni/bridge" ] && [ -x "$NODE_BIN/cni/host-local" ] && [ -x "$NODE_BIN/crictl" ] || ok=0
  [ $ok = 1 ] && return 0
  log "building the lab node: kubelet $K8S_VERSION, containerd $CONTAINERD_VERSION, runc $RUNC_VERSION, CNI plugins $CNI_PLUGINS_VERSION, crictl $CRICTL_VERSION"
  go_build_k8s k8s.io/kubernetes/cmd/kubelet
  mkdir -p "$NODE_BIN/cni"
  GOBIN="$NODE_BIN" go install -trimpath -tags "no_btrfs no_devmapper no_zfs" -ldflags "-s -w" \
    "github.com/containerd/containerd/v2/cmd/containerd@$CONTAINERD_VERSION" \
    "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION" \
    "github.com/containerd/containerd/v2/cmd/ctr@$CONTAINERD_VERSION"
  [ -e /usr/include/seccomp.h ] || {
    log "installing Debian's libseccomp-dev (runc's seccomp support)"
    apt-get install -y -qq libseccomp-dev >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq libseccomp-dev >/dev/null; }
  }
  CGO_ENABLED=1 GOBIN="$NODE_BIN" go install -trimpath -tags seccomp -ldflags "-s -w" \
    "github.com/opencontainers/runc@$RUNC_VERSION"
  GOBIN="$NODE_BIN/cni" go install -trimpath -ldflags "-s -w" \
    "github.com/containernetworking/plugins/plugins/main/bridge@$CNI_PLUGINS_VERSION" \
    "github.com/containernetworking/plugins/plugins/ipam/host-local@$CNI_PLUGINS_VERSION" \
    "github.com/containernetworking/plugins/plugins/main/loopback@$CNI_PLUGINS_VERSION" \
    "github.com/containernetworking/plugins/plugins/meta/portmap@$CNI_PLUGINS_VERSION"
  GOBIN="$NODE_BIN" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION"
}

# Prometheus and promtool (alert rule tests, the live-Prometheus e2e test): Debian's package,
# downloaded and unpacked into the cache. Unpacking runs none of the package's scripts, so no
# service is installed or started; the tests start Prometheus themselves, on 127.0.0.1.
build_prometheus() {
  if "$PROMETHEUS_BIN/promtool" --version 2>&1 | grep -q "version $PROMETHEUS_VERSION"; then
    return 0
  fi
  local candidate tmp
  candidate=$(apt-cache policy prometheus | awk '/Candidate:/ {print $2}')
  if [ -z "$candidate" ] || [ "$candidate" = "(none)" ]; then
    log "no package lists for prometheus yet: apt-get update"
    apt-get update -qq
    candidate=$(apt-cache policy prometheus | awk '/Candidate:/ {print $2}')
  fi
  case $candidate in
    "$PROMETHEUS_VERSION"+*) ;;
    *) die "Debian's archive offers prometheus '$candidate', not $PROMETHEUS_VERSION: update PROMETHEUS_VERSION in hack/versions.env" ;;
  esac
  log "unpacking Debian's prometheus $candidate (prometheus, promtool)"
  tmp=$(mktemp -d)
  chmod 755 "$tmp" # apt downloads as its own user
  (cd "$tmp" && apt-get download -q "prometheus=$candidate" >/dev/null)
  dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/root"
  mkdir -p "$PROMETHEUS_BIN"
  cp "$tmp/root/usr/bin/prometheus" "$tmp/root/usr/bin/promtool" "$PROMETHEUS_BIN/"
  rm -rf "$tmp"
}

command -v go >/dev/null || die "go is not installed"
tools=("$@")
[ ${#tools[@]} -gt 0 ] || tools=(k8s etcd kwok coredns helm)
for tool in "${tools[@]}"; do
  start=$SECONDS
  "build_$tool"
  log "$tool ready ($((SECONDS - start)) s)"
done
