#!/usr/bin/env python3
"""`netreach serve` against its clients (issue 47, item 7): idle floods, slowloris, event-stream
churn, and /probe on a resolver that never answers. Prints measured numbers, one section each.

    Benchmarks/serve-clients.py [flood] [churn] [resolver]      # all three when none is named
    NETREACH=/path/to/netreach Benchmarks/serve-clients.py      # default: .build/debug/netreach

flood     serve started as systemd starts it (soft open-files limit 1,024), 2,000 idle
          connections and 50 slowloris clients (a header byte every 2 s, reconnecting when
          closed) for DURATION s (30); meanwhile /livez and /metrics, each on a fresh connection
          every 50 ms: p50/p99/max and failures. The same-run baseline: the same load on a serve
          with the old limits (soft = hard = 1,024, no cap, idle and header timeouts of a day).
churn     CYCLES (10,000) event-stream clients, 16 at a time, each connects, reads its first
          event and closes; then serve's netreach_event_clients, the kernel's established
          connections to serve (ss), and serve's VmRSS against the VmRSS after 100 warm-up cycles.
resolver  (root) serve inside a namespace of its own whose /etc/netns/NAME/resolv.conf names
          127.0.0.1, where a UDP socket that never answers is bound (glibc's defaults: 5 s, 2
          attempts); 16 clients ask /probe for host names without pause (scrape timeout 10 s) for
          DURATION s; /metrics every 100 ms on a fresh connection, p50/p99/max, against the same
          measured for 5 s before the probes start; serve's thread count (/proc/PID/status) before
          and at most during.

Everything is on 127.0.0.1 (the resolver section's in its own namespace, removed on exit); every
loop is bounded in count and time.
"""
import asyncio
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NETREACH = os.environ.get("NETREACH", os.path.join(ROOT, ".build/debug/netreach"))
DURATION = float(os.environ.get("DURATION", "30"))
CYCLES = int(os.environ.get("CYCLES", "10000"))


def start_serve(arguments, prefix=()):
    """serve with ARGUMENTS; (process, port) once it says where it listens (bounded: 60 s)."""
    process = subprocess.Popen(
        list(prefix) + [NETREACH, "serve", "--listen", "127.0.0.1:0"] + arguments,
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    deadline = time.monotonic() + 60
    lines = []
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line:
            break
        lines.append(line.rstrip())
        found = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if found:
            # The rest of its standard error is drained, so serve never blocks on it.
            asyncio.get_event_loop().run_in_executor(None, process.stderr.read)
            return process, int(found.group(1)), lines
    process.kill()
    raise SystemExit("serve did not start: " + "\n".join(lines))


def stop(process):
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def status_field(pid, name):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(name + ":"):
                return int(line.split()[1])
    return None


def percentiles(samples):
    if not samples:
        return "no samples"
    ordered = sorted(samples)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]
    return f"p50 {pick(0.5) * 1000:.1f} ms, p99 {pick(0.99) * 1000:.1f} ms, max {ordered[-1] * 1000:.1f} ms (n={len(ordered)})"


async def get(port, path, timeout=10.0, headers=""):
    """One request on a fresh connection: (status, body, seconds); status 0 when it failed."""
    started = time.monotonic()
    try:
        async def exchange():
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(f"GET {path} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n{headers}\r\n".encode())
            await writer.drain()
            data = await reader.read()
            writer.close()
            return data
        data = await asyncio.wait_for(exchange(), timeout)
        head, _, body = data.partition(b"\r\n\r\n")
        status = int(head.split(b" ")[1]) if head.startswith(b"HTTP/1.1 ") else 0
        return status, body.decode(errors="replace"), time.monotonic() - started
    except (OSError, asyncio.TimeoutError, ValueError, IndexError):
        return 0, "", time.monotonic() - started


async def sample(port, paths, until, interval, headers=""):
    """Each of PATHS every INTERVAL s until UNTIL: {path: (latencies of 200s, failures)}."""
    results = {path: ([], 0) for path in paths}
    while time.monotonic() < until:
        for path in paths:
            status, _, seconds = await get(port, path, headers=headers)
            latencies, failures = results[path]
            if status == 200:
                latencies.append(seconds)
            else:
                results[path] = (latencies, failures + 1)
        await asyncio.sleep(interval)
    return results


# MARK: flood

