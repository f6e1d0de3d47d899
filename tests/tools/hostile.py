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
  ooseq IFACE GUEST_MAC HOST PORT CONNS SEGS [SIZE]  raw TCP peers (their own
                      address, ARP answered here): on each of CONNS
                      connections send segments 2..SEGS+1 out of order, each
                      twice, so they wait in the appliance's out-of-order
                      queue, then the missing first one: the appliance must
                      acknowledge everything (what it discarded is resent
                      from the acknowledged point); SIZE bytes per segment
                      [1000]. The peer offers no window scaling, so all
                      SEGS x SIZE must fit 64 KB to be in the window
  arpqueue IFACE GUEST_MAC HOST N  a raw peer the appliance has no ARP entry
                      for sends N UDP datagrams to the echo port and answers
                      ARP only afterwards: all N echoes must arrive (none of
                      the replies queued behind the ARP request dropped);
                      with a 6th argument `never`, ARP is never answered
                      and no echo may arrive (lwIP frees the queued ones)
  halfopen IFACE GUEST_MAC HOST PORT BYTES SECONDS  a raw TCP peer sends
                      BYTES, takes the echo, then vanishes: no ACK, no ARP
                      reply, no FIN, for SECONDS
  spoofflood IFACE GUEST_MAC HOST PORT N SOURCES SECONDS ECHO_PORT
                      N SYNs to PORT within SECONDS, as raw Ethernet frames
                      from SOURCES addresses inside the appliance's /24
                      (10.77.0.100 up) that never answer ARP; then a real
                      client (this namespace's own address) connects to
                      ECHO_PORT and echoes 64 bytes, retrying with a fresh
                      connection every 0.2 s: how long after the flood's
                      last frame service was back (recovery_s), and how
                      often the appliance had to ask ARP for that client
                      meanwhile (arp_for_client: its entry was pushed out)
"""

import os
import random
import select
import socket
import struct
import sys
import time

from pkt import csum, out


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


ETH_P_ALL = 0x0003


class RawPeer:
    """A TCP peer made of raw Ethernet frames on the namespace's tap, with an
    address and a MAC of its own that the host kernel does not own (so the
    kernel never answers for it with resets). It answers ARP for itself
    while `arp` is true."""

    def __init__(self, iface, guest_mac, guest_ip, index):
        self.s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self.s.bind((iface, ETH_P_ALL))
        self.s.settimeout(0.05)
        self.gmac = bytes.fromhex(guest_mac.replace(":", ""))
        self.mac = bytes([0x02, 0x00, 0x00, 0x00, 0x13, index])
        self.gip = guest_ip
        self.ip = f"10.77.0.{200 + index}"
        self.arp = True
        self.inbox = []

    def send_ip(self, pkt):
        self.s.send(self.gmac + self.mac + b"\x08\x00" + pkt)

    def poll(self, seconds):
        """Receive for up to `seconds`: answer ARP, keep TCP segments for us."""
        end = time.monotonic() + seconds
        while True:
            try:
                f = self.s.recv(65536)
            except socket.timeout:
                f = None
            if f and f[6:12] == self.gmac:
                if f[12:14] == b"\x08\x06" and f[38:42] == socket.inet_aton(self.ip) and f[20:22] == b"\x00\x01":
                    if self.arp:
                        self.s.send(self.gmac + self.mac + b"\x08\x06" + struct.pack("!HHBBH", 1, 0x0800, 6, 4, 2)
                                    + self.mac + socket.inet_aton(self.ip) + f[22:28] + f[28:32])
                elif f[12:14] == b"\x08\x00" and f[23] == 17 and f[30:34] == socket.inet_aton(self.ip):
                    ihl = (f[14] & 15) * 4
                    sport, dport = struct.unpack("!HH", f[14 + ihl:18 + ihl])
                    self.inbox.append(dict(udp=True, sport=sport, dport=dport, data=f[22 + ihl:]))
                elif f[12:14] == b"\x08\x00" and f[23] == 6 and f[30:34] == socket.inet_aton(self.ip):
                    ihl = (f[14] & 15) * 4
                    tcp = f[14 + ihl:14 + ((f[16] << 8) | f[17])]
                    sport, dport, seq, ack, off, flags, win = struct.unpack("!HHIIBBH", tcp[:16])
                    self.inbox.append(dict(sport=sport, dport=dport, seq=seq, ack=ack, flags=flags,
                                           data=tcp[(off >> 4) * 4:]))
            if time.monotonic() >= end:
                return


class RawConn:
    def __init__(self, peer, dport, sport):
        self.p, self.dport, self.sport = peer, dport, sport
        self.iss = random.randrange(1 << 31)
        self.rcv_nxt = 0
        self.acked = 0  # highest ack the appliance sent us
        self.got = 0    # echoed bytes received in order

    def seg(self, off, data=b"", flags=0x10):
        seq = (self.iss + (0 if flags & 0x02 else 1) + off) & 0xFFFFFFFF
        tcp = struct.pack("!HHIIBBHHH", self.sport, self.dport, seq, self.rcv_nxt if flags & 0x10 else 0,
                          5 << 4, flags, 65535, 0, 0) + data
        pseudo = socket.inet_aton(self.p.ip) + socket.inet_aton(self.p.gip) + struct.pack("!BBH", 0, 6, len(tcp))
        tcp = tcp[:16] + struct.pack("!H", csum(pseudo + tcp)) + tcp[18:]
        self.p.send_ip(ip_hdr(self.p.ip, self.p.gip, 6, len(tcp), random.randrange(65536)) + tcp)

    def take(self):
        """Consume our segments from the inbox: track acks, take the echo in order."""
        keep = []
        for m in self.p.inbox:
            if m["dport"] != self.sport:
                keep.append(m)
                continue
            if m["flags"] & 0x12 == 0x12:
                self.rcv_nxt = (m["seq"] + 1) & 0xFFFFFFFF
            if m["flags"] & 0x10:
                a = (m["ack"] - self.iss - 1) & 0xFFFFFFFF
                if a < 1 << 30:
                    self.acked = max(self.acked, a)
            if m["data"] and m["seq"] == self.rcv_nxt:
                self.rcv_nxt = (self.rcv_nxt + len(m["data"])) & 0xFFFFFFFF
                self.got += len(m["data"])
            if m["flags"] & 0x04:
                raise OSError(f"port {self.sport}: the appliance reset the connection")
        self.p.inbox = keep

    def connect(self, timeout=10):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.seg(0, flags=0x02)
            self.p.poll(0.3)
            self.take()
            if self.rcv_nxt:
                self.seg(0)  # the handshake's ACK
                return
        raise OSError(f"port {self.sport}: no SYN-ACK within {timeout} s")

    def wait_acked(self, n, timeout):
        end = time.monotonic() + timeout
        while self.acked < n and time.monotonic() < end:
            self.p.poll(0.1)
            self.take()
        return self.acked >= n


def ooseq(iface, guest_mac, host, port, nconns, nsegs, size=1000):
    peer = RawPeer(iface, guest_mac, host, 1)
    conns = [RawConn(peer, port, 31000 + i) for i in range(nconns)]
    for c in conns:
        c.connect()
    # Everything but the first segment, last first, each twice: all of it
    # waits in the out-of-order queue (holding receive buffers).
    for c in conns:
        for k in range(nsegs, 0, -1):
            for _ in range(2):
                c.seg(k * size, bytes([k & 0xFF]) * size)
        peer.poll(0.02)
    peer.poll(0.5)
    for c in conns:
        c.take()
    held_acks = [c.acked for c in conns]
    # The hole filled: the appliance must acknowledge every byte. What its
    # bounded out-of-order queue discarded (more than 64 buffers waiting)
    # is sent again from the acknowledged point, as a sender's
    # retransmission timer would.
    for c in conns:
        c.seg(0, b"\x00" * size)
    total = (nsegs + 1) * size
    ok = [c.wait_acked(total, 3) for c in conns]
    resent = 0
    end = time.monotonic() + 15
    for i, c in enumerate(conns):
        while not ok[i] and time.monotonic() < end:
            k = c.acked // size
            c.seg(k * size, bytes([k & 0xFF]) * size)
            resent += 1
            ok[i] = c.wait_acked(total, 0.3)
    for c in conns:
        c.seg(c.acked, flags=0x04)  # reset: gone
    out(test="ooseq", conns=nconns, segs=nsegs, bytes_per_conn=total, acked_before_fill=held_acks,
        acked=[c.acked for c in conns], resent=resent, ok=all(ok) and all(a == 0 for a in held_acks))
    return 0 if all(ok) and all(a == 0 for a in held_acks) else 1


def arpqueue(iface, guest_mac, host, n, never=False):
    peer = RawPeer(iface, guest_mac, host, 4 if never else 3)
    peer.arp = False
    for i in range(n):
        payload = f"arpqueue {i}".encode()
        udp = struct.pack("!HHHH", 33000 + i, 7, 8 + len(payload), 0) + payload
        peer.send_ip(ip_hdr(peer.ip, host, 17, len(udp), 0x5000 + i) + udp)
    if never:
        # Never answer: lwIP gives the pending entry up after ARP_MAXPENDING
        # (5) one-second ticks and frees the n echoes queued on it.
        peer.poll(8)
        got = {m["dport"] for m in peer.inbox if m.get("udp")}
        out(test="arpqueue-never", sent=n, echoed=len(got), ok=not got)
        return 0 if not got else 1
    peer.poll(0.3)  # the appliance asks for our MAC; nobody answers yet
    peer.arp = True
    end = time.monotonic() + 4  # lwIP repeats a pending request every second
    got = set()
    while len(got) < n and time.monotonic() < end:
        peer.poll(0.2)
        got |= {m["dport"] for m in peer.inbox if m.get("udp")}
    out(test="arpqueue", sent=n, echoed=len(got), ok=len(got) == n)
    return 0 if len(got) == n else 1


def halfopen(iface, guest_mac, host, port, nbytes, seconds):
    peer = RawPeer(iface, guest_mac, host, 2)
    c = RawConn(peer, port, 32000)
    c.connect()
    size, sent = 1000, 0
    while sent < nbytes:
        n = min(size, nbytes - sent)
        c.seg(sent, os.urandom(n))
        sent += n
        if sent % 16000 == 0:
            peer.poll(0.01)
            c.take()
            c.seg(sent)  # ack the echo so far
    end = time.monotonic() + 15
    while (c.got < nbytes or c.acked < nbytes) and time.monotonic() < end:
        peer.poll(0.1)
        c.take()
        c.seg(sent)
    ok = c.got == nbytes and c.acked == nbytes
    out(test="halfopen", echoed=c.got, acked=c.acked, ok=ok, silent_s=seconds)
    # Vanish: no ACK, no ARP reply, nothing, while the appliance retransmits.
    peer.arp = False
    sys.stdout.flush()
    time.sleep(seconds)
    return 0 if ok else 1


def spoofflood(iface, guest_mac, host, port, n, nsrc, seconds, echo_port):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((iface, 0))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 22)
    gmac = bytes.fromhex(guest_mac.replace(":", ""))
    # ARP requests the appliance sends for the real client (this host):
    # any means the flood pushed the client's resolved entry out.
    me = socket.inet_aton(src_ip_for(host))
    arps = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0806))
    arps.bind((iface, 0x0806))
    arps.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    arps.setblocking(False)
    # Built before the clock starts: Python must send 10,000 in 0.1 s.
    frames = []
    for i in range(n):
        k = i % nsrc
        src, smac = f"10.77.0.{100 + k}", bytes([0x02, 0x00, 0x00, 0x00, 0x77, k])
        frames.append(gmac + smac + b"\x08\x00" + tcp_syn(src, host, 1024 + i % 60000, port,
                                                           random.randrange(1 << 32)))
    t0 = time.monotonic()
    sent = 0
    for i, f in enumerate(frames):
        # Paced to the requested span, never faster (the host tap's queue
        # would drop what the guest never sees).
        ahead = t0 + seconds * i / n - time.monotonic()
        if ahead > 0.001:
            time.sleep(ahead)
        try:
            s.send(f)
            sent += 1
        except OSError:
            pass
    t_end = time.monotonic()
    # The legitimate client: each attempt a new connection (a new SYN), so
    # a lost first SYN costs 0.2 s here, not Linux's 1 s SYN retransmit.
    attempts, errors, recovered = 0, [], None
    while time.monotonic() - t_end < 30:
        attempts += 1
        try:
            with socket.create_connection((host, echo_port), timeout=0.2) as c:
                c.settimeout(1.0)
                c.sendall(b"x" * 64)
                got = b""
                while len(got) < 64:
                    b = c.recv(64 - len(got))
                    if not b:
                        raise OSError("closed")
                    got += b
                recovered = time.monotonic() - t_end
                break
        except OSError as e:
            if len(errors) < 5:
                errors.append(f"{time.monotonic() - t_end:.2f}s: {e}")
    asked = 0
    while True:
        try:
            f = arps.recv(2048)
        except BlockingIOError:
            break
        if f[6:12] == gmac and f[20:22] == b"\x00\x01" and f[38:42] == me:
            asked += 1
    out(test="spoofflood", port=port, syns=sent, sources=nsrc, flood_s=round(t_end - t0, 3),
        recovery_s=None if recovered is None else round(recovered, 3), attempts=attempts, errors=errors,
        arp_for_client=asked)
    return 0 if recovered is not None else 1


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
    if cmd == "ooseq":
        return ooseq(argv[2], argv[3], argv[4], int(argv[5]), int(argv[6]), int(argv[7]),
                     int(argv[8]) if len(argv) > 8 else 1000)
    if cmd == "arpqueue":
        return arpqueue(argv[2], argv[3], argv[4], int(argv[5]), argv[6:] == ["never"])
    if cmd == "halfopen":
        return halfopen(argv[2], argv[3], argv[4], int(argv[5]), int(argv[6]), float(argv[7]))
    if cmd == "spoofflood":
        return spoofflood(argv[2], argv[3], argv[4], int(argv[5]), int(argv[6]), int(argv[7]), float(argv[8]),
                          int(argv[9]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
