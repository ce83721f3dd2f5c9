#!/usr/bin/env bash
# Writes scripts/hot-path.order: the functions of the release executable that `netreach watch`
# runs between two path changes (reading the kernel's message, asking it again, judging the path,
# writing the line), most instructions first, then those `serve` adds (its event stream), then
# those one `get` runs from start to exit. build-release.sh gives the list to lld, which puts
# them side by side at the start of the code: a change wakes a process whose code has left the
# caches, and fewer pages of code are then fewer misses (Benchmarks/RESULTS.md, section 27).
#
#   sudo scripts/hot-path-order.sh        # needs root (a network namespace) and valgrind
#
# How: the executable (built by build-release.sh, debug info stripped from a copy: valgrind
# 3.19 cannot read DWARF 5) runs `watch --json`, `watch` and `serve` (with an event stream reader)
# under callgrind in a namespace of its own; once the first path is out the counts are zeroed, the
# script makes route, link and rule changes, and the functions counted since are the list. Names the code no longer has are
# skipped by the linker, so a stale list costs speed, never correctness; make it again after
# changing what a change runs through.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if [[ "$(id -u)" != 0 ]]; then echo "$0: needs root (a network namespace)" >&2; exit 2; fi
for tool in valgrind callgrind_control callgrind_annotate ip curl python3; do
    command -v "$tool" >/dev/null || { echo "$0: needs $tool (apt-get install valgrind iproute2 curl python3)" >&2; exit 2; }
