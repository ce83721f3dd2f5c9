#!/usr/bin/env python3
"""Where a route change's time goes in `netreach serve`, stage by stage, from the kernel's trace.

    sudo Benchmarks/serve-stages.py [--seconds 8] [--changes 150] [--to '...'] BINARY [BINARY...]

For each binary, runs `Benchmarks/run-serve.sh latency` (the harness's C reader makes each change
and reads both serve's event stream and `ip -o monitor`) and records, for SECONDS in its middle,
every thread's system calls and scheduler switches with `perf record` (system-wide, perf's own
left out). Then, for each change, the time from the reader's `sendto` (t0) to each stage:

    ip      the reader has `ip -o monitor`'s line (a read of 1-99 bytes)
    wake    the engine thread (`netreach-nl`) returns from `poll`
    read    it has read the notification (`recvmsg`)
    ask     it asks the kernel (its first `connect`), if it does
    event   it wakes the event loop (an 8-byte `write`: the eventfd), the first event being out
    queue   it wakes another thread with a futex (the watch queue's, which keeps the series)
    loop    the event loop thread (`NIO-*`) returns from `epoll_wait`
    writev  it writes the event to the socket
    sse     the reader has serve's event (a read of 100 bytes or more)

and prints the median and 90th percentile of each, and how many changes woke the queue before
the event was out. The trace slows every system call by a little (the medians are above the
harness's own); the stages' order and gaps are what it is for. Benchmarks/RESULTS.md, section 30.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
STAGES = ["ip", "wake", "read", "ask", "event", "queue", "loop", "writev", "sse"]
LINE = re.compile(r"^\s*(.+?)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\S+):\s*(.*)$")
# x86_64 system call numbers.
READ, WRITE, POLL, WRITEV, CONNECT, SENDTO, RECVMSG, FUTEX, EPOLL_WAIT = 0, 1, 7, 20, 42, 44, 45, 202, 232


def parse(text):
    """(microseconds, comm, event, syscall number, rest) for each traced system call."""
    events = []
    for line in text.splitlines():
        match = LINE.match(line)
        if not match:
            continue
        comm, _tid, _cpu, seconds, name, rest = match.groups()
        if not name.startswith("raw_syscalls:"):
            continue
        number = re.match(r"NR (\d+)", rest)
        if number:
            events.append((float(seconds) * 1e6, comm, name.split(":")[1], int(number.group(1)), rest))
    return events


def returned(rest):
    value = re.search(r"= (-?\d+)$", rest)
    return int(value.group(1)) if value else None


def stages(events):
    """Per change, each stage's time from t0 (those seen)."""
    starts = [i for i, e in enumerate(events) if e[1] == "latency" and e[2] == "sys_enter" and e[3] == SENDTO]
    changes = []
    for k, i in enumerate(starts):
        t0 = events[i][0]
        end = events[starts[k + 1]][0] if k + 1 < len(starts) else t0 + 1e6
        seen = {}
        for t, comm, kind, number, rest in events[i:]:
            if t >= end:
                break
            first = lambda stage: stage not in seen and seen.setdefault(stage, t - t0)
            engine, loop = comm == "netreach-nl", comm.startswith("NIO-")
            if engine and kind == "sys_exit" and number == POLL:
                first("wake")
            elif engine and kind == "sys_exit" and number == RECVMSG and "wake" in seen and (returned(rest) or 0) > 0:
                first("read")
            elif engine and kind == "sys_enter" and number == CONNECT and "read" in seen:
                first("ask")
            elif engine and kind == "sys_enter" and number == WRITE and re.search(r"\(\w+, \w+, 8,", rest):
                first("event")
            elif engine and kind == "sys_enter" and number == FUTEX and re.search(r"\(\w+, 81,", rest):
                first("queue")
            elif loop and kind == "sys_exit" and number == EPOLL_WAIT and "event" in seen:
                first("loop")
            elif loop and kind == "sys_enter" and number == WRITEV and "loop" in seen:
                first("writev")
            elif comm == "latency" and kind == "sys_exit" and number == READ:
                size = returned(rest) or 0
                if 0 < size < 100:
                    first("ip")
                elif size >= 100 and "writev" in seen:
                    first("sse")
        if all(stage in seen for stage in ["ip", "wake", "read", "event", "loop", "writev", "sse"]):
            changes.append(seen)
    return changes


def report(label, changes):
    print(f"{label}: {len(changes)} changes")
    for stage in STAGES:
        values = sorted(c[stage] for c in changes if stage in c)
        if values:
            p90 = values[min(len(values) - 1, int(len(values) * 0.9))]
            print(f"  {stage:7s} p50 {statistics.median(values):7.1f} µs   p90 {p90:7.1f} µs   ({len(values)})")
    early = sum(1 for c in changes if "queue" in c and c["queue"] < c["event"])
    print(f"  the queue woken before the event was out: {early} of {len(changes)}")


def run(binary, seconds, changes, destinations):
    env = dict(os.environ, NETREACH=binary, IDLE_WAIT="0", CHANGES=str(changes))
    if destinations is not None:
        env["SERVE_TO"] = destinations
    with tempfile.TemporaryDirectory() as work:
        harness = subprocess.Popen(
            [os.path.join(HERE, "run-serve.sh"), "latency"], env=env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            # The server is up once it listens; the changes start soon after.
            deadline = time.monotonic() + 120
            # (run-serve.sh runs a copy of the binary, in a directory of its own.)
            while subprocess.run(["pgrep", "-f", "netreach serve --listen 127.0.0.1:0"], capture_output=True).returncode != 0:
                if time.monotonic() > deadline or harness.poll() is not None:
                    sys.exit(f"serve-stages.py: the server did not start:\n{harness.stdout.read()}")
                time.sleep(0.05)
            time.sleep(0.5)
            data = os.path.join(work, "perf.data")
            subprocess.run(
                ["perf", "record", "-q", "-a", "-o", data,
                 "-e", "sched:sched_switch", "--exclude-perf",
                 "-e", "raw_syscalls:sys_enter,raw_syscalls:sys_exit", "--exclude-perf",
                 "--", "sleep", str(seconds)],
                check=True, stderr=subprocess.DEVNULL)
            output, _ = harness.communicate(timeout=900)
            text = subprocess.run(
                ["perf", "script", "-i", data, "-F", "comm,tid,cpu,time,event,trace"],
                capture_output=True, text=True, check=True).stdout
        finally:
            if harness.poll() is None:
                harness.terminate()
                harness.wait()
    p50 = next((line for line in output.splitlines() if line.strip().startswith("p50")), "")
    return stages(parse(text)), p50


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--changes", type=int, default=150)
    parser.add_argument("--to", default=None, help="SERVE_TO for run-serve.sh ('' is the internet path alone)")
    parser.add_argument("binaries", nargs="+")
    arguments = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("serve-stages.py: needs root (network namespaces, perf system-wide)")
    for binary in arguments.binaries:
        changes, p50 = run(os.path.abspath(binary), arguments.seconds, arguments.changes, arguments.to)
        if not changes:
            sys.exit(f"serve-stages.py: no whole change in the trace of {binary}")
        report(f"{binary} (harness, traced: {' '.join(p50.split())})", changes)


if __name__ == "__main__":
    main()
