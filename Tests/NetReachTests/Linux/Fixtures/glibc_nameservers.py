# Prints the nameservers glibc's resolver takes from /etc/resolv.conf, one per line, as res_ninit
# leaves them: IPv4 ones as dotted quads, IPv6 ones as "ipv6" (they live in a private extension
# of struct __res_state). Prints "count N" first. x86_64/aarch64 glibc layout of __res_state:
# int retrans, int retry, unsigned long options, int nscount, struct sockaddr_in nsaddr_list[3].
import ctypes, socket, struct
resolv = ctypes.CDLL("libresolv.so.2")
state = ctypes.create_string_buffer(4096)
if resolv.__res_ninit(state) != 0:
    raise SystemExit("res_ninit failed")
raw = state.raw
count = struct.unpack_from("i", raw, 16)[0]
print("count", count)
for i in range(count):
    offset = 20 + 16 * i
    family = struct.unpack_from("H", raw, offset)[0]
    print(socket.inet_ntoa(raw[offset + 4:offset + 8]) if family == socket.AF_INET else "ipv6")
