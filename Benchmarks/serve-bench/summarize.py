#!/usr/bin/env python3
"""Summary of one Benchmarks/run-serve.sh run: reads the raw files in RUN_DIR, writes
RUN_DIR/summary.json and prints a table.

    summarize.py RUN_DIR
"""
import json
import os
import re
import sys

out = sys.argv[1]


def path(name):
    return os.path.join(out, name)


def read(name):
    try:
        with open(path(name)) as f:
            return f.read()
    except OSError:
        return None


def load_json(name):
    text = read(name)
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return {"error": f"{name} is not JSON", "text": text[:500]}


def status_file(name):
    """VmRSS, VmHWM, RssAnon, RssFile (kB) from a copy of /proc/PID/status."""
    text = read(name)
    if text is None:
        return None
    values = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
            values[key] = int(rest.split()[0])
    return {"rssKB": values.get("VmRSS"), "hwmKB": values.get("VmHWM"),
            "anonKB": values.get("RssAnon"), "fileKB": values.get("RssFile")}


UNITS = {"us": 1.0, "ms": 1e3, "s": 1e6, "m": 60e6, "h": 3600e6}


def micros(text):
    match = re.fullmatch(r"([0-9.]+)(us|ms|s|m|h)", text)
    return float(match.group(1)) * UNITS[match.group(2)] if match else None


def wrk(name):
    """p50/p75/p90/p99 (µs), requests/s, errors from `wrk --latency` output."""
    text = read(name)
    if not text:
        return None
    result = {}
    for line in text.splitlines():
        match = re.match(r"\s+(50|75|90|99)%\s+(\S+)", line)
        if match:
            result[f"p{match.group(1)}"] = micros(match.group(2))
        match = re.match(r"\s+Latency\s+(\S+)\s+(\S+)\s+(\S+)", line)
        if match:
            result["mean"], result["max"] = micros(match.group(1)), micros(match.group(3))
        match = re.match(r"\s+(\d+) requests in ([0-9.]+\w+), ([0-9.]+\w+) read", line)
        if match:
            result["requests"] = int(match.group(1))
        match = re.match(r"Requests/sec:\s+([0-9.]+)", line)
        if match:
            result["requestsPerSecond"] = float(match.group(1))
        match = re.match(r"\s+Non-2xx or 3xx responses: (\d+)", line)
        if match:
            result["non2xx"] = int(match.group(1))
        match = re.match(r"\s+Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", line)
        if match:
            result["socketErrors"] = sum(int(g) for g in match.groups())
    return result


def metric(text, name):
    if not text:
        return None
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            try:
                return float(line.rsplit(" ", 1)[1])
            except ValueError:
                return None
    return None


def ratio(a, b):
    return a / b if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else None


machine = read("machine.txt") or ""
summary = {"machine": dict(line.split(": ", 1) for line in machine.splitlines() if ": " in line)}
summary["debugBuild"] = "DEBUG" in machine

# 1. /metrics
sizes = {t: (read(f"size-{t}.txt") or "").strip() for t in ("serve", "node")}
if any(sizes.values()):
    metrics = {"responseBytes": {"serve": int(sizes["serve"] or 0), "nodeExporter": int(sizes["node"] or 0)},
               "nodeExporter": (read("node-exporter.txt") or "").strip(), "wrk": {}}
    for name in sorted(os.listdir(out)):
        match = re.fullmatch(r"wrk-serve-c(\d+)\.txt", name)
        if not match:
            continue
        c = match.group(1)
        serve, node = wrk(f"wrk-serve-c{c}.txt"), wrk(f"wrk-node-c{c}.txt")
        metrics["wrk"][f"c{c}"] = {
            "serve": serve, "nodeExporter": node,
            "p50Ratio": ratio((serve or {}).get("p50"), (node or {}).get("p50")),
            "p99Ratio": ratio((serve or {}).get("p99"), (node or {}).get("p99")),
            "throughputRatio": ratio((serve or {}).get("requestsPerSecond"), (node or {}).get("requestsPerSecond")),
        }
    summary["metrics"] = metrics

# 2. memory
memory = {}
for key, name in [("mainIdle", "serve-main-idle.status"), ("mainAfterWrk", "serve-main-after-wrk.status"),
                  ("mainAfterLatency", "serve-main-after-latency.status")]:
    if status_file(name):
        memory[key] = status_file(name)

# 3. latency
latency = load_json("latency.json")
if latency:
    summary["latency"] = latency

