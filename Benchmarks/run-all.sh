#!/usr/bin/env bash
# Every NetReach benchmark in one command, and a dated section of Benchmarks/RESULTS.md with what
# each printed, the commit and the machine. Needs root (namespaces) and what the scripts below need
# (iproute2, nginx, curl, socat, gcc, wrk, prometheus-node-exporter, GNU time); installs nothing.
#
#   sudo Benchmarks/run-all.sh                        # every section (about 60-75 min)
#   sudo Benchmarks/run-all.sh latency serve          # some sections
#   sudo BASELINE=5d4f95f Benchmarks/run-all.sh latency http conditioner connectivity
#                                                     # each also measured at BASELINE, same sitting
#   QUICK=1 Benchmarks/run-all.sh                     # fewer runs and changes: a look, not a result
#   NO_RESULTS=1 Benchmarks/run-all.sh ...            # print only, leave RESULTS.md alone
#
# Sections (each is one script, run as its header describes, and bounded by `timeout`):
#   latency       run-latency.sh: change -> handler against the raw netlink floor; storms; CPU per
#                 change; watch --json against ip -o monitor (route, link and rule changes)
#   scale         run-scale.sh: 300,000 routes: start-up against ip route show, CPU per route event,
#                 memory
#   connectivity  ConnectivityLatency: the verdict after a path change (no root)
#   http          run-http.sh: NetworkService against the bare transport, c=1 and c=32 (no root)
#   transfer      run-transfer.sh: get -o, -d @FILE, one small GET, and HTTPS (HTTP/1.1, HTTP/2) against curl
#   conditioner   run-conditioner.sh --only relay --only latency: against socat
#   serve         run-serve.sh: /metrics against node_exporter, route change -> event against ip
#                 monitor, fan-out and memory
#   evaluator     swift package benchmark (ordo-one/benchmark): the evaluator's throughput
#
# With BASELINE, latency, connectivity, http and conditioner are measured at that commit too
# (built from `git archive`, never from the working tree), right before HEAD. Raw output goes to
# Benchmarks/.build/all-runs/<time>-<pid>/; the RESULTS.md section quotes each script's summary.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
all_sections=(latency scale connectivity http transfer conditioner serve evaluator)
sections=("$@")
[[ ${#sections[@]} -eq 0 ]] && sections=("${all_sections[@]}")
for s in "${sections[@]}"; do
    [[ " ${all_sections[*]} " == *" $s "* ]] || { echo "run-all.sh: unknown section '$s' (${all_sections[*]})" >&2; exit 64; }
done
if [[ "$(id -u)" != 0 ]]; then echo "run-all.sh: needs root (network namespaces)" >&2; exit 2; fi

quick="${QUICK:-0}"
out="$here/.build/all-runs/$(date -u +%Y%m%dT%H%M%SZ)-$$"
mkdir -p "$out"
head_rev="$(git -C "$root" rev-parse --short HEAD)"
dirty="$(git -C "$root" status --porcelain -- Sources Benchmarks | wc -l)"
baseline="${BASELINE:+$(git -C "$root" rev-parse --short "$BASELINE")}"

machine() {
    echo "- machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), kernel $(uname -r)"
    echo "- swift: $(swift --version 2>&1 | head -1)"
    echo "- commit: $head_rev ($dirty changed files under Sources/ and Benchmarks/ at start)${baseline:+; baseline $baseline}"
    echo "- load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
}
machine | tee "$out/machine.md"

# A release `netreach` built from `git archive` of REV, for the scripts that take a binary.
release_at() {
    local rev="$1" src="$here/.build/src/$1"
    if [[ ! -f "$src/Package.swift" ]]; then
        mkdir -p "$src.tmp" && git -C "$root" archive "$rev" | tar -x -C "$src.tmp" && mv "$src.tmp" "$src"
    fi
    timeout 1800 swift build -c release --package-path "$src" --scratch-path "$here/.build/cli-$rev" \
        --product netreach >&2
    echo "$here/.build/cli-$rev/release"
}

# Runs one labelled measurement, bounded; its stdout is kept, its stderr (builds, progress) too.
measure() {
    local label="$1" limit="$2"
    shift 2
    echo "== $label ($(date -u +%H:%M:%S), load $(cut -d' ' -f1 /proc/loadavg))" >&2
    local status=0
    timeout --signal=TERM --kill-after=30 "$limit" "$@" > "$out/$label.txt" 2> "$out/$label.err" || status=$?
    echo "$status" > "$out/$label.status"
    if [[ $status != 0 ]]; then echo "run-all.sh: $label ended with status $status (see $out/$label.err)" >&2; fi
}

for s in "${sections[@]}"; do
    case "$s" in
    latency)
        runs=3
        [[ $quick == 1 ]] && runs=1
        if [[ -n "$baseline" ]]; then
            measure "latency-$baseline" 3600 env NETREACH_REV="$baseline" RUNS=$runs STATIC_CLI=0 "$here/run-latency.sh"
        fi
        measure latency 3600 env RUNS=$runs STATIC_CLI=0 "$here/run-latency.sh"
        ;;
    scale)
        if [[ $quick == 1 ]]; then measure scale 3600 env RUNS=1 REPS=1 IDLE=2 "$here/run-scale.sh"
        else measure scale 3600 env RUNS=3 REPS=3 IDLE=10 "$here/run-scale.sh"; fi
        ;;
    connectivity)
        rounds=300
        [[ $quick == 1 ]] && rounds=50
        # The harness is built against the library at each commit (NETREACH_PACKAGE_PATH), then run.
        revs=("$head_rev")
        [[ -n "$baseline" ]] && revs=("$baseline" "$head_rev")
        for rev in "${revs[@]}"; do
            label=connectivity
            [[ "$rev" != "$head_rev" ]] && label="connectivity-$rev"
            src="$here/.build/src/$rev"
            if [[ ! -f "$src/Package.swift" ]]; then
                mkdir -p "$src.tmp" && git -C "$root" archive "$rev" | tar -x -C "$src.tmp" && mv "$src.tmp" "$src"
            fi
            (cd "$here" && NETREACH_PACKAGE_PATH="$src" timeout 1800 swift build -c release --product ConnectivityLatency) \
                > "$out/$label.build" 2>&1 || { echo "run-all.sh: cannot build ConnectivityLatency at $rev" >&2; continue; }
            harness="$(cd "$here" && NETREACH_PACKAGE_PATH="$src" swift build -c release --show-bin-path)/ConnectivityLatency"
            measure "$label" 1800 "$harness" --rounds "$rounds" --idle-seconds 12 --json "$out/$label.json"
        done
        ;;
    http)
        extra=()
        [[ $quick == 1 ]] && extra=(--requests 2000 --warmup 100 --service-cost-calls 10000)
        if [[ -n "$baseline" ]]; then
            release_at "$baseline" > /dev/null
            measure "http-$baseline" 3600 env NETREACH_PACKAGE_PATH="$here/.build/src/$baseline" RUNS=$([[ $quick == 1 ]] && echo 1 || echo 2) \
                "$here/run-http.sh" "${extra[@]}"
        fi
        measure http 3600 env RUNS=$([[ $quick == 1 ]] && echo 1 || echo 2) "$here/run-http.sh" "${extra[@]}"
        ;;
    transfer)
        if [[ $quick == 1 ]]; then measure transfer 3600 env RUNS=1 SIZE_MB=256 SMALL_RUNS=10 "$here/run-transfer.sh"
        else measure transfer 3600 "$here/run-transfer.sh"; fi
        # HTTPS, HTTP/1.1 and HTTP/2, against curl (the release build above is reused).
        if [[ $quick == 1 ]]; then measure transfer-tls 3600 env RUNS=1 TLS_SIZES_MB=100 "$here/run-transfer.sh" tls
        else measure transfer-tls 3600 env RUNS=3 "$here/run-transfer.sh" tls; fi
        ;;
    conditioner)
        extra=(--only relay --only latency)
        [[ $quick == 1 ]] && extra+=(--size-mb 256 --rounds 2000)
        if [[ -n "$baseline" ]]; then
            bin="$(release_at "$baseline")"
            measure "conditioner-$baseline" 3600 env BIN_DIR="$bin" "$here/run-conditioner.sh" "${extra[@]}"
        fi
        measure conditioner 3600 "$here/run-conditioner.sh" "${extra[@]}"
        ;;
    serve)
        if [[ $quick == 1 ]]; then
            measure serve 3600 env FLAPS=100 CHECKPOINTS=100,200 CHANGES=200 WRK_DURATION=3s IDLE_WAIT=0 "$here/run-serve.sh"
        else measure serve 3600 "$here/run-serve.sh"; fi
        ;;
    evaluator)
        measure evaluator 3600 bash -c "cd '$here' && swift package benchmark"
        ;;
    esac