async def idle_client(port, held, until):
    """Connects and sends nothing; reconnects when closed, until UNTIL."""
    while time.monotonic() < until:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.5)
            continue
        held[0] += 1
        try:
            await asyncio.wait_for(reader.read(), max(0.1, until - time.monotonic()))
        except (OSError, asyncio.TimeoutError):
            pass
        held[0] -= 1
        writer.close()
        await asyncio.sleep(0.5)


async def slowloris(port, closed, until):
    """A header a byte every 2 s; reconnects when closed, until UNTIL."""
    while time.monotonic() < until:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /livez HTTP/1.1\r\nHost: x\r\n")
            while time.monotonic() < until:
                await asyncio.sleep(2)
                writer.write(b"X")
                await writer.drain()
                if reader.at_eof():
                    break
            writer.close()
            closed[0] += 1
        except OSError:
            closed[0] += 1
            await asyncio.sleep(0.5)


async def flood_run(label, arguments, prefix):
    process, port, lines = start_serve(arguments, prefix)
    for line in lines:
        if "open files" in line:
            print(f"  {label}: {line}")
    until = time.monotonic() + DURATION
    held, closed = [0], [0]
    tasks = [asyncio.create_task(idle_client(port, held, until)) for _ in range(2000)]
    tasks += [asyncio.create_task(slowloris(port, closed, until)) for _ in range(50)]
    await asyncio.sleep(min(5, DURATION / 4))  # the flood in place
    results = await sample(port, ["/livez", "/metrics"], until, 0.05)
    print(f"  {label}: idle connections open at the end {held[0]}, slowloris connections closed by serve {closed[0]}, "
          f"serve's descriptors {len(os.listdir(f'/proc/{process.pid}/fd'))}")
    for path, (latencies, failures) in results.items():
        print(f"  {label}: {path}: {percentiles(latencies)}, failed {failures}")
    await asyncio.gather(*tasks, return_exceptions=True)
    stop(process)


async def flood():
    print("## flood: 2,000 idle connections + 50 slowloris clients, /livez and /metrics on fresh connections")
    hard = min(resource.getrlimit(resource.RLIMIT_NOFILE)[1], 65536)
    await flood_run("old limits (soft=hard=1024, no cap, timeouts 24h)",
                    ["--max-connections", "100000", "--idle-timeout", "24h", "--header-timeout", "24h"],
                    ["prlimit", "--nofile=1024:1024"])
    await flood_run(f"defaults (soft 1024, hard {hard})", [], ["prlimit", f"--nofile=1024:{hard}"])


# MARK: churn

async def stream_once(port):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /api/v1/events HTTP/1.1\r\nHost: bench\r\nAccept: text/event-stream\r\n\r\n")
    await writer.drain()
    # The header ends with \r\n\r\n, so the first \n\n is the end of the first event.
    await asyncio.wait_for(reader.readuntil(b"\n\n"), 10)
    writer.close()


async def churn_cycles(port, count):
    remaining = [count]
    failures = [0]

    async def worker():
        while remaining[0] > 0:
            remaining[0] -= 1
            try:
                await stream_once(port)
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError):
                failures[0] += 1
    await asyncio.gather(*[worker() for _ in range(16)])
    return failures[0]


def event_clients(body):
    found = re.search(r"^netreach_event_clients (\S+)$", body, re.M)
    return float(found.group(1)) if found else None


async def churn():
    print(f"## churn: {CYCLES:,} event-stream connect/read/close cycles, 16 at a time")
    process, port, _ = start_serve([])
    await churn_cycles(port, 100)
    await asyncio.sleep(1)
    before = status_field(process.pid, "VmRSS")
    started = time.monotonic()
    failures = await churn_cycles(port, CYCLES)
    took = time.monotonic() - started
    counted, waited = None, time.monotonic()
    while time.monotonic() - waited < 10:
        counted = event_clients((await get(port, "/metrics"))[1])
        if counted == 0:
            break
        await asyncio.sleep(0.05)
    zero_after = time.monotonic() - waited
    established = subprocess.run(
        ["ss", "-Htn", "state", "established", f"( sport = :{port} )"], capture_output=True, text=True).stdout
    after = status_field(process.pid, "VmRSS")
    print(f"  {CYCLES:,} cycles in {took:.1f} s, {failures} failed")
    print(f"  netreach_event_clients {counted} ({zero_after * 1000:.0f} ms after the last close); "
          f"established to serve (ss): {len(established.splitlines())}")
    print(f"  VmRSS after 100 warm-up cycles {before} kB, after {CYCLES:,} more {after} kB: "
          f"{(after - before) / 1024:+.1f} MB; VmHWM {status_field(process.pid, 'VmHWM')} kB")
    stop(process)


