#!/usr/bin/env python3
"""The footprint of `netreach` builds beside the programs a fleet agent sits beside (the issue "a
fleet agent as small as the ones it sits beside"), side by side in one run: the executable's size,
`watch`'s and `serve`'s resident memory, each against references measured in the same run.

    sudo Benchmarks/run-footprint.py LABEL=PATH [LABEL=PATH ...] [--samples 3] [--changes 1000]
        [--serve-changes 10000] [--clients 200] [--json out.json] [--only size,watch,serve]

Each PATH is a `netreach` executable; it is copied (and fsync'ed) into a temporary directory first,
so a rebuild while this runs does not change what is measured. Needs root (network namespaces),
iproute2 and binutils' strip; the references are Debian's prometheus, prometheus-alertmanager and
prometheus-node-exporter (apt-get install -y prometheus prometheus-alertmanager
prometheus-node-exporter), each reported "not installed" when missing.

  size   each build stripped as scripts/build-deb.sh strips the packaged executable (`strip
         --strip-unneeded --remove-section=.comment --remove-section=.note`, into a temporary copy),
         in bytes, MB (10^6 bytes) and MiB; the references' installed executables the same way
         (and as installed). Bar: <= 30 MB.
  watch  `PATH watch --json --namespace NS` is started --samples times for each page-cache state of
         the executable (evicted: its cached pages dropped with posix_fadvise DONTNEED, as a daemon
         started at boot reads it; full: the whole file read first; see prepare_cache), the builds
         interleaved (sample 1: evicted A B, full A B; sample 2: ...). Each time `ip -n NS -o monitor
         route link address` is started just before it, the reference. VmRSS, RssFile, RssAnon and
         VmHWM (/proc/PID/status) of both: (a) 1.5 s after watch's first line; (b) after --changes
         route changes (see "Route changes"), once watch has printed a line for each (or none came
         for 1 s), then 1.5 s. Medians of the samples; the start-up time to the first line too.
         Bar: VmRSS <= 12 MB at both moments.
  serve  `PATH serve --listen 127.0.0.1:0 --namespace NS [--serve-to NAME=HOST ...]`, started once
         per build with its pages evicted: VmRSS, VmHWM (and RssFile, RssAnon) 3 s after /readyz
         answers 200 (idle); with --clients event-stream clients connected to /api/v1/events (raw
         sockets, `Accept: text/event-stream`; sampled 1.5 s after every client has its first path
         event); and after --serve-changes route changes, once every client has an event for each
         (or none came for 1.5 s), then 1.5 s, the clients still connected (a client closed by serve
         fails the run). Client 0, the pilot, is read at once by a thread of its own; the others by
         one selectors thread every READ_GAP s (fewer, larger reads: its CPU is taken from serve's).
         Bars: idle <= 25 MB, with the clients <= 30 MB, after the changes within 1 MB of the
         with-clients figure.
  reference  prometheus-node-exporter --web.listen-address=127.0.0.1:PORT (a free loopback port)
         --collector.disable-defaults --collector.loadavg --collector.meminfo --collector.cpu:
         VmRSS/VmHWM 3 s after it answers, and after 100 scrapes of /metrics; in both tables.

Route changes: the default route deleted and added back in turn (each one changes the path), by
one `ip -n NS -force -batch -` fed from a pipe, at least --pace-ms (2) apart and at most WINDOW (4)
ahead of the reader: watch's lines, serve's pilot client. Changes a reader takes in together show
as one line or none, so its count can stay behind for good: when nothing has come for RESYNC s, it
has read all there is and the window counts from there (a "resync"). For serve, no change is made
while the slowest client is more than SPREAD (64) events behind the pilot ("held"): serve drops a
client whose 256-event buffer fills, and on a busy machine one client's writer can fall that far
behind though the client reads. The tables give the lines or events seen, the changes per second,
the resyncs and holds.

Memory is in MB of 1024 kB (MiB, as /proc counts and run-cli-footprint.py prints); sizes in MB of
10^6 bytes and MiB. Differences (memory) and ratios (size) are against the first build given.

The lab: namespace nrfp-<pid>-w (lo, veth0 10.125.0.2/24, default route via 10.125.0.1) and its
peer nrfp-<pid>-p (veth1 10.125.0.1/24), IPv6 disabled in both. Nothing is sent anywhere: route
changes inside the lab only, HTTP to 127.0.0.1 only (no proxy). Every child is stopped and both
namespaces deleted on exit, whatever happens (SIGINT, SIGTERM, SIGHUP included); every wait is
bounded. Prints a table per section with "met"/"missed" per figure; exit status 1 when a
measurement failed (a process died, printed nothing, a wait timed out), 0 otherwise (bars missed
included), 2 on a usage or setup error.
"""
import argparse, collections, http.client, importlib.util, json, os, platform, selectors, shutil, \
    signal, socket, statistics, subprocess, sys, tempfile, threading, time

