"""Liveness of a run (issue 10): a lost tail segment is retransmitted, and a
link that goes down ends the run.

TX reclaim liveness: the last segment of a TCP exchange is
lost on the wire; the appliance must retransmit it. In zero-copy builds the
segment's pbuf stays referenced until the driver reclaims its descriptor,
and lwIP will not retransmit a segment whose pbuf is referenced
(tcp_output_segment_busy); with nothing else to send, only the driver's
idle reclaim (vnet_tx.c, VNET_TX_IDLE_RECLAIM_US) releases it. Without it
the connection never recovers. The loss is made by tests/tools/lossywire.py,
a relay between QEMU's UDP socket netdev and the namespace's tap: the guest
sends 2000 bytes as two segments (the first carries the handshake's ACK),
the second is lost, and the host echoes nothing before it has all 2000, so
nothing else makes the guest transmit."""

import json
import os
import re
import signal
import subprocess
import sys

from lib import BUILD, NS_GUEST_IP, NS_HOST_IP, NS_PREFIX, TOP, Fail, make_list

WIRE = [sys.executable, os.path.join(TOP, "tests", "tools", "lossywire.py")]
# Fixed UDP ports below the kernel's ephemeral range (32768-60999 by
# default): an autobound socket in the namespace (ping's source-address
# probe, say) can never hold one when QEMU binds it. CI once saw a run whose
# QEMU ended at once with nothing relayed from the guest, on 47001/47002.
UDP_WIRE, UDP_QEMU, ECHO_PORT = 27001, 27002, 5077
NBYTES = 2000  # two segments at MSS 1460
GUEST_MAC = "52:54:00:12:34:56"  # QEMU's default NIC address
# With a concurrent stream: lwIP's first retransmission timeout after the
# handshake is ~2.7 s here (the exchange without a stream); the bound
# allows that, a slow-timer tick (500 ms) and a loaded host.
STREAM_BOUND_MS = 6000
# Ping interval: below VNET_TX_IDLE_RECLAIM_US (1 ms), so the replies keep
# the guest's TX path busy and the idle reclaim does not fire.
PING_PPS = 1250
# The default build and the policies that reclaim least on their own.
KERNELS = [("default", None),
           ("lazy-timer-ei1-eager-inline-zc1", "lazy-timer-ei1-eager-inline-zc1"),
           ("v1-deferred-ei1-batched-inline-zc0", "v1-deferred-ei1-batched-inline-zc0")]


def make_variants():
    r = subprocess.run(["make", "-s", "-j2", "variants-link"], cwd=TOP, capture_output=True,
                       text=True, timeout=600)
    if r.returncode:
        raise Fail(f"make variants-link failed:\n{(r.stdout + r.stderr)[-2000:]}")


