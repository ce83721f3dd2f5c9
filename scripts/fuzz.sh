#!/usr/bin/env bash
# Builds the libFuzzer targets of Fuzz/ (a package of its own, so the main build never builds them)
# and runs each for a bounded time; Docs/Fuzzing.md says what each target covers.
#
#   scripts/fuzz.sh                    the CI run: every target for 40 s, two at a time (about 3 min
#                                      with the build from clean on two cores)
#   scripts/fuzz.sh --long SECONDS     the long run: every target for SECONDS (e.g. 600), one at a time
#   scripts/fuzz.sh [options] TARGET…  only those targets (FuzzRtnetlink FuzzResolvConf FuzzRetryAfter
#                                      FuzzURLBuilding)
#
# Options: --seconds N (per target), --jobs N (targets at once), --keep (keep the working directory).
#
# Each target starts from its seeds in Fuzz/Corpus/<target>/, copied to a temporary working corpus so
# the seeds stay as they are. Prints per target the inputs run (libFuzzer's
# stat::number_of_executed_units), inputs per second, coverage (cov: edges, ft: features) and
# crashes. Exits non-zero on a crash, a failed property, a leak, an out-of-memory (over 2048 MB),
# a timeout (one input over 10 s) or a run that does not end, printing the reproducer's path (in the
# temporary directory, never the repository) and its bytes in hex. Installs nothing: the Swift
# toolchain brings libFuzzer and AddressSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."

all_targets=(FuzzRtnetlink FuzzResolvConf FuzzRetryAfter FuzzURLBuilding)
seconds=40
jobs=""
long=false
keep=false
targets=()

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
}

while [ $# -gt 0 ]; do
    case "$1" in
        --long | --seconds)
            if [ $# -lt 2 ] || ! [[ "$2" =~ ^[1-9][0-9]*$ ]]; then
                echo "error: $1 takes a number of seconds per target (a positive integer)" >&2
                exit 2
            fi
            seconds=$2
            [ "$1" = "--long" ] && long=true
            shift 2
            ;;
        --jobs)
            if [ $# -lt 2 ] || ! [[ "$2" =~ ^[1-9][0-9]*$ ]]; then
                echo "error: --jobs takes a number of targets to run at once (a positive integer)" >&2
                exit 2
            fi
            jobs=$2
            shift 2
            ;;
        --keep) keep=true; shift ;;
        -h | --help) usage; exit 0 ;;
        -*) echo "error: unknown option $1 (see --help)" >&2; exit 2 ;;
        *)
            if [[ " ${all_targets[*]} " != *" $1 "* ]]; then
                echo "error: no fuzz target $1 (there are: ${all_targets[*]})" >&2
                exit 2
            fi
            targets+=("$1")
            shift
            ;;
    esac
done
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")
# Two at a time on the two cores CI has; the long run one at a time, unless --jobs says otherwise.
if [ -z "$jobs" ]; then if $long; then jobs=1; else jobs=2; fi; fi

# The flags swift-protobuf's FuzzTesting uses, and -enable-testing for `@testable import`: the
# parsers are internal. Fuzz/Package.swift says why its tools version is 5.4.
build_flags=(
    --package-path Fuzz --scratch-path Fuzz/.build -c debug
    -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library -Xswiftc -enable-testing
)
echo "== fuzz: building Fuzz/ (${targets[*]})"
started=$SECONDS
build_log=$(mktemp)
if ! nice -n 10 swift build "${build_flags[@]}" >"$build_log" 2>&1; then
    # gold's "Cannot export local symbol" lines are ASan's runtime, not ours.
    grep -v 'Cannot export local symbol' "$build_log" >&2 || true
    rm -f "$build_log"
    echo "error: the fuzz package did not build (above)" >&2
    exit 1
fi
rm -f "$build_log"
bin=$(swift build "${build_flags[@]}" --show-bin-path)
echo "built in $((SECONDS - started)) s; each target runs ${seconds} s, ${jobs} at a time"

