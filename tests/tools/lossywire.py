#!/usr/bin/env python3
"""tests/tools/lossywire.py: a wire between QEMU and a tap that loses one
frame on purpose, plus a TCP echo peer on the host end.

    lossywire.py TAP UDP_LISTEN UDP_QEMU HOST_IP ECHO_PORT SECONDS ECHO_AFTER DROP_NTH

QEMU's NIC is `-netdev socket,udp=127.0.0.1:UDP_LISTEN,localaddr=127.0.0.1:UDP_QEMU`
(one Ethernet frame per datagram). Frames are relayed both ways between
that socket and the existing tap TAP, except the DROP_NTH guest-to-host
TCP segment that carries payload, which is dropped once. The TCP server on
HOST_IP:ECHO_PORT echoes nothing until it holds ECHO_AFTER bytes, then
everything: so when the lost segment is the guest's last one, and not the
one carrying the handshake's ACK, the host has nothing outstanding and
sends nothing, and only the guest's own retransmission can recover the
exchange (a true tail loss). Runs inside the test's network namespace
(loopback and the tap only), for at most SECONDS, and prints one JSON line
at the end: frames relayed, frames dropped, guest TCP data segments seen,
bytes echoed.
"""

import fcntl
import json
import os
import select
import signal
import socket
import struct
import sys
import threading
import time

TUNSETIFF = 0x400454CA
IFF_TAP = 0x0002
IFF_NO_PI = 0x1000


def open_tap(name):
    fd = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TAP | IFF_NO_PI))
    return fd


def tcp_payload_len(frame, src_ip):
    """Payload bytes of an IPv4 TCP segment from src_ip, else -1."""
    if len(frame) < 14 + 20 or frame[12:14] != b"\x08\x00":
        return -1
    ip = frame[14:]
    ihl = (ip[0] & 0x0F) * 4
    if ip[9] != 6 or ip[12:16] != src_ip or len(ip) < ihl + 20:
        return -1
    total = struct.unpack("!H", ip[2:4])[0]
    doff = (ip[ihl + 12] >> 4) * 4
    return total - ihl - doff


def echo_server(host, port, stats, deadline, echo_after):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((host, port))
    ls.listen(4)
    ls.settimeout(max(1.0, deadline - time.monotonic()))
    try:
        c, _ = ls.accept()
    except socket.timeout:
        return
    c.settimeout(max(1.0, deadline - time.monotonic()))
    held = b""
    try:
        while True:
            b = c.recv(65536)
            if not b:
                break
            held += b
            if len(held) >= echo_after:
                stats["echo_bytes"] += len(held)
                c.sendall(held)
                held = b""
    except OSError:
        pass
    c.close()
    stats["echo_done"] = True


def main(argv):
    tap, listen_port, qemu_port, host_ip, echo_port, seconds, echo_after, drop_nth = argv[1:9]
    deadline = time.monotonic() + float(seconds)
    guest_ip = socket.inet_aton(host_ip)[:3] + b"\x02"  # the guest is .2 on the test net
    stats = {"relayed_to_host": 0, "relayed_to_guest": 0, "dropped": 0, "guest_tcp_data": 0,
             "echo_bytes": 0}
    fd = open_tap(tap)
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind(("127.0.0.1", int(listen_port)))
    qemu = ("127.0.0.1", int(qemu_port))
    threading.Thread(target=echo_server,
                     args=(host_ip, int(echo_port), stats, deadline, int(echo_after)),
                     daemon=True).start()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    print("ready", flush=True)
    end = deadline
    while time.monotonic() < end and not stop:
        if stats.get("echo_done") and end == deadline:
            end = time.monotonic() + 0.5  # let the last frames through
        try:
            r, _, _ = select.select([fd, u], [], [], 0.2)
        except InterruptedError:
            continue
        if u in r:
            frame, _ = u.recvfrom(65536)
            n = tcp_payload_len(frame, guest_ip)
            if n > 0:
                stats["guest_tcp_data"] += 1
                if stats["guest_tcp_data"] == int(drop_nth):
                    stats["dropped"] = 1
                    continue
            os.write(fd, frame)
            stats["relayed_to_host"] += 1
        if fd in r:
            frame = os.read(fd, 65536)
            u.sendto(frame, qemu)
            stats["relayed_to_guest"] += 1
    print(json.dumps(stats), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
