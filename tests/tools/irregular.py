#!/usr/bin/env python3
"""irregular.py HOST PORT SECONDS MEAN_MS SEED: request/response at a low,
irregular rate against the appliance's echo service (TCP and UDP port
PORT), for the no-lost-wake-up test of the halt idle policies.

Each transaction picks TCP or UDP and a size (1..1400 bytes) at random,
sends, and waits up to 2 s for the whole echo; the gaps between
transactions are exponential with mean MEAN_MS (capped at 10x), so the
guest is caught at every point of its halt/poll cycle. A UDP request with
no answer in 2 s counts as lost (a halted guest that missed its interrupt
would still answer on its timer, within VNET_IDLE_HALT_MAX_US: a loss here
is a real loss, a late answer shows in max_us). Prints one JSON line."""

import json
import random
import socket
import sys
import time

REPLY_TIMEOUT = 2.0


def main(argv):
    host, port, seconds, mean_ms, seed = argv[1], int(argv[2]), float(argv[3]), float(argv[4]), int(argv[5])
    rnd = random.Random(seed)
    tcp = socket.create_connection((host, port), timeout=10)
    tcp.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.connect((host, port))
    sent = answered = lost = wrong = 0
    counts = {"tcp": 0, "udp": 0}
    rtts = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        gap = min(rnd.expovariate(1000.0 / mean_ms), 10 * mean_ms / 1000.0)
        time.sleep(gap)
        proto = "tcp" if rnd.random() < 0.5 else "udp"
        msg = rnd.randbytes(rnd.randint(1, 1400))
        sent += 1
        counts[proto] += 1
        t0 = time.monotonic()
        try:
            if proto == "tcp":
                tcp.settimeout(REPLY_TIMEOUT)
                tcp.sendall(msg)
                got = b""
                while len(got) < len(msg):
                    b = tcp.recv(len(msg) - len(got))
                    if not b:
                        raise OSError("connection closed")
                    got += b
            else:
                udp.settimeout(REPLY_TIMEOUT)
                udp.send(msg)
                got = udp.recv(2048)
        except (socket.timeout, OSError):
            lost += 1
            if proto == "tcp":
                break  # the stream is out of step now
            continue
        rtts.append(time.monotonic() - t0)
        if got == msg:
            answered += 1
        else:
            wrong += 1
    tcp.close()
    rtts.sort()

    def pct(p):
        return round(rtts[min(len(rtts) - 1, int(len(rtts) * p))] * 1e6) if rtts else 0

    print(json.dumps(dict(test="irregular", sent=sent, answered=answered, lost=lost, wrong=wrong,
                          tcp=counts["tcp"], udp=counts["udp"], p50_us=pct(0.5), p99_us=pct(0.99),
                          max_us=round(rtts[-1] * 1e6) if rtts else 0)), flush=True)
    return 0 if sent and answered == sent else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
