"""A device behind the platform's DMA translation (issue 23 finding 1;
virtio 1.2 6.1 VIRTIO_F_ACCESS_PLATFORM): QEMU's virtio-net-pci with
iommu_platform=on offers ACCESS_PLATFORM and refuses FEATURES_OK
(virtio_validate_features()) from a driver that declines it. The appliance
accepts it and keeps identity DMA addresses, which is right while no IOMMU
translation is enabled: on pc (no IOMMU at all) and on q35 with
-device intel-iommu present but its DMA remapping never turned on by the
guest. Each serves 8 MiB SHA-256-checked through the echo service and a
1 s TCP RR against sockperf, every transaction answered."""

import subprocess

from lib import NS_GUEST_IP, NS_HOST_IP, NS_PREFIX, Fail, json_line, netpeer, per_queue, wait_listening

GUEST_NET = f"ip={NS_GUEST_IP}/{NS_PREFIX} backend=tap"
RR_PORT = 11113
NIC = "iommu_platform=on"
# (machine, extra QEMU arguments): intel-iommu needs q35 (a PCIe host bridge).
SETUPS = [("pc", ()), ("q35", ("-device", "intel-iommu"))]


def check_access_platform(g, what):
    m = g.expect(r"^virtio-net: features=0x([0-9a-f]+) \(([A-Z_0-9,]+)\) offered=0x([0-9a-f]+)$")
    # ACCESS_PLATFORM is feature bit 33 (virtio 1.2 6).
    if not int(m.group(3), 16) >> 33 & 1:
        raise Fail(f"{what}: the device with {NIC} does not offer ACCESS_PLATFORM: {m.group(0)}")
    if "ACCESS_PLATFORM" not in m.group(2).split(",") or not int(m.group(1), 16) >> 33 & 1:
        raise Fail(f"{what}: ACCESS_PLATFORM offered but not negotiated: {m.group(0)}")
    g.expect_not(r"^DEVICE_FAULT")
    c = per_queue(g, "COUNTERS")
    if c["tx"]["device_errors"] or c["rx"]["device_errors"]:
        raise Fail(f"{what}: device errors {c}")


def test_access_platform_integrity_and_rr(t):
    for machine, extra in SETUPS:
        what = f"{machine}{' + ' + ' '.join(extra) if extra else ''}, {NIC}"
        with t.netns() as ns:
            g = t.start(append=f"app=echo echo.seconds=120 {GUEST_NET}", net=f"tap:{ns.tap}", ns=ns, timeout=180,
                        machine=machine, extra=extra, nic_opts=NIC)
            g.wait_line(r"^echo listening", timeout=30)
            res = netpeer(ns, ["tcp-integrity", NS_GUEST_IP, "7", str(8 << 20)], timeout=300)
            if not res["ok"] or res["sent_sha256"] != res["recv_sha256"] or res["received"] != 8 << 20:
                raise Fail(f"{what}: echo returned {res['received']} bytes, sha256 {res['recv_sha256']}, "
                           f"sent {res['sent_sha256']}, errors {res['errors']}")
            netpeer(ns, ["stop", NS_GUEST_IP], timeout=20)
            g.wait()
            g.expect_ok()
            check_access_platform(g, f"echo on {what}")
        with t.netns() as ns:
            ns.popen(["sockperf", "server", "--tcp", "-i", NS_HOST_IP, "-p", str(RR_PORT)],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wait_listening(ns, "tcp", RR_PORT)
            g = t.boot(append=f"app=rr rr.peer={NS_HOST_IP} rr.port={RR_PORT} rr.seconds=1 rr.warmup=0 {GUEST_NET}",
                       net=f"tap:{ns.tap}", ns=ns, timeout=60, machine=machine, extra=extra, nic_opts=NIC)
            g.expect_ok()
            check_access_platform(g, f"rr on {what}")
            r = json_line(g, "RESULT")
            if r["transactions"] <= 0 or r["lost"] or r["errors"]:
                raise Fail(f"{what}: RR transactions {r['transactions']}, lost {r['lost']}, errors {r['errors']}")
        print(f"    {what}: ACCESS_PLATFORM negotiated, 8 MiB intact at {res['mbps']} Mbit/s, RR {r['tps']} "
              f"trans/s p50 {r['lat_p50_ns'] / 1000:.1f} us (TCG, tap)")
