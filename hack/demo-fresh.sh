#!/usr/bin/env bash
# The guard for the README's first command: runs `make demo` as a newcomer's machine would, with
# an empty tool cache (ATOLL_CACHE pointed at a new directory: every Kubernetes binary, etcd,
# kwok and Helm is built again, and the ClusterSet's state starts from nothing), while Go's and
# cargo's build caches stay warm, so a forgotten build step costs minutes here instead of
# surfacing on a fresh machine. PATH is cleaned of every tool cache first, so a tool that some
# earlier run left on PATH cannot stand in for one the demo forgot to build.
# Fails unless the demo's last line is `demo: OK`; tears its ClusterSet down either way.
# Usage: hack/demo-fresh.sh (run by .ci/run before make test)
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
FRESH=${ATOLL_FRESH_CACHE:-$HOME/.cache/atoll-fresh-demo}
LOG=$FRESH.log
rm -rf "$FRESH"
mkdir -p "$FRESH"
clean_path=$(tr ':' '\n' <<<"$PATH" | grep -v -e '/\.cache/atoll' | paste -sd: -)
down() { ATOLL_CACHE=$FRESH PATH=$clean_path "$REPO/hack/env-down.sh" >/dev/null 2>&1 || true; }
trap 'down; rm -rf "$FRESH"' EXIT
start=$SECONDS
status=0
# env -u: nothing of an outer run's state (its env dir, its tool paths) reaches the demo.
env -u ATOLL_ENV_DIR -u ATOLL_GO_PINNED -u ATOLL_RESULTS ATOLL_CACHE="$FRESH" PATH="$clean_path" \
  make -C "$REPO" --no-print-directory demo >"$LOG" 2>&1 || status=$?
took=$((SECONDS - start))
last=$(tail -n 1 "$LOG")
if [ "$status" -eq 0 ] && [ "$last" = "demo: OK" ]; then
  echo "make demo with an empty tool cache: demo: OK in $took s (log $LOG)"
else
  tail -n 30 "$LOG" >&2
  echo "make demo with an empty tool cache: FAILED after $took s (exit $status; last line: $last; log $LOG)" >&2
  exit 1
fi
