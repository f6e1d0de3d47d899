"""app=pkt (apps/pkt.c): frames straight on the driver, each mode against a
host peer (tests/tools/pktpeer.py: raw AF_PACKET sockets, a UDP socket for
reflect) on a tap in a namespace the test creates. Every count must close
exactly: frames sent = frames received + the drops someone counted (the
tap's tx_dropped, the peer socket's own drops, the guest's counters). The
sequence-gap count catches a number the peer leaves out; bad keys are
usage errors."""

import json
import os
import subprocess
import sys

from lib import TOP, Fail, json_line, linked_kernel

PEER = [sys.executable, os.path.join(TOP, "tests", "tools", "pktpeer.py")]


def pkt_guest(t, ns, args, seconds=60, kernel=None, packed=False):
    """An app=pkt boot on the namespace's tap; returns (guest, its MAC)."""
    g = t.start(append=f"app=pkt backend=tap pkt.seconds={seconds} {args}", net=f"tap:{ns.tap}", ns=ns,
                timeout=seconds + 60, kernel=kernel, packed=packed)
    mac = g.wait_line(r"^virtio-net: mac=(\S+) ", timeout=60).group(1)
    g.wait_line(r"^pkt: mode=\S+ .* ready$", timeout=30)
    return g, mac


def peer(ns, args, timeout=120):
    r = ns.run(PEER + args, timeout=timeout, capture_output=True, text=True)
    lines = r.stdout.strip().splitlines()
    if r.returncode or not lines:
        raise Fail(f"pktpeer {' '.join(args)} failed ({r.returncode}): {r.stdout[-300:]} {r.stderr[-300:]}")
    return json.loads(lines[-1])


def result(g):
    g.wait()
    g.expect_ok()
    return json_line(g, "RESULT")


def check_eq(what, expected, seen, g=None):
    if expected != seen:
        raise Fail(f"{what}: expected {expected}, saw {seen}" + (f"\n{g.tail(12)}" if g else ""))


def test_pkt_txonly_counted_exactly(t):
    """txonly with imix and 4 flows: the peer receives every frame the guest
    sent, in order, or its socket counted the drop; imix is 7:4:1."""
    n = 1200
    with t.netns() as ns:
        rx = ns.popen(PEER + ["recv", ns.tap, "3", "90"], stdout=subprocess.PIPE, text=True)
        if rx.stdout.readline().strip() != "listening":
            raise Fail("pktpeer recv did not start")
        g, _ = pkt_guest(t, ns, f"pkt.mode=txonly pkt.size=imix pkt.flows=4 pkt.rate=2000 pkt.count={n}")
        r = result(g)
        out, _ = rx.communicate(timeout=60)
        seen = json.loads(out.strip().splitlines()[-1])
    check_eq("guest frames sent", n, r["frames"], g)
    check_eq("driver TX frames", n, r["tx_frames"], g)
    check_eq("peer frames + its socket's drops", n, seen["frames"] + seen["sock_drops"])
    check_eq("peer reorders", 0, seen["seq_reorder"])
    if seen["sock_drops"] == 0:
        check_eq("imix sizes (7 x 64, 4 x 570, 1 x 1518 per 12)", {"64": 700, "570": 400, "1518": 100},
                 seen["sizes"])
        check_eq("peer gaps", 0, seen["seq_gaps"])
    if r["pps"] <= 0 or r["frames_per_kick"] <= 0:
        raise Fail(f"RESULT without a rate or frames per kick: {r}")


