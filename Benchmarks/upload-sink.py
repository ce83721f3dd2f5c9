import socket, sys, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(16)
def serve(c):
    f = c.makefile("rb", buffering=1 << 20)
    head = []
    while True:
        line = f.readline()
        if not line: return c.close()
        if line in (b"\r\n", b"\n"): break
        head.append(line)
    fields = {k.strip().lower(): v.strip() for k, _, v in (l.partition(b":") for l in head[1:])}
    if fields.get(b"transfer-encoding", b"").lower() == b"chunked":   # URLSession sends a file chunked
        while True:
            size = int(f.readline().split(b";")[0], 16)
            if size == 0:
                while f.readline() not in (b"\r\n", b"\n", b""): pass
                break
            left = size
            while left: left -= len(f.read(min(left, 1 << 20)))
            f.readline()
    else:
        left = int(fields.get(b"content-length", b"0"))
        while left > 0:
            d = f.read(min(left, 1 << 20))
            if not d: break
            left -= len(d)
    c.sendall(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n"); c.close()
while True:
    c, _ = s.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
