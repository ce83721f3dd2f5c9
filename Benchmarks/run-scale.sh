#!/usr/bin/env bash
# NetReach with a large routing table (RESULTS.md, section 9). Needs root. Builds the `netreach`
# CLI in release (scratch path Benchmarks/.build/cli, as run-latency.sh), makes a namespace
# nrscale-<pid> (lo + nb0, 192.0.2.2/24, default via 192.0.2.1; the veth peer nb1 in
# nrscale-<pid>-p; IPv6 off in both), adds ROUTES non-default routes 10.x.y.z/32 via 192.0.2.1 with
# `ip -batch`, then measures:
#   (i)   `netreach status --namespace NS` start-up against `ip -n NS route show > /dev/null`,
#         RUNS runs each, interleaved (ABBA), wall time from the parent's CLOCK_MONOTONIC;
#   (ii)  while `netreach watch --json --namespace NS` runs: one `ip -batch` of EXTRA more routes;
#         the watch's CPU (utime+stime from /proc/PID/stat; also the schedstat sum of its live
#         threads) per route added, and the lines it printed meanwhile (target 0);
#   (iii) its VmHWM / VmRSS after that batch;
#   (iv)  its context switches (all threads, voluntary + involuntary) over IDLE s afterwards.
# (ii)–(iv) are repeated REPS times: the EXTRA routes are deleted again (watch stopped) in between.
# Nothing is sent on any wire: the namespace's only link is a veth to the peer namespace, and
# neither netreach nor ip sends packets (route lookups are RTM_GETROUTE questions to the kernel).
#
#   sudo Benchmarks/run-scale.sh
#   ROUTES=300000 EXTRA=100000 RUNS=7 REPS=3 IDLE=10 Benchmarks/run-scale.sh
#   SWIFT_BUILD_FLAGS="-Xswiftc -no-whole-module-optimization" Benchmarks/run-scale.sh
#   CLI=.build-release/release/netreach Benchmarks/run-scale.sh   # a built CLI, e.g. the static
#                                   # one scripts/build-release.sh makes (what the README installs)
#
# Every namespace it makes is deleted on exit, whatever happens; every step is bounded by timeout.
# Output: Benchmarks/.build/scale-runs/<time>-<pid>/ (report.txt, results.json, watch logs).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
routes="${ROUTES:-300000}"
extra="${EXTRA:-100000}"
runs="${RUNS:-7}"
reps="${REPS:-3}"
idle="${IDLE:-10}"
prefix="nrscale-$$"
ns="$prefix"
peer="$prefix-p"
out="$here/.build/scale-runs/$(date -u +%Y%m%dT%H%M%SZ)-$$"

if [[ "$(id -u)" != 0 ]]; then echo "run-scale.sh: needs root (network namespaces)" >&2; exit 2; fi
command -v ip >/dev/null || { echo "run-scale.sh: needs iproute2 (ip)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "run-scale.sh: needs python3" >&2; exit 2; }

child=""
cleanup() {
    if [[ -n "$child" ]] && kill -0 "$child" 2>/dev/null; then
        kill -TERM "$child" 2>/dev/null || true   # the measuring script stops its watch on TERM
        wait "$child" 2>/dev/null || true
    fi
    for n in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${prefix}(-p)?$" || true); do
        ip netns del "$n" 2>/dev/null || true
    done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The library at NETREACH_REV (default HEAD), from `git archive`: see source-at-rev.sh.
source "$here/source-at-rev.sh"
if [[ -n "${CLI:-}" ]]; then
    cli="$(realpath "$CLI")"
    build_note="prebuilt $cli (CLI=); NETREACH_REV is not used"
else
    echo "== building netreach (release ${SWIFT_BUILD_FLAGS:-})" >&2
    timeout 1200 swift build -c release "${build_flags[@]}" --package-path "$src" --scratch-path "$here/.build/cli" --product netreach >&2
    cli="$here/.build/cli/release/netreach"
    build_note="-c release ${SWIFT_BUILD_FLAGS:-}"
fi

mkdir -p "$out"
{
    echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r)"
    echo "swift: $(swift --version 2>&1 | head -1)"
    echo "commit: $rev (built from git archive $src; working tree HEAD $(git -C "$here/.." rev-parse --short HEAD))"
    echo "build: $build_note"
    echo "ip: $(ip -V)"
} | tee "$out/machine.txt"

echo "== namespaces $ns, $peer" >&2
ip netns add "$ns"
ip netns add "$peer"
for n in "$ns" "$peer"; do
    ip netns exec "$n" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
done
ip -n "$ns" link add nb0 type veth peer name nb1 netns "$peer"
ip -n "$ns" link set lo up
ip -n "$ns" addr add 192.0.2.2/24 dev nb0
ip -n "$ns" link set nb0 up
ip -n "$peer" link set nb1 up
ip -n "$ns" route add default via 192.0.2.1 dev nb0

# 10.a.b.c/32, numbered from 0: the first ROUTES for the table, the next EXTRA for the batch.
python3 - "$out" "$routes" "$extra" <<'PY'
import sys
out, routes, extra = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def name(i): return f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}/32"
with open(f"{out}/base.batch", "w") as f:
    for i in range(routes): f.write(f"route add {name(i)} via 192.0.2.1 dev nb0\n")
