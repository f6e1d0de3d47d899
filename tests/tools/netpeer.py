#!/usr/bin/env python3
"""tests/tools/netpeer.py: host-side peers for the network tests.

Runs inside the test's network namespace (ip netns exec NS python3 ...) or
on loopback. Every socket operation has a timeout; each subcommand prints
one JSON line with what it saw and exits non-zero on a mismatch.

  tcp-integrity HOST PORT BYTES [WRITE [CONNS]]
                                  push random bytes through an echo service in
                                  WRITE-byte send()s (65536) on CONNS parallel
                                  connections (1), compare SHA-256 of what comes back
  stream-sink PORT MSG CONNS      accept CONNS connections of the appliance's stream
                                  client (iperf 2 header, then MSG-byte records of
                                  iperf's pattern), verify every byte, report SHA-256
  udp-sizes HOST PORT MIN MAX     echo every datagram size MIN..MAX
  echo-listen PORT                accept one TCP connection on 127.0.0.1,
                                  echo until EOF, report the SHA-256 seen
  stop HOST                       ask a serving app to stop (UDP ctl port)
  ctl HOST COMMAND                send a control request (stop, pools, state),
                                  wait for its "ok"
  inject IFACE GUEST_MAC GUEST_IP HOST_IP   send malformed frames
"""

import hashlib
import os
import select
import socket
import struct
import sys
import threading
import time

from pkt import csum, out

CTL_PORT = 9999
# A control request is "COMMAND TOKEN" (apps/lib/ctl.c): the harness that booted
# the appliance with ctl.token= exports the same token here (tests/lib.py).
CTL_TOKEN = os.environ.get("VNETLAB_CTL_TOKEN", "")


def ctl_request(cmd):
    return f"{cmd} {CTL_TOKEN}".encode()


# A connection that moves nothing back for STALL_ASK seconds asks the
# appliance once for its state (ctl "state": rings, TCP connections, pools,
# on its console), so a stall that ends in a timeout says why.
STALL_ASK, STALL_FAIL = (int(x) for x in os.environ.get("VNETLAB_NETPEER_STALL", "15,60").split(","))


def ask_state(host):
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
            u.sendto(ctl_request("state"), (host, CTL_PORT))
    except OSError:
        pass


def tcp_integrity_one(host, port, nbytes, write):
    s = socket.create_connection((host, port), timeout=10)
    s.settimeout(STALL_FAIL)
    sent_hash, recv_hash = hashlib.sha256(), hashlib.sha256()
    got = [0]
    err = []

    def reader():
        asked, last = False, time.monotonic()
        try:
            while got[0] < nbytes:
                # (select, not a socket timeout: the sender shares the socket)
                if not select.select([s], [], [], STALL_ASK)[0]:
                    if time.monotonic() - last >= STALL_FAIL:
                        raise socket.timeout("timed out")
                    if not asked:
                        asked = True
                        ask_state(host)
                    continue
                b = s.recv(1 << 16)
                if not b:
                    err.append("connection closed early")
                    return
                recv_hash.update(b)
                got[0] += len(b)
                last = time.monotonic()
        except OSError as e:
            err.append(f"recv: {e} after {got[0]} of {nbytes} bytes back"
                       + (" (appliance state asked: its console has RING/TCP/POOLS lines)" if asked else ""))

    th = threading.Thread(target=reader, daemon=True)
    th.start()
    left = nbytes
    block = os.urandom(1 << 20)
    pos = 0
    try:
        while left > 0:
            n = min(left, write)
            if pos + n > len(block):
                block, pos = os.urandom(1 << 20), 0
            b = block[pos:pos + n]
            pos += n
            s.sendall(b)
            sent_hash.update(b)
            left -= n
    except OSError as e:
        err.append(f"send: {e}")
    th.join(120)
    s.close()
    return dict(received=got[0], sent_sha256=sent_hash.hexdigest(), recv_sha256=recv_hash.hexdigest(),
                errors=err, ok=not err and got[0] == nbytes and sent_hash.digest() == recv_hash.digest())


