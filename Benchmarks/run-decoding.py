#!/usr/bin/env python3
"""Peak memory of decoding a gzip bomb: netreach get beside curl, in the same run.

    Benchmarks/run-decoding.py [NETREACH] [--gib N] [--rounds R]

Serves, on 127.0.0.1 only, a gzip stream of N GiB of zeros (1 by default: about 1 MB sent)
with `Content-Encoding: gzip`, and a 1 MB plain file as the baseline, then runs, R rounds each
(3 by default), interleaved:

- `netreach get -q -o FILE` (NetworkService.download) and `netreach get -q` into a pipe
  (NetworkService.bytes), the bomb and the baseline;
- `curl -s --compressed -o FILE` and into a pipe, the bomb.

Each run's peak resident memory is the kernel's (wait4's ru_maxrss) for that process alone.
Prints a table of medians, and the bomb's peak against the baseline's: the memory decoding
added. Issue 47's target: a 1 MB gzip of 1 GiB peaks at 64 MB or less with -o and to a pipe.
"""
import http.server
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import zlib


def make_bomb(gib):
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(1 << 20)
    parts = [compressor.compress(zeros) for _ in range(gib << 10)]
    parts.append(compressor.flush())
    return b"".join(parts)


class Handler(http.server.BaseHTTPRequestHandler):
    bodies = {}

    def do_GET(self):
        body, encoded = self.bodies.get(self.path, (None, False))
        if body is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        if encoded:
            self.send_header("Content-Encoding", "gzip")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def peak_kib(command, to_pipe):
    """Runs command to its end; returns its peak RSS in KiB (the pipe, if any, drained here)."""
    stdout = subprocess.PIPE if to_pipe else subprocess.DEVNULL
    process = subprocess.Popen(command, stdout=stdout, stderr=subprocess.PIPE)
    drained = 0
    if to_pipe:
        while True:
            chunk = process.stdout.read(1 << 20)
            if not chunk:
                break
            drained += len(chunk)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    error = process.stderr.read().decode(errors="replace")
    if process.returncode != 0:
        raise SystemExit(f"{command[0]} failed ({process.returncode}): {error}")
    return usage.ru_maxrss, drained


def main():
    arguments = sys.argv[1:]
    netreach = ".build/release/netreach"
    gib, rounds = 1, 3
    while arguments:
        word = arguments.pop(0)
        if word == "--gib":
            gib = int(arguments.pop(0))
        elif word == "--rounds":
            rounds = int(arguments.pop(0))
        else:
            netreach = word
    bomb = make_bomb(gib)
    Handler.bodies = {"/bomb": (bomb, True), "/plain": (os.urandom(1 << 20), False)}
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    print(f"bomb: {len(bomb)} bytes sent, {gib << 30} decoded; {rounds} rounds; {netreach}")

    cases = [
        ("netreach -o, bomb", lambda f: [netreach, "get", "-q", "-o", f, base + "/bomb"], False),
        ("netreach pipe, bomb", lambda f: [netreach, "get", "-q", base + "/bomb"], True),
        ("netreach -o, plain 1 MB", lambda f: [netreach, "get", "-q", "-o", f, base + "/plain"], False),
        ("netreach pipe, plain 1 MB", lambda f: [netreach, "get", "-q", base + "/plain"], True),
        ("curl -o, bomb", lambda f: ["curl", "-s", "--compressed", "-o", f, base + "/bomb"], False),
        ("curl pipe, bomb", lambda f: ["curl", "-s", "--compressed", base + "/bomb"], True),
    ]
    peaks = {name: [] for name, _, _ in cases}
    with tempfile.TemporaryDirectory() as directory:
        target = os.path.join(directory, "out")
        for _ in range(rounds):
            for name, command, to_pipe in cases:
                kib, drained = peak_kib(command(target), to_pipe)
                written = drained if to_pipe else os.path.getsize(target)
                expected = (gib << 30) if "bomb" in name else (1 << 20)
                if written != expected:
                    raise SystemExit(f"{name}: {written} bytes, not {expected}")
                peaks[name].append(kib)
                if os.path.exists(target):
                    os.remove(target)
    server.shutdown()
    print(f"{'case':28} {'peak RSS MB (median)':>22}   runs")
    for name, values in peaks.items():
        runs = ", ".join(f"{v / 1024:.1f}" for v in values)
        print(f"{name:28} {statistics.median(values) / 1024:22.1f}   {runs}")
    for way in ("-o", "pipe"):
        added = statistics.median(peaks[f"netreach {way}, bomb"]) - statistics.median(
            peaks[f"netreach {way}, plain 1 MB"])
        print(f"decoding added, netreach {way}: {added / 1024:.1f} MB")


if __name__ == "__main__":
    main()
