#!/usr/bin/env bash
# `make image`: the Atoll container image as an OCI archive, target/image/atoll-<version>.oci.tar,
# without a container daemon and without downloading a base image.
#
# The image is FROM scratch: one layer with a static `atoll` (x86_64-unknown-linux-musl) and the
# /etc/passwd and /etc/group entries of its non-root user (65532), entrypoint `/atoll`, OCI
# labels (source, version, revision, licenses). It is assembled with crane (go-containerregistry,
# built from its Go module like the other tools): crane is one static program that needs no
# daemon, no root and no storage driver, appends a layer to the empty base and edits the
# config; buildah from Debian would also work but brings a storage stack and user namespaces
# for what is a single layer here. crane works against a registry, so it talks to its own
# in-memory registry on 127.0.0.1 for the duration of this script.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$REPO_DIR"

TARGET=x86_64-unknown-linux-musl
VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
REVISION=$(git rev-parse HEAD 2>/dev/null || echo unknown)
OUT=$REPO_DIR/target/image
ARCHIVE=$OUT/atoll-$VERSION.oci.tar

"$HACK_DIR/build-tools.sh" crane
rustup target list --installed | grep -qx "$TARGET" || rustup target add "$TARGET"
# ring compiles C for the target: musl-gcc comes with Debian's musl-tools.
require musl-gcc crane tar
log "building a static atoll ($TARGET, release)"
cargo build --release --locked --target "$TARGET" -p atoll
BINARY=$REPO_DIR/target/$TARGET/release/atoll

rm -rf "$OUT"
mkdir -p "$OUT/rootfs/etc"
install -m 0755 "$BINARY" "$OUT/rootfs/atoll"
echo "nonroot:x:65532:65532:nonroot:/:/sbin/nologin" >"$OUT/rootfs/etc/passwd"
echo "nonroot:x:65532:" >"$OUT/rootfs/etc/group"
# Deterministic layer: fixed owner, times and order.
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$OUT/rootfs" -cf "$OUT/layer.tar" .

port=$((20000 + RANDOM % 10000))
crane registry serve --address "127.0.0.1:$port" >"$OUT/registry.log" 2>&1 &
registry=$!
trap 'kill "$registry" 2>/dev/null || true' EXIT
for _ in $(seq 50); do
  { exec 3<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null && { exec 3<&- 3>&-; break; }
  sleep 0.1
done
ref=127.0.0.1:$port/atoll:$VERSION
crane append --insecure --oci-empty-base --platform linux/amd64 -f "$OUT/layer.tar" -t "$ref" >/dev/null
crane mutate --insecure "$ref" -t "$ref" \
  --entrypoint /atoll --user 65532:65532 --set-platform linux/amd64 \
  -l org.opencontainers.image.title=atoll \
  -l org.opencontainers.image.description="Atoll: the Kubernetes Multi-Cluster Services API" \
  -l org.opencontainers.image.source="${ATOLL_SOURCE_URL:-https://atoll.dev}" \
  -l org.opencontainers.image.version="$VERSION" \
  -l org.opencontainers.image.revision="$REVISION" \
  -l org.opencontainers.image.licenses=Apache-2.0 >/dev/null
crane pull --insecure --format oci "$ref" "$OUT/layout"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$OUT/layout" -cf "$ARCHIVE" .
rm -rf "$OUT/layout" "$OUT/rootfs" "$OUT/layer.tar"
log "image: $ARCHIVE ($(du -h "$ARCHIVE" | cut -f1); static binary $(du -h "$BINARY" | cut -f1))"
echo "$ARCHIVE"