def tcp_integrity(host, port, nbytes, write=1 << 16, conns=1):
    res = [None] * conns

    def one(i):
        try:
            res[i] = tcp_integrity_one(host, port, nbytes, write)
        except OSError as e:
            res[i] = dict(ok=False, errors=[f"connect: {e}"], received=0, sent_sha256="", recv_sha256="")

    t0 = time.monotonic()
    ths = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(conns)]
    for th in ths:
        th.start()
    for th in ths:
        th.join(300)
    dt = time.monotonic() - t0
    res = [r or dict(ok=False, errors=["timeout"], received=0, sent_sha256="", recv_sha256="") for r in res]
    ok = all(r["ok"] for r in res)
    out(test="tcp-integrity", ok=ok, bytes=nbytes, write=write, conns=conns,
        received=sum(r["received"] for r in res), seconds=round(dt, 3),
        mbps=round(nbytes * conns * 8 / dt / 1e6, 1), sent_sha256=res[0]["sent_sha256"],
        recv_sha256=res[0]["recv_sha256"], errors=[e for r in res for e in r["errors"]][:5])
    return 0 if ok else 1


def stream_sink(port, msg, conns):
    """The appliance's stream client (apps/stream_client.c) sends an iperf 2
    test header whose first word gives its length, then records of msg
    bytes, byte r of each being '0' + r % 10."""
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("0.0.0.0", port))
    ls.listen(conns)
    ls.settimeout(60)
    print("listening", flush=True)
    record = bytes(48 + r % 10 for r in range(msg))
    rep = record * ((1 << 17) // msg + 2)
    res = []

    def serve(c):
        c.settimeout(60)
        h, n, bad, first_bad, err = hashlib.sha256(), 0, 0, None, None
        hdr = b""
        try:
            while len(hdr) < 4:
                b = c.recv(4 - len(hdr))
                if not b:
                    raise OSError("closed before the header")
                hdr += b
            flags = struct.unpack("!I", hdr)[0]
            hlen = (flags & 0x1FE) >> 1 if flags & 0x10000 else 24
            left = hlen - 4
            while left:
                b = c.recv(left)
                if not b:
                    raise OSError("closed inside the header")
                left -= len(b)
            while True:
                b = c.recv(1 << 16)
                if not b:
                    break
                h.update(b)
                off = n % msg
                want = rep[off:off + len(b)]
                if b != want:
                    for i in range(len(b)):
                        if b[i] != want[i]:
                            bad += 1
                            if first_bad is None:
                                first_bad = n + i
                n += len(b)
        except OSError as e:
            err = str(e)
        c.close()
        res.append(dict(bytes=n, bad=bad, first_bad=first_bad, sha256=h.hexdigest(), error=err))

    ths = []
    try:
        for _ in range(conns):
            c, _ = ls.accept()
            th = threading.Thread(target=serve, args=(c,), daemon=True)
            th.start()
            ths.append(th)
    except OSError as e:
        res.append(dict(bytes=0, bad=0, first_bad=None, sha256="", error=f"accept: {e}"))
    for th in ths:
        th.join(300)
    ok = len(res) == conns and all(r["bad"] == 0 and not r["error"] and r["bytes"] > 0 for r in res)
    out(test="stream-sink", ok=ok, msg=msg, conns=conns, bytes=sum(r["bytes"] for r in res),
        bad=sum(r["bad"] for r in res), per_conn=res)
    return 0 if ok else 1


def udp_sizes(host, port, lo, hi):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(1.0)
    bad, retries = [], 0
    for n in range(lo, hi + 1):
        payload = os.urandom(n)
        for attempt in range(3):
            s.sendto(payload, (host, port))
            try:
                data, _ = s.recvfrom(65536)
            except socket.timeout:
                retries += 1
                continue
            if data != payload:
                bad.append(n)
            break
        else:
            bad.append(n)
    out(test="udp-sizes", ok=not bad, sizes=hi - lo + 1, bad=bad[:20], nbad=len(bad), retries=retries)
    return 0 if not bad else 1


def echo_listen(port):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(1)
    ls.settimeout(60)
    print("listening", flush=True)
    c, _ = ls.accept()
    c.settimeout(60)
    h, n = hashlib.sha256(), 0
    while True:
        b = c.recv(1 << 16)
        if not b:
            break
        h.update(b)
        n += len(b)
        c.sendall(b)
    c.close()
    out(test="echo-listen", bytes=n, sha256=h.hexdigest())
    return 0


def ctl(host, cmd):
    """A control request, retried: a request without the right token gets
    no answer at all, so "no answer" is also what a wrong token looks like."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(1.0)
    for _ in range(5):
        s.sendto(ctl_request(cmd), (host, CTL_PORT))
        try:
            data, _ = s.recvfrom(64)
            if data.startswith(b"ok"):
                out(test=cmd, ok=True)
                return 0
        except socket.timeout:
            pass
    out(test=cmd, ok=False, token_set=bool(CTL_TOKEN))
    return 1


def ipv4(src, dst, proto, payload, ttl=64, bad_csum=False, tot_len=None, ihl=5):
    hdr = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, tot_len or 20 + len(payload), 0x1234, 0, ttl,
                      proto, 0, socket.inet_aton(src), socket.inet_aton(dst))
    c = csum(hdr)
    if bad_csum:
        c ^= 0x5555
    return hdr[:10] + struct.pack("!H", c) + hdr[12:] + payload


def inject(iface, guest_mac, guest_ip, host_ip):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((iface, 0))
    gmac = bytes.fromhex(guest_mac.replace(":", ""))
    hmac = bytes.fromhex(open(f"/sys/class/net/{iface}/address").read().strip().replace(":", ""))
    eth = gmac + hmac + b"\x08\x00"
    udp_ok = struct.pack("!HHHH", 40000, 7, 8 + 10, 0) + b"x" * 10
    tcp_hdr = struct.pack("!HHIIBBHHH", 40001, 7, 1, 0, 5 << 4, 0x02, 8192, 0, 0)
    frames = {
        "runt": eth[:10],
        "eth_only": eth,
        "oversize": eth + b"\0" * 1600,
        "ip_truncated": eth + ipv4(host_ip, guest_ip, 17, udp_ok)[:15],
        "ip_bad_csum": eth + ipv4(host_ip, guest_ip, 17, udp_ok, bad_csum=True),
        "ip_bad_len": eth + ipv4(host_ip, guest_ip, 17, udp_ok, tot_len=1400),
        "ip_bad_ihl": eth + ipv4(host_ip, guest_ip, 17, udp_ok, ihl=3),
        "udp_truncated": eth + ipv4(host_ip, guest_ip, 17, udp_ok[:5]),
        "udp_bad_csum": eth + ipv4(host_ip, guest_ip, 17, udp_ok[:6] + b"\xde\xad" + udp_ok[8:]),
        "udp_bad_len": eth + ipv4(host_ip, guest_ip, 17, struct.pack("!HHHH", 40000, 7, 900, 0) + b"y" * 10),
        "tcp_truncated": eth + ipv4(host_ip, guest_ip, 6, tcp_hdr[:9]),
        "tcp_bad_csum": eth + ipv4(host_ip, guest_ip, 6, tcp_hdr[:16] + b"\xbe\xef" + tcp_hdr[18:]),
        "tcp_bad_offset": eth + ipv4(host_ip, guest_ip, 6, tcp_hdr[:12] + b"\xf0" + tcp_hdr[13:]),
        "unknown_ethertype": gmac + hmac + b"\x88\xb5" + b"z" * 50,
        "ip_options_garbage": eth + ipv4(host_ip, guest_ip, 17, b"\xff" * 12 + udp_ok, ihl=8),
    }
    sent = {}
    for name, f in frames.items():
        count = 0
        for _ in range(20):
            try:
                s.send(f)
                count += 1
            except OSError:
                pass  # the kernel refuses some (runt/oversize) on some taps
        sent[name] = count
    # ARP flood: requests for many addresses from many fake senders.
    arp = 0
    for i in range(2000):
        smac = bytes([0x02, 0, 0, 0, i >> 8, i & 0xFF])
        sip = socket.inet_aton(f"10.77.{(i >> 8) + 1}.{i & 0xFF}")
        pkt = (b"\xff" * 6 + smac + b"\x08\x06" + struct.pack("!HHBBH", 1, 0x0800, 6, 4, 1) + smac + sip
               + b"\0" * 6 + socket.inet_aton(guest_ip))
        s.send(pkt)
        arp += 1
    out(test="inject", sent=sent, arp_flood=arp)
    return 0


def main(argv):
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd == "tcp-integrity":
        return tcp_integrity(argv[2], int(argv[3]), int(argv[4]), *[int(a) for a in argv[5:7]])
    if cmd == "stream-sink":
        return stream_sink(int(argv[2]), int(argv[3]), int(argv[4]))
    if cmd == "udp-sizes":
        return udp_sizes(argv[2], int(argv[3]), int(argv[4]), int(argv[5]))
    if cmd == "echo-listen":
        return echo_listen(int(argv[2]))
    if cmd == "stop":
        return ctl(argv[2], "stop")
    if cmd == "ctl":
        return ctl(argv[2], argv[3])
    if cmd == "inject":
        return inject(*argv[2:6])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
