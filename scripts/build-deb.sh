#!/usr/bin/env bash
# Builds a Debian package of netreach with dpkg-deb: the executable, netreach(1) generated from
# its --help (scripts/make-manpage.py), the systemd units and the Prometheus and Alertmanager
# examples from Deploy/. CI checks the package with lintian.
#
#   scripts/build-deb.sh                          # builds the release executable first (build-release.sh)
#   scripts/build-deb.sh --binary PATH --output DIR
#   scripts/build-deb.sh --binary .build/debug/netreach --toolchain-binary   # the layout only
#
# --toolchain-binary packages an executable that needs the Swift toolchain's libraries (a debug
# build), to check the package's layout where a release build takes too long (CI): its RUNPATH is
# kept (lintian says custom-library-search-path) and the package is not for installing.
#
# Prints the path of the .deb it wrote, and on standard error its size: the .deb, installed, and
# the executable as packaged (stripped), in bytes.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
binary=""
output="$root/.build-deb"
toolchain_binary=false
while [ $# -gt 0 ]; do
    case "$1" in
        --binary) binary="$2"; shift 2 ;;
        --output) output="$2"; shift 2 ;;
        --toolchain-binary) toolchain_binary=true; shift ;;
        *) echo "usage: $0 [--binary PATH [--toolchain-binary]] [--output DIR]" >&2; exit 64 ;;
    esac
done
if [ -z "$binary" ]; then
    "$root/scripts/build-release.sh" >&2
    binary="$("$root/scripts/build-release.sh" --show-bin-path)/netreach"
fi
[ -x "$binary" ] || { echo "$0: not an executable: $binary" >&2; exit 66; }

version="$("$binary" --version)"
maintainer="${DEBFULLNAME:-NetReach maintainers} <${DEBEMAIL:-maintainers@netreach.invalid}>"
architecture="$(dpkg --print-architecture)"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
package="$stage/netreach"
install -d "$package/DEBIAN" "$package/usr/bin" "$package/usr/share/man/man1" \
    "$package/usr/share/doc/netreach/examples" "$package/lib/systemd/system"

install -m 0755 "$binary" "$package/usr/bin/netreach"
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$package/usr/bin/netreach"
# SwiftPM links executables with RUNPATH $ORIGIN (for Swift libraries beside them); the static
# release build has none to find, and Debian forbids custom search paths.
$toolchain_binary || patchelf --remove-rpath "$package/usr/bin/netreach"
"$package/usr/bin/netreach" --version >/dev/null || {
    echo "$0: the packaged executable does not run without the Swift toolchain's libraries; package the static release build (scripts/build-release.sh)" >&2
    exit 65
}
python3 "$root/scripts/make-manpage.py" "$binary" | gzip -9n > "$package/usr/share/man/man1/netreach.1.gz"
install -m 0644 "$root/Deploy/systemd/netreach.service" "$root/Deploy/systemd/netreach-wait-online.service" \
    "$package/lib/systemd/system/"
install -m 0644 "$root/Deploy/prometheus/prometheus.yml" "$root/Deploy/prometheus/netreach-rules.yml" \
    "$root/Deploy/alertmanager/alertmanager.yml" "$root/Deploy/netreach/serve.yaml" "$root/Deploy/netreach/web.yml" \
    "$package/usr/share/doc/netreach/examples/"

# The zlib override goes in only when lintian can see zlib: it knows it by zlib's copyright
# strings, which the release build drops with every other unused constant (build-release.sh,
# -fdata-sections), and it flags an override that matches nothing. (No libyaml any more: serve's
# YAML is read by our own YAMLReader.)
if grep -aqE '(in|de)flate [0-9][0-9.]* Copyright' "$binary"; then
    install -d "$package/usr/share/lintian/overrides"
    cat > "$package/usr/share/lintian/overrides/netreach" <<'OVERRIDES'
# swift-nio-extras carries its own zlib (its CNIOExtrasZlib target) for HTTP decompression.
netreach: embedded-library zlib [usr/bin/netreach]
OVERRIDES
    chmod 0644 "$package/usr/share/lintian/overrides/netreach"
fi
cat > "$package/usr/share/doc/netreach/copyright" <<COPYRIGHT
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: netreach
Source: the netreach sources

Files: *
Copyright: 2026 The NetReach authors
License: Apache-2.0
 On Debian systems, the full text of the Apache License, Version 2.0 is in
 /usr/share/common-licenses/Apache-2.0.
COPYRIGHT
date="$(date -R -d "@${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || date +%s)}")"
cat <<CHANGELOG | gzip -9n > "$package/usr/share/doc/netreach/changelog.gz"
netreach ($version) unstable; urgency=medium

  * Built from the netreach sources by scripts/build-deb.sh.

 -- $maintainer  $date
CHANGELOG
chmod 0644 "$package/usr/share/doc/netreach/copyright" "$package/usr/share/doc/netreach/changelog.gz"

# The executable links the Swift runtime statically (build-release.sh): it needs glibc (2.36 for
# its packed relocations), libstdc++, libgcc and zlib.
depends="libc6 (>= 2.36), libstdc++6, libgcc-s1, zlib1g"
size="$(du -sk --exclude=DEBIAN "$package" | cut -f1)"
cat > "$package/DEBIAN/control" <<CONTROL
Package: netreach
Version: $version
Architecture: $architecture
Maintainer: $maintainer
Installed-Size: $size
Depends: $depends
Section: net
Priority: optional
Description: network path monitoring and connectivity-aware HTTP
 netreach reads the kernel's links, addresses and routes and answers what
 Apple's NWPathMonitor answers: is the path satisfied, over which interface,
 expensive or constrained. It prints, follows and waits for the path, sends
 HTTP that waits for it, judges whether the internet answers, conditions links
 for tests, and serves the path to Prometheus (netreach serve, with systemd
 units and example alert rules).
CONTROL
mkdir -p "$output"
deb="$output/netreach_${version}_${architecture}.deb"
dpkg-deb --root-owner-group -Zxz --build "$package" "$deb" >&2
echo "build-deb.sh: size: $(basename "$deb") $(stat -c %s "$deb") bytes; installed $((size * 1024)) bytes;" \
    "usr/bin/netreach $(stat -c %s "$package/usr/bin/netreach") bytes" >&2
echo "$deb"
