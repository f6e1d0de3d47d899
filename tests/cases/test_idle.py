"""The idle policies (issue 12; drivers/virtio/vnet_idle.c): IDLE=halt and
IDLE=adaptive with every TX_KICK policy pass TCP integrity and an RR run;
INTx when the device has no MSI-X vectors; a halted guest wakes on its
timer with no traffic at all and on an interrupt after a long silence; and
no wake-up is lost at a low, irregular request rate (every transaction
answered, and the guest's own lost_wakeups counter -- a timer wake with a
frame waiting and no interrupt for it -- stays 0)."""

import json
import os
import subprocess
import sys
import time

from lib import (BUILD, NS_GUEST_IP, linked_kernel, make_list, NS_HOST_IP, NS_PREFIX, TOP, Fail, echo_guest, json_line, netpeer,
                 stop_echo, wait_listening)

GUEST_NET = f"ip={NS_GUEST_IP}/{NS_PREFIX} backend=tap"
RR_PORT = 11111
IRREGULAR = [sys.executable, os.path.join(TOP, "tests", "tools", "irregular.py")]
HALT = "base-every-ei1-eager-inline-zc1-idle_halt"
POLL = "base-every-ei1-eager-inline-zc1"


def idle_variants():
    return make_list("VARIANT_IDLE_LINKED")


def halts(name):
    return "idle_halt" in name or "idle_adaptive" in name


def echo(t, ns, name, extra=()):
    return echo_guest(t, ns, linked_kernel(name), seconds=120, extra=extra)


def stop(ns, g):
    return json_line(stop_echo(ns, g), "IDLE")


def check_halted(name, idle, what):
    """A halting build halted and was woken by interrupts; a polling one
    never halted."""
    if halts(name):
        if idle["halts"] == 0 or idle["irqs_rx"] == 0:
            raise Fail(f"{name} {what}: expected halts and RX interrupts, IDLE says {idle}")
        if idle["lost_wakeups"]:
            raise Fail(f"{name} {what}: {idle['lost_wakeups']} lost wake-ups: {idle}")
        if "-rxc" in name and idle["coal_halts"] == 0:
            raise Fail(f"{name} {what}: RX_COALESCE build never waited for more than one frame: {idle}")
    elif idle["halts"] or idle["irqs_rx"] or idle["irq_mode"] != "none":
        raise Fail(f"{name} {what}: a polling build halted or took interrupts: {idle}")


