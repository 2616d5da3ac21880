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
#   docker.io/alpine/socat:1.7.4.4 what the upstream suite's echo pods run: busybox (grep, awk,
#                                  tr, ...), Debian's dash as /bin/sh and socat 1.7.4.4, with
#                                  their libraries
#   docker.io/nicolaka/netshoot:v0.15  the suite's request pod: busybox, and Debian's dash as
#                                  /bin/sh, nslookup and dig (bind9-dnsutils) and nc
#                                  (netcat-openbsd), with their libraries
#   atoll.lab/echo:1               the lab's own echo pods: as alpine/socat
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
SOCAT_IMAGE=docker.io/alpine/socat:1.7.4.4
NETSHOOT_IMAGE=docker.io/nicolaka/netshoot:v0.15
ECHO_IMAGE=atoll.lab/echo:1
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

# Debian's busybox-static into $1/bin: one static program, every applet a link to it.
busybox_into() { # rootfs
  local rootfs=$1 applet
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
}

# Debian's dash as /bin/sh: busybox's own shell runs its applets before anything on PATH
# (nc -v would be busybox's nc, which has no -v), dash runs what PATH finds.
dash_as_sh() { # rootfs
  debian_programs_into "$1" dash=/usr/bin/dash
  ln -sfn /usr/bin/dash "$1/bin/sh"
}

# Programs of this machine's Debian packages into $1/usr/bin (under the name given), with the
# shared libraries and loader they link (as ldd lists them, at the same paths): /usr/bin comes
# before busybox's /bin in a container's PATH.
debian_programs_into() { # rootfs name=path...
  local rootfs=$1 entry name path lib; shift
  mkdir -p "$rootfs/usr/bin"
  for entry in "$@"; do
    name=${entry%%=*} path=$(readlink -f "${entry#*=}")
    [ -x "$path" ] || die "$path is missing (hack/setup.sh installs it)"
    # (merged /usr: a package may list it under /bin)
    dpkg -S "$path" >/dev/null 2>&1 || dpkg -S "${path#/usr}" >/dev/null 2>&1 ||
      die "$path is not a Debian package's file"
    install -m 0755 "$path" "$rootfs/usr/bin/$name"
    for lib in $(ldd "$path" | grep -o '/[^ ]*'); do
      mkdir -p "$rootfs$(dirname "$lib")"
      cp -L "$lib" "$rootfs$lib"
    done
  done
}

build_busybox() {
  local archive rootfs
  archive=$IMAGES_DIR/busybox-$(recipe_hash "$0").oci.tar
  [ -s "$archive" ] || {
    rootfs=$(mktemp -d "$IMAGES_DIR/rootfs.XXXXXX")
    busybox_into "$rootfs"
    pack "$BUSYBOX_IMAGE" "$rootfs" "$archive" cmd /bin/sh
    rm -rf "$rootfs"
  }
  echo "$BUSYBOX_IMAGE $archive"
}

# socat as alpine/socat has it: the entrypoint (the suite overrides it with /bin/sh).
build_socat() { # name archive-prefix
  local archive rootfs
  archive=$IMAGES_DIR/$2-$(recipe_hash "$0" /usr/bin/socat).oci.tar
  [ -s "$archive" ] || {
    rootfs=$(mktemp -d "$IMAGES_DIR/rootfs.XXXXXX")
    busybox_into "$rootfs"
    debian_programs_into "$rootfs" socat=/usr/bin/socat
    dash_as_sh "$rootfs"
    pack "$1" "$rootfs" "$archive" entrypoint /usr/bin/socat
    rm -rf "$rootfs"
  }
  echo "$1 $archive"
}

build_netshoot() {
  local archive rootfs
  archive=$IMAGES_DIR/netshoot-$(recipe_hash "$0" "$(command -v nslookup)" "$(command -v dig)" "$(command -v nc)").oci.tar
  [ -s "$archive" ] || {
    rootfs=$(mktemp -d "$IMAGES_DIR/rootfs.XXXXXX")
    busybox_into "$rootfs"
    debian_programs_into "$rootfs" nslookup="$(command -v nslookup)" dig="$(command -v dig)" nc="$(command -v nc)"
    dash_as_sh "$rootfs"
    pack "$NETSHOOT_IMAGE" "$rootfs" "$archive" cmd /bin/sh
    rm -rf "$rootfs"
  }
  echo "$NETSHOOT_IMAGE $archive"
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
    require gcc crane tar dpkg-deb ldd socat nslookup dig nc
    list=$(build_pause && build_busybox && build_socat "$SOCAT_IMAGE" socat &&
      build_socat "$ECHO_IMAGE" echo && build_netshoot && build_coredns && atoll_image)
    # Archives of earlier recipes go; so do the work directories of an interrupted run.
    for f in "$IMAGES_DIR"/*.oci.tar "$IMAGES_DIR"/rootfs.* "$IMAGES_DIR"/work.* "$IMAGES_DIR"/deb.*; do
      [ -e "$f" ] && ! grep -qF " $f" <<<"$list" && rm -rf "$f"
    done
    [ "$1" = build ] || echo "$list"
    ;;
  *) die "usage: $0 build|archives|pause-name" ;;
esac
