#!/usr/bin/env python3
"""CPU per path change of several `netreach` builds, reading the same changes at the same time.

    sudo Benchmarks/watch-cpu.py [--rounds 6] [--flaps 200] [--gap 0.015] BINARY BINARY...

Each round starts every binary as `watch --json --namespace NS` (the order rotates from round to
round), deletes and re-adds the namespace's default route FLAPS times, GAP seconds apart, and
reads the CPU time of each process (all threads, /proc/PID/task/*/schedstat) before and after:
two builds measured in the same round see the same changes and the same machine. Prints each
round and the median per build. The namespace is named nrwcpu-<pid> and deleted on exit.
Benchmarks/RESULTS.md, section 27.
"""
import argparse
import glob
import os
import statistics
import subprocess
import sys
import tempfile
import time

import watchlab


def cpu_ns(pid):
    total = 0
    for path in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try:
            with open(path) as file:
                total += int(file.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that ended between the listing and the read
    return total


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--flaps", type=int, default=200)
    parser.add_argument("--gap", type=float, default=0.015)
    parser.add_argument("binaries", nargs="+")
    options = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("watch-cpu.py: needs root (a network namespace)")
    namespace = f"nrwcpu-{os.getpid()}"
    results = {binary: [] for binary in options.binaries}
    try:
        watchlab.make(namespace)
        changes = 2 * options.flaps
        for round_number in range(options.rounds):
            shift = round_number % len(options.binaries)
            order = options.binaries[shift:] + options.binaries[:shift]
            with tempfile.TemporaryDirectory() as directory:
                processes = {}
                for index, binary in enumerate(order):
                    output = open(os.path.join(directory, f"{index}.lines"), "w+")
                    process = subprocess.Popen(
                        [binary, "watch", "--json", "--namespace", namespace], stdout=output)
                    processes[binary] = (process, output)
                # Every build has written its first line (the current path) before the changes.
                deadline = time.monotonic() + 30
                while any(os.path.getsize(output.name) == 0 for _, output in processes.values()):
                    if time.monotonic() > deadline:
                        sys.exit("watch-cpu.py: a watch printed no line within 30 s")
                    time.sleep(0.05)
                time.sleep(0.5)
                before = {binary: cpu_ns(process.pid) for binary, (process, _) in processes.items()}
                watchlab.flap(namespace, options.flaps, options.gap)
                time.sleep(0.5)
                line = [f"round {round_number + 1}:"]
                for binary in options.binaries:
                    process, output = processes[binary]
                    micros = (cpu_ns(process.pid) - before[binary]) / 1000 / changes
                    process.terminate()
                    process.wait(timeout=10)
                    output.seek(0)
                    lines = sum(1 for _ in output)
                    output.close()
                    results[binary].append(micros)
                    line.append(f"{binary} {micros:.1f} µs/change ({lines} lines)")
                print("  ".join(line), flush=True)
    finally:
        watchlab.remove(namespace)
    print(f"| build | CPU per change, median of {options.rounds} rounds | rounds |")
    print("| --- | ---: | --- |")
    for binary, values in results.items():
        rounds = ", ".join(f"{value:.0f}" for value in values)
        print(f"| `{binary}` | {statistics.median(values):.1f} µs | {rounds} |")


if __name__ == "__main__":
    main()
