#!/usr/bin/env bash
# The order scripts/build-release.sh asks lld to place `netreach`'s code and descriptors in, made
# from the executable it has just linked. Printed on standard output, one symbol a line:
#
#   1. The functions the commands run first, found by running them (a training run). Each command
#      in turn, `watch`, `status`, `serve`, then `get`: the functions `watch` enters from its start
#      through changes of links, addresses, routes and rules (below), then those `status` enters
#      that `watch` did not, and so on. So the code a daemon runs sits together at the front of
#      the text instead of in some hundred places across 22 MB: the kernel maps an executable's
#      pages 64 KB at a time around each page touched, and each of those places cost a window.
#      `netreach watch` is ~3 MB smaller resident (Docs/DesignNotes.md, "A link order made by the
#      build").
#   2. The protocol conformance descriptors, in the address order of the executable given: the
#      Swift runtime reads all of them on each first `as?` or generic instantiation of a type and
#      protocol pair, so they sit side by side (Docs/DesignNotes.md, "Close to the floor").
#
#   scripts/link-order.sh EXECUTABLE > link.order
#   scripts/link-order.sh --descriptors EXECUTABLE   # part 2 alone: where the descriptors lie now
#
# The training run needs a C compiler (the Swift toolchain's clang, or cc) and an x86-64 machine:
# scripts/hot-functions.c, loaded with LD_PRELOAD, writes a breakpoint over the first byte of every
# function and records each the first time it is entered. The commands only read the kernel's state
# (`watch`, `status`), listen on a loopback port chosen by the kernel (`serve`), or fail to connect
# to loopback port 1 (`get`): nothing leaves the machine. Where the training cannot run, or a
# command fails under it, its functions are left out with a note on standard error and the order
# holds the descriptors alone: the executable is the same, only its pages are spread wider.
#
# A function named more than once in the executable (a private helper each module has its own copy
# of, such as `objectdestroy.2Tm`) is left out: lld would move every section that defines the name,
# whole modules' code among them where a library was built without a section per function.
set -euo pipefail
descriptors_only=0
if [ "${1:-}" = --descriptors ]; then descriptors_only=1; shift; fi
binary="$1"
root="$(cd "$(dirname "$0")/.." && pwd)"
swift_bin="$(dirname "$(readlink -f "$(command -v swift)")")"
nm_tool="$swift_bin/llvm-nm"
[ -x "$nm_tool" ] || nm_tool="$(command -v llvm-nm || command -v nm)"
work="$(mktemp -d "${TMPDIR:-/tmp}/netreach-link-order.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# `traced NAME COMMAND...`: runs COMMAND with the tracer loaded, its hits in hits.NAME.
traced() {
    local name="$1"
    shift
    HOT_FUNCTIONS_OUT="$work/hits.$name" LD_PRELOAD="$work/hot-functions.so" "$@"
}

# `traced_until NAME PATTERN COMMAND...`: runs COMMAND traced, in the background, until its output
# has a line matching PATTERN (at most 120 s: a debug build under the tracer on a busy machine
# takes seconds to start), then 0.3 s more; then SIGTERM. Its status: 0 when it ended on that
# signal (by itself or by it), else what it exited with (124: no such line in time).
traced_until() {
    local name="$1" pattern="$2" output="$work/output.$1" pid waited=0
    shift 2
    # A simple command, not the function `traced`: in the background, the process is then the
    # command itself, and the signal below reaches it rather than a subshell around it.
    HOT_FUNCTIONS_OUT="$work/hits.$name" LD_PRELOAD="$work/hot-functions.so" "$@" > "$output" 2>&1 &
    pid=$!
    until grep -q -- "$pattern" "$output" 2> /dev/null; do
        if ! kill -0 "$pid" 2> /dev/null; then wait "$pid"; return $?; fi
        [ "$waited" -lt 1200 ] || { kill -KILL "$pid"; wait "$pid"; return 124; }
        sleep 0.1
        waited=$((waited + 1))
    done
    sleep 0.3
    kill -TERM "$pid"
    wait "$pid" || [ $? = 143 ]
}

