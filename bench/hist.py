#!/usr/bin/env python3
"""The cost of keeping the history and writing the report, against the sqlite3 command-line tool.

There is no standard tool that keeps benchmark histories, so the reference is the floor any
store must pay: the sqlite3 CLI inserting the same JSON document as one row into a table
(`peakbench import` also checks the file read-only first, parses the document, and writes one
indexed row per result). The report side is timed alone (no tool does the same work): it must
stay far below the seconds a benchmark run takes.

Alternates the two round by round on fresh databases and prints medians, CV and the ratio.

    cargo build --release
    python3 bench/hist.py --rounds 9 --results 500
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

HERE = os.path.dirname(os.path.abspath(__file__))
PEAKBENCH = os.environ.get("PEAKBENCH", os.path.join(HERE, "..", "target", "release", "peakbench"))
FIXTURE = os.path.join(HERE, "..", "tests", "fixtures", "report.json")


def timed(cmd):
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    return time.perf_counter() - start


def document(n, path):
    """The fixture with its results repeated (ids made unique) up to n results."""
    with open(FIXTURE) as f:
        doc = json.load(f)
    base = doc["results"]
    doc["results"] = []
    for i in range(n):
        r = dict(base[i % len(base)])
        r["id"] = f"{r['id']}-{i}"
        doc["results"].append(r)
    with open(path, "w") as f:
        json.dump(doc, f)


def summary(label, values, unit="ms"):
    med = statistics.median(values)
    cv = statistics.stdev(values) / statistics.mean(values) if len(values) > 1 else float("nan")
    print(f"{label:<34} median {med * 1e3:8.1f} {unit}  min {min(values) * 1e3:8.1f}  "
          f"max {max(values) * 1e3:8.1f}  cv {cv * 100:5.1f}%")
    return med


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--results", type=int, default=500, help="results in the document")
    args = parser.parse_args()
    sqlite3 = shutil.which("sqlite3")
    if not os.path.exists(PEAKBENCH):
        sys.exit("build first: cargo build --release")
    with tempfile.TemporaryDirectory() as tmp:
        doc = os.path.join(tmp, "doc.json")
        document(args.results, doc)
        size = os.path.getsize(doc)
        print(f"document: {args.results} results, {size / 1e6:.2f} MB; {args.rounds} alternating rounds")
        ours, theirs, html, md = [], [], [], []
        for i in range(args.rounds):
            db = os.path.join(tmp, f"pb{i}.db")
            ours.append(timed([PEAKBENCH, "import", doc, "--db", db]))
            if sqlite3:
                ref = os.path.join(tmp, f"ref{i}.db")
                theirs.append(timed([sqlite3, ref,
                                     "CREATE TABLE runs (id INTEGER PRIMARY KEY, report TEXT NOT NULL);"
                                     f"INSERT INTO runs (report) VALUES (readfile('{doc}'));"]))
            html.append(timed([PEAKBENCH, "report", "--db", db, "--html", os.path.join(tmp, "r.html")]))
            md.append(timed([PEAKBENCH, "report", "--db", db, "--markdown", os.path.join(tmp, "r.md")]))
        a = summary("peakbench import", ours)
        if theirs:
            b = summary("sqlite3 CLI insert of the blob", theirs)
            print(f"{'ratio import / sqlite3':<34} {a / b:8.2f}  (the extra is parsing and one row per result)")
        else:
            print("sqlite3: not installed, no reference (apt-get install sqlite3)")
        summary("peakbench report --html", html)
        summary("peakbench report --markdown", md)
        print(f"HTML size: {os.path.getsize(os.path.join(tmp, 'r.html')) / 1e3:.0f} kB")


if __name__ == "__main__":
    main()
