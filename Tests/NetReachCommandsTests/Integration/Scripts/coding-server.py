#!/usr/bin/env python3
"""Serves bodies cut short, in content codings and in ranges, so tests can compare netreach with curl.

    coding-server.py PORT LOG

Listens on 127.0.0.1:PORT, prints `ready` once it listens, runs until killed, and appends one JSON
line per request to LOG before answering: {"head": "..."}. One thread per connection, one request
per connection (`Connection: close`). Parameters come in the query string:

/body     the document (`size` bytes, default 200000, of a seeded random text that compresses to
          about half) in `coding`, framed by `framing`:
            coding   identity (no Content-Encoding), gzip, x-gzip, deflate (zlib), raw-deflate
                     (sent as `deflate`), br and zstd (hand-made uncompressed frames of "ok\\n"),
                     gzip-gzip (`gzip, gzip`: gzip twice), gzip-identity (`gzip, identity`),
                     identity-named (`Content-Encoding: identity`), six-gzip (gzip six times),
                     gzip-garbage (gzip then bytes that are no gzip member), unknown (`snappy`, the
                     bytes as they are)
            framing  length (Content-Length), chunked, close (neither: the end is the close)
            cut      send only this many bytes of the coded body, then close (FIN)
            reset    with cut: reset (RST) instead of closing
            empty    the document is empty (its coded form need not be)
            zero     no body at all, whatever the coding says
            status   the status line's code and reason (default 200 OK)
/file     the document as a file: `Last-Modified` always, `ETag` "v1" (identity) or "v1-gzip"
          (gzip); gzip when the request's Accept-Encoding names it. `Range: bytes=N-` is honoured
          on the representation sent (so on the gzip bytes, as nginx's gzip_static does), guarded
          by If-Range (that representation's ETag, or the date), unless:
            ranges=none        ranges are ignored (200, whole)
            ifrange=ignore     If-Range is not looked at
            coded206=1         a range is answered from the gzip bytes even without gzip asked
            changes=1          every answer after the first is of a second version (another
                               text, date and ETag)
          `cut=N` with `cuts=K`: the first K answers to this query stop after N body bytes (FIN).
"""
import gzip
import json
import random
import socket
import sys
import threading
import zlib
from urllib.parse import parse_qs, urlsplit

DATES = {1: "Sun, 01 Nov 2026 10:00:00 GMT", 2: "Mon, 02 Nov 2026 10:00:00 GMT"}
BR = b"\x20\x00\x10ok\n\x03"  # brotli: one uncompressed meta-block "ok\n", then the last, empty one
ZSTD = b"\x28\xb5\x2f\xfd\x20\x03\x19\x00\x00ok\n"  # zstd: a single-segment frame, one raw block


def document(size, seed=7):
    generator = random.Random(seed)
    letters = b"abcdefghijklmnop\n"
    return bytes(generator.choice(letters) for _ in range(size))


DOCUMENTS = {}
COUNTS = {}
LOCK = threading.Lock()


def cached(size, version=1):
    with LOCK:
        if (size, version) not in DOCUMENTS:
            DOCUMENTS[(size, version)] = document(size, seed=6 + version)
        return DOCUMENTS[(size, version)]


def gzipped(data):
    return gzip.compress(data, compresslevel=6, mtime=0)


def zlibbed(data, raw=False):
    coder = zlib.compressobj(6, zlib.DEFLATED, -15 if raw else 15)
    return coder.compress(data) + coder.flush()


def coded(name, data):
    """The Content-Encoding value and the coded bytes for `name`."""
    return {
        "identity": (None, data),
        "identity-named": ("identity", data),
        "gzip": ("gzip", gzipped(data)),
        "x-gzip": ("x-gzip", gzipped(data)),
        "deflate": ("deflate", zlibbed(data)),
        "raw-deflate": ("deflate", zlibbed(data, raw=True)),
        "br": ("br", BR),
        "zstd": ("zstd", ZSTD),
        "gzip-gzip": ("gzip, gzip", gzipped(gzipped(data))),
        "gzip-identity": ("gzip, identity", gzipped(data)),
        "six-gzip": ("gzip, gzip, gzip, gzip, gzip, gzip", six(data)),
        "gzip-garbage": ("gzip", gzipped(data) + b"this is no gzip member"),
        "unknown": ("snappy", data),
    }[name]


def six(data):
    for _ in range(6):
        data = gzipped(data)
    return data


def main():
    port, log = int(sys.argv[1]), sys.argv[2]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(16)
    print("ready", flush=True)
    while True:
        connection, _ = listener.accept()
        threading.Thread(target=serve, args=(connection, log), daemon=True).start()