work=$(mktemp -d "${TMPDIR:-/tmp}/netreach-fuzz.XXXXXX")
# The Swift runtime's backtracer would also catch a crash, and can keep the process alive long after
# libFuzzer reported it; libFuzzer and AddressSanitizer report crashes here.
export SWIFT_BACKTRACE=enable=no

# Runs one target; writes $work/<target>/summary, and 0 (passed) or 1 to $work/<target>/status.
run_target() {
    local target=$1 dir="$work/$1"
    mkdir -p "$dir/corpus" "$dir/artifacts"
    cp Fuzz/Corpus/"$target"/* "$dir/corpus/"
    local status=0
    # The outer timeout ends a run that libFuzzer itself cannot end (a hang outside an input).
    timeout --kill-after=10 $((seconds + 120)) nice -n 10 "$bin/$target" "$dir/corpus" \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$dir/artifacts/" >"$dir/log" 2>&1 || status=$?

    local execs rate coverage features corpus
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -n 1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$dir/log" | tail -n 1)
    # The last status line (#N DONE/pulse/NEW... cov: C ft: F corp: N/S ...).
    local status_line
    status_line=$(grep -E '^#[0-9]+.* cov: ' "$dir/log" | tail -n 1 || true)
    coverage=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$status_line")
    features=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$status_line")
    corpus=$(sed -n 's/.* corp: \([0-9]*\)\/.*/\1/p' <<<"$status_line")

    # Slow units are only noted; every other artifact (crash-, leak-, oom-, timeout-) is a failure.
    local found=()
    mapfile -t found < <(find "$dir/artifacts" -type f ! -name 'slow-unit-*' | sort)
    local crashes="${#found[@]}"
    if [ "$status" = 124 ] || [ "$status" = 137 ]; then
        crashes="$crashes (the run did not end in time)"
    elif [ "$status" != 0 ] && [ ${#found[@]} = 0 ]; then
        crashes="? (libFuzzer exited with status $status and wrote no reproducer)"
    fi
    printf '%-16s %12s execs %8s/s   cov %-6s ft %-7s corpus %-6s crashes %s\n' "$target" \
        "${execs:-?}" "${rate:-?}" "${coverage:-?}" "${features:-?}" "${corpus:-?}" "$crashes" >"$dir/summary"
    if [ "$status" = 0 ] && [ ${#found[@]} = 0 ]; then
        echo 0 >"$dir/status"
        return 0
    fi
    {
        echo "---- $target failed (exit status $status); its log: $dir/log"
        # The report: from libFuzzer's or the sanitizer's first line to the end.
        awk '/^==[0-9]+==|^property violated|^ERROR: libFuzzer|^Fatal error|^SUMMARY/ { on = 1 } on' "$dir/log" |
            head -n 80
        for artifact in "${found[@]}"; do
            echo "reproducer: $artifact ($(wc -c <"$artifact") bytes)"
            if [ "$(wc -c <"$artifact")" -le 4096 ]; then
                echo "  hex: $(od -An -v -tx1 "$artifact" | tr -d ' \n')"
            fi
            echo "  rerun: SWIFT_BACKTRACE=enable=no $bin/$target $artifact"
        done
    } >>"$dir/summary"
    echo 1 >"$dir/status"
}

for target in "${targets[@]}"; do
    # At most $jobs at once.
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
    run_target "$target" &
done
wait || true

failed=()
for target in "${targets[@]}"; do
    if [ -f "$work/$target/summary" ]; then cat "$work/$target/summary"; else echo "$target: no summary (the run failed)"; fi
    [ "$(cat "$work/$target/status" 2>/dev/null)" = 0 ] || failed+=("$target")
done
echo "fuzz: ${#targets[@]} targets in $((SECONDS - started)) s, ${#failed[@]} failed${failed[*]:+: ${failed[*]}}"
if [ ${#failed[@]} -gt 0 ]; then
    echo "error: fuzzing found a failure (above); the reproducers and logs are kept in $work" >&2
    echo "       (Docs/Fuzzing.md: reproducing, minimizing, adding the input to Fuzz/Corpus/ as a seed)" >&2
    exit 1
fi
if $keep; then echo "working corpora and logs kept in $work"; else rm -rf "$work"; fi
