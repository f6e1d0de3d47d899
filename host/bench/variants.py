"""variants.py: driver variants -- their names, their make variables, and
building each one once into its own directory.

A variant is a set of make variables (TX_RECLAIM=v2 TX_KICK=burst ...,
mk/variants.mk turns them into drivers/virtio/vnet_policy.h's macros).
`default` is the build with no variables; a name in the makefile's scheme
(base-every-ei1-eager-inline-zc1: reclaim, kick, event index, avail
publication, header, zero copy, then optional -off_LEVEL, -mrg, -nd,
-idle_POLICY, -relax_pause, -rxcN, -packed: mk/policies.def's WORD column,
which make reads too) means its variables; a matrix file can define more
under any name (`variant NAME = VARS`). Each is built with

    make O=build/variants/NAME VARS... pvh

so two variants never share objects, and an unchanged variant costs one
make invocation that does nothing.
"""

import fcntl
import os
import re
import sys
import time

import procs
from procs import BenchError

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD_TIMEOUT = 900

POLICIES_DEF = os.path.join(TOP, "mk", "policies.def")


class Policy:
    """One line of mk/policies.def: POLICY.VAR := MACRO VALUES DEFAULT WORD KEY HELP."""

    def __init__(self, var, fields):
        self.var = var
        self.macro, values, self.default, self.word, self.key = fields[:5]
        self.help = " ".join(fields[5:])
        # choices: [(make word, C value)], in declaration order; empty for a number
        self.choices = [tuple(c.split("=", 1)) for c in values.split(",")] if "=" in values else []
        self.range = None if self.choices else values

    def words(self):
        return [w for w, _ in self.choices]

    def accepts(self, value):
        return value in self.words() if self.choices else re.fullmatch(r"\d+", value) is not None

    def name_pattern(self):
        """(kind, pattern) of the variant-name word: ("pos"|"opt", "ei%" or "mrg=1"), or None."""
        if self.word == "-":
            return None
        kind, pat = self.word.split(":", 1)
        return kind, pat


def policies():
    """The policies mk/policies.def declares, in its order."""
    out = []
    with open(POLICIES_DEF) as f:
        for line in f:
            m = re.match(r"^POLICY\.([A-Z][A-Z0-9_]*)\s*:=\s*(.*)$", line)
            if m:
                out.append(Policy(m.group(1), m.group(2).split()))
    if not out:
        raise BenchError(f"{POLICIES_DEF} declares no policy")
    return out


# Build variables that are not driver policies but a variant may set:
# NET_INSTANCES, the copies of the TCP/IP side the build links (Makefile,
# docs/multiqueue.md), so one run can compare 1 copy with 2 at mq=1.
BUILD_VARS = ["NET_INSTANCES"]


def policy_vars():
    """Make variables a variant may set (mk/policies.def, BUILD_VARS)."""
    return sorted([p.var for p in policies()] + BUILD_VARS)


def _pattern_value(pat, word):
    """The value a name word spells under pattern pat ('ei%', '%', 'mrg=1'), or None."""
    if "=" in pat:
        w, v = pat.split("=", 1)
        return v if word == w else None
    pre, post = pat.split("%", 1)
    if len(word) > len(pre) + len(post) and word.startswith(pre) and word.endswith(post):
        return word[len(pre):len(word) - len(post)]
    return None


def scheme():
    """The variant-name scheme, e.g. RECLAIM-KICK-ei0|1-...[-off_...][-mrg]..."""
    pols = policies()
    pos, opt = [], []
    for p in pols:
        np = p.name_pattern()
        if not np:
            continue
        kind, pat = np
        if "=" in pat:
            text = pat.split("=", 1)[0]
        else:
            vals = "|".join(w for w in p.words() if w != "before") if p.choices else "N"
            text = pat.replace("%", vals if len(p.choices) < 5 else p.var)
        (pos if kind == "pos" else opt).append(text)
    return "-".join(pos) + "".join(f"[-{o}]" for o in opt)


def from_scheme(name):
    """Make variables of a name in mk/variants.mk's scheme (mk/policies.def's
    WORD column), e.g. base-every-ei1-eager-inline-zc1-idle_halt-rxc64, or
    None if the name is not one."""
    pols = policies()
    pos = [p for p in pols if p.name_pattern() and p.name_pattern()[0] == "pos"]
    opt = [p for p in pols if p.name_pattern() and p.name_pattern()[0] == "opt"]
    words = name.split("-")
    if len(words) < len(pos):
        return None
    values = {}
    for p, w in zip(pos, words):
        v = _pattern_value(p.name_pattern()[1], w)
        if v is None or not p.accepts(v):
            return None
        values[p.var] = v
    for w in words[len(pos):]:
        for p in opt:
            v = _pattern_value(p.name_pattern()[1], w)
            if v is not None and p.accepts(v) and p.var not in values:
                values[p.var] = v
                break
        else:
            return None
    return " ".join(f"{p.var}={values[p.var]}" for p in pols if p.var in values)


def policy_table():
    """The policy table of docs/policies.md (markdown), from mk/policies.def."""
    rows = ["| variable | values | default | name word (`%`: the value) | what changes |",
            "| --- | --- | --- | --- | --- |"]
    pos = 0
    for p in policies():
        vals = ", ".join(f"`{w}`" for w in p.words()) if p.choices else f"`{p.range}`"
        np = p.name_pattern()
        if np is None:
            word = ""
        elif np[0] == "pos":
            pos += 1
            word = f"word {pos}: `{np[1]}`"
        else:
            word = f"`-{np[1].split('=', 1)[0]}`"
        rows.append(f"| `{p.var}` | {vals} | `{p.default}` | {word} | {p.help} |")
    return "\n".join(rows)


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
    return f"default, or a name in mk/variants.mk's scheme {scheme()} (e.g. base-every-ei1-eager-inline-zc1)"


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


if __name__ == "__main__":
    # python3 host/bench/variants.py --table: the policy table for the docs.
    if sys.argv[1:] == ["--table"]:
        print(policy_table())
    else:
        sys.exit("usage: variants.py --table")
