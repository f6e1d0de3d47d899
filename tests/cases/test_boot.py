"""Boot, banner, PCI, command line, exceptions and clock of the PVH kernel."""

import re

from lib import Fail

BANNER_FIELDS = ("boot", "accel", "tsc_khz", "tsc_cal", "mem_mib", "cpu", "cmdline")


def check_banner(g, boot):
    b = g.banner()
    missing = [f for f in BANNER_FIELDS if f not in b]
    if missing:
        raise Fail(f"banner lacks fields {missing}: {b}")
    if b["boot"] != boot:
        raise Fail(f"expected boot={boot}, banner says boot={b['boot']}")
    if b["accel"] not in ("tcg", "kvm"):
        raise Fail(f"expected accel=tcg or kvm under QEMU, banner says {b['accel']}")
    if not 400 <= int(b["mem_mib"]) <= 512:
        raise Fail(f"expected mem_mib in 400..512 for -m 512, banner says {b['mem_mib']}")
    if int(b["tsc_khz"]) < 100000:
        raise Fail(f"implausible tsc_khz={b['tsc_khz']}")
    return b


def test_pvh_pc(t):
    g = t.boot(machine="pc")
    g.expect_ok()
    check_banner(g, "pvh")
    g.expect(r"^vnetlab ready boot_us=\d+ pci=ports ")


def test_pvh_q35(t):
    g = t.boot(machine="q35")
    g.expect_ok()
    check_banner(g, "pvh")
    # q35 has an MCFG table, so configuration space goes through ECAM.
    g.expect(r"^vnetlab ready boot_us=\d+ pci=ecam ")


def test_virtio_net_modern_function(t):
    # disable-legacy=on: the modern-only device ID 0x1041, class network.
    for machine in ("pc", "q35"):
        g = t.boot(machine=machine)
        g.expect_ok()
        g.expect(r"^pci [0-9a-f]{2}:[0-9a-f]{2}\.\d 1af4:1041 class=020000$")
        g.expect_not(r"^pci .* 1af4:1000 ")


def test_cmdline_good_keys(t):
    g = t.boot(append="halt=0 test=none app=none")
    g.expect_ok()
    if g.banner()["cmdline"] != '"halt=0 test=none app=none"':
        raise Fail(f"banner cmdline is {g.banner()['cmdline']}, expected the given one")


def expect_usage_error(t, append, msg_pattern):
    g = t.boot(append=append)
    g.expect(r'^ERROR \{"where":"cmdline","msg":"' + msg_pattern)
    g.expect_not(r"^vnetlab ready")
    g.expect_status(2)


def test_cmdline_unknown_key(t):
    expect_usage_error(t, "halt=0 bogus=1", r"unknown key 'bogus'")


def test_cmdline_bad_value(t):
    expect_usage_error(t, "halt=7", r"bad value '7' for key 'halt' \(expected 0\|1\)")
    expect_usage_error(t, "app=nosuch", r"bad value 'nosuch' for key 'app'")


def test_cmdline_malformed_word(t):
    expect_usage_error(t, "justaword", r"malformed word 'justaword'")
    expect_usage_error(t, "halt=0 halt=1", r"key 'halt' given twice")


def test_exception_report(t):
    g = t.boot(append="test=fault", machine="q35")
    m = g.expect(r"^PANIC: exception vector=14 \(#PF\) error=0x[0-9a-f]+ rip=0x([0-9a-f]+) cr2=0x10000000000 ")
    tr = g.expect(r"^PANIC: trace( 0x[0-9a-f]+)+$")
    frames = tr.group(0).split()[2:]
    if frames[0] != "0x" + m.group(1) or len(frames) < 3:
        raise Fail(f"expected a trace starting at the faulting rip with callers, got {frames}")
    g.expect_status(3)


def test_clock_monotonic_and_calibrated(t):
    g = t.boot(append="test=clock", timeout=90)
    g.expect_ok()
    m = g.expect(r"^selftest clock samples=(\d+) backwards=(\d+)$")
    if int(m.group(2)) != 0:
        raise Fail(f"clock went backwards {m.group(2)} times in {m.group(1)} reads")
    marks = {}
    for ts, line in g.lines:
        mm = re.match(r"^selftest clock mark=(\d) ns=(\d+)$", line)
        if mm:
            marks[int(mm.group(1))] = (ts, int(mm.group(2)))
    if set(marks) != {0, 1}:
        raise Fail(f"expected clock marks 0 and 1, saw {sorted(marks)}")
    guest = (marks[1][1] - marks[0][1]) / 1e9
    host = marks[1][0] - marks[0][0]
    if guest < 1.0:
        raise Fail(f"guest interval {guest:.3f}s is shorter than the 1 s the test needs")
    if abs(guest - host) / host > 0.10:
        raise Fail(f"guest clock says {guest:.3f}s, host wall clock {host:.3f}s: more than 10% apart")
