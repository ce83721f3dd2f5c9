#!/usr/bin/env python3
"""Where a route change's time goes in `netreach watch --json`: in the kernel or in our own code.

    sudo Benchmarks/watch-stages.py [--flaps 100] [--gap 0.015] [--syscalls] BINARY [BINARY...]

For each binary in turn: starts `BINARY watch --json --namespace NS` in a namespace of its own
(a veth, an address, a default route), records the engine thread's system calls with `perf
record` while the default route is deleted and added back FLAPS times, GAP seconds apart, and
splits each change from the engine's wake-up (`poll` returns) to its line (`write` to standard
output) into:

    wake    poll returns .. the first recvmsg (the loop's bookkeeping)
    parse   the notification read .. the next system call (parsing and absorbing it)
    prepare .. the first connect (deciding what to ask)
    ask     the first connect .. the answer read (connects, getsockname, RTM_GETROUTE: mostly kernel)
    in kernel  of the ask, the time inside its system calls (the kernel answering)
    line    the answer (or the failed connect) .. the line's write (the path, its JSON)
    total   wake-up .. the line's write
    ours    the time outside system calls, all stages together

and prints the median of each, for all changes and for route adds (the connect succeeds: the
socket's source, then both route lookups) and deletes (the connect fails) apart. With --syscalls it
also prints each change's system calls in order, up to the line's `write`: the median time of our
own code before each call and of the kernel inside it, so a stage can be read call by call. A GAP
of 2 ms keeps the process's code and data in the caches; 15 ms (the default, as the latency
harness's) lets other processes evict them, as between real changes. Benchmarks/RESULTS.md,
sections 31, 33 and 35.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import watchlab

LINE = re.compile(r"^\s*(.+?)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+raw_syscalls:(sys_enter|sys_exit):\s+NR (\d+)(.*)$")
WRITE, POLL, CONNECT, RECVFROM, RECVMSG, GETSOCKNAME = 1, 7, 42, 45, 47, 51
CALL_NAMES = {
    1: "write", 7: "poll", 42: "connect", 44: "sendto", 45: "recvfrom", 46: "sendmsg", 47: "recvmsg",
    51: "getsockname",
}


def changes(trace):
    """Each change as a list of (microseconds, 'enter'|'exit', number, first argument or result)."""
    found, current = [], None
    for line in trace.splitlines():
        match = LINE.match(line)
        if not match or match.group(1) != "netreach-nl":
            continue
        when, kind, number, rest = float(match.group(4)) * 1e6, match.group(5)[4:], int(match.group(6)), match.group(7)
        detail = rest.split("(")[1].split(",")[0] if kind == "enter" else rest.split("=")[-1].strip()
        if kind == "exit" and number == POLL:
            current = [(when, kind, number, detail)]
        elif current is not None:
            current.append((when, kind, number, detail))
            if kind == "enter" and number == POLL:
                found.append(current)
                current = None
    return found


def stages(change):
    """The stages of one change that wrote a line, or None."""
    start = change[0][0]
    line = next((t for t, kind, number, detail in change if kind == "enter" and number == WRITE and detail == "1"), None)
    if line is None:
        return None
    enters = [(t, number) for t, kind, number, _ in change if kind == "enter" and t <= line]
    exits = [(t, number) for t, kind, number, _ in change if kind == "exit" and t <= line]
    first_read = next((t for t, n in enters if n in (RECVFROM, RECVMSG)), None)
    read_done = next((t for t, n in exits if n in (RECVFROM, RECVMSG)), None)
    after_read = next((t for t, n in enters if read_done is not None and t > read_done), None)
    first_connect = next((t for t, n in enters if n == CONNECT), None)
    # The last system call before the line: the answer's read, or the connect that failed.
    last_exit = max(t for t, _ in exits)
    ours, previous = 0.0, start
    for t, kind, _, _ in change:
        if t > line:
            break
        if kind == "enter":
            ours += t - previous
        else:
            previous = t
    result = {"total": line - start, "ours": ours}
    result["kind"] = "add" if any(n == GETSOCKNAME for _, n in enters) else "delete"
    if first_read is not None:
        result["wake"] = first_read - start
    if read_done is not None and after_read is not None:
        result["parse"] = after_read - read_done
    if first_connect is not None and after_read is not None:
        result["prepare"] = first_connect - after_read
        result["ask"] = last_exit - first_connect
        inside, entered = 0.0, None
        for t, kind, _, _ in change:
            if t < first_connect or t > last_exit:
                continue
            if kind == "enter":
                entered = t
            elif entered is not None:
                inside += t - entered
                entered = None
        result["in kernel"] = inside
    result["line"] = line - last_exit
    return result


def calls(change):
    """One change's system calls up to the line's `write`: (name, µs of ours before it, µs inside it)."""
    found, previous, entered = [], change[0][0], None
    for t, kind, number, detail in change:
        if kind == "enter":
            entered = (t, number, t - previous)
            if number == WRITE and detail == "1":
                found.append(("write (the line)", t - previous, None))
                return found
        elif entered is not None:
            found.append((CALL_NAMES.get(entered[1], str(entered[1])), entered[2], t - entered[0]))
            previous, entered = t, None
    return None


def print_calls(binary, changes_of_kind, label):
    """The median of each position's times over the changes whose calls are the most common sequence."""
    sequences = [c for c in map(calls, changes_of_kind) if c is not None]
    if not sequences:
        return
    shapes = {}
    for sequence in sequences:
        shapes.setdefault(tuple(name for name, _, _ in sequence), []).append(sequence)
    shape, chosen = max(shapes.items(), key=lambda item: len(item[1]))
    print(f"\n`{binary}`, {label}: {len(chosen)} of {len(sequences)} changes made these calls")
    print("| # | call | before (ours) | inside |")
    print("| ---: | --- | ---: | ---: |")
    for index, name in enumerate(shape):
        before = statistics.median(s[index][1] for s in chosen)
        inside = [s[index][2] for s in chosen if s[index][2] is not None]
        inside_text = f"{statistics.median(inside):.1f}" if inside else "-"
        print(f"| {index + 1} | {name} | {before:.1f} | {inside_text} |")