def test_pkt_rxonly_counts_exactly_and_sees_an_injected_gap(t):
    """rxonly: every frame the peer sent is counted by the guest or by the
    tap as dropped; the one sequence number the peer skipped is one gap;
    frames that are not UDP/IPv4 (two ARP requests first) are rx_other,
    not test frames, and start no clock."""
    n = 3000
    with t.netns() as ns:
        g, mac = pkt_guest(t, ns, "pkt.mode=rxonly pkt.idle=2")
        sent = peer(ns, ["send", ns.tap, mac, str(n), "3000", "1000", "2"])
        r = result(g)
    check_eq("peer sent", n, sent["sent"])
    check_eq("guest frames + tap drops", n, r["seq_frames"] + sent["tap_tx_dropped"], g)
    check_eq("every test frame received is a sequenced one", r["seq_frames"], r["frames"], g)
    check_eq("the ARP requests, counted apart", 2, r["rx_other"], g)
    check_eq("driver RX frames", r["frames"] + r["rx_other"], r["rx_frames"], g)
    if sent["tap_tx_dropped"] == 0:
        check_eq("sequence gaps (the one number skipped)", 1, r["seq_gaps"], g)
    elif r["seq_gaps"] < 1:
        raise Fail(f"the skipped number was not counted as a gap: {r}")
    check_eq("reorders", 0, r["seq_reorder"], g)


def swap_counts(g, r, res, mode):
    """The loop closes: peer sent = guest received + tap drops; guest
    received = forwarded + counted; forwarded = back at the peer + what its
    socket dropped."""
    n, back = res["sent"], res["back"]
    sock = back.get("sock_drops", back.get("udp_rcvbuf_errors", 0))
    check_eq(f"{mode}: guest frames received + tap drops", n, r["seq_frames"] + res["tap_tx_dropped"], g)
    check_eq(f"{mode}: received = forwarded + rx_other + fwd_unsent", r["rx_frames"],
             r["frames"] + r["rx_other"] + r["fwd_unsent"], g)
    check_eq(f"{mode}: driver TX frames = forwarded", r["frames"], r["tx_frames"], g)
    check_eq(f"{mode}: back at the peer + its drops", r["frames"], back["frames"] + sock, g)
    if res["tap_tx_dropped"] == 0 and sock == 0:
        check_eq(f"{mode}: no gap anywhere", (0, 0), (r["seq_gaps"], back["seq_gaps"]), g)
    if r["frames"] == 0:
        raise Fail(f"{mode}: nothing forwarded: {r}\n{g.tail(12)}")


def run_swap(t, mode, kernel=None, packed=False, n=2000):
    with t.netns() as ns:
        g, mac = pkt_guest(t, ns, f"pkt.mode={mode} pkt.idle=2", kernel=kernel, packed=packed)
        res = peer(ns, ["swap", ns.tap, mac, str(n), "2000", mode])
        r = result(g)
    swap_counts(g, r, res, mode)
    return r


def test_pkt_macswap_loop_closes(t):
    run_swap(t, "macswap")


def test_pkt_reflect_reaches_a_host_socket(t):
    """reflect: the frames come back to a plain UDP socket bound to the
    address and port they were sent from (checksums still valid)."""
    run_swap(t, "reflect")


def test_pkt_macswap_under_other_policies(t):
    """The zero-copy forward under other reclaim/kick policies, copy mode,
    the halt idle policy and the packed ring (linked variants)."""
    for name in ("lazy-timer-ei1-eager-inline-zc1", "v1-deferred-ei1-batched-inline-zc0",
                 "base-every-ei0-eager-inline-zc1-idle_halt", "lazy-deferred-ei1-eager-inline-zc1-packed"):
        r = run_swap(t, "macswap", kernel=linked_kernel(name), packed=name.endswith("-packed"), n=1000)
        if "-idle_halt" in name and r["irqs_rx"] == 0:
            raise Fail(f"{name}: an interrupt-driven run took no RX interrupt: {r}")


