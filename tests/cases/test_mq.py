"""Multiqueue (drivers/virtio/vnet_mq.c, issue 26): app=pkt mq=2 smp=2 on
a multi_queue tap with QEMU's virtio-net mq=on, one queue pair per vCPU.
Each pair's burst loop sends its own frames (RESULT per queue and a
total), the host sink gets every one or its socket counted the drop; the
keys that cannot work are one usage error each."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from lib import BUILD, NS_GUEST_IP, NS_HOST_IP, NS_PREFIX, TOP, Fail, linked_kernel, netpeer, ping, wait_listening

PEER = [sys.executable, os.path.join(TOP, "tests", "tools", "pktpeer.py")]
MQ_TAP = "vnlmqtap0"
HALT = "base-every-ei1-eager-inline-zc1-idle_halt"
ADAPTIVE = "base-every-ei1-eager-inline-zc1-idle_adaptive"


def json_lines(g, prefix):
    return [json.loads(m.group(1)) for m in (re.match(r"^" + prefix + r" (\{.*\})$", l) for l in g.text()) if m]


def mq_tap(ns, address=False):
    """A multi_queue tap in the namespace (QEMU's queues=N opens it N times);
    with address, the host's address moves to it from the namespace's tap."""
    ip = ["ip", "-n", ns.name]
    cmds = [ip + ["tuntap", "add", "dev", MQ_TAP, "mode", "tap", "multi_queue"],
            ns.exec_argv(["sysctl", "-qw", f"net.ipv6.conf.{MQ_TAP}.disable_ipv6=1"])]
    if address:
        cmds += [ip + ["addr", "flush", "dev", ns.tap],
                 ip + ["addr", "add", f"{NS_HOST_IP}/{NS_PREFIX}", "dev", MQ_TAP]]
    for cmd in cmds + [ip + ["link", "set", MQ_TAP, "up"]]:
        ns._run(cmd)
    return MQ_TAP


def mq_echo(t, boot="pvh", machine="pc", conns=16, nbytes=256 << 10, kernel=None):
    """app=echo mq=2 smp=2 on a multi_queue tap: `conns` TCP connections at
    once through the echo and back, SHA-256 checked by the host, then a
    ping and a stop; returns the guest and the integrity result."""
    append = f"app=echo ip={NS_GUEST_IP}/{NS_PREFIX} backend=tap echo.seconds=240 mq=2 smp=2"
    with t.netns() as ns:
        tap = mq_tap(ns, address=True)
        kw = dict(net=f"tap:{tap}", ns=ns, timeout=300, queues=2, extra=("-smp", "2"), machine=machine,
                  kernel=kernel)
        if boot == "efi":
            d = tempfile.mkdtemp(prefix="vnetlab-mq-")
            t.cleanups.append(lambda: shutil.rmtree(d, ignore_errors=True))
            img = os.path.join(d, "vnetlab.img")
            r = subprocess.run(["bash", os.path.join(TOP, "host", "mkimage.sh"), img,
                                os.path.join(BUILD, "BOOTX64.EFI"), t.with_token(append)],
                               capture_output=True, text=True, timeout=60)
            if r.returncode:
                raise Fail(f"host/mkimage.sh failed ({r.returncode}): {r.stderr.strip()}")
            g = t.start(image=img, **kw)
        else:
            g = t.start(append=append, **kw)
        g.wait_line(r"^echo listening", timeout=90)
        integ = netpeer(ns, ["tcp-integrity", NS_GUEST_IP, "7", str(nbytes), str(1 << 14), str(conns)], timeout=360)
        if not integ["ok"] or integ["received"] != conns * nbytes:
            raise Fail(f"tcp-integrity over mq=2: {integ}\n{g.tail(20)}")
        sent, recv, _ = ping(ns, ["-c", "20", "-i", "0.01", "-W", "1"], timeout=30)
        if recv != sent:
            raise Fail(f"ping over mq=2: {recv} of {sent} echo replies")
        netpeer(ns, ["stop", NS_GUEST_IP], timeout=20)
        g.wait()
        g.expect_ok()
    if g.banner()["boot"] != boot:
        raise Fail(f"expected boot={boot}: {g.banner()}")
    res = json_lines(g, "RESULT")
    per = {r["queue"]: r for r in res if r.get("test") == "echo" and "queue" in r}
    if sorted(per) != [0, 1]:
        raise Fail(f"expected an echo RESULT from queue 0 and queue 1: {res}\n{g.tail(30)}")
    total = [r for r in res if r.get("test") == "echo" and "queue" not in r]
    if len(total) != 1 or total[0]["queues"] != 2 or total[0]["tcp_conns"] != conns or \
            total[0]["tcp_bytes"] != conns * nbytes or \
            total[0]["udp_datagrams"] != sum(per[q]["udp_datagrams"] for q in (0, 1)):
        raise Fail(f"expected one echo total (queues 2, {conns} connections, {conns * nbytes} bytes): {total}")
    served = [per[q]["tcp_conns"] for q in (0, 1)]
    if sum(served) != conns or min(served) < 1:
        raise Fail(f"connections served per queue {served}: expected {conns} in all, each queue at least one")
    if sum(per[q]["tcp_bytes"] for q in (0, 1)) != conns * nbytes:
        raise Fail(f"echoed bytes {[per[q]['tcp_bytes'] for q in (0, 1)]} do not add up to {conns * nbytes}")
    nf = {r["queue"]: r for r in json_lines(g, "NETIF")}
    posted = sum(n["arp_posted"] for n in nf.values())
    if sorted(nf) != [0, 1] or posted < 1 or \
            sum(n["arp_taken"] for n in nf.values()) != posted - sum(n["arp_post_drops"] for n in nf.values()):
        raise Fail(f"ARP frames shared between the copies do not add up: {nf}")
    print(f"    mq=2 echo ({boot}, {machine}): connections per queue {served}, "
          f"tcp-integrity {integ['mbps']} Mbit/s (TCG, tap)")
    return g, integ


def test_mq_echo_tcp_integrity_over_both_queues(t):
    """app=echo mq=2 smp=2: one lwIP per vCPU, each on its queue pair.
    Sixteen TCP connections at once carry 256 KiB each through the echo
    and back, SHA-256 checked by the host; tun's flow hash spreads them,
    and each copy's RESULT says how many it served: together all sixteen,
    each at least one (all on one queue: 2 in 65536). The ARP frames one
    queue received reached the other copy, and a ping and a "stop" work
    whichever queue they land on."""
    mq_echo(t)


def test_mq_echo_efi(t):
    """The same through the UEFI front-end (OVMF, TCG): the APs and both
    copies come up from the EFI application as from PVH."""
    mq_echo(t, boot="efi", nbytes=64 << 10)


def test_mq_echo_microvm(t):
    """The same on the PCI-less microvm: virtio-mmio's queue pairs, the
    APs from microvm's MADT, both copies on their own queue."""
    mq_echo(t, machine="microvm", nbytes=64 << 10)


def test_mq_halt_vector_per_queue(t):
    """IDLE=halt and IDLE=adaptive, app=echo mq=2 smp=2 on virtio-pci: each
    queue has an MSI-X entry aimed at the vCPU that polls its pair, so
    pair k halts on vCPU k and wakes on its own queue's interrupt and on
    vCPU k's LAPIC timer. Both pairs served connections (tcp-integrity as
    above), and each pair's IDLE line (`"queue":k`) shows halts, its own RX
    interrupts, timer wake-ups (vCPU k's timer works) and halts ended by
    something other than the timer (on vCPU 1 only pair 1's vector can do
    that: were its entry aimed at vCPU 0, every halt there would end on
    the timer), and no lost wake-up."""
    for name in (HALT, ADAPTIVE):
        g, integ = mq_echo(t, kernel=linked_kernel(name), nbytes=128 << 10)
        g.expect(r"^virtio-pci: msix table=\S+ entries=\d+ used=5 queues=4$")
        idle = {i["queue"]: i for i in json_lines(g, "IDLE")}
        if sorted(idle) != [0, 1]:
            raise Fail(f"{name}: expected an IDLE line for queue 0 and queue 1: {idle}")
        for q, i in idle.items():
            if i["irq_mode"] != "msix" or not i["halts"] or not i["irqs_rx"] or not i["timer_wakes"] or \
                    i["halts"] <= i["timer_wakes"] or i["lost_wakeups"]:
                raise Fail(f"{name} queue {q}: expected MSI-X, halts, its own RX interrupts, timer wake-ups, "
                           f"halts not ended by the timer and no lost wake-up: {i}\n{g.tail(20)}")
        if idle[1]["irqs_cfg"]:
            raise Fail(f"{name}: queue 1 counts config interrupts, which are pair 0's: {idle[1]}")
        print(f"    {name} mq=2: halts {[idle[q]['halts'] for q in (0, 1)]}, timer wakes "
              f"{[idle[q]['timer_wakes'] for q in (0, 1)]}, RX interrupts {[idle[q]['irqs_rx'] for q in (0, 1)]} "
              f"(TCG, tap, {integ['mbps']} Mbit/s)")


def test_mq_halt_on_virtio_mmio_refused(t):
    """virtio-mmio (microvm) has one interrupt line, routed to the BSP: an
    IDLE=halt build with mq=2 smp=2 there is an ERROR naming it, at once,
    not a pair that halts with no interrupt to wake it."""
    with t.netns() as ns:
        tap = mq_tap(ns)
        t0 = time.monotonic()
        g = t.boot(append="app=pkt backend=tap pkt.mode=txonly pkt.count=10 mq=2 smp=2", net=f"tap:{tap}", ns=ns,
                   extra=("-smp", "2"), timeout=60, queues=2, machine="microvm", kernel=linked_kernel(HALT))
    g.expect(r"^ERROR \{.*step 7 \(interrupts\): queue 2 is polled on APIC id 1, virtio-mmio's one "
             r"interrupt line reaches APIC id 0 only: mq>1 with IDLE=halt\|adaptive needs MSI-X")
    g.expect_not(r"^RESULT ")
    if g.status in (0, None) or time.monotonic() - t0 > 50:
        raise Fail(f"expected a prompt non-zero status, got {g.status} after {time.monotonic() - t0:.0f} s")


def test_mq_txonly_two_queues_counted_per_queue(t):
    """txonly, mq=2 smp=2: queue 0 and queue 1 each send pkt.count frames
    from their own vCPU; RESULT queue=0, queue=1 and the total (queues=2)
    add up, each pair's own TX counters say what it sent, and the host sink
    received every frame or counted it dropped."""
    n = 1500
    with t.netns() as ns:
        tap = mq_tap(ns)
        rx = ns.popen(PEER + ["recv", tap, "3", "90"], stdout=subprocess.PIPE, text=True)
        if rx.stdout.readline().strip() != "listening":
            raise Fail("pktpeer recv did not start")
        g = t.start(append=f"app=pkt backend=tap pkt.mode=txonly pkt.rate=1500 pkt.count={n} pkt.flows=8 "
                           "pkt.seconds=60 mq=2 smp=2", net=f"tap:{tap}", ns=ns, timeout=120, queues=2,
                    extra=("-smp", "2"))
        g.wait()
        g.expect_ok()
        out, _ = rx.communicate(timeout=60)
        seen = json.loads(out.strip().splitlines()[-1])
    g.expect(r"^pkt: mode=txonly .* mq=on ready$")
    res = json_lines(g, "RESULT")
    per = {r["queue"]: r for r in res if "queue" in r}
    tot = [r for r in res if r.get("queues") == 2]
    if sorted(per) != [0, 1] or len(tot) != 1:
        raise Fail(f"expected RESULT lines for queue 0, queue 1 and one total: {[sorted(r) for r in res]}\n"
                   f"{g.tail(12)}")
    for q, r in per.items():
        if r["frames"] != n or r["tx_frames"] != n:
            raise Fail(f"queue {q}: sent {r['frames']} frames, its TX counters {r['tx_frames']}; expected {n} each")
    tot = tot[0]
    if tot["frames"] != 2 * n or tot["tx_frames"] != per[0]["tx_frames"] + per[1]["tx_frames"]:
        raise Fail(f"total: {tot['frames']} frames, tx_frames {tot['tx_frames']}: not the two queues' sums")
    if seen["frames"] + seen["sock_drops"] != 2 * n:
        raise Fail(f"the sink got {seen['frames']} frames + {seen['sock_drops']} its socket dropped, "
                   f"expected {2 * n}")
    # Two queues, two sequences from 0: the sink sees one ordered stream
    # per queue, so gaps would be a lost frame, and there are none.
    if seen["seq_gaps"] and not seen["sock_drops"]:
        raise Fail(f"{seen['seq_gaps']} sequence gaps with no drop counted: {seen}")


# Microsoft's RSS verification key, the one drivers/virtio/vnet_rss.c sends.
RSS_KEY = bytes.fromhex("6d5a56da255b0ec24167253d43a38fb0d0ca2bcbae7b30b477cb2da38030f20c6a42b73bbeac01fa")


def toeplitz(key, data):
    """The Toeplitz hash (virtio 1.2 5.1.6.4.3.1), bit by bit: the host's
    own, to predict the queue the device must pick."""
    k = int.from_bytes(key, "big")
    kbits = len(key) * 8
    h = 0
    for i in range(len(data) * 8):
        if data[i // 8] >> (7 - i % 8) & 1:
            h ^= (k >> (kbits - 32 - i)) & 0xffffffff
    return h


def rss_queue(sport):
    """pacegen's flow from UDP sport (10.77.0.1:sport -> 10.77.0.2:9): its
    Toeplitz hash as the host works it out and the queue the driver's
    table names for it (entry hash & 127, queue = entry mod 2)."""
    h = toeplitz(RSS_KEY, bytes([10, 77, 0, 1, 10, 77, 0, 2]) + sport.to_bytes(2, "big") + (9).to_bytes(2, "big"))
    return h, (h & 127) % 2


def rss_flows(t, n, rate, pkt_keys, kinds):
    """rxonly, mq=2 smp=2 with RSS; for each kind in kinds, in turn, one
    UDP flow of n frames at rate from host/pktgen/pacegen. A flow's
    arrival queue is the tap queue tun's flow hash puts it on (QEMU's
    subqueue k reads tap queue k), its target the queue RSS names;
    `tests/tools/pktpeer.py tapq` finds, with one trial marker per source
    port (markers are not counted as frames), a port whose arrival queue
    is its target ("same") and one whose is not ("crossed"). Returns the
    finished guest, per kind (sport, hash, target, arrival, pacegen's
    JSON) and the per-queue RESULT objects (Fail without one per queue)."""
    pacegen = os.path.join(BUILD, "host", "pacegen")
    if not os.access(pacegen, os.X_OK):
        raise Fail(f"{pacegen} not built (make host-tools)")
    flows = {}
    with t.netns() as ns:
        tap = mq_tap(ns)
        g = t.start(append=f"app=pkt backend=tap pkt.mode=rxonly {pkt_keys} mq=2 smp=2",
                    net=f"tap:{tap}", ns=ns, timeout=120, queues=2, extra=("-smp", "2"))
        mac = g.wait_line(r"^virtio-net: mac=(\S+) ", timeout=60).group(1)
        g.wait_line(r"^pkt: mode=rxonly .* mq=on ready$", timeout=60)
        r = ns.run(PEER + ["tapq", tap, mac] + [str(p) for p in range(40000, 40032)], timeout=60,
                   capture_output=True, text=True)
        tq = json.loads(r.stdout.strip().splitlines()[-1]) if r.stdout.strip() else {"error": r.stderr[-300:]}
        if "queues" not in tq:
            raise Fail(f"pktpeer tapq: {tq}")
        for sport, arrival in tq["queues"].items():
            h, want = rss_queue(int(sport))
            kind = "same" if arrival == want else "crossed"
            flows.setdefault(kind, (int(sport), h, want, arrival))
        for kind in kinds:
            if kind not in flows:
                raise Fail(f"no {kind} flow among source ports 40000-40031: {tq}")
            r = ns.run([pacegen, "--sport", str(flows[kind][0]), tap, mac, str(rate), str(n / rate)], timeout=60,
                       capture_output=True, text=True)
            if r.returncode:
                raise Fail(f"pacegen: exit {r.returncode}: {r.stderr.strip()[-300:]}")
            flows[kind] += (json.loads(r.stdout.strip().splitlines()[-1]),)
        g.wait()
    per = {x["queue"]: x for x in json_lines(g, "RESULT") if "queue" in x}
    if sorted(per) != [0, 1]:
        raise Fail(f"expected RESULT lines for queue 0 and queue 1: {per}\n{g.tail(12)}")
    return g, {k: flows[k] for k in kinds}, per


def test_mq_rxonly_rss_check(t):
    """rxonly, mq=2 smp=2 with RSS, 40,000 frames of one UDP flow at
    20,000 frames/s (more than the guest takes at once under TCG: its RX
    ring fills and the device asks for kicks), a flow tun puts on the tap
    queue RSS does not name (a "crossed" flow, rss_flows()). Every frame
    the tap took (it drops what QEMU does not read in time, 0 to 7 % on
    this shared host: pacegen's if_tx_dropped) must land on the queue the driver's table names for its Toeplitz hash,
    which the host works out itself: that queue counts all of them, the
    other none, and neither counts an rss_miss (app=pkt checks each frame's
    queue with vnet_rss_frame_queue()). A device that steered by another
    table, or a check that hashed wrong, fails here. Before the driver
    rang the other receiveqs after an RX kick (drivers/virtio/vnet_rss.c
    vnet_rss_kick_peers(); test_mq_rxonly_rss_stall_without_peer_kick)
    this flow stopped after 256-704 frames under QEMU 7.2's software RSS;
    the target queue's rx_peer_kicks say the doorbells were rung."""
    n, rate = 40000, 20000
    g, flows, per = rss_flows(t, n, rate, "pkt.idle=3 pkt.seconds=15", ["crossed"])
    g.expect_ok()
    g.expect(r"^virtio-net: mq pairs=2 .* rss=on$")
    sport, h, want, arrival, gen = flows["crossed"]
    got = {q: (per[q]["frames"], per[q].get("rss_misses")) for q in (0, 1)}
    dropped = gen.get("if_tx_dropped", 0)
    # The tap drops what QEMU does not read in time (a loaded 2-core host:
    # bursts); a stall would leave a few rings of frames, not half of n.
    if got[want] != (n - dropped, 0) or got[1 - want] != (0, 0) or dropped > n // 2:
        raise Fail(f"flow from port {sport} hashes to {h:#010x}, entry {h & 127}, arrives on tap queue {arrival}: "
                   f"queue {want} must count all {n} frames (less the {dropped} the tap dropped, at most half) and "
                   f"neither queue an rss_miss; (frames, rss_misses) per queue: {got}; pacegen: {gen}")
    if not per[want]["rx_peer_kicks"] or not per[want]["kicks"]:
        raise Fail(f"queue {want}'s ring never ran dry (kicks {per[want]['kicks']}) or it rang no other "
                   f"receiveq (rx_peer_kicks {per[want]['rx_peer_kicks']}): not the case this test is for")
    print(f"    crossed flow (port {sport}, tap queue {arrival}, hash {h:#010x} -> queue {want}) at {rate}/s: "
          f"{got} (tap dropped {dropped}), kicks {per[want]['kicks']}, rx_peer_kicks "
          f"{per[want]['rx_peer_kicks']} (TCG, tap)")


def test_mq_rxonly_rss_stall_without_peer_kick(t):
    """The cause of the stall test_mq_rxonly_rss_check guards against,
    shown with the driver's workaround off (rss.peer_kick=0; QEMU 7.2's
    hw/net/virtio-net.c, drivers/virtio/vnet_rss.c says where): in one
    boot, first a flow whose tap queue is its RSS target ("same"): its
    frames wait on that queue's own NetQueue when the ring is full, the
    refill's kick flushes it, and all 40,000 at 20,000 frames/s arrive;
    then a flow tun puts on the other tap queue ("crossed"): its frame for
    a full ring waits on the arrival queue's NetQueue, which only a kick
    of the arrival queue flushes, and none comes once the same flow's
    pair has stopped refilling: the flow stops after a part of it (624 to
    8,816 of 40,000 frames in five runs: as long as queue 1 still kicks
    after the same flow, each kick lets a ring's worth through)."""
    n, rate = 40000, 20000
    g, flows, per = rss_flows(t, n, rate, "pkt.idle=3 pkt.seconds=15 rss.peer_kick=0", ["same", "crossed"])
    g.expect_ok()
    s_port, _, s_want, s_arr, s_gen = flows["same"]
    c_port, _, c_want, c_arr, c_gen = flows["crossed"]
    got = {q: per[q]["frames"] for q in (0, 1)}
    if any(per[q]["rss_misses"] or per[q]["rx_peer_kicks"] for q in (0, 1)):
        raise Fail(f"rss_misses or rx_peer_kicks with rss.peer_kick=0: {per}")
    s_dropped = s_gen.get("if_tx_dropped", 0)
    crossed = got[c_want] - (n - s_dropped if c_want == s_want else 0)
    if got[s_want] < n - s_dropped or s_dropped > n // 2 or not per[s_want]["kicks"]:
        raise Fail(f"same flow (port {s_port}, tap queue {s_arr} = queue {s_want}): expected all {n} frames "
                   f"(less the {s_dropped} the tap dropped, at most half) with its ring running dry "
                   f"(kicks {per[s_want]['kicks']}); frames per queue {got}")
    if crossed >= n // 2:
        raise Fail(f"crossed flow (port {c_port}, tap queue {c_arr}, queue {c_want}): {crossed} of {n} frames "
                   f"arrived: expected the stall (most frames never arrive) without the peer kick; per queue {got}")
    print(f"    rss.peer_kick=0 at {rate}/s: same flow (tap queue {s_arr} = queue {s_want}) "
          f"{got[s_want] - (crossed if c_want == s_want else 0)} of {n} arrived (tap dropped {s_dropped}), kicks "
          f"{per[s_want]['kicks']}; crossed flow (tap queue {c_arr} -> queue {c_want}) {crossed} of {n}, then "
          f"none (TCG, tap)")


def test_mq_bad_keys_are_usage_errors(t):
    """mq=2 without the vCPUs, mq out of range, and mq=2 on a NIC without
    VIRTIO_NET_F_MQ: one clear ERROR line each, never a silent single
    queue."""
    for append, extra, msg in (
            ("app=pkt pkt.mode=txonly mq=2", (), r"key 'mq': mq=2 needs smp=2 or more"),
            ("app=pkt pkt.mode=txonly mq=9 smp=2", ("-smp", "2"), r"bad value '9' for key 'mq' \(expected an integer 1..8\)"),
            # lwIP across queues: echo only, a static address, no more
            # copies than the build links (NET_INSTANCES, 2 by default).
            ("app=rr ip=10.0.0.2/24 rr.instances=1 mq=2 smp=2", ("-smp", "2"),
             r"key 'rr.instances': 1 connections cannot give each of mq=2 queues one"),
            ("app=stream ip=10.0.0.2/24 stream.instances=1 mq=2 smp=2", ("-smp", "2"),
             r"key 'stream.instances': 1 connections cannot give each of mq=2 queues one"),
            ("app=memcached mq=2 smp=2", ("-smp", "2"), r"key 'mq' applies to app=echo, app=pkt, app=rr and app=stream only"),
            ("app=echo mq=2 smp=2", ("-smp", "2"), r"key 'mq': mq=2 needs a static ip="),
            ("app=echo ip=10.0.0.2/24 mq=2", (), r"key 'mq': mq=2 needs smp=2 or more"),
            ("app=echo ip=10.0.0.2/24 mq=3 smp=3", ("-smp", "3"),
             r"key 'mq': mq=3 but this build links 2 copies of the TCP/IP side"),
    ):
        g = t.boot(append=append, extra=extra)
        g.expect(r'^ERROR \{"where":"cmdline","msg":"' + msg)
        g.expect_status(2)
    with t.netns() as ns:
        t0 = time.monotonic()
        g = t.boot(append="app=pkt backend=tap pkt.mode=txonly pkt.count=10 mq=2 smp=2", net=f"tap:{ns.tap}",
                   ns=ns, extra=("-smp", "2"), timeout=60)
    g.expect(r'^ERROR \{.*mq=2 needs VIRTIO_NET_F_MQ and CTRL_VQ')
    g.expect_not(r"^RESULT ")
    if g.status in (0, None):
        raise Fail(f"a NIC without MQ must end the run with a non-zero status, not {g.status}")
    if time.monotonic() - t0 > 50:
        raise Fail("the MQ refusal took as long as the hard timeout: a hang, not an error")


def server_copies(g, quiet, conns):
    """The rr and stream servers with mq=2: a RESULT per queue (or the
    `quiet` line of a queue that saw nothing) and one total; the
    connections tun gave each queue add up to `conns`, each queue at least
    one. Returns the per-queue RESULTs, the total and the counts."""
    res = json_lines(g, "RESULT")
    per = {r["queue"]: r for r in res if "queue" in r}
    tot = [r for r in res if r.get("queues") == 2]
    idle = [int(m.group(1)) for m in (re.match(r"^\S+: queue (\d+) " + quiet, l) for l in g.text()) if m]
    if len(tot) != 1 or sorted(list(per) + idle) != [0, 1]:
        raise Fail(f"expected a RESULT (or a '{quiet}' line) per queue and one total: {res}\n{g.tail(30)}")
    served = [per[q]["instances"] if q in per else 0 for q in (0, 1)]
    if sum(served) != conns or min(served) < 1:
        raise Fail(f"connections per queue {served}: expected {conns} in all, each queue at least one")
    return per, tot[0], served


def test_mq_rr_server_tcp_over_both_queues(t):
    """app=rr rr.role=server mq=2 smp=2: a server copy per queue pair.
    Twelve sockperf ping-pong clients at once (one TCP connection each,
    rr.instances=12); each copy's RESULT counts the connections tun gave its
    queue (together twelve, each queue at least one: all on one queue is 2
    in 4096), and copy 0's total (`"queues":2`) is the copies' sum. The run
    ends when no connection is open on either queue."""
    conns, secs = 12, 3
    with t.netns() as ns:
        tap = mq_tap(ns, address=True)
        g = t.start(append=f"app=rr rr.role=server rr.warmup=1 rr.instances={conns} ip={NS_GUEST_IP}/{NS_PREFIX} "
                           "backend=tap mq=2 smp=2", net=f"tap:{tap}", ns=ns, timeout=180, queues=2,
                    extra=("-smp", "2"))
        g.wait_line(r"^rr server listening", timeout=60)
        argv = ["sockperf", "ping-pong", "--tcp", "-i", NS_GUEST_IP, "-p", "11111", "-m", "64", "-t", str(secs + 2)]
        peers = [ns.popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for _ in range(conns)]
        outs = [p.communicate(timeout=120)[0] for p in peers]
        g.wait()
        g.expect_ok()
    sent = 0
    for o in outs:
        m = re.search(r"SentMessages=(\d+)", o)
        if not m:
            raise Fail(f"a sockperf client printed no summary: {o[-400:]}")
        sent += int(m.group(1))
    per, tot, served = server_copies(g, "saw no request", conns)
    if tot["transactions"] != sum(r["transactions"] for r in per.values()) or not 0 < tot["transactions"] <= sent:
        raise Fail(f"total {tot['transactions']} transactions: not the queues' sum "
                   f"{[r['transactions'] for r in per.values()]}, or more than the {sent} sockperf sent")
    print(f"    mq=2 tcp_rr server: connections per queue {served}, {tot['tps']:.0f} trans/s in total (TCG, tap)")


def mq_client(t, ns, tap, app):
    """A client app with mq=2 smp=2 against a host peer already listening:
    runs it to its end and returns the guest, its per-queue RESULTs and
    the one total, with RSS on and no frame on a queue RSS did not name."""
    g = t.start(append=f"{app} ip={NS_GUEST_IP}/{NS_PREFIX} backend=tap mq=2 smp=2", net=f"tap:{tap}", ns=ns,
                timeout=180, queues=2, extra=("-smp", "2"))
    g.wait()
    g.expect_ok()
    g.expect(r"^virtio-net: mq pairs=2 max=2 ctrlq=4 rss=on$")
    res = json_lines(g, "RESULT")
    per = {r["queue"]: r for r in res if "queue" in r}
    tot = [r for r in res if r.get("queues") == 2]
    if sorted(per) != [0, 1] or len(tot) != 1:
        raise Fail(f"expected a RESULT from each queue and one total: {res}\n{g.tail(30)}")
    nf = {n["queue"]: n for n in json_lines(g, "NETIF")}
    if sorted(nf) != [0, 1] or any(n["rss_misses"] for n in nf.values()):
        raise Fail(f"expected every frame on the queue RSS names: {nf}")
    return g, per, tot[0]


def test_mq_rr_client_over_both_queues(t):
    """app=rr (client) mq=2 smp=2 against a stock sockperf server, TCP and
    UDP: copy k opens its share of rr.instances=4 from local ports whose
    replies RSS puts on queue k, and sends on pair k. Both copies measure
    replies (a reply on the other queue would reach a copy without that
    connection: a RST or a drop, then this copy's no-reply ERROR; the same
    local port in both copies would make two connections one 4-tuple), and
    the total (`"queues":2`) sums them."""
    for proto in ("tcp", "udp"):
        with t.netns() as ns:
            tap = mq_tap(ns, address=True)
            # A feed file with epoll: `sockperf server -i` serves one TCP
            # connection at a time (host/bench/peers.py SockperfServer).
            feed = os.path.join(tempfile.mkdtemp(prefix="vnetlab-mq-"), "feed.txt")
            t.cleanups.append(lambda d=os.path.dirname(feed): shutil.rmtree(d, ignore_errors=True))
            with open(feed, "w") as f:
                f.write(f"{proto[0].upper()}:{NS_HOST_IP}:11111\n")
            ns.popen(["sockperf", "server", "-f", feed, "-F", "epoll"],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wait_listening(ns, proto, 11111)
            g, per, tot = mq_client(t, ns, tap, f"app=rr rr.proto={proto} rr.peer={NS_HOST_IP} rr.instances=4 "
                                                f"rr.seconds=3 rr.warmup=1")
        if [per[q]["instances"] for q in (0, 1)] != [2, 2] or tot["instances"] != 4:
            raise Fail(f"{proto}: rr.instances=4 over mq=2 is 2 per copy: {per} {tot}")
        txns = [per[q]["transactions"] for q in (0, 1)]
        if min(txns) < max(txns) / 20 or tot["transactions"] != sum(txns):
            raise Fail(f"{proto}: transactions per queue {txns}: each copy drives two connections "
                       f"alike (a stalled one: replies on the other queue), the total their sum: "
                       f"{tot}\n{g.tail(60)}")
        if any(per[q]["errors"] or per[q]["lost"] for q in (0, 1)):
            raise Fail(f"{proto}: lost or unexpected replies on a private tap: {per}")
        print(f"    mq=2 {proto}_rr client: trans/s per queue {[round(per[q]['tps']) for q in (0, 1)]}, "
              f"{tot['tps']:.0f} in total (TCG, tap)")


def test_mq_stream_server_over_both_queues(t):
    """app=stream stream.role=server mq=2 smp=2: a server copy per queue
    pair. `iperf -c -P 12` (its header announces twelve connections, which
    every copy reads); each copy's RESULT counts the connections tun gave its
    queue and checks iperf's pattern (stream.check=1), and copy 0's total is
    the copies' bytes. The run ends when all twelve have closed."""
    conns = 12
    with t.netns() as ns:
        tap = mq_tap(ns, address=True)
        g = t.start(append=f"app=stream stream.role=server stream.check=1 stream.warmup=1 "
                           f"ip={NS_GUEST_IP}/{NS_PREFIX} backend=tap mq=2 smp=2", net=f"tap:{tap}", ns=ns,
                    timeout=180, queues=2, extra=("-smp", "2"))
        g.wait_line(r"^stream server listening", timeout=60)
        r = ns.run(["iperf", "-c", NS_GUEST_IP, "-p", "5001", "-f", "m", "-l", "16K", "-t", "4", "-P", str(conns)],
                   timeout=120, capture_output=True, text=True)
        g.wait()
        g.expect_ok()
    if r.returncode:
        raise Fail(f"iperf -P {conns} failed ({r.returncode}): {(r.stdout + r.stderr)[-400:]}")
    per, tot, served = server_copies(g, "moved no data", conns)
    bad = [q for q, x in per.items() if x["test"] != "tcp_maerts" or x["check_errors"]]
    if bad:
        raise Fail(f"queues {bad}: not a clean tcp_maerts pattern check: {per}")
    if tot["bytes"] != sum(x["bytes"] for x in per.values()) or not tot["bytes"]:
        raise Fail(f"total {tot['bytes']} bytes is not the queues' sum {[x['bytes'] for x in per.values()]}")
    print(f"    mq=2 stream server: connections per queue {served}, {tot['mbps']} Mbit/s in total (TCG, tap)")


def test_mq_stream_client_over_both_queues(t):
    """app=stream (client) mq=2 smp=2 against a stock `iperf -s`, stream
    then maerts: copy k opens two of stream.instances=4 from local ports
    whose frames RSS puts on queue k; both copies move data (pattern
    checked on maerts), no frame arrives on a queue RSS did not name, and
    the total (`"queues":2`) is the copies' sum."""
    for test in ("stream", "maerts"):
        with t.netns() as ns:
            tap = mq_tap(ns, address=True)
            ns.popen(["iperf", "-s", "-B", NS_HOST_IP, "-p", "5001"], stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)
            wait_listening(ns, "tcp", 5001)
            g, per, tot = mq_client(t, ns, tap, f"app=stream stream.test={test} stream.peer={NS_HOST_IP} "
                                                f"stream.instances=4 stream.seconds=3 stream.warmup=1 "
                                                f"stream.check={int(test == 'maerts')}")
        name = f"tcp_{test}"
        if any(r["test"] != name for r in list(per.values()) + [tot]):
            raise Fail(f"{test}: expected {name} RESULTs: {per} {tot}")
        if [per[q]["instances"] for q in (0, 1)] != [2, 2]:
            raise Fail(f"{test}: stream.instances=4 over mq=2 is 2 per copy: {per}")
        moved = [per[q]["bytes"] for q in (0, 1)]
        if min(moved) < max(moved) / 20 or tot["bytes"] != sum(moved):
            raise Fail(f"{test}: bytes per queue {moved}: each copy moves data, the total their sum: {tot}")
        if any(per[q].get("check_errors") for q in (0, 1)):
            raise Fail(f"{test}: pattern check errors: {per}")
        print(f"    mq=2 tcp_{test} client: Mbit/s per queue {[per[q]['mbps'] for q in (0, 1)]}, "
              f"{tot['mbps']} in total (TCG, tap)")


def test_mq_profile_build_per_cpu(t):
    """`make PROFILE=1` with mq=2 smp=2 (txonly, one pair per vCPU): the
    stage profiler keeps a stack per CPU (kernel/prof.c), so both pairs'
    burst loops enter and leave their stages at once without corrupting
    each other (with one stack for all CPUs this boot panicked, "prof:
    prof_exit() without prof_enter()" or the depth overflow); each queue's
    RESULT is followed by a PROFILE line with its own CPU's cycles, and
    the total's PROFILE is their sum."""
    out = os.path.join(BUILD, "profile")
    r = subprocess.run(["make", "-s", "-j2", "PROFILE=1", f"O={out}", os.path.join(out, "vnetlab.elf")], cwd=TOP,
                       capture_output=True, text=True, timeout=900)
    if r.returncode:
        raise Fail(f"make PROFILE=1 failed ({r.returncode}): {(r.stdout + r.stderr)[-600:]}")
    n = 3000
    with t.netns() as ns:
        tap = mq_tap(ns)
        g = t.boot(append=f"app=pkt backend=tap pkt.mode=txonly pkt.rate=3000 pkt.count={n} pkt.seconds=60 "
                          "mq=2 smp=2", net=f"tap:{tap}", ns=ns, timeout=120, queues=2, extra=("-smp", "2"),
                   kernel=os.path.join(out, "vnetlab.elf"))
    g.expect_ok()
    g.expect_not(r"panic|prof:")
    lines = g.text()
    per, prof = {}, {}
    for i, line in enumerate(lines):
        m = re.match(r"^RESULT (\{.*\})$", line)
        if not m:
            continue
        res = json.loads(m.group(1))
        key = res.get("queue", "total")
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if not nxt.startswith("PROFILE {"):
            raise Fail(f"RESULT for {key} is not followed by its PROFILE line: {nxt!r}\n{g.tail(20)}")
        per[key], prof[key] = res, json.loads(nxt[len("PROFILE "):])
    if sorted(per, key=str) != [0, 1, "total"]:
        raise Fail(f"expected RESULT and PROFILE for queue 0, queue 1 and the total: {sorted(per, key=str)}")
    for q in (0, 1):
        if per[q]["frames"] != n or not prof[q]["cycles"] or not prof[q]["enqueue"]["cycles"]:
            raise Fail(f"queue {q}: {per[q]['frames']} frames (expected {n}), profile {prof[q]}")
    if prof["total"]["cycles"] != prof[0]["cycles"] + prof[1]["cycles"]:
        raise Fail(f"the total's profile ({prof['total']['cycles']} cycles) is not the queues' sum "
                   f"({prof[0]['cycles']} + {prof[1]['cycles']})")
    print(f"    PROFILE=1 mq=2: cycles per queue {[prof[q]['cycles'] for q in (0, 1)]}, enqueue "
          f"{[prof[q]['enqueue']['permille'] for q in (0, 1)]} permille (TCG, tap)")
