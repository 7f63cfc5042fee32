#!/usr/bin/env bash
# What a change costs where only the CPU decides: the offer layer's
# allocation cycle (offers/benches/allocation_cycle.rs) and the controller
# benchmark (cli/benches/controller.rs) of two revisions, run in turn
# (base, head, base, head, ...) RUNS times each, so that both see the same
# machine. Prints every run's figures, the 1-minute load average
# (/proc/loadavg) before and after every run, the medians of each side and
# head/base, as Markdown.
#
#   cli/benches/compare-cost.sh BASE [HEAD]      # HEAD defaults to HEAD
#
# Builds: each revision's bench binaries (`cargo bench --no-run`, release,
# at nice 19) in its own git worktree under a temp dir, removed on exit.
# CARGO_TARGET_DIR is shared by both builds if set (only the crates that
# changed are rebuilt); the binaries are copied out after each build into
# TARGET/compare/COMMIT/ and taken from there by later runs of this script
# and of compare-apiserver.sh (delete that folder to build again).
#
# Each side's controller benchmark runs its own revision's `mpiswarm`: the
# benchmark starts the binary whose path cargo built into it
# (TARGET/release/mpiswarm, the same for both revisions), so before each
# controller run that path holds the side's copy; what was there is put
# back on exit.
#
# Sizes (environment):
#   MPISWARM_COST_RUNS            runs a side (default 5)
#   MPISWARM_COST_ONLY            alloc or controller: measure only that one
#   MPISWARM_BENCH_SIZES          the allocation cycle's agent counts
#                                 (default 1000,2000,5000,10000; each with
#                                 100 and 1,000 frameworks)
#   MPISWARM_COST_CRITERION       criterion's flags (default
#                                 --warm-up-time 1 --measurement-time 5)
#   MPISWARM_BENCH_JOBS           the controller's throughput jobs (default here 2000)
#   MPISWARM_BENCH_STORED         the controller's stored jobs (default here 5000)
# Windows (environment):
#   MPISWARM_BENCH_QUIET_FILE=F   start a run only while F holds a Unix time
#                                 (the end of a quiet window) that leaves room
#                                 for it (the longest run of its kind so far
#                                 plus 20 s; a guess before the first);
#                                 otherwise wait, looking every 30 s. A run
#                                 that outlived its window is marked so.
#   MPISWARM_BENCH_DEADLINE=T     start no run that would end after Unix
#                                 time T; report what was measured.
set -euo pipefail
shopt -s inherit_errexit

# The 1-, 5- and 15-minute load averages.
load() { cut -d' ' -f1-3 /proc/loadavg; }

# The end of the quiet window (Unix time), 0 when there is none.
window_end() {
    local end
    end=$(cat "$MPISWARM_BENCH_QUIET_FILE" 2>/dev/null || true)
    [[ $end =~ ^[0-9]+$ ]] && echo "$end" || echo 0
}

# Returns once a run of NEED seconds may start (see the header); fails
# when MPISWARM_BENCH_DEADLINE leaves no room for it.
quiet_wait() {
    local need=$1 said=""
    while :; do
        local now
        now=$(date +%s)
        if [ -n "${MPISWARM_BENCH_DEADLINE:-}" ] && ((now + need > MPISWARM_BENCH_DEADLINE)); then
            echo "compare: no room for a run of ${need} s before the deadline $(date -u -d "@$MPISWARM_BENCH_DEADLINE" +%H:%M:%S)" >&2
            return 1
        fi
        if [ -z "${MPISWARM_BENCH_QUIET_FILE:-}" ] || (($(window_end) >= now + need)); then
            return 0
        fi
        if [ -z "$said" ]; then
            echo "compare: waiting for a quiet window of ${need} s ($MPISWARM_BENCH_QUIET_FILE), looking every 30 s" >&2
            said=1
        fi
        sleep 30
    done
}

# "yes" if the quiet window (if one is asked for) is still open.
in_window() {
    if [ -z "${MPISWARM_BENCH_QUIET_FILE:-}" ] || (($(window_end) >= $(date +%s))); then
        echo yes
    else
        echo no
    fi
}