def test_pkt_bad_keys(t):
    for args, msg in (
        ("pkt.size=63", r"bad value '63' for key 'pkt.size' \(expected 64\.\.1518 or imix\)"),
        ("pkt.size=1519", r"bad value '1519' for key 'pkt.size'"),
        ("pkt.size=big", r"bad value 'big' for key 'pkt.size'"),
        ("pkt.mode=io", r"bad value 'io' for key 'pkt.mode' \(expected txonly\|rxonly\|macswap\|reflect\|rr\)"),
        ("pkt.burst=0", r"bad value '0' for key 'pkt.burst'"),
        ("pkt.mode=rxonly pkt.rate=1000", r"key 'pkt.rate' applies to pkt.mode=txonly only"),
        ("pkt.mode=rr pkt.rate=1000", r"key 'pkt.rate' applies to pkt.mode=txonly only"),
        ("pkt.mode=macswap pkt.count=5", r"key 'pkt.count' applies to pkt.mode=txonly\|rr only"),
        ("pkt.idle=1", r"key 'pkt.idle' applies to the receive modes only"),
        ("pkt.mode=rr pkt.idle=1", r"key 'pkt.idle' applies to the receive modes only"),
        ("pkt.warmup=1", r"key 'pkt.warmup' applies to pkt.mode=rr only"),
        ("pkt.dmac=01:02:03", r"bad value '01:02:03' for key 'pkt.dmac'"),
        ("pkt.dst=10.0.0.300", r"bad value '10.0.0.300' for key 'pkt.dst' \(not an IPv4 address\)"),
        ("pkt.bogus=1", r"unknown key 'pkt.bogus'"),
    ):
        g = t.boot(append=f"app=pkt {args}", timeout=30)
        g.expect_usage_error(msg)


def test_pkt_rr_over_an_xdp_reflector(t):
    """pkt.mode=rr on tap with host/xdp/macswap.c on the tap (XDP_TX): every
    one of N frames comes back (transactions N, none lost or late), each
    round trip timed (HIST count N, p50 <= p99 <= max, p50 under 5 ms even
    under TCG); the driver kicked once per frame (kick=every). Without the
    reflector every frame is counted lost, none timed."""
    sys.path.insert(0, os.path.join(TOP, "host", "bench"))
    import procs
    import xdprefl

    try:
        xdprefl.build()
    except procs.BenchError as e:
        raise Fail(str(e))
    n = 2000
    with t.netns() as ns:
        xdprefl.attach(ns.exec_argv, ns.tap)
        g, _ = pkt_guest(t, ns, f"pkt.mode=rr pkt.count={n} pkt.warmup=1", seconds=60)
        r = result(g)
        hist = json_line(g, "HIST")
        check_eq("pkt_rr transactions", n, r["transactions"], g)
        check_eq("pkt_rr lost/late", (0, 0), (r["lost"], r["late"]), g)
        check_eq("HIST count", n, hist["count"], g)
        check_eq("kicks per transaction (kick=every)", 1.0, r["kicks_per_txn"], g)
        if not 0 < r["lat_p50_ns"] <= r["lat_p99_ns"] <= r["lat_max_ns"] or r["lat_p50_ns"] > 5_000_000:
            raise Fail(f"pkt_rr latencies out of order or implausible: {r}")
        line = (f"    TCG, tap, XDP_TX reflector: {n} round trips, p50 {r['lat_p50_ns'] / 1000:.1f} us, "
                f"p99 {r['lat_p99_ns'] / 1000:.1f} us")
        xdprefl.detach(ns.exec_argv, ns.tap)
        g, _ = pkt_guest(t, ns, "pkt.mode=rr pkt.count=10", seconds=30)
        r = result(g)
        check_eq("pkt_rr without a reflector: transactions, lost", (0, 10), (r["transactions"], r["lost"]), g)
    print(line)


