#!/usr/bin/env python3
"""Issue 33's server targets against one `peakbench net serve` on loopback.

1. Eight `peakbench net --server` clients at once from one address, 3 repetitions each of TCP
   throughput and latency, `--runs` times: every client must exit 0 with 2 figures, every run.
2. Slot-release probes, with `--max-per-address 1` so that one held slot locks the address out:
   after each hostile client below, how long until a short test is accepted again, against the
   bound the server promises (STEP 5 s + the test's length + MARGIN 10 s; the slot is taken
   after the hello, so the hello's 3 s are not in it):
     - an echo never read: a latency client that sends 64 KiB messages and never reads back,
       keeping every connection open;
     - a client killed mid-test (SIGKILL), throughput and latency;
     - silent connections with `--key`: 8 connections that never answer the challenge take no
       test slot (a short test is accepted beside them at once) and are closed within 3 s.

    cargo build --release
    python3 bench/hostile.py --runs 5            # the target: 8 figures every time, 5 times
    python3 bench/hostile.py --runs 1 --quick    # a quick end-to-end check

It measures correctness, not speed: figures are pass/fail and seconds to compare with a bound.
Quote `uptime` beside the output; a loaded machine stretches the times, not the outcomes.
"""

import argparse
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PEAKBENCH = os.environ.get("PEAKBENCH", os.path.join(HERE, "..", "target", "release", "peakbench"))
STEP, MARGIN, HELLO = 5.0, 10.0, 3.0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A `net serve` on a free loopback port; stopped on exit."""

    def __init__(self, *flags):
        self.port = free_port()
        self.proc = subprocess.Popen(
            [PEAKBENCH, "net", "serve", "--bind", "127.0.0.1", "--port", str(self.port), *flags],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        until = time.time() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.time() > until:
                    sys.exit("the server did not listen")
                time.sleep(0.05)
        time.sleep(0.5)  # the connection that found it listening is done with

    @property
    def addr(self):
        return f"127.0.0.1:{self.port}"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait()


class Control:
    """A control connection driven by hand (the protocol of docs/net.md)."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=15)
        self.file = self.sock.makefile("rb")

    def recv(self):
        while True:
            line = self.file.readline()
            if not line:
                raise RuntimeError("the server closed the control connection")
            msg = json.loads(line)
            if msg["type"] != "challenge":
                return msg

    def hello(self, test):
        self.sock.sendall((json.dumps({"type": "hello", "peakbench": 2, "test": test}) + "\n").encode())
        return self.recv()

    def close(self):
        self.file.close()
        self.sock.close()


def spec(mode, streams=1, msg=1, duration_ms=100):
    return {"proto": "tcp", "mode": mode, "msg_bytes": msg, "streams": streams, "omit_ms": 0,
            "duration_ms": duration_ms, "reverse": False, "rate_bps": None}


def accepted_test(port, test):
    """A control connection on which `test` was accepted, retrying `busy` for 10 s."""
    until = time.time() + 10
    while True:
        c = Control(port)
        reply = c.hello(test)
        if reply["type"] == "accepted":
            return c, reply
        c.close()
        if not reply.get("error", "").startswith("busy") or time.time() > until:
            sys.exit(f"the server refused the hostile client's test: {reply}")
        time.sleep(0.2)


def join_data(accepted, streams):
    out = []
    for i in range(streams):
        s = socket.create_connection(("127.0.0.1", accepted["ports"][0]), timeout=15)
        s.sendall(struct.pack("<QI", accepted["token"], i))
        out.append(s)
    return out


def probe(port, within):
    """Seconds until a short latency test is accepted (and then completed), or None."""
    start = time.time()
    while True:
        c = Control(port)
        reply = c.hello(spec("latency"))
        if reply["type"] == "accepted":
            data = join_data(reply, 1)
            c.recv()  # ready
            for s in data:
                s.close()
            c.close()
            return time.time() - start
        c.close()
        if not reply.get("error", "").startswith("busy"):
            sys.exit(f"probe refused for another reason: {reply}")
        if time.time() - start > within:
            return None
        time.sleep(0.2)


