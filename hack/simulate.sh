#!/usr/bin/env bash
# The deterministic fault simulation (crates/atoll-sim): SIM_SCHEDULES schedules (default
# 10,000) from SIM_SEED (default: the clock, printed), or one schedule SIM_SCHEDULE (a seed a
# failing run printed; SIM_TRACE=1 prints what it does). Its last line is
# `simulation: N schedules, M invariant violations (seed S)`; it exits 1 on any violation.
# With ATOLL_RESULTS set (make test), it leaves one record for the totals.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$REPO_DIR"
SUITE=simulation
cargo build --locked --release -p atoll-sim
status=0
# Shown as it runs and kept for the record; `tee /dev/stderr` would reopen (and truncate) a log
# file that stderr is redirected to.
out=$("$REPO_DIR/target/release/atoll-sim" | tee >(cat >&2)) || status=$?
summary=$(tail -n 1 <<<"$out")
summary=${summary#simulation: }
if [ "$status" -eq 0 ]; then record_result ok "$summary"; else record_result failed "$summary"; fi
exit "$status"
