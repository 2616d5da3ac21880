#!/usr/bin/env bash
# Gathers the upstream CRDs that Atoll's CRDs must stay schema-compatible with into one
# directory outside the repository and prints that directory on stdout (logs go to stderr).
# crates/atoll-e2e/tests/crd_compat.rs compares against it:
#   export ATOLL_REFERENCE_CRDS=$(hack/reference-crds.sh)
#
# Each CRD comes from its upstream Go module, downloaded through the configured Go module proxy
# into the Go module cache (`go mod download`). A module the proxy does not serve is taken from
# the reference copies in ../shared/reference/crds (override: ATOLL_SHARED_CRDS) when they are
# there; when neither has a file, the script fails and names it.
#
#   file                                        module                         version   path in the module
#   multicluster.x-k8s.io_serviceexports.yaml   sigs.k8s.io/mcs-api            v0.5.2    config/crd/
#   multicluster.x-k8s.io_serviceimports.yaml   sigs.k8s.io/mcs-api            v0.5.2    config/crd/
#   about.k8s.io_clusterproperties.yaml         sigs.k8s.io/about-api          970300d   config/crd/
#   multicluster.x-k8s.io_clusterprofiles.yaml  sigs.k8s.io/cluster-inventory-api 8375ac2 config/crd/bases/
#
# (As of this writing the proxy serves mcs-api v0.5.2, whose two files are byte-identical to
# the reference copies, but neither about-api nor cluster-inventory-api, which are only reachable
# through the fallback.)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

OUT=${ATOLL_REFERENCE_CRDS_DIR:-$ATOLL_CACHE/reference-crds}
SHARED=${ATOLL_SHARED_CRDS:-$(cd "$REPO_DIR/.." && pwd)/shared/reference/crds}
# file module version directory-in-module
CRDS=(
  "multicluster.x-k8s.io_serviceexports.yaml sigs.k8s.io/mcs-api v0.5.2 config/crd"
  "multicluster.x-k8s.io_serviceimports.yaml sigs.k8s.io/mcs-api v0.5.2 config/crd"
  "about.k8s.io_clusterproperties.yaml sigs.k8s.io/about-api 970300d config/crd"
  "multicluster.x-k8s.io_clusterprofiles.yaml sigs.k8s.io/cluster-inventory-api 8375ac2 config/crd/bases"
)

# The module's directory in the Go module cache, or nothing (with the reason logged) when it
# cannot be downloaded.
module_dir() { # module version
  local json dir
  command -v go >/dev/null || { log "go is not installed: cannot download $1@$2"; return 0; }
  # Run outside any Go module, so only the module asked for is resolved.
  json=$(cd "$EMPTY" && GOFLAGS=-mod=mod go mod download -json "$1@$2" 2>&1 || true)
  dir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p' <<<"$json")
  if [ -n "$dir" ] && [ -d "$dir" ]; then
    echo "$dir"
  else
    log "the Go module proxy does not serve $1@$2: $(sed -n 's/^[[:space:]]*"Error": "\(.*\)",*$/\1/p' <<<"$json" | head -1)"
  fi
}

EMPTY=$(mktemp -d)
trap 'rm -rf "$EMPTY"' EXIT
mkdir -p "$OUT"
# Nothing from an earlier run may stand in for a file this run could not find.
rm -f "$OUT"/*.yaml "$OUT/SOURCES"
sources=()
missing=()
declare -A dirs
for entry in "${CRDS[@]}"; do
  read -r file module version path <<<"$entry"
  key=$module@$version
  [ -v "dirs[$key]" ] || dirs[$key]=$(module_dir "$module" "$version")
  from=""
  if [ -n "${dirs[$key]}" ] && [ -f "${dirs[$key]}/$path/$file" ]; then
    from=${dirs[$key]}/$path/$file
    sources+=("$file: Go module $key, $path/")
  elif [ -f "$SHARED/$file" ]; then
    from=$SHARED/$file
    sources+=("$file: $SHARED (reference copy of $key)")
  else
    missing+=("$file ($key $path/)")
    continue
  fi
  # Module cache files are read-only; install replaces the copy of an earlier run.
  install -m 0644 "$from" "$OUT/$file"
done
[ ${#missing[@]} -eq 0 ] || die "no source for: ${missing[*]}. The Go module proxy did not serve them and $SHARED does not have them (set ATOLL_SHARED_CRDS to a directory with the upstream files)"
printf '%s\n' "${sources[@]}" >"$OUT/SOURCES"
for line in "${sources[@]}"; do log "$line"; done
echo "$OUT"
