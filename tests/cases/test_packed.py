"""The packed virtqueue layout (issue 15; virtio 1.2 2.8,
drivers/virtio/virtq_packed.c) against QEMU's userspace virtio-net with
packed=on over a tap: every linked packed variant (each TX_RECLAIM and each
TX_KICK policy, the flag protocol without EVENT_IDX, and IDLE=halt)
negotiates RING_PACKED, moves 8 MiB SHA-256-checked both ways through the
echo service and runs a TCP RR against sockperf with every transaction
answered and no device fault, on the PCI transport and on virtio-mmio
(microvm, both discovery paths, and IDLE=halt on its 8259 line); a packed
build on a device without packed=on refuses to start."""

import json
import re
import subprocess
import time

from lib import BUILD, NS_GUEST_IP, NS_HOST_IP, NS_PREFIX, TOP, Fail, json_line, linked_kernel, make_list, netpeer, per_queue

import os

GUEST_NET = f"ip={NS_GUEST_IP}/{NS_PREFIX} backend=tap"
RR_PORT = 11112
DEFAULT_PACKED = "base-every-ei1-eager-inline-zc1-packed"


def packed_variants():
    return make_list("VARIANT_PACKED_LINKED")


def check_packed_run(g, name, what):
    """The build negotiated the packed layout, says so, and the device
    broke no ring rule."""
    feats = g.expect(r"^virtio-net: features=0x[0-9a-f]+ \(([A-Z_0-9,]+)\)").group(1).split(",")
    if "RING_PACKED" not in feats:
        raise Fail(f"{name} {what}: RING_PACKED not negotiated: {feats}")
    g.expect(r"^virtio-net: mac=.* variant=.*,ring=packed$")
    g.expect_not(r"^DEVICE_FAULT")
    c = per_queue(g, "COUNTERS")
    if set(c) != {"tx", "rx"} or c["tx"]["device_errors"] or c["rx"]["device_errors"]:
        raise Fail(f"{name} {what}: expected COUNTERS without device errors, saw {c}")
    return c


def wait_listening(ns, port, timeout=10):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        r = ns.run(["ss", "-Hlnt", f"sport = :{port}"], timeout=5, capture_output=True, text=True)
        if r.stdout.strip():
            return
        time.sleep(0.05)
    raise Fail(f"sockperf server not listening on TCP port {port} within {timeout} s")


