"""idle.py: the idle axis (issue 12) -- the guest-side counterpart of the
2014 vhost polling mail (poll_stop_idle): how long the appliance polls
after its last work before it halts.

A matrix's `idle = poll, 0, 5, 10, 25, 50, 100` turns every variant V into
one column per value: V-idle_poll (IDLE=poll, the spinning baseline),
V-idle_0 (IDLE=halt: halt at once) and V-idle_N (IDLE=adaptive
IDLE_POLL_US=N). The report then gains one table per test shaped like the
2014 mail: rows = poll budget, columns = RR p50/p99, trans/s, host CPU %,
trans/s per host CPU, and the guest's interrupts/s and busy %."""

import statistics

from md import median_of as _median
from md import section
from procs import BenchError


def parse(values):
    out = []
    for v in values:
        if v == "poll" or (v.isdigit() and int(v) <= 1000000):
            out.append(v)
        else:
            raise BenchError(f"bad idle value '{v}': poll or a poll budget in us (0 = halt at once)")
    if len(set(out)) != len(out):
        raise BenchError("idle value listed twice")
    return out


def idle_vars(value):
    if value == "poll":
        return "IDLE=poll"
    if value == "0":
        return "IDLE=halt"
    return f"IDLE=adaptive IDLE_POLL_US={value}"


def expand(variants, variant_vars, values):
    """(names, vars) with one column per variant x idle value."""
    names, out = [], {}
    for v in variants:
        for x in values:
            name = f"{v}-idle_{x}"
            names.append(name)
            out[name] = (variant_vars[v] + " " + idle_vars(x)).strip()
    return names, out


def _fmt(v, scale=1.0, digits=1):
    return "-" if v is None else f"{v / scale:,.{digits}f}"


def table(rows, columns):
    """Markdown lines: per (test, backend, row parameter), rows = the idle
    columns in matrix order."""
    idle_cols = [c for c in columns if "-idle_" in c]
    if not idle_cols:
        return []
    ok = [r for r in rows if r.get("status") == "ok" and r.get("column") in idle_cols]
    groups = {}
    for r in ok:
        key = (r.get("test"), r.get("backend"), r.get("instances") or r.get("msg"))
        groups.setdefault(key, []).append(r)
    L = section("Idle policy (poll budget before halting)",
                "Rows: the appliance's poll budget after its last work (poll = never halts, 0 = "
                "halt at once, N = IDLE=adaptive IDLE_POLL_US=N). Medians over the repetitions. "
                "Host CPU = QEMU + backend + peer; irq/s = the guest's RX+TX interrupts per second; "
                "busy = the guest CPU's share not halted.")
    for (test, backend, param), rs in sorted(groups.items(), key=lambda kv: str(kv[0])):
        accel = ",".join(sorted({str(r.get("accel")) for r in rs}))
        L += ["", f"### {test} {param} ({backend}, {accel})", "",
              "| budget | p50 us | p99 us | trans/s | Mbit/s | host CPU % | per host CPU | irq/s | guest busy % |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for c in idle_cols:
            cr = [r for r in rs if r["column"] == c]
            if not cr:
                continue
            secs = _median(cr, "seconds") or 1.0
            irqs = [((r.get("irqs_rx") or 0) + (r.get("irqs_tx") or 0)) / float(r.get("seconds") or secs)
                    for r in cr]
            per_cpu = _median(cr, "tps_per_cpu") if test.endswith("_rr") else _median(cr, "mbps_per_cpu")
            L.append(f"| {c.rsplit('-idle_', 1)[1]} | {_fmt(_median(cr, 'lat_p50_ns'), 1000)} | "
                     f"{_fmt(_median(cr, 'lat_p99_ns'), 1000)} | {_fmt(_median(cr, 'tps'), 1, 0)} | "
                     f"{_fmt(_median(cr, 'mbps'))} | {_fmt(_median(cr, 'host_cpu_pct'))} | "
                     f"{_fmt(per_cpu, 1, 0)} | {_fmt(statistics.median(irqs), 1, 0)} | "
                     f"{_fmt(_median(cr, 'busy_pct'))} |")
    return L
