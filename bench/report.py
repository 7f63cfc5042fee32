"""docs/benchmarks.md from one run's rows: tables whose every figure is
computed here from the CSVs' rows, each section naming the exact command
that produced it. The prose that does not depend on the figures lives in
bench/reading.md and is appended as is."""

import csv
import json
import os
import statistics

import burst
import placement

MESOS_18_CYCLE_S = 1.1  # Mesos 1.8, 10k agents x 1k frameworks (allocator benchmark)


class Runs:
    """OUT/runs.json: how each section's current CSV was made (exact
    command, binary, date, commit, minutes, load), so a page assembled from
    sections of different runs names each one's command."""

    def __init__(self, out_dir):
        self.path = os.path.join(out_dir, "runs.json")
        try:
            with open(self.path) as f:
                self.data = json.load(f)
        except (OSError, ValueError):
            self.data = {}

    def record(self, section, info):
        # Re-read first: another bench/run (another --only) may have recorded since.
        self.__init__(os.path.dirname(self.path))
        self.data[section] = info
        with open(self.path, "w") as f:
            json.dump(self.data, f, indent=2, sort_keys=True)
            f.write("\n")

    def all(self):
        return dict(self.data)


def how(meta, section):
    """The sentence naming the exact command of a section's figures."""
    r = meta.get("runs", {}).get(section)
    if not r:
        return "Command: unknown (no runs.json entry)."
    lo, med, hi = r["load"]
    return (
        f"Command: `{r['command']}` (binary: {r['binary']}), {r['date']}, commit {r['commit']}, "
        f"{r['minutes']} min; the 1-minute load average during it was {lo:.1f}–{hi:.1f} (median {med:.1f}) on "
        f"{os.cpu_count()} cpus." + (f" {r['note']}" if r.get("note") else "")
    )


def write_csv(path, rows):
    keys = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


def read_csv(path):
    """Rows of an earlier run's CSV, numbers as floats (ints where whole)."""
    if not os.path.exists(path):
        return []

    def value(v):
        try:
            f = float(v)
        except ValueError:
            return v
        return int(f) if f.is_integer() and "." not in v else f

    with open(path) as f:
        return [{k: value(v) for k, v in r.items()} for r in csv.DictReader(f)]


CSVS = ["placement.csv", "overhead.csv", "burst.csv", "scale-criterion.csv", "scale-controller.csv"]


def fmt(v, digits=3):
    if v == "" or v is None:
        return "–"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.{digits}g}" if abs(v) < 1 else f"{v:.{digits}f}".rstrip("0").rstrip(".")


def med_range(values, digits=3):
    values = [v for v in values if v != "" and v is not None]
    if not values:
        return "–"
    m = statistics.median(values)
    if len(values) == 1:
        return fmt(m, digits)
    return f"{fmt(m, digits)} ({fmt(min(values), digits)}–{fmt(max(values), digits)})"


def duration(s):
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.1f} µs"