def test_pkt_guest_pair_over_a_bridge(t):
    """Two appliances, txonly into rxonly, through a Linux bridge between
    their taps (issue 25's packet-level pair, as a test): every frame the
    sender sent reaches the receiver or is a drop the bridge's taps counted,
    and a gap needs a lost frame."""
    n, peer_tap, bridge = 3000, "vnltap1", "vnlbr0"
    with t.netns() as ns:
        ip = ["ip", "-n", ns.name]
        for cmd in (ip + ["tuntap", "add", "dev", peer_tap, "mode", "tap"],
                    ns.exec_argv(["sysctl", "-qw", f"net.ipv6.conf.{peer_tap}.disable_ipv6=1"]),
                    ip + ["link", "add", bridge, "type", "bridge"],
                    ns.exec_argv(["sysctl", "-qw", f"net.ipv6.conf.{bridge}.disable_ipv6=1"]),
                    ip + ["link", "set", ns.tap, "master", bridge],
                    ip + ["link", "set", peer_tap, "master", bridge],
                    ip + ["link", "set", peer_tap, "up"],
                    ip + ["link", "set", bridge, "up"]):
            ns._run(cmd)
        rx_mac = "52:54:00:12:34:57"
        rx = t.start(append="app=pkt backend=tap pkt.mode=rxonly pkt.idle=3 pkt.seconds=90", net=f"tap:{peer_tap}",
                     ns=ns, timeout=150, nic_opts=f"mac={rx_mac}")
        rx.wait_line(r"^pkt: mode=rxonly .* ready$", timeout=60)

        def drops():
            out = {}
            for dev in (ns.tap, peer_tap):
                for stat in ("rx_dropped", "tx_dropped"):
                    r = ns.run(["cat", f"/sys/class/net/{dev}/statistics/{stat}"], timeout=10,
                               capture_output=True, text=True)
                    out[f"{dev}_{stat}"] = int(r.stdout)
            return out

        before = drops()
        tx = t.start(append=f"app=pkt backend=tap pkt.mode=txonly pkt.dmac={rx_mac} pkt.rate=3000 pkt.count={n}",
                     net=f"tap:{ns.tap}", ns=ns, timeout=90)
        rtx = result(tx)
        rrx = result(rx)
        after = drops()
    lost = sum(after[k] - before[k] for k in after)
    check_eq("sender frames", n, rtx["frames"], tx)
    check_eq("receiver frames + drops the taps counted", n, rrx["seq_frames"] + lost, rx)
    if rrx["seq_gaps"] > lost or (lost == 0 and rrx["seq_gaps"]):
        raise Fail(f"{rrx['seq_gaps']} sequence gaps for {lost} frames the taps dropped\n{rx.tail(12)}")
    check_eq("reorders", 0, rrx["seq_reorder"], rx)


def test_pkt_txonly_paced_halts_with_frames_arriving(t):
    """txonly at a rate under IDLE=halt sleeps between frames, also when
    frames arrive meanwhile (counted as rx_other and released: left on the
    used ring they would end every halt before it began)."""
    with t.netns() as ns:
        rx = ns.popen(PEER + ["recv", ns.tap, "3", "90"], stdout=subprocess.PIPE, text=True)
        if rx.stdout.readline().strip() != "listening":
            raise Fail("pktpeer recv did not start")
        g, mac = pkt_guest(t, ns, "pkt.mode=txonly pkt.rate=500 pkt.count=1500",
                           kernel=linked_kernel("base-every-ei1-eager-inline-zc1-idle_halt"))
        sent = peer(ns, ["send", ns.tap, mac, "5", "100"])
        r = result(g)
        out, _ = rx.communicate(timeout=60)
        seen = json.loads(out.strip().splitlines()[-1])
    check_eq("frames sent", 1500, r["frames"], g)
    check_eq("peer frames + its drops", 1500, seen["frames"] + seen["sock_drops"])
    check_eq("frames that arrived, counted", sent["sent"] - sent["tap_tx_dropped"], r["rx_other"], g)
    if r["halts"] < 500 or r["busy_pct"] > 60:
        raise Fail(f"a 500 pps sender should halt between frames: halts {r['halts']}, busy {r['busy_pct']} %\n"
                   f"{g.tail(8)}")
