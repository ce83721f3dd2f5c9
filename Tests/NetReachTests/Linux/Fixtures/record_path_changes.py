#!/usr/bin/env python3
"""Records what the kernel sends NetReach's engine for a realistic run of path changes, as the
fixture path-changes.hex (read by RecordedNetworkTests and Benchmarks/Benchmarks/PathChange).

    record_path_changes.py OUTFILE      (run inside the namespace record_path_changes.sh sets up)

It does what the engine does, with the same netlink requests: joins the engine's multicast groups
(links, IPv4 and IPv6 addresses and routes, neighbours; IPv4 and IPv6 rules and netconf, nexthop
objects), then dumps links, addresses, nexthop objects and routes in the engine's order on a second
socket. Then it runs each change of CHANGES with `ip`, and records every datagram the events
socket receives until it has been quiet for QUIET seconds. After the dump and after each change it
also records the kernel's own route choice per family (`ip route get` of the first address the
engine asks about for each, a lookup: nothing is sent), which the test compares with the path
NetReach gives on the replayed bytes.

The file is text: `#` comments; `dump` starts the initial dump; `change NAME: COMMAND` starts a
change; `kernel FAMILY DEVICE GATEWAY` (or `kernel FAMILY unreachable`) is the kernel's choice once
the section's datagrams were sent; every other line is one datagram, exactly as recv() returned
it, in lower-case hex. The changes end in the state the dump started from, so a replay can cycle
through them.
"""
import json
import select
import socket
import struct
import subprocess
import sys
import time

NETLINK_ROUTE = 0
SOL_NETLINK = 270
NETLINK_ADD_MEMBERSHIP = 1
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
# RTMGRP_LINK | RTMGRP_NEIGH | RTMGRP_IPV4_IFADDR | RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_IFADDR | RTMGRP_IPV6_ROUTE
LEGACY_GROUPS = 0x1 | 0x4 | 0x10 | 0x40 | 0x100 | 0x400
# RTNLGRP_IPV4_RULE, RTNLGRP_IPV6_RULE, RTNLGRP_IPV4_NETCONF, RTNLGRP_IPV6_NETCONF, RTNLGRP_NEXTHOP
MEMBERSHIPS = [8, 19, 24, 25, 32]
# (request type, body size): RTM_GETLINK, RTM_GETADDR, RTM_GETNEXTHOP, RTM_GETROUTE, all-zero bodies.
DUMPS = [(18, 16), (22, 8), (106, 8), (26, 12)]
# The first address the engine asks about per family (SystemPathSource.Configuration).
LOOKUPS = {"ipv4": "8.8.8.8", "ipv6": "2001:4860:4860::8888"}
QUIET = 0.3
LONGEST = 3.0

CHANGES = [
    ("route-delete", "ip route del default via 192.0.2.1 dev eth0 metric 100"),
    ("route-add", "ip route add default via 192.0.2.1 dev eth0 metric 100"),
    ("link-down", "ip link set eth0 down"),
    ("link-up", "ip link set eth0 up"),
    ("address-add", "ip -6 addr add 2001:db8:1::2/64 dev eth0 nodad"),
    ("route-add", "ip route add default via 192.0.2.1 dev eth0 metric 100"),
    ("route-add", "ip -6 route add default via 2001:db8:1::1 dev eth0 metric 100"),
    ("address-delete", "ip addr del 192.0.2.2/24 dev eth0"),
    ("address-add", "ip addr add 192.0.2.2/24 dev eth0"),
    ("route-add", "ip route add default via 192.0.2.1 dev eth0 metric 100"),
    ("rule-add", "ip rule add from all lookup 100 pref 1000"),
    ("rule-delete", "ip rule del pref 1000"),
]


def messages(payload):
    """(type, sequence) of each message in one datagram."""
    offset = 0
    while offset + 16 <= len(payload):
        length, kind, _flags, sequence, _port = struct.unpack_from("=IHHII", payload, offset)
        if length < 16:
            return
        yield kind, sequence
        offset += (length + 3) & ~3


def dump(lines):
    requests = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_ROUTE)
    requests.bind((0, 0))
    for sequence, (kind, size) in enumerate(DUMPS, start=1):
        requests.send(struct.pack("=IHHII", 16 + size, kind, NLM_F_REQUEST | NLM_F_DUMP, sequence, 0) + bytes(size))
        while True:
            payload = requests.recv(1 << 16)
            lines.append(payload.hex())
            if any(k in (NLMSG_DONE, NLMSG_ERROR) and s == sequence for k, s in messages(payload)):
                break
    requests.close()


def record_until_quiet(events, lines):
    start = time.monotonic()
    while time.monotonic() - start < LONGEST:
        ready, _, _ = select.select([events], [], [], QUIET)
        if not ready:
            return
        lines.append(events.recv(1 << 16).hex())
    sys.exit(f"the kernel was still sending {LONGEST} s after a change")


def kernel_choice(lines):
    for family, address in LOOKUPS.items():
        answer = subprocess.run(["ip", "-j", "route", "get", address], capture_output=True, text=True)
        if answer.returncode != 0:
            lines.append(f"kernel {family} unreachable")
            continue
        route = json.loads(answer.stdout)[0]
        lines.append(f"kernel {family} {route['dev']} {route.get('gateway', 'on-link')}")


def main(outfile):
    events = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_ROUTE)
    events.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    events.bind((0, LEGACY_GROUPS))
    for group in MEMBERSHIPS:
        events.setsockopt(SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, group)
    uname = " ".join(subprocess.run(["uname", "-sr"], capture_output=True, text=True).stdout.split())
    lines = [
        "# NetReach path-change fixture: written by record_path_changes.sh (see record_path_changes.py).",
        f"# Recorded on {uname}; lo, eth0 (192.0.2.2/24, 2001:db8:1::2/64, default routes metric 100),",
        "# eth1 (198.51.100.2/24, 2001:db8:2::2/64, default routes metric 600); veth peers elsewhere.",
        "dump",
    ]
    dump(lines)
    kernel_choice(lines)
    for name, command in CHANGES:
        lines.append(f"change {name}: {command}")
        subprocess.run(command.split(), check=True)
        record_until_quiet(events, lines)
        kernel_choice(lines)
    with open(outfile, "w") as out:
        out.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
