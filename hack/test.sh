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

log "end-to-end tests on the local ClusterSet, then the upstream MCS conformance suite on it"
cargo build --locked -p atoll
"$HACK_DIR/conformance.sh" build
# Stop a ClusterSet a previous run may have left, so the tests start from a known state, and
# stop ours whatever happens next.
"$HACK_DIR/env-down.sh"
trap '"$HACK_DIR/env-down.sh"' EXIT
"$HACK_DIR/env-up.sh"
"$HACK_DIR/agents.sh" start
"$HACK_DIR/dns.sh" start
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

# One line for the whole run: every cargo test binary above plus the upstream suite's specs.
# A test binary killed by a signal prints no result line: count it as one failure.
awk '/^test result:/ { p += $4; f += $6 }
     /process didn.t exit successfully: .*\(signal:/ { f += 1 }
     /^conformance: [0-9]+ passed, [0-9]+ failed/ { cp = $2; cf = $4 }
     END { printf "all tests: %d passed, %d failed (cargo: %d passed, %d failed; upstream conformance: %d passed, %d failed)\n", p + cp, f + cf, p, f, cp, cf }' \
  "$ATOLL_ENV_DIR/unit.log" "$ATOLL_ENV_DIR/e2e.log" "$ATOLL_ENV_DIR/conformance.log"
[ "$e2e" -eq 0 ] && [ "$conformance" -eq 0 ] || die "end-to-end tests exit $e2e, conformance exit $conformance"
