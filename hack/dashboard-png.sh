#!/usr/bin/env bash
# Draws docs/dashboard-faults.png (hack/dashboard-png.py) from target/alerts/run.json, which the
# alerts end-to-end test writes. matplotlib comes from PyPI into a virtualenv in the cache.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$REPO_DIR"
require python3
[ -f target/alerts/run.json ] || die "no target/alerts/run.json: run the alerts e2e test (make test, or cargo test -p atoll-e2e --test alerts on a running ClusterSet)"
venv=$ATOLL_CACHE/venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -c 'import matplotlib' 2>/dev/null || "$venv/bin/pip" install -q matplotlib
"$venv/bin/python" hack/dashboard-png.py
