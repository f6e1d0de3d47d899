"""report.py: rows (one per run) -> results.jsonl, results.csv,
summary.csv and report.md.

A row is a flat dict; the report only reads these keys, so anything that
produces them -- this appliance, or later a stock Linux guest running the
same peers -- becomes one more column without a change here:

  column            table column (a variant name, or e.g. "linux")
  test, backend     table group
  req resp instances burst msg size threads   test parameters (TESTS[test]["row"]
                    picks the table row, the others form the group)
  status            ok | error | skipped  (only ok rows are counted)
  tps mbps lat_*_ns kicks_per_txn reclaims_per_txn   guest/peer figures
  host_cpu_pct qemu_cpu_pct backend_cpu_pct peer_cpu_pct  (% of one CPU)
  tps_per_cpu mbps_per_cpu   throughput per fully busy host CPU
  qemu_cpus vcpu_cpus backend_cpus peer_cpus   placement strings "cpu:share,..."
  accel             accelerator that ran

  host_us_per_txn qemu_us_per_txn ... (or _per_mb)  service demand (runs.py)
  lat_hist          the guest's histogram buckets (HIST line), merged per cell

Tables follow the 2011 thread: rows = instances (RR) or message sizes
(STREAM/MAERTS), columns = variants; each cell is the median with min-max
over its n repetitions and (n >= 2) the coefficient of variation; against
the baseline column the % change of the medians with a 95 % bootstrap
confidence interval, and significance from a Mann-Whitney U test
(stats.py: "sig", "n.s.", or "?" when the repetitions are too few to tell).
"""

import csv
import json
import os
import re
import statistics

import idle
import kinds
import kvmstats
import stats
from md import median_of as _med
from md import section
from matrix import TESTS

PARAMS = ("req", "resp", "instances", "burst", "mps", "msg", "size", "threads", "seconds")

# Leading CSV columns, in this order; any other keys follow sorted.
CSV_FIRST = (
    "run", "rep", "column", "guest", "variant", "variant_vars", "test", "backend", "accel",
    *PARAMS, "status", "error",
    "transactions", "tps", "mbps", "lat_mean_ns", "lat_p50_ns", "lat_p90_ns", "lat_p99_ns",
    "lat_p999_ns", "lat_max_ns", "host_cpu_pct", "qemu_cpu_pct", "backend_cpu_pct", "peer_cpu_pct",
    "tps_per_cpu", "mbps_per_cpu", "host_us_per_txn", "procs_us_per_txn", "qemu_us_per_txn",
    "backend_us_per_txn", "peer_us_per_txn", "host_us_per_mb", "procs_us_per_mb", "qemu_us_per_mb",
    "backend_us_per_mb", "peer_us_per_mb", "qemu_cpus", "backend_cpus", "peer_cpus",
    "tx_frames", "rx_frames", "kicks", "kicks_suppressed", "reclaim_calls", "reclaimed",
    "ring_full", "lwip_drops", "kicks_per_txn", "reclaims_per_txn",
)

# KVM's exit counters per transaction / per MB (host/bench/kvmstats.py),
# only in rows that ran under KVM.
KVM_SHOWN = ("exits", "insn_emulation", "irq_injections", "halt_exits")
KVM_KEYS = tuple(f"kvm_{n}_per_{u}" for n in KVM_SHOWN for u in ("txn", "frame", "mb"))

METRIC_LABEL = {
    "tps": "transactions/s",
    "mbps": "Mbit/s",
    "lat_p50_ns": "round-trip p50 (us)",
    "pps": "frames/s",
    "ndr_pps": "NDR frames/s",
}


def write_jsonl(path, rows):
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r, sort_keys=True) + "\n")


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def _csv_value(v):
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True)
    return "" if v is None else v


def write_csv(path, rows):
    keys = [k for k in CSV_FIRST]
    extra = sorted({k for r in rows for k in r} - set(keys))
    keys += extra
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(keys)
        for r in rows:
            w.writerow([_csv_value(r.get(k)) for k in keys])


# ---- grouping ----

