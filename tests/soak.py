#!/usr/bin/env python3
"""tests/soak.py: long runs that must leave the appliance as they found it.

    python3 tests/soak.py [--seconds S] [--window W] [--warmup S] [--tolerance F] [--tests rr,stream]

`make soak` runs RR and STREAM for 30 minutes each (S=1800, W=300: six
5-minute windows); tests/cases/test_soak.py runs the same for 30 s each
(W=10). For each, the appliance serves (RR: app=rr server, stock `sockperf
ping-pong --tcp` from the host; STREAM: app=stream server, stock `iperf -c`)
in a private network namespace, one host client per window. After the
first window (the warm-up) and after the last, the control port's "pools"
command prints the appliance's POOLS line (RX buffers held, TX slots in
flight, every lwIP pool, heap in use): the two must be equal. The last
window's figure (RR: sockperf's p99 round trip; STREAM: iperf's Mbit/s)
must be within the tolerance (default 10 %) of the first measured window's.
Prints one line per window and a final `soak: ... ok|FAIL` line per test;
exit status 1 on any failure.
"""

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import NETPEER, NS_GUEST_IP, T, Fail  # noqa: E402

# What must come back to its warm-up value (everything in POOLS but the
# pools whose use is fixed: listening pcbs, timers, UDP pcbs).
POOL_KEYS = ("rx_held", "tx_inflight", "heap_used", "TCP_PCB", "TCP_SEG", "PBUF", "PBUF_POOL", "REASSDATA",
             "FRAG_PBUF")

KINDS = {
    "rr": ("app=rr rr.role=server rr.warmup=0 rr.idle=60 rr.instances=128", r"^rr server listening",
           lambda w: ["sockperf", "ping-pong", "--tcp", "-i", NS_GUEST_IP, "-p", "11111", "-m", "64",
                      "-t", str(w), "--full-rtt"]),
    "stream": ("app=stream stream.role=server stream.warmup=0 stream.idle=60 stream.instances=32",
               r"^stream server listening",
               lambda w: ["iperf", "-c", NS_GUEST_IP, "-p", "5001", "-t", str(w), "-f", "m", "-l", "16K"]),
}


def figure(kind, out):
    if kind == "rr":
        m = re.search(r"percentile 99\.000 =\s+([\d.]+)", out)
        n = re.search(r"SentMessages=(\d+);\s*ReceivedMessages=(\d+)", out)
        if not m or not n:
            raise Fail(f"sockperf printed no p99 / message counts: {out[-500:]}")
        if int(n.group(2)) < int(n.group(1)) - 1:
            raise Fail(f"sockperf: {n.group(2)} replies to {n.group(1)} requests")
        return float(m.group(1)), "p99 us"
    rates = re.findall(r"([\d.]+) Mbits/sec", out)
    if not rates:
        raise Fail(f"iperf printed no Mbits/sec figure: {out[-500:]}")
    return float(rates[-1]), "Mbit/s"


def pools(ns, g):
    """Ask the appliance for its POOLS line now; the parsed line."""
    before = len(g.lines)
    r = ns.run(NETPEER + ["ctl", NS_GUEST_IP, "pools"], timeout=20, capture_output=True, text=True)
    if r.returncode:
        raise Fail(f"no answer to 'pools' on the control port: {r.stderr[-300:]}")
    end = time.monotonic() + 10
    while time.monotonic() < end:
        for _, line in g.lines[before:]:
            if line.startswith("POOLS "):
                return json.loads(line[6:])
        time.sleep(0.05)
    raise Fail("the appliance printed no POOLS line after 'pools'")


def soak(t, kind, seconds, window, tol, warmup):
    app, listening, client = KINDS[kind]
    nwin = max(2, seconds // window)
    # The servers cap their measured interval (rr.seconds, stream.seconds:
    # 600 s by default): the soak must outlast it.
    cap = min(86400, warmup + (nwin + 1) * window + 600)
    app += f" {kind}.seconds={cap}"
    with t.netns() as ns:
        g = t.start(append=f"{app} ip={NS_GUEST_IP}/24 backend=tap", net=f"tap:{ns.tap}", ns=ns,
                    timeout=cap + 120)
        g.wait_line(listening, timeout=30)
        figs = []
        p0 = None
        for w in range(nwin + 1):  # window 0 is the warm-up
            length = warmup if w == 0 else window
            try:
                r = ns.run(client(length), timeout=length + 60, capture_output=True, text=True)
            except subprocess.TimeoutExpired:
                raise Fail(f"{kind} window {w}: the host client did not finish within {length + 60} s")
            f, unit = figure(kind, r.stdout + r.stderr)
            print(f"  {kind} window {w}{' (warm-up)' if w == 0 else ''}: {f:.1f} {unit}", flush=True)
            time.sleep(0.5)  # the connection's close is done on both sides
            if w == 0:
                p0 = pools(ns, g)
            else:
                figs.append(f)
        p1 = pools(ns, g)
        ns.run(NETPEER + ["stop", NS_GUEST_IP], timeout=20, capture_output=True)
        g.wait()
    diff = {k: (p0.get(k), p1.get(k)) for k in POOL_KEYS if p0.get(k) != p1.get(k)}
    change = (figs[-1] - figs[0]) / figs[0] if figs[0] else float("inf")
    problems = []
    if diff:
        problems.append(f"POOLS after warm-up vs at the end differ: {diff}")
    if abs(change) > tol:
        problems.append(f"last window {figs[-1]:.1f} vs first {figs[0]:.1f} {unit}: {change * 100:+.1f} % "
                        f"(tolerance {tol * 100:.0f} %)")
    if g.status != 0:
        problems.append(f"the appliance ended with status {g.status}")
    print(f"soak: {kind} {seconds} s in {nwin} windows of {window} s: first {figs[0]:.1f}, last {figs[-1]:.1f} "
          f"{unit} ({change * 100:+.1f} %), pools {'equal' if not diff else 'DIFFER'} "
          f"({', '.join(f'{k}={p1.get(k)}' for k in POOL_KEYS)}): {'FAIL' if problems else 'ok'}", flush=True)
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=1800, help="per test (default 1800)")
    ap.add_argument("--window", type=int, default=300, help="window length (default 300)")
    ap.add_argument("--tolerance", type=float, default=0.10)
    ap.add_argument("--warmup", type=int, default=0, help="warm-up window (default: one window)")
    ap.add_argument("--tests", default="rr,stream")
    a = ap.parse_args()
    failed = False
    for kind in a.tests.split(","):
        t = T(f"soak-{kind}")
        try:
            problems = soak(t, kind, a.seconds, a.window, a.tolerance, a.warmup or a.window)
        except Fail as e:
            problems = [str(e)]
        finally:
            t.close()
        for p in problems:
            print(f"  {kind}: {p}")
        failed |= bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
