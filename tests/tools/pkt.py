"""tests/tools/pkt.py: what the host tools share (imported, not run):
their one JSON output line and the Internet checksum of the packets they
craft (RFC 1071)."""
import json
import struct


def out(**kw):
    print(json.dumps(kw), flush=True)


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF
