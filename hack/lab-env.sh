# Sourced first by every script of the data-plane lab: where the lab keeps its state (its own
# ClusterSet under $LAB_DIR/env, apart from the host's ~/.cache/atoll/env), then lib.sh and
# lab-net.sh. Set ATOLL_LAB_NETNS / ATOLL_LAB_DIR for a second lab (make test's isolation check).
# shellcheck shell=bash
LAB_NETNS=${ATOLL_LAB_NETNS:-atoll-lab}
LAB_DIR=${ATOLL_LAB_DIR:-${ATOLL_CACHE:-$HOME/.cache/atoll}/lab}
# Every namespace the lab created, one per line: the only ones `hack/lab.sh down` deletes, and
# the only ones a lab veth may lead to.
NETNS_FILE=$LAB_DIR/netns
ATOLL_ENV_DIR=$LAB_DIR/env
# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=lab-net.sh
. "$HACK_DIR/lab-net.sh"


# kubectl on cluster cN, run inside the lab namespace (where the apiservers listen).
lab_kubectl() { local c=$1; shift; ip netns exec "$LAB_NETNS" kubectl --kubeconfig "$ATOLL_ENV_DIR/kubeconfig" --context "kwok-$c" "$@"; }
