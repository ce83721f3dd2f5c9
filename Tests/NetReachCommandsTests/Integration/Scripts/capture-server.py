#!/usr/bin/env python3
"""Records what HTTP clients send, byte for byte, so tests can compare netreach with curl.

    capture-server.py ADDRESS PORT LOG [--tls CERT KEY]

Listens on ADDRESS (an IPv6 address may carry a zone: fe80::1%veth1) and PORT. For each
connection it reads the request head (up to the blank line), answers `200 OK` with the body
`ok\\n` and closes, and appends one JSON line to LOG before answering: {"head": "...", "sni":
"..."} (sni only with --tls: the server name the client sent in its TLS hello, or null for none).
A path `/redirect/URL` is answered `302 Found` with `Location: URL` instead. Prints `ready` on
standard output once it listens; runs until killed. Each connection is served on a thread of its
own, so a client that opens a second connection before it sends on the first (a certificate check
of its own) is answered too; a connection that fails before its head is logged as {"error":
"..."}. It answers every request the same way, so it serves as an origin and as an http proxy
alike (a proxy's request line is the part the tests read).
"""
import json
import socket
import ssl
import sys
import threading


def main():
    address, port, log = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    context = None
    local = threading.local()
    if len(sys.argv) == 7 and sys.argv[4] == "--tls":
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(sys.argv[5], sys.argv[6])

        def remember(_connection, name, _context):
            # Called on the thread that makes the handshake (wrap_socket does it there).
            local.sni = name

        context.sni_callback = remember
    info = socket.getaddrinfo(address, port, socket.AF_UNSPEC, socket.SOCK_STREAM, 0, socket.AI_NUMERICHOST)
    family, kind, protocol, _, where = info[0]
    listener = socket.socket(family, kind, protocol)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(where)
    listener.listen(16)
    print("ready", flush=True)
    while True:
        connection, _ = listener.accept()
        threading.Thread(target=serve, args=(connection, context, local, log), daemon=True).start()


def serve(connection, context, local, log):
    connection.settimeout(10)
    record = {}
    try:
        if context is not None:
            local.sni = None
            connection = context.wrap_socket(connection, server_side=True)
            record["sni"] = local.sni
        head = b""
        while b"\r\n\r\n" not in head and len(head) < 65536:
            chunk = connection.recv(4096)
            if not chunk:
                break
            head += chunk
        record["head"] = head.split(b"\r\n\r\n")[0].decode("latin-1")
        # Logged before the answer: a client that has its response finds its request here.
        write(log, record)
        target = record["head"].split(" ")[1] if " " in record["head"] else ""
        if target.startswith("/redirect/"):
            location = target[len("/redirect/"):].encode("latin-1")
            connection.sendall(
                b"HTTP/1.1 302 Found\r\nLocation: " + location + b"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
        else:
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n")
    except (OSError, ssl.SSLError) as error:
        if "head" not in record:
            record["error"] = str(error)
            write(log, record)
    finally:
        connection.close()


LOG_LOCK = threading.Lock()


def write(log, record):
    with LOG_LOCK, open(log, "a") as out:
        out.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
