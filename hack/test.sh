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
cargo clippy --locked --all-targets -- -D warnings
log "unit, property and API-shape tests"
cargo test --locked --workspace --exclude atoll-e2e 2>&1 | tee "$ATOLL_ENV_DIR/unit.log"

log "end-to-end tests on the local ClusterSet"
cargo build --locked -p atoll
# Stop a ClusterSet a previous run may have left, so the tests start from a known state, and
# stop ours whatever happens next.
"$HACK_DIR/env-down.sh"
trap '"$HACK_DIR/env-down.sh"' EXIT
"$HACK_DIR/env-up.sh"
"$HACK_DIR/agents.sh" start
"$HACK_DIR/dns.sh" start
ATOLL_KUBECONFIG=$ATOLL_ENV_DIR/kubeconfig cargo test --locked -p atoll-e2e 2>&1 | tee "$ATOLL_ENV_DIR/e2e.log"

# One line for the whole run, summed over every cargo test binary above.
awk '/^test result:/ { p += $4; f += $6 } END { printf "all tests: %d passed, %d failed\n", p, f }' \
  "$ATOLL_ENV_DIR/unit.log" "$ATOLL_ENV_DIR/e2e.log"
