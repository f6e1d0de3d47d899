#!/usr/bin/env python3
"""host/bench/boottime.py: how long from starting the QEMU process to the
appliance's ready line, and the guest's own boot_us, over N boots.

    python3 host/bench/boottime.py [--machine pc|q35|microvm|microvm,acpi=off]
        [--runs 10] [--kernel build/vnetlab.elf ...] [--append app=none] [--nic]
        [--accel tcg|kvm] [--cpu MODEL] [--phases] [--bios default|PATH ...]

QEMU is started directly (no host/qemu-run.sh, whose bash start-up is not
QEMU's), with the flags qemu-run.sh gives it: -accel tcg -cpu qemu64 (or
-accel kvm -cpu host, qemu-run.sh's first choice under KVM; --cpu
overrides) -m 512 -nodefaults, isa-debug-exit, PVH -kernel; --nic adds the
NIC as qemu-run.sh would (slirp). Each boot has a hard timeout. Several
--kernel are booted in turn (a, b, a, b, ...: a before/after comparison in
one run); likewise several --bios (firmware: `default` is the machine's
own, SeaBIOS on pc and q35; /usr/share/qemu/qboot.rom is QEMU's minimal
one, docs/kvm.md "Boot to ready"), each kernel with each firmware.
--phases appends boot.phases=1 and prints the median of each
boot step (kernel/main.c's marks, from the guest's TSC). Prints one line
per boot and the medians per kernel; exits non-zero if a boot did not
reach its ready line or did not exit with status 0.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import time

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def qemu_argv(a, kernel, bios="default"):
    cpu = a.cpu or ("host" if a.accel == "kvm" else "qemu64")
    append = a.append + (" boot.phases=1" if a.phases else "")
    argv = ["qemu-system-x86_64", "-M", a.machine, "-accel", a.accel, "-cpu", cpu, "-m", "512",
            "-nodefaults", "-display", "none", "-no-reboot", "-serial", "stdio", "-monitor", "none",
            "-device", "isa-debug-exit", "-kernel", kernel, "-append", append]
    if bios != "default":
        argv += ["-bios", bios]
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
    ready_s, boot_us, status, phases = None, None, None, {}
    for raw in p.stdout:
        line = raw.decode("utf-8", "replace")
        if ready_s is None:
            m = re.search(r"vnetlab ready boot_us=(\d+)", line)
            if m:
                ready_s, boot_us = time.monotonic() - t0, int(m.group(1))
        if line.startswith("boot phases_us "):
            phases = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line)}
        m = re.search(r"vnetlab exit status=(\d+)", line)
        if m:
            status = int(m.group(1))
    p.wait()
    return ready_s, boot_us, status, time.monotonic() - t0, phases


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--machine", default="microvm")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--kernel", action="append", help="repeatable (default build/vnetlab.elf)")
    ap.add_argument("--append", default="app=none")
    ap.add_argument("--nic", action="store_true")
    ap.add_argument("--accel", choices=("tcg", "kvm"), default="tcg")
    ap.add_argument("--cpu", help="-cpu MODEL (default qemu64 under TCG, host under KVM)")
    ap.add_argument("--phases", action="store_true", help="append boot.phases=1, print each step's median")
    ap.add_argument("--timeout", type=int, default=30)
    ap.add_argument("--bios", action="append", help="repeatable: default (the machine's firmware) or a ROM path")
    a = ap.parse_args()
    if a.accel == "kvm" and not os.access("/dev/kvm", os.R_OK | os.W_OK):
        print("boottime: --accel kvm needs a usable /dev/kvm", file=sys.stderr)
        return 2
    for f in a.bios or []:
        if f != "default" and not os.path.isfile(f):
            print(f"boottime: --bios {f}: no such file", file=sys.stderr)
            return 2
    combos = [(k, f) for k in (a.kernel or [os.path.join(TOP, "build", "vnetlab.elf")])
              for f in (a.bios or ["default"])]
    got = {c: {"ready": [], "guest": [], "total": [], "phases": []} for c in combos}
    bad = 0
    for i in range(a.runs):
        for c in combos:
            k = c
            r, b, st, t, ph = one(qemu_argv(a, *c), a.timeout)
            tag = f" [{c[0]}, bios {c[1]}]" if len(combos) > 1 else ""
            if r is None or st != 0:
                bad += 1
                print(f"boot {i + 1}{tag}: no ready line or status {st} (after {t * 1000:.1f} ms)")
                continue
            g = got[k]
            g["ready"].append(r * 1000)
            g["guest"].append(b / 1000)
            g["total"].append(t * 1000)
            g["phases"].append(ph)
            print(f"boot {i + 1}{tag}: QEMU start -> ready {r * 1000:.1f} ms, guest boot_us {b}, "
                  f"QEMU start -> exit {t * 1000:.1f} ms")
    for k in combos:
        g = got[k]
        if not g["ready"]:
            continue
        ready, guest, total = g["ready"], g["guest"], g["total"]
        print(f"boottime: kernel={k[0]} bios={k[1]} machine={a.machine} accel={a.accel} runs={len(ready)} median: QEMU "
              f"start -> ready {statistics.median(ready):.1f} ms (min {min(ready):.1f}, max {max(ready):.1f}), "
              f"guest boot {statistics.median(guest):.2f} ms (min {min(guest):.2f}, max {max(guest):.2f}), "
              f"start -> exit {statistics.median(total):.1f} ms")
        steps = [n for n in g["phases"][0]] if g["phases"] and g["phases"][0] else []
        if steps:
            print("boottime: phases_us median " + " ".join(
                f"{n}={statistics.median(p.get(n, 0) for p in g['phases']):.0f}" for n in steps))
    return 1 if bad or not any(got[c]["ready"] for c in combos) else 0


if __name__ == "__main__":
    sys.exit(main())
