#!/usr/bin/env python3
"""The footprint of `netreach` builds, side by side in one run: `watch`'s resident memory and
`status` start-up time (and `get --help` start-up, the cost of the HTTP commands' code being in
the same binary).

    Benchmarks/run-cli-footprint.py LABEL=PATH [LABEL=PATH ...] [--runs 31] [--samples 5]

Each PATH is a `netreach` executable. For every build:
  watch   `PATH watch` is started --samples times, each time with the executable's pages evicted
          from the page cache first (--cache evicted, the default) or all read in (--cache full;
          see prepare_cache); once its first line is out and 1.5 s have passed, VmRSS, RssFile,
          RssAnon and VmHWM are read from /proc/PID/status; then SIGTERM.
  status  `PATH status > /dev/null`, --runs times, the builds interleaved (A B A B ...), wall
          time of each run from the parent's monotonic clock; the median is reported.
  help    the same for `PATH get --help > /dev/null` (loads the HTTP command's code).
Nothing is sent anywhere: watch and status only read the kernel's state (rtnetlink).
Ratios are against the first build given. Prints a table; exits 1 if a run fails.
"""
import argparse, os, signal, statistics, subprocess, sys, time


def status_fields(pid):
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssFile", "RssAnon"):
                fields[key] = int(value.split()[0]) / 1024.0   # kB to MB (MiB)
    return fields


def prepare_cache(path, state):
    """Puts the executable's pages in the page cache in `state` before a sample. How much of a
    binary is resident depends on it: on a fault the kernel also maps the cached neighbours of the
    page (fault-around) and whole large folios, and a file read sequentially (or just written by
    the linker) sits in the cache in large folios. "evicted": the file's cached pages are dropped
    (posix_fadvise DONTNEED, this file only), so the process reads what it touches as a daemon
    started at boot does; "full": the whole file is read first (sequential reads, large folios),
    the upper bound."""
    with open(path, "rb") as f:
        if state == "evicted":
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        else:
            while f.read(1 << 20):
                pass


def watch_memory(path, samples, state):
    results = []
    for _ in range(samples):
        prepare_cache(path, state)
        child = subprocess.Popen([path, "watch"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        try:
            line = child.stdout.readline()
            if not line:
                raise SystemExit(f"{path} watch printed nothing (status {child.wait()})")
            time.sleep(1.5)
            results.append(status_fields(child.pid))
        finally:
            child.send_signal(signal.SIGTERM)
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
    return results


def timed(argv):
    start = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    elapsed = (time.perf_counter() - start) * 1000
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}")
    return elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("builds", nargs="+", help="LABEL=PATH of a netreach executable")
    parser.add_argument("--runs", type=int, default=31)
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--cache", choices=["evicted", "full"], default="evicted",
                        help="the executable's page-cache state before each watch sample (see prepare_cache)")
    a = parser.parse_args()
    builds = []
    for spec in a.builds:
        label, _, path = spec.partition("=")
        if not path or not os.access(path, os.X_OK):
            parser.error(f"{spec}: not LABEL=PATH of an executable")
        builds.append((label, path))

    print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f} before")
    memory = {label: watch_memory(path, a.samples, a.cache) for label, path in builds}
    startup = {label: [] for label, _ in builds}
    help_times = {label: [] for label, _ in builds}
    for label, path in builds:   # warm the page cache once
        timed([path, "status"])
        timed([path, "get", "--help"])
    for _ in range(a.runs):
        for label, path in builds:
            startup[label].append(timed([path, "status"]))
        for label, path in builds:
            help_times[label].append(timed([path, "get", "--help"]))
    print(f"load after: {os.getloadavg()[0]:.2f}; {a.samples} watch samples (cache {a.cache}), {a.runs} interleaved runs each\n")

    base = builds[0][0]
    base_status = statistics.median(startup[base])
    base_help = statistics.median(help_times[base])
    print(f"{'build':<28} {'watch VmRSS MB':>16} {'RssFile':>8} {'RssAnon':>8} {'VmHWM':>7} "
          f"{'status ms p50':>14} {'ratio':>6} {'get --help ms':>14} {'ratio':>6} {'size MB':>8}")
    for label, path in builds:
        rss = [m["VmRSS"] for m in memory[label]]
        row = (f"{label:<28} {min(rss):>7.1f}-{max(rss):<8.1f} "
               f"{statistics.median(m['RssFile'] for m in memory[label]):>8.1f} "
               f"{statistics.median(m['RssAnon'] for m in memory[label]):>8.1f} "
               f"{max(m['VmHWM'] for m in memory[label]):>7.1f} "
               f"{statistics.median(startup[label]):>14.2f} {statistics.median(startup[label]) / base_status:>6.2f} "
               f"{statistics.median(help_times[label]):>14.2f} {statistics.median(help_times[label]) / base_help:>6.2f} "
               f"{os.path.getsize(path) / 1e6:>8.1f}")
        print(row)


if __name__ == "__main__":
    sys.exit(main())
