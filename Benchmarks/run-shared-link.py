#!/usr/bin/env python3
"""Compares `netreach condition` (a userspace TCP proxy) with the kernel's shaper (tc tbf) on a shared link.

Parts (all in one run unless --only picks some):

  share     FLOWS (4) parallel downloads of SIZE (512 KiB) each at 2 Mbit/s downstream, three cases
            (--cases picks some):
              tbf             kernel reference: two network namespaces made for the run, a veth pair
                              between them (10.231.0.1/30 server, 10.231.0.2/30 client) and
                              `tc qdisc add dev <server veth> root tbf rate 2mbit burst 32kbit latency 400ms`
                              on the server side's egress;
              shared          `netreach condition --down-bandwidth 2mbit` on loopback;
              per-connection  the same with --bandwidth-per-connection (skipped with a note when the
                              binary does not know the flag).
            Per case: aggregate kbit/s (all bytes * 8 / (last byte of all - first connect)), each
            flow's kbit/s (its bytes * 8 / (its last byte - its connect)) and Jain's fairness index
            over the flows' completion times (the target) and over their rates (information). The
            clients connect all, then ask all at once; even so, on tbf's FIFO the flow whose first
            window is queued first keeps ~1.7-2x the others' rate (measured: 0.89-0.95 by rates,
            0.94-0.97 by completion times; with requests sent on connect the others' SYN-ACKs waited
            behind its queue and the index by times fell to 0.86).
            Targets: tbf's aggregate within +-10 % of 2000 kbit/s (the reference is sane); netreach
            shared's aggregate within +-10 % of tbf's and of 2000 kbit/s; fairness (completion times)
            >= 0.9 for tbf and netreach shared; per-connection aggregate >= 3 x shared aggregate.
  change    one 2 MiB download through `condition --profile edge` (240 kbit/s down); 3 s after the
            first byte the listener's conditions are PUT to {"profile":"lte"} (50 Mbit/s down).
            Target: PUT -> last byte <= 1.0 s (the bytes not yet on the wire follow the new
            conditions).
  release   `condition --down-bandwidth 400kbit` (50 kB/s): a timeout fault on downstream holds a
            684000-byte response until the proxy has read all of it and at least --hold s (15), then
            the fault is DELETEd. Target: DELETE -> last byte in [0.9, 1.2] x 684000/50000 s (the held
            bytes leave at the link's rate, not in one burst). The hold is longer than the transfer's
            13.68 s on purpose: a proxy that schedules bytes when it reads them (the bug) has them all
            due by then and sends them in one burst; after a 1 s hold it would still have ~12.7 s of
            its old schedule left and pass.
  rate      does the shaped rate hold under load? One download of ~8 s of the profile's downstream
            rate (--rate-profile, dsl: 2 Mbit/s) through `netreach condition --profile P` on loopback
            and through `tc qdisc add dev <server veth> root tbf rate R burst B latency 400ms` in a
            fresh namespace pair, R the profile's rate and B the conditioner's burst (one slice,
            10 ms of R, at least 1448 bytes), quiet and with two CPU hogs (`yes >/dev/null`, twice,
            killed after each run), --rate-runs (3) runs of each, interleaved. Measured at the
            receiver: (bytes - the first read's) / (last byte - first byte), as a ratio to R. tbf
            counts link-layer bytes (its payload ratio is ~0.95 at best); its qdisc's sent bytes over
            the payload give the overhead, and both ratios are printed. Target: netreach's ratio
            within 1 % of 1 in every run, quiet and loaded; tbf's are the reference (information).

The senders and the clients are small python programs (python -c) run as child processes, the same
for every case; in the tbf case they run in the namespaces (`ip netns exec`). The namespaces, their
veth pair and every child process are removed at the end, on error too. Needs root, ip and tc for
the tbf case. Nothing leaves 127.0.0.1 or the two namespaces.

Output: a table on stdout, progress on stderr, raw JSON in
Benchmarks/.build/shared-link-runs/<utc time>-<pid>.json (proxy stderr beside it, .log).
Exit status: 0 when every target passes, 1 when one fails, 2 on a usage or set-up error.

  Benchmarks/run-shared-link.py                              # everything, BIN_DIR or .build/release
  BIN_DIR=.build/debug Benchmarks/run-shared-link.py --only share
  Benchmarks/run-shared-link.py --only share --cases tbf     # the kernel reference alone (no binary)
  Benchmarks/run-shared-link.py --only change --only release
"""
import argparse
import atexit
import http.client
import json
import math
import os
import select
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
KIB = 1 << 10
MIB = 1 << 20
LOOPBACK = "127.0.0.1"
PARTS = ["share", "change", "release", "rate"]
CASES = ["tbf", "shared", "per-connection"]
PER_CONNECTION_FLAG = "--bandwidth-per-connection"

# The kernel reference's link.
NS_SERVER_ADDR = "10.231.0.1"
NS_CLIENT_ADDR = "10.231.0.2"
NS_PREFIX = 30
TBF = ["rate", "2mbit", "burst", "32kbit", "latency", "400ms"]

# Targets.
LINK_KBIT = 2000.0           # share: the link's rate, kbit/s (2mbit)
SHARE_TOL = 0.10             # netreach shared vs tbf and vs LINK_KBIT; tbf vs LINK_KBIT
FAIRNESS_MIN = 0.9           # Jain's index over the flows' completion times
PER_CONNECTION_MIN = 3.0     # per-connection aggregate / shared aggregate
CHANGE_MAX_S = 1.0           # change: PUT -> last byte
RELEASE_BYTES = 684000
RELEASE_RATE = 50000.0       # bytes/s: 400kbit
RELEASE_LO, RELEASE_HI = 0.9, 1.2
RATE_TOL = 0.01              # rate: netreach's achieved rate / the profile's
RATE_SECONDS = 8.0           # rate: each transfer is about this long at the profile's rate
# rate: the profiles' downstream rates, bytes/s (LinkProfile's figures)
PROFILE_DOWN = {"wifi": 5_000_000, "lte": 6_250_000, "dsl": 250_000, "3g": 97_500, "edge": 30_000}


def log(*parts):
    print(*parts, file=sys.stderr, flush=True)


def fmt(x, spec=".1f"):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return format(x, spec)


def jain(values):
    """Jain's fairness index: (sum x)^2 / (n * sum x^2); 1 when all equal, 1/n when one takes all."""
    xs = [float(v) for v in values]
    sq = sum(x * x for x in xs)
    if not xs or sq == 0:
        return float("nan")
    return sum(xs) ** 2 / (len(xs) * sq)