# `watch` from its start through the changes a daemon sees: in a network namespace of its own (a
# user namespace makes one without root), a veth pair's link goes down and up, an address comes and
# goes, the default route is deleted and added, a rule added and deleted, five times. Where no such
# namespace can be made, `watch` of this machine's network, from its start to its first lines.
watch_while_changing() {
    local script='
        ip link set lo up && ip link add nrtrain0 type veth peer name nrtrain1 &&
            ip address add 10.77.0.2/24 dev nrtrain0 && ip link set nrtrain1 up &&
            ip link set nrtrain0 up && ip route add default via 10.77.0.1 || exit 90
        HOT_FUNCTIONS_OUT="$1" LD_PRELOAD="$2" "$3" watch --json > "$4" 2>&1 & watch=$!
        lines() { wc -l < "$4"; }
        waited=0
        while [ "$(lines)" -lt 1 ] && [ "$waited" -lt 1200 ] && kill -0 "$watch" 2> /dev/null; do
            sleep 0.1; waited=$((waited + 1))
        done
        for round in 1 2 3 4 5; do
            ip route del default && ip route add default via 10.77.0.1
            ip link set nrtrain0 down && ip link set nrtrain0 up && ip route replace default via 10.77.0.1
            ip address add 10.77.1.2/24 dev nrtrain0 && ip address del 10.77.1.2/24 dev nrtrain0
            ip rule add from 10.77.2.0/24 table 100 && ip rule del from 10.77.2.0/24 table 100
            sleep 0.05
        done
        # Each round changes the path: wait (at most 60 s) for watch to have told some of them.
        waited=0
        while [ "$(lines)" -lt 6 ] && [ "$waited" -lt 600 ] && kill -0 "$watch" 2> /dev/null; do
            sleep 0.1; waited=$((waited + 1))
        done
        sleep 0.3
        kill -TERM "$watch"
        wait "$watch" || [ $? = 143 ]'
    local status=0
    if command -v ip > /dev/null && unshare --user --map-root-user --net true 2> /dev/null; then
        timeout -s KILL 300 unshare --user --map-root-user --net bash -c "$script" training \
            "$work/hits.watch" "$work/hot-functions.so" "$binary" "$work/output.watch" 2> /dev/null || status=$?
        [ "$status" = 90 ] || return "$status"
    fi
    echo "$0: no network namespace to change: \`watch\` is trained on its start only" >&2
    rm -f "$work/hits.watch"
    traced_until watch '"status"' "$binary" watch --json
}

train() {
    [ "$(uname -m)" = x86_64 ] || { echo "$0: not x86-64: no training run" >&2; return 0; }
    local cc="$swift_bin/clang"
    [ -x "$cc" ] || cc="$(command -v cc || true)"
    [ -n "$cc" ] || { echo "$0: no C compiler: no training run" >&2; return 0; }
    if ! "$cc" -shared -fPIC -O2 -o "$work/hot-functions.so" "$root/scripts/hot-functions.c" 2> "$work/cc.err"; then
        echo "$0: hot-functions.c did not compile: no training run" >&2
        cat "$work/cc.err" >&2
        return 0
    fi
    # Every function the executable defines, with its address and name (t, T, W: in the text).
    "$nm_tool" --defined-only --print-size "$binary" \
        | awk 'NF == 4 && $3 ~ /^[tTwW]$/ && $2 ~ /[1-9a-f]/ { print $1, $4 }' > "$work/functions"
    awk '{ print $1 }' "$work/functions" > "$work/entries"
    export HOT_FUNCTIONS_EXE="$binary" HOT_FUNCTIONS_IN="$work/entries" SWIFT_BACKTRACE=enable=no
    local command status
    for command in watch status serve get; do
        # `watch` and `serve` run until stopped: each is stopped once it has said what it does.
        status=0
        case "$command" in
            watch) watch_while_changing || status=$? ;;
            status) traced status timeout 120 "$binary" status > /dev/null 2>&1 || status=$? ;;
            serve) traced_until serve "listening on" "$binary" serve --listen 127.0.0.1:0 || status=$? ;;
            get) traced get timeout 120 "$binary" get --max-time 60 http://127.0.0.1:1/ > /dev/null 2>&1 || status=$? ;;
        esac
        # `get` fails by design (nothing listens on port 1): only a crash or a hang is a failure.
        if [ "$status" -ge 124 ] || { [ "$command" != get ] && [ "$status" != 0 ]; }; then
            echo "$0: \`netreach $command\` ended with status $status under the training run: its functions are left out" >&2
            rm -f "$work/hits.$command"
        fi
        [ -s "$work/hits.$command" ] || echo "$0: \`netreach $command\` entered no function under the training run" >&2
    done
    # Addresses to names, each command's new functions in address order; names defined once only.
    for command in watch status serve get; do
        [ -f "$work/hits.$command" ] || continue
        awk '
            FNR == NR { count[$2]++; name[$1] = name[$1] " " $2; next }
            { split(name[$1], names, " "); for (i in names) if (count[names[i]] == 1) print $1, names[i] }
        ' "$work/functions" <(awk '{ printf "%16s\n", $1 }' "$work/hits.$command" | tr ' ' 0 | sort -u)
    done | awk '!seen[$2]++ { print $2 }'
}

[ "$descriptors_only" = 1 ] || train
# The descriptors of the executable, in address order: the symbols ending in `Mc`. A private
# descriptor's name can occur in more than one file: each name once.
"$nm_tool" -n --defined-only "$binary" | awk '$NF ~ /Mc$/ && !seen[$NF]++ { print $NF }'
