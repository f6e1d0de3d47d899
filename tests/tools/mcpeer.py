#!/usr/bin/env python3
"""tests/tools/mcpeer.py: a memcached text-protocol peer for the tests.

    mcpeer.py talk HOST PORT < steps.json

steps.json is a list of steps, each {"send": str, "until": str, "pause": s,
"conn": n}: the bytes of "send" (latin-1) go out on connection n (0 by
default; a new number opens a new connection), with TCP_NODELAY and a pause
after, so consecutive steps arrive as separate segments; then everything
that comes back is read until it ends with "until" (no "until": read
nothing). Prints one JSON line: {"replies": [str per step], "ok": bool,
"error": str}. Exit status 0 when every step got its reply, 1 otherwise.

    mcpeer.py fill HOST PORT COUNT SIZE

sets COUNT keys k0..k{COUNT-1} with SIZE-byte values derived from the key,
pipelined with noreply, then gets every key back and prints
{"hits": n, "misses": n, "bad": n, "first_hit": i, "last_miss": i}.
"""

import json
import socket
import sys
import time


def value_of(i, size):
    seed = f"v{i}:".encode()
    return (seed * (size // len(seed) + 1))[:size]


def read_until(s, buf, end, timeout):
    deadline = time.monotonic() + timeout
    while not buf.endswith(end):
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no reply ending {end!r} within {timeout}s; got {bytes(buf)[-200:]!r}")
        s.settimeout(left)
        d = s.recv(65536)
        if not d:
            raise ConnectionError(f"connection closed; got {bytes(buf)[-200:]!r}")
        buf += d
    return bytes(buf)


def connect(host, port):
    s = socket.create_connection((host, port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def talk(host, port):
    steps = json.load(sys.stdin)
    conns, replies, out = {}, [], {"ok": True, "error": ""}
    try:
        for st in steps:
            n = st.get("conn", 0)
            if n not in conns:
                conns[n] = connect(host, port)
            s = conns[n]
            if st.get("send"):
                s.sendall(st["send"].encode("latin-1"))
            time.sleep(st.get("pause", 0.05))
            if st.get("until"):
                replies.append(read_until(s, bytearray(), st["until"].encode("latin-1"), 10).decode("latin-1"))
            else:
                replies.append("")
    except (OSError, TimeoutError, ConnectionError) as e:
        out.update(ok=False, error=str(e))
    out["replies"] = replies
    print(json.dumps(out))
    return 0 if out["ok"] else 1


def fill(host, port, count, size):
    s = connect(host, port)
    batch = []
    for i in range(count):
        batch.append(b"set k%d 0 0 %d noreply\r\n%s\r\n" % (i, size, value_of(i, size)))
        if len(batch) == 64 or i == count - 1:
            s.sendall(b"".join(batch))
            batch = []
    s.sendall(b"version\r\n")  # everything before it has been handled
    read_until(s, bytearray(), b"\r\n", 30)
    hits = misses = bad = 0
    first_hit = last_miss = -1
    for i in range(count):
        s.sendall(b"get k%d\r\n" % i)
        r = read_until(s, bytearray(), b"END\r\n", 10)
        if r == b"END\r\n":
            misses += 1
            last_miss = i
            continue
        want = b"VALUE k%d 0 %d\r\n%s\r\nEND\r\n" % (i, size, value_of(i, size))
        if r == want:
            hits += 1
            if first_hit < 0:
                first_hit = i
        else:
            bad += 1
    print(json.dumps({"hits": hits, "misses": misses, "bad": bad, "first_hit": first_hit, "last_miss": last_miss}))
    return 0


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "talk":
        return talk(sys.argv[2], int(sys.argv[3]))
    if len(sys.argv) == 6 and sys.argv[1] == "fill":
        return fill(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
