"""QEMU microvm (no PCI): the virtio-mmio transport (drivers/virtio/virtio_mmio.c,
virtio 1.2 section 4.2, version 2), found through ACPI (microvm's default)
and through the kernel command line (microvm,acpi=off); version 1 (legacy)
refused; boot, TCP integrity (SHA-256) and an RR run; the halt policy on
the 8259 line with acpi=off and on the I/O APIC with acpi=on."""

import os
import subprocess

from lib import (BUILD, NS_GUEST_IP, linked_kernel, NS_HOST_IP, NS_PREFIX, Fail, echo_guest, json_line, netpeer, stop_echo,
                 wait_listening)

MICROVMS = ("microvm", "microvm,acpi=off")
RR_PORT = 11111
HALT = "base-every-ei1-eager-inline-zc1-idle_halt"


def halt_kernel():
    return linked_kernel(HALT)


def test_microvm_boot_finds_the_nic_both_ways(t):
    for machine, source in (("microvm", "acpi"), ("microvm,acpi=off", "cmdline")):
        g = t.boot(machine=machine, append="app=arpping arp.count=50")
        g.expect_ok()
        g.expect(r"^vnetlab ready boot_us=\d+ pci=none pci_functions=0 mmio_devices=1$")
        g.expect(r"^mmio 0xfeb0[0-9a-f]+\+0x200 irq=\d+ level active-high from=" + source + "$")
        g.expect(r"^virtio-mmio: 0xfeb0[0-9a-f]+ version=2 device=1 ")
        g.expect(r"^virtio-mmio: queue 1 size=\d+")
        r = json_line(g, "RESULT")
        if r["count"] != 50:
            raise Fail(f"{machine}: expected 50 ARP round trips, RESULT says {r['count']}")
        if machine == "microvm" and "virtio_mmio.device=" in g.banner()["cmdline"]:
            raise Fail("microvm with ACPI put the device on the command line too: the ACPI path went untested")


def test_microvm_legacy_version_1_refused(t):
    # QEMU's own default for virtio-mmio is the legacy interface; the later
    # -global wins over qemu-run.sh's force-legacy=false.
    g = t.boot(machine="microvm", append="app=arpping",
               extra=["-global", "virtio-mmio.force-legacy=true"])
    g.expect(r'^ERROR \{"where":"virtio-net","msg":"virtio-mmio device at 0x[0-9a-f]+ has Version 1: '
             r'only version 2 ')
    g.expect_status(1)


def test_microvm_cmdline_window_errors(t):
    g = t.boot(machine="microvm", append="app=none virtio_mmio.device=512@nowhere")
    g.expect(r"bad value '512@nowhere' for key 'virtio_mmio.device'")
    g.expect_status(2)
    # Two windows (one without a device behind it): both listed, the NIC found.
    g = t.boot(machine="microvm,acpi=off", append="app=arpping arp.count=10 virtio_mmio.device=512@0xfeb00000:5")
    g.expect_ok()
    g.expect(r"mmio_devices=2$")


def test_microvm_tcp_integrity_and_rr(t):
    for machine in MICROVMS:
        with t.netns() as ns:
            g = echo_guest(t, ns, seconds=120, machine=machine)
            res = netpeer(ns, ["tcp-integrity", NS_GUEST_IP, "7", str(16 << 20)], timeout=300)
            if res["sent_sha256"] != res["recv_sha256"]:
                raise Fail(f"{machine}: SHA-256 mismatch: {res}")
            stop_echo(ns, g)
        with t.netns() as ns:
            ns.popen(["sockperf", "server", "--tcp", "-i", NS_HOST_IP, "-p", str(RR_PORT)],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wait_listening(ns, "tcp", RR_PORT)
            g = t.boot(machine=machine, net=f"tap:{ns.tap}", ns=ns, timeout=60,
                       append=f"app=rr rr.peer={NS_HOST_IP} rr.seconds=1 rr.warmup=0 "
                              f"ip={NS_GUEST_IP}/{NS_PREFIX} backend=tap")
            g.expect_ok()
            r = json_line(g, "RESULT")
            if r["transactions"] <= 0 or r["lost"] or r["errors"]:
                raise Fail(f"{machine}: RR transactions {r['transactions']}, lost {r['lost']}, errors {r['errors']}")
        print(f"    {machine}: 16 MiB intact at {res['mbps']} Mbit/s; RR {r['tps']} trans/s p50 "
              f"{r['lat_p50_ns'] / 1000:.1f} us (TCG, tap)")


def test_microvm_halt_on_the_8259_line_and_the_io_apic(t):
    """acpi=off wires virtio-mmio to GSIs 5-12, which reach the 8259; with
    acpi=on (microvm's default) the GSIs are 24-47 on a second I/O APIC
    that the MADT lists and kernel/ioapic.c programs (level, active high,
    as the DSDT's Extended Interrupt descriptor says). Either way the halt
    build halts, is woken by the device's interrupt and moves 4 MiB
    intact."""
    for machine, route in (("microvm,acpi=off", r"irq line=\d+ \(8259\)"),
                           ("microvm", r"irq gsi=(2[4-9]|3\d|4[0-7]) vector=0x[0-9a-f]+ \(ioapic\)")):
        with t.netns() as ns:
            g = echo_guest(t, ns, kernel=halt_kernel(), seconds=120, machine=machine)
            res = netpeer(ns, ["tcp-integrity", NS_GUEST_IP, "7", str(4 << 20)], timeout=300)
            if res["sent_sha256"] != res["recv_sha256"]:
                raise Fail(f"{machine}: SHA-256 mismatch: {res}")
            idle = json_line(stop_echo(ns, g), "IDLE")
            if idle["irq_mode"] != "line" or idle["halts"] == 0 or idle["irqs_rx"] == 0 or idle["lost_wakeups"]:
                raise Fail(f"{machine}: expected halts woken by the virtio-mmio interrupt, IDLE says {idle}")
            g.expect(r"^virtio-mmio: " + route + "$")
            if machine == "microvm":
                g.expect(r"^ioapic id=\d+ at 0xfec[0-9a-f]+ gsi=24-47$")
                g.expect(r"^ioapic id=\d+ pin=\d+ gsi=\d+ vector=0x[0-9a-f]+ level active-high$")
            print(f"    {machine}: 4 MiB intact, {idle['halts']} halts, {idle['irqs_rx']} RX interrupts "
                  f"(TCG, tap)")
