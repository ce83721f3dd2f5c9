# Sourced by the run-*.sh scripts that build netreach with --static-swift-stdlib.
#
# FoundationNetworking (the urlsession transport) autolinks -lcurl; a static Swift stdlib then needs
# libcurl.so, which only the curl -dev package provides. Without it, link the runtime library
# libcurl.so.4 through a symlink of our own (curl stays a shared library either way).
#
#   static_curl_flags DIR   # prints the extra `swift build` arguments, one per line (none if ld finds -lcurl)
static_curl_flags() {
    local dir="$1"
    if ld -lcurl --verbose -o /dev/null >/dev/null 2>&1; then return 0; fi
    if [[ ! -e /usr/lib/x86_64-linux-gnu/libcurl.so.4 ]]; then
        echo "static build: no libcurl.so and no libcurl.so.4; install libcurl4-openssl-dev" >&2
        return 0
    fi
    mkdir -p "$dir"
    ln -sf /usr/lib/x86_64-linux-gnu/libcurl.so.4 "$dir/libcurl.so"
    printf '%s\n' -Xlinker "-L$dir"
}
