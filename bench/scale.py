"""Scale without containers: the criterion benchmarks (policy's placement,
the offer layer's allocation cycle) over a size grid given by
MPISWARM_BENCH_SIZES, and the controller benchmark (cli/benches/controller.rs:
throughput to the last Scheduled, RSS with N stored jobs) once per size.
Criterion's figures are read from its estimates.json files (the estimate
it prints, with its 95% confidence interval); the controller's from the lines it prints."""

import json
import os
import re
import signal
import subprocess

from stack import CommandFailed, say

# Every bench is built with the same package set as `make bench`'s
# `cargo bench --no-run` (the Makefile's BENCHES): cargo unifies dependency
# features over the packages named, so naming one package alone would
# rebuild its dependencies. A smoke run (in `make test`, in the dev profile)
# names what `make test`'s test build names, so it reuses that build.
PACKAGES = ["-p", "mpiswarm-policy", "-p", "mpiswarm-offers", "-p", "mpiswarm"]
SMOKE_PACKAGES = ["--workspace", "--features", "mpiswarm-testkit/engine"]

CRITERION = [
    ("mpiswarm-policy", "placement"),
    ("mpiswarm-offers", "allocation_cycle"),
]

# The controller benchmark's output lines (cli/benches/controller.rs).
THROUGHPUT = re.compile(r"throughput: (\d+) MpiJobs .* all Scheduled after ([\d.]+) s: (\d+) jobs/s")
# Printed only when the throughput run ran out of time.
NOT_ALL = re.compile(r"NOT all scheduled within \d+ s: (\d+) were")
# Once every job of the throughput run is Running: how long after the last
# Scheduled, and the controller's memory with that many running gangs.
RSS_AFTER = re.compile(r"\d+ running ([\d.]+) s later.*: controller RSS (\d+) MiB \(peak (\d+) MiB\)")
STORED = re.compile(r"memory: (\d+) MpiJobs stored in ([\d.]+) s")
RECONCILED = re.compile(r"reconciled them in ([\d.]+) s.*RSS (\d+) MiB \(peak (\d+) MiB\)")


def cargo_bench(package, bench, env, profile, extra, log):
    """`cargo bench` of one target; its output goes to `log` and, as
    progress, one line per finished benchmark to stderr."""
    args = ["cargo", "bench", "-q"] + (SMOKE_PACKAGES if profile == "dev" else PACKAGES) + ["--bench", bench]
    if profile:
        args += ["--profile", profile]
    args += ["--"] + extra
    say(" ".join(f"{k}={v}" for k, v in env.items() if k.startswith("MPISWARM_")) + " " + " ".join(args))
    # Its own process group, so an interrupt can end cargo, the benchmark and
    # the controller process the benchmark starts, all by this group's id.
    p = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, **env},
        start_new_session=True,
    )
    out = []
    try:
        for line in p.stdout:
            out.append(line)
            log.write(line)
            stripped = line.strip()
            if stripped.startswith("time:") or stripped.startswith(("throughput:", "memory:", "controller")):
                say(f"  {bench}: {out[-2].strip() if stripped.startswith('time:') else ''} {stripped}")
    except BaseException:
        # Interrupted: cargo's child (and the controller benchmark's own
        # `mpiswarm controller`) must not outlive the run.
        os.killpg(p.pid, signal.SIGTERM)
        p.wait()
        raise
    if p.wait() != 0:
        raise CommandFailed(f"{' '.join(args)} exited {p.returncode}: {''.join(out)[-3000:]}")
    return "".join(out)


def criterion_results(target_dir, since):
    """Every criterion benchmark whose estimates were written after `since`."""
    rows = []
    root = os.path.join(target_dir, "criterion")
    for dirpath, _, files in os.walk(root):
        if "benchmark.json" not in files or not dirpath.endswith(os.sep + "new"):
            continue
        est_path = os.path.join(dirpath, "estimates.json")
        if not os.path.exists(est_path) or os.path.getmtime(est_path) < since:
            continue
        with open(os.path.join(dirpath, "benchmark.json")) as f:
            meta = json.load(f)
        with open(est_path) as f:
            estimates = json.load(f)
        # The figure criterion prints: the slope of linear sampling, the mean of flat sampling.
        est = estimates.get("slope") or estimates["mean"]
        rows.append(
            {
                "group": meta["group_id"],
                "function": meta.get("function_id") or "",
                "size": int(meta["value_str"].split("_")[0]) if meta.get("value_str") else "",
                "case": meta.get("value_str") or "",
                "estimate_s": est["point_estimate"] / 1e9,
                "ci_low_s": est["confidence_interval"]["lower_bound"] / 1e9,
                "ci_high_s": est["confidence_interval"]["upper_bound"] / 1e9,
            }
        )
    rows.sort(key=lambda r: (r["group"], r["function"], r["size"] if r["size"] != "" else 0))
    return rows


def run(sizes, controller_sizes, target_dir, smoke, log_path, parts, crit, controller):
    """Appends to `crit` (every criterion estimate under the target dir,
    this run's and earlier ones') and `controller` (one row per size), so
    an interrupted run keeps what it measured. `parts` names the benches to
    run. In smoke mode the benchmarks are built with the dev profile (what
    `make test` already compiled) and measured for a tenth of a second each."""
    env = {"MPISWARM_BENCH_SIZES": ",".join(map(str, sizes)), "CARGO_TARGET_DIR": target_dir}
    profile = "dev" if smoke else None
    # No HTML plots (bench/plot.py draws ours); a smoke run also resamples
    # less, since criterion's 100,000 bootstrap resamples take seconds a case
    # in a dev build.
    extra = ["--noplot"]
    if smoke:
        extra += ["--warm-up-time", "0.05", "--measurement-time", "0.1", "--nresamples", "1000"]
    with open(log_path, "a") as log:
        try:
            for package, bench in CRITERION:
                if bench in parts:
                    cargo_bench(package, bench, env, profile, extra, log)
        finally:
            # Only this grid's sizes: a smoke run's small sizes share criterion's directory.
            crit.extend(r for r in criterion_results(target_dir, 0) if r["size"] in sizes)
        for n in controller_sizes if "controller" in parts else []:
            cenv = {
                "MPISWARM_BENCH_JOBS": str(n),
                "MPISWARM_BENCH_STORED": str(n),
                "MPISWARM_BENCH_AGENTS": "10" if smoke else "100",
                "CARGO_TARGET_DIR": target_dir,
            }
            out = cargo_bench("mpiswarm", "controller", cenv, profile, [], log)
            row = {"jobs": n, "agents": cenv["MPISWARM_BENCH_AGENTS"]}
            short = NOT_ALL.search(out)
            row["scheduled"] = float(short.group(1)) if short else float(n)
            for pattern, names in [
                (THROUGHPUT, ["_", "scheduled_after_s", "jobs_per_s"]),
                (RSS_AFTER, ["running_after_s", "rss_after_throughput_mib", "peak_after_throughput_mib"]),
                (STORED, ["_", "stored_in_s"]),
                (RECONCILED, ["reconciled_in_s", "rss_stored_mib", "peak_stored_mib"]),
            ]:
                m = pattern.search(out)
                if not m:
                    raise CommandFailed(f"the controller benchmark printed no line like {pattern.pattern!r}:\n{out}")
                row.update({k: float(v) for k, v in zip(names, m.groups()) if k != "_"})
            controller.append(row)
