#!/usr/bin/env bash
# Keeps the report.yaml of the last `make conformance` run in docs/conformance/, in the layout
# the sig-multicluster site uses for published conformance reports:
# reports/<suite-version>/<implementation>/<implementation-version>.yaml
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$REPO_DIR"
report=target/conformance/report.yaml
[ -f "$report" ] || die "no $report: run make conformance first"
grep -q '^passed: 16$' "$report" || die "$report does not say 16 passed; not publishing it"
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
dest=docs/conformance/reports/v0.5.0/atoll/v$version.yaml
mkdir -p "$(dirname "$dest")"
cp "$report" "$dest"
log "kept $dest"