# Builds REV's bench binaries (allocation_cycle, controller and the
# `mpiswarm` binary the latter runs) in a worktree under WORK with the
# target directory TARGET, unless TARGET/compare/COMMIT has them; prints
# that folder.
build_side() {
    local rev=$1 work=$2 target=$3 repo sha dir
    repo=$(git rev-parse --show-toplevel)
    sha=$(git -C "$repo" rev-parse "$rev^{commit}")
    dir=$target/compare/$sha
    if [ -x "$dir/mpiswarm" ] && [ -x "$dir/controller" ] && [ -x "$dir/allocation_cycle" ]; then
        echo "compare: $rev ($sha): binaries from $dir" >&2
        echo "$dir"
        return
    fi
    git -C "$repo" worktree add --detach "$work/wt-$sha" "$sha" >/dev/null
    (cd "$work/wt-$sha" && CARGO_TARGET_DIR="$target" nice -n 19 cargo bench --no-run --locked \
        -p mpiswarm-offers -p mpiswarm --bench allocation_cycle --bench controller \
        --message-format=json-render-diagnostics >"$work/build-$sha.json")
    rm -rf "$dir.tmp"
    mkdir -p "$dir.tmp"
    python3 - "$work/build-$sha.json" "$dir.tmp" <<'EOF'
import json, shutil, sys
wanted = {("bench", "allocation_cycle"), ("bench", "controller"), ("bin", "mpiswarm")}
found = set()
for line in open(sys.argv[1]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") != "compiler-artifact" or not m.get("executable"):
        continue
    for kind in m["target"]["kind"]:
        key = (kind, m["target"]["name"])
        if key in wanted:
            shutil.copy2(m["executable"], f"{sys.argv[2]}/{key[1]}")
            found.add(key)
if found != wanted:
    sys.exit(f"the build made no {sorted(wanted - found)}")
EOF
    rm -rf "$dir"
    mv "$dir.tmp" "$dir"
    echo "$dir"
}

# Sourced (by compare-apiserver.sh): the functions only.
if [[ "${BASH_SOURCE[0]}" != "$0" ]]; then
    return 0
fi

base=${1:?usage: $0 BASE_REVISION [HEAD_REVISION]}
head=${2:-HEAD}
repo=$(git rev-parse --show-toplevel)
work=$(mktemp -d /tmp/mpiswarm-cost.XXXXXX)
target=$(realpath -m "${CARGO_TARGET_DIR:-$work/target}")
runs=${MPISWARM_COST_RUNS:-5}
only=${MPISWARM_COST_ONLY:-}
criterion=${MPISWARM_COST_CRITERION:---warm-up-time 1 --measurement-time 5}
export MPISWARM_BENCH_JOBS=${MPISWARM_BENCH_JOBS:-2000}
export MPISWARM_BENCH_STORED=${MPISWARM_BENCH_STORED:-5000}
baked=$target/release/mpiswarm
saved=$work/release-mpiswarm.saved
cleanup() {
    if [ -e "$saved" ] || [ -L "$saved" ]; then
        rm -f "$baked"
        mv "$saved" "$baked"
    fi
    for wt in "$work"/wt-*; do
        [ -d "$wt" ] && git -C "$repo" worktree remove --force "$wt" 2>/dev/null || true
    done
}
trap cleanup EXIT

declare -A bins short
for side in base head; do
    rev=$base
    [ "$side" = head ] && rev=$head
    short[$side]=$(git -C "$repo" rev-parse --short "$rev")
    bins[$side]=$(build_side "$rev" "$work" "$target")
done
grep -qaF "$baked" "${bins[base]}/controller" || {
    echo "compare: the controller benchmark does not run $baked; is CARGO_TARGET_DIR the one it was built with?" >&2
    exit 1
}
if [ -e "$baked" ] || [ -L "$baked" ]; then
    mv "$baked" "$saved"
fi
mkdir -p "$(dirname "$baked")"

results=$work/results.tsv
: >"$results"
declare -A longest=([alloc]=90 [controller]=150)

failed() {
    echo "compare: a benchmark failed; the end of its output ($1):" >&2
    tail -n 30 "$1" >&2
    exit 1
}

# One run: KIND SIDE N. Appends "run KIND SIDE N start seconds load-before
# load-after in-window" and the run's figures ("fig KIND SIDE N name value").
run() {
    local kind=$1 side=$2 n=$3 dir=${bins[$2]} log=$work/$1-$2-$3.log
    quiet_wait $((longest[$kind] + 20)) || return 1
    local before start t0 secs
    before=$(load)
    start=$(date -u +%H:%M:%S)
    t0=$(date +%s)
    echo "compare: $kind $side ${short[$side]} run $n at $start (load $before)" >&2
    case $kind in
        alloc)
            # shellcheck disable=SC2086 # criterion's flags, one word each
            CRITERION_HOME=$work/criterion-$side "$dir/allocation_cycle" --bench --noplot $criterion >"$log" 2>&1 ||
                failed "$log"
            python3 - "$work/criterion-$side/allocation_cycle" "$side" "$n" >>"$results" <<'EOF'
import json, os, sys
root, side, n = sys.argv[1:]
for bench in sorted(os.listdir(root)):
    path = os.path.join(root, bench, "new", "estimates.json")
    if not os.path.exists(path):
        continue
    e = json.load(open(path))
    # What criterion prints: the slope, or the mean where sampling is flat.
    est = (e.get("slope") or e["mean"])["point_estimate"]
    print(f"fig\talloc\t{side}\t{n}\t{bench}\t{est / 1e6:.4f}")
EOF
            ;;
        controller)
            rm -f "$baked"
            cp "$dir/mpiswarm" "$baked"
            "$dir/controller" --bench >"$log" 2>&1 || failed "$log"
            python3 - "$log" "$side" "$n" >>"$results" <<'EOF'
