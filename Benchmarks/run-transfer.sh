#!/usr/bin/env bash
# Transfers through `netreach get` (on AsyncHTTPClient) against curl, on loopback, in the same run
# (issue 13):
#
#   download  1 GiB from nginx to a file (-o): seconds, MB/s and peak resident memory, `netreach get`
#             and curl
#   upload    200 MB from a file (-d @FILE, PUT) to a server that reads and discards it
#   small     one small GET from a fresh process: `netreach get` (release and static release), curl,
#             and BareGet (AsyncHTTPClient alone, built static like the release: what the HTTP
#             stack itself costs from a fresh process) (median of SMALL_RUNS, default 30)
#   tls       TLS_SIZES_MB (default "100 1024") to a file over HTTPS from nginx, HTTP/1.1 and HTTP/2
#             (ALPN: one listener offers h2, the other only http/1.1), `netreach get` and curl; each
#             command ends with the file on disk (curl's followed by `sync FILE`, netreach's own
#             fsync), rounds interleaved
#
#   Benchmarks/run-transfer.sh                    # download, upload and small, RUNS=3 each (medians)
#   RUNS=1 SIZE_MB=256 Benchmarks/run-transfer.sh download
#   RUNS=5 Benchmarks/run-transfer.sh tls
#
# Builds netreach in release from this checkout (or uses BIN_DIR), and for the small GET also the
# static release of scripts/build-release.sh (or uses STATIC_BIN_DIR) and BareGet (or uses BAREGET,
# its path). STATIC_BASE_BIN_DIR, if set, adds that static build's `netreach get` as a row of its
# own (the commit before a change, in the same rounds). Needs nginx, curl, python3
# and GNU time (/usr/bin/time). Traffic stays on 127.0.0.1. Waits (at most LOAD_WAIT s) for the
# load average to fall below LOAD_MAX first, and prints it.
# Output: the table on stdout; raw lines in Benchmarks/.build/transfer-runs/<time>-<pid>/.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
runs="${RUNS:-3}"
small_runs="${SMALL_RUNS:-30}"
size_mb="${SIZE_MB:-1024}"
upload_mb="${UPLOAD_MB:-200}"
load_max="${LOAD_MAX:-1.5}"
load_wait="${LOAD_WAIT:-600}"
what="${1:-all}"
out="$here/.build/transfer-runs/$(date -u +%Y%m%dT%H%M%SZ)-$$"
mkdir -p "$out/www"

for tool in nginx curl python3 openssl; do
    command -v "$tool" >/dev/null 2>&1 || [ -x "/usr/sbin/$tool" ] || { echo "run-transfer.sh: needs $tool" >&2; exit 2; }
done
[ -x /usr/bin/time ] || { echo "run-transfer.sh: needs GNU time (/usr/bin/time, Debian package 'time')" >&2; exit 2; }

if [ -z "${BIN_DIR:-}" ]; then
    echo "== building netreach (release)" >&2
    (cd "$root" && timeout 2400 swift build -c release --product netreach >&2)
    BIN_DIR="$(cd "$root" && swift build -c release --show-bin-path)"
fi
# The small GET is also measured on a static build (scripts/build-release.sh): how a start-up-bound
# command is meant to be shipped.
if [ -z "${STATIC_BIN_DIR:-}" ] && { [ "$what" = all ] || [ "$what" = small ]; }; then
    echo "== building the static release (scripts/build-release.sh)" >&2
    (cd "$root" && timeout 2400 scripts/build-release.sh >&2)
    STATIC_BIN_DIR="$(cd "$root" && scripts/build-release.sh --show-bin-path)"
