#!/usr/bin/env python3
"""Measures `netreach condition`, the link conditioner (a userspace TCP proxy), on loopback.

Parts (all in one run unless --only picks some):

  relay     no conditions: a 1 GiB download (server -> client) direct, through socat and through
            `netreach condition` (no profile, no flags), interleaved RUNS times; medians in MB/s,
            the ratio netreach/socat (target >= 1.0) and the harness's headroom (direct/socat).
  latency   no conditions: ping-pong of 1-byte and 64-byte messages (TCP_NODELAY both ends), ROUNDS
            per path in interleaved blocks; p50/p90/p99 round trip and the p50 added over direct
            (target <= 100 us for netreach).
  profiles  each profile (wifi ... very-bad): download and upload throughput measured at the receiver
            from first byte to last (target +-10 % of the profile) and the added round trip, p50 of a
            ping-pong minus the direct p50 (target: up delay + down delay +- 2 ms).
  jitter    --delay 50ms --jitter 10ms --seed 7: every round trip in [80, 120 + 1] ms.
  loss      --profile 100-loss: nothing reaches the server, nothing comes back, in 3 s.
  dns       --profile high-latency-dns: connect -> first echoed byte = 3000 ms + the direct RTT.

Everything stays on 127.0.0.1. The server (sender, sink and echo) is a second python process; the
client side is this one. Output: a table on stdout, progress on stderr, raw JSON in
Benchmarks/.build/conditioner-runs/<utc time>-<pid>.json (proxy stderr beside it, .log).
Exit status: 0 when every target passes, 1 when one fails, 2 on a usage or set-up error.

  Benchmarks/run-conditioner.py                                     # everything, BIN_DIR or .build/release
  Benchmarks/run-conditioner.py --proxy-cmd socat --only relay --only latency --size-mb 256 --rounds 2000
  Benchmarks/run-conditioner.py --self-test                         # conditioned parts against a python stand-in

--proxy-cmd: `socat` (socat as the proxy under test), a template with {listen_port} and
{upstream_port} (readiness by connecting; conditions cannot be given, the conditioned parts are
skipped), or a command that takes netreach's flags (`--listen 127.0.0.1:0 --upstream H:P [conditions]
--json` are appended, and it must print netreach's ready line).
"""
import argparse
import json
import math
import os
import random
import re
import select
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SCRIPT = os.path.abspath(__file__)
KIB = 1 << 10
MIB = 1 << 20
LOOPBACK = "127.0.0.1"
SOCAT_TEMPLATE = ("socat -b 65536 TCP-LISTEN:{listen_port},bind=127.0.0.1,reuseaddr,fork "
                  "TCP:127.0.0.1:{upstream_port}")

# The profiles' figures: bandwidth in payload bits per second (None: unlimited), one-way delay in
# seconds per direction, loss as a share of packets, hold: seconds every new connection waits.
PROFILES = {
    "wifi":     dict(down_bw=40e6,  down_delay=0.001, up_bw=33e6,  up_delay=0.001, loss=0.0),
    "wifi-ac":  dict(down_bw=250e6, down_delay=0.001, up_bw=100e6, up_delay=0.001, loss=0.0),
    "lte":      dict(down_bw=50e6,  down_delay=0.050, up_bw=10e6,  up_delay=0.065, loss=0.0),
    "dsl":      dict(down_bw=2e6,   down_delay=0.005, up_bw=256e3, up_delay=0.005, loss=0.0),
    "3g":       dict(down_bw=780e3, down_delay=0.100, up_bw=330e3, up_delay=0.100, loss=0.0),
    "edge":     dict(down_bw=240e3, down_delay=0.400, up_bw=200e3, up_delay=0.440, loss=0.0),
    "very-bad": dict(down_bw=1e6,   down_delay=0.500, up_bw=1e6,   up_delay=0.500, loss=0.10),
    "high-latency-dns": dict(down_bw=None, down_delay=0.0, up_bw=None, up_delay=0.0, loss=0.0, hold=3.0),
    "100-loss": dict(down_bw=None, down_delay=0.0, up_bw=None, up_delay=0.0, loss=1.0),
}
MEASURED_PROFILES = ["wifi", "wifi-ac", "lte", "dsl", "3g", "edge", "very-bad"]
PARTS = ["relay", "latency", "profiles", "jitter", "loss", "dns"]

# Targets.
RATIO_MIN = 1.0             # netreach / socat throughput
HEADROOM_MIN = 1.2          # direct / socat: below this the harness may be what limits the relay
ADDED_P50_MAX_US = 100.0    # netreach p50 - direct p50, no conditions
THROUGHPUT_TOL = 0.10       # measured vs profile bandwidth
RTT_TOL_MS = 2.0            # added round trip vs up delay + down delay
JITTER_LO_MS, JITTER_HI_MS, JITTER_SLACK_MS = 80.0, 120.0, 1.0
JITTER_SPREAD_MIN_MS = 10.0 # max - min: the jitter is applied at all
JITTER_P50_TOL_MS = 5.0     # p50 within 100 +- 5 ms (two uniform +-10 ms draws: median 100)
DNS_HOLD_MS = 3000.0
DNS_LO_MS, DNS_HI_MS = -2.0, 10.0   # connect -> first byte, minus direct p50, minus 3000 ms
LOSS_WAIT_S = 3.0


# Lossy profiles' transfers run this many times longer (see part_profiles).
LOSSY_FACTOR = 5


