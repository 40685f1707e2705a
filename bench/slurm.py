#!/usr/bin/env python3
"""`sbatch examples/cluster.sbatch` against the same run under plain `mpirun`, on one namespace cluster.

Builds the namespace cluster of bench/cluster.py (network namespaces on a bridge with only this
script's subnet, 10.231.61.0/24, each host named by a UTS namespace; `mpirun` through an rsh
agent running `ip netns exec`), and on the same namespaces a real Slurm as tests/slurm.rs builds
it (Debian's slurm-wlm and munge: munged on its own socket and key, slurmctld in the root
namespace as `ctl` on the bridge, one slurmd per namespace entered with `nsenter`, in a UTS
namespace named as the agent names the host, the lab's own slurm.conf: nothing under /etc is
touched). Then, in alternating rounds (the order flipped every round), the same
`peakbench cluster run` with the same options:

- slurm: `sbatch --wait examples/cluster.sbatch OPTIONS` (mpirun inside the batch job, its
  daemons started through srun);
- mpirun: `mpirun --host h0,h1,… OPTIONS` through the rsh agent.

Each is timed from the command's start (the submission, for sbatch: scheduling included) to
its document finished on disk, polled every 20 ms; not to the command's end, since `sbatch
--wait` learns of the job's end by polling at growing intervals (2 s, then longer), which would
add its polling to the figure.

Both launches get the same Open MPI settings (`--mca btl tcp,self` and the TCP interfaces
limited to the bridge's subnet). It checks that every document has every host (and the Slurm
one the job), and prints the median time of each launch, the ratio of the medians and the
median of the rounds' own ratios with its distribution-free confidence interval (bench/pair.py),
against the target: slurm / mpirun within 1 ± 0.10.

    cargo build --release --features mpi
    python3 bench/slurm.py --rounds 10 --hosts 3        # as root; apt-get install slurm-wlm munge

Everything it creates (daemons, namespaces and their processes, veths, the bridge, the
temporary directory) is removed at the end, also on an error or Ctrl-C.
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cluster  # noqa: E402
from pair import ci_note, paired_text  # noqa: E402

NET = 61  # 10.231.NET.0/24: bench/cluster.py has 60, tests/cluster.rs 41..45, tests/slurm.rs 51..53
cluster.NET = NET
SCRIPT = os.path.join(HERE, "..", "examples", "cluster.sbatch")


class Slurm:
    """A Slurm controller and one slurmd per host of `lab` (a bench/cluster.py Lab)."""

    def __init__(self, lab):
        self.lab = lab
        self.daemons = []
        self.dir = os.path.join(lab.dir, "slurm")
        try:
            self._configure()
            self._start()
        except BaseException:
            self.close()
            raise

    def path(self, name):
        return os.path.join(self.dir, name)

    def _configure(self):
        d = self.dir
        for sub in ["state", "munge", "pmix"] + [f"spool/{h}" for h in self.lab.hosts] + \
                [f"pmix-{h}" for h in self.lab.hosts]:
            os.makedirs(self.path(sub), exist_ok=True)
        os.chmod(self.lab.dir, 0o755)
        os.chmod(d, 0o755)
        nodes = "".join(f"NodeName={h} NodeAddr={a} CPUs={os.cpu_count()} State=UNKNOWN\n"
                        for h, a in zip(self.lab.hosts, self.lab.addrs))
        conf = (f"ClusterName=pbbench\nSlurmctldHost=ctl(10.231.{NET}.254)\n"
                f"SlurmctldPort={17000 + 2 * NET}\nSlurmdPort={17001 + 2 * NET}\n"
                f"AuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket={d}/munge/socket\n"
                f"SlurmUser=root\nSlurmdUser=root\nStateSaveLocation={d}/state\n"
                f"SlurmdSpoolDir={d}/spool/%n\nSlurmctldPidFile={d}/slurmctld.pid\n"
                f"SlurmdPidFile={d}/slurmd-%n.pid\nSlurmctldLogFile={d}/slurmctld.log\n"
                f"SlurmdLogFile={d}/slurmd-%n.log\nProctrackType=proctrack/linuxproc\n"
                "TaskPlugin=task/none\nJobAcctGatherType=jobacct_gather/none\n"
                "AccountingStorageType=accounting_storage/none\nSchedulerType=sched/builtin\n"
                "SelectType=select/linear\nMpiDefault=none\nReturnToService=2\n" + nodes +
                "PartitionName=lab Nodes=ALL Default=YES MaxTime=60 State=UP\n")
        with open(self.path("slurm.conf"), "w") as f:
            f.write(conf)
        with open(self.path("mpi.conf"), "w") as f:
            f.write(f"PMIxCliTmpDirBase={d}/pmix\n")
        with open(self.path("munge/key"), "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(self.path("munge"), 0o700)
        os.chmod(self.path("munge/key"), 0o600)
        cluster.sh("chown", "-R", "munge:munge", self.path("munge"))

    def _daemon(self, argv):
        self.daemons.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                             stdout=subprocess.DEVNULL,
                                             stderr=subprocess.DEVNULL))

    def _start(self):
        d, conf = self.dir, self.path("slurm.conf")
        # setpriv execs munged (runuser would stay its parent, and killing it would not end it).
        self._daemon(["setpriv", "--reuid=munge", "--regid=munge", "--init-groups", "munged",
                      "-F", "--force",
                      f"--socket={d}/munge/socket", f"--key-file={d}/munge/key",
                      f"--pid-file={d}/munge/pid", f"--log-file={d}/munge/log",
                      f"--seed-file={d}/munge/seed"])
        self._wait(lambda: os.path.exists(self.path("munge/socket")), 10, "munged")
        self._daemon(["unshare", "--uts", "sh", "-c", 'hostname ctl; exec slurmctld -D -f "$0"',
                      conf])
        for host, ns in zip(self.lab.hosts, self.lab.namespaces):
            self._daemon(["nsenter", f"--net=/run/netns/{ns}", "unshare", "--uts", "--mount",
                          "--propagation", "private", "sh", "-c",
                          'hostname "$0" && mount --bind "$1" "$2" && exec slurmd -D -f "$3"',
                          host, f"{d}/pmix-{host}", f"{d}/pmix", conf])

        def idle():
            out = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], env=self.env(),
                                 capture_output=True, text=True).stdout
            return sum(1 for line in out.splitlines() if line.strip() == "idle") == \
                len(self.lab.hosts)
        self._wait(idle, 60, "the Slurm nodes (idle)")

    def _wait(self, ready, seconds, what):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if ready():
                return
            time.sleep(0.2)
        raise RuntimeError(f"{what} not ready within {seconds} s (logs in {self.dir})")

    def env(self):
        env = dict(os.environ, SLURM_CONF=self.path("slurm.conf"))
        env.update(mpi_env(self.lab))
        return env

    def close(self):
        for proc in reversed(self.daemons):
            proc.kill()
            proc.wait()


def mpi_env(lab):
    """The Open MPI settings of both launches, as environment variables."""
    return {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
            "OMPI_MCA_btl": "tcp,self", "OMPI_MCA_btl_tcp_if_include": lab.subnet,
            "OMPI_MCA_oob_tcp_if_include": lab.subnet}


def finished(path):
    """Whether the document at path is written and finished (its status no longer running)."""
    try:
        with open(path) as f:
            return json.load(f).get("status") not in (None, "running")
    except (OSError, ValueError):
        return False


def timed(cmd, env, out, timeout):
    """Seconds from starting cmd to its document `out` finished (polled every 20 ms), then
    waits for cmd to end (its own process group, killed on timeout or Ctrl-C). The end of the
    command is not the mark: `sbatch --wait` polls the job's state at growing intervals (2 s,
    then longer), which would time its polling, not the run."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        while not finished(out):
            if proc.poll() is not None and not finished(out):
                break
            if time.monotonic() - start > timeout:
                raise RuntimeError(f"{' '.join(cmd)}: no document within {timeout} s")
            time.sleep(0.02)
        wall = time.monotonic() - start
        _, err = proc.communicate(timeout=timeout)
    except BaseException:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            time.sleep(1)
        raise
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {err.strip()[-800:]}")
    return wall


