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
    out = run_make("unit", 1800)  # 169 binaries; ~17 min on a shared 2-core host under load (helper wt23a)
    summary = [l for l in out if l.startswith("unit: ")]
    if not summary or not summary[-1].endswith(" 0 failed"):
        raise Fail(f"expected a 'unit: N binaries, 0 failed' line, saw {summary or out[-5:]}")
    print("    " + summary[-1])


def test_every_policy_combination_builds(t):
    out = run_make("variants", 1800)  # every combination; over 900 s on a loaded 2-core host
    compiled = [l for l in out if l.startswith("variants: ") and "compiled warning-free" in l]
    if not compiled:
        raise Fail(f"expected 'variants: N driver variants compiled warning-free', saw {out[-5:]}")
    print("    " + compiled[-1])


def test_mutants_caught(t):
    """tests/mutants.py: every deliberate driver bug in its list makes a
    unit test fail (the list grows with every bug fixed)."""
    r = subprocess.run(["python3", "tests/mutants.py"], cwd=TOP, capture_output=True, text=True,
                       timeout=1800)
    out = (r.stdout + r.stderr).strip().splitlines()
    summary = [l for l in out if l.startswith("mutants: ") and " caught, " in l]
    if r.returncode or not summary or not summary[-1].endswith(" 0 missed"):
        bad = [l for l in out if not l.startswith("mutant caught")]
        raise Fail("expected every mutant caught ('mutants: N caught, 0 missed'):\n" + "\n".join(bad[-40:]))
    print("    " + summary[-1])