with open(f"{out}/extra-add.batch", "w") as f:
    for i in range(routes, routes + extra): f.write(f"route add {name(i)} via 192.0.2.1 dev nb0\n")
with open(f"{out}/extra-del.batch", "w") as f:
    for i in range(routes, routes + extra): f.write(f"route del {name(i)} via 192.0.2.1 dev nb0\n")
PY
echo "== adding $routes routes (ip -batch)" >&2
start=$(date +%s%N)
timeout 600 ip -n "$ns" -batch "$out/base.batch"
echo "added $routes routes in $(( ($(date +%s%N) - start) / 1000000 )) ms; main table now $(ip -n "$ns" route show | wc -l) routes" | tee -a "$out/machine.txt"

timeout --signal=TERM --kill-after=10 1800 python3 - "$out" "$ns" "$cli" "$routes" "$extra" "$runs" "$reps" "$idle" <<'PY' &
import json, os, signal, statistics, subprocess, sys, time
out, ns, cli = sys.argv[1], sys.argv[2], sys.argv[3]
routes, extra, runs, reps, idle = (int(v) for v in sys.argv[4:9])
TICK = os.sysconf("SC_CLK_TCK")
report = open(f"{out}/report.txt", "w")
watch = None
def stop_watch(*_):
    if watch and watch.poll() is None:
        watch.terminate()
        try: watch.wait(10)
        except subprocess.TimeoutExpired: watch.kill()
    sys.exit(130)
signal.signal(signal.SIGTERM, stop_watch)
def say(line=""):
    print(line, flush=True); report.write(line + "\n"); report.flush()
def load(): return open("/proc/loadavg").read().split()[0]
def now(): return time.clock_gettime_ns(time.CLOCK_MONOTONIC)

# (i) start-up, interleaved ABBA: ip first in odd runs, netreach first in even ones.
def timed(argv):
    t0 = now()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    t1 = now()
    err = p.stderr.read().decode(errors="replace"); p.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    if code != 0: raise SystemExit(f"{argv} exited {code}: {err[:300]}")
    return (t1 - t0) / 1e6, (usage.ru_utime + usage.ru_stime) * 1000, usage.ru_maxrss / 1024
commands = {"ip": ["ip", "-n", ns, "route", "show"], "netreach": [cli, "status", "--namespace", ns]}
startup = {"ip": [], "netreach": []}
say(f"(i) start-up with {routes} routes + default, {runs} runs each, interleaved; load {load()}")
for tool in ("ip", "netreach"): timed(commands[tool])   # one unrecorded run each (page cache)
for run in range(1, runs + 1):
    order = ("ip", "netreach") if run % 2 else ("netreach", "ip")
    line = []
    for tool in order:
        wall, cpu, rss = timed(commands[tool])
        startup[tool].append({"wallMs": wall, "cpuMs": cpu, "maxRssMB": rss})
        line.append(f"{tool} {wall:.1f} ms (CPU {cpu:.1f} ms, max RSS {rss:.1f} MB)")
    say(f"  run {run} (load {load()}): " + "; ".join(line))
med = {t: statistics.median(r["wallMs"] for r in startup[t]) for t in startup}
medcpu = {t: statistics.median(r["cpuMs"] for r in startup[t]) for t in startup}
say(f"  median wall: netreach status {med['netreach']:.1f} ms, ip route show {med['ip']:.1f} ms, ratio {med['netreach'] / med['ip']:.2f}x (target <= 0.8x)")
say(f"  median CPU:  netreach status {medcpu['netreach']:.1f} ms, ip route show {medcpu['ip']:.1f} ms")

