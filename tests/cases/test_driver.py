"""The virtio-net driver without an IP stack: apps/arpping.c exchanges ARP
requests and replies with QEMU's slirp gateway and with a host kernel on a
tap in a network namespace, in the default build and in a representative
set of policy variants (mk/variants.mk VARIANT_LINKED), plus the transport's
handling of transitional and legacy-only devices."""

import json
import os
import re
import subprocess

from lib import BUILD, NS_GUEST_IP, NS_HOST_IP, TOP, Fail, linked_variants, per_queue

VARIANTS = linked_variants()
KICK_TIMER_NS = 150_000  # vnet_policy.h VNET_KICK_TIMER_US default


def result(g):
    m = g.expect(r"^RESULT (\{.*\})$")
    return json.loads(m.group(1))


def counters(g):
    out = per_queue(g, "COUNTERS")
    if set(out) != {"tx", "rx"}:
        raise Fail(f"expected COUNTERS lines for tx and rx, saw {sorted(out)}")
    return out


def variant_string(name):
    """The variant= string a build named like mk/variants.mk prints."""
    r, k, ei, avail, hdr, zc = name.split("-")[:6]
    r = {"before": "base", "v1": "v1:2", "v2": "v2:2", "v3": "v3:2", "lazy": "lazy:32"}.get(r, r)
    k = {"burst": "burst:32", "timer": "timer:150us-LATENCY-PENALTY"}.get(k, k)
    words = name.split("-")[6:]
    off = next((w[4:] for w in words if w.startswith("off_")), "lro")
    off = "tso+lro" if off == "lro" else off
    idle = next((w[5:] for w in words if w.startswith("idle_")), "poll")
    idle = "adaptive:50us" if idle == "adaptive" else idle
    idle += ",relax=pause" if "relax_pause" in words else ""
    ring = "packed" if "packed" in words else "split"
    return (f"reclaim={r},kick={k},event_idx={ei[2:]},avail={avail},txhdr={hdr},zerocopy={zc[2:]},"
            f"offload={off},idle={idle},ring={ring}")


def check_arp_run(g, count, backend, variant=None):
    """The boot ended well and its result line is complete and consistent."""
    g.expect_ok()
    feats = g.expect(r"^virtio-net: features=0x[0-9a-f]+ \(([A-Z_0-9,]+)\) offered=0x[0-9a-f]+$").group(1)
    if "VERSION_1" not in feats.split(","):
        raise Fail(f"negotiated features lack VERSION_1: {feats}")
    r = result(g)
    if r["test"] != "arp_rr" or r["count"] != count or r["backend"] != backend:
        raise Fail(f"expected an arp_rr result over {count} exchanges on {backend}, got {r}")
    if r["accel"] not in ("tcg", "kvm"):
        raise Fail(f"RESULT accel is {r['accel']!r}")
    if variant and r["variant"] != variant:
        raise Fail(f"expected variant {variant}, RESULT says {r['variant']}")
    if ("EVENT_IDX" in feats.split(",")) != ("event_idx=1" in r["variant"]):
        raise Fail(f"features {feats} disagree with variant {r['variant']}")
    if not 0 < r["min_ns"] <= r["p50_ns"] <= r["p90_ns"] <= r["p99_ns"] <= r["max_ns"]:
        raise Fail(f"percentiles out of order: {r}")
    if r["tx_frames"] != count or r["rx_frames"] < count:
        raise Fail(f"expected {count} requests and at least {count} frames back, got {r}")
    # Every frame needs its doorbell except those the device said it did
    # not need; with one frame per burst that is at most one per frame.
    if r["tx_kicks"] > count or r["kicks_per_frame"] <= 0:
        raise Fail(f"implausible kick counts: {r}")
    c = counters(g)
    if c["tx"]["device_errors"] or c["rx"]["device_errors"] or c["tx"]["ring_full"]:
        raise Fail(f"device errors or ring-full events in a clean run: {c}")
    return r


def make_variants():
    r = subprocess.run(["make", "-s", "-j2", "variants-link"], cwd=TOP, capture_output=True,
                       text=True, timeout=600)
    if r.returncode:
        raise Fail(f"make variants-link failed:\n{(r.stdout + r.stderr)[-2000:]}")


def variant_elf(name):
    return os.path.join(BUILD, "v", name, "vnetlab.elf")


def report(label, r):
    print(f"    {label}: p50 {r['p50_ns'] / 1000:.1f} us, p99 {r['p99_ns'] / 1000:.1f} us, "
          f"kicks/frame {r['kicks_per_frame']}, reclaims/frame {r['reclaims_per_frame']} "
          f"({r['accel']}, {r['backend']})")


