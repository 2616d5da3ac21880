#!/usr/bin/env bash
# Everything CI checks, in order: formatting, clippy with warnings as errors, then every cargo
# test. Each step's own output is shown; the script stops at the first failing step.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$REPO_DIR"

log "cargo fmt --check"
cargo fmt --all -- --check
log "cargo clippy --all-targets -D warnings"
cargo clippy --locked --all-targets -- -D warnings
log "cargo test (unit, property and API-shape tests)"
cargo test --locked --workspace
