#!/bin/sh
# Re-records path-changes.hex in this directory (root, iproute2, python3; about 10 s). The fixture
# is what the kernel sent NetReach's engine for a dump and twelve changes (record_path_changes.py
# says which and how it is written); RecordedNetworkTests replays it without root, and so does the
# PathChange benchmark (Benchmarks/). Re-record only when the engine asks the kernel for something
# new (another group, another dump); then update Benchmarks/Thresholds, whose figures depend on it.
#
# Namespace nrfix-PID: lo; eth0 and eth1, veths whose peers are in nrfix-PID-far (up, so the links
# have carrier; nothing is sent); eth0 192.0.2.2/24 and 2001:db8:1::2/64 with default routes via
# .1 (metric 100), eth1 198.51.100.2/24 and 2001:db8:2::2/64 via .1 (metric 600). IPv6 duplicate
# address detection and router advertisements are off, so every address is final when it is
# announced and the recording does not depend on timing. Both namespaces go on exit.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
ns=nrfix-$$
far=nrfix-$$-far
trap 'ip netns del $ns 2>/dev/null || true; ip netns del $far 2>/dev/null || true' EXIT

ip netns add $ns
ip netns add $far
run() { ip netns exec $ns "$@"; }
for setting in accept_dad=0 accept_ra=0; do
    run sysctl -q -w "net.ipv6.conf.all.$setting" "net.ipv6.conf.default.$setting"
done
run ip link set lo up
for i in 0 1; do
    run ip link add eth$i type veth peer name peer$i netns $far
    ip -n $far link set peer$i up
    run ip link set eth$i up
done
run ip addr add 192.0.2.2/24 dev eth0
run ip -6 addr add 2001:db8:1::2/64 dev eth0 nodad
run ip addr add 198.51.100.2/24 dev eth1
run ip -6 addr add 2001:db8:2::2/64 dev eth1 nodad
run ip route add default via 192.0.2.1 dev eth0 metric 100
run ip -6 route add default via 2001:db8:1::1 dev eth0 metric 100
run ip route add default via 198.51.100.1 dev eth1 metric 600
run ip -6 route add default via 2001:db8:2::1 dev eth1 metric 600
sleep 1 # link-local addresses and the kernel's own routes settle before the dump

run python3 "$here/record_path_changes.py" "$here/path-changes.hex"
