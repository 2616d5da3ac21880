#!/usr/bin/env bash
# Runs the upstream MCS conformance suite (sigs.k8s.io/mcs-api/conformance, tag
# conformance/v0.5.0, unmodified source in ../shared/conformance) against the local ClusterSet
# with Atoll running, and prints `conformance: N passed, N failed`.
#
# Safety: only `conformance-noexec.test` is ever run (pod exec replaced by a failure), and always
# with both guards of ../shared/conformance/README.md, so the 11 specs that exec nc/nslookup
# into pods (packets to pod and ClusterSet IPs) never run. This script refuses to run if either
# guard is missing or if the guards select anything but the 16 API-level specs.
#
# Usage: hack/conformance.sh [build|run|all]   (default all: build, ClusterSet up, agents, run)
#   build  build the suite once (cached in $MCS_CONFORMANCE_OUT; a warm run skips it)
#   run    run it against an already running ClusterSet with agents (make test does this)
# Output: target/conformance/{report.yaml,report.html,junit.xml,suite.log}.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$REPO_DIR"

SUITE_SRC=${MCS_CONFORMANCE_SRC:-$REPO_DIR/../shared/conformance}
SUITE_VERSION=v0.5.0
export MCS_CONFORMANCE_OUT=${MCS_CONFORMANCE_OUT:-$ATOLL_CACHE/mcs-conformance-$SUITE_VERSION}
SUITE=$MCS_CONFORMANCE_OUT/conformance-noexec.test
OUT=$REPO_DIR/target/conformance
# The two guards (../shared/conformance/README.md): the label filter drops the Connectivity and
# DNS specs, the skip regex drops "should be inaccessible" (labelled only Required).
LABEL_FILTER='!Connectivity && !DNS'
SKIP='Connectivity to |DNS|should be inaccessible'
EXPECTED_SPECS=16
CONTEXTS=${ATOLL_CONFORMANCE_CONTEXTS:-kwok-c1,kwok-c2,kwok-c3}

build() {
  [ -x "$SUITE_SRC/build.sh" ] || die "the conformance suite's source is not at $SUITE_SRC (set MCS_CONFORMANCE_SRC)"
  # The build is keyed by the pinned source, the build script and the Go version.
  local stamp
  stamp=$(cat "$SUITE_SRC/src.sha256" "$SUITE_SRC/build.sh" <(go version) | sha256sum | cut -c1-16)
  if [ -x "$SUITE" ] && [ "$(cat "$MCS_CONFORMANCE_OUT/.atoll-stamp" 2>/dev/null)" = "$stamp" ]; then
    log "conformance suite $SUITE_VERSION already built ($SUITE)"
    return 0
  fi
  log "building the upstream conformance suite $SUITE_VERSION (cold: about 5 min)"
  local start=$SECONDS
  "$SUITE_SRC/build.sh" >"$ATOLL_CACHE/mcs-conformance-build.log" 2>&1 \
    || { tail -20 "$ATOLL_CACHE/mcs-conformance-build.log" >&2; die "building the conformance suite failed"; }
  echo "$stamp" >"$MCS_CONFORMANCE_OUT/.atoll-stamp"
  log "conformance suite built in $((SECONDS - start)) s"
}

# `Ran N of M Specs` of a dry run with the guards: no spec body runs, no cluster is contacted.
guarded_spec_count() {
  local dir; dir=$(mktemp -d)
  (cd "$dir" && "$SUITE" --kubeconfig=/nonexistent --ginkgo.dry-run --ginkgo.no-color \
    "--ginkgo.label-filter=$LABEL_FILTER" "--ginkgo.skip=$SKIP" 2>&1 \
    | sed -n 's/.*Ran \([0-9]*\) of [0-9]* Specs.*/\1/p')
  rm -rf "$dir"
}

run() {
  [ -x "$SUITE" ] || die "$SUITE is missing: run hack/conformance.sh build"
  [ -n "$LABEL_FILTER" ] && [ -n "$SKIP" ] || die "refusing to run the suite without both guards"
  local count; count=$(guarded_spec_count)
  [ "$count" = "$EXPECTED_SPECS" ] || die "the guards select ${count:-no} specs, not the $EXPECTED_SPECS API-level ones: refusing to run"
  rm -rf "$OUT"; mkdir -p "$OUT"
  local version status=0
  version=$(atoll_version)
  log "running the upstream MCS conformance suite $SUITE_VERSION ($EXPECTED_SPECS API-level specs) on $CONTEXTS, Atoll $version"
  (cd "$OUT" && "$SUITE" \
    --kubeconfig="$ATOLL_ENV_DIR/kubeconfig" --contexts="$CONTEXTS" \
    --organization=Atoll --project=Atoll --version="$version" --url="${ATOLL_URL:-https://atoll.dev}" \
    "--ginkgo.label-filter=$LABEL_FILTER" "--ginkgo.skip=$SKIP" \
    --ginkgo.junit-report=junit.xml --ginkgo.v --ginkgo.no-color --ginkgo.timeout=30m \
    >suite.log 2>&1) || status=$?
  summarize "$status"
}

# Counts from report.yaml (written by the suite's ReportAfterSuite): specs that ran and passed or
# failed; the 11 guarded-out specs appear there as skipped.
summarize() {
  local status=$1
  # The suite's JUnit report is what hack/test.sh totals.
  if [ -n "${ATOLL_RESULTS:-}" ] && [ -f "$OUT/junit.xml" ]; then mkdir -p "$ATOLL_RESULTS"; cp "$OUT/junit.xml" "$ATOLL_RESULTS/conformance.junit.xml"; fi
  [ -f "$OUT/report.yaml" ] || { tail -30 "$OUT/suite.log" >&2; die "the suite wrote no report.yaml (exit $status); see $OUT/suite.log"; }
  local passed failed skipped
  passed=$(grep -c '^ *passed: true' "$OUT/report.yaml" || true)
  failed=$(grep -c '^ *failed: true' "$OUT/report.yaml" || true)
  skipped=$(grep -c '^ *skipped: true' "$OUT/report.yaml" || true)
  # A spec that is neither passed nor failed nor skipped was non-conformant.
  local total; total=$(grep -c '^ *- desc:' "$OUT/report.yaml" || true)
  local nonconformant=$((total - passed - failed - skipped))
  failed=$((failed + nonconformant))
  grep -E '^\s*(\[(FAIL|PANICKED)\]|•)' "$OUT/suite.log" | tail -40 || true
  if [ "$failed" -gt 0 ] || [ "$passed" -ne "$EXPECTED_SPECS" ] || [ "$status" -ne 0 ]; then
    grep -E -A15 '^\s*\[FAIL\]' "$OUT/suite.log" | head -80 >&2 || true
    echo "conformance: $passed passed, $failed failed (skipped by the guards: $skipped); suite exit $status; report in $OUT"
    return 1
  fi
  echo "conformance: $passed passed, $failed failed (skipped by the guards: $skipped); report in $OUT"
}

case ${1:-all} in
  build) build ;;
  run) run ;;
  all)
    build
    cargo build --locked -p atoll
    "$HACK_DIR/env-up.sh"
    "$HACK_DIR/agents.sh" start
    run
    ;;
  *) die "usage: $0 [build|run|all]" ;;
esac
