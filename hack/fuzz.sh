#!/usr/bin/env bash
# `make fuzz`: coverage-guided fuzzing (libFuzzer via cargo-fuzz) of the DNS query path for
# FUZZ_SECONDS (default 60). Needs a nightly toolchain; installs cargo-fuzz once if missing.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$REPO_DIR"
rustup toolchain list | grep -q '^nightly' || die "cargo-fuzz needs a nightly toolchain (rustup toolchain install nightly)"
command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz
mkdir -p fuzz/corpus/dns_answer
cargo +nightly fuzz run dns_answer fuzz/corpus/dns_answer -- -max_total_time="${FUZZ_SECONDS:-60}" -max_len=1024
