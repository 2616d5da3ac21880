#!/usr/bin/env bash
# The Helm chart charts/atoll (Helm built from its Go module, hack/build-tools.sh helm).
#   hack/chart.sh sync [ATOLL]  regenerate files/ (CRDs, admission policies, RBAC) from `atoll`
#   hack/chart.sh lint          helm lint, every mode
#   hack/chart.sh template      render target/chart/{member,hub,both}.yaml and count their lines
#   hack/chart.sh test          offline checks, `chart: N passed, N failed`
#   hack/chart.sh dry-run       server-side dry-run of the rendered chart on the local ClusterSet
#                               (c1 as hub+member, c2 as member), and the CRD no-downgrade rule
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$REPO_DIR"
CHART=$REPO_DIR/charts/atoll
OUT=$REPO_DIR/target/chart
ATOLL=${ATOLL:-$REPO_DIR/target/debug/atoll}

generated() { # file -> the atoll command that generates it
  case $1 in
    crds.yaml) echo crds ;;
    admission-policy.yaml) echo admission-policy ;;
    rbac.yaml) echo rbac ;;
  esac
}
FILES=(crds.yaml admission-policy.yaml rbac.yaml)

sync() {
  local f
  for f in "${FILES[@]}"; do "$ATOLL" "$(generated "$f")" >"$CHART/files/$f"; done
  log "synced ${FILES[*]} from $ATOLL"
}

render() { # mode [helm args...] -> stdout
  local mode=$1; shift
  helm template atoll "$CHART" --namespace atoll-system --set mode="$mode" "$@"
}

template() {
  mkdir -p "$OUT"
  local mode
  for mode in member hub both; do
    render "$mode" >"$OUT/$mode.yaml"
    log "helm template (mode $mode): $(wc -l <"$OUT/$mode.yaml") lines, $(grep -c '^kind:' "$OUT/$mode.yaml") objects -> $OUT/$mode.yaml"
  done
  render member --set coredns.wire=true >"$OUT/wired.yaml"
  render member --set 'admissionPolicy.trustedSliceWriters={system:serviceaccount:mcs:controller}' \
    --set 'dns.trustedSliceManagers={mcs-controller.example.dev}' >"$OUT/trusting.yaml"
  render member --set serviceMonitor.enabled=true --set prometheusRule.enabled=true \
    --set prometheusRule.runbookBaseURL=https://docs.example.dev/atoll/alerts.md# \
    --set 'prometheusRule.labels.release=prometheus' --set grafanaDashboard.enabled=true \
    --set grafanaDashboard.namespace=monitoring >"$OUT/observed.yaml"
}


fresh() { diff -q <("$ATOLL" "$(generated "$1")") "$CHART/files/$1" >/dev/null; }
fails_with() { # message helm-args...
  local message=$1; shift
  ! out=$(helm template atoll "$CHART" "$@" 2>&1) && grep -q "$message" <<<"$out"
}

test_chart() {
  SUITE=chart
  "$HACK_DIR/build-tools.sh" helm >/dev/null
  [ -x "$ATOLL" ] || die "$ATOLL is missing: run 'cargo build -p atoll'"
  local f mode
  for f in "${FILES[@]}"; do
    check "files/$f is what \`atoll $(generated "$f")\` prints (run hack/chart.sh sync)" fresh "$f"
  done
  for mode in member hub both; do
    check "helm lint (mode $mode)" helm lint --quiet "$CHART" --namespace atoll-system --set mode="$mode"
  done
  template >/dev/null 2>&1
  check "helm template renders every mode" test -s "$OUT/member.yaml" -a -s "$OUT/hub.yaml" -a -s "$OUT/both.yaml"
  check "another namespace is refused" fails_with "install Atoll into the namespace atoll-system" --namespace default
  check "an unknown mode is refused" fails_with "mode must be member, hub or both" --namespace atoll-system --set mode=spoke
  local report
  report=$(python3 "$HACK_DIR/chart_checks.py" "$OUT" 2>&1) || true
  echo "$report"
  local line
  while read -r line; do
    [ -n "$line" ] || continue
    if [[ $line == "ok "* ]]; then passed=$((passed + 1)); record_result ok "${line#ok }"
    else failed=$((failed + 1)); record_result failed "$line"; fi
  done <<<"$report"
  echo "chart: $passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}

dry_run() {
  SUITE="chart dry-run"
  "$HACK_DIR/build-tools.sh" helm >/dev/null
  local kc=$ATOLL_ENV_DIR/kubeconfig ctx
  [ -f "$kc" ] || die "no local ClusterSet: run make env-up"
  template >/dev/null 2>&1
  for ctx in kwok-c1 kwok-c2; do
    local file=$OUT/member.yaml
    [ "$ctx" = kwok-c1 ] && file=$OUT/both.yaml
    kubectl --kubeconfig "$kc" --context "$ctx" apply --server-side --dry-run=server \
      --field-manager helm-dry-run --force-conflicts -f "$file" >"$OUT/dry-run-$ctx.log" 2>&1 \
      || { cat "$OUT/dry-run-$ctx.log" >&2; die "server-side dry-run of the chart failed on $ctx"; }
    log "server-side dry-run on $ctx: $(wc -l <"$OUT/dry-run-$ctx.log") objects accepted"
    passed=$((passed + 1))
  done
  # The no-downgrade rule against live CRDs in c3: one labelled as from a newer mcs-api release,
  # one from the same release with a higher schema revision. Neither may be rendered; the
  # labels are put back whatever happens.
  local k=(--kubeconfig "$kc" --context kwok-c3) se=crd/serviceexports.multicluster.x-k8s.io si=crd/serviceimports.multicluster.x-k8s.io
  restore_labels() {
    kubectl "${k[@]}" label --overwrite "$se" multicluster.x-k8s.io/release-version=v0.5.2 >/dev/null
    kubectl "${k[@]}" label --overwrite "$si" multicluster.x-k8s.io/crd-schema-revision=0 >/dev/null
  }
  trap restore_labels EXIT
  # --take-ownership: env-up created the RBAC objects outside any release.
  rendered_crds() {
    helm template atoll "$CHART" --namespace atoll-system --dry-run=server --take-ownership \
      --kubeconfig "$kc" --kube-context kwok-c3 \
      | sed -n 's/^  name: \(.*\.multicluster\.x-k8s\.io\)$/\1/p' | sort | tr '\n' ' '
  }
  check "all MCS CRDs render when the live ones are the chart's" \
    test "$(rendered_crds)" = "clusterprofiles.multicluster.x-k8s.io serviceexports.multicluster.x-k8s.io serviceimports.multicluster.x-k8s.io "
  kubectl "${k[@]}" label --overwrite "$se" multicluster.x-k8s.io/release-version=v0.9.0 >/dev/null
  kubectl "${k[@]}" label --overwrite "$si" multicluster.x-k8s.io/crd-schema-revision=3 >/dev/null
  check "a newer live release or schema revision is not downgraded" \
    test "$(rendered_crds)" = "clusterprofiles.multicluster.x-k8s.io "
  restore_labels
  trap - EXIT
  echo "chart dry-run: $passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}

case ${1:-} in
  sync) ATOLL=${2:-$ATOLL}; sync ;;
  lint) "$HACK_DIR/build-tools.sh" helm >/dev/null; for m in member hub both; do helm lint "$CHART" --namespace atoll-system --set mode=$m; done ;;
  template) "$HACK_DIR/build-tools.sh" helm >/dev/null; template ;;
  test) test_chart ;;
  dry-run) dry_run ;;
  *) die "usage: hack/chart.sh sync|lint|template|test|dry-run" ;;
esac
