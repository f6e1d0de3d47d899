#!/usr/bin/env python3
"""host/bench/boottime.py: how long from starting the QEMU process to the
appliance's ready line, and the guest's own boot_us, over N boots.

    python3 host/bench/boottime.py [--machine pc|q35|microvm|microvm,acpi=off]
        [--runs 10] [--kernel build/vnetlab.elf] [--append app=none] [--nic]

QEMU is started directly (no host/qemu-run.sh, whose bash start-up is not
QEMU's), with the flags qemu-run.sh gives it under TCG: -accel tcg -cpu
qemu64 -m 512 -nodefaults, isa-debug-exit, PVH -kernel; --nic adds the NIC
as qemu-run.sh would (slirp). Each boot has a hard timeout. Prints one line
per boot and the medians; exits non-zero if a boot did not reach its ready
line or did not exit with status 0.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import time

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def qemu_argv(a):
    argv = ["qemu-system-x86_64", "-M", a.machine, "-accel", "tcg", "-cpu", "qemu64", "-m", "512",
            "-nodefaults", "-display", "none", "-no-reboot", "-serial", "stdio", "-monitor", "none",
            "-device", "isa-debug-exit", "-kernel", a.kernel, "-append", a.append]
    if a.nic:
        if a.machine.startswith("microvm"):
            argv += ["-global", "virtio-mmio.force-legacy=false", "-netdev", "user,id=n0",
                     "-device", "virtio-net-device,netdev=n0"]
        else:
            argv += ["-netdev", "user,id=n0", "-device", "virtio-net-pci,netdev=n0,disable-legacy=on,romfile="]
    return argv


def one(argv, timeout):
    t0 = time.monotonic()
    p = subprocess.Popen(["timeout", "--kill-after=5", str(timeout)] + argv, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    ready_s, boot_us, status = None, None, None
    for raw in p.stdout:
        line = raw.decode("utf-8", "replace")
        if ready_s is None:
            m = re.search(r"vnetlab ready boot_us=(\d+)", line)
            if m:
                ready_s, boot_us = time.monotonic() - t0, int(m.group(1))
        m = re.search(r"vnetlab exit status=(\d+)", line)
        if m:
            status = int(m.group(1))
    p.wait()
    return ready_s, boot_us, status, time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--machine", default="microvm")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--kernel", default=os.path.join(TOP, "build", "vnetlab.elf"))
    ap.add_argument("--append", default="app=none")
    ap.add_argument("--nic", action="store_true")
    ap.add_argument("--timeout", type=int, default=30)
    a = ap.parse_args()
    argv = qemu_argv(a)
    ready, guest, total, bad = [], [], [], 0
    for i in range(a.runs):
        r, b, st, t = one(argv, a.timeout)
        if r is None or st != 0:
            bad += 1
            print(f"boot {i + 1}: no ready line or status {st} (after {t * 1000:.1f} ms)")
            continue
        ready.append(r * 1000)
        guest.append(b / 1000)
        total.append(t * 1000)
        print(f"boot {i + 1}: QEMU start -> ready {r * 1000:.1f} ms, guest boot_us {b}, "
              f"QEMU start -> exit {t * 1000:.1f} ms")
    if ready:
        print(f"boottime: machine={a.machine} accel=tcg runs={len(ready)} median: QEMU start -> ready "
              f"{statistics.median(ready):.1f} ms (min {min(ready):.1f}, max {max(ready):.1f}), guest boot "
              f"{statistics.median(guest):.2f} ms (min {min(guest):.2f}, max {max(guest):.2f}), start -> exit "
              f"{statistics.median(total):.1f} ms")
    return 1 if bad or not ready else 0


if __name__ == "__main__":
    sys.exit(main())