SIZE_BAR_MB = 30.0
WATCH_BAR_MB = 12.0
SERVE_IDLE_BAR_MB = 25.0
SERVE_CLIENTS_BAR_MB = 30.0
SERVE_GROWTH_BAR_MB = 1.0
STRIP = ["strip", "--strip-unneeded", "--remove-section=.comment", "--remove-section=.note"]
WINDOW = 4                   # changes the flapper may be ahead of its reader: few, so none are seen together
RESYNC = 0.1                 # s the reader has had nothing new: it has read all there is (Lab.flap)
READ_GAP = 0.05              # s the event-stream reader sleeps between rounds: fewer, larger reads
SPREAD = 64                  # events the slowest event-stream client may be behind the pilot (Lab.flap)
HOLD_LIMIT = 30              # s the flapper waits for the slowest client at most
FLAP_LIMIT = 600             # s one series of changes may take at most
GATEWAY = "10.125.0.1"
ADDRESS = "10.125.0.2"
NODE_COLLECTORS = ["--collector.disable-defaults", "--collector.loadavg", "--collector.meminfo",
                   "--collector.cpu"]
REFERENCES = [  # (name, Debian package, executable names)
    ("prometheus", "prometheus", ["prometheus"]),
    ("alertmanager", "prometheus-alertmanager", ["prometheus-alertmanager", "alertmanager"]),
    ("node_exporter", "prometheus-node-exporter", ["prometheus-node-exporter", "node_exporter"]),
]

CHILDREN = []                # every process started, stopped on exit


class MeasurementError(Exception):
    pass


class Interrupted(BaseException):
    def __init__(self, signum):
        super().__init__(f"signal {signum}")
        self.signum = signum


def log(message):
    print(message, file=sys.stderr, flush=True)


# MARK: processes

class Child:
    """A started process whose standard output (lines counted) and error (last lines kept) are
    drained by threads of their own, so it never blocks on a full pipe."""

    def __init__(self, argv, name, stdin=False, on_err_line=None):
        self.name = name
        self.lines = 0
        self.first_line_at = None
        self.last_line_at = None
        self.errors = collections.deque(maxlen=40)
        self.started = time.monotonic()
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        start_new_session=True)
        CHILDREN.append(self.process)
        self.pid = self.process.pid
        self._on_err_line = on_err_line
        for target in (self._read_out, self._read_err):
            threading.Thread(target=target, daemon=True).start()

    def _read_out(self):
        try:
            for _ in self.process.stdout:
                now = time.monotonic()
                if self.first_line_at is None:
                    self.first_line_at = now
                self.last_line_at = now
                self.lines += 1
        except (OSError, ValueError):
            pass

    def _read_err(self):
        try:
            for raw in self.process.stderr:
                line = raw.decode(errors="replace").rstrip()
                self.errors.append(line)
                if self._on_err_line:
                    self._on_err_line(line)
        except (OSError, ValueError):
            pass

    def alive(self):
        return self.process.poll() is None

    def check(self):
        if not self.alive():
            tail = "; ".join(list(self.errors)[-3:])
            raise MeasurementError(f"{self.name} exited with status {self.process.returncode}"
                                   + (f" ({tail})" if tail else ""))

    def stop(self, limit=10.0):
        return stop_process(self.process, limit)


def stop_process(process, limit=10.0):
    """SIGTERM, SIGKILL after `limit` s; the exit status."""
    if process.poll() is None:
        try:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            process.kill()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        except ProcessLookupError:
            pass
    if process.stdin:
        try:
            process.stdin.close()
        except OSError:
            pass
    return process.returncode


def run(argv, limit=30, check=True):
    """A short command, bounded; its output."""
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=limit)
    except subprocess.TimeoutExpired:
        raise MeasurementError(f"{' '.join(argv)}: no answer in {limit} s")
    if check and done.returncode != 0:
        raise MeasurementError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()}")
    return done


def wait_until(predicate, limit, step=0.005):
    deadline = time.monotonic() + limit
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(step)
    return True


def memory(child):
    """VmRSS, RssFile, RssAnon, VmHWM of a running child, in MB of 1024 kB."""
    child.check()
    fields = {}
    try:
        with open(f"/proc/{child.pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM", "RssFile", "RssAnon"):
                    fields[key] = int(value.split()[0]) / 1024.0
    except OSError as error:
        raise MeasurementError(f"{child.name}: cannot read /proc/{child.pid}/status: {error}")
    if "VmRSS" not in fields:
        raise MeasurementError(f"{child.name} has exited (no VmRSS)")
    return fields


def _load_cli_footprint():
    """run-cli-footprint.py, beside this file, as a module: its prepare_cache is this script's."""
    location = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run-cli-footprint.py")
    spec = importlib.util.spec_from_file_location("run_cli_footprint", location)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The executable's pages in the page cache in a state before a start: "evicted" drops them (this
# file only), "full" reads the whole file.
prepare_cache = _load_cli_footprint().prepare_cache