def run_lossy(t, ns, label, variant, ping_pps=0):
    # A permanent neighbour entry: the host kernel's own ARP probes would
    # make the guest transmit (and so reclaim) after ~5 s.
    r = ns.run(["ip", "neigh", "replace", NS_GUEST_IP, "lladdr", GUEST_MAC, "dev", ns.tap,
                "nud", "permanent"], timeout=10, capture_output=True, text=True)
    if r.returncode:
        raise Fail(f"ip neigh replace failed: {r.stderr.strip()}")
    wire = ns.popen(WIRE + [ns.tap, str(UDP_WIRE), str(UDP_QEMU), NS_HOST_IP, str(ECHO_PORT), "40",
                           str(NBYTES), "2"],
                    stdout=subprocess.PIPE, text=True)
    if wire.stdout.readline().strip() != "ready":
        raise Fail("lossywire did not start")
    kernel = os.path.join(BUILD, "v", variant, "vnetlab.elf") if variant else None
    ping = None
    if ping_pps:
        # An unrelated steady stream the guest answers (ICMP echo through
        # the same wire): its TX path is never idle, so only a reclaim that
        # does not wait for idleness frees the lost segment's pbuf.
        ping = ns.popen(["ping", "-q", "-n", "-i", f"{1 / ping_pps:.3f}", "-w", "40", NS_GUEST_IP],
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    g = t.start(append=f"app=tcpcheck tcpcheck.peer={NS_HOST_IP} tcpcheck.port={ECHO_PORT} "
                f"tcpcheck.bytes={NBYTES} tcpcheck.seconds=15 ip={NS_GUEST_IP}/{NS_PREFIX} backend=tap",
                net="none", ns=ns, timeout=40, kernel=kernel,
                extra=["-netdev", f"socket,id=n1,udp=127.0.0.1:{UDP_WIRE},localaddr=127.0.0.1:{UDP_QEMU}",
                       "-device", "virtio-net-pci,netdev=n1,disable-legacy=on,romfile="]).wait()
    wire.terminate()
    pinged = ""
    if ping:
        ping.send_signal(signal.SIGINT)  # ping prints its summary on SIGINT only
        pinged = ping.communicate(timeout=10)[0]
    try:
        out, _ = wire.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        wire.kill()
        out, _ = wire.communicate()
    stats = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
    if stats.get("dropped") != 1:
        # Say how the guest ended too: nothing relayed from it means QEMU or
        # the guest ended before its first frame, and why is in its output.
        said = " / ".join((g.text()[-3:] + g.stderr[-3:])) or "no output"
        raise Fail(f"{label}: the wire should have dropped the guest's last data segment once: {stats}; "
                   f"the guest ended with status {g.status} after {len(g.text())} console lines: {said}")
    m = [l for l in g.text() if l.startswith("ERROR ")]
    if m:
        raise Fail(f"{label}: the lost segment was never retransmitted: {m[0]}; wire {stats}")
    r = json.loads(g.expect(r"^RESULT (\{.*\})$").group(1))
    c = {}
    for line in g.text():
        m = re.match(r"^COUNTERS (\{.*\})$", line)
        if m:
            d = json.loads(m.group(1))
            c[d["queue"]] = d
    if r.get("received") != NBYTES or r.get("mismatches"):
        raise Fail(f"{label}: expected the {NBYTES} bytes back after the lost segment's retransmission, "
                   f"got {r}; wire {stats}")
    g.expect_ok()
    if stats["guest_tcp_data"] < 3:
        raise Fail(f"{label}: expected the lost segment and its retransmission, the wire saw {stats}")
    if ping:
        m = re.search(r"(\d+) packets transmitted, (\d+) received", pinged)
        if not m or int(m.group(2)) < 10:
            raise Fail(f"{label}: the concurrent ping stream was not answered: {pinged.strip()[-300:]}")
        if r["elapsed_ms"] > STREAM_BOUND_MS:
            raise Fail(f"{label}: with a steady ping stream the exchange took {r['elapsed_ms']} ms "
                       f"(bound {STREAM_BOUND_MS} ms): the lost segment's pbuf stayed referenced; "
                       f"tx counters {c.get('tx')}")
    print(f"    {label}{f' + ping {ping_pps}/s' if ping else ''}: lost segment retransmitted, "
          f"{r['elapsed_ms']} ms for the exchange, idle_reclaimed={c.get('tx', {}).get('idle_reclaimed')} "
          f"wire={stats}")
    return r["elapsed_ms"]


def test_tail_loss_retransmitted(t):
    make_variants()
    with t.netns() as ns:
        for label, variant in KERNELS:
            run_lossy(t, ns, label, variant)


def test_tail_loss_retransmitted_under_inbound_stream(t):
    """Issue 23 finding 6: the same tail loss while the host pings the
    guest (asked for PING_PPS a second) through the same wire, under every
    TX_RECLAIM policy (one linked variant each): the lost segment must be
    retransmitted and the exchange end within STREAM_BOUND_MS while the
    guest keeps answering. Measured here the relay and ping reach only
    ~350 replies a second (TCG, Python relay), so the idle reclaim still
    fires between some of them: this checks every policy with a concurrent
    stream, not the busy-path bound itself, which test_vnet's
    test_tx_stale_reclaim_busy_stream checks deterministically (a frame
    every 0.5 ms; its mutant in tests/mutants.py)."""
    make_variants()
    names = make_list("VARIANT_LINKED")
    kernels = {}
    for n in names:
        kernels.setdefault(n.split("-")[0], n)
    missing = {"base", "v0", "v1", "v2", "v3", "after", "lazy", "poll"} - set(kernels)
    if missing:
        raise Fail(f"VARIANT_LINKED has no variant for TX_RECLAIM {sorted(missing)}")
    with t.netns() as ns:
        for reclaim, variant in sorted(kernels.items()):
            run_lossy(t, ns, variant, variant, ping_pps=PING_PPS)


def qmp(path, *commands):
    """Send QMP commands to a QEMU monitor socket; return the replies."""
    import socket as so
    import time
    s = so.socket(so.AF_UNIX, so.SOCK_STREAM)
    for _ in range(50):
        try:
            s.connect(path)
            break
        except OSError:
            time.sleep(0.1)
    s.settimeout(10)
    f = s.makefile("rw")
    json.loads(f.readline())  # greeting
    replies = []
    for c in ({"execute": "qmp_capabilities"},) + commands:
        f.write(json.dumps(c) + "\n")
        f.flush()
        while True:
            m = json.loads(f.readline())
            if "return" in m or "error" in m:
                replies.append(m)
                break
    s.close()
    return replies


def test_link_down_ends_the_run(t):
    """Link down mid-run (QMP set_link off): the driver reads the config
    status (VIRTIO_NET_S_LINK_UP) every vnet.status_ms (1 s) of polling and ends
    the run with an ERROR naming it, status 1, in bounded time."""
    import tempfile
    import time
    sock = os.path.join(tempfile.mkdtemp(prefix="vnetlab-qmp-"), "qmp.sock")
    t.cleanups.append(lambda: os.path.exists(sock) and os.unlink(sock))
    g = t.start(append="app=echo echo.seconds=60 backend=user", net="none", timeout=90,
                extra=["-netdev", "user,id=n1", "-device",
                       "virtio-net-pci,netdev=n1,disable-legacy=on,romfile=",
                       "-qmp", f"unix:{sock},server=on,wait=off"])
    g.wait_line(r"^net ip=", timeout=60)
    time.sleep(0.5)
    t0 = time.monotonic()
    rep = qmp(sock, {"execute": "set_link", "arguments": {"name": "n1", "up": False}})
    if "error" in rep[-1]:
        raise Fail(f"QMP set_link failed: {rep}")
    g.wait()
    took = time.monotonic() - t0
    g.expect_run_error("virtio-net", "link down: device config status 0x0000")
    g.expect(r'^LINK \{"state":"down"')
    if took > 5:
        raise Fail(f"the run ended {took:.1f} s after the link went down (expected well under 5 s)")
    print(f"    link down -> ERROR and exit in {took * 1000:.0f} ms (wall, incl. QMP and QEMU exit)")
