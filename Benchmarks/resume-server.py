#!/usr/bin/env python3
"""Helper for run-resume.sh. Two modes:

  resume-server.py serve ADDRESS PORT LOG
      A one-connection-at-a-time HTTP/1.1 server (run it inside the peer namespace). For every
      request it appends "arrival PATH ACCEPT HEAD" to LOG, where ACCEPT and HEAD are CLOCK_MONOTONIC
      seconds at accept() and when the request head was complete, then answers "200 OK", body
      "ok\\n", Connection: close (as NamespaceHTTPServer in the tests). Writes "listening" first.
      Ends on SIGTERM, or by itself after --lifetime seconds (default 3600).

  resume-server.py trials --client NS --gateway IP --dev DEV --cli PATH --url-base URL
                          --server-log LOG --trials N --csv FILE [--label TEXT]
      For each trial: no default route in NS; `ip netns exec NS CLI get URL/trial-I
      --wait-for-connectivity --timeout 20s`; wait (<= 10 s) until its standard error says it is
      waiting; sleep a random 100-300 ms; t0; `ip -n NS route add default via IP dev DEV`; t1; wait
      (<= 25 s) for get to end. Resume latency = server HEAD time - t1 (and - t0). One CSV row per
      trial. Exit status 0 when every trial succeeded, 1 otherwise.

CLOCK_MONOTONIC is one clock for the whole system (namespaces do not change it), so times taken
by the server in the peer namespace and by this process in the root namespace compare directly.
"""
import argparse
import csv
import os
import random
import select
import signal
import socket
import subprocess
import sys
import time


def mono():
    return time.clock_gettime(time.CLOCK_MONOTONIC)


# MARK: serve

def serve(address, port, log_path, lifetime):
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((address, port))
    listener.listen(16)
    log = open(log_path, "a", buffering=1)
    log.write("listening\n")
    deadline = mono() + lifetime
    reply = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n"
    while not stop and mono() < deadline:
        try:
            ready, _, _ = select.select([listener], [], [], 0.1)
        except InterruptedError:
            continue
        if not ready:
            continue
        connection, _ = listener.accept()
        accepted = mono()
        connection.settimeout(2)
        head = b""
        try:
            while len(head) < 65536 and b"\r\n\r\n" not in head:
                chunk = connection.recv(4096)
                if not chunk:
                    break
                head += chunk
            if b"\r\n\r\n" in head:
                complete = mono()
                line = head.split(b"\r\n", 1)[0].decode("latin-1")
                parts = line.split(" ")
                path = parts[1] if len(parts) > 1 else "?"
                log.write(f"arrival {path} {accepted:.6f} {complete:.6f}\n")
                log.flush()
                connection.sendall(reply)
        except OSError:
            pass
        finally:
            connection.close()
    listener.close()


# MARK: trials

def run_ip(*arguments, check=True):
    return subprocess.run(["ip", *arguments], check=check, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, timeout=10)


def has_default_route(namespace):
    out = subprocess.run(["ip", "-n", namespace, "route", "show", "default"], capture_output=True,
                         text=True, timeout=10).stdout
    return bool(out.strip())


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def arrival_of(log_path, path):
    for line in read(log_path).splitlines():
        fields = line.split()
        if len(fields) == 4 and fields[0] == "arrival" and fields[1] == path:
            return float(fields[2]), float(fields[3])
    return None


def stop_process(process):
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=3)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=3)


