#!/usr/bin/env bash
# Builds the harness in release and runs it RUNS times (default 3) in namespaces of its own,
# then prints the median of each headline number. Needs root. Every namespace it makes is named
# nrbench-<this script's pid>-<run>[-p] and is deleted on exit, whatever happens.
#
#   sudo Benchmarks/run-latency.sh                 # 3 runs, 200+200 flaps, 10,000-change storms
#   RUNS=1 Benchmarks/run-latency.sh --flaps 20 --storm 1000 --idle-seconds 2   # a quick look
#   Benchmarks/run-latency.sh --same-peer-index    # the rate-limited linkwatch case (see RESULTS.md)
#
# Extra arguments go to every DetectionLatency run. Output: Benchmarks/.build/latency-runs/<time>-<pid>/.
# SWIFT_BUILD_FLAGS (word-split) is added to every `swift build`, e.g.
#   SWIFT_BUILD_FLAGS="-Xswiftc -no-whole-module-optimization"   # when the WMO release build fails
# STATIC_CLI=0 skips the --static-swift-stdlib CLI build (and its memory sample).
# CLI_ASKING=1 adds AskingMonitor to the CLI phase (DetectionLatency --cli-asking); --asking-flaps N
# (default 100, 0: none) sets the in-process asking-floor phase.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
runs="${RUNS:-3}"
out="$here/.build/latency-runs/$(date -u +%Y%m%dT%H%M%SZ)-$$"
prefix="nrbench-$$"

if [[ "$(id -u)" != 0 ]]; then echo "run-latency.sh: needs root (network namespaces)" >&2; exit 2; fi
command -v ip >/dev/null || { echo "run-latency.sh: needs iproute2 (ip)" >&2; exit 2; }

child=""
cleanup() {
    if [[ -n "$child" ]] && kill -0 "$child" 2>/dev/null; then
        kill -TERM "$child" 2>/dev/null || true   # timeout passes it on; the harness removes its namespaces
        wait "$child" 2>/dev/null || true
    fi
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${prefix}-[0-9]+(-p)?$" || true); do
        ip netns del "$ns" 2>/dev/null || true
    done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cd "$here"
echo "== building (release)" >&2
# The library at NETREACH_REV (default HEAD), from `git archive`: see source-at-rev.sh.
source "$here/source-at-rev.sh"
timeout 1200 swift build -c release "${build_flags[@]}" --product DetectionLatency >&2
timeout 1200 swift build -c release "${build_flags[@]}" --package-path "$src" --scratch-path "$here/.build/cli" --product netreach >&2
cli_args=(--cli "$here/.build/cli/release/netreach")
if [[ "${STATIC_CLI:-1}" != 0 ]]; then
    # The same CLI with the Swift runtime and Foundation linked statically, for comparison.
    timeout 1200 swift build -c release "${build_flags[@]}" --static-swift-stdlib --package-path "$src" --scratch-path "$here/.build/cli-static" --product netreach >&2
    cli_args+=(--cli "$here/.build/cli-static/release/netreach")
fi
harness="$(swift build -c release "${build_flags[@]}" --show-bin-path)/DetectionLatency"
# CLI_ASKING=1: the CLI phase alternates rounds of `watch` with rounds of AskingMonitor (the C
# reader that asks the kernel the same questions), `ip -o monitor` in both.
if [[ "${CLI_ASKING:-0}" != 0 ]]; then
    timeout 1200 swift build -c release "${build_flags[@]}" --product AskingMonitor >&2
    cli_args+=(--cli-asking "$(dirname "$harness")/AskingMonitor")
fi

mkdir -p "$out"
# Resident-memory floors for a Swift process on this machine (see RESULTS.md): measured once.
for base in plain essentials foundation; do
    swiftc -O "$here/RSSBaselines/$base.swift" -o "$here/.build/rss-$base" 2>/dev/null
    "$here/.build/rss-$base" >/dev/null & pid=$!
    sleep 1.5
    echo "rss baseline $base: $(awk '/^VmRSS/ {printf "%.1f MB", $2/1024}' /proc/$pid/status)"
    wait $pid
done | tee "$out/rss-baselines.txt"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r)" | tee "$out/machine.txt"
echo "swift: $(swift --version 2>&1 | head -1)" | tee -a "$out/machine.txt"
echo "commit: $rev (built from git archive $src; working tree HEAD $(git -C "$here/.." rev-parse --short HEAD))" | tee -a "$out/machine.txt"
echo "build flags: -c release ${SWIFT_BUILD_FLAGS:-}" | tee -a "$out/machine.txt"

