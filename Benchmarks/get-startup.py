#!/usr/bin/env python3
"""One small GET from a fresh process: curl against `netreach get` builds, without a shell's timer.

run-transfer.sh's `small` section times each client with `date` forked around it, which adds the
same ~2 ms to every row. This times `subprocess.run` of each client instead, in rounds that run
every client once and alternate their order (a slower moment weighs on all alike), and prints each
one's median, quartiles and ratio to curl's median. Benchmarks/RESULTS.md, section 26.

    Benchmarks/get-startup.py URL ROUNDS BINARY...   # BINARY: a netreach executable, or BareGet

Any server will do (run-transfer.sh's nginx, or `python3 -m http.server`); a client that fails
stops the run. Each BINARY runs from a fresh copy (in Benchmarks/.build, removed at the end).
Traffic goes only to URL, which should be a loopback address.
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def main() -> int:
    if len(sys.argv) < 4:
        print("usage: get-startup.py URL ROUNDS BINARY...", file=sys.stderr)
        return 2
    url, rounds, binaries = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    clients = {"curl": ["curl", "-s", "-o", "/dev/null", url]}
    # Each binary runs from a copy made now: the same executable started 1.3-1.6 ms slower from a
    # file written an hour before (its pages evicted from the page cache and read back since) than
    # from a fresh copy (Benchmarks/RESULTS.md, section 29), so builds are compared in one state.
    scratch = os.path.join(os.path.dirname(os.path.abspath(__file__)), ".build")
    os.makedirs(scratch, exist_ok=True)
    copies = tempfile.mkdtemp(prefix="get-startup-", dir=scratch)
    try:
        for index, binary in enumerate(binaries):
            copy = os.path.join(copies, f"{index}-{os.path.basename(binary)}")
            shutil.copy2(binary, copy)
            name = binary if binary not in clients else binary + " (again)"
            clients[name] = [copy, url] if binary.endswith("BareGet") else [copy, "get", "-q", "-o", "/dev/null", url]
        return measure(clients, rounds)
    finally:
        shutil.rmtree(copies, ignore_errors=True)


def measure(clients, rounds) -> int:
    times = {name: [] for name in clients}
    for round_number in range(rounds):
        order = list(clients) if round_number % 2 == 0 else list(reversed(clients))
        for name in order:
            started = time.perf_counter()
            result = subprocess.run(clients[name], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            elapsed = time.perf_counter() - started
            if result.returncode != 0:
                print(f"get-startup.py: {name} exited with {result.returncode}", file=sys.stderr)
                return 1
            times[name].append(elapsed * 1000)
    curl = statistics.median(times["curl"])
    print(f"| client | median ms | p25 | p75 | ratio to curl |  ({rounds} rounds)")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, values in times.items():
        median = statistics.median(values)
        quartiles = statistics.quantiles(values, n=4)
        print(f"| {name} | {median:.2f} | {quartiles[0]:.2f} | {quartiles[2]:.2f} | {median / curl:.2f}× |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
