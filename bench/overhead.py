"""Control-plane overhead: the same containers started two ways, runs
interleaved (a b, b a, a b, ...):
(a) bare Swarm: a script creates the overlay network, the SSH key secret,
    the hostfile config, the worker service and the launcher service with
    `docker service create` on the manager, then polls the launcher's task
    until it is Complete (every 100 ms);
(b) mpiswarm: `kubectl apply` of the MpiJob, then `kubectl wait` (a watch)
    until Succeeded.
The workload is the rank image's pi (4 ranks packed on one node, one
worker with 4 slots and the launcher), so both run the same two containers
from the same image with the same limits. Cleanup is outside both timings.
The b breakdown comes from the job's Events (eventTime, microseconds)."""

import os
import subprocess
import tempfile
import time

from stack import RANK_IMAGE, CommandFailed, mpijob, say, sh

RANKS = 4
CPUS = 0.2  # per rank: 4 x 0.2 + the 0.1-cpu launcher fits a 1-cpu node
SAMPLES = "2000000"
STEPS = ["Created", "Scheduled", "Launching", "Running", "Succeeded"]


def manifest(name):
    return mpijob(
        name,
        command=["/usr/local/bin/pi"],
        args=[SAMPLES],
        ranks=RANKS,
        resources={"cpus": CPUS, "memory": "64Mi"},
        placement={"policy": "pack"},
        runPolicy={"backoffLimit": 0, "activeDeadlineSeconds": 300},
    )


def run_b(stack, name):
    t0 = time.time()
    start = time.monotonic()
    stack.apply(manifest(name))
    stack.kubectl(["wait", "--for=condition=Succeeded", f"mpijob/{name}", "--timeout=300s"], timeout=320)
    total = time.monotonic() - start
    job = stack.job(name)
    events = stack.events(name, job["metadata"].get("uid"))
    steps = {s: round(events[s] - t0, 3) for s in STEPS if s in events}
    stack.delete(name)
    return total, steps


def run_a(stack, name):
    """The bare-Swarm script. Names carry `name`, so nothing collides with
    mpiswarm's own objects; everything is removed afterwards."""
    d = stack.manager_docker
    key_dir = tempfile.mkdtemp(prefix="bench-key-")
    key = os.path.join(key_dir, "id")
    hostfile = os.path.join(key_dir, "hostfile")
    with open(hostfile, "w") as f:
        f.write(f"worker-0 slots={RANKS}\n")
    net, secret, config = f"{name}-net", f"{name}-key", f"{name}-hostfile"
    worker, launcher = f"{name}-worker-0", f"{name}-launcher"
    common = [
        "--detach",
        "--restart-condition=none",
        "--endpoint-mode=dnsrr",
        "--constraint=node.hostname==node1",
        f"--secret=source={secret},target=mpiswarm-ssh-key,mode=0400",
        f"--config=source={config},target=/etc/mpi/hostfile",
        "--env=MPISWARM_WAIT_SECONDS=120",
    ]
    start = time.monotonic()
    try:
        # The key pair is part of what mpiswarm does per job, so it is timed.
        sh(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key])
        d(["network", "create", "-d", "overlay", "--attachable", net])
        d(["secret", "create", secret, key])
        d(["config", "create", config, hostfile])
        cpu = f"{RANKS * CPUS:g}"
        d(
            ["service", "create", "--name", worker, f"--network=name={net},alias=worker-0", "--hostname=worker-0"]
            + [f"--limit-cpu={cpu}", f"--reserve-cpu={cpu}", f"--limit-memory={RANKS * 64}M"]
            + [f"--reserve-memory={RANKS * 64}M"]
            + common
            + [RANK_IMAGE, "mpiswarm-rank", "worker"]
        )
        d(
            ["service", "create", "--name", launcher, f"--network=name={net},alias=launcher", "--hostname=launcher"]
            + ["--limit-cpu=0.1", "--reserve-cpu=0.1", "--limit-memory=64M", "--reserve-memory=64M"]
            + common
            + [RANK_IMAGE, "mpiswarm-rank", "launcher"]
            + ["mpirun", "--allow-run-as-root", "--hostfile", "/etc/mpi/hostfile", "-np", str(RANKS)]
            + ["/usr/local/bin/pi", SAMPLES]
        )
        deadline = time.monotonic() + 300
        while True:
            state = d(["service", "ps", "--format", "{{.CurrentState}}", launcher]).strip().split("\n")[0]
            if state.startswith("Complete"):
                break
            if state.startswith(("Failed", "Rejected", "Shutdown")) or time.monotonic() > deadline:
                logs = d(["service", "logs", "--raw", launcher], check=False)
                raise CommandFailed(f"bare-Swarm launcher {launcher} ended {state!r}: {logs[-2000:]}")
            time.sleep(0.1)
        total = time.monotonic() - start
        out = d(["service", "logs", "--raw", launcher], check=False)
        if "pi:" not in out:
            raise CommandFailed(f"bare-Swarm pi printed no result: {out[-2000:]}")
        return total
    finally:
        d(["service", "rm", worker, launcher], check=False)
        # The network goes once the tasks' containers are gone.
        for _ in range(100):
            if not d(["ps", "-aq", "--filter", f"name={name}-"], check=False).strip():
                break
            time.sleep(0.2)
        d(["secret", "rm", secret], check=False)
        d(["config", "rm", config], check=False)
        for _ in range(50):
            if subprocess.run(
                ["docker", "-H", f"unix://{os.path.join(stack.dir, 'nodes', 'node1', 'docker.sock')}"]
                + ["network", "rm", net],
                capture_output=True,
            ).returncode == 0:
                break
            time.sleep(0.2)
        sh(["rm", "-rf", key_dir])


def run(stack, reps):
    rows = []
    for rep in range(reps):
        order = ["a", "b"] if rep % 2 == 0 else ["b", "a"]
        for mode in order:
            name = f"bench-cp-{mode}-{rep}"
            if mode == "a":
                total = run_a(stack, name)
                steps = {}
            else:
                total, steps = run_b(stack, name)
            rows.append({"rep": rep, "mode": mode, "total_s": round(total, 3), **{s: steps.get(s, "") for s in STEPS}})
            say(f"control plane rep {rep + 1}/{reps}: ({mode}) {'bare docker service create' if mode == 'a' else 'kubectl apply MpiJob'} {total:.2f} s")
    return rows
