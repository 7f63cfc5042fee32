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
import tempfile
import time

from stack import RANK_IMAGE, CommandFailed, pi_mpijob, say, sh

RANKS = 4
CPUS = 0.2  # per rank: 4 x 0.2 + the 0.1-cpu launcher fits a 1-cpu node
SAMPLES = "2000000"
STEPS = ["Created", "Scheduled", "Launching", "Running", "Succeeded"]


def manifest(name):
    return pi_mpijob(name, RANKS, CPUS, SAMPLES, 300, placement={"policy": "pack"})


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


class BareJob:
    """One MPI job made with plain Docker commands against the manager, as a
    script would: a key pair, an overlay network, the key as a secret, the
    hostfile as a config, one worker service (`ranks` slots, sshd) and the
    launcher service (`mpirun`). Names carry `name`, so nothing collides
    with mpiswarm's own objects."""

    def __init__(self, stack, name, ranks, cpus, samples, constraint="node.hostname==node1"):
        self.stack, self.name, self.ranks, self.cpus, self.samples = stack, name, ranks, cpus, samples
        self.constraint = constraint
        self.net, self.secret, self.config = f"{name}-net", f"{name}-key", f"{name}-hostfile"
        self.worker, self.launcher = f"{name}-worker-0", f"{name}-launcher"
        self.key_dir = None

    def create(self):
        d = self.stack.manager_docker
        self.key_dir = tempfile.mkdtemp(prefix="bench-key-")
        key = os.path.join(self.key_dir, "id")
        hostfile = os.path.join(self.key_dir, "hostfile")
        with open(hostfile, "w") as f:
            f.write(f"worker-0 slots={self.ranks}\n")
        common = [
            "--detach",
            "--restart-condition=none",
            "--endpoint-mode=dnsrr",
            f"--secret=source={self.secret},target=mpiswarm-ssh-key,mode=0400",
            f"--config=source={self.config},target=/etc/mpi/hostfile",
            "--env=MPISWARM_WAIT_SECONDS=120",
        ] + ([f"--constraint={self.constraint}"] if self.constraint else [])
        # The key pair is part of what mpiswarm does per job, so it is timed.
        sh(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key])
        d(["network", "create", "-d", "overlay", "--attachable", self.net])
        d(["secret", "create", self.secret, key])
        d(["config", "create", self.config, hostfile])
        cpu = f"{self.ranks * self.cpus:g}"
        d(
            ["service", "create", "--name", self.worker, f"--network=name={self.net},alias=worker-0"]
            + ["--hostname=worker-0", f"--limit-cpu={cpu}", f"--reserve-cpu={cpu}"]
            + [f"--limit-memory={self.ranks * 64}M", f"--reserve-memory={self.ranks * 64}M"]
            + common
            + [RANK_IMAGE, "mpiswarm-rank", "worker"]
        )
        d(
            ["service", "create", "--name", self.launcher, f"--network=name={self.net},alias=launcher"]
            + ["--hostname=launcher", "--limit-cpu=0.1", "--reserve-cpu=0.1", "--limit-memory=64M"]
            + ["--reserve-memory=64M"]
            + common
            + [RANK_IMAGE, "mpiswarm-rank", "launcher"]
            + ["mpirun", "--allow-run-as-root", "--hostfile", "/etc/mpi/hostfile", "-np", str(self.ranks)]
            + ["/usr/local/bin/pi", self.samples]
        )

    @staticmethod
    def states(stack, launchers):
        """The current state of each launcher service's task, one command for all."""
        out = stack.manager_docker(["service", "ps", "--format", "{{.Name}} {{.CurrentState}}"] + launchers)
        states = {}
        for line in out.splitlines():
            task, _, state = line.partition(" ")
            states.setdefault(task.rsplit(".", 1)[0], state)
        return states

    def wait(self, timeout=300):
        deadline = time.monotonic() + timeout
        while True:
            state = BareJob.states(self.stack, [self.launcher]).get(self.launcher, "")
            if state.startswith("Complete"):
                return
            if state.startswith(("Failed", "Rejected", "Shutdown")) or time.monotonic() > deadline:
                raise CommandFailed(self.failure(state))
            time.sleep(0.1)

    def failure(self, state):
        """What Swarm says of a launcher that ended otherwise than Complete:
        its task's error and its last log lines."""
        d = self.stack.manager_docker
        error = d(["service", "ps", "--no-trunc", "--format", "{{.Error}}", self.launcher], check=False).strip()
        logs = d(["service", "logs", "--raw", self.launcher], check=False)
        return f"bare-Swarm launcher {self.launcher} ended {state!r} ({error}): {logs[-1500:]}"

    def check_output(self):
        out = self.stack.manager_docker(["service", "logs", "--raw", self.launcher], check=False)
        if "pi:" not in out:
            raise CommandFailed(f"bare-Swarm pi of {self.name} printed no result: {out[-2000:]}")

    def release(self):
        """Removes the job's services (the worker's sshd runs until removed),
        which gives their node's cpus back."""
        self.stack.manager_docker(["service", "rm", self.worker, self.launcher], check=False)

    def remove(self):
        d = self.stack.manager_docker
        self.release()
        # The network goes once the tasks' containers are gone.
        for _ in range(100):
            if not d(["ps", "-aq", "--filter", f"name={self.name}-"], check=False).strip():
                break
            time.sleep(0.2)
        d(["secret", "rm", self.secret], check=False)
        d(["config", "rm", self.config], check=False)
        for _ in range(50):
            if d(["network", "rm", self.net], check=False) or not d(
                ["network", "ls", "-q", "--filter", f"name={self.net}"], check=False
            ).strip():
                break
            time.sleep(0.2)
        if self.key_dir:
            sh(["rm", "-rf", self.key_dir])


def run_a(stack, name):
    """The bare-Swarm script, timed from the key pair to the launcher's end;
    everything is removed afterwards."""
    job = BareJob(stack, name, RANKS, CPUS, SAMPLES)
    start = time.monotonic()
    try:
        job.create()
        job.wait()
        total = time.monotonic() - start
        job.check_output()
        return total
    finally:
        job.remove()


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
