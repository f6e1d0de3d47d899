#!/usr/bin/env python3
"""sockperf_pcap.py: where a sockperf round trip went, from a capture on
the tap (docs/results/loadlat.md).

    tcpdump -i vnbtap0 -n -s 80 -w cap.pcap udp port 11111   # in the namespace
    tests/tools/sockperf_pcap.py cap.pcap [HOST_IP]

Requests are the datagrams from HOST_IP (10.77.0.1), replies the others;
a reply is matched to its request by sockperf's sequence number (the first
8 payload bytes, big endian: apps/rr.h). Prints the tap-level round trip
(request handed to the tap -> reply back from it: QEMU and the guest, not
the host stack or sockperf) and the spacing of requests and of replies,
with the share of gaps under 20 us (a burst). Classic pcap, Ethernet, IPv4
only; the capture's own clock.
"""

import json
import struct
import sys

BURST_GAP = 20e-6  # seconds: closer than this counts as one burst


def frames(path):
    """(time in s, frame bytes) of a classic pcap file (us or ns stamps)."""
    with open(path, "rb") as f:
        head = f.read(24)
        if len(head) < 24:
            raise ValueError(f"{path}: not a pcap file (too short)")
        magic = struct.unpack("<I", head[:4])[0]
        if magic not in (0xA1B2C3D4, 0xA1B23C4D):
            raise ValueError(f"{path}: not a little-endian classic pcap file (magic {magic:#x})")
        scale = 1e9 if magic == 0xA1B23C4D else 1e6
        while True:
            h = f.read(16)
            if len(h) < 16:
                return
            sec, frac, incl, _orig = struct.unpack("<IIII", h)
            yield sec + frac / scale, f.read(incl)


def sockperf_events(path, host_ip="10.77.0.1"):
    """[(time, "req"|"rep", sequence)] of the UDP sockperf datagrams."""
    host = bytes(int(x) for x in host_ip.split("."))
    out = []
    for t, d in frames(path):
        if len(d) < 14 + 20 or d[12:14] != b"\x08\x00":
            continue
        ip = d[14:]
        ihl = (ip[0] & 15) * 4
        if ip[9] != 17:
            continue
        payload = ip[ihl + 8:]
        if len(payload) < 8:
            continue
        out.append((t, "req" if ip[12:16] == host else "rep", struct.unpack(">Q", payload[:8])[0]))
    return out


def percentile(vals, p):
    """Nearest-rank percentile (p in 0..100) of a list; None when empty."""
    if not vals:
        return None
    s = sorted(vals)
    return s[min(len(s), max(1, -(-len(s) * p // 100))) - 1]


def summary(events):
    """Tap round trips and gaps, in microseconds."""
    sent, rtts, times = {}, [], {"req": [], "rep": []}
    for t, kind, seq in events:
        times[kind].append(t)
        if kind == "req":
            sent[seq] = t
        elif seq in sent:
            rtts.append(t - sent.pop(seq))
    out = {"matched": len(rtts), "unanswered": len(sent)}
    for p in (50, 90, 99):
        v = percentile(rtts, p)
        out[f"tap_rtt_p{p}_us"] = None if v is None else round(v * 1e6, 1)
    for kind, ts in times.items():
        gaps = [b - a for a, b in zip(ts, ts[1:])]
        out[f"{kind}s"] = len(ts)
        out[f"{kind}_gap_p50_us"] = None if not gaps else round(percentile(gaps, 50) * 1e6, 1)
        out[f"{kind}_burst_pct"] = None if not gaps else round(100.0 * sum(g < BURST_GAP for g in gaps) / len(gaps), 1)
    return out


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__.strip().splitlines()[4].strip(), file=sys.stderr)
        return 2
    print(json.dumps(summary(sockperf_events(argv[1], *argv[2:])), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
