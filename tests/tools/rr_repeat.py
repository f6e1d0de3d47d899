#!/usr/bin/env python3
"""tests/tools/rr_repeat.py: repeat the idle test's 1-second TCP RR run
(tests/cases/test_idle.py rr_client: the appliance as client of a host
sockperf server, each run in a fresh namespace) and count lost wake-ups.

    sudo python3 tests/tools/rr_repeat.py KERNEL RUNS [GUEST ARGS...] [-- QEMU ARGS...]

KERNEL is a vnetlab.elf built with a halt policy (IDLE=halt|adaptive);
GUEST ARGS are added to (and override) the appliance command line (e.g.
rr.instances=8 rr.seconds=3); QEMU ARGS go to host/qemu-run.sh (e.g.
-smp 1,maxcpus=2). Prints one JSON
line per run (lost_wakeups, lat_max_ms, tps, p50_us, halts, dev_syncs) and a last
line with the totals. Used to reproduce the lost wake-up of the README's
"Idle policy" section under host load.
"""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import lib  # noqa: E402

RR_PORT = 11111


def one_run(kernel, guest_args, extra):
    t = lib.T("rr_repeat")
    try:
        with t.netns() as ns:
            ns.popen(["sockperf", "server", "--tcp", "-i", lib.NS_HOST_IP, "-p", str(RR_PORT)],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            lib.wait_listening(ns, "tcp", RR_PORT)
            words = {"app": "rr", "rr.peer": lib.NS_HOST_IP, "rr.seconds": "1", "rr.warmup": "0",
                     "ip": f"{lib.NS_GUEST_IP}/{lib.NS_PREFIX}", "backend": "tap"}
            words.update(a.split("=", 1) for a in guest_args)
            g = t.boot(append=" ".join(f"{k}={v}" for k, v in words.items()),
                       net=f"tap:{ns.tap}", ns=ns, timeout=60, kernel=kernel, extra=extra)
            g.expect_ok()
            r = lib.json_line(g, "RESULT")
            idle = lib.json_line(g, "IDLE")
            return {"lost_wakeups": r["lost_wakeups"], "lat_max_ms": round(r["lat_max_ns"] / 1e6, 2),
                    "tps": r["tps"], "p50_us": round(r["lat_p50_ns"] / 1e3, 1), "halts": idle["halts"],
                    "timer_wakes": idle["timer_wakes"], "arm_races": idle["arm_races"],
                    "dev_syncs": idle.get("dev_syncs", 0), "lost": r["lost"], "errors": r["errors"]}
    finally:
        t.close()


def main():
    args = sys.argv[1:]
    extra = []
    if "--" in args:
        i = args.index("--")
        args, extra = args[:i], args[i + 1:]
    if len(args) < 2:
        sys.exit(__doc__)
    kernel, runs, guest_args = os.path.abspath(args[0]), int(args[1]), args[2:]
    total = {"runs": 0, "runs_with_lost": 0, "lost_wakeups": 0, "failed_runs": 0}
    for i in range(runs):
        try:
            res = one_run(kernel, guest_args, extra)
        except lib.Fail as e:
            total["failed_runs"] += 1
            print(json.dumps({"run": i, "fail": str(e)[:300]}), flush=True)
            continue
        total["runs"] += 1
        total["lost_wakeups"] += res["lost_wakeups"]
        total["runs_with_lost"] += res["lost_wakeups"] > 0
        print(json.dumps({"run": i, **res}), flush=True)
    print(json.dumps({"total": total, "kernel": kernel, "guest_args": guest_args, "qemu_extra": extra}),
          flush=True)


if __name__ == "__main__":
    main()
