"""Placement: the Scylla result on real MPI. Debian's hpcc (HPC Challenge)
runs as one 4-rank MpiJob under pack, spread and auto (with the network,
cpu and memory profile), repetitions interleaved. hpcc runs all its kernels
in one binary, so every run yields every class's figure; each class is read
from hpcc's own per-kernel result line (its timer, not the job's wall
time, which includes all kernels):
- communication-bound: PTRANS_GBs (parallel matrix transpose, all-to-all),
  with AvgPingPongLatency_usec beside it;
- CPU-bound: StarDGEMM_Gflops (every rank multiplies matrices at once);
- memory-bound: StarSTREAM_Triad (every rank streams at once, GB/s a rank).
The input is the rank image's hpccinf.txt with the HPL size N replaced
(HPL sizes every other kernel's arrays)."""

import statistics
import time

from stack import mpijob, say

# (config name, placement.policy, profile). auto with the network profile
# packs, with cpu or memory spreads: the three auto configs are the
# profile's own choice in each class.
CONFIGS = [
    ("pack", "pack", "balanced"),
    ("spread", "spread", "balanced"),
    ("auto-network", "auto", "network"),
    ("auto-cpu", "auto", "cpu"),
    ("auto-memory", "auto", "memory"),
]

# class -> (hpcc result key, higher is better, the profile, the policy the paper expects to win, auto config)
CLASSES = [
    ("communication", "PTRANS_GBs", True, "network", "pack", "auto-network"),
    ("cpu", "StarDGEMM_Gflops", True, "cpu", "spread", "auto-cpu"),
    ("memory", "StarSTREAM_Triad", True, "memory", "spread", "auto-memory"),
]

# Every hpcc result line kept in the CSV.
KEYS = [
    "PTRANS_GBs",
    "AvgPingPongLatency_usec",
    "AvgPingPongBandwidth_GBytes",
    "RandomlyOrderedRingBandwidth_GBytes",
    "StarDGEMM_Gflops",
    "HPL_Tflops",
    "StarSTREAM_Triad",
    "SingleSTREAM_Triad",
]

# Open MPI's ranks busy-poll while they wait; with yield_when_idle a waiting
# rank gives its core back. Without it, ranks packed onto a capped node starve
# each other: four busy-polling ranks on a 0.5-cpu node had 64-byte round
# trips of 660-2600 us against 1.6-3.4 us uncapped on this machine kind.
MPIRUN_ARGS = ["--mca", "btl", "self,vader,tcp", "--mca", "mpi_yield_when_idle", "1"]


def manifest(name, policy, profile, hpl_n, cpus):
    script = (
        f"sed '6s/^[0-9]*/{hpl_n}/' /usr/share/mpiswarm/hpccinf.txt > /tmp/bench-hpccinf.txt"
        " && MPISWARM_HPCC_INPUT=/tmp/bench-hpccinf.txt exec mpiswarm-hpcc"
    )
    return mpijob(
        name,
        command=["sh", "-c", script],
        ranks=4,
        resources={"cpus": cpus, "memory": "256Mi"},
        profile=profile,
        placement={"policy": policy},
        mpi={"implementation": "OpenMPI", "mpirunArgs": MPIRUN_ARGS, "env": [{"name": "OMP_NUM_THREADS", "value": "1"}]},
        runPolicy={"backoffLimit": 0, "activeDeadlineSeconds": 900},
    )


def parse_hpcc(text):
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key in KEYS:
            try:
                out[key] = float(value.strip())
            except ValueError:
                pass
    return out


def run(stack, reps, hpl_n, cpus, rows, configs=None):
    """Appends one row per run to `rows` (so a failure keeps what was
    measured). The order of configs rotates every repetition, so no config
    always runs first (after a cold start) or last."""
    configs = [c for c in CONFIGS if configs is None or c[0] in configs]
    total = reps * len(configs)
    done = 0
    for rep in range(reps):
        k = rep % len(configs)
        for config, policy, profile in configs[k:] + configs[:k]:
            done += 1
            name = f"bench-{config}-{rep}"
            started = time.monotonic()
            stack.apply(manifest(name, policy, profile, hpl_n, cpus))
            job = stack.wait_finished(name, timeout=900)
            logs = stack.mpiswarm(["logs", name])
            results = parse_hpcc(logs)
            missing = [k for k in KEYS if k not in results]
            if missing:
                raise RuntimeError(f"{name}: hpcc printed no {missing}; its output:\n{logs[-3000:]}")
            events = stack.events(name, job["metadata"].get("uid"))
            placement = job["status"].get("placement", {})
            ranks = "-".join(str(n.get("ranks")) for n in placement.get("nodes", []))
            wall = events["Succeeded"] - events["Running"] if {"Running", "Succeeded"} <= events.keys() else None
            row = {
                "rep": rep,
                "config": config,
                "policy": policy,
                "profile": profile,
                "applied": placement.get("policy", ""),
                "nodes": placement.get("nodeCount", len(placement.get("nodes", []))),
                "ranks_per_node": ranks,
                "running_to_succeeded_s": round(wall, 3) if wall is not None else "",
                **results,
            }
            rows.append(row)
            say(
                f"placement {done}/{total}: {config} rep {rep + 1} on {row['nodes']} node(s) ({ranks}): "
                f"PTRANS {results['PTRANS_GBs']:.4f} GB/s, StarDGEMM {results['StarDGEMM_Gflops']:.3f} Gflop/s, "
                f"StarSTREAM Triad {results['StarSTREAM_Triad']:.3f} GB/s, "
                f"ping-pong {results['AvgPingPongLatency_usec']:.1f} us, hpcc ran {wall or 0:.1f} s "
                f"({time.monotonic() - started:.0f} s with launch and cleanup)"
            )
            stack.delete(name)
    return rows


def spread_of(values):
    """(median, min, max) of a list."""
    return statistics.median(values), min(values), max(values)


def verdicts(rows):
    """Per class: the medians of pack, spread and the profile's auto config,
    which policy won, whether it is the profile's, and auto's distance from
    the winner."""
    out = []
    for cls, key, higher, profile, expected, auto in CLASSES:
        med = {}
        for config in ("pack", "spread", auto):
            vals = [r[key] for r in rows if r["config"] == config and key in r]
            if vals:
                med[config] = spread_of(vals)
        if not {"pack", "spread", auto} <= med.keys():
            continue
        best = max(("pack", "spread"), key=lambda c: med[c][0] if higher else -med[c][0])
        other = "spread" if best == "pack" else "pack"
        ratio = med[best][0] / med[other][0] if med[other][0] else float("inf")
        if not higher:
            ratio = 1 / ratio
        auto_gap = (med[best][0] - med[auto][0]) / med[best][0] * (1 if higher else -1)
        applied = {r["applied"] for r in rows if r["config"] == auto}
        out.append(
            {
                "class": cls,
                "key": key,
                "profile": profile,
                "expected": expected,
                "winner": best,
                "ratio": ratio,
                "auto": auto,
                "auto_applied": ",".join(sorted(applied)),
                "auto_gap": auto_gap,
                "medians": med,
            }
        )
    return out
