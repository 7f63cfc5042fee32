#!/usr/bin/python3
"""PNG plots of a `bench/run` output directory's CSVs (Debian's
python3-matplotlib, hence /usr/bin/python3): placement.png (each class's
figure under every config, every repetition a dot, the median a bar),
overhead.png (bare Swarm vs mpiswarm, and where mpiswarm's time goes) and
scale.png (how each scale benchmark grows with N, log-log).
Usage: bench/plot.py DIR"""

import csv
import os
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def rows(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return list(csv.DictReader(f))


def num(v):
    return float(v) if v not in ("", None) else None


def placement(d):
    data = rows(os.path.join(d, "placement.csv"))
    if not data:
        return
    configs = ["pack", "spread", "auto-network", "auto-cpu", "auto-memory"]
    panels = [
        ("PTRANS_GBs", "communication: PTRANS GB/s (higher is better)"),
        ("AvgPingPongLatency_usec", "ping-pong latency µs (lower is better)"),
        ("StarDGEMM_Gflops", "CPU: StarDGEMM Gflop/s a rank (higher is better)"),
        ("StarSTREAM_Triad", "memory: StarSTREAM Triad GB/s a rank (higher is better)"),
    ]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 4))
    for ax, (key, title) in zip(axes, panels):
        for i, c in enumerate(configs):
            vals = [num(r[key]) for r in data if r["config"] == c and num(r.get(key)) is not None]
            if not vals:
                continue
            color = "tab:blue" if c.endswith("network") or c == "pack" else "tab:orange"
            ax.bar(i, statistics.median(vals), color=color, alpha=0.5)
            ax.plot([i] * len(vals), vals, "k.", markersize=6)
        ax.set_xticks(range(len(configs)))
        ax.set_xticklabels(configs, rotation=35, ha="right", fontsize=8)
        ax.set_title(title, fontsize=9)
    fig.suptitle("hpcc, 4 ranks: bars are medians, dots repetitions (blue: packs, orange: spreads)", fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(d, "placement.png"), dpi=110)
    plt.close(fig)


def overhead(d):
    data = rows(os.path.join(d, "overhead.csv"))
    if not data:
        return
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for i, mode, label in [(0, "a", "(a) bare docker service create"), (1, "b", "(b) kubectl apply MpiJob")]:
        vals = [num(r["total_s"]) for r in data if r["mode"] == mode]
        if vals:
            ax1.bar(i, statistics.median(vals), alpha=0.5, color=["tab:gray", "tab:green"][i])
            ax1.plot([i] * len(vals), vals, "k.")
    ax1.set_xticks([0, 1])
    ax1.set_xticklabels(["(a) bare Swarm", "(b) mpiswarm"])
    ax1.set_ylabel("seconds, start to end")
    ax1.set_title("same containers, same workload", fontsize=9)
    steps = ["Created", "Scheduled", "Launching", "Running", "Succeeded"]
    b = [r for r in data if r["mode"] == "b" and all(num(r.get(s)) is not None for s in steps)]
    if b:
        left = 0.0
        prev = 0.0
        for s in steps:
            at = statistics.median(num(r[s]) for r in b)
            ax2.barh(0, at - prev, left=left, label=f"to {s}")
            left += at - prev
            prev = at
        ax2.set_yticks([])
        ax2.set_xlabel("seconds after kubectl apply (medians of the Events' eventTime)")
        ax2.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=3)
        ax2.set_title("(b) step by step", fontsize=9)
    fig.tight_layout()
    fig.savefig(os.path.join(d, "overhead.png"), dpi=110)
    plt.close(fig)


def scale(d):
    crit = rows(os.path.join(d, "scale-criterion.csv"))
    ctl = rows(os.path.join(d, "scale-controller.csv"))
    if not crit and not ctl:
        return
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    ax = axes[0]
    for fw in ("100", "1000"):
        pts = sorted(
            (int(r["size"]), num(r["estimate_s"]))
            for r in crit
            if r["group"] == "allocation_cycle" and r["case"].split("_")[3] == fw
        )
        if pts:
            ax.plot(*zip(*pts), "o-", label=f"{fw} frameworks")
    ax.plot([10_000], [1.1], "r*", markersize=12, label="Mesos 1.8 (published, 1k frameworks)")
    ax.set_title("allocation cycle", fontsize=9)
    ax.set_xlabel("agents")
    ax.set_ylabel("seconds a cycle")
    ax = axes[1]
    for clock in ("wall",):
        for pol in ("pack", "spread", "auto-balanced"):
            pts = sorted(
                (int(r["size"]), num(r["estimate_s"]))
                for r in crit
                if "place 1024 ranks" in r["group"] and r["group"].startswith(clock)
                and r["function"] == f"from offers/{pol}"
            )
            if pts:
                ax.plot(*zip(*pts), "o-", label=f"place 1024 ranks, {pol}")
        pts = sorted(
            (int(r["size"]), num(r["estimate_s"])) for r in crit if "queue round" in r["group"]
            and r["group"].startswith(clock)
        )
        if pts:
            ax.plot(*zip(*pts), "s--", label="queue round of N jobs (1k agents)")
    ax.set_title("placement (wall clock)", fontsize=9)
    ax.set_xlabel("N (agents, or jobs for the queue round)")
    ax.set_ylabel("seconds")
    ax = axes[2]
    if ctl:
        n = [int(float(r["jobs"])) for r in ctl]
        ax.plot(n, [num(r["scheduled_after_s"]) for r in ctl], "o-", label="N jobs: all Scheduled after (s)")
        ax2 = ax.twinx()
        ax2.plot(n, [num(r["rss_stored_mib"]) for r in ctl], "s--", color="tab:red", label="RSS with N stored (MiB)")
        ax2.set_ylabel("MiB")
        ax2.legend(fontsize=8, loc="lower right")
        ax2.set_xscale("log")
    ax.set_title("controller", fontsize=9)
    ax.set_xlabel("jobs N")
    ax.set_ylabel("seconds")
    for a in axes:
        a.set_xscale("log")
        if a is not axes[2]:
            a.set_yscale("log")
        a.legend(fontsize=8, loc="upper left")
        a.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(d, "scale.png"), dpi=110)
    plt.close(fig)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: bench/plot.py DIR (a bench/run output directory with its CSVs)")
    d = sys.argv[1]
    placement(d)
    overhead(d)
    scale(d)


if __name__ == "__main__":
    main()
