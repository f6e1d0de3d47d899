#!/usr/bin/env python3
"""tests/tools/iperfudp.py: an iperf-2.1.8-shaped UDP client that sends
what a stock client never does, for the stream server's UDP side.

    iperfudp.py flow HOST PORT   malformed datagrams, a refused flow (a UDP
                                 dual test header), then one flow of 20
                                 datagrams with id 6 skipped and 10 after
                                 11, then FINs until the server report

Every socket operation is bounded; one JSON line: the ids sent, whether
the refused flow's FIN got an answer (it must not), and the server
report's fields (bytes, lost, out_of_order, datagrams, jitter_us).
Exit 1 when no report came."""
import socket
import struct
import sys
import time

from pkt import out

LEN = 200
HDR_EXTEND, HDR_VERSION1, HDR_SEQNO64B, HDR_LEN_BIT = 0x40000000, 0x80000000, 0x08000000, 0x00010000


def datagram(seq, flags):
    t = time.time()
    hdr = struct.pack(">iIIi", seq, int(t), int(t % 1 * 1e6), -1 if seq < 0 else 0)
    # client_hdr_v1: flags, numThreads 1, mPort, mBufLen, mWinBand, mAmount
    base = struct.pack(">IiiiiI", flags, 1, 5001, 0, 0, 0xFFFFFF9C)
    body = hdr + base + bytes(36)
    return body + bytes(b"0123456789"[i % 10] for i in range(len(body), LEN))


def report(s):
    """The first answer to FINs sent every 100 ms, or None after 2 s."""
    for i in range(20):
        s.send(datagram(-(21 + i), FLAGS))
        try:
            r = s.recv(2048)
        except socket.timeout:
            continue
        f = struct.unpack(">10I", r[16:56])
        return dict(length=len(r), flags=f[0], bytes=f[1] << 32 | f[2], lost=f[5], out_of_order=f[6],
                    datagrams=f[7], jitter_us=f[8] * 1000000 + f[9])
    return None


FLAGS = HDR_EXTEND | HDR_SEQNO64B | HDR_LEN_BIT | (76 << 1)


def flow(host, port):
    bad = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    bad.settimeout(0.5)
    bad.connect((host, port))
    for n in (1, 5, 11):
        bad.send(bytes(n))  # shorter than id + timestamp
    refused = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    refused.settimeout(0.5)
    refused.connect((host, port))
    for seq in (1, 2, -3):
        refused.send(datagram(seq, FLAGS | HDR_VERSION1 | 1))
    try:
        refused.recv(2048)
        refused_answered = True
    except (socket.timeout, ConnectionRefusedError):
        refused_answered = False
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(0.1)
    s.connect((host, port))
    ids = [i for i in range(1, 21) if i not in (6, 10, 11)]
    ids = ids[:8] + [11, 10] + ids[8:]
    for seq in ids:
        s.send(datagram(seq, FLAGS))
        time.sleep(0.005)
    r = report(s)
    out(sent=ids, length=LEN, refused_answered=refused_answered, report=r)
    return 0 if r else 1


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "flow":
        sys.exit(__doc__)
    sys.exit(flow(sys.argv[2], int(sys.argv[3])))
