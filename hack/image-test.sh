#!/usr/bin/env bash
# Tests the OCI archive `make image` wrote: unpacks it as a container runtime would (index ->
# manifest -> config and layers), runs `atoll --version` from the image's own root filesystem
# (chroot, as root, or unshare --map-root-user otherwise), and checks that the binary is static,
# the image small and the config what a Kubernetes Pod needs. Prints `image: N passed, N failed`.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$REPO_DIR"

VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
ARCHIVE=${1:-$REPO_DIR/target/image/atoll-$VERSION.oci.tar}
[ -f "$ARCHIVE" ] || die "no $ARCHIVE: run make image"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/oci" "$WORK/rootfs"
tar -xf "$ARCHIVE" -C "$WORK/oci"

SUITE=image

# index.json -> the one manifest -> its config and layers (python3 for the JSON only).
read -r config layers < <(python3 - "$WORK/oci" <<'PY'
import json, sys, os
root = sys.argv[1]
blob = lambda d: os.path.join(root, "blobs", *d.split(":"))
index = json.load(open(os.path.join(root, "index.json")))
manifest = json.load(open(blob(index["manifests"][0]["digest"])))
print(blob(manifest["config"]["digest"]), ",".join(blob(l["digest"]) for l in manifest["layers"]))
PY
)
IFS=, read -ra layer_files <<<"$layers"
for layer in "${layer_files[@]}"; do tar -xf "$layer" -C "$WORK/rootfs"; done

run_in_image() {
  if [ "$(id -u)" -eq 0 ]; then chroot "$WORK/rootfs" /atoll --version
  else unshare --map-root-user chroot "$WORK/rootfs" /atoll --version; fi
}
version_output=$(run_in_image 2>&1 || true)
check "atoll --version runs from the image's root filesystem ($version_output)" \
  test "$version_output" = "atoll $VERSION"
check "the binary is static (no program interpreter, no shared libraries)" \
  bash -c "! readelf -l '$WORK/rootfs/atoll' | grep -q INTERP && ! readelf -d '$WORK/rootfs/atoll' 2>/dev/null | grep -q NEEDED"
check "the image holds only atoll and its user" \
  test "$(cd "$WORK/rootfs" && find . -type f | sort | tr '\n' ' ')" = "./atoll ./etc/group ./etc/passwd "
cfg() { python3 -c "import json,sys; c=json.load(open('$config'))['config']; print($1)"; }
check "entrypoint is /atoll" test "$(cfg "c.get('Entrypoint')")" = "['/atoll']"
check "runs as the non-root user 65532" test "$(cfg "c.get('User')")" = "65532:65532"
check "OCI labels: source, version, licenses" test "$(cfg "' '.join(c['Labels'][k] for k in ['org.opencontainers.image.version','org.opencontainers.image.licenses'])")" = "$VERSION Apache-2.0"
size=$(stat -c %s "$ARCHIVE")
check "the image is small ($((size / 1024 / 1024)) MiB, $size bytes; bound 40 MiB)" test "$size" -lt $((40 * 1024 * 1024))
echo "image: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
