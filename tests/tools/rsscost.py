#!/usr/bin/env python3
"""tests/tools/rsscost.py: what the receive path's RSS check costs, app=pkt
rxonly with mq=2 smp=2 on a multi_queue tap (docs/multiqueue.md, "The RSS
check on the receive path").

    python3 tests/tools/rsscost.py [--reps N] [--rate PPS] [--seconds S]
                                   [--accel tcg] LABEL=KERNEL.elf ...

For each repetition, each kernel in turn (alternating, so both see the same
host load): a namespace of its own with a multi_queue tap, QEMU with
`--queues 2 -smp 2`, the appliance in `app=pkt pkt.mode=rxonly mq=2 smp=2`,
and host/pktgen/pacegen offering RATE frames/s of one UDP flow for SECONDS
(RSS puts the flow on one queue; that queue's copy hashes every frame).
Give kernels built with `make PROFILE=1` (build/profile/vnetlab.elf): the
figure is the receiving queue's cycles_per_pkt (the profiled stages, the
RX path and app=pkt's per-frame work with its RSS check, over the frames:
kernel/prof.h), at a rate the guest keeps up with (the default). Without
PROFILE the figure is that queue's pps (what it took off its ring over its
own first-to-last frame interval). The guest also reports rss_misses,
which must be 0. Prints one JSON line per run and, at the end, the median
per kernel and each kernel's ratio to the first.

Above what the guest keeps up with (a full RX ring) the run stalls: in
every such run here (TCG, QEMU 7.2 with its software RSS) the guest took
256 or 512 frames and then none; cause not established (a suspect: tun
hands a frame to one QEMU queue, RSS redirects it to the full receiveq,
and the refill kicks the other one). So the default rate is low.

Root only (a network namespace); traffic stays inside it; every QEMU has
a hard timeout.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
QEMU_RUN = os.path.join(TOP, "host", "qemu-run.sh")
PACEGEN = os.path.join(TOP, "build", "host", "pacegen")
NS, TAP = "vnlrsscost", "vnlrsstap0"


def sh(*argv, check=True):
    return subprocess.run(argv, check=check, capture_output=True, text=True, timeout=30)


def ns_down():
    sh("ip", "netns", "del", NS, check=False)


def ns_up():
    ns_down()
    sh("ip", "netns", "add", NS)
    sh("ip", "-n", NS, "link", "set", "lo", "up")
    sh("ip", "-n", NS, "tuntap", "add", "dev", TAP, "mode", "tap", "multi_queue")
    sh("ip", "netns", "exec", NS, "sysctl", "-qw", f"net.ipv6.conf.{TAP}.disable_ipv6=1")
    sh("ip", "-n", NS, "link", "set", TAP, "up")


def one_run(kernel, accel, rate, seconds):
    """The guest's total RESULT and its per-queue ones for one boot."""
    ns_up()
    append = (f"app=pkt backend=tap pkt.mode=rxonly pkt.idle=2 pkt.seconds={seconds + 6} "
              "mq=2 smp=2")
    q = subprocess.Popen(["ip", "netns", "exec", NS, QEMU_RUN, "--kernel", kernel, "--accel", accel,
                          "--net", f"tap:{TAP}", "--queues", "2", "--timeout", str(seconds + 120),
                          "--append", append, "--", "-smp", "2"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines, mac = [], None
    try:
        t0 = time.monotonic()
        for line in q.stdout:
            lines.append(line.rstrip())
            m = re.match(r"^virtio-net: mac=(\S+) ", line)
            if m:
                mac = m.group(1)
            if re.match(r"^pkt: mode=rxonly .* ready$", line.strip()):
                break
            if time.monotonic() - t0 > 90:
                raise RuntimeError("no ready line in 90 s")
        else:
            raise RuntimeError("the guest ended before its ready line:\n" + "\n".join(lines[-20:]))
        g = subprocess.run(["ip", "netns", "exec", NS, PACEGEN, TAP, mac, str(rate), str(seconds)],
                           capture_output=True, text=True, timeout=seconds + 30)
        if g.returncode:
            raise RuntimeError(f"pacegen: {g.returncode} {g.stderr.strip()}")
        gen = json.loads(g.stdout.strip().splitlines()[-1])
        out, _ = q.communicate(timeout=seconds + 120)
        lines += out.splitlines()
    finally:
        if q.poll() is None:
            q.kill()
            q.wait()
        ns_down()
    res = [json.loads(l[7:]) for l in lines if l.startswith("RESULT {")]
    total = [r for r in res if "queue" not in r]
    if len(total) != 1:
        raise RuntimeError("no total RESULT:\n" + "\n".join(lines[-20:]))
    return total[0], [r for r in res if "queue" in r], gen


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kernels", nargs="+", help="LABEL=KERNEL.elf")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--rate", type=int, default=5000)
    ap.add_argument("--seconds", type=int, default=4)
    ap.add_argument("--accel", default="tcg")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("rsscost: needs root (a network namespace)")
    ks = [k.split("=", 1) for k in a.kernels]
    if any(len(k) != 2 or not os.path.isfile(k[1]) for k in ks):
        sys.exit("rsscost: give LABEL=KERNEL.elf, each an existing file")
    pps = {label: [] for label, _ in ks}
    for rep in range(a.reps):
        for label, kernel in ks:
            total, per, gen = one_run(kernel, a.accel, a.rate, a.seconds)
            misses = sum(r.get("rss_misses", 0) for r in per)
            rx = max(per, key=lambda r: r["frames"])
            fig = rx.get("cycles_per_pkt", rx["pps"])
            print(json.dumps({"rep": rep + 1, "kernel": label, "figure": fig, "pps": total["pps"],
                              "frames": total["frames"],
                              "per_queue_frames": [r["frames"] for r in per], "rss_misses": misses,
                              "offered": gen.get("offered"), "gen_pps": gen.get("achieved_pps")}), flush=True)
            if misses:
                sys.exit(f"rsscost: {label}: {misses} frames on a queue RSS did not name")
            if total["frames"] < gen.get("offered", 0) * 0.99:
                sys.exit(f"rsscost: {label}: the guest took {total['frames']} of {gen.get('offered')} frames "
                         "(a full RX ring: lower --rate)")
            pps[label].append(fig)
    base = statistics.median(pps[ks[0][0]])
    for label, v in pps.items():
        med = statistics.median(v)
        print(json.dumps({"kernel": label, "n": len(v), "median": round(med, 1), "min": round(min(v), 1),
                          "max": round(max(v), 1), "ratio": round(med / base, 3)}))


if __name__ == "__main__":
    main()
