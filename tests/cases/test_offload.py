"""The bulk data path over a tap in a network namespace: checksum offload,
TSO and large receive at every OFFLOAD level (mk/variants.mk), each with
every TX_KICK policy; SHA-256 integrity both directions, odd write sizes,
concurrent streams, zero copy, and a device that offers no offloads."""

import json
import os
import subprocess
import sys

import lib
from lib import BUILD, NS_GUEST_IP, NS_HOST_IP, NS_PREFIX, TOP, Fail, json_line, linked_kernel, make_list, netpeer, per_queue

PEER = [sys.executable, os.path.join(TOP, "tests", "tools", "netpeer.py")]
MIB = 1 << 20
ODD_WRITES = (1, 1447, 1448, 1449, 65535)


KICKS = make_list("VARIANT_KICKS")
LEVELS = make_list("VARIANT_OFFLOADS")  # lro (the default) first


def variant(level, kick="every"):
    """The linked kernel of one OFFLOAD level and TX_KICK policy."""
    name = f"base-{kick}-ei1-eager-inline-zc1" + ("" if level == "lro" else f"-off_{level}")
    return name, linked_kernel(name)


peer = netpeer


def echo_guest(t, ns, kernel, seconds=300, args=""):
    return lib.echo_guest(t, ns, kernel, seconds, args)


def stop_guest(ns, g):
    lib.stop_echo(ns, g)
    return {k: json_line(g, k) for k in ("LWIPSTATS", "NETIF")}


def check_offloads_used(g, level, stats, what):
    """What each level must have done, from the guest's own counters."""
    c = per_queue(g, "COUNTERS")
    lw, nf = stats["LWIPSTATS"], stats["NETIF"]
    if lw["tcp_chkerr"] or lw["ip_chkerr"]:
        raise Fail(f"{what}: checksum errors in lwIP {lw}")
    if nf["tx_clones"]:
        raise Fail(f"{what}: {nf['tx_clones']} TCP frames cloned (zero copy lost): {nf}")
    if level != "none" and (c["tx"]["csum"] == 0 or c["rx"]["csum"] == 0):
        raise Fail(f"{what}: offload={level} but no NEEDS_CSUM sent or no checksum vouched for: {c}")
    if level == "none" and (c["tx"]["csum"] or c["rx"]["csum"]):
        raise Fail(f"{what}: offload=none used checksum offload: {c}")
    # (TSO frames need a sender that writes more than an MSS at a time:
    # test_zero_copy_tcp checks them; the echo service writes what arrives.)
    if level != "tso" and level != "lro" and c["tx"]["gso"]:
        raise Fail(f"{what}: offload={level} sent TSO frames: {c['tx']}")
    if level == "lro" and c["rx"]["gso"] == 0:
        raise Fail(f"{what}: offload=lro received no large frame: {c['rx']}")
    if level != "lro" and c["rx"]["gso"]:
        raise Fail(f"{what}: offload={level} received large frames: {c['rx']}")


def test_offload_integrity_every_level_and_kick(t):
    """64 MiB of random bytes through the echo service (both directions at
    once), SHA-256 compared, for every OFFLOAD level x TX_KICK policy."""
    with t.netns() as ns:
        for level in LEVELS:
            for kick in KICKS:
                name, kernel = variant(level, kick)
                g = echo_guest(t, ns, kernel)
                res = peer(ns, ["tcp-integrity", NS_GUEST_IP, "7", str(64 * MIB)], timeout=600)
                stats = stop_guest(ns, g)
                check_offloads_used(g, level, stats, name)
                c = per_queue(g, "COUNTERS")
                print(f"    {name}: 64 MiB intact at {res['mbps']} Mbit/s (TCG, tap); "
                      f"TSO frames {c['tx']['gso']}, large RX frames {c['rx']['gso']}, "
                      f"rexmit {stats['LWIPSTATS']['tcp_rexmit']}")