def read_head(connection):
    head = b""
    while b"\r\n\r\n" not in head and len(head) < 65536:
        chunk = connection.recv(4096)
        if not chunk:
            break
        head += chunk
    return head.split(b"\r\n\r\n")[0].decode("latin-1")


def serve(connection, log):
    connection.settimeout(10)
    try:
        head = read_head(connection)
        write(log, {"head": head})
        lines = head.split("\r\n")
        method, target = lines[0].split(" ")[:2]
        fields = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            fields[name.strip().lower()] = value.strip()
        url = urlsplit(target)
        query = {name: values[0] for name, values in parse_qs(url.query, keep_blank_values=True).items()}
        if url.path == "/file":
            answer_file(connection, method, fields, query, url.query)
        else:
            answer_body(connection, method, query)
    except (OSError, ValueError) as error:
        write(log, {"error": str(error)})
    finally:
        try:
            connection.close()
        except OSError:
            pass


def answer_body(connection, method, query):
    data = b"" if "empty" in query else cached(int(query.get("size", "200000")))
    encoding, body = coded(query.get("coding", "identity"), data)
    if "zero" in query:
        body = b""
    framing = query.get("framing", "length")
    status = query.get("status", "200 OK").replace("+", " ")
    head = "HTTP/1.1 %s\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n" % status
    if encoding is not None:
        head += "Content-Encoding: %s\r\n" % encoding
    if framing == "length":
        head += "Content-Length: %d\r\n" % len(body)
    elif framing == "chunked":
        head += "Transfer-Encoding: chunked\r\n"
    connection.sendall((head + "\r\n").encode("latin-1"))
    if method == "HEAD":
        return
    cut = int(query["cut"]) if "cut" in query else None
    payload = body[:cut] if cut is not None else body
    if framing == "chunked":
        wire = b"".join(
            b"%x\r\n" % len(payload[i : i + 8192]) + payload[i : i + 8192] + b"\r\n"
            for i in range(0, len(payload), 8192)
        )
        if cut is None:
            wire += b"0\r\n\r\n"
    else:
        wire = payload
    connection.sendall(wire)
    if cut is not None and "reset" in query:
        # SO_LINGER {on, 0}: the close sends RST, not FIN.
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    elif cut is not None:
        connection.shutdown(socket.SHUT_WR)


def answer_file(connection, method, fields, query, key):
    with LOCK:
        served = COUNTS.get(key, 0)
        COUNTS[key] = served + 1
    version = 2 if "changes" in query and served > 0 else 1
    data = cached(int(query.get("size", "200000")), version)
    accepts = fields.get("accept-encoding", "")
    offered = [part.split(";")[0].strip().lower() for part in accepts.split(",")]
    wants_gzip = "gzip" in offered
    rng = fields.get("range", "")
    start = None
    if query.get("ranges") != "none" and rng.startswith("bytes=") and rng.endswith("-"):
        start = int(rng[len("bytes=") : -1])
    coded_range = start is not None and query.get("coded206") == "1"
    use_gzip = wants_gzip or coded_range
    body = gzipped(data) if use_gzip else data
    etag = ('"v%d-gzip"' if use_gzip else '"v%d"') % version
    if start is not None and query.get("ifrange") != "ignore" and "if-range" in fields:
        if fields["if-range"] not in (etag, DATES[version]):
            start = None
    cut = int(query["cut"]) if "cut" in query and served < int(query.get("cuts", "1")) else None
    head = "Content-Type: application/octet-stream\r\nConnection: close\r\nAccept-Ranges: bytes\r\n"
    head += "ETag: %s\r\nLast-Modified: %s\r\nVary: Accept-Encoding\r\n" % (etag, DATES[version])
    if use_gzip:
        head += "Content-Encoding: gzip\r\n"
    if start is not None and start >= len(body):
        connection.sendall(
            ("HTTP/1.1 416 Range Not Satisfiable\r\n" + head + "Content-Range: bytes */%d\r\nContent-Length: 0\r\n\r\n"
             % len(body)).encode("latin-1"))
        return
    if start is not None:
        status = "206 Partial Content"
        head += "Content-Range: bytes %d-%d/%d\r\n" % (start, len(body) - 1, len(body))
        body = body[start:]
    else:
        status = "200 OK"
    head += "Content-Length: %d\r\n" % len(body)
    connection.sendall(("HTTP/1.1 " + status + "\r\n" + head + "\r\n").encode("latin-1"))
    if method == "HEAD":
        return
    if cut is not None:
        connection.sendall(body[:cut])
        connection.shutdown(socket.SHUT_WR)
    else:
        connection.sendall(body)


LOG_LOCK = threading.Lock()


def write(log, record):
    with LOG_LOCK, open(log, "a") as out:
        out.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
