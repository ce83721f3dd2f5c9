#!/bin/sh
# Regenerates the rtnetlink .hex fixtures in this directory (needs root and iproute2).
#
# Namespace "fixcap": lo up; veth pair v0/v1, both up; 10.66.0.1/24 and 2001:db8:66::1/64 (nodad)
# on v0; default routes via 10.66.0.2 (metric 0) and 2001:db8:66::2 (metric 1024, the IPv6 default).
#
#   dump-*.hex          RTM_GETLINK / RTM_GETADDR / RTM_GETROUTE dumps of that setup
#   notify-flap.hex     notifications while: the IPv6 default route is deleted, v0 is set down,
#                       v0 is set up again (the IPv4 default route is still there at link down)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
ns=fixcap
tmp=$(mktemp -d)
trap 'ip netns del $ns 2>/dev/null || true; rm -rf "$tmp"' EXIT

ip netns add $ns
run() { ip netns exec $ns "$@"; }
run ip link set lo up
run ip link add v0 type veth peer name v1
run ip link set v0 up
run ip link set v1 up
run ip addr add 10.66.0.1/24 dev v0
run ip -6 addr add 2001:db8:66::1/64 dev v0 nodad
run ip route add default via 10.66.0.2 dev v0
run ip -6 route add default via 2001:db8:66::2 dev v0
sleep 3   # let link-local DAD finish so the dump is stable

run python3 "$here/capture_rtnetlink.py" dump "$tmp"
for name in links addresses routes; do cp "$tmp/$name.hex" "$here/dump-$name.hex"; done

run python3 "$here/capture_rtnetlink.py" listen "$tmp/notify.hex" 3 > "$tmp/ready" &
listener=$!
while ! grep -q listening "$tmp/ready" 2>/dev/null; do sleep 0.05; done
run ip -6 route del default via 2001:db8:66::2 dev v0
sleep 0.3
run ip link set v0 down
sleep 0.3
run ip link set v0 up
wait $listener
cp "$tmp/notify.hex" "$here/notify-flap.hex"
