#!/usr/bin/env bash
# Brings up the local ClusterSet: N kwok clusters (default 3: c1 c2 c3) of real kube-apiserver,
# etcd, kube-controller-manager and kube-scheduler processes, created one after another, every
# listener on 127.0.0.1, distinct pod and service ranges per cluster, one fake node each, and
# Atoll's CRDs installed. c1 doubles as the hub. Contexts kwok-c1..kwok-cN go to one kubeconfig
# file, printed at the end. Re-running is a no-op; a failed run tears down what it started.
# Pod and service IPs of these clusters are data only: nothing may send packets to them.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

CLUSTERS=${ATOLL_CLUSTERS:-3}
KUBECONFIG_FILE=$ATOLL_ENV_DIR/kubeconfig
export KWOK_WORKDIR=$ATOLL_ENV_DIR/kwok
ATOLL=${ATOLL:-$REPO_DIR/target/debug/atoll}
[ -x "$ATOLL" ] || die "$ATOLL is missing: run 'cargo build -p atoll' (make env-up does)"
# helm renders the chart's RBAC and admission policies into every member.
"$HACK_DIR/build-tools.sh" k8s etcd kwok helm
require kubectl kube-apiserver etcd kwokctl kwok helm

cluster_ready() {
  kubectl --kubeconfig "$KUBECONFIG_FILE" --context "kwok-$1" get --raw /readyz >/dev/null 2>&1
}

# With the lab's real nodes (ATOLL_LAB_NODES=real, set by hack/lab.sh inside its namespace
# only): kubelets register their own nodes, so kwok manages only nodes annotated as fake; the
# apiserver serves on every address of the lab namespace (which has no route out) and advertises
# the lab's address on the nodes' bridge, so pods reach it through the `kubernetes` Service,
# its certificate names that address and the Service's ClusterIP (in-cluster configuration
# verifies it), and it calls kubelets (exec, logs) with the admin client certificate.
REAL_NODES=
case ${ATOLL_LAB_NODES:-} in
  real) REAL_NODES=real ;;
  "") ;;
  *) die "ATOLL_LAB_NODES is '$ATOLL_LAB_NODES': 'real' or unset" ;;
esac
[ -z "$REAL_NODES" ] || [ -n "${ATOLL_LAB_ADDRESS:-}" ] || die "ATOLL_LAB_NODES=real needs ATOLL_LAB_ADDRESS (hack/lab.sh sets both)"

