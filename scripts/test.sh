#!/usr/bin/env bash
# Runs NetReach's tests: the README's test command, and what CI runs.
#
# - Installs iproute2, python3, util-linux, nginx, curl, openssl and tinyproxy when missing and we
#   are root (the namespace suites need `ip`, python3 with ctypes, `unshare`; `get` and the
#   transports are compared with curl on files nginx serves, over TLS with test certificates, and
#   through tinyproxy). Also prometheus, prometheus-alertmanager and systemd, whose checkers read
#   Deploy/, chromium for serve's status page, lintian and patchelf for the Debian package, and
#   kubernetes-validate (PyPI).
# - Fails if README/DocC Swift snippets changed without scripts/extract-snippets.py being run;
#   the build compiles them (Tests/SnippetChecks).
# - Fails if a commit since the rule began has a subject over 72 characters.
# - Fails if a Swift source is not formatted as .swift-format says (scripts/format.sh fixes it).
# - Fails if our own sources build with a warning (Swift 6 strict concurrency, zero warnings).
# - Runs `swift test`: unit suites always; the network-namespace suites when root (they skip with a
#   message otherwise, and must run, not skip, when CI=true).
# - With CI=true (or --tsan), runs the suites that race threads again under ThreadSanitizer: the
#   monitor's concurrency stress and lifecycle suites, the HTTP service and both transports, the
#   porting kit's monitor, the link conditioner and the file watch hub (event loops, locks, timers,
#   the inotify thread).
# - With CI=true (or --fuzz), fuzzes the rtnetlink parser, the resolv.conf reader, Retry-After
#   and URL building with libFuzzer and AddressSanitizer (scripts/fuzz.sh, Docs/Fuzzing.md).
# - With CI=true (or --bench), last, builds the benchmark suites of Benchmarks/ in release and checks
#   their allocations per path change and per request against Benchmarks/Thresholds/ (package-benchmark;
#   Benchmarks/README.md says what is checked and how to update the thresholds).
set -euo pipefail
cd "$(dirname "$0")/.."

tsan=false
[ "${CI:-}" = "true" ] && tsan=true
[ "${1:-}" = "--tsan" ] && tsan=true
fuzz=false
[ "${CI:-}" = "true" ] && fuzz=true
[ "${1:-}" = "--fuzz" ] && fuzz=true
bench=false
[ "${CI:-}" = "true" ] && bench=true
[ "${1:-}" = "--bench" ] && bench=true

# What the namespace suites run: ip (iproute2), python3 with ctypes (tun devices held open, glibc's
# resolver asked what it read), unshare and mount (util-linux: a private mount namespace).
missing=""
command -v ip >/dev/null 2>&1 || missing="$missing iproute2"
python3 -c 'import ctypes, fcntl' >/dev/null 2>&1 || missing="$missing python3"
command -v unshare >/dev/null 2>&1 || missing="$missing util-linux"
# `get` is compared with curl on files nginx serves (ranges, resuming, error statuses).
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing="$missing nginx"
command -v curl >/dev/null 2>&1 || missing="$missing curl"
# TLS and proxies: certificates made with openssl, a proxy (tinyproxy) on loopback.
command -v openssl >/dev/null 2>&1 || missing="$missing openssl"
command -v tinyproxy >/dev/null 2>&1 || [ -x /usr/bin/tinyproxy ] || [ -x /usr/sbin/tinyproxy ] || missing="$missing tinyproxy"
# Connectivity checks resolve probe names with a resolver the test runs in a lab namespace.
command -v dnsmasq >/dev/null 2>&1 || [ -x /usr/sbin/dnsmasq ] || missing="$missing dnsmasq-base"
# Deploy/ is checked by the tools that read it: Prometheus's and Alertmanager's, and systemd's.
command -v promtool >/dev/null 2>&1 || missing="$missing prometheus"
command -v amtool >/dev/null 2>&1 || missing="$missing prometheus-alertmanager"
command -v systemd-analyze >/dev/null 2>&1 || missing="$missing systemd"
# serve runs under its unit's own system call filter, loaded with libseccomp from Debian's python.
/usr/bin/python3 -c 'import seccomp' >/dev/null 2>&1 || missing="$missing python3-seccomp"
# serve's YAML reader is compared with PyYAML (Tests/NetReachServeTests/YAMLReaderTests.swift).
python3 -c 'import yaml' >/dev/null 2>&1 || missing="$missing python3-yaml"
# serve's --web.config.file users are hashed as operators hash them: htpasswd -B.
command -v htpasswd >/dev/null 2>&1 || missing="$missing apache2-utils"
# serve's status page is tested in headless Chromium; the Debian package with lintian.
command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
command -v lintian >/dev/null 2>&1 || missing="$missing lintian"
command -v patchelf >/dev/null 2>&1 || missing="$missing patchelf"
# The DaemonSet is validated against Kubernetes's schema (PyPI's kubernetes-validate carries it).
if ! command -v kubernetes-validate >/dev/null 2>&1 && [ "$(id -u)" = "0" ]; then
    python3 -m pip install -q --disable-pip-version-check kubernetes-validate >/dev/null 2>&1 ||
        echo "note: pip could not install kubernetes-validate; the DaemonSet check will fail" >&2
