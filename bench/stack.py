"""One `mpiswarm up --nodes N` stack for the benchmarks: started in a fresh
temp data dir, used through kubectl and the nodes' own Docker engines, and
always taken down (node containers, volumes, network) when the run ends.
It also owns the shared command helpers: every command runs under a
deadline, and progress lines go to stderr with the time since the start."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

T0 = time.monotonic()
# The 1-minute load average at every progress line, for the page.
LOADS = []


def say(line):
    """A progress line: elapsed mm:ss, then the line."""
    LOADS.append(load())
    s = int(time.monotonic() - T0)
    print(f"[{s // 60:02d}:{s % 60:02d}] {line}", file=sys.stderr, flush=True)


class CommandFailed(Exception):
    pass


def sh(args, timeout=300, env=None, check=True, input=None):
    """Runs a command and returns its stdout; fails naming the command and
    its stderr when it fails or outlives `timeout` seconds."""
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env, input=input)
    except subprocess.TimeoutExpired as e:
        raise CommandFailed(f"{' '.join(args)}: no answer within {timeout} s") from e
    if check and p.returncode != 0:
        raise CommandFailed(f"{' '.join(args)} exited {p.returncode}: {p.stderr.strip()[-2000:]}")
    return p.stdout


class Stack:
    """`mpiswarm up --nodes ...` in the background, in its own data dir."""

    def __init__(self, binary, nodes, node_cpus, link_mbit):
        self.binary = binary
        # Every benchmark job runs the rank image: only it is copied into the nodes.
        self.flags = ["--nodes", str(nodes), "--node-cpus", str(node_cpus), "--link-mbit", str(link_mbit),
                      "--node-images", "rank"]
        self.dir = tempfile.mkdtemp(prefix="mpiswarm-bench-")
        self.proc = None
        self.log = None

    @property
    def command(self):
        return " ".join(["mpiswarm", "up"] + self.flags)

    def __enter__(self):
        say(f"{self.command} (data dir {self.dir})")
        self.log = open(os.path.join(self.dir, "up.log"), "w")
        self.proc = subprocess.Popen(
            [self.binary, "up", "--no-build", "--data-dir", self.dir] + self.flags,
            stdout=subprocess.DEVNULL,
            stderr=self.log,
        )
        deadline = time.monotonic() + 600
        while not os.path.exists(os.path.join(self.dir, "stack.json")):
            if self.proc.poll() is not None:
                raise CommandFailed(f"mpiswarm up exited {self.proc.returncode}: {self.up_log()}")
            if time.monotonic() > deadline:
                raise CommandFailed(f"mpiswarm up was not ready within 600 s: {self.up_log()}")
            time.sleep(0.5)
        say("stack ready")
        return self

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        sh([self.binary, "down", "--data-dir", self.dir], timeout=300, check=False)
        if self.log:
            self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        say("stack down")
        return False

    def up_log(self):
        try:
            with open(os.path.join(self.dir, "up.log")) as f:
                return f.read()[-3000:]
        except OSError:
            return ""

    def kubectl(self, args, timeout=120, check=True, input=None):
        return sh(["kubectl", "--kubeconfig", os.path.join(self.dir, "kubeconfig")] + args, timeout, None, check, input)

    def mpiswarm(self, args, timeout=120):
        return sh([self.binary] + args + ["--data-dir", self.dir], timeout)

    def manager_docker(self, args, timeout=120, check=True):
        """The swarm manager's engine (node1), through the socket `up` made."""
        sock = os.path.join(self.dir, "nodes", "node1", "docker.sock")
        return sh(["docker", "-H", f"unix://{sock}"] + args, timeout, None, check)

    def apply(self, manifest):
        self.kubectl(["apply", "-f", "-"], input=json.dumps(manifest))

    def job(self, name):
        return json.loads(self.kubectl(["get", "mpijob", name, "-o", "json"]))

    def wait_finished(self, name, timeout):
        """Polls the phase until Succeeded (returns the job) or Failed/timeout (raises)."""
        deadline = time.monotonic() + timeout
        while True:
            phase = self.kubectl(["get", "mpijob", name, "-o", "jsonpath={.status.phase}"]).strip()
            if phase == "Succeeded":
                return self.job(name)
            if phase == "Failed" or time.monotonic() > deadline:
                job = self.job(name)
                conds = job.get("status", {}).get("conditions", [])
                raise CommandFailed(f"MpiJob {name} ended {phase or 'unfinished'} after its {timeout} s: {conds}")
            time.sleep(0.5)

    def delete(self, name):
        self.kubectl(["delete", "mpijob", name, "--wait=true", "--timeout=120s"], timeout=150, check=False)

    def events(self, name, uid):
        """The job's events.k8s.io/v1 Events: reason -> eventTime (seconds, float)."""
        raw = json.loads(self.kubectl(["get", "events.v1.events.k8s.io", "-o", "json"]))
        out = {}
        for e in raw.get("items", []):
            reg = e.get("regarding") or {}
            if reg.get("name") != name or (uid and reg.get("uid") not in (None, uid)):
                continue
            t = e.get("eventTime")
            if t and e.get("reason") not in out:
                out[e["reason"]] = parse_time(t)
        return out


RANK_IMAGE = "mpiswarm/openmpi:0.1.0"


def mpijob(name, **spec):
    """An MpiJob of the rank image with `spec`'s fields."""
    return {
        "apiVersion": "mpiswarm.io/v1alpha1",
        "kind": "MpiJob",
        "metadata": {"name": name},
        "spec": {"image": RANK_IMAGE, **spec},
    }


def pi_mpijob(name, ranks, cpus, samples, deadline_s, **spec):
    """An MpiJob running the rank image's pi over `samples` darts on `ranks`
    ranks of `cpus` (64 MiB each), failing at once (`backoffLimit: 0`)
    and after `deadline_s` seconds; `spec` adds fields (placement, profile)."""
    return mpijob(
        name,
        command=["/usr/local/bin/pi"],
        args=[samples],
        ranks=ranks,
        resources={"cpus": cpus, "memory": "64Mi"},
        runPolicy={"backoffLimit": 0, "activeDeadlineSeconds": deadline_s},
        **spec,
    )


def parse_time(text):
    """RFC 3339 with optional fraction, `Z` only (what the API server writes)."""
    from datetime import datetime, timezone

    text = text.rstrip("Z")
    if "." in text:
        head, frac = text.split(".")
        frac = (frac + "000000")[:6]
        text = f"{head}.{frac}"
        fmt = "%Y-%m-%dT%H:%M:%S.%f"
    else:
        fmt = "%Y-%m-%dT%H:%M:%S"
    return datetime.strptime(text, fmt).replace(tzinfo=timezone.utc).timestamp()


def load():
    """The 1-minute load average."""
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])