done
"$root/scripts/build-release.sh" >&2
binary="$("$root/scripts/build-release.sh" --show-bin-path)/netreach"
work="$(mktemp -d /var/tmp/hot-path.XXXXXX)"
ns="nrhot-$$"
cleanup() {
    [[ -n "${reader:-}" ]] && kill "$reader" 2>/dev/null && wait "$reader" 2>/dev/null
    [[ -n "${server:-}" ]] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
    [[ -n "${pid:-}" ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
swift_bin="$(dirname "$(readlink -f "$(command -v swift)")")"
strip_tool="$swift_bin/llvm-strip"
[ -x "$strip_tool" ] || strip_tool="$(command -v llvm-strip || command -v strip)"
"$strip_tool" --strip-debug -o "$work/netreach" "$binary"

ip netns add "$ns"
ip -n "$ns" link set lo up
ip -n "$ns" link add a0 type veth peer name b0
ip -n "$ns" link set a0 up
ip -n "$ns" link set b0 up
ip -n "$ns" addr add 192.0.2.2/24 dev a0
ip -n "$ns" -6 addr add 2001:db8::2/64 dev a0 nodad
ip -n "$ns" route add default via 192.0.2.1

# The changes counted: 15 rounds of route, link and rule changes, 50 ms apart.
make_changes() {
    for _ in $(seq 1 15); do
        ip -n "$ns" route del default; sleep 0.05
        ip -n "$ns" route add default via 192.0.2.1; sleep 0.05
        ip -n "$ns" link set a0 down; sleep 0.05
        ip -n "$ns" link set a0 up; sleep 0.05
        ip -n "$ns" route replace default via 192.0.2.1; sleep 0.05
        ip -n "$ns" rule add from 203.0.113.1 table 100; sleep 0.05
        ip -n "$ns" rule del from 203.0.113.1 table 100; sleep 0.3 # the rechecks too
    done
}

# Counts `netreach ARGS` under callgrind from once `ready` succeeds until the changes are made.
capture() {
    local out="$1" ready="$2"; shift 2
    : > "$work/out"
    valgrind --tool=callgrind --demangle=no --callgrind-out-file="$out" \
        "$work/netreach" "$@" > "$work/out" 2> "$work/err" &
    pid=$!
    for _ in $(seq 1 600); do "$ready" && break; sleep 0.1; done
    "$ready" || { echo "$0: netreach $* did not start under valgrind:" >&2; tail "$work/err" >&2; exit 1; }
    sleep 2 # the nameserver watch starts 25 ms after the first path, and whatever follows it
    callgrind_control -z "$pid" > /dev/null
    make_changes
    callgrind_control -d "$pid" > /dev/null
    [[ -z "${reader:-}" ]] || { kill "$reader"; wait "$reader" 2>/dev/null || true; reader=""; }
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    pid=""
}
# `watch` is ready once it printed the current path.
watch_ready() { [ -s "$work/out" ]; }
# `serve` is ready once it listens and an event stream reader is connected.
serve_ready() {
    local port
    port="$(sed -n 's|.*serve: listening on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$work/err" | head -1)"
    [[ -n "$port" ]] || return 1
    if [[ -z "${reader:-}" ]]; then
        curl -sN "http://127.0.0.1:$port/api/v1/events" > "$work/events" &
        reader=$!
    fi
    [ -s "$work/events" ]
}

# The function names of the executable in some captures, most instructions first (a recursion's
# `'2` suffix dropped; code without a symbol, shown as its address, left out).
functions() {
    for dump in "$@"; do callgrind_annotate --threshold=100 --inclusive=no "$dump"; done |
        sed -nE "s|^ *([0-9,]+) \( *[0-9.]+%\)  \?\?\?:([^ ]+) \[$work/netreach\]\$|\1 \2|p" |
        awk '$2 !~ /^0x/ { name = $2; sub(/'"'"'[0-9]+$/, "", name); count = $1; gsub(/,/, "", count); total[name] += count }
             END { for (name in total) printf "%d %s\n", total[name], name }' |
        sort -k1,1nr -k2,2 | awk '{ print $2 }'
}

# `get` from start to exit: one small GET from a server on loopback, counted whole (a fresh
# process's start-up is what curl is measured against: its code on few pages is fewer faults).
capture_get() {
    mkdir -p "$work/www"
    head -c 1000 /dev/zero > "$work/www/small"
    python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$work/www" > "$work/http.log" 2>&1 &
    server=$!
    local port=""
    for _ in $(seq 1 100); do
        port="$(sed -n 's|.*port \([0-9]*\).*|\1|p' "$work/http.log" | head -1)"
        [[ -n "$port" ]] && break
        sleep 0.1
    done
    [[ -n "$port" ]] || { echo "$0: the http server did not start" >&2; exit 1; }
    valgrind --tool=callgrind --demangle=no --callgrind-out-file="$1" \
        "$work/netreach" get -q -o /dev/null "http://127.0.0.1:$port/small" > /dev/null 2> "$work/err" ||
        { echo "$0: netreach get failed under valgrind:" >&2; tail "$work/err" >&2; exit 1; }
    kill "$server"
    wait "$server" 2>/dev/null || true
    server=""
}

capture "$work/json.out" watch_ready watch --json --namespace "$ns"
capture "$work/text.out" watch_ready watch --namespace "$ns"
capture "$work/serve.out" serve_ready serve --listen 127.0.0.1:0 --namespace "$ns"
# `watch`'s functions first, on as few pages as they can be, then those only `serve` runs.
functions "$work"/json.out.* "$work"/text.out.* > "$work/watch.order"
functions "$work"/serve.out.* | awk 'NR == FNR { seen[$0] = 1; next } !seen[$0]' "$work/watch.order" - \
    > "$work/serve.order"
capture_get "$work/get.out"
functions "$work"/get.out* | awk 'NR == FNR { seen[$0] = 1; next } !seen[$0]' \
    <(cat "$work/watch.order" "$work/serve.order") - > "$work/get.order"
cat "$work/watch.order" "$work/serve.order" "$work/get.order" > "$work/hot-path.order"
functions=$(wc -l < "$work/hot-path.order")
[ "$(wc -l < "$work/watch.order")" -ge 100 ] || { echo "$0: only $functions functions counted; nothing written" >&2; exit 1; }
mv "$work/hot-path.order" "$root/scripts/hot-path.order"
echo "scripts/hot-path.order: $functions functions ($(wc -l < "$work/serve.order") more for serve, $(wc -l < "$work/get.order") for get's start-up)" >&2
