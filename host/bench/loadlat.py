"""loadlat.py: latency against offered load (issue 25, item 5), the RR
sweep `rr.mps = load` in a matrix (matrices/loadlat.txt).

Per column, repetition, backend and RR size the matrix expands into one
closed-loop run (`load = max`: host `sockperf ping-pong --full-rtt`, the
guest's maximum one-at-a-time rate, its `peer_tps`) followed by one open-
loop run per `load.fractions` percentage (`load = PCT`: host `sockperf
under-load --mps N --reply-every 1 --full-rtt` with N = PCT % of that
maximum, rounded). Each is its own boot, so a load point starts from a
fresh guest. Every figure is the host peer's (the same sockperf for every
column): the offered rate (`offered_mps`), the rate sockperf really sent
(`sent_mps`) and got answered (`achieved_mps`), and its percentiles
(`peer_lat_p50_ns` ...). Rows carry `load` ("max" or the percentage),
`load_max_tps` (the maximum their rate came from) and, for load points,
`load_short` when fewer than LOAD_SHORT of the offered messages were
answered per second (the guest, or sockperf, did not keep up).

The maximum is the closed loop's: an open-loop sender can queue more than
one request, so a guest may sustain more than 100 % of it.

The closed-loop rows are ordinary udp_rr/tcp_rr rows (the usual tables);
the load points appear only in the load table (table()) and the plot
(plots.plot_loadlat()).
"""

import dataclasses

import runs
from md import median_of as _med
from md import section

OPTIONS = ("rr.mps", "load.fractions", "rr.sizes", "rr.role")
LOAD_SHORT = 0.95  # achieved / offered below this: the load point is marked short

# (column, backend, machine, accel, queues, test, req, resp, rep) -> the
# closed loop's peer trans/s, filled by the `load = max` run that the
# matrix puts before the load points of the same key.
MAXIMA = {}


def offered_mps(max_tps, pct):
    """The --mps of a load point: pct % of the maximum, at least 1."""
    return max(1, int(round(max_tps * pct / 100.0)))


def max_key(run, m):
    p = run.params
    return (run.column, run.backend, run.machine or m.machine, run.accel or m.accel, run.queues or m.queues,
            run.test, p["req"], p["resp"], run.rep)


def annotate(row, pct, max_tps, mps):
    """A load point's row: what was offered, sent and answered, from the
    peer's figures parse_sockperf() put in it."""
    row.update(load=pct, load_max_tps=max_tps, offered_mps=mps, mps=mps)
    rt = row.get("peer_runtime_s")
    if rt:
        row["sent_mps"] = round(row.get("peer_sent", 0) / rt, 1)
    row["achieved_mps"] = row.get("peer_tps")
    if row.get("status") == "ok" and row["achieved_mps"] is not None:
        row["achieved_ratio"] = round(row["achieved_mps"] / mps, 4)
        row["load_short"] = row["achieved_ratio"] < LOAD_SHORT
    return row


def execute_run(run, m, guest, logdir, execute):
    """One run of the sweep; execute(run, ...) is kinds.execute for the
    plain closed- or open-loop run it becomes."""
    load = run.params["load"]
    params = {k: v for k, v in run.params.items() if k != "load"}
    key = max_key(run, m)
    if load == "max":
        row = execute(dataclasses.replace(run, params=params), m, guest, logdir)
        row["load"] = "max"
        if row.get("status") == "ok":
            if not row.get("peer_tps"):
                row.update(status="error", error="closed loop: sockperf ping-pong reported no trans/s, "
                                                 "so the load points have no maximum")
            else:
                MAXIMA[key] = row["load_max_tps"] = row["peer_tps"]
        return row
    max_tps = MAXIMA.get(key)
    if not max_tps:
        row = runs.base_row(run, m)
        row.update(error=f"no closed-loop maximum for {run.column} (its load=max run of repetition "
                         f"{run.rep + 1} failed or did not run)", wall_s=0.0)
        return row
    mps = offered_mps(max_tps, load)
    params["mps"] = mps
    row = execute(dataclasses.replace(run, params=params), m, guest, logdir)
    return annotate(row, load, max_tps, mps)