for run in $(seq 1 "$runs"); do
    echo "== run $run/$runs, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    # Bounded: a run takes ~1 min; a stuck one is killed and its namespaces removed by cleanup.
    timeout --signal=TERM --kill-after=10 600 "$harness" --namespace "$prefix-$run" "${cli_args[@]}" \
        --json "$out/run-$run.json" "$@" > "$out/run-$run.txt" &
    child=$!
    status=0
    wait "$child" || status=$?
    child=""
    cat "$out/run-$run.txt"
    if [[ $status != 0 ]]; then echo "run-latency.sh: run $run failed (status $status)" >&2; exit "$status"; fi
done

python3 - "$out" "$runs" <<'PY'
import json, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
reports = [json.load(open(f"{out}/run-{i}.json")) for i in range(1, runs + 1)]
def med(values):
    values = [v for v in values if isinstance(v, (int, float))]
    return statistics.median(values) if values else float("nan")
def row(name, get, fmt="{:.1f}"):
    values = [get(r) for r in reports]
    median = med(values)
    # The median of an even count of whole numbers can be a half: print it as such.
    median_fmt = "{:.1f}" if fmt == "{:d}" and not float(median).is_integer() else fmt
    median = int(median) if median_fmt == "{:d}" and median == median else median
    print(f"{name:58s} " + "  ".join(fmt.format(v) if isinstance(v, (int, float)) else str(v) for v in values)
          + "   median " + (median_fmt.format(median) if median == median else "nan"))
print(f"\n== medians over {runs} run(s) (each run's value, then the median)")
row("floor p50 (µs)", lambda r: r["all"]["floor"]["p50"])
row("NetReach p50 (µs)", lambda r: r["all"]["netReach"]["p50"])
row("p50 ratio NetReach/floor (target <= 1.2)", lambda r: r["p50Ratio"], "{:.2f}")
row("floor p99 (µs)", lambda r: r["all"]["floor"]["p99"])
row("NetReach p99 (µs)", lambda r: r["all"]["netReach"]["p99"])
row("p99 NetReach - floor (µs, target <= 1000)", lambda r: r["p99DeltaMicros"])
row("NetReach max (µs)", lambda r: r["all"]["netReach"]["max"])
row("timeouts", lambda r: r["timeouts"], "{:d}")
def kind(r, name):
    return next((k for k in r["kinds"] if k["kind"] == name), None)
for name in ["route delete", "route add", "link down", "link up", "route re-add after link up", "rule add", "rule delete"]:
    row(f"handler {name}: p50 ratio NetReach/floor", lambda r: (lambda k: k["netReach"]["p50"] / k["floor"]["p50"] if k else None)(kind(r, name)), "{:.2f}")
def asking(r, name):
    a = r.get("askingFloor") or {}
    return next((k for k in a.get("kinds", []) + [a.get("all", {})] if k.get("kind") == name), None)
for name in ["route delete", "route add", "link down", "link up", "route re-add after link up", "rule add", "rule delete", "all changes"]:
    row(f"asking floor {name}: p50 ratio asking floor/floor", lambda r: (lambda k: k["askingFloor"]["p50"] / k["floor"]["p50"] if k else None)(asking(r, name)), "{:.2f}")
    row(f"asking floor {name}: p50 ratio NetReach/asking floor", lambda r: (lambda k: k["netReach"]["p50"] / k["askingFloor"]["p50"] if k else None)(asking(r, name)), "{:.2f}")
