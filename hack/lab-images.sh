#!/usr/bin/env bash
# The images the lab's real nodes run, assembled here without a registry on the internet and
# without a container daemon, as OCI archives in ~/.cache/atoll/lab-images (rebuilt when their
# recipe changes):
#
#   registry.k8s.io/pause:3.10.1   hack/images/pause.c, built statically with Debian's gcc: the
#                                  pod sandbox (holds the pod's namespaces, reaps orphans)
#   registry.k8s.io/coredns/coredns:<v>  the CoreDNS the lab builds from its Go module
#                                  (hack/build-tools.sh coredns, static): the cluster DNS
#   atoll.lab/busybox:1            Debian's busybox-static (one static program: sh, nc,
#                                  nslookup, wget, httpd, ...), for the lab's own test pods
#   docker.io/library/atoll:<v>    Atoll's own image (`make image`, target/image), when built
#
# Each image is one layer FROM scratch, put together with crane against its own in-memory
# registry on 127.0.0.1 (as hack/image.sh does for Atoll's own image).
#
#   hack/lab-images.sh build          build every archive that is missing
#   hack/lab-images.sh archives       the same, then print "<name> <archive>" for each image
#   hack/lab-images.sh pause-name     the sandbox image's name
set -euo pipefail
. "$(dirname "$0")/lib.sh"
IMAGES_DIR=$ATOLL_CACHE/lab-images
PAUSE_IMAGE=registry.k8s.io/pause:3.10.1
BUSYBOX_IMAGE=atoll.lab/busybox:1
COREDNS_IMAGE=registry.k8s.io/coredns/coredns:$COREDNS_VERSION

registry_port=
registry_start() {
  [ -n "$registry_port" ] && return 0
  registry_port=$((20000 + RANDOM % 10000))
  crane registry serve --address "127.0.0.1:$registry_port" >"$IMAGES_DIR/registry.log" 2>&1 &
  registry_pid=$!
  trap 'kill "$registry_pid" 2>/dev/null || true' EXIT
  for _ in $(seq 50); do
    { exec 3<>"/dev/tcp/127.0.0.1/$registry_port"; } 2>/dev/null && { exec 3<&- 3>&-; return 0; }
    sleep 0.1
  done
  die "crane registry did not start on 127.0.0.1:$registry_port"
}

# Packs directory $2 as the single layer of image $1 into $3; $4 says whether the rest is the
# image's entrypoint or its command (args given to a container replace the command only).
pack() { # name rootfs archive entrypoint|cmd program...
  local name=$1 rootfs=$2 archive=$3 kind=$4 work ref; shift 4
  work=$(mktemp -d "$IMAGES_DIR/work.XXXXXX")
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$rootfs" -cf "$work/layer.tar" .
  registry_start
  ref=127.0.0.1:$registry_port/$(tr '/:' '--' <<<"$name"):latest
  {
    crane append --insecure --oci-empty-base --platform linux/amd64 -f "$work/layer.tar" -t "$ref"
    crane mutate --insecure "$ref" -t "$ref" "--$kind" "$(IFS=,; echo "$*")" --set-platform linux/amd64
    crane pull --insecure --format oci "$ref" "$work/layout"
  } >"$work/crane.log" 2>&1 || { cat "$work/crane.log" >&2; die "assembling $name failed"; }
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$work/layout" -cf "$archive.tmp" .
  mv "$archive.tmp" "$archive"
  rm -rf "$work"
  log "image $name: $archive ($(du -h "$archive" | cut -f1))"
}

recipe_hash() { cat "$@" | sha256sum | cut -c1-12; }

build_pause() {
  local archive rootfs
  archive=$IMAGES_DIR/pause-$(recipe_hash "$HACK_DIR/images/pause.c" "$0").oci.tar
  [ -s "$archive" ] || {
    rootfs=$(mktemp -d "$IMAGES_DIR/rootfs.XXXXXX")
    gcc -O2 -static -s -o "$rootfs/pause" "$HACK_DIR/images/pause.c"
    pack "$PAUSE_IMAGE" "$rootfs" "$archive" entrypoint /pause
    rm -rf "$rootfs"
  }
  echo "$PAUSE_IMAGE $archive"
}

# The files of Debian package $1 (the version the archive offers), unpacked into $2; no
# maintainer script runs.
debian_files() { # package directory
  local tmp
  tmp=$(mktemp -d "$IMAGES_DIR/deb.XXXXXX")
  chmod 755 "$tmp" # apt downloads as its own user
  (cd "$tmp" && apt-get download -q "$1" >/dev/null 2>&1) ||
    { apt-get update -qq && (cd "$tmp" && apt-get download -q "$1" >/dev/null); }
  dpkg-deb -x "$tmp"/*.deb "$2"
  rm -rf "$tmp"
}

build_busybox() {
  local archive rootfs applet
  archive=$IMAGES_DIR/busybox-$(recipe_hash "$0").oci.tar
  [ -s "$archive" ] || {
    rootfs=$(mktemp -d "$IMAGES_DIR/rootfs.XXXXXX")
    debian_files busybox-static "$rootfs/deb"
    mkdir -p "$rootfs/bin" "$rootfs/tmp" "$rootfs/etc"
    install -m 0755 "$rootfs/deb/bin/busybox" "$rootfs/bin/busybox"
    rm -rf "$rootfs/deb"
    for applet in $("$rootfs/bin/busybox" --list); do
      [ -e "$rootfs/bin/$applet" ] || ln -s busybox "$rootfs/bin/$applet"
    done
    chmod 1777 "$rootfs/tmp"
    printf 'root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$rootfs/etc/passwd"
    printf 'root:x:0:\nnobody:x:65534:\n' >"$rootfs/etc/group"
    pack "$BUSYBOX_IMAGE" "$rootfs" "$archive" cmd /bin/sh
    rm -rf "$rootfs"
  }
  echo "$BUSYBOX_IMAGE $archive"
}

build_coredns() {
  local archive rootfs
  archive=$IMAGES_DIR/coredns-$COREDNS_VERSION-$(recipe_hash "$0" "$COREDNS_BIN/coredns").oci.tar
  [ -s "$archive" ] || {
    rootfs=$(mktemp -d "$IMAGES_DIR/rootfs.XXXXXX")
    install -m 0755 "$COREDNS_BIN/coredns" "$rootfs/coredns"
    pack "$COREDNS_IMAGE" "$rootfs" "$archive" entrypoint /coredns
    rm -rf "$rootfs"
  }
  echo "$COREDNS_IMAGE $archive"
}

# Atoll's image, as `make image` left it (not built here: that is a release build of its own).
atoll_image() {
  local version archive
  version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$REPO_DIR/Cargo.toml" | head -1)
  archive=$REPO_DIR/target/image/atoll-$version.oci.tar
  [ -s "$archive" ] && echo "docker.io/library/atoll:$version $archive"
  return 0
}

mkdir -p "$IMAGES_DIR"
case ${1:-build} in
  pause-name) echo "$PAUSE_IMAGE" ;;
  build | archives)
    "$HACK_DIR/build-tools.sh" crane coredns >/dev/null
    require gcc crane tar dpkg-deb
    list=$(build_pause && build_busybox && build_coredns && atoll_image)
    [ "$1" = build ] || echo "$list"
    ;;
  *) die "usage: $0 build|archives|pause-name" ;;
esac
