"""The RESULT line's builder (apps/lib/result.c) is never shared by two
CPUs: with mq=N each lwIP copy links its own (Makefile INST_SRCS), so the
linked kernel holds one builder state per copy, each at its own address;
app=pkt, linked once, uses copy 0's and prints from the BSP after the join.
result.c panics when two CPUs meet in one line (tests/unit/test_result.c
shows it, with its mutants); this checks the linkage that keeps them
apart."""

import os
import subprocess

from lib import BUILD, Fail


def test_result_line_state_per_copy(t):
    elf = os.path.join(BUILD, "vnetlab.elf")
    try:
        with open(os.path.join(BUILD, "net_instances")) as f:
            copies = int(f.read().strip())
    except (OSError, ValueError) as e:
        raise Fail(f"build/net_instances (the Makefile's NET_INSTANCES) unreadable: {e}")
    r = subprocess.run(["nm", elf], capture_output=True, text=True, timeout=60)
    if r.returncode:
        raise Fail(f"nm {elf} failed: {r.stderr[-300:]}")
    state = [l.split() for l in r.stdout.splitlines() if l.split()[-1:] == ["result_line"]]
    addrs = {s[0] for s in state}
    if len(state) != copies or len(addrs) != copies or any(s[1] not in "bd" for s in state):
        raise Fail(f"expected {copies} local result_line objects (one per copy of the TCP/IP side, "
                   f"NET_INSTANCES={copies}) at distinct addresses, nm shows {state}")
    # One set of the functions that use it per copy too: copy k's apps
    # call copy k's builder (every copy's symbols but copy 0's are local).
    begins = [l.split() for l in r.stdout.splitlines() if l.split()[-1:] == ["result_begin"]]
    if len(begins) != copies or sum(1 for s in begins if s[1] == "T") != 1:
        raise Fail(f"expected {copies} result_begin functions, copy 0's global (app=pkt's), nm shows {begins}")