import re, sys
log, side, n = sys.argv[1:]
text = open(log).read()
pats = {
    "scheduled_s": r"all Scheduled after ([\d.]+) s",
    "jobs_per_s": r"s: (\d+) jobs/s",
    "rss_after_throughput_mib": r"RSS after it: (\d+) MiB",
    "stored_reconciled_s": r"reconciled them in ([\d.]+) s",
    "stored_rss_mib": r"reconciled them in [\d.]+ s[^;]*; RSS (\d+) MiB",
    "stored_rss_peak_mib": r"reconciled them in .*peak (\d+) MiB",
}
for name, pat in pats.items():
    m = re.search(pat, text)
    if m:
        print(f"fig\tcontroller\t{side}\t{n}\t{name}\t{m.group(1)}")
if "NOT all" in text:
    print(f"fig\tcontroller\t{side}\t{n}\tincomplete\t1")
EOF
            ;;
    esac
    secs=$(($(date +%s) - t0))
    ((secs > longest[$kind])) && longest[$kind]=$secs
    printf 'run\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$kind" "$side" "$n" "$start" "$secs" "$before" "$(load)" \
        "$(in_window)" >>"$results"
}

kinds="alloc controller"
[ -n "$only" ] && kinds=$only
echo "compare: $runs runs a side of: $kinds; sizes ${MPISWARM_BENCH_SIZES:-1000,2000,5000,10000}, criterion $criterion;" \
    "controller jobs $MPISWARM_BENCH_JOBS, stored $MPISWARM_BENCH_STORED" >&2
stopped=""
for n in $(seq "$runs"); do
    for kind in $kinds; do
        for side in base head; do
            run "$kind" "$side" "$n" || stopped=1
            [ -n "$stopped" ] && break 3
        done
    done
done

python3 - "$results" "base ${short[base]}" "head ${short[head]}" "$runs" <<'EOF'
import statistics, sys
path, base_name, head_name, runs = sys.argv[1:]
figs, meta = {}, []
for line in open(path):
    f = line.rstrip("\n").split("\t")
    if f[0] == "fig":
        figs.setdefault((f[1], f[4]), {}).setdefault(f[2], []).append((int(f[3]), float(f[5])))
    else:
        meta.append(f[1:])
names = {"base": base_name, "head": head_name}
print(f"\n### Runs (asked for {runs} a side)\n")
print("| benchmark | side | run | start (UTC) | s | load before (1/5/15 min) | load after | in the quiet window |")
print("|---|---|---|---|---|---|---|---|")
for kind, side, n, start, secs, before, after, inside in meta:
    print(f"| {kind} | {names[side]} | {n} | {start} | {secs} | {before} | {after} | {inside} |")
units = {"alloc": "ms"}
for kind, title in (("alloc", "Allocation cycle (criterion's estimate, ms a cycle)"), ("controller", "Controller")):
    keys = [k for k in figs if k[0] == kind]
    if not keys:
        continue
    print(f"\n### {title}\n")
    print(f"| figure | {base_name}: runs | median | {head_name}: runs | median | head/base |")
    print("|---|---|---|---|---|---|")
    for key in sorted(keys):
        cells = []
        med = {}
        for side in ("base", "head"):
            vals = [v for _, v in sorted(figs[key].get(side, []))]
            med[side] = statistics.median(vals) if vals else float("nan")
            cells += [", ".join(f"{v:g}" for v in vals) or "-", f"{med[side]:g}"]
        ratio = med["head"] / med["base"] if med["base"] else float("nan")
        print(f"| {key[1]} | {' | '.join(cells)} | {ratio:.3f} |")
EOF
if [ -n "$stopped" ]; then
    echo "compare: stopped early (deadline); the tables hold the runs made" >&2
fi
