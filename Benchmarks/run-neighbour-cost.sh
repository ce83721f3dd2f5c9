#!/usr/bin/env bash
# What neighbour events and the 500 ms look at silent neighbour states cost `netreach watch`'s
# engine thread (netreach-nl), from its /proc schedstat CPU time. Needs root. Namespaces are named
# nrnbr-<pid>[-p|-e|-ep] and deleted on exit.
#
#   Benchmarks/run-neighbour-cost.sh NETREACH [BASELINE_NETREACH] [EVENTS]
#
# For each binary (the baseline, e.g. main's, measured in the same run):
#   - EVENTS (default 20000) changes of LAN hosts' neighbour entries (8 addresses, the link-layer
#     address flipping, so each is announced): these must cost only the read and a set lookup;
#   - EVENTS/10 changes of the gateway's entry: each wake-up asks the lookups again;
#   - 10 s idle with two IPv4 defaults of equal metric (the engine looks every 500 ms) and with
#     distinct metrics (it must not wake at all).
set -euo pipefail
binaries=("$1")
[ $# -ge 2 ] && [ -n "$2" ] && binaries+=("$2")
events="${3:-20000}"
prefix="nrnbr-$$"
work="$(mktemp -d)"
cleanup() {
    for suffix in "" -p -e -ep; do ip netns del "$prefix$suffix" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

lab() { # lab NAME: veth0 (10.123.0.2/24) and veth2 (10.124.0.2/24) to NAME-p
    ip netns add "$1"; ip netns add "$1-p"
    ip -n "$1" link set lo up
    ip -n "$1" link add veth0 type veth peer name veth1 netns "$1-p"
    ip -n "$1" link add veth2 type veth peer name veth3 netns "$1-p"
    ip -n "$1" addr add 10.123.0.2/24 dev veth0
    ip -n "$1" addr add 10.124.0.2/24 dev veth2
    for link in veth0 veth2; do ip -n "$1" link set "$link" up; done
    for link in veth1 veth3; do ip -n "$1-p" link set "$link" up; done
    sleep 0.5
}

engine_thread() { # engine_thread PID
    for task in /proc/"$1"/task/*; do
        if [ "$(cat "$task/comm")" = netreach-nl ]; then basename "$task"; fi
    done
}

for i in $(seq 1 "$events"); do
    echo "neigh replace 10.123.0.$((i % 8 + 50)) dev veth0 lladdr 02:00:00:00:00:0$(((i / 8) % 2 + 1)) nud reachable"
done >"$work/lan.txt"
for i in $(seq 1 $((events / 10))); do
    echo "neigh replace 10.123.0.1 dev veth0 lladdr 02:00:00:00:00:0$((i % 2 + 1)) nud reachable"
done >"$work/gateway.txt"

for binary in "${binaries[@]}"; do
    echo "== $binary"
    lab "$prefix"
    ip -n "$prefix" route add default via 10.123.0.1 dev veth0
    "$binary" watch --namespace "$prefix" >/dev/null 2>&1 &
    watcher=$!
    sleep 2
    thread=$(engine_thread "$watcher")
    cpu() { awk '{print $1}' /proc/"$watcher"/task/"$thread"/schedstat; }
    before=$(cpu); ip -n "$prefix" -batch "$work/lan.txt"; sleep 1; after=$(cpu)
    echo "LAN neighbour change: $(((after - before) / events)) ns of engine CPU each ($events changes)"
    before=$(cpu); ip -n "$prefix" -batch "$work/gateway.txt"; sleep 1; after=$(cpu)
    echo "gateway neighbour change: $(((after - before) / (events / 10))) ns each ($((events / 10)) changes)"
    kill "$watcher"; wait "$watcher" 2>/dev/null || true
    ip netns del "$prefix"; ip netns del "$prefix-p"

    for metrics in equal distinct; do
        lab "$prefix-e"
        ip -n "$prefix-e" route add default via 10.123.0.1 dev veth0 metric 100
        if [ "$metrics" = equal ]; then
            ip -n "$prefix-e" route append default via 10.124.0.1 dev veth2 metric 100
        else
            ip -n "$prefix-e" route add default via 10.124.0.1 dev veth2 metric 200
        fi
        "$binary" watch --namespace "$prefix-e" >/dev/null 2>&1 &
        watcher=$!
        sleep 2
        thread=$(engine_thread "$watcher")
        read -r cpu0 _ wakeups0 <"/proc/$watcher/task/$thread/schedstat"
        sleep 10
        read -r cpu1 _ wakeups1 <"/proc/$watcher/task/$thread/schedstat"
        echo "idle, $metrics metrics: $(((cpu1 - cpu0) / 10000)) µs of engine CPU a second, $((wakeups1 - wakeups0)) wake-ups in 10 s"
        kill "$watcher"; wait "$watcher" 2>/dev/null || true
        ip netns del "$prefix-e"; ip netns del "$prefix-e-p"
    done
done