fi
if [ -n "$missing" ]; then
    if [ "$(id -u)" = "0" ]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
    else
        echo "note: missing$missing; namespace suites will fail to set up" >&2
    fi
fi
if [ "${CI:-}" = "true" ] && [ "$(id -u)" != "0" ]; then
    echo "error: CI=true requires root: the network-namespace suites must run, not skip" >&2
    exit 1
fi

echo "== README/DocC snippets are extracted (Tests/SnippetChecks; the build compiles them)"
snippets=0
python3 scripts/extract-snippets.py --check || snippets=$?
if [ "$snippets" = 1 ]; then
    echo "error: README/DocC snippets changed: run scripts/extract-snippets.py and commit" >&2
    exit 1
elif [ "$snippets" != 0 ]; then
    echo "error: scripts/extract-snippets.py could not run, or could not read a document (above)" >&2
    exit 1
fi

echo "== commit subjects (72 characters at most, since the rule began at c112f3a)"
if git rev-parse -q --verify 'c112f3a^{commit}' >/dev/null 2>&1; then
    long=$(git log --format=%s 'c112f3a..HEAD' | awk 'length > 72')
    if [ -n "$long" ]; then
        printf '%s\n' "$long" >&2
        echo "error: commit subjects over 72 characters (above): the reasons go in the body" >&2
        exit 1
    fi
else
    echo "note: no history to check here (not a git clone, or a shallow one)"
fi

echo "== swift-format (.swift-format; scripts/format.sh formats, this checks)"
if ! scripts/format.sh --check; then
    echo "error: sources are not formatted (above): run scripts/format.sh and commit" >&2
    exit 1
fi

echo "== build (warnings in our sources fail the run)"
log=$(mktemp)
if ! swift build --build-tests >"$log" 2>&1; then
    cat "$log"
    exit 1
fi
grep -Ev '^\[[0-9]+/[0-9]+\]' "$log" || true
if grep -E '^/.*/(Sources|Tests)/.*: warning:' "$log" | grep -v '/.build' ; then
    echo "error: the build has warnings (above)" >&2
    exit 1
fi

echo "== swift test"
# At most 16 test cases at once (Swift Testing's own gate, read from this variable; its time limits
# start after it). Unbounded, all ~680 started together on two cores and every test's clock ran
# while hundreds of others set up: the concurrency pool stalled 11-12 s at the start of each run.
# Measured here, one run each: unbounded 61 s with that stall; 16: 71 s, longest stall 2.1 s;
# 8: 94 s, none over 0.2 s. Tests must pass either way; this keeps their clocks honest.
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="${SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH:-16}"
# The run's output is kept so that a failure ends with what failed: a log that shows only its tail
# (as CI's record does) otherwise shows a count of issues and none of them.
test_log=$(mktemp)
status=0
swift test --skip-build 2>&1 | tee "$test_log" || status=${PIPESTATUS[0]}
if [ "$status" != 0 ]; then
    echo "== swift test failed (exit $status): what failed, from the output above"
    grep -E -A 6 '✘ Test .*(recorded an issue|failed after)|[Ff]atal error|Exited with (unexpected )?signal|error: ' "$test_log" |
        grep -v '^✘ Test run with' | head -n 200 || true
    exit "$status"
fi