# MARK: resolver

def silent_resolver(namespace):
    """A UDP socket on 127.0.0.1:53 in NAMESPACE that reads nothing and answers nothing."""
    code = ("import socket,time\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
            "s.bind(('127.0.0.1',53))\nprint('bound',flush=True)\ntime.sleep(600)\n")
    process = subprocess.Popen(["ip", "netns", "exec", namespace, sys.executable, "-c", code],
                               stdout=subprocess.PIPE, text=True)
    if process.stdout.readline().strip() != "bound":
        raise SystemExit("the silent resolver did not start")
    return process


def threads_named(pid, prefix):
    count = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/comm") as comm:
                count += comm.read().startswith(prefix)
        except OSError:
            pass
    return count


async def probe_client(port, index, until, counts):
    n = 0
    while time.monotonic() < until:
        n += 1
        status, body, _ = await get(port, f"/probe?target=h{index}-{n}.example.net", timeout=15,
                                    headers="X-Prometheus-Scrape-Timeout-Seconds: 10\r\n")
        counts[status] = counts.get(status, 0) + 1


async def resolver_inner(namespace):
    """Runs inside the namespace (ip netns exec): serve, the probes, the samples."""
    process, port, _ = start_serve([])
    await asyncio.sleep(1)
    threads_before = status_field(process.pid, "Threads")
    baseline = await sample(port, ["/metrics"], time.monotonic() + 5, 0.1)
    until = time.monotonic() + DURATION
    counts = {}
    probes = [asyncio.create_task(probe_client(port, index, until, counts)) for index in range(16)]
    peak, lookups = [threads_before], [0]

    async def watch_threads():
        while time.monotonic() < until:
            peak[0] = max(peak[0], status_field(process.pid, "Threads"))
            lookups[0] = max(lookups[0], threads_named(process.pid, "netreach-lookup"))
            await asyncio.sleep(0.2)
    watcher = asyncio.create_task(watch_threads())
    await asyncio.sleep(2)
    loaded = await sample(port, ["/metrics"], until, 0.1)
    await asyncio.gather(watcher, *probes, return_exceptions=True)
    print(f"  /metrics before the probes (same serve): {percentiles(baseline['/metrics'][0])}, failed {baseline['/metrics'][1]}")
    print(f"  /metrics with 16 probes stuck on the resolver: {percentiles(loaded['/metrics'][0])}, failed {loaded['/metrics'][1]}")
    print(f"  threads: {threads_before} before, at most {peak[0]} during ({lookups[0]} netreach-lookup); "
          f"probe answers by status {dict(sorted(counts.items()))}")
    stop(process)


async def resolver():
    print(f"## resolver: 16 /probe clients on a resolver that never answers, {DURATION:.0f} s")
    if os.geteuid() != 0:
        print("  skipped: needs root (a network namespace)")
        return
    namespace = f"nrsc-{os.getpid()}"
    etc = f"/etc/netns/{namespace}"
    made_etc_netns = not os.path.exists("/etc/netns")
    subprocess.run(["ip", "netns", "add", namespace], check=True)
    resolver_process = None
    try:
        subprocess.run(["ip", "-n", namespace, "link", "set", "lo", "up"], check=True)
        os.makedirs(etc)
        with open(f"{etc}/resolv.conf", "w") as conf:
            conf.write("nameserver 127.0.0.1\n")
        resolver_process = silent_resolver(namespace)
        subprocess.run(["ip", "netns", "exec", namespace, sys.executable, os.path.abspath(__file__),
                        "--inner-resolver", namespace], check=True, timeout=DURATION + 120)
    finally:
        if resolver_process:
            resolver_process.kill()
            resolver_process.wait()
        shutil.rmtree(etc, ignore_errors=True)
        if made_etc_netns:
            try:
                os.rmdir("/etc/netns")
            except OSError:
                pass
        subprocess.run(["ip", "netns", "del", namespace])


async def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # 2,050 client sockets
    if len(sys.argv) == 3 and sys.argv[1] == "--inner-resolver":
        await resolver_inner(sys.argv[2])
        return
    sections = sys.argv[1:] or ["flood", "churn", "resolver"]
    print(f"# serve-clients, {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}, {NETREACH}")
    for section in sections:
        await {"flood": flood, "churn": churn, "resolver": resolver}[section]()


if __name__ == "__main__":
    asyncio.run(main())
