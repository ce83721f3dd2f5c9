#!/usr/bin/env bash
# How soon a waiting `netreach get --wait-for-connectivity` request reaches its server after the
# default route comes back (target: within 50 ms of the path becoming satisfied), and, with
# `memory`, the resident memory of `netreach watch`. Needs root and iproute2. Every namespace it
# makes is named nrresume-<this script's pid>-<run>[-p] and is deleted on exit, whatever happens;
# traffic stays inside those namespaces.
#
#   sudo Benchmarks/run-resume.sh                  # resume latency: idle, then under load (30 trials each)
#   TRIALS=10 CONDITIONS=idle Benchmarks/run-resume.sh
#   Benchmarks/run-resume.sh memory                # `netreach watch` RSS, dynamic and static builds
#   Benchmarks/run-resume.sh all                   # both
#
# Environment: TRIALS (30), CONDITIONS ("idle loaded"), LOAD_WORKERS (2: `yes > /dev/null` processes
# for "loaded"), IDLE_MAX_LOAD (1.5) and IDLE_WAIT (600 s): "idle" first waits, at most IDLE_WAIT
# seconds, for the 1-minute load average to fall to IDLE_MAX_LOAD; MEMORY_SAMPLES (3); CLI (a
# netreach binary to use instead of building Benchmarks/.build/cli/release/netreach; resume only).
# Per trial: default route removed in the client namespace, `get` started there and left until it
# says it is waiting, a random 100-300 ms pause, then t0, `ip route add default`, t1. The server
# (peer namespace, Benchmarks/resume-server.py) notes CLOCK_MONOTONIC when the request head is
# complete; resume latency = that - t1 (a lower bound) and that - t0 (an upper bound).
# Output: the summary on stdout; per-trial CSVs and logs in Benchmarks/.build/resume-runs/<time>-<pid>/.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
mode="${1:-resume}"
case "$mode" in resume|memory|all) ;; *) echo "usage: run-resume.sh [resume|memory|all]" >&2; exit 64 ;; esac
trials="${TRIALS:-30}"
conditions="${CONDITIONS:-idle loaded}"
load_workers="${LOAD_WORKERS:-2}"
idle_max_load="${IDLE_MAX_LOAD:-1.5}"
idle_wait="${IDLE_WAIT:-600}"
memory_samples="${MEMORY_SAMPLES:-3}"
out="$here/.build/resume-runs/$(date -u +%Y%m%dT%H%M%SZ)-$$"
prefix="nrresume-$$"
helper="$here/resume-server.py"
server_address=10.123.1.1
server_port=8080
gateway=10.123.0.1

