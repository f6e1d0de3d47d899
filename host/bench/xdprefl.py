"""xdprefl.py: the tap backend's reflector for pkt_rr, host/xdp/macswap.c
(XDP_TX with the Ethernet addresses swapped), built with clang and
attached with iproute2 (`ip link set dev TAP xdp obj ...`).

build() compiles it into build/xdp/ (once; again when the source is newer);
attach(wrap, tap) puts it on a tap inside a namespace (wrap: the
namespace's argv prefix) and detach() takes it off (the namespace's end
removes it too).
"""

import os
import shutil
import subprocess

from procs import BenchError

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = os.path.join(TOP, "host", "xdp", "macswap.c")
OBJ = os.path.join(TOP, "build", "xdp", "macswap.o")


def build():
    """The object file's path; BenchError saying why when it cannot be built."""
    if os.path.exists(OBJ) and os.path.getmtime(OBJ) >= os.path.getmtime(SRC):
        return OBJ
    if not shutil.which("clang"):
        raise BenchError("the XDP reflector needs clang (Debian package clang)")
    os.makedirs(os.path.dirname(OBJ), exist_ok=True)
    # linux/types.h wants asm/types.h, which Debian keeps under the
    # multiarch directory of the host's triplet.
    triplet = subprocess.run(["gcc", "-print-multiarch"], capture_output=True, text=True).stdout.strip()
    argv = ["clang", "-O2", "-g", "-Wall", "-Wextra", "-Werror", "-target", "bpf",
            f"-I/usr/include/{triplet or 'x86_64-linux-gnu'}", "-c", SRC, "-o", OBJ + ".tmp"]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if r.returncode:
        raise BenchError(f"building the XDP reflector failed: {' '.join(argv)}:\n{r.stderr[-600:]}")
    os.replace(OBJ + ".tmp", OBJ)
    return OBJ


def attach(wrap, tap):
    obj = build()
    r = subprocess.run(wrap(["ip", "link", "set", "dev", tap, "xdp", "obj", obj, "sec", "xdp"]),
                       capture_output=True, text=True, timeout=30)
    if r.returncode:
        raise BenchError(f"attaching the XDP reflector to {tap} failed: {r.stderr.strip()[-400:]}")


def detach(wrap, tap):
    subprocess.run(wrap(["ip", "link", "set", "dev", tap, "xdp", "off"]), capture_output=True, timeout=30)