def placement_section(meta, rows):
    out = [
        "## Placement: pack vs spread vs auto on real MPI (the Scylla result)",
        "",
        how(meta, "placement"),
        "",
        f"Setup: `{meta['up_command']}`, then "
        f"{meta['reps']} interleaved repetitions of {len(placement.CONFIGS)} MpiJobs (the order rotates every "
        "repetition), each Debian's `hpcc` over 4 ranks of "
        f"{meta['rank_cpus']} cpu and 256 MiB (`command: sh -c \"sed '6s/^[0-9]*/{meta['hpl_n']}/' "
        "/usr/share/mpiswarm/hpccinf.txt > /tmp/bench-hpccinf.txt && MPISWARM_HPCC_INPUT=/tmp/bench-hpccinf.txt "
        f"exec mpiswarm-hpcc\"`: the rank image's input with HPL's N = {meta['hpl_n']}), "
        f"`mpirunArgs: {' '.join(placement.MPIRUN_ARGS)}`. Raw rows: `docs/bench/placement.csv`; plot: "
        "`docs/bench/placement.png`.",
        "",
        "hpcc runs every kernel in one binary, so each run gives every class's figure, read from hpcc's own "
        "per-kernel result lines (its own timers): communication-bound **PTRANS_GBs** (parallel matrix transpose: "
        "every rank exchanges blocks with the others; ping-pong latency beside it), CPU-bound **StarDGEMM_Gflops** "
        "(every rank multiplies matrices at once; a rank's rate), memory-bound **StarSTREAM_Triad** (every rank "
        "streams at once; GB/s a rank). Median (min–max) over the repetitions.",
        "",
        "![placement](bench/placement.png)",
        "",
        "| config | policy applied | nodes (ranks a node) | PTRANS GB/s | ping-pong latency µs | StarDGEMM Gflop/s | "
        "StarSTREAM Triad GB/s | HPL Tflop/s | hpcc run s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for config, _, _ in placement.CONFIGS:
        rs = [r for r in rows if r["config"] == config]
        if not rs:
            continue
        shapes = sorted({f"{r['nodes']} ({r['ranks_per_node']})" for r in rs})
        applied = sorted({r["applied"] for r in rs})
        out.append(
            f"| {config} | {', '.join(applied)} | {', '.join(shapes)} | "
            f"{med_range([r['PTRANS_GBs'] for r in rs])} | {med_range([r['AvgPingPongLatency_usec'] for r in rs])} | "
            f"{med_range([r['StarDGEMM_Gflops'] for r in rs])} | {med_range([r['StarSTREAM_Triad'] for r in rs])} | "
            f"{med_range([r['HPL_Tflops'] for r in rs])} | {med_range([r['running_to_succeeded_s'] for r in rs])} |"
        )
    out += [
        "",
        "Per class: the faster of pack and spread (by median), the policy the profile asks for, and how far "
        "`auto`'s own runs land from the faster one (the goal is within 5%).",
        "",
        "| class | figure | pack | spread | faster | by | profile → policy | profile's policy faster? | auto "
        "(applied) | auto vs faster |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for v in placement.verdicts(rows):
        m = v["medians"]
        agrees = "yes" if v["winner"] == v["expected"] else "**no**"
        gap = v["auto_gap"]
        within = "as fast or faster" if gap <= 0 else "within 5%" if gap <= 0.05 else "**more than 5% slower**"
        out.append(
            f"| {v['class']} | {v['key']} | {fmt(m['pack'][0])} | {fmt(m['spread'][0])} | {v['winner']} | "
            f"×{v['ratio']:.2f} | {v['profile']} → {v['expected']} | {agrees} | {fmt(m[v['auto']][0])} "
            f"({v['auto_applied']}) | {-gap * 100:+.1f}% ({within}) |"
        )
    return out


def overhead_section(meta, rows):
    a = [r["total_s"] for r in rows if r["mode"] == "a"]
    b = [r["total_s"] for r in rows if r["mode"] == "b"]
    out = [
        "## Control-plane overhead: bare Swarm vs `kubectl apply`",
        "",
        how(meta, "overhead"),
        "",
        f"Setup: the same `{meta['up_command']}` stack; {meta['overhead_reps']} pairs, interleaved a b, b a, …. Workload: the rank image's `pi "
        "2000000` over 4 ranks of 0.2 cpu packed on one node: one worker service (4 slots, sshd) and one launcher "
        "service (`mpirun`), same image, limits, overlay, secret and config both ways. (a) a script runs "
        "`ssh-keygen`, `docker network create`, `docker secret create`, `docker config create`, `docker service "
        "create` (worker, launcher) against the manager, then polls `docker service ps` every 100 ms until the "
        "launcher's task is Complete; (b) `kubectl apply` of the MpiJob, then `kubectl wait "
        "--for=condition=Succeeded`. Raw rows: `docs/bench/overhead.csv`; plot: `docs/bench/overhead.png`.",
        "",
    ]
    if a and b:
        ma, mb = statistics.median(a), statistics.median(b)
        out += [
            "![overhead](bench/overhead.png)",
            "",
            "| | (a) bare Swarm | (b) mpiswarm | b/a | b−a |",
            "|---|---|---|---|---|",
            f"| start to end, s: median (min–max) | {med_range(a)} | {med_range(b)} | **{mb / ma:.2f}** "
            f"(goal ≤ 1.2) | **{mb - ma:+.2f} s** |",
            "",
            "Where (b)'s time goes, from the job's Events (`eventTime`, seconds after `kubectl apply` started), "
            "median (min–max):",
            "",
            "| step | Event | at | step took |",
            "|---|---|---|---|",
        ]
        steps = [
            ("accepted (validated, queued: waiting for an offer)", "Created"),
            ("offer + placement (status written)", "Scheduled"),
            ("launch (ACCEPT with LAUNCH_GROUP sent)", "Launching"),
            ("Swarm starts worker and launcher", "Running"),
            ("mpirun to exit, seen by the agent and the controller", "Succeeded"),
        ]
        brows = [r for r in rows if r["mode"] == "b"]
        prev = None
        for label, ev in steps:
            at = [r[ev] for r in brows if r.get(ev) not in ("", None)]
            took = [r[ev] - (r[prev] if prev else 0) for r in brows if r.get(ev) not in ("", None)
                    and (prev is None or r.get(prev) not in ("", None))]
            out.append(f"| {label} | {ev} | {med_range(at)} | {med_range(took)} |")
            prev = ev
        out.append(f"| `kubectl wait` returns | | {med_range(b)} | |")
    return out


def loads(rows):
    """The 1-minute load before and after each run, as `1.2 → 3.4, ...`."""
    return ", ".join(f"{r['load_before']:.1f} → {r['load_after']:.1f}" for r in rows)


def burst_section(meta, rows):
    a = [r for r in rows if r["mode"] == "a"]
    b = [r for r in rows if r["mode"] == "b"]
    jobs = rows[0]["jobs"] if rows else 0
    out = [
        f"## Burst: {jobs} small jobs at once, a bare-Swarm script vs one `kubectl apply`",
        "",
        how(meta, "burst"),
        "",
        f"Setup: `{meta.get('burst_up_command', '?')}`; {len(a)} run(s) each way (a then b, b then a on a next "
        f"repetition). Each job: pi `{burst.SAMPLES}` over {burst.RANKS} ranks of {burst.CPUS} cpu and a 0.1-cpu "
        "launcher. (a) a script keeps as many jobs going as each node's cpus hold (whole jobs), making each like "
        "the overhead section's (a), worker and launcher pinned to the node with the most room (as mpiswarm packs "
        f"these jobs), {burst.CREATORS} side by side; it polls one `docker service ps` of every running launcher "
        f"every {burst.POLL_S} s, removes an ended job's services at once (its worker's sshd holds its cpus until "
        "then) and makes a job whose launcher failed again (mpiswarm's agent, too, starts again a container the "
        "engine could not start). "
        f"(b) one `kubectl apply` of the {jobs} MpiJobs (`backoffLimit: 0`), then `kubectl get` every "
        f"{burst.POLL_S} s until all Succeeded. Jobs per second from the first command to the last job's end. "
        "Raw rows: `docs/bench/burst.csv`.",
        "",
    ]
    if a and b:
        ta, tb = [r["total_s"] for r in a], [r["total_s"] for r in b]
        ra, rb = [r["jobs_per_s"] for r in a], [r["jobs_per_s"] for r in b]
        out += [
            "| | (a) bare Swarm script | (b) mpiswarm | b/a |",
            "|---|---|---|---|",
            f"| wall time, s | {med_range(ta)} | {med_range(tb)} | **{statistics.median(tb) / statistics.median(ta):.2f}** "
            "(goal ≤ 1.2) |",
            f"| jobs/s | {med_range(ra)} | {med_range(rb)} | |",
            f"| jobs made again after a failure | {', '.join(str(r.get('made_again', 0)) for r in a)} | "
            "0 (`backoffLimit: 0`: a failure fails the run) | |",
            f"| 1-minute load before → after | {loads(a)} | {loads(b)} | |",
        ]
    return out


def scale_section(meta, crit, controller):
    out = [
        "## Scale without containers",
        "",
        how(meta, "scale"),
        "",
        "Criterion's estimates (what it prints: the slope of its samples, or their mean where sampling is flat) "
        "with their 95% confidence interval; raw rows: `docs/bench/scale-criterion.csv`, `docs/bench/scale-controller.csv`; "
        "plot: `docs/bench/scale.png`.",
        "",
        "![scale](bench/scale.png)",
        "",
        "### The offer layer's allocation cycle (`offers/benches/allocation_cycle.rs`)",
        "",
        "One cycle offers every agent to the frameworks of one role by DRF (as Mesos' "
        "`hierarchical_allocator_benchmarks.cpp`). Mesos 1.8 published about "
        f"{MESOS_18_CYCLE_S} s a cycle at 10,000 agents × 1,000 frameworks.",
        "",
        "| agents | 100 frameworks | 1,000 frameworks |",
        "|---|---|---|",
    ]
    cycles = {}
    for r in crit:
        if r["group"] == "allocation_cycle":
            agents, _, _, frameworks, _ = r["case"].split("_")
            cycles[(int(agents), int(frameworks))] = r
    for agents in sorted({k[0] for k in cycles}):
        cells = []
        for fw in (100, 1000):
            r = cycles.get((agents, fw))
            cells.append(
                f"{duration(r['estimate_s'])} ({duration(r['ci_low_s'])}–{duration(r['ci_high_s'])})" if r else "–"
            )
        out.append(f"| {agents:,} | {cells[0]} | {cells[1]} |")
    big = cycles.get((max((k[0] for k in cycles), default=0), 1000))
    if big and big and max(k[0] for k in cycles) == 10_000:
        out += ["", f"At 10,000 × 1,000: {duration(big['estimate_s'])}, "
                f"{MESOS_18_CYCLE_S / big['estimate_s']:.1f}× faster than Mesos 1.8's published figure "
                "(different machine, and our allocator offers cpus/mem/disk only)."]
    out += [
        "",
        "### Placement (`policy/benches/placement.rs`)",
        "",
        "One 1,024-rank job placed over N agents from raw offers (wall clock and the benchmark thread's CPU "
        "time), and a queue round of N waiting jobs over 1,000 agents.",
        "",
    ]
    place = [r for r in crit if "place 1024 ranks" in r["group"] and r["function"].startswith("from offers")]
    sizes = sorted({r["size"] for r in place})
    if sizes:
        out += ["| policy, clock | " + " | ".join(f"{s:,} agents" for s in sizes) + " |",
                "|---|" + "---|" * len(sizes)]
        for clock in ("wall", "cpu"):
            for pol in ("pack", "spread", "auto-balanced"):
                cells = []
                for s in sizes:
                    r = next((r for r in place if r["size"] == s and r["function"].endswith(pol)
                              and r["group"].startswith(clock)), None)
                    cells.append(duration(r["estimate_s"]) if r else "–")
                if any(c != "–" for c in cells):
                    out.append(f"| {pol}, {clock} | " + " | ".join(cells) + " |")
    queue = [r for r in crit if "queue round" in r["group"]]
    qsizes = sorted({r["size"] for r in queue})
    if qsizes:
        out += ["", "| queue round, clock | " + " | ".join(f"{s:,} jobs" for s in qsizes) + " |",
                "|---|" + "---|" * len(qsizes)]
        for clock in ("wall", "cpu"):
            cells = []
            for s in qsizes:
                r = next((r for r in queue if r["size"] == s and r["group"].startswith(clock)), None)
                cells.append(duration(r["estimate_s"]) if r else "–")
            if any(c != "–" for c in cells):
                out.append(f"| {clock} | " + " | ".join(cells) + " |")
    out += [
        "",
        "### The controller (`cli/benches/controller.rs`)",
        "",
        "The real `mpiswarm controller` process against the embedded API server and offer layer in the "
        "benchmark's process. Throughput: N MpiJobs created by 8 clients on "
        f"{controller[0]['agents'] if controller else '?'} test agents (no containers), timed from the first "
        "create to the last `Scheduled` condition, then to the last `Running` (the test agents report every "
        "task running; the controller's RSS is read then, with N running gangs); memory: the controller's RSS "
        "once N stored jobs that all wait (no agent) are reconciled. One run per N: "
        "`MPISWARM_BENCH_JOBS=N MPISWARM_BENCH_STORED=N cargo bench -p mpiswarm --bench controller`.",
        "",
        "| jobs N | all Scheduled after | jobs/s | then all Running after | RSS with N running gangs (peak) "
        "| N stored: reconciled in | RSS (peak) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in controller:
        # Rows from before the Running wait was measured hold no figure for it.
        running = r.get("running_after_s")
        running = f"{float(running):.1f} s" if running not in ("", None) else "–"
        out.append(
            f"| {r['jobs']:,} | {scheduled_after(r)} | {r['jobs_per_s']:.0f} | {running} | "
            f"{r['rss_after_throughput_mib']:.0f} MiB ({r['peak_after_throughput_mib']:.0f}) | "
            f"{r['reconciled_in_s']:.1f} s | {r['rss_stored_mib']:.0f} MiB ({r['peak_stored_mib']:.0f}) |"
        )
    return out


def scheduled_after(row):
    """The time to the last Scheduled job, or how many were by the 600 s limit
    (rows from before the count was recorded hold no count: past the limit
    they read as not all)."""
    if "scheduled" not in row or row["scheduled"] in ("", None):
        if row["scheduled_after_s"] < 600:
            return f"{row['scheduled_after_s']:.2f} s"
        return "not all within 600 s (count not recorded)"
    if row["scheduled"] >= row["jobs"]:
        return f"{row['scheduled_after_s']:.2f} s"
    return f"not all: {row['scheduled']:,.0f} of {row['jobs']:,} by {row['scheduled_after_s']:.0f} s"


def page(meta, place_rows, over_rows, burst_rows, crit, controller, reading):
    out = [
        "# Benchmarks",
        "",
        "Generated by `bench/run` (`make bench` builds the benchmarks, then runs it; `bench/run --only SECTION` "
        "re-measures one section and keeps the others' CSVs; `bench/run --report-only` rewrites this page and "
        f"the plots from `docs/bench/`). Machine: {meta['machine']}; every section names the exact command, "
        "binary and the machine's load while it ran. Raw CSV and plots: `docs/bench/`. Comparisons of two "
        "revisions measured by hand (the cost of tenancy's checks): `docs/cost-of-checking.md`.",
        "",
    ]
    if meta.get("partial"):
        out += [meta["partial"], ""]
    if place_rows:
        out += placement_section(meta, place_rows) + [""]
    if over_rows:
        out += overhead_section(meta, over_rows) + [""]
    if burst_rows:
        out += burst_section(meta, burst_rows) + [""]
    if crit or controller:
        out += scale_section(meta, crit, controller) + [""]
    if reading:
        out += [reading.rstrip(), ""]
    return "\n".join(out)


def write(out_dir, page_path, meta, place_rows, over_rows, burst_rows, crit, controller):
    os.makedirs(out_dir, exist_ok=True)
    # A section this run did not measure (`--only`) keeps its earlier CSV,
    # and the page shows it from there.
    fresh = [place_rows, over_rows, burst_rows, crit, controller]
    for i, name in enumerate(CSVS):
        if fresh[i]:
            write_csv(os.path.join(out_dir, name), fresh[i])
        else:
            fresh[i] = read_csv(os.path.join(out_dir, name))
    place_rows, over_rows, burst_rows, crit, controller = fresh
    reading_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reading.md")
    reading = open(reading_path).read() if os.path.exists(reading_path) else ""
    text = page(meta, place_rows, over_rows, burst_rows, crit, controller, reading)
    with open(page_path, "w") as f:
        f.write(text)
    return text
