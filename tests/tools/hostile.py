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
  zerowin HOST PORT SECONDS  an echo client that sends for SECONDS and never
                      reads: its receive window closes (zero window) and the
                      appliance's replies stall on it; then it resets
  halfopen HOST PORT IFACE BYTES SRC  from the namespace's second address SRC: send
                      BYTES, read the echo, then go silent both ways (tc drop
                      filters on IFACE): a peer that vanished half-open
"""

import json
import os
import random
import select
import socket
import struct
import subprocess
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


def zerowin(host, port, seconds):
    c = socket.socket()
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
    c.settimeout(20)
    c.connect((host, port))
    c.setblocking(False)
    sent = 0
    block = bytes(65536)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        _, w, _ = select.select([], [c], [], 0.2)
        if w:
            try:
                sent += c.send(block)
            except BlockingIOError:
                pass
    # Unread data: close() sends a reset, as a peer that gives up would.
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.close()
    out(test="zerowin", sent=sent, seconds=seconds)
    return 0 if sent > 0 else 1


def tc(*args):
    r = subprocess.run(["tc"] + list(args), capture_output=True, text=True, timeout=10)
    if r.returncode:
        raise OSError(f"tc {' '.join(args)}: {r.stderr.strip()}")


def halfopen(host, port, iface, nbytes, src):
    c = socket.socket()
    c.bind((src, 0))
    c.settimeout(20)
    c.connect((host, port))
    data = os.urandom(nbytes)
    c.sendall(data)
    got = b""
    while len(got) < nbytes:
        b = c.recv(65536)
        if not b:
            break
        got += b
    # Silence, both ways: the appliance's segments never reach this
    # socket, and this socket's never reach the appliance.
    tc("qdisc", "add", "dev", iface, "ingress")
    tc("filter", "add", "dev", iface, "parent", "ffff:", "protocol", "ip", "prio", "1", "u32",
       "match", "ip", "dst", f"{src}/32", "action", "drop")
    tc("qdisc", "add", "dev", iface, "root", "handle", "1:", "prio")
    tc("filter", "add", "dev", iface, "parent", "1:", "protocol", "ip", "prio", "1", "u32",
       "match", "ip", "src", f"{src}/32", "action", "drop")
    c.setblocking(False)
    try:
        c.send(b"x" * 1000)  # dropped: the appliance waits for nothing it will see
    except OSError:
        pass
    out(test="halfopen", echoed=len(got), ok=got == data)
    os._exit(0 if got == data else 1)  # no FIN worth sending: it would be dropped


def main(argv):
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd == "frags":
        return frags(argv[2], int(argv[3]), int(argv[4]))
    if cmd == "synflood":
        return synflood(argv[2], int(argv[3]), int(argv[4]))
    if cmd == "conns":
        return conns(argv[2], int(argv[3]), int(argv[4]), float(argv[5]))
    if cmd == "zerowin":
        return zerowin(argv[2], int(argv[3]), float(argv[4]))
    if cmd == "halfopen":
        return halfopen(argv[2], int(argv[3]), argv[4], int(argv[5]), argv[6])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