def stream_to_sink(t, ns, kernel, msg, instances, seconds=1, check=None):
    """The appliance's stream client sends msg-byte records to the host's
    stream-sink, which verifies every byte."""
    port = "5001"
    sink = ns.popen(PEER + ["stream-sink", port, str(msg), str(instances)], stdout=subprocess.PIPE, text=True)
    if sink.stdout.readline().strip() != "listening":
        raise Fail("stream-sink did not start")
    g = t.boot(append=f"app=stream stream.peer={NS_HOST_IP} stream.msg={msg} stream.instances={instances} "
               f"stream.warmup=0 stream.seconds={seconds} ip={NS_GUEST_IP}/{NS_PREFIX} backend=tap",
               net=f"tap:{ns.tap}", ns=ns, timeout=120, kernel=kernel)
    g.expect_ok()
    r = json_line(g, "RESULT")
    try:
        out, _ = sink.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        sink.kill()
        raise Fail(f"stream client msg={msg} x{instances}: the guest ended ({r['bytes']} bytes acked) "
                   "but the host sink did not see every connection close within 30 s")
    res = json.loads(out.strip().splitlines()[-1])
    if not res["ok"]:
        raise Fail(f"stream client msg={msg} x{instances}: host saw {json.dumps(res)[:600]}")
    if res["bytes"] < r["bytes"]:
        raise Fail(f"guest says {r['bytes']} bytes acknowledged, host received only {res['bytes']}")
    return r, res


def test_offload_odd_writes_and_concurrent_streams(t):
    """Per OFFLOAD level: host writes of 1, 1447, 1448, 1449 and 65535 bytes
    through the echo service (SHA-256 both ways), appliance writes of the
    same sizes verified byte by byte on the host, and 4 concurrent
    connections each way."""
    with t.netns() as ns:
        for level in LEVELS:
            name, kernel = variant(level)
            g = echo_guest(t, ns, kernel)
            for w in ODD_WRITES:
                n = 256 * 1024 if w == 1 else 8 * MIB
                peer(ns, ["tcp-integrity", NS_GUEST_IP, "7", str(n), str(w)], timeout=300)
            res4 = peer(ns, ["tcp-integrity", NS_GUEST_IP, "7", str(16 * MIB), "65536", "4"], timeout=300)
            stats = stop_guest(ns, g)
            check_offloads_used(g, level, stats, f"{name} echo")
            sizes = []
            for w in ODD_WRITES:
                r, res = stream_to_sink(t, ns, kernel, w, 1)
                sizes.append(f"{w}:{res['bytes']}")
            r, res = stream_to_sink(t, ns, kernel, 16384, 4, seconds=2)
            print(f"    {name}: echo x4 {res4['mbps']} Mbit/s; appliance writes verified (size:bytes) "
                  f"{' '.join(sizes)}; 4 streams {r['mbps']} Mbit/s (TCG, tap)")