done

# The section: each measurement's summary (what its script prints last), with its exit status.
summary() {
    local label="$1" file="$out/$1.txt"
    [[ -f "$file" ]] || return 0
    echo
    echo "### $label (exit status $(cat "$out/$label.status"))"
    echo
    echo '```text'
    case "$label" in
    latency*) sed -n '/^== medians/,$p' "$file" ;;
    serve) sed -n '/^== netreach serve benchmarks/,$p' "$file" ;;
    *) tail -n 80 "$file" ;;
    esac
    echo '```'
}
{
    echo
    echo "## $(date -u +%Y-%m-%d) — Benchmarks/run-all.sh ${sections[*]} (\`$head_rev\`)"
    echo
    cat "$out/machine.md"
    echo "- raw output: Benchmarks/.build/all-runs/$(basename "$out")/"
    for s in "${sections[@]}"; do
        [[ -n "$baseline" ]] && summary "$s-$baseline"
        summary "$s"
    done
} > "$out/section.md"
cat "$out/section.md"
if [[ "${NO_RESULTS:-0}" != 1 ]]; then
    cat "$out/section.md" >> "$here/RESULTS.md"
    echo "run-all.sh: appended a section to Benchmarks/RESULTS.md" >&2
fi
failed=$(cat "$out"/*.status | grep -vc '^0$' || true)
exit $(( failed > 0 ? 1 : 0 ))
