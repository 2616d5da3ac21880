#!/usr/bin/env bash
# Runs tests as `cargo test` does, and keeps each test's result in libtest's own
# machine-readable record (`--logfile`: one `ok|failed|ignored <test>` line per test) under
# RESULTS_DIR, one file per test binary, so hack/test.sh totals records instead of reading the
# human output. The human output is unchanged: cargo's build lines, then each binary's
# `running N tests` ... `test result:` lines.
#
#   hack/cargo-test.sh RESULTS_DIR [cargo test options...] [-- libtest options...]
#
# The test binaries come from cargo's machine-readable build output (`--message-format json`);
# each runs from its package's directory, as cargo runs it. A binary that exits without a
# `test result` (killed by a signal, a panic outside a test) leaves a record `failed <binary>`.
# Exit status: 0 when every binary passed, else 101 (cargo's).
set -euo pipefail
results=${1:?usage: hack/cargo-test.sh RESULTS_DIR [cargo test options...] [-- libtest options...]}
shift
cargo_args=() test_args=()
while [ $# -gt 0 ]; do
  if [ "$1" = -- ]; then shift; test_args=("$@"); break; fi
  cargo_args+=("$1"); shift
done
mkdir -p "$results"

# executable <TAB> package directory <TAB> what cargo would print after "Running"
binaries=$(cargo test --no-run --message-format json-render-diagnostics "${cargo_args[@]}" | python3 -c '
import json, os, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") != "compiler-artifact" or not m.get("profile", {}).get("test") or not m.get("executable"):
        continue
    t = m["target"]
    pkg_dir = os.path.dirname(m["manifest_path"])
    src = os.path.relpath(t["src_path"], pkg_dir)
    label = ("unittests " + src) if t["kind"] != ["test"] else src
    print("\t".join([m["executable"], pkg_dir, label]))
')
status=0
while IFS=$'\t' read -r exe dir label; do
  [ -n "$exe" ] || continue
  record=$results/$(basename "$exe").log
  printf '     Running %s (%s)\n' "$label" "$exe" >&2
  rm -f "$record"
  if ! (cd "$dir" && "$exe" --logfile "$record" "${test_args[@]}"); then
    status=101
    # A binary that died without finishing records what it could not report.
    grep -q '^failed ' "$record" 2>/dev/null || echo "failed $(basename "$exe") (exited without a test result)" >>"$record"
  fi
done <<<"$binaries"
exit "$status"
