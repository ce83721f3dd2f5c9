#!/usr/bin/env bash
# `netreach serve` benchmarks (issue 23): each number against a reference measured in the same run.
# Needs root (network namespaces), iproute2, gcc, python3, curl; for `metrics`, wrk and
# prometheus-node-exporter (apt-get install -y wrk prometheus-node-exporter).
#
#   sudo Benchmarks/run-serve.sh                        # all sections (~3-5 min in release, ~12 with a debug build)
#   sudo Benchmarks/run-serve.sh metrics latency        # some sections: metrics, latency, fanout
#   NETREACH=/path/to/netreach Benchmarks/run-serve.sh  # that binary; unset: `swift build -c release`
#   FLAPS=100 CHECKPOINTS=100,200 CHANGES=200 WRK_DURATION=3s IDLE_WAIT=0 Benchmarks/run-serve.sh  # a quick look
#
# Sections:
#   metrics  GET /metrics latency with wrk (-t1, -c1 then -c8, --latency, WRK_DURATION each, after a
#            2 s warm-up), against prometheus-node-exporter on another loopback port with a bounded
#            collector set of comparable output size; p50/p99 and ratios serve/node_exporter, and both
#            response sizes in bytes. Also serve's VmRSS/VmHWM idle after start.
#   latency  Route change -> event latency: serve's event stream vs `ip -o monitor route` in the same
#            namespace, the same CHANGES changes (default 400: the default route deleted/added), read
#            by one epoll process (serve-bench/latency.c) that makes each change through its own
#            rtnetlink socket (t0 just before sendto); p50/p99 per reader, ratio of the p50s.
#   fanout   CLIENTS (200) event-stream readers in one epoll C process (serve-bench/fanout.c) plus one
#            client that never reads, during FLAPS (1000) paced default-route flaps (2 changes each);
#            per event id, each reader's delay behind the earliest reader: p50/p99/max; every reader
#            got every id in order; whether the stalled client was dropped; serve's VmRSS/VmHWM
#            idle, with the clients connected, after 1,000 and 2,000 changes (counted after 2
#            warm-up flaps that calibrate the pacing). Then the same again on a fresh server
#            without the stalled client (NO_STALLED_RUN=0 skips it).
#
# Every server runs in this (the host's) namespace, listening on 127.0.0.1 only, and watches one lab
# namespace nrsb-<pid>-w (veth0 10.123.0.2/24 to a peer namespace nrsb-<pid>-p, IPv6 disabled) with
# four --to destinations: gw=10.123.0.1 and peer=10.123.0.9 on-link, db=10.124.0.5 via a /16 route,
# web=192.0.2.80 via the default route (so a default-route change is 2 path events: web and the
# internet path). Nothing is sent anywhere: route and link configuration inside the lab only, HTTP on
# loopback. Both namespaces, every server and helper are removed on exit, whatever happens.
#
# Environment: NETREACH; CLIENTS (200); FLAPS (1000); CHANGES (400); CHECKPOINTS ("1000,2000": measured
# route changes after which memory is sampled); WRK_DURATION (10s); WRK_CONNECTIONS ("1 8");
# NODE_EXPORTER (prometheus-node-exporter); NODE_EXPORTER_COLLECTORS ("loadavg meminfo cpu");
# IDLE_MAX_LOAD (1.0) and IDLE_WAIT (300 s): first wait, at most IDLE_WAIT, for the 1-minute load
# average to fall to IDLE_MAX_LOAD; NO_STALLED_RUN (1); WATCH (0; 1: `latency` reads `netreach watch
# --json --namespace NS` too, a third reader of the same changes, and prints watch/ip and serve -
# watch per change: what serve adds to watching).
# Output: the summary on stdout; raw output, summary.json and machine.txt in
# Benchmarks/.build/serve-runs/<time>-<pid>/.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0; fi
sections="${*:-all}"
for s in $sections; do
    case "$s" in all|metrics|latency|fanout) ;; *) echo "usage: run-serve.sh [all|metrics|latency|fanout]..." >&2; exit 64 ;; esac