def rr_client(t, ns, name, extra=(), irq="msix"):
    ns.popen(["sockperf", "server", "--tcp", "-i", NS_HOST_IP, "-p", str(RR_PORT)],
             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_listening(ns, "tcp", RR_PORT)
    g = t.boot(append=f"app=rr rr.peer={NS_HOST_IP} rr.seconds=1 rr.warmup=0 {GUEST_NET}",
               net=f"tap:{ns.tap}", ns=ns, timeout=60, kernel=linked_kernel(name), extra=extra)
    g.expect_ok()
    r = json_line(g, "RESULT")
    if r["transactions"] <= 0 or r["lost"] or r["errors"]:
        raise Fail(f"{name}: RR transactions {r['transactions']}, lost {r['lost']}, errors {r['errors']}")
    if halts(name) and (r["halts"] == 0 or r["irqs_rx"] == 0 or r["irq"] != irq):
        raise Fail(f"{name}: RR under a halt policy: irq={r['irq']} halts={r['halts']} irqs_rx={r['irqs_rx']}")
    if r["lost_wakeups"]:
        raise Fail(f"{name}: RR saw {r['lost_wakeups']} lost wake-ups, max latency "
                   f"{r['lat_max_ns'] / 1e6:.1f} ms")
    # Under TCG the guest's fences do not reach QEMU's I/O thread: every
    # re-arm must make its device register read (virtq_enable_cb_after()).
    idle = json_line(g, "IDLE")
    if halts(name) and r["accel"] == "tcg" and idle["dev_syncs"] < idle["halts"] + idle["arm_races"]:
        raise Fail(f"{name}: under TCG every re-arm reads a device register, IDLE says {idle}")
    return r


def test_idle_policies_integrity_and_rr_each_kick(t):
    """Every linked idle variant (halt and adaptive x every TX_KICK, halt
    without EVENT_IDX, and the pause relax): 8 MiB through the echo
    service with SHA-256 both ways, then a 1 s TCP RR against sockperf."""
    for name in idle_variants():
        with t.netns() as ns:
            g = echo(t, ns, name)
            res = netpeer(ns, ["tcp-integrity", NS_GUEST_IP, "7", str(8 << 20)], timeout=300)
            idle = stop(ns, g)
            check_halted(name, idle, "integrity")
        with t.netns() as ns:
            r = rr_client(t, ns, name)
        print(f"    {name}: 8 MiB intact at {res['mbps']} Mbit/s; RR {r['tps']} trans/s p50 "
              f"{r['lat_p50_ns'] / 1000:.1f} us, busy {r['busy_pct']} %, irqs/txn {r['irqs_per_txn']} "
              f"(TCG, tap)")


def test_halt_intx_without_msix(t):
    """vectors=0 (as the vhost-user backend runs): the halt build falls
    back to the INTx line and still serves RR and integrity."""
    extra = ["-global", "virtio-net-pci.vectors=0"]
    with t.netns() as ns:
        g = echo(t, ns, HALT, extra=extra)
        netpeer(ns, ["tcp-integrity", NS_GUEST_IP, "7", str(4 << 20)], timeout=300)
        idle = stop(ns, g)
        if idle["irq_mode"] != "intx" or idle["irqs_rx"] == 0:
            raise Fail(f"expected INTx interrupts with vectors=0, IDLE says {idle}")
        g.expect(r"^virtio-pci: intx line=\d+")
    with t.netns() as ns:
        rr_client(t, ns, HALT, extra=extra, irq="intx")


def test_halt_timer_wake_without_traffic(t):
    """A server whose client never comes: the halted guest ends with its
    ERROR line on time, woken only by its own timer, and spent the wait
    halted (the polling build, as a control, never halts)."""
    wait_s = 3
    for name in (HALT, POLL):
        with t.netns() as ns:
            t0 = time.monotonic()
            g = t.boot(append=f"app=rr rr.role=server rr.wait={wait_s} {GUEST_NET}", net=f"tap:{ns.tap}",
                       ns=ns, timeout=60, kernel=linked_kernel(name))
            took = time.monotonic() - t0
            g.expect(r'^ERROR \{"where":"rr","msg":"no request on TCP port \d+ within 3 s"\}')
            g.expect_status(1)
            idle = json_line(g, "IDLE")
            if took > wait_s + 15:
                raise Fail(f"{name}: the {wait_s} s wait took {took:.1f} s of wall time")
            if name == HALT:
                if idle["timer_wakes"] == 0 or idle["halted_us"] < wait_s * 1e6 * 0.8:
                    raise Fail(f"{name}: expected timer wake-ups and >= {0.8 * wait_s:.1f} s halted, IDLE {idle}")
            elif idle["halts"]:
                raise Fail(f"{name}: the polling build halted: {idle}")
            print(f"    {name}: ERROR after {took:.1f} s wall, halted {idle['halted_us'] / 1e6:.2f} s, "
                  f"{idle['timer_wakes']} timer wakes")


def test_halt_wakes_on_interrupt_after_long_silence(t):
    """10 s with no traffic at all, then traffic: the halted guest is
    woken by the RX interrupt and moves 1 MiB intact."""
    with t.netns() as ns:
        g = echo(t, ns, HALT)
        time.sleep(10)
        netpeer(ns, ["tcp-integrity", NS_GUEST_IP, "7", str(1 << 20)], timeout=120)
        idle = stop(ns, g)
        if idle["halted_us"] < 9e6 or idle["irqs_rx"] == 0 or idle["lost_wakeups"]:
            raise Fail(f"expected >= 9 s halted, RX interrupts and no lost wake-ups, IDLE says {idle}")


def test_halt_no_lost_wakeup_irregular_rate(t):
    """30 s of request/response at a low, irregular rate (exponential gaps,
    mean 20 ms, TCP and UDP mixed) under IDLE=halt: every transaction is
    answered, and no halt ended on the timer with a frame waiting."""
    with t.netns() as ns:
        g = echo(t, ns, HALT)
        r = ns.run(IRREGULAR + [NS_GUEST_IP, "7", "30", "20", "12"], timeout=120, capture_output=True,
                   text=True)
        lines = r.stdout.strip().splitlines()
        if not lines:
            raise Fail(f"irregular.py printed nothing: {r.stderr[-400:]}")
        res = json.loads(lines[-1])
        idle = stop(ns, g)
        if r.returncode or res["answered"] != res["sent"] or res["sent"] < 500:
            raise Fail(f"expected every one of >= 500 transactions answered: {res}")
        if idle["lost_wakeups"] or idle["irqs_rx"] < res["sent"] // 2:
            raise Fail(f"expected no lost wake-ups and an RX interrupt per transaction or so: {idle}, {res}")
        print(f"    {res['sent']} transactions ({res['tcp']} TCP, {res['udp']} UDP) all answered, p50 "
              f"{res['p50_us']} us p99 {res['p99_us']} us max {res['max_us']} us (TCG, tap); guest halts "
              f"{idle['halts']}, irqs_rx {idle['irqs_rx']}, timer wakes {idle['timer_wakes']}")


def test_halt_efi_boot(t):
    """The UEFI front-end with IDLE=halt: after ExitBootServices the LAPIC,
    PIC and MSI-X are ours; a server with no client halts on its timer and
    ends on time (slirp: no root needed)."""
    import tempfile
    out = os.path.join(BUILD, "idle-halt")
    r = subprocess.run(["make", "-s", "-j2", "IDLE=halt", f"O={out}", "efi"], cwd=TOP, capture_output=True,
                       text=True, timeout=900)
    if r.returncode:
        raise Fail(f"make IDLE=halt efi failed:\n{(r.stdout + r.stderr)[-1500:]}")
    with tempfile.TemporaryDirectory() as d:
        img = os.path.join(d, "halt.img")
        r = subprocess.run(["bash", os.path.join(TOP, "host", "mkimage.sh"), img, os.path.join(out, "BOOTX64.EFI"),
                            "app=rr rr.role=server rr.wait=2 backend=user"],
                           capture_output=True, text=True, timeout=60)
        if r.returncode:
            raise Fail(f"host/mkimage.sh failed: {r.stderr.strip()}")
        g = t.boot(image=img, timeout=90)
    if g.banner()["boot"] != "efi":
        raise Fail("expected an EFI boot")
    g.expect(r'^ERROR \{"where":"rr","msg":"no request on TCP port \d+ within 2 s"\}')
    g.expect_status(1)
    idle = json_line(g, "IDLE")
    if idle["irq_mode"] != "msix" or idle["timer_wakes"] == 0 or idle["halted_us"] < 1.6e6:
        raise Fail(f"expected MSI-X set up and >= 1.6 s halted on timer wakes, IDLE says {idle}")
