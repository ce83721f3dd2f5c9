#!/usr/bin/env bash
# Builds the three executables (netreach, netreach-http, netreach-http-urlsession) the way they
# are meant to be installed: release, with the Swift runtime and Foundation linked statically
# (--static-swift-stdlib), and, where the C library supports it, with the relocations packed
# (lld's -z pack-relative-relocs, DT_RELR). Such a binary needs no Swift toolchain on the machine
# it runs on (only glibc, libstdc++ and, for netreach-http-urlsession, libcurl's dependencies) and
# starts faster: the dynamic loader has ~20 fewer libraries to map and bind, and with DT_RELR
# some 75,000-113,000 relocations fit in 14 KB instead of 1.8-2.7 MB. Measured here
# (Benchmarks/RESULTS.md, section 11): one small GET with `netreach-http get` ~11-12 ms instead of
# ~16 ms for a plain release build.
#
# DT_RELR needs glibc 2.36 or later where the binaries run (Debian 12, Ubuntu 22.10, Fedora 37 and
# later). To build for older systems, set NETREACH_PORTABLE=1 (the relocations stay unpacked).
#
#   scripts/build-release.sh                  # build into .build-release/
#   scripts/build-release.sh --show-bin-path  # where the executables are
#   install -m 0755 "$(scripts/build-release.sh --show-bin-path)"/netreach{,-http,-http-urlsession} /usr/local/bin/
#
# Extra arguments go to `swift build` (for example `--product netreach`).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
flags=(-c release --static-swift-stdlib --scratch-path "$root/.build-release")
glibc_minor="$(getconf GNU_LIBC_VERSION 2>/dev/null | sed -n 's/^glibc 2\.\([0-9][0-9]*\).*/\1/p')"
if [ "${NETREACH_PORTABLE:-0}" != 1 ] && [ -n "$glibc_minor" ] && [ "$glibc_minor" -ge 36 ]; then
    flags+=(-Xswiftc -use-ld=lld -Xlinker -z -Xlinker pack-relative-relocs)
fi
exec swift build "${flags[@]}" "$@"