def http_get(port, path, timeout=5.0, headers=None):
    """(status, body) of GET http://127.0.0.1:PORT/PATH, directly (no proxy); (0, b"") on failure."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("GET", path, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.read()
    except (OSError, http.client.HTTPException):
        return 0, b""
    finally:
        connection.close()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# MARK: the lab

class Lab:
    def __init__(self):
        self.ns = f"nrfp-{os.getpid()}-w"
        self.peer = f"nrfp-{os.getpid()}-p"
        self.created = False

    def create(self):
        self.created = True
        for name in (self.ns, self.peer):
            run(["ip", "netns", "add", name])
        for name in (self.ns, self.peer):
            run(["ip", "netns", "exec", name, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                 "net.ipv6.conf.default.disable_ipv6=1"])
            run(["ip", "-n", name, "link", "set", "lo", "up"])
        run(["ip", "-n", self.ns, "link", "add", "veth0", "type", "veth", "peer", "name", "veth1",
             "netns", self.peer])
        run(["ip", "-n", self.ns, "addr", "add", f"{ADDRESS}/24", "dev", "veth0"])
        run(["ip", "-n", self.peer, "addr", "add", f"{GATEWAY}/24", "dev", "veth1"])
        run(["ip", "-n", self.peer, "link", "set", "veth1", "up"])
        run(["ip", "-n", self.ns, "link", "set", "veth0", "up"])
        if not wait_until(lambda: "state UP" in run(["ip", "-n", self.ns, "-o", "link", "show", "veth0"]).stdout,
                          5, 0.05):
            raise MeasurementError(f"veth0 in {self.ns} did not come up")
        run(["ip", "-n", self.ns, "route", "add", "default", "via", GATEWAY, "dev", "veth0"])

    def reset(self):
        """The default route present: every process starts from the same state."""
        run(["ip", "-n", self.ns, "route", "replace", "default", "via", GATEWAY, "dev", "veth0"])

    def remove(self):
        if not self.created:
            return
        present = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30).stdout
        names = {line.split()[0] for line in present.splitlines() if line.split()}
        for name in (self.ns, self.peer):
            if name in names:
                subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)

    def flap(self, changes, pace, seen, last_data, check, hold=None):
        """`changes` route changes (default route deleted, added, ...), at least `pace` s apart and
        at most WINDOW ahead of seen(), the changes the reader has shown. Changes the reader saw
        together show as one or none, so seen() can stay behind for good: when nothing has come
        (last_data(), a monotonic time) for RESYNC s after the last change was made, the reader
        has read all there is, and the window counts from there again (a resync). While hold()
        (serve: the slowest client is SPREAD events behind the pilot), no change is made, at most
        HOLD_LIMIT s. Returns what it did."""
        self.reset()
        batch = Child(["ip", "-n", self.ns, "-force", "-batch", "-"], "ip -batch", stdin=True)
        commands = [b"route del default\n", f"route add default via {GATEWAY} dev veth0\n".encode()]
        slack = resyncs = holds = 0
        held = 0.0
        started = time.monotonic()
        next_at = started
        try:
            for k in range(changes):
                checked = 0.0
                # The window narrows over the last changes, so the series ends with the reader
                # (nearly) caught up rather than WINDOW changes behind.
                window = min(WINDOW, changes - k)
                while k - seen() - slack > window:
                    now = time.monotonic()
                    if now - checked > 0.1:
                        check()
                        checked = now
                    if now - max(last_data() or 0, next_at - pace) > RESYNC:
                        slack = k - seen()
                        resyncs += 1
                        break
                    if now - started > FLAP_LIMIT:
                        raise MeasurementError(f"{k} of {changes} changes made in {FLAP_LIMIT} s: "
                                               "the reader does not keep up")
                    time.sleep(0.002)
                if hold and hold():
                    holds += 1
                    since = time.monotonic()
                    while hold():
                        check()
                        if time.monotonic() - since > HOLD_LIMIT:
                            raise MeasurementError(f"held {HOLD_LIMIT} s after {k} changes: "
                                                   "the slowest client does not catch up")
                        time.sleep(0.005)
                    held += time.monotonic() - since
                delay = next_at - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                try:
                    batch.process.stdin.write(commands[k % 2])
                    batch.process.stdin.flush()
                except OSError as error:
                    raise MeasurementError(f"ip -batch: {error}")
                next_at = time.monotonic() + pace
                if k % 256 == 0:
                    check()
            sent = time.monotonic() - started
            batch.process.stdin.close()
            try:
                status = batch.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                raise MeasurementError("ip -batch did not finish in 20 s")
            time.sleep(0.05)   # its last error lines
            errors = [line for line in batch.errors if line]
            if status != 0 or errors:
                raise MeasurementError(f"ip -batch exited {status}: {'; '.join(errors[:3])}")
        finally:
            batch.stop(5)
        return {"changes": changes, "seconds": round(sent, 3), "per_second": round(changes / sent, 1),
                "resyncs": resyncs, "holds": holds, "held_seconds": round(held, 2)}


def settle(count, expected, check, quiet, limit):
    """Waits until count() reaches `expected`, or has not moved for `quiet` s (it saw changes
    together), at most `limit` s (then fails: still catching up)."""
    last = count()
    moved = time.monotonic()
    deadline = moved + limit
    while True:
        check()
        now_count = count()
        if now_count >= expected:
            return now_count
        now = time.monotonic()
        if now_count != last:
            last, moved = now_count, now
        elif now - moved > quiet:
            return now_count
        if now > deadline:
            raise MeasurementError(f"{now_count} of {expected} seen after {limit} s, still coming")
        time.sleep(0.01)


# MARK: size

def strip_size(path, workdir):
    copy = os.path.join(workdir, "stripped-" + os.path.basename(path))
    run(STRIP + ["-o", copy, path], limit=120)
    size = os.path.getsize(copy)
    os.unlink(copy)
    return size


def package_version(package):
    done = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


def find_reference(names):
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    return None


def measure_size(builds, workdir):
    rows = []
    for build in builds:
        log(f"== size: {build['label']}")
        rows.append({"name": build["label"], "kind": "build", "path": build["path"],
                     "bytes": os.path.getsize(build["path"]), "stripped": strip_size(build["copy"], workdir)})
    for name, package, names in REFERENCES:
        path = find_reference(names)
        if not path:
            rows.append({"name": name, "kind": "reference", "package": package, "installed": False})
            continue
        log(f"== size: {name}")
        rows.append({"name": name, "kind": "reference", "package": package, "installed": True,
                     "version": package_version(package), "path": path, "bytes": os.path.getsize(path),
                     "stripped": strip_size(path, workdir)})
    return rows


def print_size(rows):
    print(f"\n== size: stripped as scripts/build-deb.sh strips ({' '.join(STRIP)}); MB = 10^6 bytes; "
          f"bar <= {SIZE_BAR_MB:.0f} MB")
    print(f"{'program':<30} {'as given B':>11} {'stripped B':>11} {'MB':>7} {'MiB':>7} {'x first':>8}  bar")
    first = next(r["stripped"] for r in rows if r["kind"] == "build")
    for r in rows:
        if r["kind"] == "reference" and not r["installed"]:
            print(f"{r['name']:<30} not installed (Debian package {r['package']})")
            continue
        mb = r["stripped"] / 1e6
        name = r["name"] if r["kind"] == "build" else f"{r['name']} {r.get('version') or ''}"
        verdict = ("met" if mb <= SIZE_BAR_MB else "missed") if r["kind"] == "build" else "(reference)"
        r["MB"], r["MiB"] = round(mb, 2), round(r["stripped"] / 2**20, 2)
        r["ratio_to_first"] = round(r["stripped"] / first, 3)
        if r["kind"] == "build":
            r["bar"] = verdict
        print(f"{name:<30} {r['bytes']:>11} {r['stripped']:>11} {mb:>7.2f} {r['MiB']:>7.2f} "
              f"{r['ratio_to_first']:>8.3f}  {verdict}")


# MARK: node_exporter

def measure_node_exporter():
    path = find_reference(REFERENCES[2][2])
    if not path:
        log("== node_exporter: not installed")
        return {"installed": False}
    for attempt in range(3):
        port = free_port()
        child = Child([path, f"--web.listen-address=127.0.0.1:{port}"] + NODE_COLLECTORS, "node_exporter")
        try:
            if not wait_until(lambda: not child.alive() or http_get(port, "/metrics", 2)[0] == 200, 15, 0.1):
                raise MeasurementError("node_exporter did not answer in 15 s")
            if not child.alive():
                if attempt < 2:
                    continue      # the port was taken meanwhile: another one
                child.check()
            log(f"== node_exporter on 127.0.0.1:{port}: 3 s idle, then 100 scrapes")
            time.sleep(3)
            idle = memory(child)
            size = 0
            for _ in range(100):
                status, body = http_get(port, "/metrics", 10)
                if status != 200:
                    raise MeasurementError(f"node_exporter /metrics answered {status}")
                size = len(body)
            scraped = memory(child)
            return {"installed": True, "version": package_version(REFERENCES[2][1]), "idle": idle,
                    "after_100_scrapes": scraped, "metrics_bytes": size, "flags": NODE_COLLECTORS}
        finally:
            child.stop()
    raise MeasurementError("node_exporter did not start")


# MARK: watch

def watch_once(build, state, lab, changes, pace):
    lab.reset()
    monitor = Child(["ip", "-n", lab.ns, "-o", "monitor", "route", "link", "address"], "ip -o monitor")
    watch = None
    try:
        prepare_cache(build["copy"], state)
        watch = Child([build["copy"], "watch", "--json", "--namespace", lab.ns], f"{build['label']} watch")
        if not wait_until(lambda: watch.lines >= 1 or not watch.alive(), 30):
            raise MeasurementError(f"{watch.name} printed nothing in 30 s")
        watch.check()
        first_ms = (watch.first_line_at - watch.started) * 1000
        time.sleep(1.5)
        start, start_ip = memory(watch), memory(monitor)
        base = watch.lines

        def check():
            watch.check()
            monitor.check()
        flapped = lab.flap(changes, pace, lambda: watch.lines - base, lambda: watch.last_line_at, check)
        lines = settle(lambda: watch.lines - base, changes, check, 1.0, 60)
        time.sleep(1.5)
        after, after_ip = memory(watch), memory(monitor)
        return {"first_line_ms": round(first_ms, 1), "start": start, "after": after, "lines": lines,
                "flap": flapped, "ip_start": start_ip, "ip_after": after_ip, "ip_lines": monitor.lines}
    finally:
        if watch:
            watch.stop()
        monitor.stop()


def measure_watch(builds, lab, samples, changes, pace):
    runs = {(b["label"], state): [] for b in builds for state in ("evicted", "full")}
    for sample in range(samples):
        for state in ("evicted", "full"):
            for build in builds:
                log(f"== watch: sample {sample + 1}/{samples}, cache {state}, {build['label']}")
                runs[(build["label"], state)].append(watch_once(build, state, lab, changes, pace))
    return runs


def median_fields(samples):
    return {key: round(statistics.median(s[key] for s in samples), 2) for key in samples[0]}


def summarize_watch(builds, runs, changes):
    rows = []
    for build in builds:
        for state in ("evicted", "full"):
            done = runs[(build["label"], state)]
            for moment in ("start", "after"):
                m = median_fields([r[moment] for r in done])
                rows.append({"build": build["label"], "cache": state, "moment": moment, **m,
                             "VmRSS_min": round(min(r[moment]["VmRSS"] for r in done), 2),
                             "VmRSS_max": round(max(r[moment]["VmRSS"] for r in done), 2),
                             "first_line_ms": statistics.median(r["first_line_ms"] for r in done),
                             "lines": [r["lines"] for r in done],
                             "flaps_per_second": [r["flap"]["per_second"] for r in done],
                             "resyncs": sum(r["flap"]["resyncs"] for r in done),
                             "bar": "met" if m["VmRSS"] <= WATCH_BAR_MB else "missed"})
    every = [r for done in runs.values() for r in done]
    ip_rows = {moment: median_fields([r["ip_" + moment] for r in every]) for moment in ("start", "after")}
    ip_lines = [r["ip_lines"] for r in every]
    return rows, ip_rows, ip_lines


def print_node_rows(node):
    if not node:
        return
    if not node.get("installed"):
        print(f"{'node_exporter':<14} not installed")
        return
    for moment, title in (("idle", "idle, 3 s"), ("after_100_scrapes", "100 scrapes")):
        m = node[moment]
        print(f"{'node_exporter':<14} {'':<8} {title:<13} {m['VmRSS']:>6.2f} {'':<13} {m['RssFile']:>7.2f} "
              f"{m['RssAnon']:>7.2f} {m['VmHWM']:>6.2f}   (reference, {node.get('version')})")


def print_watch(rows, ip_rows, ip_lines, node, changes, samples, lab):
    print(f"\n== watch --json --namespace {lab.ns}: resident memory, MB = 1024 kB; median of {samples} "
          f"starts (VmRSS min-max); start = 1.5 s after the first line, after = after {changes} route "
          f"changes + 1.5 s; bar VmRSS <= {WATCH_BAR_MB:.0f} MB")
    print(f"{'build':<14} {'cache':<8} {'moment':<13} {'VmRSS':>6} {'(min-max)':<13} {'RssFile':>7} "
          f"{'RssAnon':>7} {'VmHWM':>6} {'d first':>7} {'1st line ms':>11}  {'bar':<7} lines seen")
    first = {}
    for r in rows:
        key = (r["cache"], r["moment"])
        first.setdefault(key, r["VmRSS"])
        r["VmRSS_minus_first"] = round(r["VmRSS"] - first[key], 2)
        moment = "start" if r["moment"] == "start" else f"after {changes}"
        first_ms = f"{r['first_line_ms']:.0f}" if r["moment"] == "start" else ""
        rates = r["flaps_per_second"]
        seen = "" if r["moment"] == "start" else \
            f"{','.join(map(str, r['lines']))}; {min(rates):.0f}-{max(rates):.0f} changes/s" \
            + (f"; {r['resyncs']} resyncs" if r["resyncs"] else "")
        spread = "({:.1f}-{:.1f})".format(r["VmRSS_min"], r["VmRSS_max"])
        print(f"{r['build']:<14} {r['cache']:<8} {moment:<13} {r['VmRSS']:>6.2f} "
              f"{spread:<13} {r['RssFile']:>7.2f} "
              f"{r['RssAnon']:>7.2f} {r['VmHWM']:>6.2f} {r['VmRSS_minus_first']:>+7.2f} {first_ms:>11}  "
              f"{r['bar']:<7} {seen}")
    for moment in ("start", "after"):
        m = ip_rows[moment]
        title = "start" if moment == "start" else f"after {changes}"
        extra = f"   (reference; lines {min(ip_lines)}-{max(ip_lines)})" if moment == "after" else "   (reference)"
        print(f"{'ip -o monitor':<14} {'':<8} {title:<13} {m['VmRSS']:>6.2f} {'':<13} {m['RssFile']:>7.2f} "
              f"{m['RssAnon']:>7.2f} {m['VmHWM']:>6.2f}{extra}")
    print_node_rows(node)


# MARK: serve

PATH_EVENT = b"event: path\n"


class EventClients:
    """`n` event-stream clients of 127.0.0.1:PORT: per client, the path events received (counted on
    the wire, across reads) and whether it was closed. Client 0, the pilot, is read at once by a
    thread of its own: its count paces the route changes. The others are read by one selectors
    thread every READ_GAP s (fewer, larger reads: the reader's CPU is the machine's, serve's too),
    well inside serve's per-client buffer (256 events)."""

    def __init__(self, port, n):
        self.n = n
        self.counts = [0] * n
        self.ok = [None] * n
        self.closed = [False] * n
        self.bytes = 0
        self.pilot_data_at = None
        self.longest_gap = 0.0       # s, the longest time between two rounds of the batch reader
        self.stopping = False
        self.error = None
        self._tails = [b""] * n
        self._sockets = []
        request = (f"GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                   "Accept: text/event-stream\r\nCache-Control: no-cache\r\n\r\n").encode()
        try:
            for _ in range(n):
                s = socket.create_connection(("127.0.0.1", port), timeout=5)
                self._sockets.append(s)
                s.sendall(request)
        except OSError as error:
            self.close()
            raise MeasurementError(f"event-stream client {len(self._sockets)}: {error}")
        self._sockets[0].settimeout(0.2)
        for s in self._sockets[1:]:
            s.setblocking(False)
        self._threads = [threading.Thread(target=self._read_pilot, daemon=True),
                         threading.Thread(target=self._read_rest, daemon=True)]
        for thread in self._threads:
            thread.start()

    def _take(self, i, buffer, n):
        """Counts what client i read, the first n bytes of buffer; False when it was closed."""
        if not n:
            self.closed[i] = True
            return False
        if self.ok[i] is None and n >= 12:   # the first read holds the status line
            self.ok[i] = buffer[:12] == b"HTTP/1.1 200"
        self.bytes += n
        keep = len(PATH_EVENT) - 1
        # An event split across reads is matched across the seam, from the tail kept.
        tail = self._tails[i]
        self.counts[i] += buffer.count(PATH_EVENT, 0, n) + (tail + buffer[:min(keep, n)]).count(PATH_EVENT)
        self._tails[i] = (tail + buffer[:n])[-keep:] if n < keep else bytes(buffer[n - keep:n])
        return True

    def _read_pilot(self):
        pilot = self._sockets[0]
        buffer = bytearray(1 << 16)
        try:
            while not self.stopping:
                try:
                    n = pilot.recv_into(buffer)
                except socket.timeout:
                    continue
                except OSError:
                    n = 0
                if not self._take(0, buffer, n):
                    return
                self.pilot_data_at = time.monotonic()
        except Exception as error:  # noqa: BLE001 - reported by the measuring thread
            self.error = error

    def _read_rest(self):
        buffer = bytearray(1 << 17)   # recv_into one buffer: no allocation per read
        try:
            with selectors.DefaultSelector() as selector:
                for i, s in enumerate(self._sockets[1:], 1):
                    selector.register(s, selectors.EVENT_READ, i)
                last_round = time.monotonic()
                while not self.stopping and selector.get_map():
                    now = time.monotonic()
                    self.longest_gap = max(self.longest_gap, now - last_round)
                    last_round = now
                    for key, _ in selector.select(0.1):
                        try:
                            n = key.fileobj.recv_into(buffer)
                        except BlockingIOError:
                            continue
                        except OSError:
                            n = 0
                        if not self._take(key.data, buffer, n):
                            selector.unregister(key.fileobj)
                    time.sleep(READ_GAP)
        except Exception as error:  # noqa: BLE001 - reported by the measuring thread
            self.error = error

    def check(self):
        if self.error:
            raise MeasurementError(f"event-stream reader: {self.error}")
        closed = sum(self.closed)
        if closed:
            raise MeasurementError(f"{closed} event-stream clients were closed by serve (dropped for not "
                                   f"reading? this reader's longest pause between reads: "
                                   f"{self.longest_gap:.2f} s)")
        refused = sum(1 for ok in self.ok if ok is False)
        if refused:
            raise MeasurementError(f"{refused} event-stream clients were not answered 200")

    def slowest(self):
        return min(self.counts)

    def pilot(self):
        return self.counts[0]

    def close(self):
        self.stopping = True
        for thread in getattr(self, "_threads", []):
            thread.join(timeout=5)
        for s in self._sockets:
            try:
                s.close()
            except OSError:
                pass


def serve_once(build, lab, clients_n, changes, pace, destinations):
    lab.reset()
    prepare_cache(build["copy"], "evicted")
    port = []

    def listening(line):
        marker = "listening on http://127.0.0.1:"
        if marker in line and not port:
            port.append(int(line.split(marker, 1)[1].split()[0].rstrip("/")))
    argv = [build["copy"], "serve", "--listen", "127.0.0.1:0", "--namespace", lab.ns]
    for destination in destinations:
        argv += ["--to", destination]
    serve = Child(argv, f"{build['label']} serve", on_err_line=listening)
    clients = None
    try:
        if not wait_until(lambda: port or not serve.alive(), 30, 0.01):
            raise MeasurementError(f"{serve.name} did not say where it listens in 30 s")
        serve.check()
        started = time.monotonic()
        if not wait_until(lambda: not serve.alive() or http_get(port[0], "/readyz", 2)[0] == 200, 30, 0.05):
            raise MeasurementError(f"{serve.name}: /readyz not 200 in 30 s")
        serve.check()
        ready_ms = (time.monotonic() - serve.started) * 1000
        time.sleep(3)
        idle = memory(serve)
        log(f"   {clients_n} event-stream clients")
        clients = EventClients(port[0], clients_n)

        def check():
            serve.check()
            clients.check()
        if not wait_until(lambda: clients.slowest() >= 1 or not serve.alive() or clients.error
                          or any(clients.closed), 30, 0.01):
            raise MeasurementError(f"not every client had a path event 30 s after connecting "
                                   f"({sum(1 for c in clients.counts if c)} of {clients_n} had)")
        check()
        time.sleep(1.5)
        with_clients = memory(serve)
        check()
        base = clients.slowest()
        log(f"   {changes} route changes")
        pilot_base = clients.pilot()
        flapped = lab.flap(changes, pace, lambda: clients.pilot() - pilot_base, lambda: clients.pilot_data_at,
                           check, hold=lambda: clients.pilot() - clients.slowest() > SPREAD)
        caught_up = time.monotonic()
        slowest = settle(lambda: clients.slowest() - base, changes, check, 1.5, 120)
        fastest = max(clients.counts) - base
        waited = time.monotonic() - caught_up
        time.sleep(1.5)
        after = memory(serve)
        check()
        status, body = http_get(port[0], "/metrics", 10)
        metrics = {}
        for line in body.decode(errors="replace").splitlines():
            for name in ("netreach_event_clients", "netreach_event_clients_dropped_total"):
                if line.startswith(name + " "):
                    metrics[name] = float(line.split()[1])
        return {"ready_ms": round(ready_ms, 1), "idle": idle, "clients": with_clients, "after": after,
                "events_slowest": slowest, "events_fastest": fastest, "flap": flapped,
                "settle_seconds": round(waited, 2), "bytes_read": clients.bytes, "metrics": metrics,
                "listened_at": round((started - serve.started) * 1000, 1)}
    finally:
        if clients:
            clients.close()
        serve.stop(15)


def measure_serve(builds, lab, clients_n, changes, pace, destinations):
    results = {}
    for build in builds:
        log(f"== serve: {build['label']}")
        results[build["label"]] = serve_once(build, lab, clients_n, changes, pace, destinations)
    return results


def print_serve(builds, results, node, clients_n, changes, lab, destinations):
    to = " ".join(f"--to {d}" for d in destinations)
    print(f"\n== serve --namespace {lab.ns}{' ' + to if to else ''}: resident memory, MB = 1024 kB; "
          f"bars: idle <= {SERVE_IDLE_BAR_MB:.0f}, {clients_n} clients <= {SERVE_CLIENTS_BAR_MB:.0f}, "
          f"after {changes} changes within {SERVE_GROWTH_BAR_MB:.0f} of the {clients_n}-clients figure")
    print(f"{'build':<14} {'':<8} {'moment':<13} {'VmRSS':>6} {'':<13} {'RssFile':>7} {'RssAnon':>7} "
          f"{'VmHWM':>6} {'d first':>7} {'':>11}  {'bar':<7}")
    first = {}
    for build in builds:
        r = results.get(build["label"])
        if not r:
            continue
        for moment, title in (("idle", "idle, 3 s"), ("clients", f"{clients_n} clients"),
                              ("after", f"after {changes}")):
            m = r[moment]
            first.setdefault(moment, m["VmRSS"])
            m["VmRSS_minus_first"] = round(m["VmRSS"] - first[moment], 2)
            if moment == "idle":
                bar = "met" if m["VmRSS"] <= SERVE_IDLE_BAR_MB else "missed"
                note = f"ready {r['ready_ms']:.0f} ms after start"
            elif moment == "clients":
                bar = "met" if m["VmRSS"] <= SERVE_CLIENTS_BAR_MB else "missed"
                note = ""
            else:
                growth = m["VmRSS"] - r["clients"]["VmRSS"]
                m["growth"] = round(growth, 2)
                bar = "met" if abs(growth) <= SERVE_GROWTH_BAR_MB else "missed"
                f = r["flap"]
                dropped = r["metrics"].get("netreach_event_clients_dropped_total")
                dropped = "?" if dropped is None else int(dropped)
                note = (f"{growth:+.2f} MB; events per client {r['events_slowest']}-{r['events_fastest']} of "
                        f"{changes}; {f['per_second']:.0f} changes/s"
                        + (f", {f['resyncs']} resyncs" if f["resyncs"] else "")
                        + (f", held {f['holds']}x/{f['held_seconds']:.1f} s" if f["holds"] else "")
                        + f"; dropped {dropped}")
            m["bar"] = bar
            print(f"{build['label']:<14} {'':<8} {title:<13} {m['VmRSS']:>6.2f} {'':<13} {m['RssFile']:>7.2f} "
                  f"{m['RssAnon']:>7.2f} {m['VmHWM']:>6.2f} {m['VmRSS_minus_first']:>+7.2f} {'':>11}  "
                  f"{bar:<7} {note}")
    print_node_rows(node)


# MARK: main

def machine():
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "?")
    except OSError:
        pass
    return {"cores": os.cpu_count(), "cpu": model, "kernel": platform.release(),
            "load_before": os.getloadavg()[0], "ip": run(["ip", "-V"], check=False).stdout.strip()}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("builds", nargs="+", help="LABEL=PATH of a netreach executable")
    parser.add_argument("--samples", type=int, default=3, help="watch starts per build and cache state")
    parser.add_argument("--changes", type=int, default=1000, help="route changes watch reads")
    parser.add_argument("--serve-changes", type=int, default=10000, help="route changes serve sends")
    parser.add_argument("--clients", type=int, default=200, help="serve's event-stream clients")
    parser.add_argument("--pace-ms", type=float, default=2.0, help="least time between two route changes")
    parser.add_argument("--serve-to", action="append", default=[], metavar="NAME=HOST",
                        help="a --to destination for serve (e.g. gw=10.125.0.1); none by default")
    parser.add_argument("--json", metavar="FILE", help="write the figures to FILE as JSON")
    parser.add_argument("--only", default="size,watch,serve", help="sections, comma-separated")
    a = parser.parse_args()
    sections = [s.strip() for s in a.only.split(",") if s.strip()]
    for s in sections:
        if s not in ("size", "watch", "serve"):
            parser.error(f"--only: unknown section {s} (size, watch, serve)")
    if a.samples < 1 or a.changes < 2 or a.serve_changes < 2 or a.clients < 1:
        parser.error("--samples, --clients at least 1; --changes, --serve-changes at least 2")
    builds = []
    for spec in a.builds:
        label, _, path = spec.partition("=")
        if not label or not path or not os.path.isfile(path) or not os.access(path, os.X_OK):
            parser.error(f"{spec}: not LABEL=PATH of an executable")
        if label in (b["label"] for b in builds):
            parser.error(f"{label}: given twice")
        builds.append({"label": label, "path": path})
    if ("watch" in sections or "serve" in sections) and os.geteuid() != 0:
        print("run-footprint.py: needs root (network namespaces)", file=sys.stderr)
        return 2
    for tool in ["strip"] * ("size" in sections) + ["ip"]:
        if not shutil.which(tool):
            print(f"run-footprint.py: needs {tool}", file=sys.stderr)
            return 2

    def interrupted(signum, frame):
        raise Interrupted(signum)
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, interrupted)

    lab = Lab()
    workdir = tempfile.mkdtemp(prefix=f"nrfp-{os.getpid()}-")
    failures = []
    report = {"machine": machine(), "sections": sections,
              "parameters": {"samples": a.samples, "changes": a.changes, "serve_changes": a.serve_changes,
                             "clients": a.clients, "pace_ms": a.pace_ms, "window": WINDOW,
                             "serve_to": a.serve_to},
              "builds": []}
    try:
        for i, build in enumerate(builds):
            build["copy"] = os.path.join(workdir, f"{i}-netreach")
            shutil.copyfile(build["path"], build["copy"])
            os.chmod(build["copy"], 0o755)
            with open(build["copy"], "rb+") as f:
                os.fsync(f.fileno())     # clean pages: DONTNEED can evict them
            version = run([build["copy"], "--version"], check=False).stdout.strip() or "?"
            report["builds"].append({"label": build["label"], "path": build["path"], "version": version,
                                     "bytes": os.path.getsize(build["path"])})
        m = report["machine"]
        print(f"machine: {m['cores']} cores, {m['cpu']}, kernel {m['kernel']}, load {m['load_before']:.2f} before")
        for b in report["builds"]:
            print(f"build {b['label']}: {b['path']} (version {b['version']}, {b['bytes']} bytes)")

        def attempt(name, function):
            try:
                return function()
            except MeasurementError as error:
                failures.append(f"{name}: {error}")
                log(f"run-footprint.py: {name}: {error}")
                return None

        if "size" in sections:
            rows = attempt("size", lambda: measure_size(builds, workdir))
            if rows:
                print_size(rows)
                report["size"] = rows
        node = None
        if "watch" in sections or "serve" in sections:
            node = attempt("node_exporter", measure_node_exporter)
            report["node_exporter"] = node
            lab.create()
        if "watch" in sections:
            runs = attempt("watch", lambda: measure_watch(builds, lab, a.samples, a.changes, a.pace_ms / 1000))
            if runs:
                rows, ip_rows, ip_lines = summarize_watch(builds, runs, a.changes)
                print_watch(rows, ip_rows, ip_lines, node, a.changes, a.samples, lab)
                report["watch"] = {"rows": rows, "ip_monitor": ip_rows, "ip_monitor_lines": ip_lines,
                                   "runs": {f"{k[0]}/{k[1]}": v for k, v in runs.items()}}
        if "serve" in sections:
            results = {}
            for build in builds:
                result = attempt(f"serve {build['label']}", lambda: serve_once(
                    build, lab, a.clients, a.serve_changes, a.pace_ms / 1000, a.serve_to))
                if result:
                    results[build["label"]] = result
                log(f"== serve: {build['label']} done")
            if results:
                print_serve(builds, results, node, a.clients, a.serve_changes, lab, a.serve_to)
                report["serve"] = results
        report["load_after"] = os.getloadavg()[0]
        print(f"\nload after: {report['load_after']:.2f}")
    except MeasurementError as error:
        failures.append(str(error))
        log(f"run-footprint.py: {error}")
    except Interrupted as signal_:
        failures.append(f"interrupted by signal {signal_.signum}")
        log(f"run-footprint.py: interrupted (signal {signal_.signum}), cleaning up")
        return 128 + signal_.signum
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)
        for process in CHILDREN:
            stop_process(process, 5)
        lab.remove()
        shutil.rmtree(workdir, ignore_errors=True)
        report["failures"] = failures
        if a.json:
            with open(a.json, "w") as f:
                json.dump(report, f, indent=2, default=str)
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
    if failures:
        print("\nFAILED: " + "; ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
