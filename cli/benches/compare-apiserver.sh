#!/usr/bin/env bash
# Reads under writes, two revisions side by side: builds each revision's
# mpiswarm binary (release) in its own git worktree, then runs
# cli/benches/reads_under_writes.rs from this checkout against both binaries
# (each as `mpiswarm apiserver`),
# round by round (base, head, base, head, ...), so both see the same machine.
#
#   cli/benches/compare-apiserver.sh BASE [HEAD]      # HEAD defaults to HEAD
#
# Who reads and writes: a revision whose API server takes
# `--token-auth-file` (and so checks every request by RBAC) runs as a
# tenant user that a Role and RoleBinding allow MpiJobs in the bench's
# namespaces, as `mpiswarm tenant add` makes one; the admin token's user
# (group system:masters) would skip the RBAC rules. A revision without the
# flag runs as the admin, as before (it has no RBAC). The bench prints who
# each server ran as (see its header; MPISWARM_BENCH_USER=admin runs both
# as the admin).
#
# MPISWARM_BENCH_ROUNDS and MPISWARM_BENCH_SECONDS size the run (see the
# bench's header). CARGO_TARGET_DIR is shared by both builds if set (only the
# crates that changed are rebuilt); the binaries are built and kept as
# compare-cost.sh keeps them (TARGET/compare/COMMIT/, reused when there;
# the builds run at nice 19). The worktrees are removed on exit.
# MPISWARM_BENCH_QUIET_FILE and MPISWARM_BENCH_DEADLINE hold the measurement
# back until a quiet window, as in compare-cost.sh; the load average before
# and after it is printed.
set -euo pipefail
# shellcheck source=cli/benches/compare-cost.sh
source "$(dirname "$0")/compare-cost.sh"
base=${1:?usage: $0 BASE_REVISION [HEAD_REVISION]}
head=${2:-HEAD}
repo=$(git rev-parse --show-toplevel)
work=$(mktemp -d /tmp/mpiswarm-compare.XXXXXX)
target=$(realpath -m "${CARGO_TARGET_DIR:-$work/target}")
cleanup() {
    rm -f "$work"/*.bin
    for wt in "$work"/wt-*; do
        [ -d "$wt" ] && git -C "$repo" worktree remove --force "$wt" 2>/dev/null || true
    done
}
trap cleanup EXIT
servers=""
for side in base head; do
    rev=$base
    [ "$side" = head ] && rev=$head
    short=$(git -C "$repo" rev-parse --short "$rev")
    dir=$(build_side "$rev" "$work" "$target")
    cp "$dir/mpiswarm" "$work/$side.bin"
    servers="$servers${servers:+,}$side $short=$work/$side.bin"
done
cd "$repo"
# The worktrees' builds of the same crates share TARGET; a bench file older
# than the last of them would pass for built. Build this checkout's bench,
# with the packages build_side names (so the same features: what is built
# there is not built again).
touch cli/benches/reads_under_writes.rs
packages=(-p mpiswarm-offers -p mpiswarm)
CARGO_TARGET_DIR="$target" nice -n 19 cargo bench --no-run --locked "${packages[@]}" --bench reads_under_writes
rounds=${MPISWARM_BENCH_ROUNDS:-3}
secs=${MPISWARM_BENCH_SECONDS:-5}
# Each round: two servers, each started, preloaded and read idle and loaded.
quiet_wait $((rounds * 2 * (2 * secs + 15) + 20))
echo "compare: load before $(load) at $(date -u +%H:%M:%S)" >&2
MPISWARM_BENCH_SERVERS="$servers" CARGO_TARGET_DIR="$target" \
    cargo bench --locked "${packages[@]}" --bench reads_under_writes
echo "compare: load after $(load) at $(date -u +%H:%M:%S); quiet window still open: $(in_window)" >&2
