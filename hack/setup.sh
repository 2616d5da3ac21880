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

# Debian packages, the only place they are installed: each program any script or target uses,
# with the package that provides it. Only touch apt when something is missing.
declare -A PACKAGE=(
  [dig]=bind9-dnsutils [openssl]=openssl [musl-gcc]=musl-tools [nft]=nftables [socat]=socat
  [nc]=netcat-openbsd [ip]=iproute2 [dnsperf]=dnsperf [unshare]=util-linux
)
missing=()
for program in "${!PACKAGE[@]}"; do
  command -v "$program" >/dev/null || missing+=("${PACKAGE[$program]}")
done
# PyYAML reads rendered manifests in the chart tests.
python3 -c 'import yaml' 2>/dev/null || missing+=(python3-yaml)
if [ ${#missing[@]} -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
