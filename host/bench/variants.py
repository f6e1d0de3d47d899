"""variants.py: driver variants -- their names, their make variables, and
building each one once into its own directory.

A variant is a set of make variables (TX_RECLAIM=v2 TX_KICK=burst ...,
mk/variants.mk turns them into drivers/virtio/vnet_policy.h's macros).
`default` is the build with no variables; a name in the makefile's scheme
(base-every-ei1-eager-inline-zc1: reclaim, kick, event index, avail
publication, header, zero copy, then optional -off_none|-off_csum|-off_tso
(OFFLOAD=; without one the default level, lro), -mrg, -nd, -packed
(RING=packed)) means its variables; a matrix file can define more under any name (`variant NAME =
VARS`). Each is built with

    make O=build/variants/NAME VARS... pvh

so two variants never share objects, and an unchanged variant costs one
make invocation that does nothing.
"""

import fcntl
import os
import re
import time

import procs
from procs import BenchError

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VARIANTS_MK = os.path.join(TOP, "mk", "variants.mk")
BUILD_TIMEOUT = 900

# Policy make variables, used when the variants makefile cannot be read.
FALLBACK_VARS = ("TX_RECLAIM", "TX_KICK", "EVENT_IDX", "AVAIL_PUBLISH", "TXHDR", "ZEROCOPY",
                 "RECLAIM_K", "LAZY_THRESH", "KICK_BURST_MAX", "KICK_TIMER_US", "QUEUE_MAX", "MRG_RXBUF",
                 "OFFLOAD", "NOTIFICATION_DATA")


def _mk_text():
    try:
        return open(VARIANTS_MK).read()
    except OSError:
        return ""


def policy_vars():
    """Make variables a variant may set: those mk/variants.mk turns into
    -D flags (`ifdef VAR` blocks and `$(if $(VAR),-D...)` numbers)."""
    text = _mk_text()
    found = set(re.findall(r"^ifdef ([A-Z][A-Z0-9_]*)", text, re.M))
    found |= set(re.findall(r"\$\(if \$\(([A-Z][A-Z0-9_]*)\),-D", text))
    return sorted(found) if found else list(FALLBACK_VARS)


def _mk_list(name, default):
    m = re.search(rf"^{name}\s*:?=\s*(.*)$", _mk_text(), re.M)
    return m.group(1).split() if m else list(default)


SCHEME = "RECLAIM-KICK-ei0|1-eager|batched-inline|chain-zc0|1[-off_none|-off_csum|-off_tso][-mrg][-nd][-packed]"


def from_scheme(name):
    """Make variables of a name in mk/variants.mk's scheme, e.g.
    base-every-ei1-eager-inline-zc1 (-off_LEVEL, -mrg, -nd, -packed optional), or None."""
    reclaims = "|".join(_mk_list("VARIANT_RECLAIMS", ("base", "v0", "v1", "v2", "v3", "after", "lazy", "poll")))
    kicks = "|".join(_mk_list("VARIANT_KICKS", ("every", "burst", "deferred", "timer")))
    m = re.fullmatch(rf"({reclaims})-({kicks})-ei([01])-(eager|batched)-(inline|chain)-zc([01])((?:-off_none|-off_csum|-off_tso|-mrg|-nd|-packed)*)", name)
    if not m:
        return None
    out = [f"TX_RECLAIM={m.group(1)}", f"TX_KICK={m.group(2)}", f"EVENT_IDX={m.group(3)}",
           f"AVAIL_PUBLISH={m.group(4)}", f"TXHDR={m.group(5)}", f"ZEROCOPY={m.group(6)}"]
    extra = m.group(7).split("-")[1:]
    for flag in extra:
        if flag.startswith("off_"):
            out.append(f"OFFLOAD={flag[4:]}")
    for flag, var in (("mrg", "MRG_RXBUF"), ("nd", "NOTIFICATION_DATA")):
        if flag in extra:
            out.append(f"{var}=1")
    if "packed" in extra:
        out.append("RING=packed")
    return " ".join(out)


def is_packed(vars_text):
    """Whether a variant's make variables build the packed ring (RING=packed:
    the device must offer it, QEMU's packed=on)."""
    ring = [w.split("=", 1)[1] for w in (vars_text or "").split() if w.startswith("RING=")]
    return bool(ring) and ring[-1] == "packed"


# QEMU arguments that make the NIC offer the packed ring (virtio 1.2 2.8):
# packed is a property of the virtio device itself, so one -global on its
# type reaches every NIC on either transport, whoever creates it:
# virtio-net-pci's inner device and microvm's virtio-mmio one (both are
# virtio-net-device), the one host/qemu-run.sh makes and the ones backends
# pass with -device.
PACKED_QEMU_ARGS = ["-global", "virtio-net-device.packed=on"]


def resolve(name):
    """Make variables of a named variant, or None if the name means nothing:
    `default` (the header's defaults) or a name in the makefile's scheme."""
    if name == "default":
        return ""
    return from_scheme(name)


def known_description():
    return f"default, or a name in mk/variants.mk's scheme {SCHEME} (e.g. base-every-ei1-eager-inline-zc1)"


def parse_vars(name, text):
    """'A=x B=y' -> ['A=x', 'B=y'], checked against the known variables."""
    known = policy_vars()
    out = []
    for w in text.split():
        m = re.fullmatch(r"([A-Z][A-Z0-9_]*)=(\S+)", w)
        if not m:
            raise BenchError(f"variant {name}: '{w}' is not VAR=value (e.g. TX_RECLAIM=v2)")
        if m.group(1) not in known:
            raise BenchError(f"variant {name}: unknown make variable {m.group(1)} (known: {' '.join(known)})")
        out.append(w)
    return out


def build_dir(name):
    return os.path.join(TOP, "build", "variants", name)


def build(name, vars_text, log):
    """Build one variant; returns the path of its PVH ELF."""
    out = build_dir(name)
    argv = ["make", "-C", TOP, "-s", f"-j{os.cpu_count() or 1}", f"O={out}", *parse_vars(name, vars_text), "pvh"]
    log(f"build {name}: {' '.join(argv[4:])}")
    os.makedirs(out, exist_ok=True)
    # Two harnesses building the same variant directory at once would
    # corrupt it: the second waits for the first.
    with open(os.path.join(out, ".vnetbench.lock"), "w") as lock:
        end = time.monotonic() + BUILD_TIMEOUT
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > end:
                    raise BenchError(f"{out} stayed locked by another vnetbench for {BUILD_TIMEOUT}s")
                time.sleep(0.5)
        try:
            r = procs.run(argv, timeout=BUILD_TIMEOUT, check=False)
        except BenchError as e:
            raise BenchError(f"building variant {name}: {e}")
    if r.returncode:
        msg = (r.stderr.strip() or r.stdout.strip())[-1500:]
        raise BenchError(f"variant {name} does not build (`{' '.join(argv)}`):\n{msg}")
    elf = os.path.join(out, "vnetlab.elf")
    if not os.path.isfile(elf):
        raise BenchError(f"variant {name}: make succeeded but {elf} is missing")
    return elf