def group_key(row):
    """(test, backend, other parameters) of a row: one table."""
    row_dim = TESTS[row["test"]]["row"]
    rest = tuple((p, row.get(p)) for p in PARAMS if p not in (row_dim, "seconds") and row.get(p) is not None)
    return (row["test"], row["backend"], rest)


def groups(rows, columns):
    """{group key: {row value: {column: [rows]}}}, columns in given order
    first, then any further columns the rows bring (e.g. another guest)."""
    out = {}
    cols = list(columns)
    for r in rows:
        if r.get("status") != "ok" or isinstance(r.get("load"), (int, float)):
            continue  # a load point's offered rate is per column: loadlat.table() shows them
        if r["column"] not in cols:
            cols.append(r["column"])
        g = out.setdefault(group_key(r), {})
        g.setdefault(r.get(TESTS[r["test"]]["row"]), {}).setdefault(r["column"], []).append(r)
    return out, cols


def cell(rows, key):
    return stats.Cell([r.get(key) for r in rows if isinstance(r.get(key), (int, float))])


def compare(m, bm):
    """% change, 95 % CI (low, high) in %, p-value and significance of cell
    m against baseline cell bm."""
    ci = stats.bootstrap_ci(m, bm)
    return {
        "pct_vs_base": stats.pct_change(m, bm),
        "ci_low_pct": None if ci is None else round(ci[0], 2),
        "ci_high_pct": None if ci is None else round(ci[1], 2),
        "p_value": None if stats.p_value(m, bm) is None else round(stats.p_value(m, bm), 4),
        "significance": stats.significance(m, bm),
    }


DEMAND_KEYS = ("host", "procs", "qemu", "backend", "peer", "server")


def summarise(rows, columns, baseline):
    """One record per (group, row value, column): what the tables show,
    also written to summary.csv."""
    gs, cols = groups(rows, columns)
    out = []
    for gk, table in gs.items():
        test = gk[0]
        metric = TESTS[test]["metric"]
        per_cpu_key = {"tps": "tps_per_cpu", "mbps": "mbps_per_cpu"}.get(metric)
        for rv in sorted(table, key=lambda x: (x is None, x)):
            base_rows = table[rv].get(baseline, [])
            bm, bp = cell(base_rows, metric), cell(base_rows, per_cpu_key) if per_cpu_key else None
            for c in cols:
                rs = table[rv].get(c)
                if not rs:
                    continue
                m = cell(rs, metric)
                cmp = compare(m, bm) if c != baseline else {
                    "pct_vs_base": None, "ci_low_pct": None, "ci_high_pct": None, "p_value": None, "significance": ""}
                rec = {
                    "test": test,
                    "backend": gk[1],
                    **dict(gk[2]),
                    TESTS[test]["row"]: rv,
                    "column": c,
                    "n": m.n,
                    "metric": metric,
                    "median": m.median,
                    "min": m.min,
                    "max": m.max,
                    "cv": m.cv,
                    **cmp,
                    "host_cpu_pct": cell(rs, "host_cpu_pct").median,
                    "qemu_cpu_pct": cell(rs, "qemu_cpu_pct").median,
                    "backend_cpu_pct": cell(rs, "backend_cpu_pct").median,
                    "peer_cpu_pct": cell(rs, "peer_cpu_pct").median,
                    "server_cpu_pct": cell(rs, "server_cpu_pct").median,
                    "accel": ",".join(sorted({str(r.get("accel")) for r in rs})),
                }
                if per_cpu_key:
                    p = cell(rs, per_cpu_key)
                    rec.update(
                        per_cpu=p.median,
                        per_cpu_min=p.min,
                        per_cpu_max=p.max,
                        per_cpu_n=p.n,
                        per_cpu_pct_vs_base=None if c == baseline else stats.pct_change(p, bp),
                        per_cpu_significance="" if c == baseline else stats.significance(p, bp),
                    )
                unit = "mb" if TESTS[test]["kind"] == "stream" else "txn"
                rec["demand_unit"] = unit
                for who in DEMAND_KEYS:
                    dc = cell(rs, f"{who}_us_per_{unit}")
                    rec[f"{who}_us_per_{unit}"] = dc.median
                    if who == "host":
                        rec["host_demand_n"] = dc.n
                hists = [r["lat_hist"] for r in rs if isinstance(r.get("lat_hist"), list)]
                if hists:
                    pooled = stats.pooled_percentiles(hists)
                    rec["pooled_n"] = len(hists)
                    for pk, name in ((50, "p50"), (90, "p90"), (99, "p99"), (99.9, "p999")):
                        rec[f"pooled_{name}_ns"] = pooled.get(pk)
                    rec["_cdf"] = stats.cdf(hists)  # for plots only, not in summary.csv
                for k in ("lat_p50_ns", "lat_p90_ns", "lat_p99_ns", "lat_p999_ns", "kicks_per_txn", "reclaims_per_txn",
                          "peer_lat_p50_ns", "peer_lat_p99_ns", "peer_mbps", "peer_tps", "outstanding_mean",
                          *KVM_KEYS):
                    rec[k] = cell(rs, k).median
                out.append(rec)
    return out, cols


