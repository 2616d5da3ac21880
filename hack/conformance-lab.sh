#!/usr/bin/env bash
# The whole upstream MCS conformance suite (all 27 specs, Connectivity and DNS included) in the
# data-plane lab, unmodified, as upstream builds it (conformance.test, hack/conformance.sh): on
# the lab's real nodes (kubelet, containerd) with Atoll installed by Helm (make lab-install), the
# specs' `kubectl exec` runs their `nc`/`nslookup` in real containers, through the apiserver
# and the kubelet. The suite itself runs inside the lab namespace (no route out).
#
# Usage: hack/conformance-lab.sh build|run|all   (all: build, make lab-up, make lab-install, run;
# prints `conformance (lab): N passed, N failed`). Report: target/conformance-lab/.
set -euo pipefail
HACK=$(cd "$(dirname "$0")" && pwd)
. "$HACK/lab-env.sh"
cd "$REPO_DIR"
SUITE_VERSION=v0.5.0
export MCS_CONFORMANCE_OUT=${MCS_CONFORMANCE_OUT:-$ATOLL_CACHE/mcs-conformance-$SUITE_VERSION}
SUITE=$MCS_CONFORMANCE_OUT/conformance.test
OUT=$REPO_DIR/target/conformance-lab
CONTEXTS=${ATOLL_CONFORMANCE_CONTEXTS:-kwok-c1,kwok-c2,kwok-c3}
EXPECTED_SPECS=27

run() {
  [ -x "$SUITE" ] || die "$SUITE is missing: run hack/conformance-lab.sh build"
  [ -d "$LAB_DIR/nodes/c1" ] || die "the lab has no real nodes: make lab-up && make lab-install first"
  "$HACK/lab.sh" check || die "the lab is not isolated: the suite does not run"
  rm -rf "$OUT"; mkdir -p "$OUT"
  local status=0 version
  version=$(atoll_version)
  log "running all $EXPECTED_SPECS specs of the upstream suite ($SUITE) inside the lab on $CONTEXTS"
  (cd "$OUT" && ip netns exec "$LAB_NETNS" "$SUITE" \
    --kubeconfig="$ATOLL_ENV_DIR/kubeconfig" --contexts="$CONTEXTS" \
    --organization=Atoll --project=Atoll --version="$version" --url="${ATOLL_URL:-https://atoll.dev}" \
    --ginkgo.junit-report=junit.xml --ginkgo.v --ginkgo.no-color --ginkgo.timeout=45m \
    >suite.log 2>&1) || status=$?
  # The suite's JUnit report is what hack/test.sh totals.
  if [ -n "${ATOLL_RESULTS:-}" ] && [ -f "$OUT/junit.xml" ]; then mkdir -p "$ATOLL_RESULTS"; cp "$OUT/junit.xml" "$ATOLL_RESULTS/conformance-in-the-lab.junit.xml"; fi
  [ -f "$OUT/report.yaml" ] || { tail -30 "$OUT/suite.log" >&2; die "the suite wrote no report.yaml (exit $status)"; }
  local passed failed total
  passed=$(grep -c '^ *passed: true' "$OUT/report.yaml" || true)
  total=$(grep -c '^ *- desc:' "$OUT/report.yaml" || true)
  failed=$((total - passed))
  grep -E '^\s*(\[(FAIL|PANICKED)\]|•)' "$OUT/suite.log" | tail -40 || true
  echo "conformance (lab): $passed passed, $failed failed of $total; suite exit $status; report in $OUT"
  [ "$failed" = 0 ] && [ "$passed" = "$EXPECTED_SPECS" ] && [ "$status" = 0 ]
}

case ${1:-all} in
  # The staged, checksum-verified source of ../shared/conformance/build.sh.
  build) "$HACK/conformance.sh" build ;;
  run) run ;;
  all)
    "$HACK/conformance.sh" build
    "$HACK/lab.sh" up
    "$HACK/lab-install.sh"
    run
    ;;
  *) die "usage: hack/conformance-lab.sh build|run|all" ;;
esac
