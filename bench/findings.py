#!/usr/bin/env python3
"""Free runs of the quick preset: which verdicts and causes the findings give when nothing is
imposed, and what judging costs.

A free run on a quiet machine must name none of the imposed causes (a CPU quota, a cpuset, an
I/O throttle, a shaping qdisc, other processes holding a CPU-bound case): each one named here is
a false cause and is printed as such. The cost of the findings is what the run spends reading
the machine (`evidence.read_s` once, `evidence.watch_s` around each case) and judging
(`findings.judged_in_s`), beside the run's wall time; `peakbench explain latest` is timed too.
Every run goes into a temporary history, so the later runs are judged against the earlier ones.

    cargo build --release
    python3 bench/findings.py --runs 3
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PEAKBENCH = os.environ.get("PEAKBENCH", os.path.join(HERE, "..", "target", "release", "peakbench"))

# Causes that only an imposed limit explains; a free run must not name them.
IMPOSED = {"cpu-quota", "cpuset", "io-throttle", "qdisc"}


def false_causes(finding):
    out = []
    for cause in finding.get("causes", []):
        kind = cause["kind"]
        if kind in IMPOSED:
            out.append(f"{kind} {cause.get('value')}")
        elif kind == "other-processes" and (cause.get("value") or 0) >= 0.5:
            out.append(f"{kind} {cause.get('value'):.2f} CPU")
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--preset", default="quick")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    work = tempfile.mkdtemp(prefix="pb-findings-")
    db = os.path.join(work, "h.db")
    costs, walls, explains, false_total = [], [], [], 0
    for i in range(args.runs):
        out = os.path.join(work, f"run-{i}.json")
        start = time.perf_counter()
        subprocess.run([PEAKBENCH, "run", "--preset", args.preset, "--db", db, "--output", out,
                        "--html", os.path.join(work, f"run-{i}.html")],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=900)
        walls.append(time.perf_counter() - start)
        with open(out) as f:
            doc = json.load(f)
        findings = doc["findings"]
        read = doc.get("evidence", {}).get("read_s", 0.0)
        watch = sum(r.get("evidence", {}).get("watch_s", 0.0) for r in doc["results"])
        cost = read + watch + findings["judged_in_s"]
        costs.append(cost)
        verdicts = {}
        for f in findings["results"]:
            verdicts[f["verdict"]] = verdicts.get(f["verdict"], 0) + 1
        print(f"\nrun {i + 1}: {len(doc['results'])} results, {walls[-1]:.1f} s; findings cost "
              f"{cost * 1000:.0f} ms (evidence read {read * 1000:.0f} ms, watching the cases "
              f"{watch * 1000:.0f} ms, judging {findings['judged_in_s'] * 1000:.0f} ms)")
        print("  verdicts: " + ", ".join(f"{v} {n}" for v, n in sorted(verdicts.items())))
        for line in findings["summary"]:
            print(f"  {line}")
        for f in findings["results"]:
            wrong = false_causes(f)
            false_total += len(wrong)
            if wrong:
                print(f"  FALSE CAUSE on {f['label']}: {', '.join(wrong)}")
            elif f["verdict"] != "at-limit" and f.get("causes"):
                named = ", ".join(c["kind"] for c in f["causes"])
                print(f"  {f['verdict']:<11} {f['label']}: {named}")
        start = time.perf_counter()
        subprocess.run([PEAKBENCH, "explain", "latest", "--db", db], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
        explains.append(time.perf_counter() - start)
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    print(f"findings cost per run: median {statistics.median(costs) * 1000:.0f} ms "
          f"(min {min(costs) * 1000:.0f}, max {max(costs) * 1000:.0f}) of a median "
          f"{statistics.median(walls):.1f} s run")
    print(f"peakbench explain latest: median {statistics.median(explains) * 1000:.0f} ms")
    print(f"false causes over {args.runs} free runs: {false_total}")
    print(f"(documents and reports kept in {work})")
    return 1 if false_total else 0


if __name__ == "__main__":
    sys.exit(main())