def test_arp_slirp(t):
    g = t.boot(append="app=arpping arp.count=500 backend=user", net="user")
    g.expect(r"^virtio-pci: \S+ 1af4:1041 common=bar\d\+0x[0-9a-f]+ notify=bar\d\+0x[0-9a-f]+ mult=\d+ ")
    g.expect(r"^virtio-net: mac=\S+ mtu=1500 link=up rxq=\d+ txq=\d+ variant=reclaim=")
    r = check_arp_run(g, 500, "user")
    if not g.expect(r"^arpping: 10\.0\.2\.2 is at ([0-9a-f:]{17})$"):
        raise Fail("no peer MAC line")
    report("slirp default", r)


def test_arp_tap_netns(t):
    with t.netns() as ns:
        mac = json.loads(subprocess.run(["ip", "-n", ns.name, "-j", "link", "show", ns.tap],
                                        capture_output=True, text=True, timeout=10).stdout)[0]["address"]
        g = t.start(append=f"app=arpping arp.target={NS_HOST_IP} arp.ip={NS_GUEST_IP} "
                    f"arp.count=2000 backend=tap", net=f"tap:{ns.tap}", ns=ns, timeout=60).wait()
        r = check_arp_run(g, 2000, "tap")
        seen = g.expect(r"^arpping: \S+ is at ([0-9a-f:]{17})$").group(1)
        if seen != mac:
            raise Fail(f"ARP reply says {NS_HOST_IP} is at {seen}, the tap's MAC is {mac}")
        report("tap default", r)


def test_arp_variants_slirp(t):
    make_variants()
    for name in VARIANTS:
        g = t.boot(append="app=arpping arp.count=300 backend=user", net="user", kernel=variant_elf(name))
        r = check_arp_run(g, 300, "user", variant_string(name))
        if "-timer-" in name and r["p50_ns"] < KICK_TIMER_NS:
            raise Fail(f"kick=timer holds each kick {KICK_TIMER_NS} ns, yet p50 is {r['p50_ns']} ns")
        report(name, r)


def test_arp_variants_tap(t):
    make_variants()
    with t.netns() as ns:
        for name in VARIANTS:
            g = t.start(append=f"app=arpping arp.target={NS_HOST_IP} arp.ip={NS_GUEST_IP} "
                        f"arp.count=1000 backend=tap", net=f"tap:{ns.tap}", ns=ns, timeout=60,
                        kernel=variant_elf(name)).wait()
            r = check_arp_run(g, 1000, "tap", variant_string(name))
            if "-timer-" in name and r["p50_ns"] < KICK_TIMER_NS:
                raise Fail(f"kick=timer holds each kick {KICK_TIMER_NS} ns, yet p50 is {r['p50_ns']} ns")
            report(name, r)


def test_arp_no_reply_is_an_error(t):
    # slirp answers ARP only for its own addresses: nobody is at .99.
    g = t.boot(append="app=arpping arp.target=10.0.2.99 arp.timeout_ms=200 arp.warmup=0 backend=user")
    g.expect(r'^ERROR \{"where":"arpping","msg":"no ARP reply from 10\.0\.2\.99 within 200 ms \(request 0\)')
    counters(g)
    g.expect_status(1)


def test_arp_bad_key(t):
    g = t.boot(append="app=arpping arp.target=10.0.2.300")
    g.expect(r'^ERROR \{"where":"cmdline","msg":"bad value \'10\.0\.2\.300\' for key \'arp\.target\'')
    g.expect_status(2)


def test_transitional_device(t):
    # 1af4:1000 with both interfaces: the driver takes the modern one.
    g = t.boot(append="app=arpping arp.count=50 backend=user", net="none",
               extra=["-netdev", "user,id=n1", "-device", "virtio-net-pci,netdev=n1,romfile="])
    g.expect(r"^virtio-pci: \S+ 1af4:1000 common=")
    check_arp_run(g, 50, "user")


def test_legacy_only_device_refused(t):
    g = t.boot(append="app=arpping backend=user", net="none",
               extra=["-netdev", "user,id=n1", "-device",
                      "virtio-net-pci,netdev=n1,disable-modern=on,romfile="])
    g.expect(r'^ERROR \{"where":"virtio-net","msg":".*1af4:1000 has no virtio 1\.x capabilities: legacy-only')
    g.expect_status(1)


def test_notify_multiplier_and_queue_cap(t):
    # page-per-vq=on: notify_off_multiplier 4096, so each queue's doorbell
    # is on its own page; rx_queue_size=1024 is capped at VIRTQ_MAX_SIZE.
    g = t.boot(append="app=arpping arp.count=50 backend=user", net="none",
               extra=["-netdev", "user,id=n1", "-device",
                      "virtio-net-pci,netdev=n1,disable-legacy=on,page-per-vq=on,rx_queue_size=1024,romfile="])
    g.expect(r"^virtio-pci: \S+ 1af4:1041 .* mult=4096 ")
    g.expect(r"^virtio-pci: queue 0 size=256 \(device max 1024\) notify=\+0x0$")
    g.expect(r"^virtio-pci: queue 1 size=256 \(device max 256\) notify=\+0x1000$")
    check_arp_run(g, 50, "user")