# (ii)-(iv) watch through a batch.
def stat_cpu_ticks(pid):
    text = open(f"/proc/{pid}/stat").read()
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[11]) + int(fields[12])
def tasks(pid):
    result = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            sched = int(open(f"/proc/{pid}/task/{tid}/schedstat").read().split()[0])
            status = dict(l.split(":", 1) for l in open(f"/proc/{pid}/task/{tid}/status").read().splitlines() if ":" in l)
            result[tid] = {"name": status["Name"].strip(), "sched": sched,
                           "switches": int(status["voluntary_ctxt_switches"]) + int(status["nonvoluntary_ctxt_switches"])}
        except (FileNotFoundError, ProcessLookupError, KeyError):
            pass
    return result
def memory(pid):
    status = dict(l.split(":", 1) for l in open(f"/proc/{pid}/status").read().splitlines() if ":" in l)
    return {k: int(status[k].split()[0]) / 1024 for k in ("VmHWM", "VmRSS", "RssAnon", "RssFile")}
def lines(path): return sum(1 for _ in open(path, "rb"))
def wait_quiet(pid, quiet_s=1.0, limit_s=300):
    """Until the engine thread (netreach-nl) has not run for quiet_s; returns seconds waited. Not the
    whole process: libdispatch's manager thread wakes once a second on its own (RESULTS.md)."""
    t0 = time.monotonic(); last = None; since = time.monotonic()
    while time.monotonic() - t0 < limit_s:
        cur = [t["sched"] for t in tasks(pid).values() if t["name"] == "netreach-nl"]
        if cur != last: last, since = cur, time.monotonic()
        elif time.monotonic() - since >= quiet_s: return time.monotonic() - t0
        time.sleep(0.05)
    say("  warning: watch still busy after the limit")
    return time.monotonic() - t0
def batch(name):
    t0 = now()
    subprocess.run(["timeout", "600", "ip", "-n", ns, "-batch", f"{out}/{name}.batch"], check=True)
    return (now() - t0) / 1e6

