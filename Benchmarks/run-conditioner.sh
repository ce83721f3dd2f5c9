#!/usr/bin/env bash
# The link conditioner, `netreach condition` (a userspace TCP proxy), on loopback, in one run
# (Benchmarks/run-conditioner.py does the measuring; this builds, waits for a quiet machine, runs it):
#
#   relay     no conditions: a 1 GiB download direct, through socat and through the conditioner,
#             interleaved RUNS times (medians, MB/s); target: conditioner/socat >= 1.0
#   latency   no conditions: 1- and 64-byte ping-pong, p50/p90/p99 per path; target: added p50 <= 100 us
#   profiles  wifi wifi-ac lte dsl 3g edge very-bad: download and upload kbit/s at the receiver (target
#             +-10 % of the profile) and the added round trip (target: up + down delay +- 2 ms)
#   jitter    --delay 50ms --jitter 10ms --seed 7: every round trip in [80, 121] ms
#   loss      --profile 100-loss: nothing delivered either way in 3 s
#   dns       --profile high-latency-dns: connect -> first byte = 3000 ms + the direct round trip
#
#   Benchmarks/run-conditioner.sh                                  # everything (about 5 minutes)
#   Benchmarks/run-conditioner.sh --only relay --only latency --size-mb 256 --rounds 2000
#   Benchmarks/run-conditioner.sh --only profiles --profiles wifi,3g
#   BIN_DIR=/path/to/release Benchmarks/run-conditioner.sh --only jitter
#   Benchmarks/run-conditioner.sh --proxy-cmd socat --only relay --only latency   # the harness against socat
#   Benchmarks/run-conditioner.sh --self-test       # the conditioned parts against a python stand-in
#
# Builds netreach in release from this checkout unless BIN_DIR is given (or --proxy-cmd or
# --self-test puts something else under test). Needs python3 (standard library only) and socat;
# installs nothing. Traffic stays on 127.0.0.1. Waits (at most LOAD_WAIT s, default 600) for the
# 1-minute load average to fall below LOAD_MAX (default 1.5) first, and prints it; the whole run is
# bounded by RUN_TIMEOUT s (default 3600). Arguments go to run-conditioner.py (--help lists them).
# Output: the table on stdout; raw JSON (and the proxies' stderr, .log) in
# Benchmarks/.build/conditioner-runs/<time>-<pid>.json. Exit status: 0 when every target passes.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
load_max="${LOAD_MAX:-1.5}"
load_wait="${LOAD_WAIT:-600}"
run_timeout="${RUN_TIMEOUT:-3600}"

for tool in python3 socat; do
    command -v "$tool" >/dev/null 2>&1 || { echo "run-conditioner.sh: needs $tool (apt-get install $tool)" >&2; exit 2; }
done

# Something other than netreach under test, or only the help: nothing to build.
needs_build=1
for arg in "$@"; do
    case "$arg" in
        --proxy-cmd|--proxy-cmd=*|--self-test|-h|--help) needs_build=0 ;;
    esac
done
if [ -z "${BIN_DIR:-}" ] && ((needs_build)); then
    echo "== building netreach (release)" >&2
    (cd "$root" && timeout 2400 swift build -c release --product netreach >&2)
    BIN_DIR="$(cd "$root" && swift build -c release --show-bin-path)"
fi
[ -n "${BIN_DIR:-}" ] && export BIN_DIR

load1() { cut -d' ' -f1 /proc/loadavg; }
waited=0
while awk -v l="$(load1)" -v m="$load_max" 'BEGIN { exit !(l >= m) }' && ((waited < load_wait)); do
    if ((waited % 60 == 0)); then echo "== load $(load1) ≥ $load_max, waiting (${waited} s so far)" >&2; fi
    sleep 10
    waited=$((waited + 10))
done
echo "load $(cut -d' ' -f1-3 /proc/loadavg) (waited ${waited} s); $(nproc) cores; $(date -u +%FT%TZ)" >&2

# The harness kills its children (servers, socat, the conditioner) when it gets SIGTERM.
exec timeout --signal=TERM --kill-after=15 "$run_timeout" python3 "$here/run-conditioner.py" "$@"
