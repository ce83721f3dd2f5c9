# Sourced by run-latency.sh and run-scale.sh (needs `here`, the Benchmarks directory):
# NETREACH_REV (default HEAD): the library is built from `git archive` of that commit in
# Benchmarks/.build/src/<commit>/, never from the working tree, so others' edits in progress are not
# measured. Sets `rev`, `src`, exports NETREACH_PACKAGE_PATH, and reads SWIFT_BUILD_FLAGS into
# the array `build_flags`.
rev="$(git -C "$here/.." rev-parse --short "${NETREACH_REV:-HEAD}")"
src="$here/.build/src/$rev"
if [[ ! -f "$src/Package.swift" ]]; then
    mkdir -p "$src.tmp" && git -C "$here/.." archive "$rev" | tar -x -C "$src.tmp" && mv "$src.tmp" "$src"
fi
export NETREACH_PACKAGE_PATH="$src"
read -r -a build_flags <<< "${SWIFT_BUILD_FLAGS:-}"
