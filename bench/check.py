#!/usr/bin/env python3
"""`peakbench check` under imposed slowdowns: does every real slowdown fail, naming its cause,
and does a quiet machine pass?

In a temporary directory with its own history (PEAKBENCH_DB) and disk directory:

1. learns a loopback baseline from LEARN checks (`check --learn LEARN`, 12 by default, the
   fewest a baseline is learned from), and runs QUIET checks against it: each one that fails
   is a false failure (a case reported ungateable is not one, and is counted apart);
2. runs TRIES checks under each imposed slowdown, each one set up before the check and taken
   away after it:
   - quota: a cgroup v1 CPU quota of 60 % of the CPUs (cpu.cfs_quota_us), the check inside it;
   - blkio: a cgroup v1 read throttle (blkio.throttle.read_bps_device) at half the baseline's
     1 MiB sequential-read rate on the disk holding the test file, the check inside it;
   - cpuset: a cgroup v1 cpuset of CPU 0 alone, the check inside it (the node "lost" its other
     CPUs: the check must name them, not run a smaller plan and pass);
   - spin: one busy process per CPU beside the check;
   - tbf: against a `peakbench net serve` in a network namespace behind a veth pair made here
     (10.231.62.0/30: nothing leaves the machine), with a baseline of its own learned the same
     way, a tbf on the host's end at half the baseline's TCP rate;
3. prints, per slowdown, how many checks failed (the target: every one), the cause kinds the
   failing cases named with their values, the exit codes and the check's time (median, min,
   max; the target: at most 60 s), and for the quiet checks the false failures with a 95 %
   upper bound (Clopper-Pearson, 0 of n: 1 - 0.025^(1/n)) and each case's spread between
   the checks (the CV of its medians, and 1.4826 MAD / median; the loopback TCP case's
   target: under 5 %).

    cargo build --release
    python3 bench/check.py --tries 10 --quiet 5      # as root; about 45 minutes on 2 cores
    python3 bench/check.py --tries 10 --quiet 40     # docs/check.md's targets; 65 minutes

Measure on a quiet machine: a build beside it makes the baseline itself slow. Everything it
creates (cgroups, the namespace, the veths, the server, the spinners, the temporary directory)
is removed at the end, also on an error or Ctrl-C.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

CGROUP = "/sys/fs/cgroup"
NS, HOST_IF, NS_IF = "pbcheck", "pbck0", "pbck1"
HOST_IP, NS_IP = "10.231.62.1", "10.231.62.2"


def sh(*cmd, check=True):
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


class Lab:
    def __init__(self, binary, work):
        self.binary, self.work = binary, work
        self.env = dict(os.environ, PEAKBENCH_DB=os.path.join(work, "history.db"))
        self.disk = os.path.join(work, "disk")
        os.makedirs(self.disk)
        self.cleanups = []

    def check(self, *args, cgroup=None):
        """One check: (exit code, seconds, verdict JSON or None)."""
        cmd = [self.binary, "check", "--dir", self.disk, "--json", *args]
        procs = None
        if cgroup:
            procs = [os.path.join(CGROUP, c, "cgroup.procs") for c in cgroup]

        def enter():
            for path in procs or []:
                with open(path, "w") as f:
                    f.write(str(os.getpid()))

        start = time.monotonic()
        out = subprocess.run(cmd, env=self.env, capture_output=True, text=True, preexec_fn=enter)
        took = time.monotonic() - start
        try:
            verdict = json.loads(out.stdout)
        except json.JSONDecodeError:
            verdict = None
            sys.stderr.write(out.stderr[-2000:])
        return out.returncode, took, verdict

    def learn(self, name, count, *args):
        """`check --learn count`: its progress lines pass through; returns the saved baseline
        as `baseline show --json` gives it."""
        cmd = [self.binary, "check", "--dir", self.disk, "--learn", str(count), "--save-as",
               name, "--json", *args]
        start = time.monotonic()
        out = subprocess.run(cmd, env=self.env, stdout=subprocess.PIPE, text=True)
        if out.returncode != 0:
            raise SystemExit(f"learning {name}: exit {out.returncode}")
        baseline = json.loads(out.stdout)
        print(f"  learned {name} from {count} checks in {time.monotonic() - start:.0f} s; notes: "
              f"{baseline.get('notes') or 'none'}", flush=True)
        return baseline

    def cgroup(self, controller, name, files):
        path = os.path.join(CGROUP, controller, name)
        os.makedirs(path, exist_ok=True)
        self.cleanups.append(lambda: remove_cgroup(path))
        for file, value in files.items():
            with open(os.path.join(path, file), "w") as f:
                f.write(value)
        return os.path.join(controller, name)

    def cleanup(self):
        for undo in reversed(self.cleanups):
            try:
                undo()
            except Exception as e:  # keep cleaning
                print(f"cleanup: {e}", file=sys.stderr)
        self.cleanups.clear()


def remove_cgroup(path):
    parent = os.path.dirname(path)
    with open(os.path.join(path, "cgroup.procs")) as f:
        for pid in f.read().split():
            try:
                with open(os.path.join(parent, "cgroup.procs"), "w") as p:
                    p.write(pid)
            except OSError:
                pass
    os.rmdir(path)


def median_of(baseline, prefix):
    """The median of the baseline case whose id starts with prefix, and its unit."""
    for case in baseline["cases"]:
        if case["id"].startswith(prefix):
            return statistics.median(case["samples"]), case["unit"]
    raise SystemExit(f"the baseline has no case {prefix}*: {[c['id'] for c in baseline['cases']]}")


def disk_of(path):
    """MAJ:MIN of the whole disk holding path (a throttle on a partition does not apply)."""
    dev = os.stat(path).st_dev
    majmin = f"{os.major(dev)}:{os.minor(dev)}"
    sysdir = os.path.realpath(f"/sys/dev/block/{majmin}")
    if os.path.exists(os.path.join(sysdir, "partition")):
        with open(os.path.join(os.path.dirname(sysdir), "dev")) as f:
            majmin = f.read().strip()
    return majmin


def ungateable(verdict):
    """Ids of the cases the check reported too noisy to gate."""
    return [c["id"] for c in (verdict or {}).get("cases", [])
            if str(c.get("status", "")).lower() == "ungateable"]


def failures(verdict):
    """(case id, ratio, [cause kind value unit]) of each failing case, and of each item of
    hardware the node lost ("lost", None, ["lost-hardware TEXT"])."""
    out = [("lost", None, [f"lost-hardware {loss['text']}"])
           for loss in (verdict or {}).get("lost", [])]
    for case in (verdict or {}).get("cases", []):
        if str(case.get("status", "")).lower() == "fail":
            causes = [" ".join(str(x) for x in (
                c["kind"],
                f"{c['value']:.3g}" if c.get("value") is not None else "",
                c.get("unit") or "") if x) for c in case.get("causes", [])]
            out.append((case["id"], case.get("ratio"), causes))
    return out


def spread_between_checks(values):
    """Per case, the spread of its median between checks: (checks, median, CV, robust CV),
    CV = stdev / mean and robust CV = 1.4826 MAD / median, both in per cent."""
    out = {}
    for cid, xs in sorted(values.items()):
        if len(xs) < 3:
            continue
        med = statistics.median(xs)
        mad = statistics.median(abs(x - med) for x in xs)
        out[cid] = (len(xs), med, 100 * statistics.stdev(xs) / statistics.fmean(xs),
                    100 * 1.4826 * mad / med if med else float("nan"))
    return out


def trial(lab, name, tries, setup, args=(), cgroup=None):
    codes, times, named, uncaused = [], [], {}, 0
    values = {}
    if tries == 0:
        return 0, 0
    for i in range(tries):
        undo = setup()
        try:
            code, took, verdict = lab.check(*args, cgroup=cgroup)
        finally:
            undo()
        codes.append(code)
        times.append(took)
        for case in (verdict or {}).get("cases", []):
            if case.get("value") is not None:
                values.setdefault(case["id"], []).append(case["value"])
        fails = failures(verdict)
        uncaused += sum(1 for _, _, causes in fails if not causes)
        for _, _, causes in fails:
            for cause in causes:
                kind = cause.split()[0]
                named.setdefault(kind, []).append(cause)
        shown = "; ".join(f"{cid} {'' if ratio is None else f'{ratio:.2f}x '}[{', '.join(c)}]"
                          for cid, ratio, c in fails)
        noisy = ", ".join(ungateable(verdict))
        print(f"  {name} {i + 1}/{tries}: exit {code}, {took:.1f} s: {shown or 'no failure'}"
              f"{'; ungateable: ' + noisy if noisy else ''}", flush=True)
    failed = sum(1 for c in codes if c == 1)
    if uncaused:
        print(f"{name}: {uncaused} failing case(s) with no cause found (target: 0)")
    target = "none" if name == "quiet" else "all"
    print(f"{name}: {failed} of {tries} failed (target: {target}); exit codes {codes}; check time "
          f"median {statistics.median(times):.1f} s (min {min(times):.1f}, max {max(times):.1f}; "
          f"target <= 60 s)")
    for kind, causes in sorted(named.items()):
        print(f"  cause {kind}: named {len(causes)} times, e.g. {causes[0]}")
    if name == "quiet":
        print("quiet: each case's median between checks (the loopback TCP case's CV: target "
              "< 5 %)")
        for cid, (n, med, cv, rcv) in spread_between_checks(values).items():
            print(f"  {cid}: {n} checks, median {med:.4g}, CV {cv:.1f} %, robust CV {rcv:.1f} %")
    return failed, tries


def nothing():
    return lambda: None


def spinners(count):
    def setup():
        procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                 for _ in range(count)]

        def undo():
            for p in procs:
                p.kill()
                p.wait()
        return undo
    return setup


def namespace_link(lab):
    sh("ip", "netns", "add", NS)
    lab.cleanups.append(lambda: sh("ip", "netns", "del", NS, check=False))
    sh("ip", "link", "add", HOST_IF, "type", "veth", "peer", "name", NS_IF)
    lab.cleanups.append(lambda: sh("ip", "link", "del", HOST_IF, check=False))
    sh("ip", "link", "set", NS_IF, "netns", NS)
    sh("ip", "addr", "add", f"{HOST_IP}/30", "dev", HOST_IF)
    sh("ip", "link", "set", HOST_IF, "up")
    sh("ip", "netns", "exec", NS, "ip", "addr", "add", f"{NS_IP}/30", "dev", NS_IF)
    sh("ip", "netns", "exec", NS, "ip", "link", "set", NS_IF, "up")
    sh("ip", "netns", "exec", NS, "ip", "link", "set", "lo", "up")
    server = subprocess.Popen(["ip", "netns", "exec", NS, lab.binary, "net", "serve", "--bind",
                               NS_IP], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    lab.cleanups.append(lambda: (server.kill(), server.wait()))
    time.sleep(1.0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", default="target/release/peakbench")
    ap.add_argument("--tries", type=int, default=10)
    ap.add_argument("--learn", type=int, default=12)
    ap.add_argument("--quiet", type=int, default=5, help="quiet checks against the baseline")
    ap.add_argument("--faults", default="quota,blkio,cpuset,spin,tbf")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("bench/check.py: run as root (cgroups, namespaces, tc)")
    binary = os.path.abspath(args.binary)
    faults = args.faults.split(",")
    cpus = os.cpu_count()
    print(f"load average {os.getloadavg()[0]:.2f}; {cpus} CPUs; {binary}")
    work = tempfile.mkdtemp(prefix="pb-check-bench-")
    lab = Lab(binary, work)
    try:
        loop = lab.learn("loop", args.learn)
        failed, n = trial(lab, "quiet", args.quiet, nothing) if args.quiet else (1, 0)
        if failed == 0:
            print(f"quiet: 0 false failures in {n}; 95 % upper bound {1 - 0.025 ** (1 / n):.2f}")
        if "quota" in faults:
            group = lab.cgroup("cpu", "pb-check-quota", {
                "cpu.cfs_period_us": "100000",
                "cpu.cfs_quota_us": str(int(0.6 * cpus * 100000)),
            })
            trial(lab, "quota 60 %", args.tries, nothing, cgroup=[group])
        if "blkio" in faults:
            mbps, unit = median_of(loop, "disk-seqread")
            rate = int(mbps * 1e6 / 2) if unit == "MB/s" else int(mbps / 2)
            group = lab.cgroup("blkio", "pb-check-blkio", {
                "blkio.throttle.read_bps_device": f"{disk_of(lab.disk)} {rate}",
            })
            print(f"blkio: {disk_of(lab.disk)} read at {rate / 1e6:.0f} MB/s (half of "
                  f"{mbps:.0f} {unit})")
            trial(lab, "blkio half rate", args.tries, nothing, cgroup=[group])
        if "cpuset" in faults and cpus > 1:
            group = lab.cgroup("cpuset", "pb-check-cpuset", {
                "cpuset.cpus": "0",
                "cpuset.mems": "0",
            })
            trial(lab, "cpuset of one CPU", args.tries, nothing, cgroup=[group])
        if "spin" in faults:
            trial(lab, f"spinner on each of {cpus} CPUs", args.tries, spinners(cpus))
        if "tbf" in faults:
            namespace_link(lab)
            link = lab.learn("link", args.learn, "--server", NS_IP)
            rate, unit = median_of(link, "net-tcp-throughput")
            mbit = int(rate / 2) if unit == "Mb/s" else int(rate * 1000 / 2)
            print(f"tbf: {HOST_IF} at {mbit} Mbit/s (half of {rate:.0f} {unit})")

            def tbf():
                sh("tc", "qdisc", "add", "dev", HOST_IF, "root", "tbf", "rate", f"{mbit}mbit",
                   "burst", "256kb", "latency", "50ms")
                return lambda: sh("tc", "qdisc", "del", "dev", HOST_IF, "root", check=False)
            trial(lab, "tbf half link", args.tries, tbf, args=("--server", NS_IP))
    finally:
        lab.cleanup()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
