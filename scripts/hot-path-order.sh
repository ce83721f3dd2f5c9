#!/usr/bin/env bash
# Writes scripts/hot-path.order: the functions of the release executable that `netreach watch`
# runs between two path changes (reading the kernel's message, asking it again, judging the path,
# writing the line), most instructions first. build-release.sh gives the list to lld, which puts
# them side by side at the start of the code: a change wakes a process whose code has left the
# caches, and fewer pages of code are then fewer misses (Benchmarks/RESULTS.md, section 27).
#
#   sudo scripts/hot-path-order.sh        # needs root (a network namespace) and valgrind
#
# How: the executable (built by build-release.sh, debug info stripped from a copy: valgrind
# 3.19 cannot read DWARF 5) runs `watch --json` and then `watch` under callgrind in a namespace of
# its own; once the first line is out the counts are zeroed, the script makes route, link and
# rule changes, and the functions counted since are the list. Names the code no longer has are
# skipped by the linker, so a stale list costs speed, never correctness; make it again after
# changing what a change runs through.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if [[ "$(id -u)" != 0 ]]; then echo "$0: needs root (a network namespace)" >&2; exit 2; fi
for tool in valgrind callgrind_control callgrind_annotate ip; do
    command -v "$tool" >/dev/null || { echo "$0: needs $tool (apt-get install valgrind iproute2)" >&2; exit 2; }
done
"$root/scripts/build-release.sh" >&2
binary="$("$root/scripts/build-release.sh" --show-bin-path)/netreach"
work="$(mktemp -d /var/tmp/hot-path.XXXXXX)"
ns="nrhot-$$"
cleanup() {
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

# One capture: `netreach watch ARGS` under callgrind, counted over 15 rounds of changes.
capture() {
    local out="$1"; shift
    : > "$work/lines"
    valgrind --tool=callgrind --demangle=no --callgrind-out-file="$out" \
        "$work/netreach" watch "$@" --namespace "$ns" > "$work/lines" 2> "$work/valgrind.log" &
    pid=$!
    for _ in $(seq 1 300); do [ -s "$work/lines" ] && break; sleep 0.1; done
    [ -s "$work/lines" ] || { echo "$0: watch printed nothing under valgrind:" >&2; tail "$work/valgrind.log" >&2; exit 1; }
    sleep 2 # the nameserver watch starts 25 ms after the first line, and whatever follows it
    callgrind_control -z "$pid" > /dev/null
    for _ in $(seq 1 15); do
        ip -n "$ns" route del default; sleep 0.05
        ip -n "$ns" route add default via 192.0.2.1; sleep 0.05
        ip -n "$ns" link set a0 down; sleep 0.05
        ip -n "$ns" link set a0 up; sleep 0.05
        ip -n "$ns" route replace default via 192.0.2.1; sleep 0.05
        ip -n "$ns" rule add from 203.0.113.1 table 100; sleep 0.05
        ip -n "$ns" rule del from 203.0.113.1 table 100; sleep 0.3 # the rechecks too
    done
    callgrind_control -d "$pid" > /dev/null
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    pid=""
}
capture "$work/json.out" --json
capture "$work/text.out"

# Each function of the executable once (a recursion's `'2` suffix dropped), most instructions
# (of both captures together) first.
for dump in "$work"/json.out.* "$work"/text.out.*; do
    callgrind_annotate --threshold=100 --inclusive=no "$dump"
done | sed -nE "s|^ *([0-9,]+) \( *[0-9.]+%\)  \?\?\?:([^ ]+) \[$work/netreach\]\$|\\1 \\2|p" |
    awk '{ name = $2; sub(/'"'"'[0-9]+$/, "", name); count = $1; gsub(/,/, "", count); total[name] += count }
         END { for (name in total) printf "%d %s\n", total[name], name }' |
    sort -k1,1nr -k2,2 | awk '{ print $2 }' > "$work/hot-path.order"
functions=$(wc -l < "$work/hot-path.order")
[ "$functions" -ge 100 ] || { echo "$0: only $functions functions counted; nothing written" >&2; exit 1; }
mv "$work/hot-path.order" "$root/scripts/hot-path.order"
echo "scripts/hot-path.order: $functions functions" >&2
