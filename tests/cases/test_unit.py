"""Host-side checks of the driver: the unit tests against the simulated
device (every TX_RECLAIM x TX_KICK variant and more, tests/unit/unit.mk)
and the build of every policy combination (mk/variants.mk)."""

import subprocess

from lib import TOP, Fail


def run_make(target, timeout):
    r = subprocess.run(["make", "-s", "-j2", target], cwd=TOP, capture_output=True, text=True,
                       timeout=timeout)
    out = (r.stdout + r.stderr).strip().splitlines()
    if r.returncode:
        bad = [l for l in out if l.startswith(("unit FAIL", "    ", "variants:")) or "error" in l]
        raise Fail(f"make {target} failed (status {r.returncode}):\n" + "\n".join((bad or out)[-60:]))
    return out


def test_unit_tests_every_variant(t):
    out = run_make("unit", 900)
    summary = [l for l in out if l.startswith("unit: ")]
    if not summary or not summary[-1].endswith(" 0 failed"):
        raise Fail(f"expected a 'unit: N binaries, 0 failed' line, saw {summary or out[-5:]}")
    print("    " + summary[-1])


def test_every_policy_combination_builds(t):
    out = run_make("variants", 900)
    compiled = [l for l in out if l.startswith("variants: ") and "compiled warning-free" in l]
    if not compiled:
        raise Fail(f"expected 'variants: N driver variants compiled warning-free', saw {out[-5:]}")
    print("    " + compiled[-1])
