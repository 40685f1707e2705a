#!/usr/bin/env python3
"""How peakbench reads the document of a large cluster run: 1,000 nodes and more (issue #34).

A cluster run writes about 70 KB per host with the default matrix plan (docs/cluster.md), so a
1,000-node run is a document of about 70 MB. This script makes such documents and times the
commands that read one, with their peak memory:

1. a real cluster run on the namespace cluster bench/cluster.py builds (8 hosts, the default
   plan, `sample:3` at 8 hosts), kept as the template (or `--template FILE`, a document of a
   cluster run you have);
2. from it, documents of N hosts for each N of `--hosts` (default 100,1000): host i is a copy
   of the template's host i mod T (T its hosts) under a name of its own, its node-local results,
   findings, inventory and evidence with it; its links are the template host's links, moved to
   the peers of its own block of T hosts; the matrices keep those links as `cells`, as peakbench
   writes matrices of more than 64 hosts;
3. `peakbench import FILE`, `peakbench show latest`, `peakbench explain FILE`, `peakbench report
   FILE --html OUT` on each, into a temporary history: wall time and peak resident memory
   (the child's ru_maxrss), and that memory per byte of the document, which is what
   `READ_BYTES_PER_BYTE` in src/result/validate.rs must cover.

    cargo build --release --features mpi
    python3 bench/bigdoc.py                          # as root: the namespace cluster
    python3 bench/bigdoc.py --template run.json --hosts 1000,10000

Everything it creates is in one temporary directory, removed at the end.
"""

import argparse
import copy
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PEAKBENCH = os.environ.get("PEAKBENCH", os.path.join(HERE, "..", "target", "release", "peakbench"))
TIME = "/usr/bin/time"  # GNU time (apt-get install time): the peak RSS of each command


