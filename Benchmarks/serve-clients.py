#!/usr/bin/env python3
"""`netreach serve` against its clients (issue 47, item 7): idle floods, slowloris, event-stream
churn, and /probe on a resolver that never answers. Prints measured numbers, one section each.

    Benchmarks/serve-clients.py [flood] [churn] [resolver]      # all three when none is named
    NETREACH=/path/to/netreach Benchmarks/serve-clients.py      # default: .build/debug/netreach

flood     2,000 idle connections (reconnecting 0.5 s after being closed) and 50 slowloris
          clients (a header byte every 2 s, reconnecting when closed) for DURATION s (30), driven
          by a process of their own (this script, --flood-driver); meanwhile this process asks
          /livez and /metrics, each on a fresh blocking connection, every 50 ms: p50/p99/max and
          failures, the server's CPU and descriptors, the load average, the driver's counts.
          FLOOD names the servers (default serve,nginx), each started afresh per run:
            serve        as systemd starts it (soft open-files limit 1,024), its defaults
            serve-nocap  the same with --max-connections 4000: nothing evicted
            old          the old limits (soft = hard = 1,024, no cap, timeouts of a day)
            nginx        the floor: nginx, 2 workers x 4,096 connections, /livez a `return 200`,
                         /metrics a file with serve's /metrics body
            nginx-cap    nginx, 2 workers x 512 connections: short of connections it closes
                         its idlest (serve's policy at about the same cap)
          ROUNDS (1) rounds, the targets in rotating order; PIN=1 runs the server on CPU 0 and
          the driver and sampler on CPU 1 (taskset), PIN=both each run both ways.
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
#
# Three processes: the server, the flood's driver (this script again, `--flood-driver`: 2,050
# sockets on one asyncio loop) and the sampler (this process: one blocking socket at a time, no
# event loop), so a sample's time is the server's and the kernel's, not the wait for a loop that
# also drives the flood.

FLOOD_IDLE = 2000
FLOOD_SLOWLORIS = 50


async def idle_client(port, counts, until):
    """Connects and sends nothing; when closed, waits 0.5 s and reconnects, until UNTIL."""
    while time.monotonic() < until:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            counts["refused"] += 1
            await asyncio.sleep(0.5)
            continue
        counts["connects"] += 1
        counts["held"] += 1
        try:
            await asyncio.wait_for(reader.read(), max(0.1, until - time.monotonic()))
            if time.monotonic() < until:
                counts["closed"] += 1
        except (OSError, asyncio.TimeoutError):
            pass
        counts["held"] -= 1
        writer.close()
        await asyncio.sleep(0.5)


async def slowloris(port, counts, until):
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
            if time.monotonic() < until:
                counts["slowloris closed"] += 1
        except OSError:
            counts["slowloris closed"] += 1
            await asyncio.sleep(0.5)


async def flood_driver(port, seconds):
    """The driver's process: the flood for SECONDS; "ready" on stdout once it has been in place
    for min(5, SECONDS / 4) s, then its counts as one JSON line at the end."""
    import json
    until = time.monotonic() + seconds
    counts = {"connects": 0, "held": 0, "closed": 0, "refused": 0, "slowloris closed": 0}
    tasks = [asyncio.create_task(idle_client(port, counts, until)) for _ in range(FLOOD_IDLE)]
    tasks += [asyncio.create_task(slowloris(port, counts, until)) for _ in range(FLOOD_SLOWLORIS)]
    await asyncio.sleep(min(5, seconds / 4))
    print(json.dumps({"ready": True, **counts}), flush=True)
    await asyncio.gather(*tasks, return_exceptions=True)
    print(json.dumps(counts), flush=True)


def get_blocking(port, path, timeout=10.0):
    """One GET on a fresh connection with a blocking socket: (status, body, seconds); status 0
    when it failed. Bounded: each receive by what is left of TIMEOUT, the loop by the close."""
    started = time.monotonic()
    request = f"GET {path} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n".encode()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as connection:
            connection.sendall(request)
            chunks = []
            while True:
                left = timeout - (time.monotonic() - started)
                if left <= 0:
                    raise TimeoutError
                connection.settimeout(left)
                chunk = connection.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        seconds = time.monotonic() - started
        head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
        status = int(head.split(b" ")[1]) if head.startswith(b"HTTP/1.1 ") else 0
        return status, body, seconds
    except (OSError, ValueError, IndexError):
        return 0, b"", time.monotonic() - started


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def process_tree(pid):
    """PID and its children (nginx's workers)."""
    pids = [pid]
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as children:
            pids += [int(child) for child in children.read().split()]
    except OSError:
        pass
    return pids


def cpu_seconds(pids):
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            pass
    return total


def descriptors(pids):
    total = 0
    for pid in pids:
        try:
            total += len(os.listdir(f"/proc/{pid}/fd"))
        except OSError:
            pass
    return total


def start_nginx(directory, connections, metrics_body, prefix):
    """nginx with 2 workers of CONNECTIONS each, /livez and a copy of serve's /metrics body;
    (process, port) once it answers (bounded: 10 s)."""
    port = free_port()
    with open(os.path.join(directory, "metrics"), "wb") as metrics:
        metrics.write(metrics_body)
    with open(os.path.join(directory, "nginx.conf"), "w") as conf:
        conf.write(f"""daemon off;
worker_processes 2;
worker_rlimit_nofile 8192;
pid {directory}/nginx.pid;
error_log {directory}/error.log;
events {{ worker_connections {connections}; }}
http {{
    access_log off;
    client_body_temp_path {directory}/tmp;
    proxy_temp_path {directory}/tmp;
    fastcgi_temp_path {directory}/tmp;
    uwsgi_temp_path {directory}/tmp;
    scgi_temp_path {directory}/tmp;
    client_header_timeout 75s;
    keepalive_timeout 75s;
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        location = /livez {{ default_type text/plain; return 200 "ok\\n"; }}
        location = /metrics {{ default_type text/plain; root {directory}; }}
    }}
}}
""")
    process = subprocess.Popen(list(prefix) + ["nginx", "-c", f"{directory}/nginx.conf", "-p", directory],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if get_blocking(port, "/livez", timeout=1)[0] == 200:
            return process, port
        time.sleep(0.05)
    process.kill()
    raise SystemExit("nginx did not start")


FLOOD_TARGETS = {
    "serve": "serve, defaults (soft 1,024 raised to hard; cap 1,000, evicting the idlest)",
    "serve-nocap": "serve --max-connections 4000 (no eviction)",
    "old": "serve, old limits (soft=hard=1024, no cap, timeouts 24h)",
    "nginx": "nginx, 2 workers x 4096 connections (no eviction)",
    "nginx-cap": "nginx, 2 workers x 512 connections (drains its idlest when short: eviction)",
}


def flood_run(target, pinned, metrics_body, scratch):
    """One run of the flood against TARGET: the printed line's numbers."""
    import json
    hard = min(resource.getrlimit(resource.RLIMIT_NOFILE)[1], 65536)
    server_prefix = ["taskset", "-c", "0"] if pinned else []
    client_prefix = ["taskset", "-c", "1"] if pinned else []
    if target == "serve":
        process, port, _ = start_serve([], server_prefix + ["prlimit", f"--nofile=1024:{hard}"])
    elif target == "serve-nocap":
        process, port, _ = start_serve(["--max-connections", "4000"],
                                       server_prefix + ["prlimit", f"--nofile=1024:{hard}"])
    elif target == "old":
        process, port, _ = start_serve(
            ["--max-connections", "100000", "--idle-timeout", "24h", "--header-timeout", "24h"],
            server_prefix + ["prlimit", "--nofile=1024:1024"])
    else:
        directory = tempfile.mkdtemp(dir=scratch)
        os.chmod(directory, 0o755)  # nginx's workers run as nobody
        process, port = start_nginx(directory, 4096 if target == "nginx" else 512, metrics_body, server_prefix)
    load_before = os.getloadavg()
    driver = subprocess.Popen(
        client_prefix + [sys.executable, os.path.abspath(__file__), "--flood-driver", str(port), str(DURATION)],
        stdout=subprocess.PIPE, text=True)
    until = time.monotonic() + DURATION
    ready = driver.stdout.readline()  # bounded: the driver prints it after at most 5 s
    if not ready.startswith("{"):
        driver.kill()
        stop(process)
        raise SystemExit("the flood's driver did not start")
    pids = process_tree(process.pid)
    cpu_before, driver_before, sampled_from = cpu_seconds(pids), cpu_seconds([driver.pid]), time.monotonic()
    results = {path: ([], 0) for path in ("/livez", "/metrics")}
    while time.monotonic() < until - 0.5:
        for path in results:
            status, _, seconds = get_blocking(port, path)
            latencies, failures = results[path]
            if status == 200:
                latencies.append(seconds)
            else:
                results[path] = (latencies, failures + 1)
        time.sleep(0.05)
    sampled = time.monotonic() - sampled_from
    cpu = (cpu_seconds(pids) - cpu_before) / sampled
    driver_cpu = (cpu_seconds([driver.pid]) - driver_before) / sampled
    held = descriptors(pids)
    try:
        counts = json.loads(driver.communicate(timeout=30)[0].strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, IndexError, ValueError):
        driver.kill()
        counts = {}
    load_after = os.getloadavg()
    stop(process)
    line = (f"  {target}{' (pinned)' if pinned else ''}: load {load_before[0]:.2f} -> {load_after[0]:.2f}; "
            f"CPU while sampled: server {cpu * 100:.0f}%, driver {driver_cpu * 100:.0f}% of a core; descriptors {held}; "
            f"idle connects {counts.get('connects', '?')}, closed by the server {counts.get('closed', '?')}, "
            f"refused {counts.get('refused', '?')}; slowloris closed {counts.get('slowloris closed', '?')}")
    print(line)
    for path, (latencies, failures) in results.items():
        print(f"  {target}{' (pinned)' if pinned else ''}: {path}: {percentiles(latencies)}, failed {failures}")
    sys.stdout.flush()


async def flood():
    targets = os.environ.get("FLOOD", "serve,nginx").split(",")
    rounds = int(os.environ.get("ROUNDS", "1"))
    pin = os.environ.get("PIN", "0")
    pinnings = {"0": [False], "1": [True], "both": [False, True]}[pin]
    print(f"## flood: {FLOOD_IDLE:,} idle connections + {FLOOD_SLOWLORIS} slowloris clients (driver in a process "
          f"of its own), /livez and /metrics on fresh connections every 50 ms from a blocking sampler; "
          f"{DURATION:.0f} s, {rounds} round(s), targets in rotating order; {os.cpu_count()} cores")
    for target in targets:
        print(f"  {target}: {FLOOD_TARGETS[target]}")
    if pin != "0":
        print("  pinned: the server on CPU 0 (taskset -c 0), the driver and the sampler on CPU 1")
    metrics_body = b""
    if any(target.startswith("nginx") for target in targets):
        # The reference serves what serve's /metrics says, byte for byte, as a file.
        process, port, _ = start_serve([])
        metrics_body = get_blocking(port, "/metrics")[1]
        stop(process)
        print(f"  nginx's /metrics: a copy of serve's, {len(metrics_body):,} bytes")
    original_affinity = os.sched_getaffinity(0)
    with tempfile.TemporaryDirectory(prefix="serve-clients-") as scratch:
        os.chmod(scratch, 0o755)
        for round_index in range(rounds):
            order = targets[round_index % len(targets):] + targets[:round_index % len(targets)]
            for pinned in pinnings:
                os.sched_setaffinity(0, {1} if pinned else original_affinity)
                for target in order:
                    flood_run(target, pinned, metrics_body, scratch)
    os.sched_setaffinity(0, original_affinity)


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
    if len(sys.argv) == 4 and sys.argv[1] == "--flood-driver":
        await flood_driver(int(sys.argv[2]), float(sys.argv[3]))
        return
    sections = sys.argv[1:] or ["flood", "churn", "resolver"]
    print(f"# serve-clients, {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}, {NETREACH}, "
          f"load {' '.join(f'{load:.2f}' for load in os.getloadavg())}")
    for section in sections:
        await {"flood": flood, "churn": churn, "resolver": resolver}[section]()


if __name__ == "__main__":
    asyncio.run(main())
