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
# Every function and constant gets a section of its own (Swift's -function-sections; for the C
# targets, BoringSSL's among them, -ffunction-sections -fdata-sections), so the linker's
# --gc-sections drops unused ones one by one instead of whole files' worth (1.8 MB less code,
# constants and unwind tables), and with lld the code and descriptors are placed in an order made
# from the executable just linked (scripts/link-order.sh; link.order in the scratch directory; when
# it changes, the executable is linked once more): first the functions the commands entered in a
# training run of `watch`, `status`, `serve` and `get`, so what a daemon runs sits together instead
# of in some hundred 64 KB windows across the text (`netreach watch` ~3 MB smaller resident;
# Docs/DesignNotes.md, "A link order made by the build"), then the protocol conformance
# descriptors side by side, in the order the runtime reads them. The Swift runtime walks all
# ~8,400 descriptors on the first `as?` or generic instantiation of each type and protocol pair,
# and `netreach get` makes ~117 such walks before its request is sent: one small GET took 10-16 %
# less (Benchmarks/RESULTS.md, section 26; Docs/DesignNotes.md, "Close to the floor"). The order
# is made here, at every link; no list is kept in the sources.
#
# Extra arguments go to `swift build`; without a `--product`, it builds `netreach` (the package's
# test-support targets need the toolchain's Testing module, which a static build does not have).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
scratch="$root/.build-release"
# Swift code optimized for size (-Osize): 2 MB less code than -O, with `get`'s start-up, `watch`'s
# line after a change, downloads and the conditioner's relay as fast as with -O when measured side by
# side; serve's /metrics answers 8 scrapers at once ~10 % slower, still ~3x node_exporter
# (Docs/DesignNotes.md, "Smaller: -Osize and identical code folded").
flags=(-c release --static-swift-stdlib --scratch-path "$scratch" -Xlinker --no-export-dynamic -Xswiftc -Osize
       -Xswiftc -Xfrontend -Xswiftc -function-sections -Xcc -ffunction-sections -Xcc -fdata-sections)
order=""
glibc_minor="$(getconf GNU_LIBC_VERSION 2>/dev/null | sed -n 's/^glibc 2\.\([0-9][0-9]*\).*/\1/p')"
if [ "${NETREACH_PORTABLE:-0}" != 1 ] && [ -n "$glibc_minor" ] && [ "$glibc_minor" -ge 36 ]; then
    flags+=(-Xswiftc -use-ld=lld -Xlinker -z -Xlinker pack-relative-relocs)
    # Identical code folded into one copy: generic specializations, value witnesses and outlined
    # copies that many modules emit alike (2.9 MB less with -O, 2.5 MB with -Osize; the same
    # section of Docs/DesignNotes.md). `all`, not `safe`: Swift emits no address-significance
    # tables, so `safe` folds almost nothing. What it gives up: two folded functions share one
    # address, which only code comparing function pointers could see.
    flags+=(-Xlinker --icf=all)
    # lld's order file (below): names it does not find (a descriptor gone since the last link)
    # are skipped.
    order="$scratch/link.order"
    flags+=(-Xlinker "--symbol-ordering-file=$order" -Xlinker --no-warn-symbol-ordering)
fi
settings="${flags[*]}"
case " $* " in
    *" --show-bin-path "*) exec swift build "${flags[@]}" "$@" ;;
    *" --product netreach "*) order_from=netreach ;;
    *" --product "*) order_from="" ;;
    *) flags+=(--product netreach); order_from=netreach ;;
esac
# SwiftPM does not recompile what it built before when only compiler flags change (a build from
# before -function-sections kept its objects): a build made with other settings than these (or
# before they were written down) starts over; the checkouts stay.
mkdir -p "$scratch"
stamp="$scratch/build-release.settings"
if [ -e "$scratch/release" ] && [ "$(cat "$stamp" 2>/dev/null)" != "$settings" ]; then
    swift package --scratch-path "$scratch" clean
fi
printf '%s' "$settings" > "$stamp"
# lld's order file is the one made after the last link; the first build links with an empty one.
[ -z "$order" ] || [ -f "$order" ] || : > "$order"
swift build "${flags[@]}" "$@"
# Another product links with the order file as it is; only `netreach` rewrites it.
[ -n "$order" ] && [ -n "$order_from" ] || exit 0

# The order for the next link, made from the executable just linked (scripts/link-order.sh): the
# functions a training run of the commands entered, then the conformance descriptors.
binary="$(swift build "${flags[@]}" "$@" --show-bin-path)/$order_from"
[ -x "$binary" ] || exit 0
# Not linked again since its order was made: nothing to do.
linked="$order.linked"
identity() { stat -c '%s %Y' "$binary"; }
[ "$(identity)" != "$(cat "$linked" 2>/dev/null)" ] || exit 0
"$root/scripts/link-order.sh" "$binary" > "$order.new"
if cmp -s "$order.new" "$order"; then rm -f "$order.new"; identity > "$linked"; exit 0; fi
# A new order: link again in it. SwiftPM does not relink when only the order file changed, but does
# relink a missing executable. One more link only: the training run's list can differ by a few
# functions from one run to the next (which threads got where first), and any list is as good.
mv "$order.new" "$order"
rm -f "$binary"
swift build "${flags[@]}" "$@"
"$root/scripts/link-order.sh" --descriptors "$binary" > "$order.placed"
grep -x -F -f "$order.placed" "$order" | cmp -s - "$order.placed" || echo "$0: the conformance" \
    "descriptors are not in the order asked for; the executable works, only its start-up is slower" >&2
rm -f "$order.placed"
identity > "$linked"
