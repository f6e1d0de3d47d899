"""KVM: the accelerator choice of host/qemu-run.sh, and the appliance under
KVM where /dev/kvm works (hardware KVM, or this machine kind's kvm_pvm in
native mode: kernel/pvm.c). Where no KVM boots, the KVM runs are skipped
with qemu-run.sh's reason; the refusal itself is tested instead."""

import os
import re
import subprocess
import time

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


def test_kvm_cpu_probe_is_quiet(t):
    """qemu-run.sh's CPU probe: a QEMU that aborts on -cpu host (this
    machine kind's "failed to set MSR 0x10a", then SIGABRT) must leave
    nothing on the terminal but the one qemu-run line, which names the model
    taken and why. QEMU here is a wrapper that does exactly that for -cpu
    host and runs the real one otherwise; its own probe cache (TMPDIR)."""
    kvm_or_skip()
    import shutil
    import tempfile
    real = shutil.which("qemu-system-x86_64")
    with tempfile.TemporaryDirectory() as d:
        fake = os.path.join(d, "qemu-system-x86_64")
        with open(fake, "w") as f:
            f.write("#!/bin/bash\n"
                    'case " $* " in *" -cpu host "*)\n'
                    '  echo "qemu-system-x86_64: error: failed to set MSR 0x10a to 0x2000000e1" >&2\n'
                    '  echo "qemu-system-x86_64: ../../target/i386/kvm/kvm.c:3212: kvm_buf_set_msrs: '
                    "Assertion ret == cpu->kvm_msr_buf->nmsrs failed.\" >&2\n"
                    "  kill -ABRT $$ ;;\n"
                    "esac\n"
                    f'exec {real} "$@"\n')
        os.chmod(fake, 0o755)
        env = dict(os.environ, PATH=f"{d}:{os.environ['PATH']}", TMPDIR=d)
        r = subprocess.run([QEMU_RUN, "--accel", "kvm", "--append", "app=none", "--timeout", "30"],
                           capture_output=True, text=True, timeout=180, env=env)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    said = [ln for ln in lines if ln.startswith("qemu-run: accel=kvm")]
    if r.returncode != 0 or len(lines) != 1 or len(said) != 1:
        raise Fail(f"expected status 0 and exactly one qemu-run line on stderr, got status {r.returncode} "
                   f"and {len(lines)} lines:\n{r.stderr[-800:]}")
    m = re.search(r" cpu=(\S+) .*\(cpu: (.*)\)$", said[0])
    if not m or m.group(1) != "host,-arch-capabilities" or "MSR 0x10a" not in m.group(2):
        raise Fail(f"expected cpu=host,-arch-capabilities with the refused MSR as the reason: {said[0]}")
    print(f"    {said[0]}")


def kvm_boot(append, r=None):
    """Boot append under --accel kvm (or parse the finished boot r): r, the
    banner's kvm_mode and tsc_cal, and boot_us."""
    if r is None:
        r = subprocess.run([QEMU_RUN, "--accel", "kvm", "--append", append, "--timeout", "60"],
                           capture_output=True, text=True, timeout=120)
    m = re.search(r"^vnetlab boot=pvh accel=(\w+) kvm_mode=(\w+) .*tsc_cal=(\w+)", r.stdout, re.M)
    ready = re.search(r"^vnetlab ready boot_us=(\d+)", r.stdout, re.M)
    if r.returncode != 0 or not m or not ready or m.group(1) != "kvm":
        raise Fail(f"{append} under --accel kvm: expected a banner with accel=kvm and a ready line, "
                   f"status {r.returncode}:\n{r.stdout[:800]}{r.stderr[-300:]}")
    return r, m.group(2), m.group(3), int(ready.group(1))