def write_summary_csv(path, records):
    keys = []
    for r in records:
        for k in r:
            if k not in keys and not k.startswith("_"):
                keys.append(k)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        for r in records:
            w.writerow({k: _csv_value(r.get(k)) for k in keys})


# ---- markdown ----

def fmt_num(v, metric=None):
    if v is None:
        return "-"
    if metric and metric.endswith("_ns"):
        return f"{v / 1000:,.1f}"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:,.1f}"
    return f"{v:,.2f}"


def fmt_rate(v):
    """A count per unit: fmt_num, but three significant digits below 1
    (0.023 exits per frame is not 0.02, and 0.0004 is not 0.00)."""
    if v is not None and 0 < abs(v) < 1:
        return f"{v:.3g}"
    return fmt_num(v)


def fmt_change(pct, sig, ci=None):
    if pct is None:
        return ""
    mark = {"sig": "", "n.s.": " n.s.", "?": " ?"}.get(sig, "")
    ci_s = f" [{ci[0]:+.1f}, {ci[1]:+.1f}]" if ci and ci[0] is not None else ""
    return f"{pct:+.1f}%{ci_s}{mark}"


# compare.key_label() names the same fields for a gate verdict, in its own words.
def group_title(gk):
    test, backend, rest = gk
    parts = []
    d = dict(rest)
    if "req" in d:
        parts.append(f"{d['req']}/{d['resp']} bytes")
    if d.get("burst", 1) > 1:
        parts.append(f"burst {d['burst']}")
    if d.get("mps"):
        parts.append(f"open loop at {d['mps']:,} msg/s (host sockperf under-load; latency is the peer's)")
    if "instances" in d:
        parts.append(f"{d['instances']} instance{'s' if d['instances'] > 1 else ''}")
    if "threads" in d:
        parts.append(f"memcaslap -T {d['threads']}")
    return f"{test}{' ' + ', '.join(parts) if parts else ''} -- backend {backend}"


def _table(title, row_name, row_values, cols, fmt_cell, note=""):
    lines = [f"**{title}**" + (f" ({note})" if note else ""), ""]
    lines.append("| " + " | ".join([row_name] + cols) + " |")
    lines.append("|" + "---|" * (len(cols) + 1))
    for rv in row_values:
        lines.append("| " + " | ".join([str(rv)] + [fmt_cell(rv, c) for c in cols]) + " |")
    lines.append("")
    return lines


