#!/usr/bin/env python3
"""Connections to a `netreach serve` on 127.0.0.1, for ServeClientsTests; prints one JSON object.

    serve_connections.py cap PORT N     # N held idle, one more gets in (the idlest closed);
                                        # N event streams, one more is refused (503), then one
                                        # stream closes and /livez answers again
    serve_connections.py timeouts PORT  # an idle keep-alive connection, and one sending its
                                        # header a byte every 0.2 s: when serve closed each
    serve_connections.py stream PORT fin|reset   # an event stream that goes: the client count
                                        # while it is there, and how long until /metrics says 0

Every wait is bounded (30 s at most); nothing is measured against a clock for pass or fail: the
times are reported for the test's messages.
"""
import json
import re
import socket
import struct
import sys
import time

PORT = int(sys.argv[2])


def connect():
    return socket.create_connection(("127.0.0.1", PORT), timeout=30)


def read_response(connection):
    """Status and body of one response with Content-Length (serve's plain answers)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = connection.recv(65536)
        if not chunk:
            return 0, ""
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1])
    length = re.search(rb"(?i)content-length: *(\d+)", head)
    while length and len(body) < int(length.group(1)):
        chunk = connection.recv(65536)
        if not chunk:
            break
        body += chunk
    return status, body.decode(errors="replace")


def get(path, keep=False):
    connection = connect()
    connection.sendall(f"GET {path} HTTP/1.1\r\nHost: t\r\n{'' if keep else 'Connection: close'}\r\n\r\n".encode())
    try:
        answer = read_response(connection)
    except OSError:
        answer = (0, "")
    if keep:
        return answer, connection
    connection.close()
    return answer


def closed_within(connection, seconds):
    """Whether the server closes CONNECTION within SECONDS (EOF or reset), and when."""
    started = time.monotonic()
    connection.settimeout(seconds)
    try:
        while connection.recv(65536):
            pass
        return True, time.monotonic() - started
    except socket.timeout:
        return False, time.monotonic() - started
    except OSError:
        return True, time.monotonic() - started


def is_open(connection):
    connection.settimeout(0.2)
    try:
        return connection.recv(1) != b""
    except socket.timeout:
        return True
    except OSError:
        return False


def open_stream():
    connection = connect()
    connection.sendall(b"GET /api/v1/events HTTP/1.1\r\nHost: t\r\nAccept: text/event-stream\r\n\r\n")
    data = b""
    while b"\n\n" not in data.partition(b"\r\n\r\n")[2]:
        chunk = connection.recv(65536)
        if not chunk:
            break
        data += chunk
    return connection, data.startswith(b"HTTP/1.1 200")


def event_clients():
    status, body = get("/metrics")
    found = re.search(r"^netreach_event_clients (\S+)$", body, re.M)
    return float(found.group(1)) if status == 200 and found else None


def until(condition, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def cap(count):
    report = {}
    held = []
    for _ in range(count):
        (status, _), connection = get("/livez", keep=True)
        held.append(connection)
        report.setdefault("heldStatuses", []).append(status)
    # The cap is full of idle connections: a scraper still gets in, in place of the idlest.
    report["freshWhileIdleFull"] = get("/livez")[0]
    report["idlestClosed"], _ = closed_within(held[0], 10)
    report["newestOpen"] = is_open(held[-1])
    for connection in held:
        connection.close()
    # Full of event streams (busy, never closed for another): one more is refused at once.
    streams = []
    for _ in range(count):
        connection, ok = open_stream()
        streams.append(connection)
        report.setdefault("streamsStarted", []).append(ok)
    report["freshWhileBusyFull"] = get("/livez")[0]
    streams.pop().close()
    report["livezAfterOneLeft"] = until(lambda: get("/livez")[0] == 200)
    for connection in streams:
        connection.close()
    return report


def timeouts():
    report = {}
    (status, _), idle = get("/livez", keep=True)
    report["idleStatus"] = status
    report["idleClosed"], report["idleClosedAfter"] = closed_within(idle, 30)
    slow = connect()
    slow.sendall(b"GET /livez HTTP/1.1\r\n")
    started, closed = time.monotonic(), False
    while time.monotonic() - started < 30:
        try:
            slow.sendall(b"X")
        except OSError:
            closed = True
            break
        done, _ = closed_within(slow, 0.2)
        if done:
            closed = True
            break
    report["slowClosed"], report["slowClosedAfter"] = closed, time.monotonic() - started
    return report


def stream(mode):
    report = {}
    connection, ok = open_stream()
    report["started"] = ok
    report["clientsWhileOpen"] = event_clients()
    if mode == "reset":
        # SO_LINGER 0: close sends RST, not FIN (a client that crashed, a NAT that forgot it).
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    connection.close()
    started = time.monotonic()
    report["dropped"] = until(lambda: event_clients() == 0)
    report["droppedAfter"] = time.monotonic() - started
    return report


command = sys.argv[1]
if command == "cap":
    result = cap(int(sys.argv[3]))
elif command == "timeouts":
    result = timeouts()
else:
    result = stream(sys.argv[3])
print(json.dumps(result), flush=True)