write_config() { # name index -> kwokctl config file path
  local name=$1 i=$2 file=$ATOLL_ENV_DIR/$1.kwokctl.yaml advertise=127.0.0.1 sans="" apiserver="" kwok=""
  local pki=$KWOK_WORKDIR/clusters/$1/pki
  if [ -n "$REAL_NODES" ]; then
    advertise=$ATOLL_LAB_ADDRESS
    sans="  kubeApiserverCertSANs: [\"$ATOLL_LAB_ADDRESS\", \"10.$((100 + i)).0.1\"]"
    apiserver="  - {key: bind-address, value: 0.0.0.0}
  - {key: kubelet-client-certificate, value: $pki/admin.crt}
  - {key: kubelet-client-key, value: $pki/admin.key}
  - {key: kubelet-preferred-address-types, value: InternalIP}"
    kwok="- name: kwok-controller
  extraArgs:
  - {key: manage-all-nodes, value: \"false\"}
  - {key: manage-nodes-with-annotation-selector, value: kwok.x-k8s.io/node=fake}"
  fi
  cat >"$file" <<YAML
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
options:
  runtime: binary
  bindAddress: 127.0.0.1
  kubeVersion: $K8S_VERSION
  etcdVersion: ${ETCD_VERSION#v}
  kubeApiserverBinary: $K8S_BIN/kube-apiserver
  kubeControllerManagerBinary: $K8S_BIN/kube-controller-manager
  kubeSchedulerBinary: $K8S_BIN/kube-scheduler
  kubectlBinary: $K8S_BIN/kubectl
  kwokControllerBinary: $KWOK_BIN/kwok
  etcdBinary: $ETCD_BIN/etcd
  disableQPSLimits: true
  quietPull: true
$sans
componentsPatches:
- name: kube-apiserver
  extraArgs:
  - key: advertise-address
    value: $advertise
  - key: service-cluster-ip-range
    value: 10.$((100 + i)).0.0/16
$apiserver
# Each controller with its own ServiceAccount, as kubeadm does: the admission policy tells the
# namespace controller and the garbage collector from the administrator.
- name: kube-controller-manager
  extraArgs:
  - key: use-service-account-credentials
    value: "true"
$kwok
YAML
  echo "$file"
}

# One fake node per cluster, managed by kwok-controller (it fills in status and heartbeats).
# The pod range is set on the node itself, so kwok hands out pod IPs that differ per cluster.
add_node() { # name index
  kubectl --kubeconfig "$KUBECONFIG_FILE" --context "kwok-$1" apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Node
metadata:
  name: $1-node-0
  annotations:
    kwok.x-k8s.io/node: fake
  labels:
    kubernetes.io/hostname: $1-node-0
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    type: kwok
    topology.kubernetes.io/zone: $1-zone-a
spec:
  podCIDR: 10.$((200 + $2)).0.0/24
  podCIDRs: [10.$((200 + $2)).0.0/24]
YAML
}

# A kubeconfig for one of cN's Atoll processes in cN: the cluster's server and CA and a token
# minted (TokenRequest) for its ServiceAccount, as the kubelet would give the chart's pod.
account_kubeconfig() { # cluster account file
  local token
  token=$(kubectl --kubeconfig "$KUBECONFIG_FILE" --context "kwok-$1" -n atoll-system \
    create token "$2" --duration 48h)
  kubectl --kubeconfig "$KUBECONFIG_FILE" config view --raw --minify --flatten \
    --context "kwok-$1" >"$3"
  kubectl --kubeconfig "$3" config set-credentials "$2" --token "$token" >/dev/null
  kubectl --kubeconfig "$3" config set-context --current --user "$2" >/dev/null
  chmod 600 "$3"
}

# What the Helm chart installs in a member besides the workloads: its ServiceAccounts and RBAC
# and its admission policies, rendered from charts/atoll, so every test runs with the chart's
# permissions. (The CRDs come from `atoll crds`, which the chart's files/crds.yaml equals.)
apply_chart_rbac() { # cluster
  local ctx=(--kubeconfig "$KUBECONFIG_FILE" --context "kwok-$1")
  kubectl "${ctx[@]}" create namespace atoll-system --dry-run=client -o yaml | kubectl "${ctx[@]}" apply -f - >/dev/null
  helm template atoll "$REPO_DIR/charts/atoll" --namespace atoll-system \
    --show-only templates/rbac.yaml --show-only templates/admission-policy.yaml \
    | kubectl "${ctx[@]}" apply -f - >/dev/null
}

created=()
cleanup_on_failure() {
  local status=$?
  if [ $status -ne 0 ] && [ ${#created[@]} -gt 0 ]; then
    log "env-up failed; tearing down the clusters it created: ${created[*]}"
    for name in "${created[@]}"; do
      kwokctl delete cluster --kubeconfig "$KUBECONFIG_FILE" --name "$name" >/dev/null 2>&1 || true
    done
  fi
  exit $status
}
trap cleanup_on_failure EXIT

mkdir -p "$ATOLL_ENV_DIR"
for i in $(seq 1 "$CLUSTERS"); do
  name=c$i
  if cluster_ready "$name"; then
    log "$name is already up"
    continue
  fi
  if [ -d "$KWOK_WORKDIR/clusters/$name" ]; then
    log "$name exists but is not ready: recreating it"
    kwokctl delete cluster --kubeconfig "$KUBECONFIG_FILE" --name "$name" >/dev/null 2>&1 || true
  fi
  start=$SECONDS
  log "creating cluster $name"
  created+=("$name")
  kwokctl create cluster --kubeconfig "$KUBECONFIG_FILE" --name "$name" \
    --config "$(write_config "$name" "$i")" --wait 5m >"$ATOLL_ENV_DIR/$name.create.log" 2>&1 \
    || { tail -20 "$ATOLL_ENV_DIR/$name.create.log" >&2; die "kwokctl create cluster $name failed"; }
  ctx=(--kubeconfig "$KUBECONFIG_FILE" --context "kwok-$name")
  record_env_starts "$name"
  # A real node registers itself when its kubelet starts (hack/lab-node.sh).
  [ -n "$REAL_NODES" ] || add_node "$name" "$i"
  # With real nodes the clusters stay bare: `make lab-install` installs Atoll with Helm.
  if [ -z "$REAL_NODES" ]; then
    "$ATOLL" crds | kubectl "${ctx[@]}" apply -f - >/dev/null
    kubectl "${ctx[@]}" wait --for condition=established --timeout=60s \
      crd/serviceexports.multicluster.x-k8s.io crd/serviceimports.multicluster.x-k8s.io \
      crd/clusterproperties.about.k8s.io >/dev/null
  fi
  log "$name ready in $((SECONDS - start)) s"
done

# Membership: every cluster gets the chart's ServiceAccounts, RBAC and admission policies, then
# joins the ClusterSet through the hub c1 with `atoll join` (leaving the RBAC to the chart); its
# agent runs with hub credentials from the member's Secret and, in the member, as the chart's
# ServiceAccount atoll-agent, its DNS server as atoll-dns (short-lived tokens in kubeconfigs of
# their own).
for i in $(seq 1 "$CLUSTERS"); do
  [ -z "$REAL_NODES" ] || break
  name=c$i
  apply_chart_rbac "$name"
  "$ATOLL" join --kubeconfig "$KUBECONFIG_FILE" --context "kwok-$name" --hub-context kwok-c1 \
    --cluster-id "$name" --clusterset local --member-rbac=false >"$ATOLL_ENV_DIR/$name.join.log" 2>&1 \
    || { cat "$ATOLL_ENV_DIR/$name.join.log" >&2; die "atoll join of $name failed"; }
  account_kubeconfig "$name" atoll-agent "$ATOLL_ENV_DIR/agent-$name.kubeconfig"
  account_kubeconfig "$name" atoll-dns "$ATOLL_ENV_DIR/dns-$name.kubeconfig"
done
trap - EXIT

cat <<MSG
Local ClusterSet is up: $CLUSTERS clusters, hub = c1.
  export KUBECONFIG=$KUBECONFIG_FILE
  contexts: $(seq -s ' ' -f 'kwok-c%g' 1 "$CLUSTERS")
MSG