if [[ "$(id -u)" != 0 ]]; then echo "run-resume.sh: needs root (network namespaces)" >&2; exit 2; fi
command -v ip >/dev/null || { echo "run-resume.sh: needs iproute2 (ip)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "run-resume.sh: needs python3" >&2; exit 2; }

pids=()   # everything started in the background: the server, load workers, netreach watch
cleanup() {
    for pid in "${pids[@]}"; do
        if kill -0 "$pid" 2>/dev/null; then kill -TERM "$pid" 2>/dev/null || true; fi
    done
    for pid in "${pids[@]}"; do
        for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${prefix}-[a-z0-9]+(-p)?$" || true); do
        ip netns del "$ns" 2>/dev/null || true
    done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

stop_pid() {   # stop_pid PID: TERM, then KILL after 3 s; forget it
    local pid="$1"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    local kept=()
    for p in "${pids[@]}"; do [[ "$p" == "$pid" ]] || kept+=("$p"); done
    pids=("${kept[@]}")
}

mkdir -p "$out"
build() {   # build LOG PRODUCT ARGS...: quiet unless it fails
    local log="$1" product="$2"; shift 2
    if ! timeout 2400 swift build -c release --package-path "$here/.." --product "$product" "$@" >> "$log" 2>&1; then
        tail -30 "$log" >&2
        echo "run-resume.sh: build failed ($log)" >&2
        exit 1
    fi
}
if [[ -n "${CLI:-}" ]]; then
    cli="$CLI"   # a netreach built elsewhere (resume mode only)
else
    build "$out/build-cli.log" netreach --scratch-path "$here/.build/cli"
    cli="$here/.build/cli/release/netreach"
fi
if [[ "$mode" != resume ]]; then
    if [[ -n "${CLI:-}" ]]; then echo "run-resume.sh: CLI= is for resume mode only" >&2; exit 64; fi
    build "$out/build-cli-static.log" netreach --static-swift-stdlib --scratch-path "$here/.build/cli-static"
fi
cli_static="$here/.build/cli-static/release/netreach"

load() { cut -d' ' -f1-3 /proc/loadavg; }

# make_pair RUN: client namespace <prefix>-RUN (veth0 10.123.0.2/24, lo up, no default route) and
# peer <prefix>-RUN-p (veth1 10.123.0.1/24, 10.123.1.1/32 on lo), as the integration tests do.
make_pair() {
    local client="$prefix-$1" peer="$prefix-$1-p"
    ip netns add "$client"
    ip netns add "$peer"
    ip -n "$client" link add veth0 type veth peer name veth1 netns "$peer"
    ip -n "$client" link set lo up
    ip -n "$client" addr add 10.123.0.2/24 dev veth0
    ip -n "$peer" link set lo up
    ip -n "$peer" addr add "$gateway/24" dev veth1
    ip -n "$peer" addr add "$server_address/32" dev lo
    ip -n "$peer" link set veth1 up
    ip -n "$client" link set veth0 up
    # The carrier takes a moment: start once veth0 is UP (bounded: 5 s), so waits are for the route only.
    for _ in $(seq 1 100); do
        if ip -n "$client" -o link show veth0 | grep -q 'state UP'; then return 0; fi
        sleep 0.05
    done
    echo "run-resume.sh: veth0 in $client did not come up" >&2
    exit 1
}

run_condition() {   # run_condition NAME
    local name="$1" run="$1" workers=() waited=0
    if [[ "$name" == idle ]]; then
        while awk -v max="$idle_max_load" '{exit !($1 > max)}' /proc/loadavg && (( waited < idle_wait )); do
            sleep 10; waited=$((waited + 10))
        done
    elif [[ "$name" == loaded ]]; then
        for _ in $(seq 1 "$load_workers"); do
            yes > /dev/null & workers+=($!); pids+=($!)
        done
        sleep 3
    else
        echo "run-resume.sh: unknown condition '$name' (idle or loaded)" >&2; exit 64
    fi
    local before; before="$(load)"
    make_pair "$run"
    local log="$out/server-$run.log"
    : > "$log"
    ip netns exec "$prefix-$run-p" python3 "$helper" serve "$server_address" "$server_port" "$log" --lifetime 3000 \
        > "$out/server-$run.out" 2>&1 &
    local server=$!; pids+=($server)
    for _ in $(seq 1 100); do grep -q listening "$log" && break; sleep 0.05; done
    grep -q listening "$log" || { echo "run-resume.sh: the server did not start: $(cat "$out/server-$run.out")" >&2; exit 1; }
    local status=0
    # In the background and waited for, so that INT/TERM reach the cleanup at once (it stops the
    # trials, which stop their `get`).
    timeout --kill-after=10 1500 python3 "$helper" trials --client "$prefix-$run" --gateway "$gateway" --dev veth0 \
        --cli "$cli" --url-base "http://$server_address:$server_port" --server-log "$log" \
        --trials "$trials" --csv "$out/$name.csv" --label "$name" --max-seconds 1200 2> "$out/trials-$name.err" &
    local driver=$!; pids+=($driver)
    wait "$driver" || status=$?
    stop_pid "$driver"
    local after; after="$(load)"
    for w in "${workers[@]}"; do stop_pid "$w"; done
    stop_pid "$server"
    ip netns del "$prefix-$run" 2>/dev/null || true
    ip netns del "$prefix-$run-p" 2>/dev/null || true
    local extra=""
    if [[ "$name" == loaded ]]; then extra=", $load_workers x yes > /dev/null"; fi
    if [[ "$name" == idle ]]; then extra=", after waiting ${waited}s for a 1-min load <= $idle_max_load"; fi
    echo "$name: load average $before before, $after after$extra" >> "$out/conditions.txt"
    if [[ $status != 0 ]]; then
        cat "$out/trials-$name.err" >&2
        echo "run-resume.sh: $name: some trials failed (status $status); see $out/$name.csv" >&2
        failed=1
    fi
}

failed=0
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r)" > "$out/machine.txt"
echo "commit: $(git -C "$here/.." rev-parse --short HEAD 2>/dev/null || echo '?') ($(git -C "$here/.." status --short -- Sources 2>/dev/null | wc -l) changed files under Sources/)" >> "$out/machine.txt"

if [[ "$mode" != memory ]]; then
    csvs=()
    for condition in $conditions; do
        run_condition "$condition"
        if [[ -f "$out/$condition.csv" ]]; then csvs+=("$out/$condition.csv"); fi
    done
    echo "== netreach get --wait-for-connectivity: request arrival after the default route came back ($trials trials per condition)"
    cat "$out/conditions.txt"
    if (( ${#csvs[@]} )); then python3 "$helper" summary "${csvs[@]}" > "$out/summary.txt"; cat "$out/summary.txt"; fi
fi

# `netreach watch --namespace NS` for ~2 s with a route deleted and re-added after 1 s (as the
# DetectionLatency harness measures it), then VmRSS/RssAnon/RssFile/RssShmem from /proc/PID/status.
if [[ "$mode" != resume ]]; then
    make_pair m
    ip -n "$prefix-m" route add default via "$gateway" dev veth0
    # Brace groups with a redirection, not pipelines: no subshell, so pids and failed stay ours.
    {
    echo "== netreach watch resident memory (MB; $memory_samples samples per build, load $(load))"
    printf '%-8s %-8s %8s %8s %8s %8s %8s  %s\n' build sample VmRSS VmHWM RssAnon RssFile RssShmem lines
    for variant in dynamic static; do
        binary="$cli"; if [[ "$variant" == static ]]; then binary="$cli_static"; fi
        for sample in $(seq 1 "$memory_samples"); do
            "$binary" watch --namespace "$prefix-m" > "$out/watch-$variant-$sample.out" 2>&1 &
            pid=$!; pids+=($pid)
            sleep 1
            ip -n "$prefix-m" route del default; ip -n "$prefix-m" route add default via "$gateway" dev veth0
            sleep 1
            if kill -0 "$pid" 2>/dev/null; then
                cp "/proc/$pid/status" "$out/watch-$variant-$sample.status"
                awk -v b="$variant" -v s="$sample" -v lines="$(wc -l < "$out/watch-$variant-$sample.out")" '
                    /^(VmRSS|VmHWM|RssAnon|RssFile|RssShmem):/ {v[$1]=$2/1024}
                    END {printf "%-8s %-8s %8.1f %8.1f %8.1f %8.1f %8.1f  %d\n", b, s, v["VmRSS:"], v["VmHWM:"], v["RssAnon:"], v["RssFile:"], v["RssShmem:"], lines}' \
                    "$out/watch-$variant-$sample.status"
            else
                echo "$variant $sample: exited early: $(head -c 300 "$out/watch-$variant-$sample.out")" >&2
                failed=1
            fi
            stop_pid "$pid"
        done
    done
    for variant in dynamic static; do
        binary="$cli"; if [[ "$variant" == static ]]; then binary="$cli_static"; fi
        stripped=""
        if command -v strip >/dev/null && strip --strip-all -o "$out/netreach-$variant.stripped" "$binary" 2>/dev/null; then
            stripped=", $(stat -c %s "$out/netreach-$variant.stripped" | awk '{printf "%.1f MB", $1/1048576}') stripped"
        fi
        echo "binary $variant: $(stat -c %s "$binary" | awk '{printf "%.1f MB", $1/1048576}') as built$stripped ($binary)"
    done
    # Resident-memory floors for a Swift process (Benchmarks/RSSBaselines, as run-latency.sh does).
    for base in plain essentials foundation; do
        swiftc -O "$here/RSSBaselines/$base.swift" -o "$out/rss-$base" 2>/dev/null
        "$out/rss-$base" > /dev/null & pid=$!; pids+=($pid)
        sleep 1.5
        echo "rss baseline $base: $(awk '/^VmRSS/ {printf "%.1f MB", $2/1024}' /proc/$pid/status)"
        stop_pid "$pid"
    done
    } > "$out/memory.txt"
    cat "$out/memory.txt"
fi
exit "$failed"