def check(path, hosts, slurm):
    with open(path) as f:
        doc = json.load(f)
    if doc["status"] != "complete" or sorted(doc["hosts"]) != sorted(hosts):
        raise RuntimeError(f"{path}: status {doc['status']}, hosts {sorted(doc['hosts'])}")
    job = doc["cluster"].get("job")
    if slurm and (not job or sorted(job["nodes"]) != sorted(hosts)):
        raise RuntimeError(f"{path}: the job is not recorded as it ran: {job}")
    if not slurm and job:
        raise RuntimeError(f"{path}: a job recorded outside Slurm: {job}")
    return doc


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--hosts", type=int, default=3)
    parser.add_argument("--options", default="--preset quick --phases local,matrix,collectives "
                        "-r 3 --matrix-duration 1s --collective-max-bytes 4MiB",
                        help="peakbench cluster run's options, the same for both launches")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/slurm.py: needs root (namespaces, daemons)")
    for tool in ("slurmctld", "slurmd", "munged", "sbatch", "mpirun", "nsenter"):
        if not shutil.which(tool):
            sys.exit(f"bench/slurm.py: no {tool}: apt-get install slurm-wlm munge openmpi-bin")
    options = args.options.split() + ["--no-history"]
    lab = cluster.Lab(args.hosts, pin=False)
    slurm = None
    times = {"slurm": [], "mpirun": []}
    ratios = []
    try:
        slurm = Slurm(lab)
        env = dict(os.environ, **mpi_env(lab))
        for r in range(args.rounds):
            got = {}
            order = ["slurm", "mpirun"] if r % 2 == 0 else ["mpirun", "slurm"]
            for launch in order:
                out = os.path.join(lab.dir, f"{launch}-{r}.json")
                if launch == "slurm":
                    cmd = ["sbatch", "--parsable", "--wait", f"--nodes={args.hosts}",
                           "--time=60", f"--output={slurm.path('job-%j.out')}", SCRIPT] + options
                    wall = timed(cmd, dict(slurm.env(), PEAKBENCH=cluster.PEAKBENCH,
                                           PEAKBENCH_OUTPUT=out), out, 3600)
                else:
                    cmd = lab.mpirun([cluster.PEAKBENCH, "cluster", "run", "-o", out] + options)
                    wall = timed(cmd, env, out, 3600)
                check(out, lab.hosts, launch == "slurm")
                got[launch] = wall
                times[launch].append(wall)
            ratios.append(got["slurm"] / got["mpirun"])
            print(f"round {r + 1}/{args.rounds}: slurm {got['slurm']:.2f} s, "
                  f"mpirun {got['mpirun']:.2f} s, ratio {ratios[-1]:.3f}", flush=True)
    finally:
        if slurm:
            slurm.close()
        lab.close()
    s, m = statistics.median(times["slurm"]), statistics.median(times["mpirun"])
    print(f"\n{args.hosts} hosts, {args.rounds} rounds, options: {args.options}")
    print(f"{'time to the document':<34} {'median s':>9} {'min':>7} {'max':>7}")
    print(f"{'sbatch examples/cluster.sbatch':<34} {s:9.2f} {min(times['slurm']):7.2f} "
          f"{max(times['slurm']):7.2f}")
    print(f"{'mpirun (rsh agent)':<34} {m:9.2f} {min(times['mpirun']):7.2f} "
          f"{max(times['mpirun']):7.2f}")
    verdict = "met" if abs(s / m - 1) <= 0.10 and abs(statistics.median(ratios) - 1) <= 0.10 \
        else "missed"
    print(f"slurm / mpirun: ratio of medians {s / m:.3f}, paired {paired_text(ratios)} "
          f"(target 1 ± 0.10: {verdict})")
    print(ci_note(len(ratios)))


if __name__ == "__main__":
    main()