def markdown(records, cols, baseline, meta, plots=()):
    """The report: header (what ran where), one section per group."""
    L = [f"# vnetlab benchmark {meta.get('started', '')}", ""]
    L.append(f"- command: `{meta.get('command', '')}`")
    L.append(f"- host: {meta.get('host_cpu_model', '?')}, {meta.get('host_ncpu', '?')} CPUs, kernel {meta.get('host_kernel', '?')}; {meta.get('qemu_version', '')}")
    L.append(f"- accelerator: {meta.get('accel', '?')} (every row names its own; TCG latencies are not KVM latencies)")
    L.append(f"- repetitions: {meta.get('repetitions')}, {meta.get('seconds')} s measured per run, baseline column: **{baseline}**")
    if meta.get("stream_cc"):
        L.append(f"- host sender's TCP congestion control (`iperf -Z`, matrix key stream.cc): {meta['stream_cc']}"
                 " in every column; a guest that sends uses its own")
    if meta.get("variants"):
        vs = meta.get("variant_strings", {})
        L.append("- variants: " + "; ".join(
            f"`{k}` = {v or '(defaults)'}" + (f" (guest: `{vs[k]}`)" if k in vs else "") for k, v in meta["variants"].items()))
    L.append(f"- runs: {meta.get('runs_ok', 0)} ok, {meta.get('runs_error', 0)} failed, {meta.get('runs_skipped', 0)} skipped")
    L += [
        "",
        "Cells: median (min-max) over n repetitions, then cv = coefficient of variation (n >= 2 only). "
        "% change is of the medians vs the baseline, with [a 95% bootstrap confidence interval of the "
        "difference of medians, in %]; significance is a two-sided Mann-Whitney U test at p < 0.05: no mark = "
        "significant, `n.s.` = not significant, `?` = too few repetitions to tell (3 vs 3 cannot reach "
        "p < 0.05; use 4 or more). Service demand (netperf's S. Demand) = CPU us per transaction or per MB "
        "(10^6 bytes) over the guest's measured interval. CPU figures are % of one host CPU "
        "over the measured interval, from /proc; host = all CPUs busy time (so up to "
        f"{100 * int(meta.get('host_ncpu') or 1)}%); per CPU = throughput / (host CPU % / 100).",
        "",
    ]
    for note in meta.get("notes", []):
        L.append(f"> {note}")
    if meta.get("notes"):
        L.append("")

    by_group = {}
    for r in records:
        gk = (r["test"], r["backend"], tuple((p, r[p]) for p in PARAMS if p in r and p != TESTS[r["test"]]["row"]))
        by_group.setdefault(gk, []).append(r)
    for gk, recs in by_group.items():
        test = gk[0]
        info = TESTS[test]
        row_dim = info["row"]
        metric = info["metric"]
        idx = {(r[row_dim], r["column"]): r for r in recs}
        row_values = sorted({r[row_dim] for r in recs})
        gcols = [c for c in cols if any(r["column"] == c for r in recs)]
        accels = ",".join(sorted({a for r in recs for a in r["accel"].split(",")}))
        L.append(f"## {group_title((test, gk[1], tuple(x for x in gk[2] if x[0] != 'seconds')))} (accel {accels})")
        L.append("")
        row_name = "Frame size" if info["kind"] in ("pkt", "ndr") else {
            "instances": "Instances", "msg": "Message size", "size": "Payload bytes"}[row_dim]

        def record_cell(key, text):
            """A cell from the run's record: "-" when there is none or it
            lacks key, else text(record)."""

            def cell(rv, c):
                r = idx.get((rv, c))
                if not r or r.get(key) is None:
                    return "-"
                return text(r)

            return cell

        def main_cell(rv, c):
            r = idx.get((rv, c))
            if not r:
                return "-"
            s = f"{fmt_num(r['median'], metric)} ({fmt_num(r['min'], metric)}-{fmt_num(r['max'], metric)}) n={r['n']}"
            if r["cv"] is not None and r["n"] >= 2:
                s += f" cv {100 * r['cv']:.1f}%"
            ch = fmt_change(r["pct_vs_base"], r["significance"], (r.get("ci_low_pct"), r.get("ci_high_pct")))
            return s + (f" **{ch}**" if ch else "")

        L += _table(METRIC_LABEL.get(metric, metric), row_name, row_values, gcols, main_cell,
                    "lower is better" if not info["up"] else "")

        if metric in ("tps", "mbps"):
            unit = "trans/s" if metric == "tps" else "Mbit/s"

            def cpu_cell(rv, c):
                r = idx.get((rv, c))
                if not r or r.get("per_cpu") is None:
                    return "-" if not r else f"host {fmt_num(r['host_cpu_pct'])}%"
                s = f"host {fmt_num(r['host_cpu_pct'])}% -> {fmt_num(r['per_cpu'])} {unit}/CPU"
                ch = fmt_change(r.get("per_cpu_pct_vs_base"), r.get("per_cpu_significance"))
                return s + (f" **{ch}**" if ch else "")

            L += _table(f"host CPU % and {unit} per host CPU", row_name, row_values, gcols, cpu_cell)

            du = "transaction" if metric == "tps" else "MB"

            key = "txn" if metric == "tps" else "mb"

            def demand(r):
                parts = [f"host {fmt_num(r[f'host_us_per_{key}'])}"]
                for who in ("qemu", "backend", "peer", "server", "procs"):
                    v = r.get(f"{who}_us_per_{key}")
                    if v is not None:
                        parts.append(f"{'processes together' if who == 'procs' else who} {fmt_num(v)}")
                return ", ".join(parts) + f" (n={r.get('host_demand_n')})"

            L += _table(f"service demand: host CPU us per {du} (medians)", row_name, row_values, gcols,
                        record_cell(f"host_us_per_{key}", demand))

        def proc_cell(rv, c):
            r = idx.get((rv, c))
            if not r:
                return "-"
            parts = []
            for who in ("qemu", "backend", "peer", "server"):
                v = r.get(f"{who}_cpu_pct")
                if v is not None:
                    parts.append(f"{who} {fmt_num(v)}%")
            return ", ".join(parts) or "-"

        L += _table("process CPU % (of one CPU)", row_name, row_values, gcols, proc_cell)

        def quantiles_cell(prefix, note=lambda r: ""):
            keys = [f"{prefix}_{q}_ns" for q in ("p50", "p90", "p99", "p999")]
            return record_cell(keys[0], lambda r: " / ".join(fmt_num(r.get(k), "x_ns") for k in keys) + note(r))

        if any(r.get("lat_p50_ns") is not None for r in recs):
            L += _table("latency p50 / p90 / p99 / p99.9 (us, medians)", row_name, row_values, gcols,
                        quantiles_cell("lat"))

        if any(r.get("pooled_p50_ns") is not None for r in recs):
            L += _table("pooled p50 / p90 / p99 / p99.9 (us, from the guest's merged histograms)", row_name,
                        row_values, gcols, quantiles_cell("pooled", lambda r: f" (n={r['pooled_n']})"))

        if any(r.get("peer_lat_p50_ns") is not None for r in recs):

            peer_lat_cell = record_cell("peer_lat_p50_ns", lambda r: f"{fmt_num(r['peer_lat_p50_ns'], 'x_ns')} / "
                                        f"{fmt_num(r.get('peer_lat_p99_ns'), 'x_ns')}")
            who = ("memcaslap, log2 buckets: upper bounds" if info["kind"] == "memcached" else "sockperf --full-rtt")
            L += _table(f"host peer's own round trip p50 / p99 (us, {who}, medians)", row_name,
                        row_values, gcols, peer_lat_cell)

        odd = [r for r in recs if r.get("outstanding_mean") is not None and r.get("instances")
               and r["outstanding_mean"] < 0.5 * r["instances"] * (r.get("burst") or 1)]
        for r in odd:
            L.append(f"> Little's law: {r['column']} with {r['instances']} instance(s) x burst {r.get('burst') or 1} "
                     f"kept only {r['outstanding_mean']:.2f} transactions in flight on average (trans/s x mean "
                     "latency): the client did not keep its instances busy, or its latency misses queueing time.")
        if odd:
            L.append("")

        if any(r.get("kicks_per_txn") is not None for r in recs):

            drv_cell = record_cell("kicks_per_txn",
                                   lambda r: f"{fmt_num(r['kicks_per_txn'])} / {fmt_num(r.get('reclaims_per_txn'))}")
            unit = {"rr": "transaction", "stream": "message (one write of msg bytes)", "ping": "ping (whole boot)",
                    "memcached": "memcached command", "pkt": "frame", "ndr": "frame"}[info["kind"]]
        if test == "pkt_rr":
            unit = "round trip (one frame each way)"
            L += _table(f"driver: kicks / TX reclaim calls per {unit} (medians)", row_name, row_values, gcols, drv_cell)

        kvm_unit = kvmstats.unit(test)
        if any(r.get(f"kvm_exits_per_{kvm_unit}") is not None for r in recs):

            kvm_cell = record_cell(f"kvm_exits_per_{kvm_unit}",
                                   lambda r: " / ".join(fmt_rate(r.get(f"kvm_{n}_per_{kvm_unit}")) for n in KVM_SHOWN))
            per = {"txn": "transaction", "frame": "frame"}.get(kvm_unit, "MB (10^6 payload bytes)")
            L += _table(f"KVM: exits / instruction emulations / interrupt injections / halt exits per {per} "
                        "(query-stats over the guest's interval; medians)", row_name, row_values, gcols, kvm_cell)

    if meta.get("placement"):
        L += ["## Where the processes ran", "", "Share of each process's CPU time per host CPU (from field 39 of /proc/PID/task/*/stat, weighted by thread CPU time), per run:", ""]
        L += ["| run | column | test | backend | qemu | vCPU thread (pin.vcpu) | qemu threads (CPU mostly on) | "
              "backend process | backend threads | peer |",
              "|---|---|---|---|---|---|---|---|---|---|"]
        for p in meta["placement"]:
            threads = ", ".join(f"{t}@{c}" for t, c in (p.get("qemu_threads") or {}).items())
            bthreads = ", ".join(f"{t}@{c}" for t, c in (p.get("backend_threads") or {}).items())
            vcpu = (p.get("vcpu_cpus") or "-") + (f" (pinned {p['vcpu_pin']})" if p.get("vcpu_pin") else "")
            L.append(f"| {p['run']} | {p['column']} | {p['label']} | {p.get('backend', '')} | {p.get('qemu_cpus') or '-'} | "
                     f"{vcpu} | {threads or '-'} | {p.get('backend_cpus') or '-'} | {bthreads or '-'} | "
                     f"{p.get('peer_cpus') or '-'} |")
        L.append("")

    if meta.get("failures"):
        L += ["## Failed and skipped runs", ""]
        for f in meta["failures"]:
            L.append(f"- {f}")
        L.append("")

    if plots:
        L += ["## Plots", ""]
        for p in plots:
            L.append(f"![{os.path.splitext(p)[0]}]({p})")
        L.append("")
    return "\n".join(L)


