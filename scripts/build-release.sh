#!/usr/bin/env bash
# Builds the three executables (netreach, netreach-http, netreach-http-urlsession) the way they
# are meant to be installed: release, with the Swift runtime and Foundation linked statically
# (--static-swift-stdlib). Such a binary needs no Swift toolchain on the machine it runs on (only
# glibc, libstdc++ and, for netreach-http-urlsession, libcurl's dependencies) and starts faster:
# the dynamic loader has ~20 fewer libraries to map and bind. Measured here (Benchmarks/RESULTS.md,
# section 11): one small GET with `netreach-http get` ~12 ms instead of ~15–17 ms.
#
#   scripts/build-release.sh                  # build into .build-release/
#   scripts/build-release.sh --show-bin-path  # where the executables are
#   install -m 0755 "$(scripts/build-release.sh --show-bin-path)"/netreach{,-http,-http-urlsession} /usr/local/bin/
#
# Extra arguments go to `swift build` (for example `--product netreach`).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
exec swift build -c release --static-swift-stdlib --scratch-path "$root/.build-release" "$@"