done
want() { [[ " $sections " == *" all "* || " $sections " == *" $1 "* ]]; }
clients="${CLIENTS:-200}"
flaps="${FLAPS:-1000}"
changes="${CHANGES:-400}"
checkpoints="${CHECKPOINTS:-1000,2000}"
wrk_duration="${WRK_DURATION:-10s}"
wrk_connections="${WRK_CONNECTIONS:-1 8}"
node_exporter="${NODE_EXPORTER:-prometheus-node-exporter}"
node_collectors="${NODE_EXPORTER_COLLECTORS:-loadavg meminfo cpu}"
idle_max_load="${IDLE_MAX_LOAD:-1.0}"
idle_wait="${IDLE_WAIT:-300}"
no_stalled_run="${NO_STALLED_RUN:-1}"
# WATCH=1: `latency` also reads `netreach watch --json` (the same binary) in the same run.
watch_reader=""
[[ "${WATCH:-0}" == 1 ]] && watch_reader=1
out="$here/.build/serve-runs/$(date -u +%Y%m%dT%H%M%SZ)-$$"
prefix="nrsb-$$"
ns="$prefix-w"
peer="$prefix-p"
gateway=10.123.0.1
# SERVE_TO replaces the four --to destinations (word-split; empty: the internet path alone). With
# WATCH=1 the default is none: serve then watches what watch watches, so serve - watch is what
# serving adds and not four more lookups (Docs/DesignNotes.md, "Where serve's event waits").
default_to="--to gw=10.123.0.1 --to db=10.124.0.5 --to web=192.0.2.80 --to peer=10.123.0.9"
[[ -n "$watch_reader" ]] && default_to=""
read -r -a destinations <<< "${SERVE_TO-$default_to}"

if [[ "$(id -u)" != 0 ]]; then echo "run-serve.sh: needs root (network namespaces)" >&2; exit 2; fi
for tool in ip gcc python3 curl; do
    command -v "$tool" > /dev/null || { echo "run-serve.sh: needs $tool" >&2; exit 2; }
done
if want metrics; then
    for tool in wrk "$node_exporter"; do
        command -v "$tool" > /dev/null || { echo "run-serve.sh: needs $tool (apt-get install -y wrk prometheus-node-exporter)" >&2; exit 2; }
    done
fi