def test_kvm_boot(t):
    """A plain boot under KVM: native wherever kvm_pvm is there (never
    emulated without pvm=off), the TSC rate from the hypervisor (no PIT
    loop), and under a third of the emulated boot's time in the same run.
    test=exits measures what one exit costs here (the floor every console
    byte and PCI config access pays: docs/kvm.md)."""
    r = kvm_or_skip()
    said = re.search(r"qemu-run: accel=kvm(?: kvm_mode=(\w+))? cpu=(\S+)", r.stderr)
    if not said:
        raise Fail(f"qemu-run.sh did not say which KVM CPU model it chose: {r.stderr[-300:]}")
    r, mode, cal, boot_us = kvm_boot("app=none", r)  # kvm_or_skip()'s boot
    if mode == "emulated":
        raise Fail("kvm_pvm present but the guest stayed emulated (kvm_mode=emulated) without pvm=off")
    line = f"    KVM: cpu={said.group(2)} kvm_mode={mode} tsc_cal={cal} boot_us={boot_us}"
    if mode == "native":
        if cal == "pit":
            raise Fail(f"kvm_mode=native but the TSC was calibrated against the PIT (tsc_cal={cal})")
        _, emode, _, emu_us = kvm_boot("app=none pvm=off")
        if emode != "emulated":
            raise Fail(f"pvm=off must keep the vCPU emulated, banner says kvm_mode={emode}")
        if boot_us * 3 > emu_us:
            raise Fail(f"native boot {boot_us} us is not under a third of the emulated boot's {emu_us} us")
        x, _, _, _ = kvm_boot("app=none test=exits")
        ex = re.search(r"^selftest exits accel=kvm kvm_mode=native outb_cycles=(\d+) inb_cycles=(\d+) "
                       r"outsb16_cycles=(\d+) cpuid_cycles=(\d+) outb_ns=(\d+)", x.stdout, re.M)
        if not ex:
            raise Fail(f"test=exits under KVM native printed no measurement:\n{x.stdout[-600:]}")
        line += (f" (emulated, pvm=off: {emu_us}); one exit: outb {int(ex.group(5)) / 1000:.1f} us, "
                 f"inb of the UART {ex.group(2)} cycles, 16-byte rep outsb {ex.group(3)} cycles")
    print(line)


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