def log(*parts):
    print(*parts, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Small pure helpers (checked by --self-test)

def percentile(values, p):
    """Linear interpolation between closest ranks (numpy's default)."""
    s = sorted(values)
    if not s:
        return float("nan")
    k = (len(s) - 1) * p / 100.0
    f = int(math.floor(k))
    c = min(f + 1, len(s) - 1)
    return s[f] + (s[c] - s[f]) * (k - f)


def median(values):
    return percentile(values, 50)


def rate_bits_per_s(total_bytes, first_bytes, seconds):
    """Receiver-side rate from the first byte to the last: the first read's bytes arrived at the
    start of the interval, so they are not part of it."""
    if seconds <= 0:
        return float("nan")
    return (total_bytes - first_bytes) * 8.0 / seconds


def parse_duration(text):
    m = re.fullmatch(r"([0-9]*\.?[0-9]+)\s*(ns|us|µs|ms|s)", text.strip())
    if not m:
        raise ValueError(f"not a duration: {text!r}")
    return float(m.group(1)) * {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}[m.group(2)]


def parse_bandwidth(text):
    """bit, kbit, mbit, gbit per second, decimal; returns bits per second."""
    m = re.fullmatch(r"([0-9]*\.?[0-9]+)\s*(bit|kbit|mbit|gbit)", text.strip().lower())
    if not m:
        raise ValueError(f"not a bandwidth: {text!r}")
    return float(m.group(1)) * {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}[m.group(2)]


def parse_loss(text):
    text = text.strip()
    return float(text[:-1]) / 100.0 if text.endswith("%") else float(text)


def transfer_size(bw_bits, seconds):
    """About `seconds` of the bandwidth, at least 256 KiB."""
    return max(256 * KIB, int(bw_bits / 8 * seconds))


def expected_added_rtt(profile, size=1):
    """Up delay + down delay, plus the (tiny) serialisation of `size` bytes each way."""
    rtt = profile["up_delay"] + profile["down_delay"]
    for key in ("up_bw", "down_bw"):
        if profile.get(key):
            rtt += size * 8 / profile[key]
    return rtt


def fmt(x, spec=".1f"):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return format(x, spec)


# ---------------------------------------------------------------------------------------------
# The server process: DOWN n (send n bytes), UP n cap (count n bytes, reply with the timing),
# ECHO (echo until EOF), STATS (every connection so far, JSON). One line of header each.

def serve_main():
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((LOOPBACK, 0))
    listener.listen(256)
    print(listener.getsockname()[1], flush=True)
    payload = memoryview(bytearray(os.urandom(MIB)) * 4)   # preallocated, sent over and over
    lock = threading.Lock()
    conns = []

    def exit_with_parent():
        try:
            while sys.stdin.buffer.read(4096):
                pass
        finally:
            os._exit(0)

    def drain(c, seconds=30.0):
        c.settimeout(seconds)
        try:
            while c.recv(65536):
                pass
        except OSError:
            pass

    def handle(c, rec):
        try:
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            c.settimeout(120)
            head = b""
            while b"\n" not in head:
                d = c.recv(4096)
                if not d:
                    return
                rec["bytes_in"] += len(d)
                head += d
                if b"\n" not in head and len(head) > 512:
                    return
            t_head = time.monotonic()
            line, _, rest = head.partition(b"\n")
            words = line.decode("ascii", "replace").split()
            rec["cmd"] = words[0] if words else ""
            if rec["cmd"] == "DOWN":
                left = int(words[1])
                while left > 0:
                    left -= c.send(payload[:min(left, len(payload))])
                c.shutdown(socket.SHUT_WR)
                drain(c)
            elif rec["cmd"] == "UP":
                n, cap = int(words[1]), float(words[2])
                got = len(rest)
                t_first = t_head if got else None
                first = got
                t_last = t_head
                buf = bytearray(MIB)
                eof = capped = False
                while got < n:
                    k = c.recv_into(buf)
                    now = time.monotonic()
                    if not k:
                        eof = True
                        break
                    rec["bytes_in"] += k
                    if t_first is None:
                        t_first, first = now, k
                    got += k
                    t_last = now
                    if now - t_first > cap:
                        capped = True
                        break
                result = {"bytes": got, "first_bytes": first,
                          "seconds": (t_last - t_first) if t_first is not None else 0.0,
                          "capped": capped, "eof": eof}
                if not eof:
                    c.sendall((json.dumps(result) + "\n").encode())
                    drain(c)
            elif rec["cmd"] == "ECHO":
                if rest:
                    c.sendall(rest)
                while True:
                    d = c.recv(65536)
                    if not d:
                        break
                    rec["bytes_in"] += len(d)
                    c.sendall(d)
            elif rec["cmd"] == "STATS":
                with lock:
                    snapshot = [dict(r) for r in conns]
                c.sendall((json.dumps(snapshot) + "\n").encode())
        except (ConnectionError, socket.timeout):
            pass
        except Exception as e:   # noqa: BLE001 - to the harness's log, the connection is dropped
            print(f"server: connection {rec['id']} ({rec['cmd']}): {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        finally:
            c.close()

    threading.Thread(target=exit_with_parent, daemon=True).start()
    while True:
        c, _ = listener.accept()
        with lock:
            rec = {"id": len(conns) + 1, "accepted": time.monotonic(), "cmd": None, "bytes_in": 0}
            conns.append(rec)
        threading.Thread(target=handle, args=(c, rec), daemon=True).start()


# ---------------------------------------------------------------------------------------------
# The self-test's shaping proxy: netreach's CLI and model (bandwidth as serialisation on a virtual
# wire in slices of ~10 ms, delay +- uniform jitter, loss as one retransmission timeout per lost
# 1448-byte segment, in-order delivery, 1 MiB of read-ahead), in python threads.

class PyShaper:
    SEGMENT = 1448

    def __init__(self, bw_bits, delay, jitter, loss, rtt, rng):
        self.bw = bw_bits / 8 if bw_bits else None   # bytes per second
        self.delay, self.jitter, self.loss, self.rng = delay, jitter, loss, rng
        self.rto = max(0.2, rtt)
        self.wire_free = 0.0
        self.last = 0.0

    def schedule(self, count, now):
        if self.loss >= 1:
            return []
        parts = []
        slice_size = max(self.SEGMENT, int(self.bw // 100)) if self.bw else count
        remaining = count
        while remaining > 0:
            size = min(slice_size, remaining)
            remaining -= size
            if self.bw:
                sent = max(now, self.wire_free) + size / self.bw
                self.wire_free = sent
            else:
                sent = now
            at = sent + self.delay
            if self.jitter > 0:
                at += max(self.rng.uniform(-self.jitter, self.jitter), -self.delay)
            if self.loss > 0:
                for _ in range((size + self.SEGMENT - 1) // self.SEGMENT):
                    while self.rng.random() < self.loss:
                        at += self.rto
            at = max(at, self.last)
            self.last = at
            if parts and parts[-1][0] == at:
                parts[-1][1] += size
            else:
                parts.append([at, size])
        return parts


def shaper_main(argv):
    p = argparse.ArgumentParser(prog="run-conditioner.py --_shaper")
    p.add_argument("--listen", required=True)
    p.add_argument("--upstream", required=True)
    p.add_argument("--profile")
    for flag in ("--delay", "--jitter", "--up-delay", "--down-delay", "--bandwidth", "--up-bandwidth",
                 "--down-bandwidth", "--loss"):
        p.add_argument(flag)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    conds = {"up": dict(bw=None, delay=0.0, jitter=0.0, loss=0.0),
             "down": dict(bw=None, delay=0.0, jitter=0.0, loss=0.0), "hold": 0.0}
    if a.profile:
        prof = PROFILES[a.profile]
        for d in ("up", "down"):
            conds[d].update(bw=prof[d + "_bw"], delay=prof[d + "_delay"], loss=prof["loss"])
        conds["hold"] = prof.get("hold", 0.0)
    for d in ("up", "down"):
        c = conds[d]
        if a.delay:
            c["delay"] = parse_duration(a.delay)
        if getattr(a, d + "_delay"):
            c["delay"] = parse_duration(getattr(a, d + "_delay"))
        if a.jitter:
            c["jitter"] = parse_duration(a.jitter)
        if a.bandwidth:
            c["bw"] = parse_bandwidth(a.bandwidth)
        if getattr(a, d + "_bandwidth"):
            c["bw"] = parse_bandwidth(getattr(a, d + "_bandwidth"))
        if a.loss:
            c["loss"] = parse_loss(a.loss)
    host, port = a.listen.rsplit(":", 1)
    up_host, up_port = a.upstream.rsplit(":", 1)
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, int(port)))
    listener.listen(256)
    out_lock = threading.Lock()

    def emit(obj):
        with out_lock:
            sys.stdout.write(json.dumps(obj) + "\n")
            sys.stdout.flush()

    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    emit({"event": "ready", "control": "127.0.0.1:0",
          "listeners": [{"name": "1", "listen": "%s:%d" % listener.getsockname(), "upstream": a.upstream}]})
    high_water = MIB

    def pipe(src, dst, shaper, hold_until, finished):
        queued = [0]
        cv = threading.Condition()
        items = []

        def reader():
            while True:
                with cv:
                    while queued[0] >= high_water:
                        cv.wait(0.5)
                try:
                    d = src.recv(65536)
                except OSError:
                    d = b""
                with cv:
                    if not d:
                        items.append(None)
                        cv.notify_all()
                        return
                    off = 0
                    for at, n in shaper.schedule(len(d), max(time.monotonic(), hold_until)):
                        items.append((at, d[off:off + n]))
                        off += n
                        queued[0] += n
                    cv.notify_all()

        def writer():
            try:
                while True:
                    with cv:
                        while not items:
                            cv.wait(0.5)
                        item = items.pop(0)
                    if item is None:
                        try:
                            dst.shutdown(socket.SHUT_WR)
                        except OSError:
                            pass
                        return
                    at, data = item
                    wait = at - time.monotonic()
                    if wait > 0:
                        time.sleep(wait)
                    dst.sendall(data)
                    with cv:
                        queued[0] -= len(data)
                        cv.notify_all()
            except OSError:
                for s in (src, dst):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
            finally:
                finished()

        threading.Thread(target=reader, daemon=True).start()
        threading.Thread(target=writer, daemon=True).start()

    next_id = [0]
    while True:
        client, _ = listener.accept()
        accepted = time.monotonic()
        next_id[0] += 1
        cid = next_id[0]

        def connection(client=client, accepted=accepted, cid=cid):
            try:
                server = socket.create_connection((up_host, int(up_port)), timeout=10)
            except OSError:
                client.close()
                return
            server.settimeout(None)
            for s in (client, server):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            emit({"event": "connection", "id": cid})
            rtt = conds["up"]["delay"] + conds["down"]["delay"]
            left = [2]
            lock = threading.Lock()

            def finished():
                with lock:
                    left[0] -= 1
                    if left[0] == 0:
                        client.close()
                        server.close()
                        emit({"event": "closed", "id": cid})

            hold_until = accepted + conds["hold"]
            for src, dst, d, salt in ((client, server, "up", 0), (server, client, "down", 1)):
                c = conds[d]
                rng = random.Random(a.seed * 1_000_003 + cid * 2 + salt)
                pipe(src, dst, PyShaper(c["bw"], c["delay"], c["jitter"], c["loss"], rtt, rng), hold_until, finished)

        threading.Thread(target=connection, daemon=True).start()


# ---------------------------------------------------------------------------------------------
# Processes

CHILDREN = []   # every Popen started, killed (by process group) on the way out


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
            continue   # stopped (and its group cleared) already; its pid may be someone else's now
        kill_group(proc, signal.SIGKILL)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


def group_cpu_seconds(pgid):
    """CPU time of a process group: its live (or zombie) members, plus the leader's reaped children."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[2]) != pgid:
            continue
        total += int(fields[11]) + int(fields[12])
        if int(name) == pgid:
            total += int(fields[13]) + int(fields[14])
    return total / tick


class Server:
    def __init__(self):
        self.proc = None
        self.port = None

    def start(self, log):
        self.proc = start_group([sys.executable, SCRIPT, "--_serve"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=log)
        line = read_line(self.proc.stdout.fileno(), 10.0)
        self.port = int(line)
        return self

    def stats(self):
        s = connect(self.port, 5.0)
        try:
            s.sendall(b"STATS\n")
            data = b""
            while not data.endswith(b"\n"):
                d = s.recv(65536)
                if not d:
                    break
                data += d
            return [r for r in json.loads(data) if r.get("cmd") != "STATS"]
        finally:
            s.close()

    def stop(self):
        if self.proc:
            kill_group(self.proc, signal.SIGKILL)
            self.proc.wait(timeout=5)


def read_line(fd, timeout):
    """The first line from a pipe, within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    data = b""
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no line within {timeout:.0f} s (got {data[:200]!r})")
        r, _, _ = select.select([fd], [], [], left)
        if r:
            d = os.read(fd, 65536)
            if not d:
                raise EOFError(f"the process closed its output (got {data[:200]!r})")
            data += d
    return data.partition(b"\n")[0].decode()


def free_port():
    s = socket.socket()
    s.bind((LOOPBACK, 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Proxy:
    """The proxy under test (netreach's CLI protocol, or a {listen_port} template), or socat."""

    def __init__(self, harness, cmd, label, conditions=()):
        self.h, self.label, self.conditions = harness, label, list(conditions)
        self.template = "{listen_port}" in cmd
        self.cmd_text = cmd
        self.proc = None
        self.port = None
        self.events = 0
        self.tail = []
        self.record = {"label": label, "conditions": self.conditions}

    def start(self, upstream_port):
        h = self.h
        if self.template:
            self.port = free_port()
            cmd = [w.format(listen_port=self.port, upstream_port=upstream_port) for w in shlex.split(self.cmd_text)]
            self.proc = start_group(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=h.logf)
            self.record["cmd"] = cmd
            deadline = time.monotonic() + 10
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"{cmd[0]} exited with {self.proc.returncode} before listening")
                try:
                    socket.create_connection((LOOPBACK, self.port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{cmd[0]} is not listening on {self.port} after 10 s")
                    time.sleep(0.05)
            return self
        cmd = shlex.split(self.cmd_text) + ["--listen", f"{LOOPBACK}:0", "--upstream", f"{LOOPBACK}:{upstream_port}"] \
            + self.conditions + ["--json"]
        self.record["cmd"] = cmd
        h.logf.write(f"== {' '.join(cmd)}\n".encode())
        h.logf.flush()
        try:
            self.proc = start_group(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=h.logf)
        except OSError as e:
            raise RuntimeError(f"cannot start {cmd[0]}: {e}")
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + 15
        data = b""
        while b"\n" not in data:
            left = deadline - time.monotonic()
            r = select.select([fd], [], [], left)[0] if left > 0 else []
            d = os.read(fd, 65536) if r else b""
            if not d:   # the deadline passed, or its stdout closed
                try:
                    self.proc.wait(timeout=1)
                except subprocess.TimeoutExpired:
                    pass
                raise RuntimeError(f"no ready line from {' '.join(cmd)} within 15 s (exit {self.proc.poll()}; "
                                   f"stdout {data[:200]!r}; stderr: {h.log_tail()})")
            data += d
        line, _, rest = data.partition(b"\n")
        try:
            ready = json.loads(line)
            assert ready.get("event") == "ready", "event is not \"ready\""
            listener = ready["listeners"][0]
            self.port = int(listener["listen"].rsplit(":", 1)[1])
            assert self.port > 0, "the listen address must give the bound port, not 0"
        except Exception as e:   # noqa: BLE001 - any malformed line is a set-up error
            raise RuntimeError(f"bad ready line from {cmd[0]}: {line[:300]!r} ({e})")
        self.record["ready"] = ready
        if listener.get("upstream") != f"{LOOPBACK}:{upstream_port}":
            log(f"warning: ready line's upstream is {listener.get('upstream')!r}, expected {LOOPBACK}:{upstream_port}")
        self.events = rest.count(b"\n")
        threading.Thread(target=self._drain, args=(fd, rest), daemon=True).start()
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

    def cpu_seconds(self):
        return group_cpu_seconds(self.proc.pid)

    def stop(self):
        if not self.proc:
            return
        if self.proc.poll() is None:
            if self.template:
                kill_group(self.proc, signal.SIGTERM)
            else:
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
                self.record["exit"] = self.proc.returncode
            except subprocess.TimeoutExpired:
                self.record["exit"] = "did not exit within 5 s of SIGTERM"
                kill_group(self.proc, signal.SIGKILL)
                self.proc.wait(timeout=5)
        else:
            self.record["exit"] = f"had exited already ({self.proc.returncode})"
        kill_group(self.proc, signal.SIGKILL)   # anything left in its group (socat's children)
        self.record["events_after_ready"] = self.events
        self.record["last_events"] = self.tail
        self.h.proxies.append(self.record)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


# ---------------------------------------------------------------------------------------------
# Client side

def connect(port, timeout=10.0):
    s = socket.create_connection((LOOPBACK, port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


RECV_BUF = memoryview(bytearray(4 * MIB))


def download(port, n, cap=None, recv_timeout=15.0):
    """Asks for n bytes and reads them into a preallocated buffer. Times are perf_counter seconds."""
    t_request = time.perf_counter()
    s = connect(port, recv_timeout)
    got = first = 0
    t_first = t_last = None
    capped = eof = False
    try:
        s.sendall(b"DOWN %d\n" % n)
        while got < n:
            k = s.recv_into(RECV_BUF, min(len(RECV_BUF), n - got))
            now = time.perf_counter()
            if not k:
                eof = True
                break
            if t_first is None:
                t_first, first = now, k
            got += k
            t_last = now
            if cap and now - t_first > cap:
                capped = True
                break
    except socket.timeout:
        eof = "timeout"
    finally:
        s.close()
    return {"bytes": got, "first_bytes": first, "requested": n, "capped": capped, "eof": eof,
            "seconds_request_to_last": (t_last - t_request) if t_last else None,
            "seconds_first_to_last": (t_last - t_first) if t_first else None}


def upload(port, n, cap, timeout):
    """Sends n bytes after an UP header; the server times them and replies."""
    s = connect(port, 10.0)
    chunk = memoryview(bytearray(256 * KIB))
    pending = memoryview(b"UP %d %.3f\n" % (n, cap))
    sent = 0
    reply = b""
    deadline = time.monotonic() + timeout
    try:
        s.setblocking(False)
        while time.monotonic() < deadline and b"\n" not in reply:
            writing = len(pending) > 0 or sent < n
            r, w, _ = select.select([s], [s] if writing else [], [], 0.5)
            if r:
                d = s.recv(4096)
                if not d:
                    break
                reply += d
                continue
            if w:
                try:
                    if len(pending):
                        pending = pending[s.send(pending):]
                    else:
                        sent += s.send(chunk[:min(len(chunk), n - sent)])
                except BlockingIOError:
                    pass
    except OSError as e:
        return {"error": f"upload: {e}", "sent": sent}
    finally:
        s.close()
    if b"\n" not in reply:
        return {"error": f"no reply within {timeout:.0f} s", "sent": sent}
    result = json.loads(reply.split(b"\n", 1)[0])
    result["sent"] = sent
    return result


def ping_pong(s, size, rounds, time_limit=None, min_rounds=0, hard_limit=None):
    """Round trips in ns on a connected ECHO socket: `rounds`, or fewer once `time_limit` seconds
    have passed and `min_rounds` are done, or once `hard_limit` seconds have passed whatever."""
    msg = b"x" * size
    buf = memoryview(bytearray(size))
    out = []
    start = time.monotonic()
    for i in range(rounds):
        elapsed = time.monotonic() - start
        if time_limit is not None and i >= min_rounds and elapsed > time_limit:
            break
        if hard_limit is not None and elapsed > hard_limit:
            break
        t0 = time.perf_counter_ns()
        s.sendall(msg)
        got = 0
        while got < size:
            k = s.recv_into(buf[got:])
            if not k:
                raise EOFError("the echo connection closed")
            got += k
        out.append(time.perf_counter_ns() - t0)
    return out


def echo_connection(port, timeout=10.0):
    s = connect(port, timeout)
    s.sendall(b"ECHO\n")
    return s


def us(ns_values):
    return [v / 1e3 for v in ns_values]


def ms(ns_values):
    return [v / 1e6 for v in ns_values]


# ---------------------------------------------------------------------------------------------
# The harness

class Harness:
    def __init__(self, args):
        self.args = args
        self.checks = []
        self.results = {}
        self.proxies = []
        self.direct_p50_us = None
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        self.out_dir = args.out_dir
        os.makedirs(self.out_dir, exist_ok=True)
        self.json_path = os.path.join(self.out_dir, f"{stamp}-{os.getpid()}.json")
        self.log_path = os.path.join(self.out_dir, f"{stamp}-{os.getpid()}.log")
        self.logf = open(self.log_path, "ab")
        self.server = None

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
        return Proxy(self, self.args.proxy_cmd, label, conditions)

    def can_condition(self):
        return "{listen_port}" not in self.args.proxy_cmd

    def direct_p50(self):
        """The direct 1-byte round trip's p50 in us (1000 rounds), once per run."""
        if self.direct_p50_us is None:
            s = echo_connection(self.server.port)
            try:
                ping_pong(s, 1, 100)
                self.direct_p50_us = median(us(ping_pong(s, 1, 1000)))
            finally:
                s.close()
        return self.direct_p50_us

    # -- a. relay throughput ------------------------------------------------------------------
    def part_relay(self):
        a = self.args
        n = a.size_mb * MIB
        print(f"\n## relay: download of {a.size_mb} MiB, no conditions, median of {a.runs} interleaved runs\n")
        socat = Proxy(self, SOCAT_TEMPLATE.replace("socat", shlex.quote(a.socat), 1), "socat")
        under = self.proxy("netreach (no conditions)")
        runs = {"direct": [], "socat": [], "netreach": []}
        cpu = {"socat": [], "netreach": []}
        raw = []
        try:
            socat.start(self.server.port)
            under.start(self.server.port)
            paths = [("direct", self.server.port, None), ("socat", socat.port, socat), ("netreach", under.port, under)]
            download(self.server.port, 8 * MIB)   # warm-up: page-in buffers, the server's first thread
            for run in range(a.runs):
                order = paths[run % 3:] + paths[:run % 3]
                for name, port, proxy in order:
                    c0 = proxy.cpu_seconds() if proxy else None
                    r = download(port, n, cap=300.0, recv_timeout=30.0)
                    time.sleep(0.1)   # let the relay's connection wind down before reading its CPU
                    c1 = proxy.cpu_seconds() if proxy else None
                    if r["bytes"] != n:
                        raise RuntimeError(f"{name}: got {r['bytes']} of {n} bytes (eof {r['eof']})")
                    mbps = n / 1e6 / r["seconds_request_to_last"]
                    runs[name].append(mbps)
                    if proxy:
                        cpu[name].append((c1 - c0) / (n / (1 << 30)))
                    raw.append({"run": run + 1, "path": name, "MBps": mbps, **r,
                                "proxy_cpu_s": (c1 - c0) if proxy else None})
                    log(f"relay run {run + 1}/{a.runs} {name:8s} {mbps:8.0f} MB/s")
        finally:
            socat.stop()
            under.stop()
        med = {k: median(v) for k, v in runs.items()}
        print("| path | MB/s per run | median MB/s | proxy CPU s per GiB (median) |")
        print("| --- | --- | ---: | ---: |")
        for name in ("direct", "socat", "netreach"):
            c = fmt(median(cpu[name]), ".2f") if name in cpu else "-"
            label = "netreach condition" if name == "netreach" else name
            if name == "netreach" and (a.proxy_cmd_given or a.self_test):
                label = "proxy under test (--proxy-cmd)" if a.proxy_cmd_given else "self-test stand-in (python)"
            print(f"| {label} | {' '.join(f'{x:.0f}' for x in runs[name])} | {med[name]:.0f} | {c} |")
        ratio = med["netreach"] / med["socat"]
        paired = median([x / y for x, y in zip(runs["netreach"], runs["socat"])])
        headroom = med["direct"] / med["socat"]
        print()
        self.check("relay", "throughput netreach/socat (ratio of medians)", f"{ratio:.3f}", f">= {RATIO_MIN:.2f}",
                   ratio >= RATIO_MIN)
        self.check("relay", "throughput netreach/socat (median of per-run ratios)", f"{paired:.3f}", "-", None)
        st = self.check("relay", "harness headroom direct/socat", f"{headroom:.2f}", f">= {HEADROOM_MIN:.2f}",
                        headroom >= HEADROOM_MIN, "below it the harness, not the relay, may be the limit")
        print(f"netreach/socat {ratio:.3f} (target >= {RATIO_MIN}; per-run ratios' median {paired:.3f}); "
              f"direct/socat {headroom:.2f}: the harness's headroom, {st} (target >= {HEADROOM_MIN})")
        self.results["relay"] = {"bytes": n, "runs": raw, "median_MBps": med, "ratio_netreach_socat": ratio,
                                 "per_run_ratio_median": paired,
                                 "direct_over_socat": headroom,
                                 "proxy_cpu_s_per_GiB": {k: median(v) for k, v in cpu.items()}}

    # -- b. latency -----------------------------------------------------------------------------
    def part_latency(self):
        a = self.args
        block = 100
        cpus = sorted(os.sched_getaffinity(0))
        modes = [("any", None)] + ([("one", cpus[-1])] if len(cpus) > 1 else [])
        print(f"\n## latency: ping-pong, no conditions, {a.rounds} rounds per path and size, interleaved in "
              f"blocks of {block}, a fresh connection per block\n")
        print("cpus any: as the scheduler places them (the target). cpus one: client, server and relay all on "
              f"cpu {cpus[-1]}, no cross-cpu wake-ups: the relay's own cost per round trip, far steadier (info).\n")
        print("| cpus | size | path | p50 us | p90 us | p99 us | added p50 us | per-connection p50s: min / median / max us |")
        print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
        out = {}
        raw = {}
        for mode, cpu in modes:
            samples, per_conn = self._latency_samples(block, cpu)
            for z in (1, 64):
                d50 = median(us(samples[("direct", z)]))
                for p in ("direct", "socat", "netreach"):
                    v = us(samples[(p, z)])
                    pc = us(per_conn[(p, z)])
                    row = {"p50": median(v), "p90": percentile(v, 90), "p99": percentile(v, 99), "n": len(v),
                           "added_p50": median(v) - d50, "connections": len(pc),
                           "per_connection_p50": [min(pc), median(pc), max(pc)]}
                    out[f"{mode}/{p}/{z}B"] = row
                    added = "-" if p == "direct" else f"{row['added_p50']:.1f}"
                    print(f"| {mode} | {z} B | {p} | {row['p50']:.1f} | {row['p90']:.1f} | {row['p99']:.1f} | {added} | "
                          f"{min(pc):.1f} / {median(pc):.1f} / {max(pc):.1f} |")
            raw.update({f"{mode}/{p}/{z}B": v for (p, z), v in samples.items()})
        print()
        for mode, _ in modes:
            for z in (1, 64):
                added = out[f"{mode}/netreach/{z}B"]["added_p50"]
                ref = out[f"{mode}/socat/{z}B"]["added_p50"]
                if mode == "any":
                    self.check("latency", f"added p50, {z}-byte ping-pong", f"{added:.1f} us",
                               f"<= {ADDED_P50_MAX_US:.0f} us", added <= ADDED_P50_MAX_US)
                else:
                    self.check("latency", f"added p50, {z}-byte ping-pong, one cpu", f"{added:.1f} us", "-", None)
                self.check("latency", f"socat's added p50, {z}-byte ping-pong{', one cpu' if mode == 'one' else ''}"
                           " (reference)", f"{ref:.1f} us", "-", None)
        if self.direct_p50_us is None:
            self.direct_p50_us = out["any/direct/1B"]["p50"]
        self.results["latency"] = {"rounds": a.rounds, "block": block, "pinned_cpu": cpus[-1] if len(modes) > 1 else None,
                                   "stats_us": out, "samples_ns": raw}

    def _latency_samples(self, block, cpu):
        """Round trips (ns) per (path, size), and each connection's p50. With `cpu`, this thread is
        pinned to it first, and a server, socat and proxy of its own are started (they inherit it)."""
        a = self.args
        mask = os.sched_getaffinity(0)
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})
        server = socat = under = None
        samples = {(p, z): [] for p in ("direct", "socat", "netreach") for z in (1, 64)}
        per_conn = {key: [] for key in samples}
        try:
            server = Server().start(self.logf) if cpu is not None else self.server
            socat = Proxy(self, SOCAT_TEMPLATE.replace("socat", shlex.quote(a.socat), 1), "socat").start(server.port)
            under = Proxy(self, a.proxy_cmd, "netreach (no conditions)").start(server.port)
            ports = {"direct": server.port, "socat": socat.port, "netreach": under.port}
            keys = list(samples)
            # A fresh connection per block: a relay's round trip depends on where the scheduler puts
            # its thread (socat forks a process per connection), so one long connection per path
            # would measure one placement; many average them.
            for b in range(math.ceil(a.rounds / block)):
                count = min(block, a.rounds - b * block)
                shift = b % len(keys)
                for key in keys[shift:] + keys[:shift]:
                    s = echo_connection(ports[key[0]])
                    try:
                        s.settimeout(10.0)
                        ping_pong(s, key[1], 10)   # warm-up
                        got = ping_pong(s, key[1], count)
                    finally:
                        s.close()
                    samples[key].extend(got)
                    per_conn[key].append(median(got))
        finally:
            os.sched_setaffinity(0, mask)
            for proxy in (socat, under):
                if proxy:
                    proxy.stop()
            if server is not None and server is not self.server:
                server.stop()
        return samples, per_conn

    # -- c. profiles --------------------------------------------------------------------------
    def part_profiles(self):
        a = self.args
        direct = self.direct_p50()
        print(f"\n## profiles: throughput at the receiver (first byte to last, ~{a.seconds:g} s of the bandwidth, "
              f"at least 256 KiB, at most {a.cap_seconds:g} s) and added round trip (1-byte ping-pong, "
              f"~{a.rtt_seconds:g} s, at least 10 rounds; direct p50 {direct:.1f} us subtracted)\n")
        print("| profile | measure | profile figure | measured | error | target | status |")
        print("| --- | --- | ---: | ---: | ---: | --- | --- |")
        out = {}
        for name in a.profile_list:
            prof = PROFILES[name]
            lossy = prof["loss"] > 0
            res = out[name] = {}
            if not self.can_condition():
                self.check("profiles", f"{name}", "-", "-", "skip", "the proxy command takes no conditions")
                print(f"| {name} | - | - | - | - | - | SKIP (the proxy command takes no conditions) |")
                continue
            try:
                with self.proxy(f"profile {name}", ["--profile", name]) as px:
                    px.start(self.server.port)
                    for direction in ("down", "up"):
                        bw = prof[direction + "_bw"]
                        # Each loss delays the bytes behind it by one RTO (1 s for very-bad), which
                        # a short transfer's end cannot average out: lossy profiles run 5x longer.
                        seconds = a.seconds * (LOSSY_FACTOR if lossy else 1)
                        cap = a.cap_seconds * (LOSSY_FACTOR if lossy else 1)
                        n = transfer_size(bw, seconds)
                        slack = 2 * (prof["up_delay"] + prof["down_delay"]) + 20.0
                        log(f"profile {name}: {direction} {n} bytes")
                        if direction == "down":
                            r = download(px.port, n, cap=cap, recv_timeout=15.0)
                            secs = r["seconds_first_to_last"] or 0.0
                        else:
                            r = upload(px.port, n, cap, cap + slack)
                            if "error" in r:
                                raise RuntimeError(f"upload: {r['error']}")
                            secs = r["seconds"]
                        measured = rate_bits_per_s(r["bytes"], r["first_bytes"], secs)
                        err = (measured - bw) / bw
                        res[direction] = {**r, "size": n, "profile_bps": bw, "measured_bps": measured, "error": err}
                        incomplete = r["bytes"] < n and not r.get("capped")
                        ok = abs(err) <= THROUGHPUT_TOL and not incomplete
                        note = f"lossy: a {seconds:g} s transfer" if lossy else ""
                        if incomplete:
                            note = "incomplete transfer"
                        st = self.check("profiles", f"{name} {direction}stream throughput", f"{measured / 1e3:.1f} kbit/s",
                                        f"{bw / 1e3:.0f} kbit/s +-{THROUGHPUT_TOL:.0%}", ok, note)
                        print(f"| {name} | {direction}stream kbit/s | {bw / 1e3:.0f} | {measured / 1e3:.1f} | "
                              f"{err:+.1%} | +-{THROUGHPUT_TOL:.0%} | {st}{' (' + note + ')' if note else ''} |")
                    s = echo_connection(px.port)
                    try:
                        s.settimeout(15.0 + 4 * (prof["up_delay"] + prof["down_delay"]))
                        rtts = us(ping_pong(s, 1, 1000, time_limit=a.rtt_seconds, min_rounds=10,
                                            hard_limit=a.rtt_seconds + 60))
                    finally:
                        s.close()
                expect = expected_added_rtt(prof) * 1e3
                p50 = median(rtts) / 1e3
                p90 = percentile(rtts, 90) / 1e3
                added = p50 - direct / 1e3
                res["rtt"] = {"rounds": len(rtts), "p50_ms": p50, "p90_ms": p90, "min_ms": min(rtts) / 1e3,
                              "max_ms": max(rtts) / 1e3, "added_p50_ms": added, "expected_ms": expect,
                              "samples_us": rtts}
                if lossy:
                    st = self.check("profiles", f"{name} round trip p50 / p90", f"{p50:.1f} / {p90:.1f} ms",
                                    f"{expect:.0f} ms without loss", None, "loss makes latency grow")
                    print(f"| {name} | RTT p50 / p90 ms ({len(rtts)} rounds) | {expect:.1f} | {p50:.1f} / {p90:.1f} | "
                          f"{added - expect:+.1f} ms | info | {st} (loss makes latency grow: each loss costs "
                          f"one RTO, {max(200, expect):.0f} ms) |")
                else:
                    ok = abs(added - expect) <= RTT_TOL_MS
                    st = self.check("profiles", f"{name} added round trip (p50)", f"{added:.2f} ms",
                                    f"{expect:.2f} ms +-{RTT_TOL_MS:g} ms", ok)
                    print(f"| {name} | added RTT p50 ms ({len(rtts)} rounds) | {expect:.2f} | {added:.2f} | "
                          f"{added - expect:+.2f} ms | +-{RTT_TOL_MS:g} ms | {st} |")
            except Exception as e:   # noqa: BLE001 - report and go on to the next profile
                self.check("profiles", f"{name}", "error", "-", False, str(e))
                print(f"| {name} | error | - | - | - | - | FAIL ({e}) |")
                res["error"] = str(e)
        self.results["profiles"] = {"direct_p50_us": direct, "seconds": a.seconds, "cap_seconds": a.cap_seconds,
                                    "profiles": out}

    # -- d. jitter ------------------------------------------------------------------------------
    def part_jitter(self):
        conds = ["--delay", "50ms", "--jitter", "10ms", "--seed", "7"]
        rounds = 120
        print(f"\n## jitter: {' '.join(conds)}, {rounds} 1-byte round trips\n")
        if not self.can_condition():
            self.check("jitter", "jitter", "-", "-", "skip", "the proxy command takes no conditions")
            print("SKIP (the proxy command takes no conditions)")
            return
        with self.proxy("jitter", conds) as px:
            px.start(self.server.port)
            s = echo_connection(px.port)
            try:
                s.settimeout(10.0)
                rtts = ms(ping_pong(s, 1, rounds, hard_limit=60.0))
            finally:
                s.close()
        lo, hi = JITTER_LO_MS, JITTER_HI_MS + JITTER_SLACK_MS
        outside = [x for x in rtts if not lo <= x <= hi]
        p50 = median(rtts)
        spread = max(rtts) - min(rtts)
        print("| rounds | min ms | p50 ms | max ms | outside [80, 121] ms |")
        print("| ---: | ---: | ---: | ---: | ---: |")
        print(f"| {len(rtts)} | {min(rtts):.2f} | {p50:.2f} | {max(rtts):.2f} | {len(outside)} |")
        print()
        self.check("jitter", "every round trip within bounds", f"{len(outside)} of {len(rtts)} outside "
                   f"(min {min(rtts):.2f}, max {max(rtts):.2f} ms)", f"all in [{lo:g}, {hi:g}] ms", not outside)
        self.check("jitter", "round trips vary (max - min)", f"{spread:.1f} ms", f">= {JITTER_SPREAD_MIN_MS:g} ms",
                   spread >= JITTER_SPREAD_MIN_MS, "the jitter is applied at all")
        self.check("jitter", "p50 round trip", f"{p50:.2f} ms", f"100 +-{JITTER_P50_TOL_MS:g} ms",
                   abs(p50 - 100.0) <= JITTER_P50_TOL_MS)
        self.check("jitter", "rounds", f"{len(rtts)}", ">= 100", len(rtts) >= 100)
        self.results["jitter"] = {"conditions": conds, "rtt_ms": rtts, "min": min(rtts), "p50": p50, "max": max(rtts),
                                  "outside": outside}

    # -- e. 100-loss ----------------------------------------------------------------------------
    def part_loss(self):
        print(f"\n## 100-loss: 64 KiB upstream to an echo server; nothing may arrive in {LOSS_WAIT_S:g} s\n")
        if not self.can_condition():
            self.check("loss", "100-loss", "-", "-", "skip", "the proxy command takes no conditions")
            print("SKIP (the proxy command takes no conditions)")
            return
        before = {r["id"] for r in self.server.stats()}
        client_got = 0
        closed = False
        with self.proxy("100-loss", ["--profile", "100-loss"]) as px:
            px.start(self.server.port)
            s = connect(px.port, 5.0)
            try:
                s.sendall(b"ECHO\n" + os.urandom(64 * KIB))
                deadline = time.monotonic() + LOSS_WAIT_S
                while (left := deadline - time.monotonic()) > 0:
                    r, _, _ = select.select([s], [], [], left)
                    if r:
                        try:
                            d = s.recv(65536)
                        except OSError:
                            d = b""
                        if not d:
                            closed = True
                            break
                        client_got += len(d)
            finally:
                s.close()
            new = [r for r in self.server.stats() if r["id"] not in before]
        server_got = sum(r["bytes_in"] for r in new)
        print("| upstream connections | bytes at the server | bytes back at the client | client saw a close |")
        print("| ---: | ---: | ---: | --- |")
        print(f"| {len(new)} | {server_got} | {client_got} | {'yes' if closed else 'no'} |")
        print()
        self.check("loss", "bytes reaching the server in 3 s", str(server_got), "0", server_got == 0)
        self.check("loss", "bytes back at the client in 3 s", str(client_got), "0", client_got == 0)
        self.results["loss"] = {"upstream_connections": new, "server_bytes": server_got, "client_bytes": client_got,
                                "client_saw_close": closed}

    # -- f. high-latency-dns --------------------------------------------------------------------
    def part_dns(self):
        direct = self.direct_p50()
        print(f"\n## high-latency-dns: connect -> first echoed byte, 5 fresh connections "
              f"(expected {DNS_HOLD_MS:.0f} ms + direct RTT {direct:.0f} us)\n")
        if not self.can_condition():
            self.check("dns", "high-latency-dns", "-", "-", "skip", "the proxy command takes no conditions")
            print("SKIP (the proxy command takes no conditions)")
            return
        times = []
        with self.proxy("high-latency-dns", ["--profile", "high-latency-dns"]) as px:
            px.start(self.server.port)
            for i in range(5):
                t0 = time.perf_counter()
                s = connect(px.port, 10.0)
                try:
                    s.settimeout(DNS_HOLD_MS / 1e3 + 10)
                    s.sendall(b"ECHO\nx")
                    if not s.recv(1):
                        raise EOFError("closed before the first byte")
                    times.append((time.perf_counter() - t0) * 1e3)
                finally:
                    s.close()
                log(f"dns: connection {i + 1}: {times[-1]:.1f} ms")
        excess = [t - direct / 1e3 - DNS_HOLD_MS for t in times]
        ok = all(DNS_LO_MS <= e <= DNS_HI_MS for e in excess)
        print("| connection | connect -> first byte ms | minus 3000 ms and direct RTT |")
        print("| ---: | ---: | ---: |")
        for i, (t, e) in enumerate(zip(times, excess)):
            print(f"| {i + 1} | {t:.1f} | {e:+.2f} |")
        print()
        self.check("dns", "connect -> first byte, each of 5", f"{min(times):.1f} .. {max(times):.1f} ms",
                   f"3000 ms + direct RTT, {DNS_LO_MS:+g}/{DNS_HI_MS:+g} ms", ok)
        self.results["dns"] = {"ms": times, "excess_ms": excess, "direct_p50_us": direct}

    # -- run ------------------------------------------------------------------------------------
    def run(self):
        a = self.args
        load = os.getloadavg()
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        print(f"# netreach condition benchmark, {started}")
        print(f"load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at start; {os.cpu_count()} cores; "
              f"proxy under test: {a.proxy_cmd}{' (self-test stand-in)' if a.self_test else ''}")
        self.server = Server().start(self.logf)
        try:
            for part in a.parts:
                try:
                    getattr(self, "part_" + part)()
                except Exception as e:   # noqa: BLE001 - a broken part fails, the others still run
                    log(f"{part}: {type(e).__name__}: {e}")
                    print(f"\n{part}: FAIL ({type(e).__name__}: {e})")
                    self.check(part, part, "error", "-", False, f"{type(e).__name__}: {e}")
                    self.results.setdefault(part, {})["error"] = str(e)
        finally:
            self.server.stop()
        if not a.proxy_cmd_given or a.self_test:
            bad = [p for p in self.proxies if p["label"] != "socat" and p.get("exit") != 0]
            started_json = [p for p in self.proxies if p["label"] != "socat"]
            if started_json:
                self.check("all", "proxy exits 0 on SIGTERM", f"{len(started_json) - len(bad)} of {len(started_json)}",
                           "all", not bad, "; ".join(f"{p['label']}: {p.get('exit')}" for p in bad))
        print("\n## summary\n")
        print("| part | check | measured | target | status |")
        print("| --- | --- | --- | --- | --- |")
        for c in self.checks:
            note = f" ({c['note']})" if c["note"] and c["status"] != "PASS" else ""
            print(f"| {c['part']} | {c['name']} | {c['value']} | {c['target']} | {c['status']}{note} |")
        failed = [c for c in self.checks if c["status"] == "FAIL"]
        counts = {s: sum(1 for c in self.checks if c["status"] == s) for s in ("PASS", "FAIL", "INFO", "SKIP")}
        print(f"\n{counts['PASS']} pass, {counts['FAIL']} fail, {counts['INFO']} info, {counts['SKIP']} skipped"
              f" -> {'PASS' if not failed else 'FAIL'}")
        report = {"started": started, "load_at_start": load, "cores": os.cpu_count(), "argv": sys.argv[1:],
                  "proxy_cmd": a.proxy_cmd, "self_test": a.self_test, "parts": a.parts, "checks": self.checks,
                  "results": self.results, "proxies": self.proxies, "passed": not failed,
                  "load_at_end": os.getloadavg()}
        with open(self.json_path, "w") as f:
            json.dump(report, f, indent=1)
        print(f"raw: {self.json_path}")
        log(f"raw: {self.json_path}; proxy stderr: {self.log_path}")
        return 0 if not failed else 1


def self_test_units():
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([5], 99) == 5
    assert percentile(list(range(101)), 90) == 90
    assert abs(parse_duration("50ms") - 0.05) < 1e-12 and abs(parse_duration("10us") - 1e-5) < 1e-15
    assert parse_bandwidth("10mbit") == 10e6 and parse_bandwidth("256kbit") == 256e3
    assert parse_loss("10%") == 0.1
    # 1 MB in 8 s, the first read's 1000 bytes excluded
    assert abs(rate_bits_per_s(1_001_000, 1000, 8.0) - 1e6) < 1e-6
    assert transfer_size(240e3, 8) == 256 * KIB and transfer_size(40e6, 8) == 40_000_000
    assert abs(expected_added_rtt(PROFILES["edge"], 0) - 0.84) < 1e-12
    # The stand-in's model: 1 Mbit/s, 1 MB: the last byte leaves 8 s after the first slice starts.
    sh = PyShaper(1e6, 0.5, 0.0, 0.0, 1.0, random.Random(1))
    parts = sh.schedule(1_000_000, 100.0)
    assert parts[0][1] == 1448 and abs(parts[-1][0] - (100.0 + 8.0 + 0.5)) < 1e-9, parts[-1]
    assert sum(p[1] for p in parts) == 1_000_000
    # Rate from those parts as the receiver sees them (first part's bytes excluded): the bandwidth.
    rate = rate_bits_per_s(1_000_000, parts[0][1], parts[-1][0] - parts[0][0])
    assert abs(rate - 1e6) / 1e6 < 1e-9, rate
    assert PyShaper(None, 0, 0, 1.0, 0, random.Random(1)).schedule(100, 0) == []
    log("self-test: unit checks pass")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--_serve":
        return serve_main()
    if len(sys.argv) > 1 and sys.argv[1] == "--_shaper":
        return shaper_main(sys.argv[2:])
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n", 1)[1])
    p.add_argument("--only", action="append", choices=PARTS, help="run only this part (repeatable)")
    p.add_argument("--size-mb", type=int, default=1024, help="relay download size in MiB (1024)")
    p.add_argument("--runs", type=int, default=3, help="relay runs per path (3)")
    p.add_argument("--rounds", type=int, default=5000, help="latency ping-pong rounds per path and size (5000)")
    p.add_argument("--profiles", default=",".join(MEASURED_PROFILES), help="comma-separated profiles (all)")
    p.add_argument("--seconds", type=float, default=8.0, help="throughput transfers: seconds of bandwidth (8)")
    p.add_argument("--cap-seconds", type=float, default=20.0, help="throughput transfers: time cap (20)")
    p.add_argument("--rtt-seconds", type=float, default=10.0, help="profile ping-pong: time bound (10)")
    p.add_argument("--proxy-cmd", help="the proxy under test (see below); default $BIN_DIR/netreach condition")
    p.add_argument("--bin-dir", default=os.environ.get("BIN_DIR") or os.path.join(ROOT, ".build", "release"))
    p.add_argument("--socat", default="socat", help="socat for the reference path")
    p.add_argument("--out-dir", default=os.path.join(HERE, ".build", "conditioner-runs"))
    p.add_argument("--self-test", action="store_true",
                   help="unit checks, then the conditioned parts against a python shaping stand-in")
    a = p.parse_args()
    a.proxy_cmd_given = a.proxy_cmd is not None
    if a.self_test:
        self_test_units()
        if not a.proxy_cmd_given:
            a.proxy_cmd = f"{shlex.quote(sys.executable)} {shlex.quote(SCRIPT)} --_shaper"
        a.parts = a.only or ["profiles", "jitter", "loss", "dns"]
    else:
        a.parts = a.only or PARTS
    a.parts = [x for x in PARTS if x in a.parts]
    if a.proxy_cmd == "socat":
        a.proxy_cmd = SOCAT_TEMPLATE.replace("socat", shlex.quote(a.socat), 1)
    if a.proxy_cmd is None:
        binary = os.path.join(a.bin_dir, "netreach")
        if not os.access(binary, os.X_OK):
            print(f"run-conditioner.py: no {binary} (set BIN_DIR or --bin-dir, or build it: "
                  "swift build -c release --product netreach)", file=sys.stderr)
            return 2
        a.proxy_cmd = f"{shlex.quote(binary)} condition"
    a.profile_list = [x.strip() for x in a.profiles.split(",") if x.strip()]
    unknown = [x for x in a.profile_list if x not in MEASURED_PROFILES]
    if unknown:
        print(f"run-conditioner.py: unknown or unmeasured profile(s) {unknown}; choose from {MEASURED_PROFILES} "
              "(100-loss and high-latency-dns are the loss and dns parts)", file=sys.stderr)
        return 2
    if a.size_mb < 1 or a.runs < 1 or a.rounds < 1:
        print("run-conditioner.py: --size-mb, --runs and --rounds must be positive", file=sys.stderr)
        return 2
    needs_socat = any(x in a.parts for x in ("relay", "latency")) or "{listen_port}" in a.proxy_cmd
    if needs_socat and subprocess.run(["sh", "-c", f"command -v {shlex.quote(a.socat)}"],
                                      stdout=subprocess.DEVNULL).returncode != 0:
        print(f"run-conditioner.py: needs socat ({a.socat}): apt-get install socat", file=sys.stderr)
        return 2

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    harness = Harness(a)
    try:
        return harness.run()
    finally:
        kill_all_children()


if __name__ == "__main__":
    sys.exit(main())
