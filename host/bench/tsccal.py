#!/usr/bin/env python3
"""host/bench/tsccal.py: the TSC calibration's accuracy. Boots the appliance
N times with the default PIT window and N times with the 40 ms reference
(clock.cal_ms=40) through host/qemu-run.sh, and prints how far each short
calibration is from the median of the long ones against the bound its
banner printed (tsc_err_ppm).

    python3 host/bench/tsccal.py [--machine pc|microvm|...] [--runs 10]

Exit status 1 if a short calibration lies outside its own bound plus the
reference's.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN = os.path.join(TOP, "host", "qemu-run.sh")


def boot(machine, append):
    r = subprocess.run([RUN, "--net", "none", "--machine", machine, "--timeout", "60", "--append", append],
                       capture_output=True, text=True, timeout=120)
    m = re.search(r"tsc_khz=(\d+) tsc_cal=(\w+) tsc_cal_us=(\d+) tsc_err_ppm=(\d+)", r.stdout)
    if not m or m.group(2) != "pit":
        sys.exit(f"tsccal: no PIT calibration in the banner ({r.stdout[:300]!r})")
    return int(m.group(1)), int(m.group(3)), int(m.group(4))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--machine", default="pc")
    ap.add_argument("--runs", type=int, default=10)
    a = ap.parse_args()
    long_ = [boot(a.machine, "app=none clock.cal_ms=40") for _ in range(a.runs)]
    short = [boot(a.machine, "app=none") for _ in range(a.runs)]
    ref = statistics.median(k for k, _, _ in long_)
    ref_ppm = max(p for _, _, p in long_)
    print(f"tsccal: 40 ms reference: {min(k for k, _, _ in long_)}-{max(k for k, _, _ in long_)} kHz, "
          f"median {ref:.0f}, bounds {min(p for _, _, p in long_)}-{ref_ppm} ppm")
    bad = 0
    for k, us, ppm in short:
        dev = (k - ref) * 1e6 / ref
        ok = abs(dev) <= ppm + ref_ppm
        bad += not ok
        print(f"tsccal: {k} kHz over {us} us: {dev:+.0f} ppm from the reference, bound {ppm} ppm: "
              f"{'ok' if ok else 'OUTSIDE'}")
    devs = [abs(k - ref) * 1e6 / ref for k, _, _ in short]
    print(f"tsccal: machine={a.machine} runs={a.runs} max |deviation| {max(devs):.0f} ppm, median "
          f"{statistics.median(devs):.0f} ppm, bounds {min(p for *_, p in short)}-{max(p for *_, p in short)} ppm, "
          f"windows {min(u for _, u, _ in short)}-{max(u for _, u, _ in short)} us, {bad} outside")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
