#!/usr/bin/env python3
"""tests/tools/hostile.py: hostile host peers for tests/cases/test_robust.py.

Runs as root inside the test's network namespace. Crafted packets go out
through raw sockets (no scapy); every socket operation has a timeout; each
subcommand prints one JSON line and exits non-zero when it could not do
what it was asked.

  frags HOST N K      N datagrams of which only the first K fragments are
                      sent (never the last): reassembly must give up, counted
  synflood HOST PORT N   N SYNs from random source ports (no handshake)
  conns HOST PORT N SECONDS  N concurrent TCP connections, each a sockperf
                      ping-pong client (14-byte header: sequence, flags,
                      length), all held open for SECONDS, every reply checked
"""

import json
import os
import random
import select
import socket
import struct
import sys
import time


def out(**kw):
    print(json.dumps(kw), flush=True)


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def src_ip_for(host):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.connect((host, 9))
    ip = s.getsockname()[0]
    s.close()
    return ip


def ip_hdr(src, dst, proto, plen, ident, frag_off=0, mf=False):
    off = (frag_off >> 3) | (0x2000 if mf else 0)
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + plen, ident, off, 64, proto, 0,
                    socket.inet_aton(src), socket.inet_aton(dst))
    return h[:10] + struct.pack("!H", csum(h)) + h[12:]


def raw_socket():
    return socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)


def frags(host, n, k):
    """ICMP echo datagrams of 45 fragments (a 64 KB ping) with only the first
    k sent: each pins buffers in the appliance until it ages out or is
    evicted by newer ones."""
    src = src_ip_for(host)
    s = raw_socket()
    sent = 0
    for d in range(n):
        ident = (0x4000 + d) & 0xFFFF
        icmp = struct.pack("!BBHHH", 8, 0, 0, ident, 1)  # checksum never checked: incomplete
        for f in range(k):
            body = (icmp if f == 0 else b"") + bytes(1480 - (8 if f == 0 else 0))
            s.sendto(ip_hdr(src, host, 1, len(body), ident, f * 1480, mf=True) + body, (host, 0))
            sent += 1
        if d % 16 == 15:
            time.sleep(0.002)  # do not overflow the host tap's own queue
    out(test="frags", datagrams=n, fragments=sent)
    return 0


def tcp_syn(src, dst, sport, dport, seq):
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, 0, 5 << 4, 0x02, 65535, 0, 0)
    pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, 6, len(tcp))
    tcp = tcp[:16] + struct.pack("!H", csum(pseudo + tcp)) + tcp[18:]
    return ip_hdr(src, dst, 6, len(tcp), random.randrange(65536)) + tcp


def synflood(host, port, n):
    """n SYNs, never completed. The host kernel answers the appliance's
    SYN-ACKs with RSTs (it has no such connection): the way a real flood
    from spoofed-but-routable sources looks to the appliance."""
    src = src_ip_for(host)
    s = raw_socket()
    for i in range(n):
        s.sendto(tcp_syn(src, host, 20000 + (i % 40000), port, random.randrange(1 << 32)), (host, 0))
        if i % 64 == 63:
            time.sleep(0.001)
    out(test="synflood", port=port, syns=n)
    return 0


def conns(host, port, n, seconds):
    """n concurrent sockperf-framed ping-pong connections, one request
    outstanding on each; every reply must carry its request's sequence."""
    socks = []
    t0 = time.monotonic()
    for i in range(n):
        try:
            c = socket.create_connection((host, port), timeout=20)
        except OSError as e:
            out(test="conns", ok=False, connected=i, error=str(e))
            return 1
        c.setblocking(False)
        socks.append(c)
    connect_s = time.monotonic() - t0
    msg = 64
    seq = {c: 0 for c in socks}
    buf = {c: b"" for c in socks}
    answered = 0
    bad = 0

    def send(c):
        seq[c] += 1
        # sockperf's header (apps/rr.c): sequence, flags CLIENT|PONG, length
        c.sendall(struct.pack("!QHI", seq[c], 3, msg) + bytes(msg - 14))

    for c in socks:
        send(c)
    end = time.monotonic() + seconds
    per_conn = {c: 0 for c in socks}
    while time.monotonic() < end:
        r, _, _ = select.select(socks, [], [], 1.0)
        for c in r:
            try:
                b = c.recv(65536)
            except BlockingIOError:
                continue
            if not b:
                out(test="conns", ok=False, error="appliance closed a connection", answered=answered)
                return 1
            buf[c] += b
            while len(buf[c]) >= msg:
                reply, buf[c] = buf[c][:msg], buf[c][msg:]
                rseq, flags, rlen = struct.unpack("!QHI", reply[:14])
                if rseq != seq[c] or flags != 2 or rlen != msg:
                    bad += 1
                answered += 1
                per_conn[c] += 1
                send(c)
    idle = sum(1 for c in socks if per_conn[c] == 0)
    for c in socks:
        c.close()
    out(test="conns", ok=bad == 0 and idle == 0, conns=n, connect_s=round(connect_s, 2), answered=answered,
        starved=idle, min_per_conn=min(per_conn.values()), bad=bad)
    return 0 if bad == 0 and idle == 0 else 1


def main(argv):
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd == "frags":
        return frags(argv[2], int(argv[3]), int(argv[4]))
    if cmd == "synflood":
        return synflood(argv[2], int(argv[3]), int(argv[4]))
    if cmd == "conns":
        return conns(argv[2], int(argv[3]), int(argv[4]), float(argv[5]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