def integrity_and_rr(t, name, machine="pc"):
    """One packed variant on one machine: 8 MiB through the echo service
    with SHA-256 both ways, then a 1 s TCP RR against sockperf."""
    with t.netns() as ns:
        g = t.start(append=f"app=echo echo.seconds=120 {GUEST_NET}", net=f"tap:{ns.tap}", ns=ns,
                    timeout=180, kernel=linked_kernel(name), machine=machine, packed=True)
        g.wait_line(r"^echo listening", timeout=30)
        res = netpeer(ns, ["tcp-integrity", NS_GUEST_IP, "7", str(8 << 20)], timeout=300)
        netpeer(ns, ["stop", NS_GUEST_IP], timeout=20)
        g.wait()
        g.expect_ok()
        c = check_packed_run(g, name, f"integrity on {machine}")
        if machine.startswith("microvm"):
            g.expect(r"^virtio-mmio: queue 1 size=\d+ ")
        if "idle_halt" in name:
            idle = json_line(g, "IDLE")
            if idle["halts"] == 0 or idle["irqs_rx"] == 0 or idle["lost_wakeups"]:
                raise Fail(f"{name} on {machine}: expected halts woken by RX interrupts on the packed ring: {idle}")
    with t.netns() as ns:
        ns.popen(["sockperf", "server", "--tcp", "-i", NS_HOST_IP, "-p", str(RR_PORT)],
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_listening(ns, RR_PORT)
        g = t.boot(append=f"app=rr rr.peer={NS_HOST_IP} rr.port={RR_PORT} rr.seconds=1 rr.warmup=0 "
                          f"{GUEST_NET}", net=f"tap:{ns.tap}", ns=ns, timeout=60, kernel=linked_kernel(name),
                   machine=machine, packed=True)
        g.expect_ok()
        check_packed_run(g, name, f"rr on {machine}")
        r = json_line(g, "RESULT")
        if r["transactions"] <= 0 or r["lost"] or r["errors"] or not r["variant"].endswith(",ring=packed"):
            raise Fail(f"{name} on {machine}: RR transactions {r['transactions']}, lost {r['lost']}, errors "
                       f"{r['errors']}, variant {r['variant']}")
    print(f"    {name} on {machine}: 8 MiB intact at {res['mbps']} Mbit/s (tx kicks {c['tx']['kicks']}, "
          f"suppressed {c['tx']['kicks_suppressed']}); RR {r['tps']} trans/s p50 "
          f"{r['lat_p50_ns'] / 1000:.1f} us, kicks/txn {r['kicks_per_txn']} (TCG, tap)")


def test_packed_integrity_and_rr_each_policy(t):
    """Each linked packed variant (every TX_RECLAIM, every TX_KICK,
    EVENT_IDX off, IDLE=halt) on the PCI transport."""
    names = packed_variants()
    for want in ("base v0 v1 v2 v3 after lazy poll".split(), "every burst deferred timer".split()):
        pos = 0 if want[0] == "base" else 1
        missing = set(want) - {n.split("-")[pos] for n in names}
        if missing:
            raise Fail(f"VARIANT_PACKED_LINKED lacks a packed variant for {sorted(missing)}: {names}")
    for name in names:
        integrity_and_rr(t, name)


def test_packed_on_virtio_mmio(t):
    """The packed ring over virtio-mmio (microvm): the transport programs
    its three areas (4.2.3.2 step 6: descriptor ring, driver and device
    event suppression) and the device uses them, found through ACPI and
    through the kernel command line; IDLE=halt woken by the 8259 line."""
    for machine in ("microvm", "microvm,acpi=off"):
        integrity_and_rr(t, DEFAULT_PACKED, machine)
    integrity_and_rr(t, "base-every-ei1-eager-inline-zc1-idle_halt-packed", "microvm,acpi=off")


def test_packed_build_needs_packed_device(t):
    """Without packed=on QEMU offers no RING_PACKED: the packed build
    says so in one ERROR line and exits with status 1 (no split fallback)."""
    name = packed_variants()[0]
    g = t.boot(append="app=echo echo.seconds=5 backend=user", net="user", timeout=60, kernel=linked_kernel(name))
    g.expect(r'^ERROR \{"where":"[^"]*","msg":"[^"]*needs VIRTIO_F_RING_PACKED[^"]*"\}')
    g.expect_status(1)


def test_split_build_on_packed_device(t):
    """The ring.txt comparison runs both columns on one packed=on device:
    a split build does not accept RING_PACKED there and runs its split
    ring (1 s TCP RR, every transaction answered)."""
    name = "base-every-ei1-eager-inline-zc1"
    with t.netns() as ns:
        ns.popen(["sockperf", "server", "--tcp", "-i", NS_HOST_IP, "-p", str(RR_PORT)],
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_listening(ns, RR_PORT)
        g = t.boot(append=f"app=rr rr.peer={NS_HOST_IP} rr.port={RR_PORT} rr.seconds=1 rr.warmup=0 {GUEST_NET}",
                   net=f"tap:{ns.tap}", ns=ns, timeout=60, kernel=linked_kernel(name), packed=True)
        g.expect_ok()
        m = g.expect(r"^virtio-net: features=0x[0-9a-f]+ \(([A-Z_0-9,]+)\) offered=0x([0-9a-f]+)$")
        if "RING_PACKED" in m.group(1).split(",") or not int(m.group(2), 16) >> 34 & 1:
            raise Fail(f"expected RING_PACKED offered but not negotiated: {m.group(0)}")
        r = json_line(g, "RESULT")
        if r["transactions"] <= 0 or r["lost"] or r["errors"] or not r["variant"].endswith(",ring=split"):
            raise Fail(f"split build on a packed=on device: {r}")


def test_make_run_ring_packed(t):
    """`make run RING=packed` (host/run.sh with RING=packed in its
    environment) boots a packed build on a packed=on device: both RESULT
    lines name ring=packed and RING_PACKED is negotiated. Without
    RING=packed the same kernel cannot start (test above)."""
    name = packed_variants()[0]
    env = dict(os.environ, TEST="tcp_rr,tcp_stream", DURATION="1", WARMUP="0", RING="packed",
               KERNEL=linked_kernel(name))
    for machine in ("pc", "microvm"):
        r = subprocess.run(["bash", os.path.join(TOP, "host", "run.sh")], env=dict(env, MACHINE=machine),
                           capture_output=True, text=True, timeout=150)
        out = r.stdout
        if r.returncode != 0:
            raise Fail(f"RING=packed MACHINE={machine} host/run.sh exited {r.returncode}: {out[-800:]}"
                       f"{r.stderr[-800:]}")
        for test in ("tcp_rr", "tcp_stream"):
            m = re.search(r'^RESULT (\{"test":"' + test + r'".*\})$', out, re.M)
            if not m:
                raise Fail(f"RING=packed MACHINE={machine} host/run.sh printed no {test} RESULT line: {out[-800:]}")
            res = json.loads(m.group(1))
            # RING_PACKED is feature bit 34 (virtio 1.2 6).
            if not res["variant"].endswith(",ring=packed") or not int(res["features"], 16) >> 34 & 1:
                raise Fail(f"{test} on {machine}: expected a packed variant with RING_PACKED negotiated: "
                           f"{res['variant']} features {res['features']}")
    r = subprocess.run(["bash", os.path.join(TOP, "host", "run.sh")], env=dict(env, RING="spilt"),
                       capture_output=True, text=True, timeout=30)
    if r.returncode != 2 or "RING must be split or packed" not in r.stderr:
        raise Fail(f"RING=spilt: expected exit 2 naming the choices, got {r.returncode}: {r.stderr[-300:]}")
    print(f"    make run RING=packed ({name}), MACHINE=pc and microvm: tcp_rr and tcp_stream RESULT lines with "
          "ring=packed (TCG, tap)")
