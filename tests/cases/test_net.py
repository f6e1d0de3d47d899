"""lwIP on the driver: DHCP and TCP over slirp; ping, TCP/UDP integrity and
malformed input over a tap in a network namespace."""

import hashlib
import json
import os
import re
import socket
import subprocess
import sys
import time

from lib import BUILD, NS_GUEST_IP, NS_PREFIX, TOP, Fail, json_line, linked_variants, netpeer, ping

PEER = [sys.executable, os.path.join(TOP, "tests", "tools", "netpeer.py")]
MIB = 1 << 20


def pattern(n):
    """The byte stream apps/tcpcheck.c sends (pattern_byte)."""
    out = bytearray(n)
    for blk in range(0, n, 4096):
        x = ((blk >> 12) * 1103515245 + 12345) & 0xFFFFFFFF
        hi = (x >> 16) & 0xFF
        for i in range(blk, min(n, blk + 4096)):
            out[i] = hi ^ (i & 0xFF)
    return bytes(out)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p




def test_slirp_dhcp_and_tcp_both_ways(t):
    port, nbytes = free_port(), 2 * MIB
    host = subprocess.Popen(PEER + ["echo-listen", str(port)], stdout=subprocess.PIPE, text=True)
    t.cleanups.append(lambda: host.kill())
    if host.stdout.readline().strip() != "listening":
        raise Fail("host echo listener did not start")
    g = t.boot(append=f"app=tcpcheck tcpcheck.peer=10.0.2.2 tcpcheck.port={port} "
               f"tcpcheck.bytes={nbytes} tcpcheck.seconds=60", net="user", timeout=90)
    g.expect(r"^net ip=10\.0\.2\.15 mask=255\.255\.255\.0 gw=10\.0\.2\.2 mac=\S+ mtu=1500 config=dhcp$")
    g.expect_ok()
    r = json_line(g, "RESULT")
    if r["received"] != nbytes or r["mismatches"] != 0:
        raise Fail(f"expected {nbytes} bytes back intact, guest saw {r}")
    out, _ = host.communicate(timeout=30)
    seen = json.loads(out.strip().splitlines()[-1])
    want = hashlib.sha256(pattern(nbytes)).hexdigest()
    if seen["bytes"] != nbytes or seen["sha256"] != want:
        raise Fail(f"host received {seen['bytes']} bytes sha256 {seen['sha256']}, expected {nbytes} / {want}")


def test_ip_key_errors(t):
    for arg, msg in (("ip=10.1.2.300/24", "not an IPv4 address"), ("ip=10.0.0.1", "expected dhcp or"),
                     ("ip=dhcp gw=10.0.0.1", "needs a static"), ("ip=10.0.0.1/33", "expected dhcp or")):
        g = t.boot(append=f"app=echo {arg}")
        g.expect(r'^ERROR \{"where":"cmdline","msg":".*' + re.escape(msg))
        g.expect_status(2)


def echo_guest(t, ns, kernel=None, seconds=300):
    g = t.start(append=f"app=echo ip={NS_GUEST_IP}/{NS_PREFIX} backend=tap echo.seconds={seconds}",
                net=f"tap:{ns.tap}", ns=ns, timeout=seconds + 60, kernel=kernel)
    g.wait_line(r"^echo listening", timeout=30)
    return g


peer = netpeer


def stop_guest(ns, g):
    peer(ns, ["stop", NS_GUEST_IP], timeout=20)
    g.wait()
    g.expect_ok()
    return json_line(g, "LWIPSTATS")


def test_tap_ping(t):
    with t.netns() as ns:
        g = echo_guest(t, ns)
        sent, recv, _ = ping(ns, ["-c", "1000", "-i", "0.002", "-W", "1"], timeout=60)
        if sent != 1000 or recv != 1000:
            raise Fail(f"expected 1000 of 1000 echo replies, got {recv} of {sent}")
        sent, recv, r = ping(ns, ["-f", "-c", "2000", "-w", "60"], timeout=90)
        if r.returncode != 0 or recv != sent:
            raise Fail(f"ping -f: {recv} of {sent} replies, status {r.returncode}")
        stop_guest(ns, g)


def test_tap_tcp_integrity_64mib(t):
    with t.netns() as ns:
        g = echo_guest(t, ns)
        res = peer(ns, ["tcp-integrity", NS_GUEST_IP, "7", str(64 * MIB)], timeout=600)
        if res["sent_sha256"] != res["recv_sha256"]:
            raise Fail(f"SHA-256 mismatch: {res}")
        stats = stop_guest(ns, g)
        print(f"    tcp integrity 64 MiB: {res['mbps']} Mbit/s (TCG, tap), lwIP {stats}")


def test_tap_udp_every_size(t):
    with t.netns() as ns:
        g = echo_guest(t, ns)
        peer(ns, ["udp-sizes", NS_GUEST_IP, "7", "1", "1472"], timeout=300)
        r = stop_guest(ns, g)
        if r["udp_drop"]:
            raise Fail(f"lwIP dropped {r['udp_drop']} UDP datagrams of the size sweep")


def test_tap_malformed_frames(t):
    with t.netns() as ns:
        g = echo_guest(t, ns)
        mac = g.wait_line(r"^net ip=\S+ mask=\S+ gw=\S+ mac=(\S+) ").group(1)
        peer(ns, ["inject", ns.tap, mac, NS_GUEST_IP, "10.77.0.1"], timeout=60)
        # The flood overflows the host tap's own queue (the host drops, not
        # the guest); let the backlog drain before judging the guest.
        for _ in range(10):
            if ping(ns, ["-c", "1", "-W", "1"], timeout=10)[1] == 1:
                break
        time.sleep(0.5)
        sent, recv, _ = ping(ns, ["-c", "100", "-i", "0.002", "-W", "1"], timeout=30)
        if recv != sent:
            raise Fail(f"after malformed frames: {recv} of {sent} echo replies")
        peer(ns, ["tcp-integrity", NS_GUEST_IP, "7", str(4 * MIB)], timeout=120)
        s = stop_guest(ns, g)
        counted = s["ip_chkerr"] + s["ip_lenerr"] + s["ip_drop"] + s["udp_chkerr"] + s["tcp_chkerr"] + s["link_drop"]
        if counted == 0:
            raise Fail(f"malformed frames were injected but no drop shows in the counters: {s}")


# Every TX_RECLAIM and every TX_KICK policy (the representative set that
# mk/variants.mk links into build/v/<name>/): a policy may change speed,
# never correctness. Smaller than the default build's 64 MiB to keep TCG
# time reasonable; each still pushes thousands of full-size segments through
# every reclaim and kick path.
LINKED_VARIANTS = linked_variants()


def test_tap_tcp_integrity_every_policy_variant(t):
    with t.netns() as ns:
        for name in LINKED_VARIANTS:
            kernel = os.path.join(BUILD, "v", name, "vnetlab.elf")
            if not os.path.exists(kernel):
                raise Fail(f"{kernel} missing (tests/run.sh builds it with `make variants`)")
            g = echo_guest(t, ns, kernel=kernel)
            res = peer(ns, ["tcp-integrity", NS_GUEST_IP, "7", str(16 * MIB)], timeout=300)
            stats = stop_guest(ns, g)
            print(f"    {name}: 16 MiB intact at {res['mbps']} Mbit/s (TCG, tap), "
                  f"tx_drops={stats['tx_drops']} rexmit={stats['tcp_rexmit']}")