def measure(binary, flaps, gap):
    namespace = f"nrwstage-{os.getpid()}"
    watch = None
    try:
        watchlab.make(namespace)
        with tempfile.TemporaryDirectory() as work:
            lines = os.path.join(work, "lines")
            with open(lines, "w") as out:
                watch = subprocess.Popen([binary, "watch", "--json", "--namespace", namespace], stdout=out)
            deadline = time.monotonic() + 10
            while os.path.getsize(lines) == 0:
                if time.monotonic() > deadline or watch.poll() is not None:
                    sys.exit(f"{binary} watch printed nothing")
                time.sleep(0.05)
            time.sleep(0.5)  # the nameserver watch starts after the first path
            data = os.path.join(work, "perf.data")
            seconds = int(flaps * 2 * (gap + 0.01)) + 3
            perf = subprocess.Popen(
                ["perf", "record", "-q", "-o", data, "-e", "raw_syscalls:sys_enter,raw_syscalls:sys_exit",
                 "-p", str(watch.pid), "--", "sleep", str(seconds)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.5)
            watchlab.flap(namespace, flaps, gap)
            perf.wait(timeout=seconds + 30)
            trace = subprocess.run(["perf", "script", "-i", data], capture_output=True, text=True, check=True).stdout
    finally:
        if watch is not None:
            watch.terminate()
            watch.wait(timeout=10)
        watchlab.remove(namespace)
    measured = []
    for change in changes(trace):
        split = stages(change)
        if split is not None:
            split["change"] = change
            measured.append(split)
    return measured


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flaps", type=int, default=100)
    parser.add_argument("--gap", type=float, default=0.015)
    parser.add_argument("--syscalls", action="store_true", help="each change's system calls, in order")
    parser.add_argument("binaries", nargs="+")
    arguments = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("watch-stages.py: needs root (a network namespace, perf)")
    names = ["wake", "parse", "prepare", "ask", "in kernel", "line", "total", "ours"]
    print(f"| build (gap {arguments.gap * 1000:g} ms) | changes | " + " | ".join(names) + " |")
    print("| --- | --- | " + " | ".join("---:" for _ in names) + " |")
    for binary in arguments.binaries:
        measured = measure(binary, arguments.flaps, arguments.gap)
        for label, kinds in (("all", ("add", "delete")), ("route add", ("add",)), ("route delete", ("delete",))):
            chosen = [s for s in measured if s["kind"] in kinds]
            medians = []
            for name in names:
                values = [s[name] for s in chosen if name in s]
                medians.append(f"{statistics.median(values):.1f}" if values else "-")
            print(f"| `{binary}` | {label}: {len(chosen)} | " + " | ".join(medians) + " µs |")
        if arguments.syscalls:
            for kind in ("add", "delete"):
                print_calls(binary, [s["change"] for s in measured if s["kind"] == kind], f"route {kind}")


if __name__ == "__main__":
    main()
