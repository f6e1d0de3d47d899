#!/usr/bin/env python3
"""tests/runner.py: run every test_* function in tests/cases/test_*.py.

    python3 tests/runner.py [-k SUBSTRING] [-v]

Prints PASS/FAIL/SKIP/XFAIL per test (a failure with what was expected,
what was seen and the console tail; XFAIL: a known fault, lib.KnownFault,
reproduced as its test says) and ends with the line "N passed, N failed"
(", N skipped", ", N known faults (XFAIL)" when there are any). Exit
status 1 if anything failed.
"""

import argparse
import importlib.util
import inspect
import os
import signal
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

CASES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cases")


def discover():
    tests = []
    for fn in sorted(os.listdir(CASES)):
        if not (fn.startswith("test_") and fn.endswith(".py")):
            continue
        spec = importlib.util.spec_from_file_location(fn[:-3], os.path.join(CASES, fn))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        for name, fn_obj in inspect.getmembers(mod, inspect.isfunction):
            if name.startswith("test_") and fn_obj.__module__ == mod.__name__:
                line = inspect.getsourcelines(fn_obj)[1]
                tests.append((mod.__name__, line, name, fn_obj))
    tests.sort(key=lambda x: (x[0], x[1]))
    return [(f"{m}.{n}", f) for m, _, n, f in tests]


def print_times(took, total, most=15):
    """Where the run's time went: the slowest tests and the total (the
    last line stays the pass/fail count)."""
    if len(took) < 2:
        return
    print(f"time: {total:.0f} s in all, {len(took)} tests; the {min(most, len(took))} slowest:")
    for sec, name in sorted(took, reverse=True)[:most]:
        print(f"  {sec:7.1f} s  {100 * sec / total if total else 0:4.1f} %  {name}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-k", default="", help="run only tests whose name contains this")
    ap.add_argument("-v", action="store_true", help="print the console of passing tests too")
    a = ap.parse_args()

    current = []

    def on_signal(signum, _frame):
        # Ctrl-C or CI's stop: clean up namespaces and QEMUs of the running test.
        for t in current:
            t.close()
        sys.exit(128 + signum)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    passed = failed = skipped = known = 0
    took = []  # (seconds, name): the time table at the end
    t_all = time.monotonic()
    for name, fn in discover():
        if a.k and a.k not in name:
            continue
        t = lib.T(name)
        current[:] = [t]
        t0 = time.monotonic()
        try:
            fn(t)
            passed += 1
            print(f"PASS {name} ({time.monotonic() - t0:.1f}s)", flush=True)
            if a.v:
                for g in t.guests:
                    print(g.tail(200))
        except lib.Skip as e:
            skipped += 1
            print(f"SKIP {name}: {e}", flush=True)
        except lib.KnownFault as e:
            known += 1
            print(f"XFAIL {name} ({time.monotonic() - t0:.1f}s): known fault: {e}", flush=True)
        except lib.Fail as e:
            failed += 1
            print(f"FAIL {name} ({time.monotonic() - t0:.1f}s): {e}", flush=True)
            for g in t.guests[-2:]:
                print(f"  console tail ({' '.join(g.argv[-6:])}):")
                print(g.tail())
        except Exception:
            failed += 1
            print(f"FAIL {name}: test raised", flush=True)
            traceback.print_exc()
        finally:
            t.close()
            took.append((time.monotonic() - t0, name))
    print_times(took, time.monotonic() - t_all)
    tail = (f", {skipped} skipped" if skipped else "") + (f", {known} known faults (XFAIL)" if known else "")
    print(f"{passed} passed, {failed} failed{tail}")
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