# 4. fan-out
fanout = {}
for run in ("stalled", "nostalled"):
    report = load_json(f"fanout-{run}.json")
    if not report:
        continue
    text = read(f"fanout-{run}-metrics.txt")
    report["serverDroppedCounter"] = metric(text, "netreach_event_clients_dropped_total")
    report["serverStop"] = (read(f"serve-fanout-{run}.stop") or "").strip()
    fanout[run] = report
if fanout:
    summary["fanout"] = fanout
    primary = fanout.get("stalled") or fanout.get("nostalled")
    m = primary.get("memory", {})
    for key, value in m.items():
        memory["fanout" + key[0].upper() + key[1:]] = value
    checkpoints = sorted((k for k in m if re.fullmatch(r"after\d+Changes", k)), key=lambda k: int(k[5:-7]))
    if len(checkpoints) >= 2:
        a, b = m[checkpoints[-2]], m[checkpoints[-1]]
        memory["growthBetweenLastCheckpointsKB"] = {
            "from": checkpoints[-2], "to": checkpoints[-1],
            "rssKB": b["rssKB"] - a["rssKB"], "hwmKB": b["hwmKB"] - a["hwmKB"], "anonKB": b["anonKB"] - a["anonKB"]}
if memory:
    summary["memory"] = memory

with open(path("summary.json"), "w") as f:
    json.dump(summary, f, indent=2)

# ---- the table ----


def fmt(value, spec="{:.1f}"):
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) and spec == "{:.1f}":
        return str(value)
    if isinstance(value, (int, float)):
        return spec.format(value)
    return str(value)


def row(label, *cells, width=16):
    print(f"  {label:44s}" + "".join(f"{fmt(c) if not isinstance(c, str) else c:>{width}s}" for c in cells))


def verdict(ok):
    return "met" if ok else "MISSED"


print()
title = "== netreach serve benchmarks"
if summary["debugBuild"]:
    title += "  [DEBUG BUILD: validation only, not for RESULTS.md]"
print(title)
for line in machine.splitlines():
    print("  " + line)

if "metrics" in summary:
    metrics = summary["metrics"]
    print("\n1. GET /metrics latency (wrk -t1 --latency, loopback; µs)")
    row("", "serve", "node_exporter", "serve/node")
    sizes = metrics["responseBytes"]
    row("response size (bytes)", fmt(sizes["serve"], "{:d}"), fmt(sizes["nodeExporter"], "{:d}"),
        fmt(ratio(sizes["serve"], sizes["nodeExporter"]), "{:.2f}"))
    for c, cell in metrics["wrk"].items():
        s, n = cell["serve"] or {}, cell["nodeExporter"] or {}
        row(f"{c}: p50", s.get("p50"), n.get("p50"), fmt(cell["p50Ratio"], "{:.2f}"))
        row(f"{c}: p99", s.get("p99"), n.get("p99"), fmt(cell["p99Ratio"], "{:.2f}"))
        row(f"{c}: requests/s", s.get("requestsPerSecond"), n.get("requestsPerSecond"),
            fmt(cell["throughputRatio"], "{:.2f}"))
        errors = (s.get("non2xx") or 0) + (s.get("socketErrors") or 0) + (n.get("non2xx") or 0) + (n.get("socketErrors") or 0)
        if errors:
            row(f"{c}: non-2xx responses + socket errors", fmt(errors, "{:d}"))
    print(f"  node_exporter: {metrics['nodeExporter']}")

if memory:
    print("\n2. serve resident memory (MB)")
    row("", "VmRSS", "VmHWM", "RssAnon")
    labels = [("mainIdle", "idle after start (server 1)"), ("mainAfterWrk", "server 1 after the wrk runs"),
              ("mainAfterLatency", "server 1 after the latency changes"),
              ("fanoutIdle", "idle after start (fan-out server)"),
              ("fanoutConnected", "fan-out server, clients connected")]
    for key in sorted((k for k in memory if re.fullmatch(r"fanoutAfter\d+Changes", k)), key=lambda k: int(k[11:-7])):
        labels.append((key, f"after {int(key[11:-7]):,} route changes"))
    labels.append(("fanoutEnd", "fan-out server at the end"))
    for key, label in labels:
        if key in memory and memory[key].get("rssKB") is not None:
            v = memory[key]
            row(label, v["rssKB"] / 1024, v["hwmKB"] / 1024, (v.get("anonKB") or 0) / 1024)
    growth = memory.get("growthBetweenLastCheckpointsKB")
    if growth:
        row(f"growth {growth['from'][5:-7]} -> {growth['to'][5:-7]} changes (kB)",
            fmt(growth["rssKB"], "{:d}"), fmt(growth["hwmKB"], "{:d}"), fmt(growth["anonKB"], "{:d}"))
    if fanout:
        clients = (fanout.get("stalled") or fanout.get("nostalled"))["clients"]
        print(f"  (fan-out server: {clients} readers" + (" + 1 stalled client" if "stalled" in fanout else "") + ")")

