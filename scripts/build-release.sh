#!/usr/bin/env bash
# Builds the one executable, `netreach`, the way it is meant to be installed: release, with the
# Swift runtime and Foundation linked statically (--static-swift-stdlib), and, where the C library
# supports it, with the relocations packed (lld's -z pack-relative-relocs, DT_RELR). Such a binary
# needs no Swift toolchain on the machine it runs on (only glibc and libstdc++) and starts faster:
# the dynamic loader has ~20 fewer libraries to map and bind, and packed relocations to apply.
# Measured here on the former executables, before they became one (Benchmarks/RESULTS.md,
# section 11): with DT_RELR some 75,000-113,000 relocations fit in 14 KB instead of 1.8-2.7 MB,
# and one small GET with `netreach-http get` (the former name of `netreach get`) took ~11-12 ms
# instead of ~16 ms for a plain release build.
#
# DT_RELR needs glibc 2.36 or later where the binary runs (Debian 12, Ubuntu 22.10, Fedora 37 and
# later). To build for older systems, set NETREACH_PORTABLE=1 (the relocations stay unpacked).
#
#   scripts/build-release.sh                  # build into .build-release/
#   scripts/build-release.sh --show-bin-path  # where the executable is
#   install -m 0755 "$(scripts/build-release.sh --show-bin-path)"/netreach /usr/local/bin/
#
# The executable exports none of its own symbols to the dynamic loader (--no-export-dynamic;
# SwiftPM exports them all so tests can link executables): the loader then has 29,000 fewer
# names to hash and their pages are never touched, which keeps `netreach watch` ~1.7 MB smaller
# (Benchmarks/RESULTS.md, section 15).
#
# Extra arguments go to `swift build`; without a `--product`, it builds `netreach` (the package's
# test-support targets need the toolchain's Testing module, which a static build does not have).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
flags=(-c release --static-swift-stdlib --scratch-path "$root/.build-release" -Xlinker --no-export-dynamic)
glibc_minor="$(getconf GNU_LIBC_VERSION 2>/dev/null | sed -n 's/^glibc 2\.\([0-9][0-9]*\).*/\1/p')"
if [ "${NETREACH_PORTABLE:-0}" != 1 ] && [ -n "$glibc_minor" ] && [ "$glibc_minor" -ge 36 ]; then
    flags+=(-Xswiftc -use-ld=lld -Xlinker -z -Xlinker pack-relative-relocs)
fi
case " $* " in
    *" --product "*|*" --show-bin-path "*) ;;
    *) flags+=(--product netreach) ;;
esac
exec swift build "${flags[@]}" "$@"
