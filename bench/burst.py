"""Burst: a parameter sweep of N small jobs submitted at once, on one stack,
run two ways (a then b; b then a on the next repetition):
(a) bare Swarm: a script keeps as many jobs going as the nodes hold (each
    node's cpus over a job's 0.3, whole jobs), making each job as
    overhead.py's (a) does (key pair, overlay, secret, config, a worker
    service with 2 slots and a launcher service), both pinned to the node
    with the most room, with CREATORS jobs made side by side; one `docker
    service ps` of every running launcher every POLL_S tells which ended;
    an ended job's services are removed at once (a worker's sshd runs
    until then, holding its cpus), and the next job is made once they are.
    The script places each job whole on one node, as mpiswarm packs these
    jobs (profile `network`): Swarm places services one by one, so a
    worker could find no room on a node where its launcher already runs.
    What the jobs made is removed after the clock stops.
(b) mpiswarm: one `kubectl apply` of the N MpiJobs (the same 2 ranks of
    0.1 cpu, packed on one node as (a)'s worker holds them, profile
    `network`, and the 0.1-cpu launcher, pi of the same size), then
    `kubectl get mpijob` every POLL_S until all Succeeded.
Both report jobs per second from the first command to the last job's end."""

import concurrent.futures
import json
import time

from overhead import BareJob
from stack import CommandFailed, load, pi_mpijob, say

RANKS = 2
CPUS = 0.1  # per rank; each job also reserves the 0.1-cpu launcher
JOB_CPUS = RANKS * CPUS + 0.1
SAMPLES = "200000"
CREATORS = 4
# Bare jobs that failed and were made again; past this many the run fails.
MAX_RETRIES = 10
POLL_S = 0.5
DEADLINE_S = 1200


def manifest(name):
    # Packed, as the script's (a) runs them: one worker with both ranks.
    return pi_mpijob(name, RANKS, CPUS, SAMPLES, 600, profile="network")


def run_a(stack, prefix, jobs, nodes, per_node):
    """The bare-Swarm script: at most `per_node` jobs at a time on each of `nodes`."""
    names = [f"{prefix}-{i:03d}" for i in range(jobs)]
    made, running, done, retries = [], {}, 0, 0
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(CREATORS) as pool:
        try:
            pending = list(names)
            creating, releasing = {}, {}
            while done < jobs:
                if time.monotonic() - start > DEADLINE_S:
                    raise CommandFailed(f"bare Swarm: {done} of {jobs} jobs ended within {DEADLINE_S} s")
                while pending:
                    busy = [job.node for job in list(running.values()) + list(creating.values())]
                    busy += [job.node for job in releasing.values()]
                    node = max(nodes, key=lambda n: (per_node - busy.count(n), -nodes.index(n)))
                    if busy.count(node) >= per_node:
                        break
                    job = BareJob(stack, pending.pop(0), RANKS, CPUS, SAMPLES, constraint=f"node.hostname=={node}")
                    job.node = node
                    made.append(job)
                    creating[pool.submit(job.create)] = job
                for future in [f for f in creating if f.done()]:
                    job = creating.pop(future)
                    future.result()
                    running[job.launcher] = job
                for future in [f for f in releasing if f.done()]:
                    releasing.pop(future).node = None
                if running:
                    states = BareJob.states(stack, list(running))
                    for launcher, state in states.items():
                        if state.startswith("Complete"):
                            job = running.pop(launcher)
                            job.check_output()
                            # The worker's sshd runs until its service goes, as
                            # mpiswarm's controller kills a finished job's workers.
                            releasing[pool.submit(job.release)] = job
                            done += 1
                        elif state.startswith(("Failed", "Rejected", "Shutdown")):
                            # As mpiswarm's agent starts a container the engine could not
                            # start again, the script makes a failed job again (counted).
                            job = running.pop(launcher)
                            why = job.failure(state)
                            releasing[pool.submit(job.release)] = job
                            retries += 1
                            if retries > MAX_RETRIES:
                                raise CommandFailed(f"{retries} bare-Swarm jobs failed; the last: {why}")
                            say(f"burst (a): {why[:400]}; making it again")
                            pending.insert(0, job.name + "-r")
                time.sleep(POLL_S)
            return time.monotonic() - start, retries
        finally:
            for job in made:
                job.remove()


def run_b(stack, prefix, jobs):
    names = [f"{prefix}-{i:03d}" for i in range(jobs)]
    text = "\n".join(json.dumps(manifest(n)) for n in names)
    start = time.monotonic()
    stack.kubectl(["apply", "-f", "-"], input=text, timeout=300)
    try:
        while True:
            if time.monotonic() - start > DEADLINE_S:
                raise CommandFailed(f"mpiswarm: not every job of the burst ended within {DEADLINE_S} s")
            listed = json.loads(stack.kubectl(["get", "mpijob", "-o", "json"], timeout=120))
            phases = {j["metadata"]["name"]: (j.get("status") or {}).get("phase", "Pending")
                      for j in listed["items"] if j["metadata"]["name"].startswith(prefix + "-")}
            failed = sorted(n for n, p in phases.items() if p == "Failed")
            if failed:
                raise CommandFailed(f"mpiswarm: jobs of the burst failed: {failed[:5]}")
            if len(phases) == jobs and all(p == "Succeeded" for p in phases.values()):
                return time.monotonic() - start
            time.sleep(POLL_S)
    finally:
        stack.kubectl(["delete", "mpijob", "--wait=true", "--timeout=300s", "--ignore-not-found"] + names,
                      timeout=330, check=False)


def run(stack, reps, jobs, nodes, node_cpus):
    hostnames = [f"node{i + 1}" for i in range(nodes)]
    per_node = int(node_cpus / JOB_CPUS + 1e-9)
    rows = []
    for rep in range(reps):
        order = ["a", "b"] if rep % 2 == 0 else ["b", "a"]
        for mode in order:
            prefix = f"bench-burst-{mode}{rep}"
            before = load()
            if mode == "a":
                total, again = run_a(stack, prefix, jobs, hostnames, per_node)
            else:
                total, again = run_b(stack, prefix, jobs), 0
            rows.append({"rep": rep, "mode": mode, "jobs": jobs, "total_s": round(total, 2), "made_again": again,
                         "jobs_per_s": round(jobs / total, 3), "load_before": before, "load_after": load()})
            say(f"burst rep {rep + 1}/{reps}: ({mode}) {'bare Swarm script' if mode == 'a' else 'mpiswarm, one kubectl apply'} "
                f"{jobs} jobs in {total:.1f} s ({jobs / total:.2f} jobs/s)")
    return rows