fi
# The reference for the start-up: one GET with AsyncHTTPClient and nothing else, linked as
# scripts/build-release.sh links netreach.
if [ -z "${BAREGET:-}" ] && { [ "$what" = all ] || [ "$what" = small ]; }; then
    echo "== building BareGet (static release)" >&2
    bareget_flags=(-c release --product BareGet --static-swift-stdlib --scratch-path "$here/.build/bareget"
        -Xlinker --no-export-dynamic)
    glibc_minor="$(getconf GNU_LIBC_VERSION 2>/dev/null | sed -n 's/^glibc 2\.\([0-9][0-9]*\).*/\1/p')"
    if [ -n "$glibc_minor" ] && [ "$glibc_minor" -ge 36 ]; then
        bareget_flags+=(-Xswiftc -use-ld=lld -Xlinker -z -Xlinker pack-relative-relocs)
    fi
    (cd "$here" && timeout 2400 swift build "${bareget_flags[@]}" >&2)
    BAREGET="$(cd "$here" && swift build "${bareget_flags[@]}" --show-bin-path)/BareGet"
fi
cli="$BIN_DIR/netreach"

nginx_pid=""
sink_pid=""
cleanup() {
    [ -n "$nginx_pid" ] && kill "$nginx_pid" 2>/dev/null || true
    [ -n "$sink_pid" ] && kill "$sink_pid" 2>/dev/null || true
    rm -rf "$out/www" "$out/fresh" "$out"/*.bin "$out"/*.part
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
median() { sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

# nginx serves the big file and a small one; over TLS, the files of the tls section.
port="$(free_port)"
tls_port="$(free_port)"
h2_port="$(free_port)"
head -c $((size_mb << 20)) /dev/urandom > "$out/www/big.bin"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -keyout "$out/key.pem" -out "$out/cert.pem" \
    -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 2>/dev/null
# nginx 1.25 spells HTTP/2 `http2 on;`; before it, a `listen` parameter.
if /usr/sbin/nginx -v 2>&1 | grep -Eq 'nginx/1\.(1[0-9]|2[0-4])\.'; then
    h2_listen="listen 127.0.0.1:$h2_port ssl http2;"
else
    h2_listen="listen 127.0.0.1:$h2_port ssl; http2 on;"
fi
printf 'ok' > "$out/www/small.txt"
cat > "$out/nginx.conf" <<EOF
daemon off;
worker_processes 1;
pid $out/nginx.pid;
error_log $out/nginx-error.log;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path $out/tmp;
    proxy_temp_path $out/tmp;
    fastcgi_temp_path $out/tmp;
    uwsgi_temp_path $out/tmp;
    scgi_temp_path $out/tmp;
    server { listen 127.0.0.1:$port; root $out/www; }
    ssl_certificate $out/cert.pem;
    ssl_certificate_key $out/key.pem;
    server { listen 127.0.0.1:$tls_port ssl; root $out/www; }
    server { $h2_listen root $out/www; }
}
EOF
/usr/sbin/nginx -c "$out/nginx.conf" -p "$out" &
nginx_pid=$!

# A sink that reads every request body to its end (Content-Length or chunked) and answers 204.
sink_port="$(free_port)"
python3 "$here/upload-sink.py" "$sink_port" > /dev/null 2>&1 &
sink_pid=$!
for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$port/small.txt" && break; sleep 0.05; done

load1() { cut -d' ' -f1 /proc/loadavg; }
waited=0
while awk -v l="$(load1)" -v m="$load_max" 'BEGIN { exit !(l >= m) }' && ((waited < load_wait)); do
    sleep 10; waited=$((waited + 10))
done
echo "load $(cut -d' ' -f1-3 /proc/loadavg) (waited ${waited} s); $(nproc) cores; $(date -u +%FT%TZ)"

# One measured command: "seconds peak_kb status".
measure() { /usr/bin/time -f "%e %M %x" -o "$out/time.txt" "$@" > /dev/null 2>>"$out/stderr.log" || true; cat "$out/time.txt" | tail -1; }

row() { # name, then the command
    local name="$1"; shift
    local secs=() kbs=() failed=""
    for run in $(seq 1 "$runs"); do
        rm -f "$out/dl.bin" "$out/dl.bin.part"
        read -r s k x < <(measure "$@")
        echo "$name run $run: $s s, $k KB, exit $x" >> "$out/raw.txt"
        [ "$x" = 0 ] || failed="exit $x"
        secs+=("$s"); kbs+=("$k")
    done
    if [ -n "$failed" ]; then
        printf '| %-46s | %s: %s |\n' "$name" "$failed" "$(tail -1 "$out/stderr.log" | cut -c1-120)"
        return
    fi
    local s k
    s="$(printf '%s\n' "${secs[@]}" | median)"
    k="$(printf '%s\n' "${kbs[@]}" | median)"
    printf '| %-46s | %8.2f | %9.0f | %8.1f |\n' "$name" "$s" "$(awk -v b="$bytes" -v s="$s" 'BEGIN { print b / 1e6 / s }')" "$(awk -v k="$k" 'BEGIN { print k / 1024 }')"
}

if [ "$what" = all ] || [ "$what" = download ]; then
    bytes=$((size_mb << 20))
    echo; echo "download ${size_mb} MiB to a file, medians of $runs"
    echo "| client | seconds | MB/s | peak RSS MB |"; echo "| --- | ---: | ---: | ---: |"
    row "curl -o" curl -sS -o "$out/dl.bin" "http://127.0.0.1:$port/big.bin"
    row "netreach get -o" "$cli" get -q -o "$out/dl.bin" "http://127.0.0.1:$port/big.bin"
fi

if [ "$what" = all ] || [ "$what" = upload ]; then
    bytes=$((upload_mb << 20))
    head -c "$bytes" /dev/urandom > "$out/up.bin"
    echo; echo "upload ${upload_mb} MiB from a file (PUT), medians of $runs"
    echo "| client | seconds | MB/s | peak RSS MB |"; echo "| --- | ---: | ---: | ---: |"
    # No "Expect: 100-continue": the sink never answers 100, and curl would wait a second for it.
    row "curl -T" curl -sS -H "Expect:" -T "$out/up.bin" "http://127.0.0.1:$sink_port/up"
    row "netreach get -X PUT -d @file" "$cli" get -q -X PUT -d "@$out/up.bin" "http://127.0.0.1:$sink_port/up"
    rm -f "$out/up.bin"
fi

if [ "$what" = tls ]; then
    echo; echo "HTTPS from nginx to a file, fsync included, medians of $runs interleaved rounds"
    echo "| size | protocol | client | seconds | MB/s | ratio to curl (throughput) | peak RSS MB |"
    echo "| ---: | --- | --- | ---: | ---: | ---: | ---: |"
    for mb in ${TLS_SIZES_MB:-100 1024}; do
        head -c $((mb << 20)) /dev/urandom > "$out/www/tls-$mb.bin"
        for proto in http1.1 http2; do
            p="$tls_port"; [ "$proto" = http2 ] && p="$h2_port"
            url="https://127.0.0.1:$p/tls-$mb.bin"
            declare -A secs=() kbs=()
            failed=""
            for run in $(seq 1 "$runs"); do
                for client in curl netreach; do
                    rm -f "$out/dl.bin" "$out/dl.bin.part"
                    if [ "$client" = curl ]; then
                        read -r s k x < <(measure sh -c "curl -sS --$proto --cacert '$out/cert.pem' -o '$out/dl.bin' '$url' && sync '$out/dl.bin'")
                    else
                        read -r s k x < <(measure "$cli" get -q --cacert "$out/cert.pem" -o "$out/dl.bin" "$url")
                    fi
                    got="$(stat -c %s "$out/dl.bin" 2>/dev/null || echo 0)"
                    echo "tls $mb MiB $proto $client run $run: $s s, $k KB, exit $x, $got bytes" >> "$out/raw.txt"
                    { [ "$x" = 0 ] && [ "$got" = $((mb << 20)) ]; } || failed="$client: exit $x, $got bytes"
                    secs[$client]+="$s "; kbs[$client]+="$k "
                done
            done
            if [ -n "$failed" ]; then echo "| $mb MiB | $proto | $failed |"; continue; fi
            c="$(printf '%s\n' ${secs[curl]} | median)"
            for client in curl netreach; do
                sm="$(printf '%s\n' ${secs[$client]} | median)"
                km="$(printf '%s\n' ${kbs[$client]} | median)"
                printf '| %s MiB | %s | %s | %.2f | %.0f | %.2f× | %.1f |\n' "$mb" "$proto" "$client" "$sm" \
                    "$(awk -v b=$((mb << 20)) -v s="$sm" 'BEGIN { print b / 1e6 / s }')" \
                    "$(awk -v c="$c" -v s="$sm" 'BEGIN { print c / s }')" "$(awk -v k="$km" 'BEGIN { print k / 1024 }')"
            done
            unset secs kbs
        done
        rm -f "$out/www/tls-$mb.bin"
    done
fi

if [ "$what" = all ] || [ "$what" = small ]; then
    echo; echo "one small GET from a fresh process, median of $small_runs interleaved rounds (ms)"
    echo "| client | median ms | ratio to curl | ratio to curl, per round (median) |"; echo "| --- | ---: | ---: | ---: |"
    url="http://127.0.0.1:$port/small.txt"
    # Every executable runs from a copy made now: the same one started 1.3-1.6 ms slower from a
    # file written an hour before than from a fresh copy (RESULTS.md, section 29).
    fresh="$out/fresh"
    mkdir -p "$fresh/release" "$fresh/static" "$fresh/base"
    cp "$cli" "$fresh/release/netreach"
    cp "$STATIC_BIN_DIR/netreach" "$fresh/static/netreach"
    cp "$BAREGET" "$fresh/BareGet"
    [ -z "${STATIC_BASE_BIN_DIR:-}" ] || cp "$STATIC_BASE_BIN_DIR/netreach" "$fresh/base/netreach"
    entries=("curl|curl -sS $url" "netreach get|$fresh/release/netreach get -q $url"
             "static: netreach get|$fresh/static/netreach get -q $url"
             "(AsyncHTTPClient alone, static: BareGet)|$fresh/BareGet $url"
             "(process floor: /bin/true)|/bin/true" "(netreach get --help)|$fresh/release/netreach get --help"
             "(static: netreach get --help)|$fresh/static/netreach get --help")
    if [ -n "${STATIC_BASE_BIN_DIR:-}" ]; then
        entries+=("static, STATIC_BASE_BIN_DIR: netreach get|$fresh/base/netreach get -q $url"
                  "(static, STATIC_BASE_BIN_DIR: netreach get --help)|$fresh/base/netreach get --help")
    fi
    # Each round runs every client once, so a slower minute of the machine (a shared VM's
    # neighbours) weighs on all of them alike; each row's median is over its rounds, and the last
    # column is the median of its per-round ratios to curl.
    declare -A times=()
    for round in $(seq 1 "$small_runs"); do
        for i in "${!entries[@]}"; do
            cmd="${entries[$i]#*|}"
            t0=$(date +%s%N)
            # shellcheck disable=SC2086
            $cmd > /dev/null 2>&1 || true
            t1=$(date +%s%N)
            times[$i,$round]=$(( (t1 - t0) / 1000 ))
        done
    done
    c=""
    for i in "${!entries[@]}"; do
        name="${entries[$i]%%|*}"
        us="$(for round in $(seq 1 "$small_runs"); do echo "${times[$i,$round]}"; done | median)"
        per_round="$(for round in $(seq 1 "$small_runs"); do awk -v u="${times[$i,$round]}" -v c="${times[0,$round]}" 'BEGIN { print u / c }'; done | median)"
        [ -n "$c" ] || c="$us"   # the first row, curl, is the baseline
        printf '| %-48s | %8.1f | %5.2f× | %5.2f× |\n' "$name" "$(awk -v u="$us" 'BEGIN { print u / 1000 }')" \
            "$(awk -v u="$us" -v c="$c" 'BEGIN { print u / c }')" "$per_round"
    done
fi
echo; echo "raw: $out/raw.txt"