def test_zero_copy_tcp(t):
    """No TCP frame is cloned on the way out at any level (the driver's
    header goes into lwIP's reserved headroom), none copied on the way in,
    and with TSO a 64 KB send costs at most one kick."""
    with t.netns() as ns:
        for level in LEVELS:
            name, kernel = variant(level)
            r, _ = stream_to_sink(t, ns, kernel, 16384, 1, seconds=2)
            want = {"lro": "tx_csum,rx_csum,tso4,lro4", "tso": "tx_csum,rx_csum,tso4",
                    "csum": "tx_csum,rx_csum", "none": ""}[level]
            if r["offloads"] != want:
                raise Fail(f"{name}: RESULT says offloads {r['offloads']!r}, expected {want!r}")
            if r["tx_clones"] != 0:
                raise Fail(f"{name}: {r['tx_clones']} frames cloned in a TCP stream (expected 0): {r}")
            if level in ("tso", "lro"):
                if r["tx_tso"] == 0:
                    raise Fail(f"{name}: no TSO frame in a TCP stream: {r}")
                if float(r["tx_kicks_per_64k_sent"]) > 1.0:
                    raise Fail(f"{name}: {r['tx_kicks_per_64k_sent']} TX kicks per 64 KiB sent (expected <= 1)")
            print(f"    {name}: clones {r['tx_clones']}, TSO frames {r['tx_tso']}, "
                  f"TX kicks per 64 KiB {r['tx_kicks_per_64k_sent']} ({r['mbps']} Mbit/s, TCG, tap)")
        # Receiving: the appliance asks iperf -s to send (maerts).
        name, kernel = variant("lro")
        iperf = ns.popen(["iperf", "-s", "-B", NS_HOST_IP], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        g = t.boot(append=f"app=stream stream.peer={NS_HOST_IP} stream.test=maerts stream.warmup=0 "
                   f"stream.seconds=2 stream.check=1 ip={NS_GUEST_IP}/{NS_PREFIX} backend=tap",
                   net=f"tap:{ns.tap}", ns=ns, timeout=120, kernel=kernel)
        iperf.kill()
        g.expect_ok()
        r = json_line(g, "RESULT")
        if r["rx_copies"] or r["check_errors"] or r["rx_lro"] == 0:
            raise Fail(f"{name} maerts: expected large frames, no copies, no pattern errors: {r}")
        print(f"    {name} maerts: {r['mbps']} Mbit/s, large RX frames {r['rx_lro']}, copies 0, "
              f"ACKs per 64 KiB received {r['acks_per_64k_received']} (TCG, tap)")


def test_device_without_offloads(t):
    """QEMU told to offer no checksum/TSO features: the default build falls
    back to software and stays correct."""
    off = []
    for prop in ("csum", "guest_csum", "host_tso4", "guest_tso4", "host_tso6", "guest_tso6", "gso"):
        off += ["-global", f"virtio-net-pci.{prop}=off"]
    with t.netns() as ns:
        g = t.start(append=f"app=echo ip={NS_GUEST_IP}/{NS_PREFIX} backend=tap echo.seconds=300",
                    net=f"tap:{ns.tap}", ns=ns, timeout=360, extra=off)
        g.wait_line(r"^echo listening", timeout=30)
        feats = g.expect(r"^virtio-net: features=\S+ \(([^)]*)\)").group(1).split(",")
        if set(feats) & {"CSUM", "GUEST_CSUM", "HOST_TSO4", "GUEST_TSO4"}:
            raise Fail(f"QEMU offered no offloads, yet the driver negotiated {feats}")
        mem = json_line(g, "memory")
        if mem["offloads"]:
            raise Fail(f"memory line says offloads {mem['offloads']!r} on a device without them")
        peer(ns, ["tcp-integrity", NS_GUEST_IP, "7", str(16 * MIB)], timeout=300)
        stats = stop_guest(ns, g)
        check_offloads_used(g, "none", stats, "device without offloads")


def test_offload_fragments_at_link_mtu(t):
    """With TSO the netif's IP MTU is raised for 64 KB TCP segments; every
    other datagram must still leave in 1500-byte fragments (ping -s 4000
    replies, UDP echoes of 1473..8000 bytes)."""
    with t.netns() as ns:
        _, kernel = variant("lro")
        g = echo_guest(t, ns, kernel)
        r = ns.run(["ping", "-q", "-c", "5", "-i", "0.2", "-s", "4000", "-W", "2", NS_GUEST_IP], timeout=30,
                   capture_output=True, text=True)
        if " 5 received" not in r.stdout:
            raise Fail(f"ping -s 4000: {r.stdout.strip()[-200:]}")
        code = ("import socket,sys\n"
                "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.settimeout(2); bad=[]\n"
                "for n in (1473, 2000, 2961, 3000, 8000):\n"
                "    p=bytes(range(256))*(n//256)+bytes(n%256)\n"
                "    s.sendto(p,(sys.argv[1],7))\n"
                "    try:\n"
                "        d,_=s.recvfrom(65536)\n"
                "        bad += [] if d==p else [n]\n"
                "    except OSError: bad.append(n)\n"
                "print(bad); sys.exit(1 if bad else 0)\n")
        r = ns.run([sys.executable, "-c", code, NS_GUEST_IP], timeout=30, capture_output=True, text=True)
        if r.returncode:
            raise Fail(f"UDP echoes above the MTU not returned intact: sizes {r.stdout.strip()}")
        stats = stop_guest(ns, g)
        if stats["NETIF"]["ip_frags"] < 10:
            raise Fail(f"expected >= 10 datagrams fragmented at the link MTU, NETIF says {stats['NETIF']}")


def test_offload_rx_copy_path(t):
    """net.rx_hold_max=0 copies every received frame (what the netif does
    when the stack holds half the RX ring): large merged frames must come
    out of the copy intact, with every buffer returned."""
    with t.netns() as ns:
        _, kernel = variant("lro")
        g = echo_guest(t, ns, kernel, args="net.rx_hold_max=0")
        peer(ns, ["tcp-integrity", NS_GUEST_IP, "7", str(32 * MIB)], timeout=300)
        stats = stop_guest(ns, g)
        c = per_queue(g, "COUNTERS")
        if stats["NETIF"]["rx_copies"] < c["rx"]["frames"] - 10 or c["rx"]["gso"] == 0:
            raise Fail(f"expected every frame copied, large frames among them: {stats['NETIF']} {c['rx']}")
