#!/usr/bin/env python3
"""Many Server-Sent Events clients of `netreach serve` at once, for ServeFanOutTests.

    sse_clients.py HOST PORT CLIENTS LAB GATEWAY FLAPS

Opens CLIENTS readers and one client that never reads (a small receive buffer, so it falls
behind soon). Once every reader has its first event, flaps the lab's default route FLAPS times
(through one `ip -batch -`), each removal and each addition only after every reader has the
event of the one before: so every change is one event (the monitor would rightly fold changes
faster than it reads into one), and the flaps go at the pace of the slowest reader, not the
fastest (paced by one reader, the others' writes fell behind on a busy machine until the server
dropped one of them, as it must drop a client hundreds of events behind). Then prints one JSON
object: each reader's event ids in order, and whether the server closed the stalled client's
connection.
"""
import json
import selectors
import socket
import subprocess
import sys
import time

HOST, PORT, CLIENTS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
LAB, GATEWAY, FLAPS = sys.argv[4], sys.argv[5], int(sys.argv[6])
REQUEST = b"GET /api/v1/events HTTP/1.1\r\nHost: test\r\nAccept: text/event-stream\r\n\r\n"

selector = selectors.DefaultSelector()
readers = []
for index in range(CLIENTS):
    connection = socket.create_connection((HOST, PORT))
    connection.sendall(REQUEST)
    connection.setblocking(False)
    state = {"index": index, "buffer": b"", "ids": [], "arrivals": [], "headers": False, "closed": False}
    readers.append(state)
    selector.register(connection, selectors.EVENT_READ, state)

stalled = socket.socket()
stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
stalled.connect((HOST, PORT))
stalled.sendall(REQUEST)


def absorb(state, data, now):
    state["buffer"] += data
    if not state["headers"]:
        if b"\r\n\r\n" not in state["buffer"]:
            return
        state["buffer"] = state["buffer"].split(b"\r\n\r\n", 1)[1]
        state["headers"] = True
    # Chunked transfer encoding: the chunks' framing lines never start with "id: ".
    while b"\n\n" in state["buffer"]:
        block, state["buffer"] = state["buffer"].split(b"\n\n", 1)
        lines = block.split(b"\n")
        fields = {}
        for line in lines:
            line = line.strip(b"\r")
            if b": " in line and not line.startswith(b":"):
                name, value = line.split(b": ", 1)
                fields[name] = value
        if fields.get(b"event") == b"path" and b"id" in fields:
            state["ids"].append(int(fields[b"id"]))
            state["arrivals"].append(now)


def pump(timeout):
    for key, _ in selector.select(timeout=timeout):
        data = key.fileobj.recv(1 << 16)
        if not data:
            selector.unregister(key.fileobj)
            key.data["closed"] = True
            continue
        absorb(key.data, data, time.monotonic())


def wait_for(condition, seconds):
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            counts = [len(state["ids"]) for state in readers]
            closed = [state["index"] for state in readers if state["closed"]]
            raise SystemExit(
                "timed out: events per reader from %d to %d (first reader %d); closed by the server: %s"
                % (min(counts), max(counts), counts[0], closed))
        pump(0.05)


wait_for(lambda: all(state["ids"] for state in readers), 60)
print("ready", flush=True)
ip = subprocess.Popen(["ip", "-n", LAB, "-batch", "-"], stdin=subprocess.PIPE, text=True)
first = readers[0]
for _ in range(FLAPS):
    for command in ("route del default", "route add default via " + GATEWAY):
        seen = len(first["ids"])
        ip.stdin.write(command + "\n")
        ip.stdin.flush()
        wait_for(lambda: all(len(state["ids"]) > seen for state in readers), 30)
ip.stdin.close()
ip.wait()
# Every reader has everything the first one has.
wait_for(lambda: all(len(state["ids"]) >= len(first["ids"]) for state in readers), 60)
pump(0.5)

# The stalled client: read what the kernel kept for it; a closed connection ends in EOF.
stalled.settimeout(5)
closed = False
try:
    while True:
        data = stalled.recv(1 << 16)
        if not data:
            closed = True
            break
except (socket.timeout, ConnectionResetError):
    closed = isinstance(sys.exc_info()[1], ConnectionResetError)

print(json.dumps({"ids": [state["ids"] for state in readers], "stalledClosed": closed}))