class SetupError(Exception):
    """Something the benchmark needs could not be set up: exit status 2."""


# ---------------------------------------------------------------------------------------------
# The child programs (python -c), the same for loopback and for the namespaces.

# Sender: argv host port. Prints its port. Each connection sends one line, the number of bytes
# wanted; gets them, then a FIN; the connection is closed when the client closes (or after 60 s).
# Exits when its stdin closes (the harness went away).
SENDER = r"""
import os, socket, sys, threading
host, port = sys.argv[1], int(sys.argv[2])
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind((host, port))
l.listen(64)
print(l.getsockname()[1], flush=True)
payload = memoryview(os.urandom(1 << 20))
def exit_with_parent():
    try:
        while sys.stdin.buffer.read(4096):
            pass
    finally:
        os._exit(0)
def handle(c):
    try:
        c.settimeout(300)
        head = b""
        while b"\n" not in head and len(head) < 64:
            d = c.recv(64)
            if not d:
                return
            head += d
        left = int(head.split(b"\n")[0])
        while left > 0:
            left -= c.send(payload[:min(left, len(payload))])
        c.shutdown(socket.SHUT_WR)
        c.settimeout(60)
        while c.recv(65536):
            pass
    except (OSError, ValueError) as e:
        print("sender: %s: %s" % (type(e).__name__, e), file=sys.stderr, flush=True)
    finally:
        c.close()
threading.Thread(target=exit_with_parent, daemon=True).start()
while True:
    c, _ = l.accept()
    threading.Thread(target=handle, args=(c,), daemon=True).start()
"""

# Clients: argv host port flows size timeout. Opens `flows` connections at once (threads behind a
# barrier), and once all are connected (a second barrier) asks each for `size` bytes at once: on a
# FIFO link a flow whose data went first would hold the others' SYN-ACKs up behind its queue. Reads
# to EOF or `size`; prints one JSON object: per flow connect/connected/request/first/last times
# (seconds since the first connect), bytes, error.
CLIENTS = r"""
import json, socket, sys, threading, time
host, port, flows, size, timeout = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
barrier = threading.Barrier(flows)
connected = threading.Barrier(flows)
out = [None] * flows
def flow(i):
    rec = {"flow": i, "bytes": 0, "error": None, "connect": None, "connected": None, "request": None,
           "first": None, "last": None}
    out[i] = rec
    buf = memoryview(bytearray(1 << 20))
    try:
        barrier.wait(10)
    except threading.BrokenBarrierError:
        rec["error"] = "barrier"
        return
    start = time.monotonic()
    rec["connect"] = start
    deadline = start + timeout
    try:
        s = socket.create_connection((host, port), timeout=10)
        rec["connected"] = time.monotonic()
    except OSError as e:
        rec["error"] = "%s: %s" % (type(e).__name__, e)
        connected.abort()
        return
    try:
        try:
            connected.wait(15)
        except threading.BrokenBarrierError:
            rec["error"] = "another flow did not connect"
            s.close()
            return
        rec["request"] = time.monotonic()
        s.sendall(b"%d\n" % size)
        while rec["bytes"] < size:
            left = deadline - time.monotonic()
            if left <= 0:
                rec["error"] = "timeout after %.0f s" % timeout
                break
            s.settimeout(min(left, 30))
            k = s.recv_into(buf)
            now = time.monotonic()
            if not k:
                rec["error"] = "eof"
                break
            if rec["first"] is None:
                rec["first"] = now
                rec["first_bytes"] = k
            rec["bytes"] += k
            rec["last"] = now
        s.close()
    except OSError as e:
        rec["error"] = "%s: %s" % (type(e).__name__, e)
threads = [threading.Thread(target=flow, args=(i,), daemon=True) for i in range(flows)]
for t in threads:
    t.start()
for t in threads:
    t.join(timeout + 30)
recs = [r for r in out if r is not None]
base = min([r["connect"] for r in recs if r["connect"] is not None] or [0.0])
for r in recs:
    for k in ("connect", "connected", "request", "first", "last"):
        if r[k] is not None:
            r[k] -= base
print(json.dumps({"flows": recs}), flush=True)
"""


# ---------------------------------------------------------------------------------------------
# Processes and namespaces

CHILDREN = []     # every Popen started, killed (by process group) on the way out
NAMESPACES = []   # every namespace made, deleted on the way out


def start_group(cmd, **kw):
    proc = subprocess.Popen(cmd, start_new_session=True, **kw)
    CHILDREN.append(proc)
    return proc


def kill_group(proc, sig=signal.SIGKILL):
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def kill_all_children():
    for proc in CHILDREN:
        if proc.poll() is not None:
            continue   # reaped already; its pid may be someone else's now
        kill_group(proc, signal.SIGKILL)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


def delete_namespaces():
    """Deletes the namespaces this run made (their veth ends go with them). Idempotent."""
    while NAMESPACES:
        ns = NAMESPACES.pop()
        # Anything still inside (ours only: the namespace is this run's) is killed first.
        try:
            pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True, timeout=10).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
        except (OSError, subprocess.TimeoutExpired):
            pass
        try:
            r = subprocess.run(["ip", "netns", "del", ns], capture_output=True, text=True, timeout=10)
            if r.returncode != 0:
                log(f"warning: ip netns del {ns}: {r.stderr.strip()}")
        except (OSError, subprocess.TimeoutExpired) as e:
            log(f"warning: ip netns del {ns}: {e}")


def cleanup():
    kill_all_children()
    delete_namespaces()


atexit.register(cleanup)


def run_cmd(cmd, what):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SetupError(f"{what}: {' '.join(cmd)}: {e}")
    if r.returncode != 0:
        raise SetupError(f"{what}: {' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()}")
    return r.stdout


def read_line(proc, timeout, what):
    """The first line of a child's stdout, within `timeout` seconds."""
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + timeout
    data = b""
    while b"\n" not in data:
        left = deadline - time.monotonic()
        r = select.select([fd], [], [], left)[0] if left > 0 else []
        d = os.read(fd, 65536) if r else b""
        if not d:
            try:
                proc.wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass
            raise SetupError(f"no line from {what} within {timeout:.0f} s (exit {proc.poll()}; got {data[:300]!r})")
        data += d
    return data.partition(b"\n")[0].decode("utf-8", "replace"), data.partition(b"\n")[2]


