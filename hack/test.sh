#!/usr/bin/env bash
# Everything CI checks, in order: formatting, clippy with warnings as errors, unit and property
# tests, then the end-to-end tests against a local ClusterSet of real kube-apiservers, which this
# script brings up (building the control plane once, cached) and always tears down again.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$REPO_DIR"
mkdir -p "$ATOLL_ENV_DIR"

log "cargo fmt --check"
cargo fmt --all -- --check
log "cargo clippy --all-targets -D warnings"
cargo clippy --locked --workspace --all-targets -- -D warnings
log "unit, property and API-shape tests"
cargo test --locked --workspace --exclude atoll-e2e 2>&1 | tee "$ATOLL_ENV_DIR/unit.log"

cargo build --locked -p atoll
# The install artefacts: the container image (static binary FROM scratch) and the Helm chart.
packaging=0
log "container image: build and test"
{ "$HACK_DIR/image.sh" >/dev/null && "$HACK_DIR/image-test.sh"; } 2>&1 | tee "$ATOLL_ENV_DIR/packaging.log" || packaging=1
log "Helm chart: lint, template, offline checks"
"$HACK_DIR/chart.sh" test 2>&1 | tee -a "$ATOLL_ENV_DIR/packaging.log" || packaging=1
log "data-plane lab: its network namespace has no route out (a namespace of its own for the test)"
lab_test() { ATOLL_LAB_NETNS=atoll-lab-test ATOLL_LAB_DIR=$ATOLL_ENV_DIR/lab-test "$HACK_DIR/lab.sh" "$@"; }
{ lab_test netns && lab_test check; } 2>&1 | tee -a "$ATOLL_ENV_DIR/packaging.log" || packaging=1
lab_test down

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
# the upstream suite: a restarted kwok control plane takes minutes to schedule pods again.
disruptive=(restart failsafe failover membership liveness)
gentle=()
for t in crates/atoll-e2e/tests/*.rs; do
  t=$(basename "$t" .rs)
  [[ " ${disruptive[*]} " == *" $t "* ]] || gentle+=(--test "$t")
done
ATOLL_REFERENCE_CRDS=$("$HACK_DIR/reference-crds.sh")
export ATOLL_REFERENCE_CRDS
e2e=0
ATOLL_KUBECONFIG=$ATOLL_ENV_DIR/kubeconfig cargo test --locked -p atoll-e2e "${gentle[@]}" 2>&1 | tee "$ATOLL_ENV_DIR/e2e.log" || e2e=$?
# The upstream suite on the same ClusterSet (its specs make their own namespaces).
conformance=0
"$HACK_DIR/conformance.sh" run 2>&1 | tee "$ATOLL_ENV_DIR/conformance.log" || conformance=$?
for t in "${disruptive[@]}"; do
  # One test at a time: each may stop an agent or change ClusterSet-wide state.
  ATOLL_KUBECONFIG=$ATOLL_ENV_DIR/kubeconfig cargo test --locked -p atoll-e2e --test "$t" -- --test-threads 1 2>&1 | tee -a "$ATOLL_ENV_DIR/e2e.log" || e2e=$?
done

# The data-plane lab, once the ClusterSet above is gone (never two sets of control planes at
# once): real packets through kube-proxy and CoreDNS, then all 27 upstream specs inside it.
"$HACK_DIR/env-down.sh"
log "data-plane lab: traffic tests and the whole upstream suite (27 specs) inside it"
"$HACK_DIR/lab.sh" down
trap '"$HACK_DIR/env-down.sh"; "$HACK_DIR/lab.sh" down' EXIT
lab=0
{ "$HACK_DIR/conformance-lab.sh" build && "$HACK_DIR/lab.sh" up && "$HACK_DIR/lab-test.sh" \
  && "$HACK_DIR/conformance-lab.sh" run; } 2>&1 | tee "$ATOLL_ENV_DIR/lab.log" || lab=1

# One line for the whole run: every cargo test binary above plus the upstream suite's specs.
# A test binary killed by a signal prints no result line: count it as one failure.
awk '/^test result:/ { p += $4; f += $6 }
     /process didn.t exit successfully: .*\(signal:/ { f += 1 }
     /^conformance: [0-9]+ passed, [0-9]+ failed/ { cp = $2; cf = $4 }
     /^conformance \(lab\): [0-9]+ passed, [0-9]+ failed/ { lp = $3; lf = $5 }
     /^(image|chart|chart dry-run|lab isolation|lab traffic): [0-9]+ passed, [0-9]+ failed/ { sub(/^[a-z -]+: /, ""); kp += $1; kf += $3 }
     END { printf "all tests: %d passed, %d failed (cargo: %d passed, %d failed; upstream conformance, API level: %d passed, %d failed; upstream conformance in the lab, all specs: %d passed, %d failed; image, chart and lab: %d passed, %d failed)\n", p + cp + lp + kp, f + cf + lf + kf, p, f, cp, cf, lp, lf, kp, kf }' \
  "$ATOLL_ENV_DIR/unit.log" "$ATOLL_ENV_DIR/e2e.log" "$ATOLL_ENV_DIR/conformance.log" "$ATOLL_ENV_DIR/packaging.log" "$ATOLL_ENV_DIR/lab.log"
[ "$e2e" -eq 0 ] && [ "$conformance" -eq 0 ] && [ "$packaging" -eq 0 ] && [ "$lab" -eq 0 ] \
  || die "end-to-end tests exit $e2e, conformance exit $conformance, image, chart and lab isolation $([ "$packaging" -eq 0 ] && echo ok || echo failed), lab traffic and full suite $([ "$lab" -eq 0 ] && echo ok || echo failed)"