pids=()   # everything started in the background: servers, node_exporter, helpers
tmp=""
cleanup() {
    for pid in "${pids[@]}"; do
        if kill -0 "$pid" 2>/dev/null; then kill -TERM "$pid" 2>/dev/null || true; fi
    done
    for pid in "${pids[@]}"; do
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    for name in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${prefix}-[wp]$" || true); do
        ip netns del "$name" 2>/dev/null || true
    done
    if [[ -n "$tmp" ]]; then rm -rf "$tmp"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

forget() {   # forget PID: no longer ours to clean up
    local kept=() p
    for p in "${pids[@]}"; do [[ "$p" == "$1" ]] || kept+=("$p"); done
    pids=("${kept[@]}")
}
stopped_status=0
stop_pid() {   # stop_pid PID [SECONDS]: TERM, then KILL after SECONDS (default 3); status in stopped_status
    local pid="$1" limit="${2:-3}"
    stopped_status=0
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 $((limit * 10))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || stopped_status=$?
    forget "$pid"
}
# bounded SECONDS STDOUT STDERR COMMAND...: in the background and waited for (so INT/TERM reach the
# cleanup at once), killed after SECONDS; returns its status.
bounded() {
    local limit="$1" stdout="$2" stderr="$3" status=0
    shift 3
    timeout --signal=TERM --kill-after=5 "$limit" "$@" > "$stdout" 2> "$stderr" &
    local pid=$!
    pids+=("$pid")
    wait "$pid" || status=$?
    forget "$pid"
    return "$status"
}

mkdir -p "$out"
tmp="$(mktemp -d /tmp/nrsb-$$.XXXXXX)"
echo "output: $out" >&2

# The helpers, compiled for this run.
for helper in latency fanout; do
    gcc -O2 -Wall -o "$tmp/$helper" "$here/serve-bench/$helper.c" 2> "$out/gcc-$helper.log" \
        || { cat "$out/gcc-$helper.log" >&2; echo "run-serve.sh: cannot compile serve-bench/$helper.c" >&2; exit 1; }
done

# The binary: NETREACH, or a release build of this checkout.
if [[ -n "${NETREACH:-}" ]]; then
    netreach="$NETREACH"
    built="given by NETREACH"
else
    echo "== building netreach (release)" >&2
    if ! timeout 2400 swift build -c release --package-path "$here/.." --scratch-path "$here/.build/cli" \
        --product netreach > "$out/build.log" 2>&1; then
        tail -30 "$out/build.log" >&2
        echo "run-serve.sh: build failed ($out/build.log)" >&2
        exit 1
    fi
    netreach="$here/.build/cli/release/netreach"
    built="swift build -c release --product netreach"
fi
[[ -x "$netreach" ]] || { echo "run-serve.sh: $netreach is not an executable" >&2; exit 2; }
# A copy: a rebuild of the original while this runs does not change what is measured.
cp "$netreach" "$tmp/netreach"
binary="$tmp/netreach"
kind=release
if [[ "$netreach" == */debug/* ]]; then kind="DEBUG (validation only: not for RESULTS.md)"; fi

waited=0
if want metrics || want latency || want fanout; then
    while awk -v max="$idle_max_load" '{exit !($1 > max)}' /proc/loadavg && ((waited < idle_wait)); do
        if ((waited % 60 == 0)); then echo "== load $(cut -d' ' -f1 /proc/loadavg) > $idle_max_load, waiting (${waited} s so far)" >&2; fi
        sleep 10
        waited=$((waited + 10))
    done
fi
{
    echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), kernel $(uname -r)"
    echo "commit: $(git -C "$here/.." rev-parse --short HEAD 2>/dev/null || echo '?') ($(git -C "$here/.." status --short -- Sources 2>/dev/null | wc -l) changed files under Sources/)"
    echo "binary: $netreach ($built; $kind; version $("$binary" --version 2>/dev/null || echo '?'); $(stat -c %s "$netreach") bytes; sha256 $(sha256sum "$netreach" | cut -c1-16); modified $(date -u -r "$netreach" +%Y-%m-%dT%H:%M:%SZ))"
    echo "build: $kind"
    echo "load: $(cut -d' ' -f1-3 /proc/loadavg) at start, after waiting ${waited} s for <= $idle_max_load"
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "tools: $(ip -V 2>&1); gcc $(gcc -dumpfullversion); $(python3 --version 2>&1)"
    if want metrics; then echo "tools (metrics): $(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2); $("$node_exporter" --version 2>&1 | head -1)"; fi
    echo "parameters: sections '$sections'; clients $clients; flaps $flaps; changes $changes; checkpoints $checkpoints; wrk $wrk_duration c=($wrk_connections); node_exporter collectors ($node_collectors)"
} > "$out/machine.txt"
cat "$out/machine.txt" >&2

# The lab: $ns holds lo and veth0 (10.123.0.2/24, default route via 10.123.0.1, 10.124.0.0/16 via
# the same); veth1 (10.123.0.1/24) lives in $peer, so nothing but this script changes $ns.
ip netns add "$ns"
ip netns add "$peer"
for name in "$ns" "$peer"; do
    ip netns exec "$name" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
    ip -n "$name" link set lo up
done
ip -n "$ns" link add veth0 type veth peer name veth1 netns "$peer"
ip -n "$ns" addr add 10.123.0.2/24 dev veth0
ip -n "$peer" addr add "$gateway/24" dev veth1
ip -n "$peer" link set veth1 up
ip -n "$ns" link set veth0 up
for _ in $(seq 1 100); do
    ip -n "$ns" -o link show veth0 | grep -q 'state UP' && break
    sleep 0.05
done
ip -n "$ns" -o link show veth0 | grep -q 'state UP' || { echo "run-serve.sh: veth0 in $ns did not come up" >&2; exit 1; }
ip -n "$ns" route add default via "$gateway" dev veth0
ip -n "$ns" route add 10.124.0.0/16 via "$gateway" dev veth0

serve_pid=""
serve_port=""
# start_serve LABEL: a server watching $ns; sets serve_pid and serve_port once it listens and /readyz
# says ready (bounded: 60 s).
start_serve() {
    local label="$1"
    ip -n "$ns" route replace default via "$gateway" dev veth0   # every server starts from the same state
    "$binary" serve --listen 127.0.0.1:0 --namespace "$ns" "${destinations[@]}" \
        > "$out/serve-$label.out" 2> "$out/serve-$label.err" &
    serve_pid=$!
    pids+=("$serve_pid")
    serve_port=""
    for _ in $(seq 1 600); do
        serve_port="$(sed -n 's|.*serve: listening on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$out/serve-$label.err" | head -1)"
        [[ -n "$serve_port" ]] && break
        kill -0 "$serve_pid" 2>/dev/null || break
        sleep 0.1
    done
    [[ -n "$serve_port" ]] || { cat "$out/serve-$label.err" >&2; echo "run-serve.sh: serve ($label) did not listen" >&2; exit 1; }
    for _ in $(seq 1 600); do
        [[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$serve_port/readyz")" == 200 ]] && return 0
        sleep 0.1
    done
    echo "run-serve.sh: serve ($label) never became ready" >&2
    exit 1
}
stop_serve() {   # stop_serve LABEL: SIGTERM, bounded 15 s; notes the exit status and how long it took
    local label="$1" t0
    t0="$(date +%s.%N)"
    stop_pid "$serve_pid" 15
    echo "exit status $stopped_status after $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.2f", b - a}') s" > "$out/serve-$label.stop"
    serve_pid=""
}
memory_sample() {   # memory_sample FILE: serve's /proc/PID/status
    cp "/proc/$serve_pid/status" "$1"
}

failed=0

if want metrics || want latency; then
    start_serve main
    sleep 2
    memory_sample "$out/serve-main-idle.status"
fi

if want metrics; then
    echo "== metrics: wrk against serve and node_exporter ($wrk_duration each, c = $wrk_connections)" >&2
    collector_flags=(--collector.disable-defaults --web.disable-exporter-metrics)
    for c in $node_collectors; do collector_flags+=("--collector.$c"); done
    node_port=""
    for attempt in 1 2 3; do
        port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
        "$node_exporter" --web.listen-address="127.0.0.1:$port" "${collector_flags[@]}" \
            > "$out/node-exporter.out" 2> "$out/node-exporter.err" &
        node_pid=$!
        pids+=("$node_pid")
        for _ in $(seq 1 100); do
            if curl -sf -o /dev/null "http://127.0.0.1:$port/metrics"; then node_port="$port"; break; fi
            kill -0 "$node_pid" 2>/dev/null || break
            sleep 0.1
        done
        [[ -n "$node_port" ]] && break
        stop_pid "$node_pid"
    done
    [[ -n "$node_port" ]] || { cat "$out/node-exporter.err" >&2; echo "run-serve.sh: node_exporter did not start" >&2; exit 1; }
    echo "node_exporter ${collector_flags[*]} on 127.0.0.1:$node_port" > "$out/node-exporter.txt"
    curl -s -o "$out/metrics-serve.txt" -w '%{size_download}\n' "http://127.0.0.1:$serve_port/metrics" > "$out/size-serve.txt"
    curl -s -o "$out/metrics-node.txt" -w '%{size_download}\n' "http://127.0.0.1:$node_port/metrics" > "$out/size-node.txt"
    declare -A url=([serve]="http://127.0.0.1:$serve_port/metrics" [node]="http://127.0.0.1:$node_port/metrics")
    for target in serve node; do   # warm-up, discarded
        bounded 30 /dev/null "$out/wrk-warmup-$target.err" wrk -t1 -c1 -d2s "${url[$target]}" || true
    done
    for c in $wrk_connections; do
        # Alternating, the reference first, each bounded.
        for target in node serve; do
            echo "  wrk -t1 -c$c -d$wrk_duration $target" >&2
            if ! bounded 120 "$out/wrk-$target-c$c.txt" "$out/wrk-$target-c$c.err" \
                wrk -t1 -c"$c" -d"$wrk_duration" --timeout 10s --latency "${url[$target]}"; then
                echo "run-serve.sh: wrk against $target (c=$c) failed" >&2
                failed=1
            fi
        done
    done
    memory_sample "$out/serve-main-after-wrk.status"
    stop_pid "$node_pid"
fi

if want latency; then
    echo "== latency: $changes route changes, serve's event stream vs ip -o monitor route" >&2
    if ! bounded 900 "$out/latency.json" "$out/latency.err" "$tmp/latency" -H 127.0.0.1 -P "$serve_port" \
        -n "$ns" -g "$gateway" -d veth0 -c "$changes" -o "$out/latency.csv" -l "$out/latency-ip-monitor.log" \
        ${watch_reader:+-W "$binary"}; then
        cat "$out/latency.err" >&2
        echo "run-serve.sh: the latency run failed" >&2
        failed=1
    fi
    memory_sample "$out/serve-main-after-latency.status"
fi

if [[ -n "$serve_pid" ]]; then stop_serve main; fi

if want fanout; then
    runs=(stalled)
    if [[ "$no_stalled_run" != 0 ]]; then runs+=(nostalled); fi
    for run in "${runs[@]}"; do
        stalled=1
        if [[ "$run" == nostalled ]]; then stalled=0; fi
        extra=""
        if ((stalled)); then extra=" + 1 stalled client"; fi
        echo "== fanout ($run): $clients readers$extra, $flaps flaps on a fresh server" >&2
        start_serve "fanout-$run"
        if ! bounded 1800 "$out/fanout-$run.json" "$out/fanout-$run.err" "$tmp/fanout" -H 127.0.0.1 -P "$serve_port" \
            -n "$ns" -g "$gateway" -d veth0 -S "$serve_pid" -N "$clients" -s "$stalled" -f "$flaps" \
            -m "$checkpoints" -o "$out/fanout-$run-ids.csv"; then
            cat "$out/fanout-$run.err" >&2
            echo "run-serve.sh: the fanout run ($run) failed" >&2
            failed=1
        fi
        curl -s -o "$out/fanout-$run-metrics.txt" "http://127.0.0.1:$serve_port/metrics" || true
        memory_sample "$out/serve-fanout-$run-end.status"
        stop_serve "fanout-$run"
    done
fi

python3 "$here/serve-bench/summarize.py" "$out" | tee "$out/summary.txt"
echo "output: $out" >&2
exit "$failed"
