#!/usr/bin/env bash
# Installs, idempotently, what the build and tests need beyond a fresh machine of this kind
# (Go, Rust with rustfmt and clippy, make are preinstalled). Safe to run every time.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

need_rust_component() {
  rustup component list --installed 2>/dev/null | grep -q "^$1" || rustup component add "$1"
}
command -v cargo >/dev/null || die "cargo is not installed"
need_rust_component rustfmt
need_rust_component clippy

# Debian packages: dig (DNS checks), openssl, musl-tools, python3-yaml. Only touch apt when something is missing.
missing=()
command -v dig >/dev/null || missing+=(bind9-dnsutils)
command -v openssl >/dev/null || missing+=(openssl)
# The chart and image tests: musl-gcc for the static binary, PyYAML to read rendered manifests.
command -v musl-gcc >/dev/null || missing+=(musl-tools)
python3 -c 'import yaml' 2>/dev/null || missing+=(python3-yaml)
if [ ${#missing[@]} -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