def _ratio(a, b):
    return f"{a / b:.2f}" if a is not None and b else "-"


SCALING_KINDS = ("pkt", "rr", "stream", "memcached")  # the tests the queues axis runs


def scaling_metric(test):
    """(row field, its label) the scaling table and plot give for a test."""
    m = TESTS[test]["metric"]
    return m, {"pps": "frames/s", "tps": "trans/s", "mbps": "Mbit/s"}.get(m, m)


def scaling_values(r):
    """A row's headline metric and that per host CPU (metric / (host CPU %
    / 100)), each None where the row has none."""
    m, _ = scaling_metric(r["test"])
    v, h = r.get(m), r.get("host_cpu_pct")
    if not isinstance(v, (int, float)):
        return None, None
    per = r.get("pps_per_cpu") if m == "pps" else None
    if per is None and isinstance(h, (int, float)) and h > 0:
        per = round(v / (h / 100.0), 1)
    return v, per


def queues_groups(rows):
    """The queues axis's ok rows (packet, rr, stream and memcached tests) by
    (test, backend, the test's row parameter (frame size, instances,
    message size), column without its @qN, accelerator), then by queue
    count; {} when fewer than two queue counts ran (nothing to compare).
    The scaling table and plots.plot_scaling() both read it."""
    ok = [r for r in rows if r.get("status") == "ok" and
          TESTS.get(r.get("test"), {}).get("kind") in SCALING_KINDS]
    if len({r.get("queues") or 1 for r in ok}) < 2:
        return {}
    groups = {}
    for r in ok:
        base = re.sub(r"@q\d+$", "", r["column"])
        key = (r["test"], r["backend"], str(r.get(TESTS[r["test"]]["row"])), base, str(r.get("accel")))
        groups.setdefault(key, {}).setdefault(r.get("queues") or 1, []).append(r)
    return groups