def eight_clients(runs, duration):
    print(f"== 8 clients x 3 repetitions (TCP throughput + latency, {duration}) from 127.0.0.1, {runs} runs")
    failures = 0
    with Server() as server:
        for run in range(1, runs + 1):
            cmd = [PEAKBENCH, "net", "--json", "--no-history", "--server", server.addr, "--mode",
                   "throughput,latency", "-r", "3", "--omit", "0s", "--warmup", "0s", "--duration", duration]
            start = time.time()
            procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                     for _ in range(8)]
            figures, errors = 0, []
            for p in procs:
                out, err = p.communicate(timeout=300)
                if p.returncode == 0:
                    results = json.loads(out)["results"]
                    figures += sum(1 for r in results if (r.get("value") or 0) > 0) == 2
                else:
                    errors.append(err.strip().splitlines()[-1] if err.strip() else f"exit {p.returncode}")
            ok = figures == 8
            failures += not ok
            print(f"run {run}: {figures}/8 clients with both figures in {time.time() - start:.1f} s"
                  + ("" if ok else f"  FAIL: {errors}"))
    return failures


def unread_echo():
    length = 1.0
    with Server("--max-per-address", "1") as server:
        c, accepted = accepted_test(server.port, spec("latency", msg=65536, duration_ms=int(length * 1000)))
        data = join_data(accepted, 1)
        c.recv()  # ready
        ready = time.time()
        data[0].settimeout(0.3)
        blocked = 0
        while blocked < 3 and time.time() - ready < 5:
            try:
                data[0].send(b"\1" * 65536)
            except (socket.timeout, BlockingIOError):
                blocked += 1
        bound = length + MARGIN
        waited = probe(server.port, bound + 5)
        back = None if waited is None else time.time() - ready
        c.close()
        for s in data:
            s.close()
        return "echo never read", back, bound


def killed(mode):
    length = 3.0
    with Server("--max-per-address", "1") as server:
        victim = subprocess.Popen(
            [PEAKBENCH, "net", "--no-history", "--server", server.addr, "--mode", mode, "--duration",
             f"{length}s", "--omit", "0s", "--warmup", "0s", "-r", "1"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)
        victim.kill()
        victim.wait()
        killed_at = time.time()
        waited = probe(server.port, length + MARGIN + 5)
        back = None if waited is None else time.time() - killed_at
        return f"client killed mid-{mode}", back, length + MARGIN


def silent_preauth():
    with tempfile.TemporaryDirectory() as d:
        key = os.path.join(d, "key")
        with open(key, "wb") as f:
            f.write(os.urandom(32))
        os.chmod(key, 0o600)
        with Server("--key", key, "--max-per-address", "1") as server:
            silent = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(8)]
            opened = time.time()
            time.sleep(0.3)
            out = subprocess.run(
                [PEAKBENCH, "net", "--json", "--no-history", "--server", server.addr, "--mode", "latency",
                 "--key", key, "-r", "1", "--warmup", "0s", "--duration", "200ms"],
                capture_output=True, text=True, timeout=60)
            served = out.returncode == 0
            closed = []
            for s in silent:
                s.settimeout(15)
                try:
                    while s.recv(4096):
                        pass
                except OSError:
                    pass
                closed.append(time.time() - opened)
                s.close()
            return served, max(closed)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="runs of the 8-client target (default 5)")
    ap.add_argument("--duration", default="500ms", help="each repetition's --duration (default 500ms)")
    ap.add_argument("--quick", action="store_true", help="the 8-client target only once, short")
    args = ap.parse_args()
    if not os.path.exists(PEAKBENCH):
        sys.exit(f"{PEAKBENCH} not found: cargo build --release (or set PEAKBENCH)")
    print(f"uptime: {os.getloadavg()}")
    failures = eight_clients(1 if args.quick else args.runs, "150ms" if args.quick else args.duration)
    print("== slot-release probes (--max-per-address 1): seconds until the address is served again")
    for name, back, bound in [unread_echo(), killed("throughput"), killed("latency")]:
        ok = back is not None and back <= bound + 1
        failures += not ok
        shown = "never" if back is None else f"{back:.1f} s"
        print(f"{name:28} back after {shown:>8}  (bound: length + margin = {bound:.0f} s)  {'ok' if ok else 'FAIL'}")
    served, closed = silent_preauth()
    ok = served and closed <= HELLO + 1
    failures += not ok
    print(f"{'8 silent pre-auth (--key)':28} keyed test served beside them: {served}; "
          f"all closed after {closed:.1f} s (bound {HELLO:.0f} s)  {'ok' if ok else 'FAIL'}")
    print("all targets met" if failures == 0 else f"{failures} target(s) missed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
