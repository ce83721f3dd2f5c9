#!/usr/bin/env python3
"""Records raw rtnetlink traffic as hex fixtures for RtnetlinkParserTests.

Each line of a .hex file is the payload of one recv() on a NETLINK_ROUTE socket, in lower-case
hex, exactly as the kernel sent it (host byte order, several messages per line).

  capture_rtnetlink.py dump OUTDIR
      writes OUTDIR/links.hex, OUTDIR/addresses.hex, OUTDIR/routes.hex from RTM_GETLINK,
      RTM_GETADDR and RTM_GETROUTE dumps (family AF_UNSPEC).

  capture_rtnetlink.py listen OUTFILE SECONDS
      joins RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR | RTMGRP_IPV4_ROUTE |
      RTMGRP_IPV6_ROUTE and writes every notification received during SECONDS to OUTFILE.
      Prints "listening" on stdout once subscribed, so a driver script knows when to start.

Run it inside a throw-away network namespace: capture_fixtures.sh sets one up and calls it.
It only reads.
"""
import os
import select
import socket
import struct
import sys
import time

NETLINK_ROUTE = 0
NLM_F_REQUEST = 0x1
NLM_F_DUMP = 0x300
NLMSG_DONE = 3
NLMSG_ERROR = 2
RTM_GETLINK, RTM_GETADDR, RTM_GETROUTE = 18, 22, 26
GROUPS = 0x1 | 0x10 | 0x100 | 0x40 | 0x400


def request(msg_type, body, seq):
    header = struct.pack("=IHHII", 16 + len(body), msg_type, NLM_F_REQUEST | NLM_F_DUMP, seq, 0)
    return header + body


def messages(payload):
    """(type, seq) of each message in one recv payload."""
    offset = 0
    while offset + 16 <= len(payload):
        length, msg_type, _flags, seq, _pid = struct.unpack_from("=IHHII", payload, offset)
        if length < 16:
            return
        yield msg_type, seq
        offset += (length + 3) & ~3


def dump(outdir):
    requests = [
        ("links.hex", RTM_GETLINK, struct.pack("=BxHiII", socket.AF_UNSPEC, 0, 0, 0, 0)),  # ifinfomsg
        ("addresses.hex", RTM_GETADDR, struct.pack("=BBBBI", socket.AF_UNSPEC, 0, 0, 0, 0)),  # ifaddrmsg
        ("routes.hex", RTM_GETROUTE, struct.pack("=BBBBBBBBI", socket.AF_UNSPEC, 0, 0, 0, 0, 0, 0, 0, 0)),  # rtmsg
    ]
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_ROUTE)
    sock.bind((0, 0))
    for seq, (name, msg_type, body) in enumerate(requests, start=1):
        sock.send(request(msg_type, body, seq))
        lines = []
        finished = False
        while not finished:
            payload = sock.recv(65536)
            lines.append(payload.hex())
            finished = any(t in (NLMSG_DONE, NLMSG_ERROR) and s == seq for t, s in messages(payload))
        with open(os.path.join(outdir, name), "w") as out:
            out.write("\n".join(lines) + "\n")
    sock.close()


def listen(outfile, seconds):
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_ROUTE)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    sock.bind((0, GROUPS))
    print("listening", flush=True)
    deadline = time.monotonic() + seconds
    lines = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        ready, _, _ = select.select([sock], [], [], left)
        if ready:
            lines.append(sock.recv(65536).hex())
    with open(outfile, "w") as out:
        out.write("\n".join(lines) + "\n")
    sock.close()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "dump":
        dump(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "listen":
        listen(sys.argv[2], float(sys.argv[3]))
    else:
        sys.exit(__doc__)