def _med_of(rs, i):
    v = [scaling_values(r)[i] for r in rs]
    v = [x for x in v if isinstance(x, (int, float))]
    return statistics.median(v) if v else None


def queues_table(rows):
    """Markdown lines: the queues axis's scaling table. Per queues_groups()
    group, one line per queue count: the test's metric (frames/s, trans/s,
    Mbit/s), host CPU %, that per host CPU, and both as a ratio to the
    fewest queues' (q2/q1)."""
    groups = queues_groups(rows)
    if not groups:
        return []
    L = section("Scaling with queue pairs (the queues axis)",
                "Per queue count N: the guest has N vCPUs and its NIC N queue pairs (the appliance: mq=N smp=N, a "
                "burst loop (app=pkt) or a TCP/IP copy (rr, stream) per queue; Linux: ethtool -L combined N, and N "
                "pktgen threads for pkt_txonly). Medians over the repetitions; the metric is the guest's or the "
                "peer's total over all queues; per host CPU = metric / (host CPU % / 100); "
                "ratio = against the fewest queues' median; QEMU CPU % = the QEMU process alone (all its threads). "
                "Per queue = each queue's metric (medians, where the guest reports it). "
                "Where N vCPUs plus QEMU's I/O thread exceed the host's CPUs the host, not the queues, is measured.")
    for (test, backend, size, col, accel), byq in sorted(groups.items()):
        qs = sorted(byq)
        metric, label = scaling_metric(test)
        p0, c0 = _med_of(byq[qs[0]], 0), _med_of(byq[qs[0]], 1)
        unit = " B" if TESTS[test]["row"] in ("size", "msg") else f" {TESTS[test]['row']}"
        L += ["", f"### {test} {size}{unit}: {col} ({backend}, accel {accel})", "",
              f"| queues | n | {label} | ratio q/q{qs[0]} | host CPU % | QEMU CPU % | {label} per host CPU | "
              f"ratio q/q{qs[0]} | per queue {label} |",
              "|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
        for q in qs:
            rs = byq[q]
            val, per_cpu = _med_of(rs, 0), _med_of(rs, 1)
            perq = {}
            for r in rs:
                for e in r.get("per_queue") or []:
                    if isinstance(e.get(metric), (int, float)):
                        perq.setdefault(e.get("queue"), []).append(e[metric])
            perq_s = " / ".join(fmt_num(statistics.median(v)) for _, v in sorted(perq.items())) or "-"
            L.append(f"| {q} | {len(rs)} | {fmt_num(val)} | {_ratio(val, p0)} | {fmt_num(_med(rs, 'host_cpu_pct'))} | "
                     f"{fmt_num(_med(rs, 'qemu_cpu_pct'))} | {fmt_num(per_cpu)} | {_ratio(per_cpu, c0)} | {perq_s} |")
    return L


def write_all(outdir, rows, columns, baseline, meta, plots=()):
    """Write every file of a results folder; returns the summary records."""
    write_jsonl(os.path.join(outdir, "results.jsonl"), rows)
    write_csv(os.path.join(outdir, "results.csv"), rows)
    records, cols = summarise(rows, columns, baseline)
    write_summary_csv(os.path.join(outdir, "summary.csv"), records)
    with open(os.path.join(outdir, "report.md"), "w") as f:
        f.write(markdown(records, cols, baseline, meta, plots))
        f.write("\n".join(idle.table(rows, columns)) + "\n")
        for table in kinds.report_tables():
            f.write("\n".join(table(rows, columns)) + "\n")
        f.write("\n".join(queues_table(rows)) + "\n")
    return records, cols
