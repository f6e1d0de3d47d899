"""Application processors (kernel/smp.c, kernel/smp_tramp.S): smp=N starts
N-1 of the CPUs the MADT lists with INIT-SIPI-SIPI, each runs a first
function handed to it (its own LAPIC id back), bad N and an AP that never
comes up end the boot with one ERROR line, never a hang."""

import os
import re
import subprocess
import tempfile
import time

from lib import BUILD, TOP, Fail, Skip

SMP_LINE = r"^smp cpu=(\d+) apic_id=(\d+) up_us=(\d+) stack=0x[0-9a-f]+ vector=0x[0-9a-f]+$"


def expect_cpus(g, n):
    g.expect_ok()
    ups = re.findall(SMP_LINE, "\n".join(g.text()), re.M)
    if [int(c) for c, _, _ in ups] != list(range(1, n)):
        raise Fail(f"expected one 'smp cpu=K' line for K=1..{n - 1}, saw {ups}")
    ids = {int(a) for _, a, _ in ups}
    if len(ids) != n - 1:
        raise Fail(f"expected {n - 1} distinct APIC ids, saw {ups}")
    g.expect(rf"^smp cpus={n} madt_cpus={n} trampoline=0x[0-9a-f]+$")
    # The AP lines come before the ready line: the app may count on them.
    txt = "\n".join(g.text())
    if txt.index("smp cpus=") > txt.index("vnetlab ready"):
        raise Fail("the smp summary must precede the ready line")


def expect_smp_usage_error(t, append, smp, msg, **kw):
    g = t.boot(append=append, extra=("-smp", str(smp)), **kw)
    g.expect(r'^ERROR \{"where":"cmdline","msg":"' + msg)
    g.expect_not(r"^vnetlab ready")
    g.expect_not(r"^smp cpu=")
    g.expect_status(2)
    return g


def test_smp_two_cpus_pc_and_four_on_q35(t):
    expect_cpus(t.boot(append="app=none smp=2", accel="tcg", extra=("-smp", "2")), 2)
    expect_cpus(t.boot(append="app=none smp=4", accel="tcg", machine="q35", extra=("-smp", "4")), 4)


def test_smp_default_is_one_cpu_and_silent(t):
    # More vCPUs than asked for: the default (smp=1) boots as before, no
    # line of its own, no LAPIC brought up for it.
    g = t.boot(append="app=none", accel="tcg", extra=("-smp", "2"))
    g.expect_ok()
    g.expect_not(r"^smp ")
    g.expect_not(r"^apic ")


def test_smp_bad_n_is_one_usage_error(t):
    expect_smp_usage_error(t, "app=none smp=3", 2, r"key 'smp': smp=3 but the MADT lists 2 usable CPUs")
    expect_smp_usage_error(t, "app=none smp=2", 1, r"key 'smp': smp=2 but the MADT lists 1 usable CPU \(")
    expect_smp_usage_error(t, "app=none smp=0", 2, r"bad value '0' for key 'smp' \(expected an integer 1\.\.16\)")
    expect_smp_usage_error(t, "app=none smp=17", 2, r"bad value '17' for key 'smp'")
    # No MADT at all (microvm without ACPI): said so.
    expect_smp_usage_error(t, "app=none smp=2", 2, r"key 'smp': smp=2 needs the ACPI MADT", machine="microvm,acpi=off")


def test_smp_ap_that_never_starts_is_an_error_not_a_hang(t):
    # smp.sipi=0 sends INIT but no STARTUP: the AP waits for a SIPI forever,
    # the BSP gives up after its bounded wait (1 s).
    t0 = time.monotonic()
    g = t.boot(append="app=none smp=2 smp.sipi=0", accel="tcg", extra=("-smp", "2"), timeout=30)
    dt = time.monotonic() - t0
    g.expect_run_error("smp", r"cpu 1 \(apic id 1\) did not come up within 1000 ms")
    g.expect_not(r"^vnetlab ready")
    if dt > 20:
        raise Fail(f"the bounded wait took {dt:.1f} s of wall time")


def test_smp_microvm(t):
    expect_cpus(t.boot(append="app=none smp=2", accel="tcg", machine="microvm", extra=("-smp", "2")), 2)


def test_smp_efi(t):
    efi_app = os.path.join(BUILD, "BOOTX64.EFI")
    if not os.path.exists(efi_app):
        raise Fail(f"{efi_app} missing: the runner builds it with `make all`")
    with tempfile.TemporaryDirectory() as d:
        img = os.path.join(d, "vnetlab.img")
        r = subprocess.run(["bash", os.path.join(TOP, "host", "mkimage.sh"), img, efi_app, "app=none smp=2"],
                           capture_output=True, text=True, timeout=60)
        if r.returncode:
            raise Fail(f"host/mkimage.sh failed ({r.returncode}): {r.stderr.strip()}")
        g = t.boot(image=img, timeout=60, extra=("-smp", "2"))
    if g.banner()["boot"] != "efi":
        raise Fail(f"expected boot=efi: {g.banner()}")
    expect_cpus(g, 2)


def test_smp_kvm_pvm_native_refused_emulated_works(t):
    if not os.path.exists("/dev/kvm"):
        raise Skip("no /dev/kvm")
    g = t.boot(append="app=none smp=2", accel="kvm", extra=("-smp", "2"), timeout=90)
    if g.banner()["kvm_mode"] != "native":
        raise Skip(f"KVM here is not kvm_pvm native (kvm_mode={g.banner()['kvm_mode']}): nothing refused")
    g.expect(r'^ERROR \{"where":"cmdline","msg":"key \'smp\': smp=2 is not supported in kvm_pvm\'s native mode')
    g.expect_status(2)
    g = t.boot(append="app=none smp=2 pvm=off", accel="kvm", extra=("-smp", "2"), timeout=90)
    if g.banner()["kvm_mode"] != "emulated":
        raise Fail(f"pvm=off must leave the vCPU emulated: {g.banner()}")
    expect_cpus(g, 2)
