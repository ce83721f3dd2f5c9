#!/usr/bin/env bash
# Builds HTTPOverhead in release and runs it RUNS times (default 2): NetworkService against the bare
# transport, small GETs on loopback (issue 4). No root. Before each run it waits (at most
# LOAD_WAIT seconds, default 600) for the 1-minute load average to drop below LOAD_MAX (default
# 1.5), and runs anyway after that; the table states the load either way.
#
#   Benchmarks/run-http.sh                                   # 2 runs, 20,000 GETs per cell and mode
#   RUNS=1 Benchmarks/run-http.sh --requests 2000 --warmup 100 --service-cost-calls 10000   # a quick look
#
# Extra arguments go to every HTTPOverhead run. Output: Benchmarks/.build/http-runs/<time>-<pid>/.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
runs="${RUNS:-2}"
load_max="${LOAD_MAX:-1.5}"
load_wait="${LOAD_WAIT:-600}"
out="$here/.build/http-runs/$(date -u +%Y%m%dT%H%M%SZ)-$$"

cd "$here"
echo "== building (release)" >&2
timeout 2400 swift build -c release --product HTTPOverhead >&2
harness="$(swift build -c release --show-bin-path)/HTTPOverhead"
mkdir -p "$out"
echo "output: $out" >&2

load1() { cut -d' ' -f1 /proc/loadavg; }
status=0
for run in $(seq 1 "$runs"); do
    waited=0
    while awk -v l="$(load1)" -v m="$load_max" 'BEGIN { exit !(l >= m) }' && ((waited < load_wait)); do
        if ((waited % 60 == 0)); then echo "== load $(load1) ≥ $load_max, waiting (${waited} s so far)" >&2; fi
        sleep 10
        waited=$((waited + 10))
    done
    echo "== run $run/$runs, load $(cut -d' ' -f1-3 /proc/loadavg) (waited ${waited} s)" >&2
    # Bounded twice: the harness aborts itself at --deadline-seconds (default 1800), timeout after 2100 s.
    run_status=0
    timeout --signal=TERM --kill-after=10 2100 "$harness" --json "$out/run-$run.json" "$@" \
        > "$out/run-$run.txt" 2> >(tee "$out/run-$run.log" >&2) || run_status=$?
    cat "$out/run-$run.txt"
    if ((run_status != 0)); then
        echo "run-http.sh: run $run exited with status $run_status (4: some requests failed; 3: deadline)" >&2
        status=$run_status
    fi
done

if compgen -G "$out/run-*.json" > /dev/null; then
    python3 - "$out" <<'PY'
import glob, json, sys
reports = [json.load(open(path)) for path in sorted(glob.glob(f"{sys.argv[1]}/run-*.json"))]
print(f"\n== service/bare per run ({len(reports)} run(s)): throughput ratio (target >= 0.95), p99 ratio (target <= 1.1)")
for index, cell in enumerate(reports[0]["cells"]):
    name = f'{cell["transportName"]} c={cell["concurrency"]}'
    throughput = "  ".join(f'{r["cells"][index]["throughputRatio"]:.3f}' for r in reports)
    p99 = "  ".join(f'{r["cells"][index]["p99Ratio"]:.3f}' for r in reports)
    print(f"{name:22s} throughput {throughput}    p99 {p99}")
PY
fi
echo "output: $out" >&2
exit "$status"