def session_cpu_seconds(sid):
    """utime + stime of every process in one session (the guest's
    qemu-run.sh, QEMU and its threads)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid:  # field 6, session (after pid and comm)
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / tick


def halt_woken_by_rx(t, cpu, want_apic):
    """IDLE=halt under KVM (natively where kvm_pvm runs it) on one CPU
    model: the halted server uses under 5 % of a CPU while idle, is woken
    by the RX interrupt (MSI-X through the in-kernel irqchip) after 3 s of
    silence, moves 1 MiB intact, and loses no wake-up (natively at most 2,
    each ended by the halt's timer: a limit of this hypervisor)."""
    import json
    from lib import linked_kernel
    kvm_or_skip()
    halt = linked_kernel("base-every-ei1-eager-inline-zc1-idle_halt")
    with t.netns() as ns:
        g = t.start(append=f"app=echo ip={NS_GUEST_IP}/{NS_PREFIX} backend=tap echo.seconds=120",
                    net=f"tap:{ns.tap}", ns=ns, timeout=180, kernel=halt, accel="kvm", cpu=cpu)
        g.wait_line(r"^echo listening", timeout=30)
        time.sleep(1)  # past the boot and the first ARP
        c0, w0 = session_cpu_seconds(g.proc.pid), time.monotonic()
        time.sleep(3)
        idle_pct = 100 * (session_cpu_seconds(g.proc.pid) - c0) / (time.monotonic() - w0)
        res = netpeer(ns, ["tcp-integrity", NS_GUEST_IP, "7", str(MIB)], timeout=120)
        stop_echo(ns, g)
        idle = json.loads(g.expect(r"^IDLE (\{.*\})").group(1))
        apic = g.expect(r"^apic mode=(\S+) id=\d+ timer=(\S+)")
        mode = g.banner()["kvm_mode"]
        if g.banner()["accel"] != "kvm":
            raise Fail(f"expected accel=kvm, banner says {g.banner()}")
        if callable(want_apic):
            want_apic = want_apic(mode)
        if (apic.group(1), apic.group(2)) != want_apic:
            raise Fail(f"-cpu {cpu}: expected apic mode/timer {want_apic}, console says {apic.group(0)}")
        if res["sent_sha256"] != res["recv_sha256"]:
            raise Fail(f"1 MiB echo under KVM IDLE=halt: SHA-256 mismatch: {res}")
        # kvm_pvm's native mode sometimes leaves an MSI latched until the
        # halt's timer (kernel/pvm.c, docs/kvm.md): counted, bounded by
        # IDLE_HALT_MAX_US, at most 2 in this run; anywhere else none.
        allowed = 2 if mode == "native" else 0
        if idle["halts"] == 0 or idle["irqs_rx"] == 0 or idle["lost_wakeups"] > allowed:
            raise Fail(f"KVM ({mode}) IDLE=halt: expected halts, RX interrupts, at most {allowed} lost "
                       f"wake-ups: {idle}")
        if idle_pct >= 5:
            raise Fail(f"KVM ({mode}) IDLE=halt: the idle guest used {idle_pct:.1f} % of a CPU (want < 5 %)")
        print(f"    KVM ({mode}, -cpu {cpu}, {apic.group(1)}, {apic.group(2)}) IDLE=halt: idle {idle_pct:.1f} % "
              f"CPU, halts {idle['halts']}, irqs_rx {idle['irqs_rx']}, irq_mode {idle['irq_mode']}, "
              f"lost_wakeups {idle['lost_wakeups']}; 1 MiB intact")


def test_kvm_halt_x2apic_tsc_deadline(t):
    """x2APIC and the TSC-deadline timer (absent under QEMU 7.2's TCG).
    Under kvm_pvm's native mode the appliance declines both (with either
    an MSI sometimes did not end the halt: kernel/pvm.c) and must say
    mode=xapic timer=oneshot; on hardware KVM it uses them."""
    halt_woken_by_rx(t, "qemu64,+x2apic,+tsc-deadline",
                     lambda mode: ("xapic", "oneshot") if mode == "native" else ("x2apic", "tsc-deadline"))


def test_kvm_halt_xapic_oneshot(t):
    """The xAPIC by MMIO and its one-shot timer, as under TCG."""
    halt_woken_by_rx(t, "qemu64,-x2apic,-tsc-deadline", ("xapic", "oneshot"))


def test_kvm_exit_counters_on_ndr_pairs_memcached(t):
    """Issue 37 item 1 under --accel kvm: the NDR search's row per frame of
    its NDR trial (and each trial), a guest pair's rows per transaction on
    each side, memcached's per command, all from query-stats (their TCG
    runs say n/a: test_ndr, test_pairs, test_harness)."""
    kvm_or_skip()
    import json
    import shutil
    import sys
    from lib import BUILD, TOP, check_kvm_columns
    bench = [sys.executable, os.path.join(TOP, "host", "bench", "vnetbench.py"), "--quiet", "--accel", "kvm"]
    runs = {
        "ndr": ["--matrix", os.path.join(TOP, "host", "bench", "matrices", "ndr.txt"), "--tests", "ndr", "--variants",
                "base", "--guests", "vnetlab", "--backends", "tap", "--ndr-sizes", "64", "--ndr-trial", "1",
                "--ndr-max-rate", "4000"],
        "memcached": ["--tests", "memcached", "--variants", "default", "--guests", "vnetlab", "--backends", "tap",
                      "--seconds", "2", "--warmup", "1", "--repetitions", "1"],
        "pairs": ["--pairs", "default>default", "--tests", "tcp_rr", "--seconds", "2", "--warmup", "1",
                  "--repetitions", "1"],
    }
    said = []
    for name, args in runs.items():
        out = os.path.join(BUILD, "test-kvm-counters", name)
        shutil.rmtree(out, ignore_errors=True)
        r = subprocess.run(bench + args + ["--out", out], capture_output=True, text=True, timeout=600)
        path = os.path.join(out, "results.jsonl")
        rows = [json.loads(line) for line in open(path)] if os.path.exists(path) else []
        if r.returncode or len(rows) != 1 or rows[0]["status"] != "ok":
            raise Fail(f"{name} under --accel kvm: status {r.returncode}, rows "
                       f"{[(x.get('status'), x.get('error')) for x in rows]}\n{(r.stdout + r.stderr)[-800:]}")
        row = rows[0]
        if row["accel"] != "kvm":
            raise Fail(f"{name}: the row says accel={row['accel']}, expected kvm")
        if name == "pairs":
            for side in ("client_", "server_"):
                check_kvm_columns(row, "txn", side)
            said.append(f"pair tcp_rr {row['client_kvm_exits_per_txn']}/{row['server_kvm_exits_per_txn']} exits/txn")
        else:
            unit = "frame" if name == "ndr" else "txn"
            check_kvm_columns(row, unit)
            if name == "ndr" and not all(s.get("kvm_exits_per_frame") for s in row["ndr_steps"]):
                raise Fail(f"ndr: every trial carries kvm_exits_per_frame under KVM: {row['ndr_steps']}")
            if name == "ndr" and not (row.get("kvm_exits_per_mframe") or 0) > 0:
                raise Fail(f"ndr: no exits per million frames over the boot's trials (the ratio table's column): "
                           f"{ {k: v for k, v in row.items() if k.startswith('kvm_')} }")
            said.append(f"{name} {row[f'kvm_exits_per_{unit}']} exits/{unit}")
    print("    KVM: " + ", ".join(said))
