#!/usr/bin/env python3
"""Records what HTTP clients send, byte for byte, so tests can compare netreach with curl.

    capture-server.py ADDRESS PORT LOG [--tls CERT KEY]

Listens on ADDRESS (an IPv6 address may carry a zone: fe80::1%veth1) and PORT. For each
connection it reads the request head (up to the blank line), answers `200 OK` with the body
`ok\\n` and closes, and appends one JSON line to LOG before answering: {"head": "...", "sni": "..."} (sni only
with --tls: the server name the client sent in its TLS hello, or null for none). Prints
`ready` on standard output once it listens; runs until killed. It answers every request the
same way, so it serves as an origin and as an http proxy alike (a proxy's request line is the
part the tests read).
"""
import json
import socket
import ssl
import sys


def main():
    address, port, log = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    context = None
    seen = []
    if len(sys.argv) == 7 and sys.argv[4] == "--tls":
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(sys.argv[5], sys.argv[6])

        def remember(_connection, name, _context):
            seen.append(name)

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
        connection.settimeout(10)
        record = {}
        try:
            if context is not None:
                seen.clear()
                connection = context.wrap_socket(connection, server_side=True)
                record["sni"] = seen[0] if seen else None
            head = b""
            while b"\r\n\r\n" not in head and len(head) < 65536:
                chunk = connection.recv(4096)
                if not chunk:
                    break
                head += chunk
            record["head"] = head.split(b"\r\n\r\n")[0].decode("latin-1")
            # Logged before the answer: a client that has its response finds its request here.
            write(log, record)
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n")
        except (OSError, ssl.SSLError) as error:
            if "head" not in record:
                record["error"] = str(error)
                write(log, record)
        finally:
            connection.close()


def write(log, record):
    with open(log, "a") as out:
        out.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
