#!/usr/bin/env python3
"""tests/tools/rsscost.py: what the receive path's RSS check costs under
app=pkt rxonly with mq=2 smp=2 on a multi_queue tap (docs/multiqueue.md,
"The RSS check on the receive path").

    python3 tests/tools/rsscost.py [--reps N] [--hashes N] [--rate PPS]
                                   [--seconds S] [--accel tcg] [KERNEL.elf]

Each repetition boots the appliance (default build/vnetlab.elf) in its
own namespace with a multi_queue tap, QEMU `--queues 2 -smp 2`, and
`app=pkt pkt.mode=rxonly mq=2 smp=2 pkt.rss_cost=N`: before its run the
guest times N hashes of the check by table look-up and N bit by bit (the
check as it was) on the same inputs, in the same boot, and prints
PKT_RSS_COST (ns per hash each); then host/pktgen/pacegen offers RATE
frames/s of one UDP flow for SECONDS, which RSS puts on one queue, whose
copy checks every frame (rss_misses must stay 0, every frame must arrive).
Prints one JSON line per run and then the medians and their ratio.

The rate is low on purpose, and at it the guest idles between frames
whatever the check costs: the in-guest timing shows the cost, the
end-to-end frames/s cannot. (Above a ring's worth the run used to stall after 256
or 512 frames: QEMU 7.2's software RSS stranded a frame steered to a full
queue on the queue it arrived on; the driver's peer kick,
drivers/virtio/vnet_rss.c, ends that, docs/multiqueue.md "Steered frames
and full rings".)

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


def one_run(kernel, accel, rate, seconds, hashes):
    """The guest's total RESULT and its per-queue ones for one boot."""
    ns_up()
    append = (f"app=pkt backend=tap pkt.mode=rxonly pkt.idle=2 pkt.seconds={seconds + 6} "
              f"mq=2 smp=2 pkt.rss_cost={hashes}")
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
    cost = [json.loads(l[13:]) for l in lines if l.startswith("PKT_RSS_COST {")]
    if len(total) != 1 or len(cost) != 1:
        raise RuntimeError("no total RESULT or PKT_RSS_COST line:\n" + "\n".join(lines[-20:]))
    return total[0], [r for r in res if "queue" in r], gen, cost[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kernel", nargs="?", default=os.path.join(TOP, "build", "vnetlab.elf"))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--hashes", type=int, default=200000)
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--accel", default="tcg")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("rsscost: needs root (a network namespace)")
    if not os.path.isfile(a.kernel):
        sys.exit(f"rsscost: no kernel {a.kernel}")
    lut, bit = [], []
    for rep in range(a.reps):
        total, per, gen, cost = one_run(a.kernel, a.accel, a.rate, a.seconds, a.hashes)
        misses = sum(r.get("rss_misses", 0) for r in per)
        print(json.dumps({"rep": rep + 1, "lut_ns": cost["lut_ns"], "bitwise_ns": cost["bitwise_ns"],
                          "frames": total["frames"], "per_queue_frames": [r["frames"] for r in per],
                          "rss_misses": misses, "offered": gen.get("offered")}), flush=True)
        if misses or total["frames"] != gen.get("offered"):
            sys.exit(f"rsscost: {total['frames']} of {gen.get('offered')} frames, {misses} on a queue RSS "
                     "did not name")
        lut.append(cost["lut_ns"])
        bit.append(cost["bitwise_ns"])
    ml, mb = statistics.median(lut), statistics.median(bit)
    print(json.dumps({"n": len(lut), "lut_ns_median": ml, "lut_ns_min_max": [min(lut), max(lut)],
                      "bitwise_ns_median": mb, "bitwise_ns_min_max": [min(bit), max(bit)],
                      "bitwise_over_lut": round(mb / ml, 2) if ml else None}))


if __name__ == "__main__":
    main()
