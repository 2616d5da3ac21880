#!/usr/bin/env bash
# Tests Atoll's alert rules (charts/atoll/files/alerts.rules.yaml) with Prometheus's own tools:
# `promtool check rules`, `promtool test rules` (hack/alerts/atoll.test.yaml), a check that
# every alert has a test that expects it to fire, and, per alert, that the tests fail when the
# alert loses its `for` (so the "not yet" expectations can fail). Prints `alerts: N passed, N
# failed`. promtool comes from `hack/build-tools.sh prometheus` (make alerts-test builds it).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$REPO_DIR"
require promtool

SUITE=alerts
RULES=charts/atoll/files/alerts.rules.yaml
TESTS=hack/alerts/atoll.test.yaml
passed=0 failed=0

check "promtool check rules $RULES" promtool check rules "$RULES"
check "promtool test rules $TESTS" promtool test rules "$TESTS"

alerts=$(sed -n 's/^ *- alert: \([A-Za-z0-9]*\)$/\1/p' "$RULES")
# An alert is tested when some test case names it and expects at least one alert.
tested() { # alert
  python3 - "$TESTS" "$1" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
cases = re.split(r"\n\s+- eval_time:", text)
sys.exit(0 if any(re.search(r"alertname: %s\n\s+exp_alerts:\n\s+- exp_labels:" % re.escape(sys.argv[2]), c) for c in cases) else 1)
PY
}
# The same rules without the alert's `for:`, in a copy next to the tests (their rule_files path).
without_for() { # alert -> fails when promtool still passes
  local dir
  dir=$(mktemp -d)
  mkdir -p "$dir/hack/alerts" "$dir/charts/atoll/files"
  cp "$TESTS" "$dir/hack/alerts/"
  awk -v a="$1" '/^ *- alert: / { mine = ($3 == a) } !(mine && /^ *for: /)' "$RULES" >"$dir/$RULES"
  if promtool test rules "$dir/$TESTS" >/dev/null 2>&1; then rm -rf "$dir"; return 1; fi
  rm -rf "$dir"
}
for alert in $alerts; do
  check "$alert has a test expecting it to fire" tested "$alert"
  check "the tests catch $alert firing before its for" without_for "$alert"
done
echo "alerts: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
