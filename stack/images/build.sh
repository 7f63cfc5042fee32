#!/bin/bash
# Builds the rank image mpiswarm/openmpi:<version> with no registry:
#   1. debootstrap two bookworm rootfs (runtime, and builder = runtime + gcc and
#      libopenmpi-dev), each kept as a tarball under the cache directory;
#   2. `docker import` each tarball as mpiswarm/rootfs:<flavour>-<key>;
#   3. `docker build` the Dockerfile here, which compiles pi.c in the builder
#      and copies it into the runtime.
# Caching: the image carries the hash of every input in the label
# mpiswarm.io/inputs; when the existing image has the same hash nothing is done.
# Rootfs tarballs are keyed by suite, mirror and package list, so a new CI run
# on this machine reuses them while a fresh machine builds them.
#
# usage: build.sh [--force] [--node | --mpich | --mpiswarm BINARY] VERSION
#   --mpich builds mpiswarm/debian-mpich:trixie instead: stock Debian trixie with
#   mpich and openssh-server and nothing of mpiswarm's but the example
#   program pi (pi.c compiled against MPICH in a builder rootfs, the binary
#   only in the image: the Dockerfile's stage pi), for MPICH jobs
#   (examples/mpich.yaml).
#   --node builds mpiswarm/node:<version> instead: a Docker engine to run as a
#   swarm node in a container (docker.io, iptables, iproute2, procps).
#   --mpiswarm BINARY builds mpiswarm/mpiswarm:<version> instead: the runtime
#   rootfs of the rank image plus BINARY as /usr/local/bin/mpiswarm (its
#   entrypoint), for the manifests' Deployment and the agents' stack file.
# env:   MPISWARM_CACHE_DIR (default /var/cache/mpiswarm)
#        MPISWARM_DEBIAN_MIRROR (default http://deb.debian.org/debian)
#        MPISWARM_IMAGES_OFFLINE=1: never reach the mirror; fail if a rootfs
#          is not cached (tests use this: they talk to loopback only)
set -euo pipefail

version= force= what=rank binary=
while [ $# -gt 0 ]; do
    case "$1" in
        --force) force=--force ;;
        --node) what=node ;;
        --mpich) what=mpich ;;
        --mpiswarm) what=mpiswarm; binary=${2:-}; shift ;;
        -*) echo "build.sh: unknown option $1" >&2; exit 64 ;;
        *) version=$1 ;;
    esac
    shift