def claims(run):
    return run.params.get("load") is not None


def run_row(run, m, guest, logdir, execute):
    return execute_run(run, m, guest, logdir, execute)


# ---- the report ----

def load_rows(rows):
    """The ok rows of a sweep (both kinds), {(test, backend, req, resp):
    {column: {load: [rows]}}}; load "max" for the closed loop."""
    out = {}
    for r in rows:
        if r.get("status") != "ok" or r.get("load") is None:
            continue
        g = out.setdefault((r["test"], r["backend"], r.get("req"), r.get("resp")), {})
        g.setdefault(r["column"], {}).setdefault(r["load"], []).append(r)
    return out


def points(rs_by_load):
    """One column's sweep as [(load, figures)] in load order, max last:
    medians over the repetitions of the offered, achieved and peer
    latency figures."""
    out = []
    for load in sorted((x for x in rs_by_load if x != "max"), key=float) + (["max"] if "max" in rs_by_load else []):
        rs = rs_by_load[load]
        f = {k: _med(rs, k) for k in ("offered_mps", "sent_mps", "achieved_mps", "load_max_tps", "peer_lat_p50_ns",
                                      "peer_lat_p90_ns", "peer_lat_p99_ns", "peer_lat_p999_ns")}
        if load == "max":
            f["achieved_mps"] = _med(rs, "peer_tps")
        f["n"] = len(rs)
        f["short"] = sum(1 for r in rs if r.get("load_short"))
        f["accel"] = ",".join(sorted({str(r.get("accel")) for r in rs}))
        out.append((load, f))
    return out


def _num(v, us=False):
    if v is None:
        return "-"
    if us:
        return f"{v / 1000:.1f}"
    return f"{v:,.0f}"


def table(rows, columns):
    """Markdown lines: per sweep group, rows = column x load: offered and
    achieved msg/s, the peer's p50 / p90 / p99 / p99.9; [] without a sweep."""
    groups = load_rows(rows)
    if not groups:
        return []
    L = section("Latency against offered load (rr.mps = load)",
                "Per column, the closed loop (`max`: host `sockperf ping-pong --full-rtt`, one request at a time) "
                "gives the maximum; each load point is host `sockperf under-load --mps N --reply-every 1 --full-rtt` "
                "at that percentage of it, a boot of its own. Offered = the --mps asked, sent / achieved = what "
                "sockperf sent and got answered per second; latencies are sockperf's round trips (us). Medians over "
                "n repetitions; `short` counts runs answering under "
                f"{100 * LOAD_SHORT:.0f} % of the offered rate.")
    for (test, backend, req, resp), bycol in sorted(groups.items(), key=lambda kv: str(kv[0])):
        cols = [c for c in columns if c in bycol] + [c for c in bycol if c not in columns]
        L += ["", f"### {test} {req}/{resp} bytes -- backend {backend}", "",
              "| column | load | offered msg/s | sent msg/s | achieved msg/s | p50 | p90 | p99 | p99.9 | n | short | accel |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
        for c in cols:
            for load, f in points(bycol[c]):
                name = f"max (closed loop, {_num(f['load_max_tps'] or f['achieved_mps'])}/s)" if load == "max" \
                    else f"{load} %"
                L.append(f"| {c} | {name} | {_num(f['offered_mps'])} | {_num(f['sent_mps'])} | "
                         f"{_num(f['achieved_mps'])} | {_num(f['peer_lat_p50_ns'], 1)} | "
                         f"{_num(f['peer_lat_p90_ns'], 1)} | {_num(f['peer_lat_p99_ns'], 1)} | "
                         f"{_num(f['peer_lat_p999_ns'], 1)} | {f['n']} | {f['short'] or ''} | {f['accel']} |")
    return L


REPORT = (table,)  # report.md: the load table