class Sender:
    def __init__(self, host, prefix=(), log_file=None):
        self.host, self.prefix, self.log_file = host, list(prefix), log_file
        self.proc = None
        self.port = None

    def start(self):
        cmd = self.prefix + [sys.executable, "-c", SENDER, self.host, "0"]
        self.proc = start_group(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log_file)
        line, _ = read_line(self.proc, 10.0, "the sender")
        self.port = int(line)
        return self

    def stop(self):
        if self.proc and self.proc.poll() is None:
            kill_group(self.proc)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def run_clients(host, port, flows, size, timeout, prefix=(), log_file=None):
    """The parallel clients (a child process); their JSON."""
    cmd = list(prefix) + [sys.executable, "-c", CLIENTS, host, str(port), str(flows), str(size), str(timeout)]
    proc = start_group(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log_file)
    try:
        out, _ = proc.communicate(timeout=timeout + 60)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        proc.wait(timeout=5)
        raise RuntimeError(f"the clients did not finish within {timeout + 60:.0f} s")
    if proc.returncode != 0:
        raise RuntimeError(f"the clients exited with {proc.returncode}")
    return json.loads(out.decode().strip().splitlines()[-1])


class Namespaces:
    """Two namespaces joined by a veth pair, tbf on the server end's egress. Made with names of this
    run's own (the pid), both veth ends created inside them: the host's interfaces are never touched."""

    def __init__(self, tbf=TBF):
        self.tbf = list(tbf)
        pid = os.getpid()
        self.server = f"nrsl-{pid}-srv"
        self.client = f"nrsl-{pid}-cli"
        self.server_dev = "nrsl-s"
        self.client_dev = "nrsl-c"
        self.qdisc = None

    def create(self):
        for ns in (self.server, self.client):
            run_cmd(["ip", "netns", "add", ns], "making a namespace")
            NAMESPACES.append(ns)
        run_cmd(["ip", "-n", self.server, "link", "add", self.server_dev, "type", "veth",
                 "peer", "name", self.client_dev, "netns", self.client], "making the veth pair")
        run_cmd(["ip", "-n", self.server, "addr", "add", f"{NS_SERVER_ADDR}/{NS_PREFIX}", "dev", self.server_dev], "address")
        run_cmd(["ip", "-n", self.client, "addr", "add", f"{NS_CLIENT_ADDR}/{NS_PREFIX}", "dev", self.client_dev], "address")
        for ns, dev in ((self.server, self.server_dev), (self.client, self.client_dev)):
            run_cmd(["ip", "-n", ns, "link", "set", "lo", "up"], "lo up")
            run_cmd(["ip", "-n", ns, "link", "set", dev, "up"], "veth up")
        run_cmd(["tc", "-n", self.server, "qdisc", "add", "dev", self.server_dev, "root", "tbf"] + self.tbf, "tc tbf")
        self.qdisc = run_cmd(["tc", "-n", self.server, "qdisc", "show", "dev", self.server_dev], "tc show").strip()
        # The link is up when the client can reach the server (bounded: 5 s).
        deadline = time.monotonic() + 5
        while True:
            r = subprocess.run(["ip", "netns", "exec", self.client, sys.executable, "-c",
                                "import socket,sys\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
                                f"s.connect(('{NS_SERVER_ADDR}',9))\nprint(s.getsockname()[0])"],
                               capture_output=True, text=True, timeout=10)
            if r.returncode == 0 and r.stdout.strip() == NS_CLIENT_ADDR:
                break
            if time.monotonic() > deadline:
                raise SetupError(f"no route from {self.client} to {NS_SERVER_ADDR}: {r.stderr.strip()}")
            time.sleep(0.1)
        return self

    def exec_prefix(self, ns):
        return ["ip", "netns", "exec", ns]

    def qdisc_stats(self):
        try:
            return subprocess.run(["tc", "-n", self.server, "-s", "qdisc", "show", "dev", self.server_dev],
                                  capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return ""

    def delete(self):
        delete_namespaces()   # the run's only namespaces are these two


class Proxy:
    """`netreach condition ... --json` on loopback in front of `upstream_port`."""

    def __init__(self, harness, label, conditions=()):
        self.h, self.label, self.conditions = harness, label, list(conditions)
        self.proc = None
        self.port = None
        self.control = None
        self.name = None
        self.events = 0
        self.tail = []
        self.record = {"label": label, "conditions": self.conditions}

    def start(self, upstream_port):
        h = self.h
        cmd = shlex.split(h.args.proxy_cmd) + ["--listen", f"{LOOPBACK}:0", "--upstream", f"{LOOPBACK}:{upstream_port}"] \
            + self.conditions + ["--json"]
        self.record["cmd"] = cmd
        h.logf.write(f"== {' '.join(cmd)}\n".encode())
        h.logf.flush()
        try:
            self.proc = start_group(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=h.logf)
        except OSError as e:
            raise SetupError(f"cannot start {cmd[0]}: {e}")
        try:
            line, rest = read_line(self.proc, 15.0, " ".join(cmd))
        except SetupError as e:
            raise SetupError(f"{e}; stderr: {h.log_tail()}")
        try:
            ready = json.loads(line)
            assert ready.get("event") == "ready", "event is not \"ready\""
            listener = ready["listeners"][0]
            self.port = int(listener["listen"].rsplit(":", 1)[1])
            self.name = str(listener.get("name", "1"))
            self.control = ready["control"]
            assert self.port > 0, "the listen address must give the bound port, not 0"
        except Exception as e:   # noqa: BLE001 - any malformed line is a set-up error
            raise SetupError(f"bad ready line from {cmd[0]}: {line[:300]!r} ({e})")
        self.record["ready"] = ready
        self.events = rest.count(b"\n")
        threading.Thread(target=self._drain, args=(self.proc.stdout.fileno(), rest), daemon=True).start()
        return self

    def _drain(self, fd, pending):
        try:
            while True:
                d = os.read(fd, 65536)
                if not d:
                    return
                pending += d
                *lines, pending = pending.split(b"\n")
                self.events += len(lines)
                self.tail = (self.tail + [l.decode("utf-8", "replace")[:300] for l in lines])[-20:]
        except OSError:
            return

    def api(self, method, path, body=None, timeout=5.0):
        """(status, parsed JSON or text) from the control API."""
        host, port = self.control.rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
        try:
            data = json.dumps(body).encode() if body is not None else None
            headers = {"Content-Type": "application/json"} if data is not None else {}
            conn.request(method, path, body=data, headers=headers)
            r = conn.getresponse()
            text = r.read().decode("utf-8", "replace")
        finally:
            conn.close()
        try:
            parsed = json.loads(text) if text.strip() else None
        except ValueError:
            parsed = text
        self.record.setdefault("api", []).append({"method": method, "path": path, "body": body, "status": r.status,
                                                  "response": parsed if not isinstance(parsed, dict) or
                                                  "connections" not in parsed else "(stats)"})
        return r.status, parsed

    def stop(self):
        if not self.proc:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
                self.record["exit"] = self.proc.returncode
            except subprocess.TimeoutExpired:
                self.record["exit"] = "did not exit within 5 s of SIGTERM"
                kill_group(self.proc)
                self.proc.wait(timeout=5)
        else:
            self.record["exit"] = f"had exited already ({self.proc.returncode})"
        kill_group(self.proc)
        self.record["events_after_ready"] = self.events
        self.record["last_events"] = self.tail
        self.h.proxies.append(self.record)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def connect(port, timeout=10.0):
    s = socket.create_connection((LOOPBACK, port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


# ---------------------------------------------------------------------------------------------
# The harness

class Harness:
    def __init__(self, args):
        self.args = args
        self.checks = []
        self.results = {}
        self.proxies = []
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        os.makedirs(args.out_dir, exist_ok=True)
        self.json_path = os.path.join(args.out_dir, f"{stamp}-{os.getpid()}.json")
        self.log_path = os.path.join(args.out_dir, f"{stamp}-{os.getpid()}.log")
        self.logf = open(self.log_path, "ab")

    def log_tail(self):
        self.logf.flush()
        try:
            with open(self.log_path, "rb") as f:
                f.seek(max(0, os.path.getsize(self.log_path) - 400))
                return f.read().decode("utf-8", "replace").strip().replace("\n", " | ")
        except OSError:
            return ""

    def check(self, part, name, value, target, ok, note=""):
        status = "INFO" if ok is None else "SKIP" if ok == "skip" else "PASS" if ok else "FAIL"
        self.checks.append({"part": part, "name": name, "value": value, "target": target, "status": status, "note": note})
        return status

    def proxy(self, label, conditions=()):
        return Proxy(self, label, conditions)

    # -- 1. share -------------------------------------------------------------------------------
    def _summarise_flows(self, label, result, size):
        flows = result["flows"]
        bad = [f for f in flows if f["error"] or f["bytes"] != size]
        if bad:
            raise RuntimeError(f"{label}: " + "; ".join(f"flow {f['flow']}: {f['bytes']} of {size} bytes"
                                                       f" ({f['error']})" for f in bad))
        start = min(f["connect"] for f in flows)
        end = max(f["last"] for f in flows)
        total = sum(f["bytes"] for f in flows)
        aggregate = total * 8 / (end - start) / 1e3
        rates = [f["bytes"] * 8 / (f["last"] - f["connect"]) / 1e3 for f in flows]
        completions = [f["last"] - start for f in flows]
        return {"aggregate_kbit": aggregate, "flow_kbit": rates, "completion_s": completions,
                "first_byte_s": [f["first"] - start for f in flows], "span_s": end - start,
                "jain_rates": jain(rates), "jain_completion": jain(completions), "bytes": total, "flows": flows}

    def _share_tbf(self, size):
        ns = Namespaces()
        try:
            log("share/tbf: making the namespaces, veth pair and tbf")
            ns.create()
            log(f"share/tbf: {ns.qdisc}")
            with Sender(NS_SERVER_ADDR, ns.exec_prefix(ns.server), self.logf) as sender:
                raw = run_clients(NS_SERVER_ADDR, sender.port, self.args.flows, size, self.args.transfer_timeout,
                                  ns.exec_prefix(ns.client), self.logf)
            res = self._summarise_flows("tbf", raw, size)
            res["qdisc"] = ns.qdisc
            res["qdisc_stats"] = ns.qdisc_stats()
            res["namespaces"] = [ns.server, ns.client]
            return res
        finally:
            ns.delete()

    def _share_netreach(self, size, conditions, label):
        with self.proxy(label, conditions) as px, Sender(LOOPBACK, (), self.logf) as sender:
            px.start(sender.port)
            raw = run_clients(LOOPBACK, px.port, self.args.flows, size, self.args.transfer_timeout, (), self.logf)
            res = self._summarise_flows(label, raw, size)
            res["conditions"] = conditions
            return res

    def part_share(self):
        a = self.args
        size = a.size_kib * KIB
        print(f"\n## share: {a.flows} parallel downloads of {a.size_kib} KiB each at 2 Mbit/s downstream\n")
        print(f"The clients connect all {a.flows}, then ask all at once. tbf: namespaces + veth ({NS_SERVER_ADDR} -> "
              f"{NS_CLIENT_ADDR}), `tbf {' '.join(TBF)}` on the server end's egress; it counts link-layer bytes "
              "(66 bytes of headers per 1448 of payload: ~1913 kbit/s of goodput at most). netreach: "
              "`condition --down-bandwidth 2mbit` on loopback (payload bytes).\n")
        results = {}
        notes = {}
        for case in a.case_list:
            log(f"share/{case}: {a.flows} x {size} bytes")
            try:
                if case == "tbf":
                    results[case] = self._share_tbf(size)
                elif case == "shared":
                    results[case] = self._share_netreach(size, ["--down-bandwidth", "2mbit"], "shared")
                else:
                    if not a.knows_per_connection:
                        notes[case] = f"the binary does not know {PER_CONNECTION_FLAG} (an older build)"
                        log(f"share/{case}: skipped: {notes[case]}")
                        continue
                    results[case] = self._share_netreach(size, ["--down-bandwidth", "2mbit", PER_CONNECTION_FLAG],
                                                         "per-connection")
            except SetupError:
                raise
            except Exception as e:   # noqa: BLE001 - a broken case fails, the others still run
                notes[case] = f"{type(e).__name__}: {e}"
                log(f"share/{case}: {notes[case]}")
                continue
            r = results[case]
            log(f"share/{case}: aggregate {r['aggregate_kbit']:.0f} kbit/s, flows "
                f"{' '.join(f'{x:.0f}' for x in r['flow_kbit'])} kbit/s, Jain {r['jain_rates']:.3f}")
        print("| case | aggregate kbit/s | per-flow kbit/s | Jain (rates) | Jain (completion times) | "
              "completion s | first byte s |")
        print("| --- | ---: | --- | ---: | ---: | --- | --- |")
        for case in a.case_list:
            if case not in results:
                print(f"| {case} | - | - | - | - | - | {'SKIP' if 'does not know' in notes.get(case, '') else 'FAIL'}: "
                      f"{notes.get(case, '')} |")
                continue
            r = results[case]
            print(f"| {case} | {r['aggregate_kbit']:.0f} | {' '.join(f'{x:.0f}' for x in r['flow_kbit'])} | "
                  f"{r['jain_rates']:.3f} | {r['jain_completion']:.3f} | "
                  f"{' '.join(f'{x:.2f}' for x in r['completion_s'])} | "
                  f"{' '.join(f'{x:.3f}' for x in r['first_byte_s'])} |")
        print()
        tbf, shared, per = results.get("tbf"), results.get("shared"), results.get("per-connection")

        def missing(case):
            if case not in a.case_list:
                return "skip", "not run (--cases)"
            if "does not know" in notes.get(case, ""):
                return "skip", notes[case]
            return False, notes.get(case, "no result")

        if tbf:
            ag = tbf["aggregate_kbit"]
            self.check("share", "tbf aggregate (reference sanity)", f"{ag:.0f} kbit/s",
                       f"{LINK_KBIT:.0f} kbit/s +-{SHARE_TOL:.0%}", abs(ag / LINK_KBIT - 1) <= SHARE_TOL)
            self.check("share", "tbf fairness (Jain, completion times)", f"{tbf['jain_completion']:.3f}",
                       f">= {FAIRNESS_MIN}", tbf["jain_completion"] >= FAIRNESS_MIN)
            self.check("share", "tbf fairness (Jain, rates)", f"{tbf['jain_rates']:.3f}", "-", None)
        elif "tbf" in a.case_list:
            self.check("share", "tbf reference", "error", "-", *missing("tbf"))
        if shared:
            ag = shared["aggregate_kbit"]
            if tbf:
                ratio = ag / tbf["aggregate_kbit"]
                self.check("share", "netreach shared aggregate / tbf aggregate", f"{ratio:.3f} ({ag:.0f} kbit/s)",
                           f"1 +-{SHARE_TOL:.0%}", abs(ratio - 1) <= SHARE_TOL)
            else:
                ok, note = missing("tbf")
                self.check("share", "netreach shared aggregate / tbf aggregate", f"({ag:.0f} kbit/s)",
                           f"1 +-{SHARE_TOL:.0%}", "skip" if ok == "skip" else False, note)
            self.check("share", "netreach shared aggregate", f"{ag:.0f} kbit/s", f"{LINK_KBIT:.0f} kbit/s +-{SHARE_TOL:.0%}",
                       abs(ag / LINK_KBIT - 1) <= SHARE_TOL)
            self.check("share", "netreach shared fairness (Jain, completion times)", f"{shared['jain_completion']:.3f}",
                       f">= {FAIRNESS_MIN}", shared["jain_completion"] >= FAIRNESS_MIN)
            self.check("share", "netreach shared fairness (Jain, rates)", f"{shared['jain_rates']:.3f}", "-", None)
        elif "shared" in a.case_list:
            self.check("share", "netreach shared", "error", "-", *missing("shared"))
        if per and shared:
            ratio = per["aggregate_kbit"] / shared["aggregate_kbit"]
            self.check("share", "per-connection aggregate / shared aggregate",
                       f"{ratio:.2f} ({per['aggregate_kbit']:.0f} kbit/s)", f">= {PER_CONNECTION_MIN:g}",
                       ratio >= PER_CONNECTION_MIN)
        elif "per-connection" in a.case_list:
            ok, note = missing("per-connection") if not per else missing("shared")
            self.check("share", "per-connection aggregate / shared aggregate", "-", f">= {PER_CONNECTION_MIN:g}",
                       ok, note)
        self.results["share"] = {"size": size, "flows": a.flows, "tbf": TBF, "cases": results, "notes": notes}

    # -- 2. change ------------------------------------------------------------------------------
    def part_change(self):
        a = self.args
        size = a.change_mib * MIB
        print(f"\n## change: a {a.change_mib} MiB download through `--profile edge`; {a.change_after:g} s after the "
              "first byte, PUT conditions {\"profile\":\"lte\"}; PUT -> last byte\n")
        res = {"size": size, "change_after_s": a.change_after}
        with self.proxy("change", ["--profile", "edge"]) as px, Sender(LOOPBACK, (), self.logf) as sender:
            px.start(sender.port)
            s = connect(px.port)
            buf = memoryview(bytearray(MIB))
            got = 0
            t_req = time.monotonic()
            t_first = t_put = t_put_done = t_last = None
            got_at_put = None
            put_status = None
            deadline = t_req + a.transfer_timeout
            error = None
            try:
                s.sendall(b"%d\n" % size)
                s.setblocking(False)
                while got < size:
                    now = time.monotonic()
                    if now > deadline:
                        error = f"timeout after {a.transfer_timeout:g} s"
                        break
                    wait = deadline - now
                    if t_first is not None and t_put is None:
                        wait = min(wait, max(0.0, t_first + a.change_after - now))
                    r = select.select([s], [], [], min(wait, 1.0))[0]
                    now = time.monotonic()
                    if r:
                        try:
                            k = s.recv_into(buf)
                        except BlockingIOError:
                            k = None
                        now = time.monotonic()
                        if k == 0:
                            error = "eof"
                            break
                        if k:
                            if t_first is None:
                                t_first = now
                            got += k
                            t_last = now
                    if t_first is not None and t_put is None and now >= t_first + a.change_after:
                        got_at_put = got
                        log(f"change: {got} bytes in {now - t_first:.2f} s after the first byte; PUT lte")
                        t_put = time.monotonic()
                        put_status, body = px.api("PUT", f"/listeners/{px.name}/conditions", {"profile": "lte"})
                        t_put_done = time.monotonic()
                        res["put_response"] = body
                        if put_status != 200:
                            error = f"PUT returned {put_status}: {body}"
                            break
                        try:   # how far the proxy had read and scheduled (information)
                            _, stats = px.api("GET", f"/listeners/{px.name}/stats")
                            res["proxy_downstream_after_put"] = [c.get("downstream") for c in stats.get("connections", [])]
                        except (OSError, ValueError, AttributeError):
                            pass
            finally:
                s.close()
        res.update({"bytes": got, "error": error, "put_status": put_status, "bytes_at_put": got_at_put,
                    "request_to_first_s": (t_first - t_req) if t_first else None,
                    "first_to_put_s": (t_put - t_first) if t_put else None,
                    "put_call_s": (t_put_done - t_put) if t_put_done else None,
                    "put_to_last_s": (t_last - t_put) if (t_put and t_last and got == size) else None,
                    "request_to_last_s": (t_last - t_req) if t_last else None})
        rate_before = (got_at_put * 8 / (t_put - t_first) / 1e3) if t_put and got_at_put else None
        res["kbit_before_put"] = rate_before
        after = res["put_to_last_s"]
        rate_after = ((size - got_at_put) * 8 / after / 1e3) if after else None
        res["kbit_after_put"] = rate_after
        print("| bytes | request -> first byte s | first byte -> PUT s | bytes at PUT | kbit/s before PUT | "
              "PUT -> last byte s | kbit/s after PUT | status |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
        ok = after is not None and after <= CHANGE_MAX_S
        for d in res.get("proxy_downstream_after_put") or []:
            if isinstance(d, dict):
                log(f"change: proxy after the PUT: read {d.get('bytesRead')}, scheduled {d.get('bytesScheduled')}, "
                    f"delivered {d.get('bytesDelivered')} bytes downstream")
        print(f"| {got} | {fmt(res['request_to_first_s'], '.3f')} | {fmt(res['first_to_put_s'], '.3f')} | "
              f"{fmt(got_at_put, 'd') if got_at_put is not None else '-'} | {fmt(rate_before, '.0f')} | {fmt(after, '.3f')} | "
              f"{fmt(rate_after, '.0f')} | {'PASS' if ok else 'FAIL'}{f' ({error})' if error else ''} |")
        print()
        self.check("change", "PUT lte -> last byte", f"{after:.3f} s" if after is not None else f"- ({error})",
                   f"<= {CHANGE_MAX_S:g} s", ok, error or "")
        self.results["change"] = res

    # -- 3. release -----------------------------------------------------------------------------
    def part_release(self):
        a = self.args
        n = RELEASE_BYTES
        expect = n / RELEASE_RATE
        lo, hi = RELEASE_LO * expect, RELEASE_HI * expect
        print(f"\n## release: `--down-bandwidth 400kbit` (50 kB/s), a timeout fault on downstream holds a {n}-byte "
              f"response until the proxy has read it (and >= {a.hold:g} s); DELETE the fault -> last byte "
              f"(expected {expect:.2f} s)\n")
        res = {"bytes_requested": n, "expected_s": expect}
        error = None
        with self.proxy("release", ["--down-bandwidth", "400kbit"]) as px, Sender(LOOPBACK, (), self.logf) as sender:
            px.start(sender.port)
            s = connect(px.port)
            buf = memoryview(bytearray(MIB))
            got = 0
            got_during_hold = 0
            t_del = t_del_done = t_first = t_last = None
            try:
                status, body = px.api("POST", f"/listeners/{px.name}/faults",
                                      {"name": "stall", "type": "timeout", "direction": "downstream"})
                res["post_fault"] = {"status": status, "body": body}
                if status not in (200, 201):
                    raise RuntimeError(f"POST fault returned {status}: {body}")
                t_req = time.monotonic()
                s.sendall(b"%d\n" % n)
                s.setblocking(False)
                # Hold: until the proxy has read the whole response (its stats), and at least `hold` s;
                # bounded at hold + 15 s. Whatever the client gets meanwhile is counted.
                read_by_proxy = None
                polls = 0
                hold_deadline = t_req + a.hold + 15.0
                while time.monotonic() < hold_deadline and polls < int((a.hold + 15.0) / 0.1) + 10:
                    polls += 1
                    select.select([s], [], [], 0.1)
                    try:
                        while True:
                            k = s.recv_into(buf)
                            if not k:
                                raise RuntimeError("the connection closed during the hold")
                            got_during_hold += k
                    except BlockingIOError:
                        pass
                    try:
                        st, stats = px.api("GET", f"/listeners/{px.name}/stats")
                        conns = stats.get("connections", []) if isinstance(stats, dict) else []
                        if conns:
                            read_by_proxy = max(c.get("downstream", {}).get("bytesRead", 0) for c in conns)
                    except (OSError, ValueError, AttributeError):
                        pass
                    if read_by_proxy is not None and read_by_proxy >= n and time.monotonic() - t_req >= a.hold:
                        break
                res["hold_s"] = time.monotonic() - t_req
                res["proxy_bytes_read_at_release"] = read_by_proxy
                if read_by_proxy is None or read_by_proxy < n:
                    log(f"release: the proxy's stats show {read_by_proxy} of {n} bytes read after {res['hold_s']:.1f} s;"
                        " releasing anyway")
                log(f"release: held {res['hold_s']:.2f} s (proxy read {read_by_proxy}, client got {got_during_hold}); "
                    "DELETE the fault")
                got = got_during_hold
                t_del = time.monotonic()
                status, body = px.api("DELETE", f"/listeners/{px.name}/faults/stall")
                t_del_done = time.monotonic()
                res["delete_fault"] = {"status": status, "body": body}
                if status not in (200, 204):
                    raise RuntimeError(f"DELETE fault returned {status}: {body}")
                deadline = t_del + a.transfer_timeout
                while got < n:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        error = f"timeout after {a.transfer_timeout:g} s"
                        break
                    if not select.select([s], [], [], min(left, 1.0))[0]:
                        continue
                    try:
                        k = s.recv_into(buf)
                    except BlockingIOError:
                        continue
                    now = time.monotonic()
                    if not k:
                        error = "eof"
                        break
                    if t_first is None:
                        t_first = now
                    got += k
                    t_last = now
            except RuntimeError as e:
                error = str(e)
            finally:
                s.close()
        took = (t_last - t_del) if (t_del and t_last and got == n) else None
        res.update({"bytes": got, "bytes_during_hold": got_during_hold, "error": error,
                    "delete_call_s": (t_del_done - t_del) if t_del_done else None,
                    "delete_to_first_s": (t_first - t_del) if (t_first and t_del) else None,
                    "delete_to_last_s": took,
                    "kbit_after_release": ((n - got_during_hold) * 8 / took / 1e3) if took else None})
        ok = took is not None and lo <= took <= hi
        print("| bytes | held s | bytes to the client while held | DELETE -> first byte s | DELETE -> last byte s | "
              "kbit/s | expected s | status |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
        print(f"| {got} | {fmt(res.get('hold_s'), '.2f')} | {got_during_hold} | {fmt(res['delete_to_first_s'], '.3f')} | "
              f"{fmt(took, '.3f')} | {fmt(res['kbit_after_release'], '.0f')} | {expect:.2f} [{lo:.2f}, {hi:.2f}] | "
              f"{'PASS' if ok else 'FAIL'}{f' ({error})' if error else ''} |")
        print()
        self.check("release", "DELETE fault -> last byte", f"{took:.3f} s" if took is not None else f"- ({error})",
                   f"[{lo:.2f}, {hi:.2f}] s ({RELEASE_LO:g}-{RELEASE_HI:g} x {expect:.2f})", ok, error or "")
        self.check("release", "bytes to the client while the fault held", str(got_during_hold), "0",
                   got_during_hold == 0)
        self.results["release"] = res

    # -- 4. rate --------------------------------------------------------------------------------
    @staticmethod
    def _rate_of(label, result, size):
        flow = result["flows"][0]
        if flow["error"] or flow["bytes"] != size:
            raise RuntimeError(f"{label}: {flow['bytes']} of {size} bytes ({flow['error']})")
        span = flow["last"] - flow["first"]
        return (flow["bytes"] - flow.get("first_bytes", 0)) / span, span, flow

    @staticmethod
    def _sent_bytes(stats):
        """The `Sent N bytes` of `tc -s qdisc show`, or None."""
        words = stats.split()
        for i, w in enumerate(words[:-1]):
            if w == "Sent":
                try:
                    return int(words[i + 1])
                except ValueError:
                    return None
        return None

    def _rate_tbf(self, rate, burst, size):
        ns = Namespaces(["rate", f"{rate * 8}bit", "burst", str(burst), "latency", "400ms"])
        try:
            ns.create()
            with Sender(NS_SERVER_ADDR, ns.exec_prefix(ns.server), self.logf) as sender:
                before = self._sent_bytes(ns.qdisc_stats())
                raw = run_clients(NS_SERVER_ADDR, sender.port, 1, size, self.args.transfer_timeout,
                                  ns.exec_prefix(ns.client), self.logf)
                after = self._sent_bytes(ns.qdisc_stats())
            achieved, span, flow = self._rate_of("tbf", raw, size)
            overhead = (after - before) / size if before is not None and after is not None else None
            return {"achieved": achieved, "span_s": span, "qdisc": ns.qdisc, "qdisc_sent_bytes": after,
                    "link_bytes_per_payload_byte": overhead, "flow": flow}
        finally:
            ns.delete()

    def _rate_netreach(self, profile, size):
        with self.proxy(f"rate-{profile}", ["--profile", profile]) as px, Sender(LOOPBACK, (), self.logf) as sender:
            px.start(sender.port)
            raw = run_clients(LOOPBACK, px.port, 1, size, self.args.transfer_timeout, (), self.logf)
        achieved, span, flow = self._rate_of("netreach", raw, size)
        return {"achieved": achieved, "span_s": span, "flow": flow}

    def _hogs(self, n):
        return [start_group(["yes"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                for _ in range(n)]

    def part_rate(self):
        a = self.args
        profile = a.rate_profile
        rate = PROFILE_DOWN[profile]
        burst = max(1448, rate // 100)   # DirectionShaper.burst(bandwidth:)
        size = int(rate * RATE_SECONDS)
        print(f"\n## rate: one download of {size} bytes ({RATE_SECONDS:g} s at `{profile}`'s {rate * 8 / 1e3:g} kbit/s "
              f"down), through `netreach condition --profile {profile}` and through `tbf rate {rate * 8}bit burst "
              f"{burst} latency 400ms`, quiet and with two `yes` hogs, {a.rate_runs} runs each\n")
        print("Ratio: (bytes - the first read's) / (last byte - first byte) at the receiver, over the profile's rate. "
              "tbf (link): the same times tc's qdisc `Sent` bytes over the payload (link-layer bytes, as tbf counts).\n")
        print("| load | run | 1-min load | netreach ratio | tbf ratio (payload) | tbf ratio (link) | status |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
        runs = []
        for load, hogs in (("quiet", 0), ("two hogs", 2)):
            for run in range(1, a.rate_runs + 1):
                started = self._hogs(hogs)
                try:
                    if hogs:
                        time.sleep(1.0)   # the hogs have the CPUs before the transfer starts
                    load1 = os.getloadavg()[0]
                    ours = self._rate_netreach(profile, size)
                    ref = self._rate_tbf(rate, burst, size)
                finally:
                    for proc in started:
                        kill_group(proc)
                        proc.wait(timeout=5)
                ratio = ours["achieved"] / rate
                tbf_ratio = ref["achieved"] / rate
                link = ref["link_bytes_per_payload_byte"]
                tbf_link = tbf_ratio * link if link else None
                ok = abs(ratio - 1) <= RATE_TOL
                runs.append({"load": load, "hogs": hogs, "run": run, "loadavg_1": load1, "netreach": ours, "tbf": ref,
                             "netreach_ratio": ratio, "tbf_ratio_payload": tbf_ratio, "tbf_ratio_link": tbf_link})
                print(f"| {load} | {run} | {load1:.2f} | {ratio:.4f} | {tbf_ratio:.4f} | {fmt(tbf_link, '.4f')} | "
                      f"{'PASS' if ok else 'FAIL'} |")
                self.check("rate", f"netreach / {profile} rate, {load}, run {run}", f"{ratio:.4f}",
                           f"1 +- {RATE_TOL:g}", ok)
                self.check("rate", f"tbf / {profile} rate, {load}, run {run}",
                           f"{tbf_ratio:.4f} payload, {fmt(tbf_link, '.4f')} link", "-", None)
        print()
        self.results["rate"] = {"profile": profile, "rate": rate, "burst": burst, "bytes": size, "runs": runs}

    # -- run ------------------------------------------------------------------------------------
    def run(self):
        a = self.args
        load = os.getloadavg()
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        print(f"# netreach shared-link benchmark, {started}")
        print(f"load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at start; {os.cpu_count()} cores; "
              f"proxy under test: {a.proxy_cmd or '(none: tbf only)'}"
              f"{'' if a.knows_per_connection or not a.proxy_cmd else f' (no {PER_CONNECTION_FLAG})'}")
        setup_error = None
        for part in a.parts:
            try:
                getattr(self, "part_" + part)()
            except SetupError as e:
                log(f"{part}: set-up error: {e}")
                print(f"\n{part}: SET-UP ERROR ({e})")
                self.check(part, part, "set-up error", "-", False, str(e))
                self.results.setdefault(part, {})["setup_error"] = str(e)
                setup_error = str(e)
                break
            except Exception as e:   # noqa: BLE001 - a broken part fails, the others still run
                log(f"{part}: {type(e).__name__}: {e}")
                print(f"\n{part}: FAIL ({type(e).__name__}: {e})")
                self.check(part, part, "error", "-", False, f"{type(e).__name__}: {e}")
                self.results.setdefault(part, {})["error"] = str(e)
        started_proxies = self.proxies
        bad = [p for p in started_proxies if p.get("exit") != 0]
        if started_proxies:
            self.check("all", "proxy exits 0 on SIGTERM", f"{len(started_proxies) - len(bad)} of {len(started_proxies)}",
                       "all", not bad, "; ".join(f"{p['label']}: {p.get('exit')}" for p in bad))
        print("\n## summary\n")
        print("| part | check | measured | target | status |")
        print("| --- | --- | --- | --- | --- |")
        for c in self.checks:
            note = f" ({c['note']})" if c["note"] and c["status"] != "PASS" else ""
            print(f"| {c['part']} | {c['name']} | {c['value']} | {c['target']} | {c['status']}{note} |")
        failed = [c for c in self.checks if c["status"] == "FAIL"]
        counts = {s: sum(1 for c in self.checks if c["status"] == s) for s in ("PASS", "FAIL", "INFO", "SKIP")}
        verdict = "SET-UP ERROR" if setup_error else "PASS" if not failed else "FAIL"
        print(f"\n{counts['PASS']} pass, {counts['FAIL']} fail, {counts['INFO']} info, {counts['SKIP']} skipped -> {verdict}")
        report = {"started": started, "load_at_start": load, "cores": os.cpu_count(), "argv": sys.argv[1:],
                  "proxy_cmd": a.proxy_cmd, "knows_per_connection": a.knows_per_connection, "parts": a.parts,
                  "cases": a.case_list, "checks": self.checks, "results": self.results, "proxies": self.proxies,
                  "passed": not failed and not setup_error, "setup_error": setup_error, "load_at_end": os.getloadavg()}
        with open(self.json_path, "w") as f:
            json.dump(report, f, indent=1)
        print(f"raw: {self.json_path}")
        log(f"raw: {self.json_path}; proxy stderr: {self.log_path}")
        if setup_error:
            return 2
        return 0 if not failed else 1


def knows_flag(proxy_cmd, flag):
    """Whether `proxy_cmd --help` mentions the flag (an older build rejects it)."""
    try:
        r = subprocess.run(shlex.split(proxy_cmd) + ["--help"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return flag in (r.stdout + r.stderr)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n", 1)[1])
    p.add_argument("--only", action="append", choices=PARTS, help="run only this part (repeatable)")
    p.add_argument("--cases", default=",".join(CASES), help=f"share's cases, comma-separated ({','.join(CASES)})")
    p.add_argument("--flows", type=int, default=4, help="share: parallel downloads (4)")
    p.add_argument("--size-kib", type=int, default=512, help="share: KiB per download (512)")
    p.add_argument("--change-mib", type=int, default=2, help="change: MiB downloaded (2)")
    p.add_argument("--change-after", type=float, default=3.0, help="change: seconds after the first byte to PUT lte (3)")
    p.add_argument("--hold", type=float, default=15.0,
                   help="release: least seconds the fault holds (15: longer than the transfer, 13.68 s)")
    p.add_argument("--rate-profile", default="dsl", choices=sorted(PROFILE_DOWN),
                   help="rate: the profile whose downstream rate is measured (dsl)")
    p.add_argument("--rate-runs", type=int, default=3, help="rate: runs per load and case (3)")
    p.add_argument("--transfer-timeout", type=float, default=120.0, help="bound on every transfer, seconds (120)")
    p.add_argument("--bin-dir", default=os.environ.get("BIN_DIR") or os.path.join(ROOT, ".build", "release"))
    p.add_argument("--out-dir", default=os.path.join(HERE, ".build", "shared-link-runs"))
    a = p.parse_args()
    a.parts = [x for x in PARTS if x in (a.only or PARTS)]
    a.case_list = [x.strip() for x in a.cases.split(",") if x.strip()]
    unknown = [x for x in a.case_list if x not in CASES]
    if unknown or not a.case_list:
        print(f"run-shared-link.py: unknown case(s) {unknown}; choose from {CASES}", file=sys.stderr)
        return 2
    a.case_list = [x for x in CASES if x in a.case_list]
    if a.flows < 1 or a.size_kib < 1 or a.change_mib < 1 or a.change_after < 0 or a.hold < 0 or a.transfer_timeout <= 0 \
            or a.rate_runs < 1:
        print("run-shared-link.py: --flows, --size-kib, --change-mib, --rate-runs and --transfer-timeout must be positive",
              file=sys.stderr)
        return 2
    needs_binary = any(x in a.parts for x in ("change", "release", "rate")) or \
        ("share" in a.parts and any(c != "tbf" for c in a.case_list))
    a.proxy_cmd = None
    a.knows_per_connection = False
    if needs_binary:
        binary = os.path.join(a.bin_dir, "netreach")
        if not os.access(binary, os.X_OK):
            print(f"run-shared-link.py: no {binary} (set BIN_DIR or --bin-dir, or build it: "
                  "swift build -c release --product netreach)", file=sys.stderr)
            return 2
        a.proxy_cmd = f"{shlex.quote(binary)} condition"
        a.knows_per_connection = knows_flag(a.proxy_cmd, PER_CONNECTION_FLAG)
    if ("share" in a.parts and "tbf" in a.case_list) or "rate" in a.parts:
        if os.geteuid() != 0:
            print("run-shared-link.py: the tbf case makes network namespaces: run as root (or --cases shared,per-connection)",
                  file=sys.stderr)
            return 2
        for tool in ("ip", "tc"):
            if shutil.which(tool) is None:
                print(f"run-shared-link.py: the tbf case needs `{tool}` (iproute2)", file=sys.stderr)
                return 2

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    harness = Harness(a)
    try:
        return harness.run()
    finally:
        cleanup()


if __name__ == "__main__":
    sys.exit(main())