done
[ -n "$version" ] || { echo "usage: build.sh [--force] [--node | --mpich | --mpiswarm BINARY] VERSION" >&2; exit 64; }
here=$(cd "$(dirname "$0")" && pwd)
cache=${MPISWARM_CACHE_DIR:-/var/cache/mpiswarm}
mirror=${MPISWARM_DEBIAN_MIRROR:-http://deb.debian.org/debian}
suite=bookworm
image=mpiswarm/openmpi:${version}
node_image=mpiswarm/node:${version}
mpiswarm_image=mpiswarm/mpiswarm:${version}
stock_image=mpiswarm/debian-openmpi:bookworm
# MPICH comes from trixie: bookworm's MPICH 4.0.2 with UCX 1.13 deadlocks in
# MPI_Finalize across two nodes in about half the runs (stack/images/README.md).
mpich_suite=trixie
mpich_image=mpiswarm/debian-mpich:${mpich_suite}

runtime_packages=openmpi-bin,openssh-server,openssh-client,iproute2,procps,hpcc,ca-certificates
# libopenmpi-dev needs automake through libltdl-dev, which debootstrap does not resolve.
builder_packages=${runtime_packages},gcc,libc6-dev,libopenmpi-dev,automake
node_packages=docker.io,iptables,iproute2,procps,ca-certificates
# Debian's MPICH (trixie's 4.2.1 on UCX 1.18, Hydra's mpiexec and hydra_pmi_proxy) in place of
# Open MPI; libmpich-dev brings mpicc (and, by its dependencies, g++ and
# gfortran) to the builder only; automake as above for libltdl-dev.
mpich_runtime_packages=mpich,openssh-server,openssh-client,iproute2,procps,ca-certificates
mpich_builder_packages=${mpich_runtime_packages},gcc,libc6-dev,libmpich-dev,automake

log() { echo "images: $*" >&2; }

# The rank bootstrap mpiswarm-rank has its one home in the controller, which
# ships it with every task (controller/mpiswarm-rank); the image carries it
# too. `mpiswarm images build` writes it beside this script; run from a
# checkout, the script stages this directory and the controller's copy in a
# temporary directory, so both ways hash and build the same files.
temporary=()
trap 'rm -rf "${temporary[@]}"' EXIT
if [ ! -f "$here/mpiswarm-rank" ]; then
    bootstrap=$here/../../controller/mpiswarm-rank
    [ -f "$bootstrap" ] || { log "no mpiswarm-rank beside $here/build.sh nor at $bootstrap: run \`mpiswarm images build\`, or this script from a checkout"; exit 1; }
    staged=$(mktemp -d)
    temporary+=("$staged")
    cp "$here"/* "$staged/"
    cp "$bootstrap" "$staged/mpiswarm-rank"
    here=$staged
fi

inputs_hash() {
    (
        cd "$here"
        printf '%s\n' "$version" "$suite" "$mpich_suite" "$mirror" "$runtime_packages" "$builder_packages" "$node_packages" \
            "$mpich_runtime_packages" "$mpich_builder_packages"
        sha256sum build.sh Dockerfile pi.c mpiswarm-rank mpiswarm-hpcc mpiswarm-node sshd-mpiswarm.conf ssh-mpiswarm.conf hpccinf.txt
    ) | sha256sum | cut -c1-16
}

image_label() {
    docker image inspect -f '{{ index .Config.Labels "mpiswarm.io/inputs" }}' "$1" 2>/dev/null || true
}

# rootfs FLAVOUR PACKAGES [SUITE] -> prints the image name of that rootfs
# (of Debian SUITE, by default $suite)
rootfs() {
    local flavour=$1 packages=$2 suite=${3:-$suite}
    local key
    key=$(printf '%s\n' "$suite" "$mirror" "$packages" | sha256sum | cut -c1-16)
    local name=mpiswarm/rootfs:${flavour}-${key}
    if docker image inspect "$name" >/dev/null 2>&1; then
        log "rootfs $name present"
        echo "$name"
        return
    fi
    local tarball=$cache/rootfs-${flavour}-${key}.tar
    if [ ! -s "$tarball" ]; then
        if [ "${MPISWARM_IMAGES_OFFLINE:-}" = 1 ]; then
            log "rootfs $tarball is not cached and MPISWARM_IMAGES_OFFLINE=1: run \`mpiswarm images build\` first (it needs the Debian mirror)"
            exit 1
        fi
        command -v debootstrap >/dev/null || { log "debootstrap is not installed (apt-get install debootstrap)"; exit 1; }
        mkdir -p "$cache/debs"
        local root
        root=$(mktemp -d "$cache/root-${flavour}.XXXXXX")
        log "debootstrap $suite ($flavour) into $root"
        debootstrap --variant=minbase --cache-dir="$cache/debs" --include="$packages" \
            "$suite" "$root" "$mirror" >&2
        # Shrink: package lists and the apt cache are useless in a rank.
        chroot "$root" apt-get clean
        rm -rf "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/*
        tar -C "$root" --numeric-owner -cf "$tarball.partial" .
        mv "$tarball.partial" "$tarball"
        rm -rf "$root"
    else
        log "reusing $tarball"
    fi
    docker import -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        -c "LABEL mpiswarm.io/rootfs=${flavour}-${key}" "$tarball" "$name" >/dev/null
    log "imported $name"
    echo "$name"
}

# up_to_date IMAGE: unless --force, prints IMAGE and stops when it carries
# the current inputs hash.
up_to_date() {
    if [ "$force" != "--force" ] && [ "$(image_label "$1")" = "$hash" ]; then
        log "$1 is up to date (inputs $hash)"
        echo "$1"
        exit 0
    fi
}

hash=$(inputs_hash)
if [ "$what" = node ]; then
    up_to_date "$node_image"
    base=$(rootfs node "$node_packages")
    # The engine starts through mpiswarm-node (overlay2 on a volume, the
    # node's cgroup as parent); see that script for why.
    context=$(mktemp -d)
    cp "$here/mpiswarm-node" "$context/"
    printf 'FROM %s\nCOPY mpiswarm-node /usr/local/bin/mpiswarm-node\nENTRYPOINT ["/bin/sh", "/usr/local/bin/mpiswarm-node"]\n' "$base" \
        >"$context/Dockerfile"
    DOCKER_BUILDKIT=0 docker build -q --label "mpiswarm.io/inputs=$hash" \
        --label "mpiswarm.io/component=node-image" -t "$node_image" "$context" >&2
    rm -rf "$context"
    echo "$node_image"
    exit 0
fi
if [ "$what" = mpich ]; then
    up_to_date "$mpich_image"
    mpich_runtime=$(rootfs mpich-runtime "$mpich_runtime_packages" "$mpich_suite")
    mpich_builder=$(rootfs mpich-builder "$mpich_builder_packages" "$mpich_suite")
    log "building $mpich_image (inputs $hash)"
    # Only the stage pi: MPICH's runtime and the program, nothing of the rank image.
    DOCKER_BUILDKIT=0 docker build -q --target pi \
        --build-arg "BUILDER=$mpich_builder" --build-arg "RUNTIME=$mpich_runtime" \
        --label "mpiswarm.io/inputs=$hash" --label "mpiswarm.io/component=mpich-image" \
        -t "$mpich_image" "$here" >&2
    echo "$mpich_image"
    exit 0
fi
if [ "$what" = mpiswarm ]; then
    [ -f "$binary" ] || { log "--mpiswarm needs the mpiswarm binary to copy; '$binary' is no file"; exit 64; }
    # The binary is an input too: a rebuilt binary makes a new image.
    hash=$( (echo "$hash"; sha256sum <"$binary") | sha256sum | cut -c1-16)
    up_to_date "$mpiswarm_image"
    # The rank image's runtime rootfs: cached already, glibc and CA
    # certificates as the binary needs them, nothing to debootstrap anew.
    base=$(rootfs runtime "$runtime_packages")
    context=$(mktemp -d)
    temporary+=("$context")
    cp "$binary" "$context/mpiswarm"
    chmod 755 "$context/mpiswarm"
    # Debug symbols are most of a debug build; the image does not need them.
    if command -v strip >/dev/null; then strip --strip-debug "$context/mpiswarm" || true; fi
    printf 'FROM %s\nCOPY mpiswarm /usr/local/bin/mpiswarm\nENTRYPOINT ["/usr/local/bin/mpiswarm"]\nCMD ["--help"]\n' "$base" \
        >"$context/Dockerfile"
    log "building $mpiswarm_image from $binary (inputs $hash)"
    DOCKER_BUILDKIT=0 docker build -q --label "mpiswarm.io/inputs=$hash" \
        --label "mpiswarm.io/component=mpiswarm-image" -t "$mpiswarm_image" "$context" >&2
    echo "$mpiswarm_image"
    exit 0
fi
runtime=$(rootfs runtime "$runtime_packages")
# The runtime rootfs as it is, tagged for users: a stock Debian image with
# Open MPI and sshd and nothing of mpiswarm's. Any image like it runs as an
# MpiJob, because the controller ships the rank bootstrap with every task
# (examples/stock-image.yaml).
docker tag "$runtime" "$stock_image"
up_to_date "$image"

builder=$(rootfs builder "$builder_packages")
log "building $image (inputs $hash)"
DOCKER_BUILDKIT=0 docker build -q \
    --build-arg "BUILDER=$builder" --build-arg "RUNTIME=$runtime" \
    --label "mpiswarm.io/inputs=$hash" --label "mpiswarm.io/component=rank-image" \
    -t "$image" "$here" >&2
echo "$image"
