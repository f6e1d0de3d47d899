"""KVM: the accelerator choice of host/qemu-run.sh, and the appliance under
KVM where /dev/kvm works (hardware KVM, or this machine kind's kvm_pvm in
native mode: kernel/pvm.c). Where no KVM boots, the KVM runs are skipped
with qemu-run.sh's reason; the refusal itself is tested instead."""

import os
import re
import subprocess

from lib import NS_GUEST_IP, NS_PREFIX, QEMU_RUN, Fail, Skip, echo_guest, netpeer, stop_echo

MIB = 1 << 20


def kvm_or_skip():
    """qemu-run.sh's own probe: its KVM CPU model and kvm_mode, or Skip."""
    r = subprocess.run([QEMU_RUN, "--accel", "kvm", "--append", "app=none", "--timeout", "30"],
                       capture_output=True, text=True, timeout=120)
    m = re.search(r"qemu-run: error: --accel kvm: (.*)", r.stderr)
    if m:
        raise Skip(f"no KVM here: {m.group(1)}")
    if r.returncode != 0:
        raise Fail(f"a plain boot under --accel kvm failed (status {r.returncode}): {r.stderr[-400:]}")
    return r


def test_kvm_refused_with_the_reason_where_absent(t):
    if os.path.exists("/dev/kvm"):
        raise Skip("this host has /dev/kvm: the refusal path is not reachable")
    r = subprocess.run([QEMU_RUN, "--accel", "kvm", "--append", "app=none"], capture_output=True, text=True,
                       timeout=60)
    if r.returncode != 125 or "qemu-run: error: --accel kvm: /dev/kvm does not exist" not in r.stderr:
        raise Fail(f"--accel kvm without /dev/kvm: expected status 125 and the reason, got {r.returncode}: "
                   f"{r.stderr[-300:]}")
    # auto falls back to TCG and the guest says so.
    g = t.boot(append="app=none")
    g.expect_ok()
    if g.banner()["accel"] != "tcg" or g.banner()["kvm_mode"] != "none":
        raise Fail(f"auto without KVM must boot TCG with kvm_mode=none: {g.banner()}")


def test_kvm_boot(t):
    r = kvm_or_skip()
    m = re.search(r"^vnetlab boot=pvh accel=(\w+) kvm_mode=(\w+) .*tsc_cal=(\w+)", r.stdout, re.M)
    ready = re.search(r"^vnetlab ready boot_us=(\d+)", r.stdout, re.M)
    if not m or not ready or m.group(1) != "kvm":
        raise Fail(f"expected a banner with accel=kvm and a ready line, got:\n{r.stdout[:800]}")
    mode, cal, boot_us = m.group(2), m.group(3), int(ready.group(1))
    said = re.search(r"qemu-run: accel=kvm(?: kvm_mode=(\w+))? cpu=(\S+)", r.stderr)
    if not said:
        raise Fail(f"qemu-run.sh did not say which KVM CPU model it chose: {r.stderr[-300:]}")
    if mode == "emulated":
        raise Fail("kvm_pvm present but the guest stayed emulated (kvm_mode=emulated) without pvm=off")
    if mode == "native" and (cal == "pit" or boot_us > 100_000):
        # Native mode: the TSC rate comes from the hypervisor, and an
        # emulated boot (~600 ms) is an order of magnitude away.
        raise Fail(f"kvm_mode=native but tsc_cal={cal}, boot_us={boot_us}")
    print(f"    KVM: cpu={said.group(2)} kvm_mode={mode} tsc_cal={cal} boot_us={boot_us}")


def test_kvm_udp_rr_and_8mib_echo(t):
    kvm_or_skip()
    with t.netns() as ns:
        g = echo_guest(t, ns, seconds=120, accel="kvm")
        res = netpeer(ns, ["tcp-integrity", NS_GUEST_IP, "7", str(8 * MIB)], timeout=300)
        if res["sent_sha256"] != res["recv_sha256"]:
            raise Fail(f"8 MiB echo under KVM: SHA-256 mismatch: {res}")
        stop_echo(ns, g)
        if g.banner()["accel"] != "kvm":
            raise Fail(f"expected accel=kvm, banner says {g.banner()}")
        srv = t.start(append=f"app=rr rr.role=server rr.proto=udp rr.warmup=1 ip={NS_GUEST_IP}/{NS_PREFIX} "
                             "backend=tap", net=f"tap:{ns.tap}", ns=ns, timeout=90, accel="kvm")
        srv.wait_line(r"^rr server listening", timeout=30)
        r = ns.run(["sockperf", "ping-pong", "-i", NS_GUEST_IP, "-p", "11111", "-m", "64", "-t", "4",
                    "--full-rtt"], timeout=60, capture_output=True, text=True)
        srv.wait()
        srv.expect_ok()
        srv.expect(r'^RESULT \{"test":"udp_rr","role":"server".*"accel":"kvm"')
        p50 = re.search(r"percentile 50.000 =\s+([\d.]+)", r.stdout)
        print(f"    KVM ({g.banner()['kvm_mode']}): 8 MiB echo {res['mbps']} Mbit/s, UDP RR p50 "
              f"{p50.group(1) if p50 else '?'} us (tap)")


def test_accel_axis_expands(t):
    """host/bench/matrices/accel.txt: every column once per accelerator,
    the appliance's QEMU asked for that accelerator (no QEMU runs here)."""
    import sys
    from lib import TOP
    sys.path.insert(0, os.path.join(TOP, "host", "bench"))
    import guests
    import matrix
    import variants
    from procs import BenchError

    s, defs = matrix.parse_file(os.path.join(TOP, "host", "bench", "matrices", "accel.txt"))
    m = matrix.Matrix(s, defs, variants.resolve, list(guests.KINDS))
    runs = m.runs()
    cols = sorted({(r.column, r.accel) for r in runs})
    want = sorted((f"{v}@{a}", a) for v in ("base", "v1", "v2", "v3") for a in ("tcg", "kvm"))
    if cols != want or m.baseline != "base@tcg":
        raise Fail(f"accel.txt columns {cols} (baseline {m.baseline}), expected {want} with base@tcg")
    for bad in ("tcg tcg", "xen", ""):
        s2 = dict(s, accel=bad)
        try:
            matrix.Matrix(s2, defs, variants.resolve, list(guests.KINDS))
        except BenchError:
            continue
        raise Fail(f"accel = '{bad}' must be refused")
