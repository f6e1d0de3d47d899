"""Each driver policy is declared once, in mk/policies.def, and every place
that knows the policies agrees with it: drivers/virtio/vnet_policy.h (a
default and a check per macro, nothing undeclared), make (the -D flags of a
make variable and of a variant name), the harness's name parser
(host/bench/variants.py), the variant string vnet_variant() prints, and the
policy table of docs/policies.md."""

import os
import re
import subprocess
import sys

from lib import BUILD, TOP, Fail, make_list

sys.path.insert(0, os.path.join(TOP, "host", "bench"))
import variants  # noqa: E402

HEADER = os.path.join(TOP, "drivers", "virtio", "vnet_policy.h")


def _make(*args):
    r = subprocess.run(["make", "-s", *args], cwd=TOP, capture_output=True, text=True, timeout=120)
    if r.returncode:
        raise Fail(f"make {' '.join(args)} failed: {r.stderr[-400:]}")
    return r.stdout


def _flags(pol, value):
    """The -D flag mk/policies.def says VAR=value means."""
    cval = dict(pol.choices).get(value, value)
    return f"-D{pol.macro}={cval}"


def _internal():
    text = open(os.path.join(TOP, "mk", "policies.def")).read()
    m = re.search(r"^POLICY_INTERNAL\s*:=\s*(.*)$", text, re.M)
    return set(m.group(1).split()) if m else set()


def test_policy_header_agrees(t):
    text = open(HEADER).read()
    pols = variants.policies()
    macros = {p.macro for p in pols}
    for p in pols:
        m = re.search(rf"^#ifndef {p.macro}\n#define {p.macro} (.*)$", text, re.M)
        if not m:
            raise Fail(f"vnet_policy.h has no `#ifndef {p.macro}` default for {p.var} (mk/policies.def)")
        got = m.group(1).strip()
        if p.default != "auto":
            want = dict(p.choices).get(p.default, p.default)
            if got != want:
                raise Fail(f"{p.var}: mk/policies.def's default {p.default} means {want}, vnet_policy.h says {got}")
        if not re.search(rf"^#if\b.*\b{p.macro}\b.*\n#error", text, re.M):
            raise Fail(f"vnet_policy.h has no #if/#error check of {p.macro} ({p.var})")
        for word, cval in p.choices:
            if not re.fullmatch(r"\d+", cval) and not re.search(rf"^#define {cval}\b", text, re.M):
                raise Fail(f"{p.var}={word} means {cval}, which vnet_policy.h does not define")
    declared = set(re.findall(r"^#ifndef ((?:VNET|VIRTQ)_[A-Z0-9_]+)$", text, re.M)) - {"VNETLAB_VNET_POLICY_H"}
    undeclared = declared - macros - _internal()
    if undeclared:
        raise Fail(f"vnet_policy.h has defaults mk/policies.def does not declare: {sorted(undeclared)}")


def test_policy_make_flags_agree(t):
    # Every variant name make builds parses in the harness, and make's flags
    # for it are what the declaration says the parsed variables mean.
    names = sorted(set(make_list("VARIANT_LEGAL") + make_list("VARIANT_LINKED") + make_list("UNIT_VARIANTS")
                       + make_list("UNIT_OFFLOAD_VARIANTS")))
    pols = {p.var: p for p in variants.policies()}
    out = _make("print-variant-flags", "NAMES=" + " ".join(names))
    seen = 0
    for line in out.splitlines():
        name, flags = line.split(": ", 1) if ": " in line else (line.rstrip(":"), "")
        vars_ = variants.from_scheme(name)
        if vars_ is None:
            raise Fail(f"make builds variant {name}, the harness's from_scheme() rejects it")
        want = sorted(_flags(pols[v.split("=")[0]], v.split("=", 1)[1]) for v in vars_.split())
        if sorted(flags.split()) != want:
            raise Fail(f"{name}: make's flags {flags.split()}, mk/policies.def says {want}")
        seen += 1
    if seen != len(names):
        raise Fail(f"make printed flags for {seen} of {len(names)} names")
    # A make variable on the command line: each policy with a non-default value.
    for p in pols.values():
        value = next((w for w in p.words() if w != p.default), None) if p.choices else p.range.split("..")[0]
        # O= elsewhere: a variable on the command line rewrites $(O)/policy.cflags
        got = _make(f"{p.var}={value}", f"O={os.path.join(BUILD, 'test-policies')}", "print-VARIANT_CFLAGS").split()
        if got != [_flags(p, value)]:
            raise Fail(f"make {p.var}={value}: VARIANT_CFLAGS {got}, expected {[_flags(p, value)]}")


def test_policy_names_round_trip(t):
    # Every choice spelled in a name (optional words too) parses to itself.
    base = "base-every-ei1-eager-inline-zc1"
    for p in variants.policies():
        np = p.name_pattern()
        if not np or np[0] != "opt":
            continue
        values = p.words() if p.choices else ["64"]
        for v in values:
            pat = np[1]
            if "=" in pat:
                if v != pat.split("=", 1)[1]:
                    continue
                word = pat.split("=", 1)[0]
            else:
                word = pat.replace("%", v)
            got = variants.from_scheme(f"{base}-{word}")
            if not got or f"{p.var}={v}" not in got.split():
                raise Fail(f"from_scheme({base}-{word}) = {got!r}: expected {p.var}={v}")
    if variants.from_scheme(base + "-nosuchword") is not None:
        raise Fail("from_scheme accepts an unknown word")


def test_policy_variant_string_keys(t):
    # The bodies of vnet_variant() (vnet.c) and vnet_idle_policy() (vnet_idle.c).
    src = ""
    for f, fn in (("vnet.c", "vnet_variant"), ("vnet_idle.c", "vnet_idle_policy")):
        m = re.search(rf"^const char \*{fn}\(void\)\n\{{\n(.*?)^\}}", open(os.path.join(TOP, "drivers", "virtio", f)).read(),
                      re.M | re.S)
        if not m:
            raise Fail(f"drivers/virtio/{f} has no {fn}()")
        src += m.group(1)
    printed = set(re.findall(r"[\",]([a-z_]+)=", src))
    keys = {p.key for p in variants.policies() if p.key != "-"}
    if printed - keys:
        raise Fail(f"vnet_variant() prints keys no policy declares: {sorted(printed - keys)}")
    if keys - printed:
        raise Fail(f"mk/policies.def keys vnet_variant() does not print: {sorted(keys - printed)}")


def test_policy_docs_table(t):
    text = open(os.path.join(TOP, "docs", "policies.md")).read()
    m = re.search(r"^<!-- policy table: .*?-->\n(.*?)\n<!-- end of policy table -->", text, re.M | re.S)
    if not m:
        raise Fail("docs/policies.md has no generated policy table")
    if m.group(1) != variants.policy_table():
        raise Fail("docs/policies.md's policy table differs from mk/policies.def: paste "
                   "`python3 host/bench/variants.py --table`")
