#!/usr/bin/env bash
# Everything CI checks, in order: formatting, clippy with warnings as errors, unit and property
# tests, then the end-to-end tests against a local ClusterSet of real kube-apiservers, which this
# script brings up (building the control plane once, cached) and always tears down again.
# The totals at the end come from the runners' machine-readable records (libtest's --logfile via
# hack/cargo-test.sh, JUnit from the upstream suite, hack/lib.sh's check records), all under
# $ATOLL_RESULTS, summed by hack/test_totals.py.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$REPO_DIR"
mkdir -p "$ATOLL_ENV_DIR"
export ATOLL_RESULTS=$ATOLL_ENV_DIR/results
rm -rf "$ATOLL_RESULTS"
mkdir -p "$ATOLL_RESULTS"

log "cargo fmt --check"
cargo fmt --all -- --check
log "cargo clippy --all-targets -D warnings"
cargo clippy --locked --workspace --all-targets -- -D warnings
log "module graph: no cycles between modules of any crate"
python3 "$HACK_DIR/module_graph.py"
log "unit, property and API-shape tests"
"$HACK_DIR/cargo-test.sh" "$ATOLL_RESULTS/cargo-unit" --locked --workspace --exclude atoll-e2e
log "fault simulation: 10,000 schedules from a fixed seed (make simulate runs others)"
SIM_SCHEDULES=10000 SIM_SEED=${SIM_SEED:-20261203} "$HACK_DIR/simulate.sh"

cargo build --locked -p atoll
# The install artefacts: the container image (static binary FROM scratch) and the Helm chart.
packaging=0
log "container image: build and test"
{ "$HACK_DIR/image.sh" >/dev/null && "$HACK_DIR/image-test.sh"; } 2>&1 | tee "$ATOLL_ENV_DIR/packaging.log" || packaging=1
log "Helm chart: lint, template, offline checks"
"$HACK_DIR/chart.sh" test 2>&1 | tee -a "$ATOLL_ENV_DIR/packaging.log" || packaging=1
log "alert rules: promtool check and unit tests"
{ "$HACK_DIR/build-tools.sh" prometheus && "$HACK_DIR/alerts.sh"; } 2>&1 | tee -a "$ATOLL_ENV_DIR/packaging.log" || packaging=1
log "harness safety: isolation checks that send nothing and fail closed, teardown by pid and start time, pods without privilege"
"$HACK_DIR/harness-safety-test.sh" 2>&1 | tee -a "$ATOLL_ENV_DIR/packaging.log" || packaging=1

log "end-to-end tests on the local ClusterSet, then the upstream MCS conformance suite on it"
"$HACK_DIR/conformance.sh" build
# Stop a ClusterSet a previous run may have left, so the tests start from a known state, and
# stop ours whatever happens next.
"$HACK_DIR/env-down.sh"
trap '"$HACK_DIR/env-down.sh"' EXIT
"$HACK_DIR/env-up.sh"
"$HACK_DIR/agents.sh" start
"$HACK_DIR/dns.sh" start
log "Helm chart: server-side dry-run on the local apiservers, CRD no-downgrade rule"
"$HACK_DIR/chart.sh" dry-run 2>&1 | tee -a "$ATOLL_ENV_DIR/packaging.log" || packaging=1
# End-to-end tests that stop parts of the ClusterSet (agents, a control plane) run last, after
# the upstream suite: a restarted kwok control plane takes minutes to schedule pods again. So
# liveness (whose dead-cluster test restarts c2's) is the very last: faults exports from c2.
disruptive=(restart failsafe failover membership hostile hostile_budgets faults alerts bookkeeping liveness)
gentle=()
for t in crates/atoll-e2e/tests/*.rs; do
  t=$(basename "$t" .rs)
  [[ " ${disruptive[*]} " == *" $t "* ]] || gentle+=(--test "$t")
done
ATOLL_REFERENCE_CRDS=$("$HACK_DIR/reference-crds.sh")
export ATOLL_REFERENCE_CRDS
e2e=0
ATOLL_KUBECONFIG=$ATOLL_ENV_DIR/kubeconfig "$HACK_DIR/cargo-test.sh" "$ATOLL_RESULTS/cargo-e2e" --locked -p atoll-e2e "${gentle[@]}" 2>&1 | tee "$ATOLL_ENV_DIR/e2e.log" || e2e=$?
# The upstream suite on the same ClusterSet (its specs make their own namespaces).
conformance=0
"$HACK_DIR/conformance.sh" run 2>&1 | tee "$ATOLL_ENV_DIR/conformance.log" || conformance=$?
for t in "${disruptive[@]}"; do
  # One test at a time: each may stop an agent or change ClusterSet-wide state.
  ATOLL_KUBECONFIG=$ATOLL_ENV_DIR/kubeconfig "$HACK_DIR/cargo-test.sh" "$ATOLL_RESULTS/cargo-e2e-$t" --locked -p atoll-e2e --test "$t" -- --test-threads 1 2>&1 | tee -a "$ATOLL_ENV_DIR/e2e.log" || e2e=$?
done

# The data-plane lab, once the ClusterSet above is gone (never two sets of control planes at
# once): a real node per cluster (kubelet, containerd, CNI), Atoll installed with Helm from the
# image built above and running as Pods, real packets through kube-proxy and CoreDNS, then all
# 27 upstream specs, unmodified, inside it.
"$HACK_DIR/env-down.sh"
log "data-plane lab on real nodes: helm install, traffic tests and the whole upstream suite (27 specs)"
"$HACK_DIR/lab.sh" down
trap '"$HACK_DIR/env-down.sh"; "$HACK_DIR/lab.sh" down' EXIT
lab=0
{ "$HACK_DIR/lab.sh" up && "$HACK_DIR/lab-install.sh" && "$HACK_DIR/lab-test.sh" \
  && "$HACK_DIR/conformance-lab.sh" run; } 2>&1 | tee "$ATOLL_ENV_DIR/lab.log" || lab=1

# One line for the whole run, from the records: every test binary above, the upstream suite's
# specs (JUnit), our own suites' checks.
totals=0
python3 "$HACK_DIR/test_totals.py" "$ATOLL_RESULTS" || totals=$?
[ "$e2e" -eq 0 ] && [ "$conformance" -eq 0 ] && [ "$packaging" -eq 0 ] && [ "$lab" -eq 0 ] && [ "$totals" -eq 0 ] \
  || die "end-to-end tests exit $e2e, conformance exit $conformance, image, chart and lab isolation $([ "$packaging" -eq 0 ] && echo ok || echo failed), lab traffic and full suite $([ "$lab" -eq 0 ] && echo ok || echo failed)"