if latency and "serve" in latency:
    print(f"\n3. route change -> event latency, {latency['changes']} changes (µs from just before sendto)")
    row("", "serve SSE", "ip monitor", "serve/ip")
    for q in ("p50", "p90", "p99", "max"):
        row(q, latency["serve"].get(q), latency["ipMonitor"].get(q),
            fmt(ratio(latency["serve"].get(q), latency["ipMonitor"].get(q)), "{:.2f}"))
    row("serve, last event of the change: p50 / p99", latency["serveLastEventOfChange"].get("p50"),
        latency["serveLastEventOfChange"].get("p99"))
    row("per change serve - ip: p50 / p99", latency["serveMinusIP"].get("p50"), latency["serveMinusIP"].get("p99"))
    row("events per change (del/add), ip lines", f"{latency['serveEventsPerChange']['del']}/{latency['serveEventsPerChange']['add']}",
        f"{latency['ipLinesPerChange']['del']}/{latency['ipLinesPerChange']['add']}")
    row("timeouts, extra events, missing events", fmt(latency["timeouts"], "{:d}"),
        fmt(latency["extraEvents"], "{:d}"), fmt(latency["missingEvents"], "{:d}"))
    if "watch" in latency:
        # WATCH=1: the same engine's line through a pipe, read in the same run.
        row("", "watch --json", "ip monitor", "watch/ip")
        for q in ("p50", "p90", "p99"):
            row(f"watch {q}", latency["watch"].get(q), latency["ipMonitor"].get(q),
                fmt(ratio(latency["watch"].get(q), latency["ipMonitor"].get(q)), "{:.2f}"))
        row("per change serve - watch: p50 / p99", latency["serveMinusWatch"].get("p50"),
            latency["serveMinusWatch"].get("p99"))
        row("watch lines per change (del/add)",
            f"{latency['watchLinesPerChange']['del']}/{latency['watchLinesPerChange']['add']}")
    r = latency.get("p50Ratio")
    print(f"  target p50 serve/ip <= 1.5: {fmt(r, '{:.2f}')}x -> {verdict(r is not None and 0 < r <= 1.5)}")
elif latency:
    print("\n3. route change -> event latency: no result:", latency.get("error"))

if fanout:
    first = next(iter(fanout.values()))
    print(f"\n4. fan-out: {first['clients']} readers, {first['flaps']} flaps = {first['changes']} changes, "
          f"{first.get('ids')} event ids (µs)")
    runs = list(fanout)
    header = {"stalled": "+stalled", "nostalled": "no stalled"}
    row("", *[header[r] for r in runs])
    for q in ("p50", "p99", "max"):
        row(f"delay behind earliest reader: {q}", *[fanout[r]["delay"].get(q) for r in runs])
    for q in ("p50", "p99", "max"):
        row(f"same, kernel receive timestamps: {q}", *[fanout[r]["delayKernel"].get(q) for r in runs])
    for q in ("p50", "p99"):
        row(f"change -> last reader has it: {q}", *[fanout[r]["triggerToLastReader"].get(q) for r in runs])
    row("every reader got every id in order", *[fanout[r]["everyReaderGotEveryIdInOrder"] for r in runs])
    row("readers with gaps / out of order / closed", *[
        f"{fanout[r]['readersWithGaps']}/{fanout[r]['readersOutOfOrder']}/{fanout[r]['readersClosedByServer']}" for r in runs])
    row("pacing timeouts", *[fmt(fanout[r]["timeouts"], "{:d}") for r in runs])
    row("stalled client dropped (socket closed)", *[fanout[r].get("stalledDropped", "-") for r in runs])
    row("stalled client: last id it received", *[fanout[r].get("stalledLastIdReceived", "-") for r in runs])
    row("netreach_event_clients_dropped_total", *[fanout[r].get("serverDroppedCounter") for r in runs])
    row("serve CPU per change (µs)", *[fanout[r].get("serveCPUMicrosPerChange") for r in runs])
    row("seconds for the flaps", *[fanout[r].get("seconds") for r in runs])
    p99 = [fanout[r]["delay"].get("p99") for r in runs]
    ok = all(p is not None and p <= 10000 for p in p99)
    print(f"  target p99 delay <= 10 ms: {' / '.join(fmt(p and p / 1000, '{:.2f} ms') for p in p99)} -> {verdict(ok)}")
print(f"\nJSON: {path('summary.json')}")