def load_cluster_bench():
    spec = importlib.util.spec_from_file_location("cluster_bench", os.path.join(HERE, "cluster.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def real_run(hosts, out):
    """A real cluster run on `hosts` namespace hosts, its document written to `out`."""
    cb = load_cluster_bench()
    lab = cb.Lab(hosts, False)
    try:
        doc = os.path.join(lab.dir, "out.json")
        argv = [PEAKBENCH, "cluster", "run", "--no-history", "-o", doc] + cb.SCALE_ARGS
        cmd = lab.mpirun(argv, np=hosts)
        cb.run(cmd, timeout=1800)
        shutil.copy(doc, out)
    finally:
        lab.close()


def synthesize(template, n):
    """A document of `n` hosts made of the template's hosts (see the module's text)."""
    names = [h["name"] for h in template["cluster"]["hosts"]]
    t = len(names)
    width = len(str(n))
    new = [f"node-{i:0{width}d}" for i in range(n)]
    pattern = re.compile("|".join(re.escape(h) for h in sorted(names, key=len, reverse=True)))

    def moved(value, i):
        """`value` of template host i mod t as host i's: every template name to its peer in
        host i's block."""
        base = i - i % t
        text = json.dumps(value)
        text = pattern.sub(lambda m: new[(base + names.index(m.group(0))) % n], text)
        return json.loads(text)

    doc = copy.deepcopy(template)
    by_host = {}
    for r in template["results"]:
        by_host.setdefault(r.get("host", ""), []).append(r)
    finding_by_host = {}
    for f in (template.get("findings") or {}).get("results", []):
        finding_by_host.setdefault(f.get("host", ""), []).append(f)
    doc["results"] = [moved(r, i) for i in range(n) for r in by_host.get(names[i % t], [])]
    if template.get("findings"):
        doc["findings"]["results"] = [
            moved(f, i) for i in range(n) for f in finding_by_host.get(names[i % t], [])]
    if template.get("hosts"):
        doc["hosts"] = {new[i]: moved(template["hosts"][names[i % t]], i)
                        for i in range(n) if names[i % t] in template["hosts"]}
    cluster = doc["cluster"]
    tc = template["cluster"]
    cluster["ranks"] = n
    cluster["hosts"] = []
    for i in range(n):
        h = moved(tc["hosts"][i % t], i)
        h["ranks"] = [i]
        cluster["hosts"].append(h)
    if tc.get("evidence"):
        cluster["evidence"] = {new[i]: moved(tc["evidence"][names[i % t]], i)
                               for i in range(n) if names[i % t] in tc["evidence"]}
    for key in ("spread", "flagged", "differences", "failures"):
        if key in tc:
            # The first block's only, not grown with the hosts: the default template (the
            # matrix and collectives, no node-local suite) has no spread, flags or failures.
            cluster[key] = moved(tc[key], 0)
    matrices = []
    for m in tc.get("matrices", []):
        cells = []
        if m.get("cells"):
            links = [(a, b, v) for a, b, v in m["cells"]]
        else:
            links = [(a, b, v) for a, row in enumerate(m["values"])
                     for b, v in enumerate(row) if v is not None]
        for base in range(0, n, t):
            for a, b, v in links:
                if base + a < n and base + b < n:
                    cells.append([base + a, base + b, v])
        mm = moved({k: v for k, v in m.items() if k not in ("values", "cells", "hosts")}, 0)
        mm["hosts"] = new
        if n <= 64:
            grid = [[None] * n for _ in range(n)]
            for a, b, v in cells:
                grid[a][b] = v
            mm["values"] = grid
        else:
            mm["cells"] = cells
        matrices.append(mm)
    cluster["matrices"] = matrices
    # What names hosts outside those rebuilt above (the run's own host, the hosts on one
    # machine, a matrix's hosts left out) names the first block's, so that every name in the
    # document is one of its hosts; those lists are not grown to n.
    doc["host"] = moved(template["host"], 0)
    doc["config"] = moved(template["config"], 0)
    if template.get("findings"):
        doc["findings"]["run"] = moved(template["findings"].get("run", []), 0)
    if "shared_machines" in tc:
        cluster["shared_machines"] = moved(tc["shared_machines"], 0)
    return doc


def measure(path, work):
    """Each reader on the document at `path`, each through /usr/bin/time for its peak RSS:
    (command, seconds, peak RSS bytes, exit code)."""
    db = os.path.join(work, "history.db")
    if os.path.exists(db):
        os.remove(db)
    html = os.path.join(work, "report.html")
    stats = os.path.join(work, "time.txt")
    env = dict(os.environ, NO_COLOR="1")
    commands = [
        ("import", ["import", path]),
        ("show", ["show", "latest"]),
        ("explain", ["explain", path]),
        ("report --html", ["report", path, "--html", html]),
    ]
    rows = []
    for name, argv in commands:
        start = time.monotonic()
        p = subprocess.run([TIME, "-f", "%M", "-o", stats, PEAKBENCH] + argv + ["--db", db],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True)
        took = time.monotonic() - start
        with open(stats) as f:
            rss = int(f.read().strip().splitlines()[-1]) * 1024
        if p.returncode != 0:
            print(f"  {name}: exit {p.returncode}: {p.stderr.strip()[:300]}", file=sys.stderr)
        rows.append((name, took, rss, p.returncode))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--template", help="a cluster run's JSON document (default: make one)")
    parser.add_argument("--template-hosts", type=int, default=8)
    parser.add_argument("--hosts", default="100,1000", help="host counts, e.g. 100,1000,10000")
    parser.add_argument("--keep", metavar="DIR", help="keep the documents in DIR")
    args = parser.parse_args()
    if not os.path.exists(PEAKBENCH):
        sys.exit(f"no {PEAKBENCH}: cargo build --release --features mpi first")
    if not os.path.exists(TIME):
        sys.exit(f"no {TIME}: apt-get install time")
    work = tempfile.mkdtemp(prefix="peakbench-bigdoc-")
    try:
        template = args.template
        if not template:
            template = os.path.join(args.keep or work, "template.json")
            real_run(args.template_hosts, template)
        with open(template) as f:
            t = json.load(f)
        if not t.get("cluster"):
            sys.exit(f"--template {template}: not a cluster run's document")
        t_hosts = len(t["cluster"]["hosts"])
        t_bytes = os.path.getsize(template)
        print(f"template: {t_hosts} hosts, {t_bytes:,} bytes ({t_bytes / t_hosts:,.0f} per host); "
              f"load average {os.getloadavg()[0]:.1f}")
        print(f"{'hosts':>6} {'doc MB':>8} {'B/host':>7}  {'command':<14} {'seconds':>8} "
              f"{'peak RSS MB':>11} {'RSS/doc':>7}  exit")
        for n in [int(x) for x in args.hosts.split(",")]:
            doc = synthesize(t, n)
            path = os.path.join(args.keep or work, f"cluster-{n}.json")
            with open(path, "w") as f:
                json.dump(doc, f, indent=2)  # as peakbench writes it
            size = os.path.getsize(path)
            for name, took, rss, code in measure(path, work):
                print(f"{n:>6} {size / 1e6:8.1f} {size / n:7.0f}  {name:<14} {took:8.2f} "
                      f"{rss / 1e6:11.1f} {rss / size:7.1f}  {code}", flush=True)
            if not args.keep:
                os.remove(path)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
