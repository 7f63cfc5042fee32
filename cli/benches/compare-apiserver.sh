#!/usr/bin/env bash
# Reads under writes, two revisions side by side: builds each revision's
# mpiswarm binary (release) in its own git worktree, then runs
# cli/benches/reads_under_writes.rs from this checkout against both binaries
# (each as `mpiswarm apiserver`),
# round by round (base, head, base, head, ...), so both see the same machine.
#
#   cli/benches/compare-apiserver.sh BASE [HEAD]      # HEAD defaults to HEAD
#
# MPISWARM_BENCH_ROUNDS and MPISWARM_BENCH_SECONDS size the run (see the
# bench's header). CARGO_TARGET_DIR is shared by both builds if set (only the
# crates that changed are rebuilt); the binaries are copied out after
# each build. The worktrees are removed on exit.
set -euo pipefail
base=${1:?usage: $0 BASE_REVISION [HEAD_REVISION]}
head=${2:-HEAD}
repo=$(git rev-parse --show-toplevel)
work=$(mktemp -d /tmp/mpiswarm-compare.XXXXXX)
target=${CARGO_TARGET_DIR:-$work/target}
cleanup() {
    for side in base head; do
        git -C "$repo" worktree remove --force "$work/$side" 2>/dev/null || true
    done
}
trap cleanup EXIT
servers=""
for side in base head; do
    rev=$base
    [ "$side" = head ] && rev=$head
    short=$(git -C "$repo" rev-parse --short "$rev")
    git -C "$repo" worktree add --detach "$work/$side" "$rev" >/dev/null
    (cd "$work/$side" && CARGO_TARGET_DIR="$target" cargo build --release --locked -p mpiswarm --bin mpiswarm)
    cp "$target/release/mpiswarm" "$work/$side.bin"
    servers="$servers${servers:+,}$side $short=$work/$side.bin"
done
cd "$repo"
MPISWARM_BENCH_SERVERS="$servers" CARGO_TARGET_DIR="$target" \
    cargo bench --locked -p mpiswarm --bench reads_under_writes