row("asking floor: floor CPU/change asking (µs)", lambda r: (r.get("askingFloor") or {}).get("floorCPUAskingMicros"))
row("asking floor: floor CPU/change only reading (µs)", lambda r: (r.get("askingFloor") or {}).get("floorCPUReadingMicros"))
row("asking floor: NetReach engine CPU/change (µs)", lambda r: (r.get("askingFloor") or {}).get("engineCPUMicros"))
row("dispatch hop p50 (µs)", lambda r: r["dispatchHop"]["p50"])
row("CPU/isolated change, NetReach total (µs)", lambda r: r["latencyPhaseNetReachCPUPerChange"])
row("CPU/isolated change, floor (µs)", lambda r: r["latencyPhaseFloorCPUPerChange"])
for i, name in enumerate(["route storm", "mixed storm"]):
    row(f"{name}: final state correct", lambda r: int(r["storms"][i]["finalCorrect"] and r["storms"][i]["freshMonitorAgrees"]), "{:d}")
    row(f"{name}: NetReach resyncs", lambda r: r["storms"][i]["netReachResyncs"], "{:d}")
    row(f"{name}: CPU/change NetReach total (µs, target <= 20)", lambda r: r["storms"][i]["netReachCPUMicros"] / r["storms"][i]["changes"], "{:.2f}")
    row(f"{name}: CPU/notification NetReach total (µs)", lambda r: r["storms"][i]["netReachCPUMicros"] / r["storms"][i]["notifications"], "{:.2f}")
    row(f"{name}: CPU/change floor (µs)", lambda r: r["storms"][i]["floorCPUMicros"] / r["storms"][i]["changes"], "{:.2f}")
    row(f"{name}: probe after storm, floor (µs)", lambda r: r["storms"][i]["floorSettleMicros"])
    row(f"{name}: probe after storm, NetReach (µs)", lambda r: r["storms"][i]["netReachSettleMicros"])
row("storm 3 (tiny-buffer 2nd monitor): both monitors correct", lambda r: int(r["storms"][2]["finalCorrect"] and r["storms"][2]["freshMonitorAgrees"] and bool(r["storms"][2].get("secondMonitorCorrect"))), "{:d}")
row("storm 3: resyncs (ENOBUFS re-dumps, both monitors)", lambda r: r["storms"][2]["netReachResyncs"], "{:d}")
row("idle engine context switches (target 0)", lambda r: r["idleEngineSwitches"], "{:d}")
def cli(r, i, key):
    entries = r.get("cli") or []
    return (entries[i].get(key) or float("nan")) / 1024 if i < len(entries) else float("nan")
row("netreach watch VmRSS (MB, target < 15)", lambda r: cli(r, 0, "rssKB"), "{:.1f}")
row("netreach watch VmHWM (MB)", lambda r: cli(r, 0, "hwmKB"), "{:.1f}")
row("netreach watch RssFile (MB, shared libraries)", lambda r: cli(r, 0, "fileKB"), "{:.1f}")
row("netreach watch --static-swift-stdlib VmRSS (MB)", lambda r: cli(r, 1, "rssKB"), "{:.1f}")
def cligroup(r, kind):
    c = r.get("cliLatency") or {}
    for g in c.get("groups", []):
        if g["kind"].startswith(kind): return g
    return None
for kind, label in [("route changes", "route"), ("link changes", "link"), ("rule changes", "rule"), ("all changes", "all")]:
    row(f"CLI {label}: ip monitor p50 (µs)", lambda r: (cligroup(r, kind) or {}).get("ipMonitor", {}).get("p50"))
    row(f"CLI {label}: watch --json p50 (µs)", lambda r: (cligroup(r, kind) or {}).get("watch", {}).get("p50"))
    row(f"CLI {label}: p50 ratio watch/ip (target <= 1.2)", lambda r: (cligroup(r, kind) or {}).get("p50Ratio"), "{:.2f}")
for kind in ["route delete", "route add", "link down", "link up", "route re-add after link up", "rule add", "rule delete"]:
    row(f"CLI {kind}: p50 ratio watch/ip (target <= 1.2)", lambda r: (cligroup(r, kind) or {}).get("p50Ratio"), "{:.2f}")
for kind, label in [("route changes", "route"), ("link changes", "link"), ("rule changes", "rule"), ("all changes", "all")]:
    row(f"CLI {label}: p50 ratio AskingMonitor/ip (CLI_ASKING=1)", lambda r: (cligroup(r, kind) or {}).get("askingP50Ratio"), "{:.2f}")
    row(f"CLI {label}: p50 ratio watch/AskingMonitor (CLI_ASKING=1)", lambda r: (lambda g: g["watch"]["p50"] / g["askingMonitor"]["p50"] if g and g.get("askingMonitor") else None)(cligroup(r, kind)), "{:.2f}")
row("CLI: per-change watch − ip p50 (µs)", lambda r: (cligroup(r, "all changes") or {}).get("delta", {}).get("p50"))
row("CLI: timeouts", lambda r: (r.get("cliLatency") or {}).get("timeouts"), "{:d}")
row("CLI: watch CPU per change (µs, schedstat)", lambda r: (r.get("cliLatency") or {}).get("watchCPUMicrosPerChange"))
row("CLI: ip monitor CPU per change (µs, schedstat)", lambda r: (r.get("cliLatency") or {}).get("ipCPUMicrosPerChange"))
PY