if $tsan; then
    suites='ConcurrencyStressTests|PathMonitorTests|DestinationPathTests|NetworkServiceTests|ServiceSafetyTests|ServiceStreamingTests|TransportConformanceTests|OfflineIndicatorTests|ConnectivityMonitorTests|CaptivePortalAPITests|AsyncHTTPClientProberTests|ConnectivityEvidenceTests|NWPathMonitorTests|PortedPatternTests|ConditionedProxyTests|ConditionerControlTests|LockAndExecutorTests|EventHubTests|EventLoopTaskExecutorTests|NetworkWatchTests|ServeRoutesTests|FoundationFreeTests|FileWatchHubTests|ResolvConfWatcherTests'
    echo "== ThreadSanitizer: $suites"
    # One test at a time: TSan multiplies CPU cost many times over, and 67 tests, each with its own
    # event loops and sockets, at once on two cores starve each other past their timeouts (seen
    # on CI). The races TSan looks for are inside each test, which starts its own threads; serial
    # is also faster here (about 8 s against 48-60 s parallel under load).
    # scripts/tsan-suppressions.txt names the reports TSan cannot get right (each with its reason).
    TSAN_OPTIONS="suppressions=$PWD/scripts/tsan-suppressions.txt ${TSAN_OPTIONS:-}" \
        swift test --no-parallel --sanitize=thread --scratch-path .build-tsan --filter "$suites"
fi

if $fuzz; then
    # The fuzz targets of Fuzz/ (a package of its own), built with -sanitize=fuzzer,address into
    # Fuzz/.build, each run 40 s from its seeds, two at a time: about 3 min in all on two cores (the
    # build from clean is 1-2 min of it). Fails on a crash, a failed property, a leak, an OOM or a
    # timeout, printing the reproducer; `scripts/fuzz.sh --long 600` is the longer run (Docs/Fuzzing.md).
    echo "== fuzz: libFuzzer + AddressSanitizer, 4 targets (scripts/fuzz.sh)"
    scripts/fuzz.sh
fi

if $bench; then
    # The suites of Benchmarks/ (a package of its own, built in release into Benchmarks/.build) run
    # once, and each benchmark's p90 allocations are compared with its file for this Swift version.
    # package-benchmark fails on a run worse than a file by more than the suite's tolerance, and on
    # one better (swift-nio's practice: the better figure is then recorded); Benchmarks/README.md
    # says what is checked, why the tolerances, and how to record new figures. From a clean
    # Benchmarks/.build 5 min 42 s on two cores at load 4-7: resolving ~1 min, the release build
    # ~3 min 50 s, the check ~50 s.
    swift_version=$(swift --version 2>&1 | sed -n 's/.*Swift version \([0-9]*\.[0-9]*\).*/\1/p' | head -n 1)
    thresholds="$PWD/Benchmarks/Thresholds/$swift_version"
    echo "== benchmarks: allocations per path change and per request against Benchmarks/Thresholds/$swift_version"
    if [ ! -d "$thresholds" ]; then
        echo "error: no thresholds for Swift $swift_version: record them (Benchmarks/README.md)" >&2
        exit 1
    fi
    log=$(mktemp)
    status=0
    (cd Benchmarks && swift package benchmark thresholds check --path "$thresholds") >"$log" 2>&1 || status=$?
    grep -Ev '^\[[0-9]+/[0-9]+\]|ETA:' "$log" || true
    if [ "$status" != 0 ]; then
        echo "error: the benchmarks moved from Benchmarks/Thresholds/$swift_version (above; Benchmarks/README.md)" >&2
        exit 1
    fi
    # package-benchmark checks only the benchmarks it finds a file for, and passes when it finds one:
    # every benchmark it ran must have its file.
    checked=$(sed -n 's/^Checking \[\(.*\)\]$/\1/p' "$log" | tr -d '" ' | tr ',' ' ')
    if [ -z "$checked" ]; then
        echo "error: the benchmark check named no benchmark (above)" >&2
        exit 1
    fi
    for benchmark in $checked; do
        if [ ! -f "$thresholds/${benchmark/:/.}.p90.json" ]; then
            echo "error: no threshold for $benchmark in Benchmarks/Thresholds/$swift_version (Benchmarks/README.md)" >&2
            exit 1
        fi
    done
fi
