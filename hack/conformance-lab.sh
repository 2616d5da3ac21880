#!/usr/bin/env bash
# The whole upstream MCS conformance suite (all 27 specs, Connectivity and DNS included) in the
# data-plane lab. Its binary, conformance-lab.test, is the unmodified suite built with one Go
# build overlay of ours (hack/go/conformance-lab/framework_lab.go) replacing only execCmd: a
# spec's `nc`/`nslookup` runs inside the request pod's lab network namespace. The suite itself
# runs inside the lab namespace (no route out), and the overlay refuses to exec anywhere else.
#
# With real nodes (ATOLL_LAB_NODES=real: kubelet, containerd, Atoll installed by Helm) the suite
# runs unmodified, as upstream builds it (conformance.test), and execs into real containers.
#
# Usage: hack/conformance-lab.sh build|run|all   (all: build, make lab-up [lab-install], run; prints
# `conformance (lab): N passed, N failed`). Report: target/conformance-lab/.
set -euo pipefail
HACK=$(cd "$(dirname "$0")" && pwd)
. "$HACK/lab-env.sh"
cd "$REPO_DIR"
SUITE_VERSION=v0.5.0
export MCS_CONFORMANCE_OUT=${MCS_CONFORMANCE_OUT:-$ATOLL_CACHE/mcs-conformance-$SUITE_VERSION}
OVERLAY_SRC=$HACK/go/conformance-lab/framework_lab.go
SUITE=$MCS_CONFORMANCE_OUT/conformance-lab.test
OUT=$REPO_DIR/target/conformance-lab
CONTEXTS=${ATOLL_CONFORMANCE_CONTEXTS:-kwok-c1,kwok-c2,kwok-c3}
EXPECTED_SPECS=27

build() {
  # The staged, checksum-verified source of ../shared/conformance/build.sh (hack/conformance.sh).
  "$HACK/conformance.sh" build
  local src=$MCS_CONFORMANCE_OUT/.build/conformance stamp
  [ -f "$src/framework.go" ] || die "no staged suite source at $src"
  stamp=$(cat "$MCS_CONFORMANCE_OUT/.atoll-stamp" "$OVERLAY_SRC" | sha256sum | cut -c1-16)
  if [ -x "$SUITE" ] && [ "$(cat "$SUITE.stamp" 2>/dev/null)" = "$stamp" ]; then
    log "conformance-lab.test already built"; return 0
  fi
  local overlay; overlay=$(mktemp -d)
  cp "$OVERLAY_SRC" "$overlay/framework_lab.go"
  printf '{"Replace":{"%s":"%s"}}\n' "$src/framework.go" "$overlay/framework_lab.go" >"$overlay/overlay.json"
  log "building conformance-lab.test (the suite with execCmd overlaid for the lab)"
  (cd "$src" && GOFLAGS="-mod=readonly -buildvcs=false" go test -c -overlay="$overlay/overlay.json" -o "$SUITE.tmp" .)
  mv -f "$SUITE.tmp" "$SUITE"
  rm -rf "$overlay"
  echo "$stamp" >"$SUITE.stamp"
}

run() {
  # On real nodes (ATOLL_LAB_NODES=real, Atoll from `make lab-install`) the suite runs exactly
  # as upstream builds it: its own `kubectl exec` into real containers, through the apiserver
  # and the kubelet.
  if [ -d "$LAB_DIR/nodes/c1" ]; then
    SUITE=$MCS_CONFORMANCE_OUT/conformance.test
    log "real nodes: the unmodified suite ($SUITE)"
  fi
  [ -x "$SUITE" ] || die "$SUITE is missing: run hack/conformance-lab.sh build"
  "$HACK/lab.sh" check || die "the lab is not isolated: the suite does not run"
  rm -rf "$OUT"; mkdir -p "$OUT"
  local status=0 version
  version=$(atoll_version)
  log "running all $EXPECTED_SPECS specs of the upstream suite inside the lab on $CONTEXTS"
  (cd "$OUT" && ip netns exec "$LAB_NETNS" env ATOLL_LAB_NETNS="$LAB_NETNS" "$SUITE" \
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
  build) build ;;
  run) run ;;
  all)
    build
    "$HACK/lab.sh" up
    [ "${ATOLL_LAB_NODES:-real}" != real ] || "$HACK/lab-install.sh"
    run
    ;;
  *) die "usage: hack/conformance-lab.sh build|run|all" ;;
esac