def one_trial(args, index, workdir):
    row = {"trial": index, "label": args.label, "ok": 0, "note": ""}
    if has_default_route(args.client):
        run_ip("-n", args.client, "route", "del", "default")
    path = f"/trial-{index}"
    out_path = os.path.join(workdir, f"{args.label}-{index}.out")
    err_path = os.path.join(workdir, f"{args.label}-{index}.err")
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        started = mono()
        get = subprocess.Popen(
            ["ip", "netns", "exec", args.client, args.cli, "get", args.url_base + path,
             "--wait-for-connectivity", "--timeout", "20s"],
            stdin=subprocess.DEVNULL, stdout=out, stderr=err)
    try:
        # Bounded: 10 s for it to say it waits.
        waiting_at = None
        while mono() - started < 10:
            if "waiting for connectivity" in read(err_path):
                waiting_at = mono()
                break
            if get.poll() is not None:
                break
            time.sleep(0.005)
        if waiting_at is None:
            row["note"] = f"never reported waiting (exit {get.poll()}): {read(err_path).strip()[:200]!r}"
            return row
        row["waiting_report_s"] = round(waiting_at - started, 4)
        pause = random.uniform(0.1, 0.3)
        time.sleep(pause)
        row["pause_ms"] = round(pause * 1000, 1)
        if get.poll() is not None:
            row["note"] = f"exited while waiting, before the route: {read(err_path).strip()[:200]!r}"
            return row
        t0 = mono()
        added = run_ip("-n", args.client, "route", "add", "default", "via", args.gateway, "dev", args.dev,
                       check=False)
        t1 = mono()
        if added.returncode != 0:
            row["note"] = f"route add failed: {added.stderr.decode().strip()}"
            return row
        row["route_add_ms"] = round((t1 - t0) * 1000, 3)
        try:
            status = get.wait(timeout=25)
        except subprocess.TimeoutExpired:
            row["note"] = "get still running 25 s after the route came back"
            return row
        ended = mono()
        row["exit"] = status
        row["get_end_after_t1_ms"] = round((ended - t1) * 1000, 3)
        body = read(out_path)
        stderr = read(err_path).strip().replace("\n", " | ")
        row["stderr"] = stderr[:300]
        arrival = None
        for _ in range(100):  # the server logs before it answers; bounded anyway (1 s)
            arrival = arrival_of(args.server_log, path)
            if arrival:
                break
            time.sleep(0.01)
        if arrival is None:
            row["note"] = f"server saw no request for {path}"
            return row
        accepted, head = arrival
        row["resume_after_t1_ms"] = round((head - t1) * 1000, 3)
        row["resume_after_t0_ms"] = round((head - t0) * 1000, 3)
        row["accept_after_t1_ms"] = round((accepted - t1) * 1000, 3)
        if status != 0:
            row["note"] = f"get exited {status}"
        elif body != "ok\n":
            row["note"] = f"unexpected body {body[:50]!r}"
        else:
            row["ok"] = 1
        return row
    finally:
        stop_process(get)
        if has_default_route(args.client):
            run_ip("-n", args.client, "route", "del", "default", check=False)


FIELDS = ["label", "trial", "ok", "resume_after_t1_ms", "resume_after_t0_ms", "accept_after_t1_ms",
          "route_add_ms", "get_end_after_t1_ms", "pause_ms", "waiting_report_s", "exit", "note", "stderr"]


def trials(args):
    # SIGTERM (from run-resume.sh's cleanup or timeout) unwinds through one_trial's finally, which
    # stops the running `get` and removes the route.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    workdir = os.path.dirname(os.path.abspath(args.csv))
    rows = []
    failures = 0
    deadline = mono() + args.max_seconds
    for index in range(1, args.trials + 1):
        if mono() > deadline:
            print(f"resume-server.py: stopped after {index - 1} trials: over {args.max_seconds} s", file=sys.stderr)
            failures += 1
            break
        row = one_trial(args, index, workdir)
        rows.append(row)
        if not row["ok"]:
            failures += 1
            print(f"resume-server.py: {args.label} trial {index} failed: {row['note']}", file=sys.stderr)
        time.sleep(0.2)
    with open(args.csv, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow(row)
    return 0 if failures == 0 and rows else 1


# MARK: summary

def percentile(sorted_values, fraction):
    """Nearest rank: the smallest value with at least `fraction` of the values at or below it."""
    import math
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return sorted_values[rank - 1]


def summarize(csv_paths):
    print(f"{'condition':22s} {'n':>3s} {'measure':18s} {'p50':>7s} {'p90':>7s} {'max':>7s} {'>50ms':>6s}  (ms)")
    for path in csv_paths:
        with open(path) as f:
            rows = [r for r in csv.DictReader(f)]
        good = [r for r in rows if r["ok"] == "1"]
        label = rows[0]["label"] if rows else os.path.basename(path)
        if len(good) != len(rows):
            print(f"{label:22s} {len(rows) - len(good)} of {len(rows)} trial(s) failed")
        for key, name in [("resume_after_t1_ms", "arrival - t1"), ("resume_after_t0_ms", "arrival - t0"),
                          ("route_add_ms", "t1 - t0 (ip)")]:
            values = sorted(float(r[key]) for r in good if r.get(key))
            if not values:
                continue
            over = sum(1 for v in values if v > 50)
            print(f"{label:22s} {len(values):3d} {name:18s} {percentile(values, .5):7.1f} "
                  f"{percentile(values, .9):7.1f} {values[-1]:7.1f} {over:6d}")


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("serve")
    s.add_argument("address")
    s.add_argument("port", type=int)
    s.add_argument("log")
    s.add_argument("--lifetime", type=float, default=3600)
    t = sub.add_parser("trials")
    t.add_argument("--client", required=True)
    t.add_argument("--gateway", required=True)
    t.add_argument("--dev", required=True)
    t.add_argument("--cli", required=True)
    t.add_argument("--url-base", required=True)
    t.add_argument("--server-log", required=True)
    t.add_argument("--trials", type=int, default=30)
    t.add_argument("--csv", required=True)
    t.add_argument("--label", default="run")
    t.add_argument("--max-seconds", type=float, default=1200)
    m = sub.add_parser("summary")
    m.add_argument("csv", nargs="+")
    args = parser.parse_args()
    if args.mode == "serve":
        serve(args.address, args.port, args.log, args.lifetime)
        return 0
    if args.mode == "trials":
        return trials(args)
    summarize(args.csv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