watches = []
for rep in range(1, reps + 1):
    say(f"(ii)-(iv) repetition {rep}/{reps}: watch --json with {routes} routes, then {extra} more in one batch; load {load()}")
    stdout_path, stderr_path = f"{out}/watch-{rep}.jsonl", f"{out}/watch-{rep}.stderr"
    t_start = now()
    watch = subprocess.Popen([cli, "watch", "--json", "--namespace", ns],
                             stdout=open(stdout_path, "wb"), stderr=open(stderr_path, "wb"))
    deadline = time.monotonic() + 60
    while lines(stdout_path) == 0 and time.monotonic() < deadline and watch.poll() is None: time.sleep(0.005)
    first_line_ms = (now() - t_start) / 1e6
    if lines(stdout_path) == 0: raise SystemExit(f"watch printed nothing: {open(stderr_path).read()[:300]}")
    wait_quiet(watch.pid)
    mem_before = memory(watch.pid)
    ticks0, tasks0, lines0 = stat_cpu_ticks(watch.pid), tasks(watch.pid), lines(stdout_path)
    batch_ms = batch("extra-add")
    quiet_s = wait_quiet(watch.pid)
    ticks1, tasks1, lines1 = stat_cpu_ticks(watch.pid), tasks(watch.pid), lines(stdout_path)
    mem_after = memory(watch.pid)
    cpu_ms = (ticks1 - ticks0) * 1000 / TICK
    sched_ms = sum(t["sched"] for t in tasks1.values()) / 1e6 - sum(t["sched"] for tid, t in tasks0.items() if tid in tasks1) / 1e6
    engine_wakeups = sum(t["switches"] - tasks0[tid]["switches"] for tid, t in tasks1.items() if t["name"] == "netreach-nl" and tid in tasks0)
    per_thread = {f"{t['name']}[{tid}]": round((t["sched"] - tasks0.get(tid, {"sched": 0})["sched"]) / 1e6, 1) for tid, t in tasks1.items()}
    # (iv) idle: nothing changes for `idle` seconds.
    time.sleep(1)
    idle0 = tasks(watch.pid); time.sleep(idle); idle1 = tasks(watch.pid)
    idle_switches = {f"{t['name']}[{tid}]": (idle1[tid]["switches"] - t["switches"]) if tid in idle1 else "exited" for tid, t in idle0.items()}
    idle_total = sum(v for v in idle_switches.values() if isinstance(v, int))
    watch.terminate(); watch.wait(10); code = watch.returncode; watch = None
    stderr_text = open(stderr_path).read()
    result = {
        "rep": rep, "firstLineMs": first_line_ms, "batchMs": batch_ms, "quietAfterBatchS": quiet_s,
        "cpuMsTicks": cpu_ms, "cpuMsSchedstat": sched_ms, "cpuPerRouteUsTicks": cpu_ms * 1000 / extra,
        "cpuPerRouteUsSchedstat": sched_ms * 1000 / extra, "threadCPUMs": per_thread,
        "linesDuringBatch": lines1 - lines0, "engineSwitchesDuringBatch": engine_wakeups, "linesTotal": lines(stdout_path),
        "memoryBefore": mem_before, "memoryAfter": mem_after,
        "idleSwitches": idle_switches, "idleSwitchesTotal": idle_total,
        "exitStatus": code, "stderrLines": stderr_text.count("\n"), "resyncs": stderr_text.count("were lost"),
        "routesAfter": None,
    }
    result["routesAfter"] = int(subprocess.run(f"ip -n {ns} route show | wc -l", shell=True, capture_output=True, text=True, timeout=120).stdout)
    watches.append(result)
    say(f"  first line after {first_line_ms:.1f} ms; batch of {extra} routes took {batch_ms:.0f} ms; watch quiet {quiet_s:.1f} s after it began")
    say(f"  watch CPU during the batch: {cpu_ms:.0f} ms by utime+stime ({cpu_ms * 1000 / extra:.2f} us per route event), "
        f"{sched_ms:.1f} ms by schedstat ({sched_ms * 1000 / extra:.2f} us per route event) (target <= 3 us); per thread {per_thread}")
    say(f"  engine thread context switches during the batch (~ its wake-ups): {engine_wakeups}, so {extra / max(engine_wakeups, 1):.1f} route events and {sched_ms * 1000 / max(engine_wakeups, 1):.1f} us of CPU per wake-up")
    say(f"  lines printed during the batch: {lines1 - lines0} (target 0); NetReach resyncs (stderr 'were lost'): {result['resyncs']}; stderr lines {result['stderrLines']}")
    say(f"  memory after: VmHWM {mem_after['VmHWM']:.1f} MB (target < 25), VmRSS {mem_after['VmRSS']:.1f} MB (anon {mem_after['RssAnon']:.1f}, file {mem_after['RssFile']:.1f}); before the batch VmHWM {mem_before['VmHWM']:.1f} MB")
    engine_idle = sum(v for k, v in idle_switches.items() if k.startswith("netreach-nl[") and isinstance(v, int))
    result["idleSwitchesEngine"] = engine_idle
    say(f"  idle {idle} s after the batch: context switches, all threads {idle_total} (target 0), engine thread netreach-nl {engine_idle}; {idle_switches}")
    say(f"  watch exit status {code}; routes in the main table: {result['routesAfter']}")
    if stderr_text.strip(): say("  stderr: " + stderr_text.strip()[:500].replace("\n", " | "))
    if rep < reps:
        ms = batch("extra-del")
        say(f"  (deleted the {extra} extra routes again in {ms:.0f} ms, no watch running)")

def m(key): return statistics.median(w[key] for w in watches)
say(f"summary over {reps} repetition(s): CPU per route event {m('cpuPerRouteUsTicks'):.2f} us (ticks) / {m('cpuPerRouteUsSchedstat'):.2f} us (schedstat) median; "
    f"lines during batch {[w['linesDuringBatch'] for w in watches]}; VmHWM {[round(w['memoryAfter']['VmHWM'], 1) for w in watches]} MB; "
    f"idle switches all threads {[w['idleSwitchesTotal'] for w in watches]}, engine {[w['idleSwitchesEngine'] for w in watches]}; resyncs {[w['resyncs'] for w in watches]}; load {load()}")
json.dump({"routes": routes, "extra": extra, "startup": startup, "startupMedianMs": med, "startupMedianCPUMs": medcpu,
           "startupRatio": med["netreach"] / med["ip"], "watch": watches}, open(f"{out}/results.json", "w"), indent=1)
PY
child=$!
status=0
wait "$child" || status=$?
child=""
echo "output: $out" >&2
exit "$status"
