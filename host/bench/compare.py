"""compare.py: `vnetbench compare OLD NEW`, two results folders side by side
and a regression gate a CI can use.

    host/bench/vnetbench.py compare OLD NEW [--metric M[,M...]] [--alpha 0.05]
                                    [--min-change PCT] [--out FILE]

Cells are matched by column (variant or guest), test, backend and every
test parameter (sizes, instances, burst); runs that did not end ok are
left out. For each metric (default: each test's headline metric, tps,
mbps or the ping p50) a cell shows OLD and NEW as median (n), the % change
of the medians with a 95 % bootstrap confidence interval, the two-sided
Mann-Whitney U p-value, and a verdict:

  REGRESSION  significant (p < alpha) and worse by at least --min-change %
  improved    significant and better by at least --min-change %
  ~           anything else: the difference is within noise (or smaller
              than --min-change)
  ?           too few repetitions on a side to tell (stats.significance)

Direction: bigger is better for throughput (tps, mbps, *_per_cpu), smaller
for latencies (lat_*, peer_lat_*, cycle_*), CPU (*_cpu_pct) and service
demand (*_us_per_*). Exit status: 1 when any cell is a REGRESSION, 0
otherwise, 2 when the folders cannot be compared (missing, or no cell in
common).
"""

import argparse
import json
import os
import sys

import stats
from matrix import TESTS

PARAMS = ("req", "resp", "instances", "burst", "mps", "msg", "size")


def lower_is_better(metric):
    return (metric.startswith(("lat_", "peer_lat_", "cycle_")) or metric.endswith("_cpu_pct")
            or "_us_per_" in metric)


def load(folder):
    path = os.path.join(folder, "results.jsonl")
    if not os.path.isfile(path):
        raise ValueError(f"{path} not found (compare takes two results folders)")
    with open(path) as f:
        rows = [json.loads(l) for l in f if l.strip()]
    return [r for r in rows if r.get("status") == "ok" and r.get("test") in TESTS]


def cell_key(r):
    return (r["column"], r["test"], r.get("backend"), tuple((p, r.get(p)) for p in PARAMS if r.get(p) is not None))


# The fields of report.group_title() in other words, on purpose: a gate
# verdict's one-line key, not a table's title.
def key_label(k):
    col, test, backend, params = k
    d = dict(params)
    parts = []
    if "req" in d:
        parts.append(f"{d['req']}/{d['resp']}")
    if "msg" in d:
        parts.append(f"msg {d['msg']}")
    if "size" in d:
        parts.append(f"size {d['size']}")
    if "instances" in d:
        parts.append(f"x{d['instances']}")
    if d.get("burst", 1) > 1:
        parts.append(f"b{d['burst']}")
    if d.get("mps"):
        parts.append(f"open {d['mps']}/s")
    return f"{test} {' '.join(parts)} {backend} [{col}]"


def verdict(old, new, metric, alpha, min_change):
    """(verdict, pct, ci, p) of cell new against cell old."""
    pct = stats.pct_change(new, old)
    ci = stats.bootstrap_ci(new, old)
    p = stats.p_value(new, old)
    sig = stats.significance(new, old)
    if sig == stats.UNKNOWN or pct is None:
        return "?", pct, ci, p
    worse = pct > 0 if lower_is_better(metric) else pct < 0
    if p is not None and p < alpha and abs(pct) >= min_change:
        return ("REGRESSION" if worse else "improved"), pct, ci, p
    return "~", pct, ci, p


def fmt(v):
    if v is None:
        return "-"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:,.1f}"
    return f"{v:,.3f}"


def compare(old_rows, new_rows, metrics=None, alpha=stats.ALPHA, min_change=1.0):
    """Records, one per (cell, metric) present on both sides."""
    old, new = {}, {}
    for src, dst in ((old_rows, old), (new_rows, new)):
        for r in src:
            dst.setdefault(cell_key(r), []).append(r)
    out = []
    for k in sorted(set(old) & set(new), key=lambda k: (k[1], str(k[2]), str(k[3]), k[0])):
        ms = metrics or [TESTS[k[1]]["metric"]]
        for m in ms:
            a = stats.Cell([r.get(m) for r in old[k] if isinstance(r.get(m), (int, float))])
            b = stats.Cell([r.get(m) for r in new[k] if isinstance(r.get(m), (int, float))])
            if not a or not b:
                continue
            v, pct, ci, p = verdict(a, b, m, alpha, min_change)
            out.append({"cell": key_label(k), "metric": m, "old_median": a.median, "old_n": a.n,
                        "new_median": b.median, "new_n": b.n, "pct": pct,
                        "ci_low_pct": ci[0] if ci else None, "ci_high_pct": ci[1] if ci else None,
                        "p_value": p, "verdict": v})
    return out


def markdown(recs, old_dir, new_dir, alpha, min_change):
    L = [f"# vnetbench compare", "", f"- OLD: `{old_dir}`", f"- NEW: `{new_dir}`",
         f"- cells: median (n); change = NEW vs OLD medians with a 95% bootstrap confidence interval; p = two-sided "
         f"Mann-Whitney U; REGRESSION = p < {alpha} and worse by at least {min_change}%", "",
         "| cell | metric | OLD | NEW | change [95% CI] | p | verdict |", "|---|---|---|---|---|---|---|"]
    for r in recs:
        ch = "-" if r["pct"] is None else f"{r['pct']:+.1f}%"
        if r["ci_low_pct"] is not None:
            ch += f" [{r['ci_low_pct']:+.1f}, {r['ci_high_pct']:+.1f}]"
        p = "-" if r["p_value"] is None else f"{r['p_value']:.3f}"
        L.append(f"| {r['cell']} | {r['metric']} | {fmt(r['old_median'])} ({r['old_n']}) | "
                 f"{fmt(r['new_median'])} ({r['new_n']}) | {ch} | {p} | {r['verdict']} |")
    n_reg = sum(r["verdict"] == "REGRESSION" for r in recs)
    L += ["", f"{len(recs)} cells compared, {n_reg} regression(s)"]
    return "\n".join(L) + "\n"


def main(argv):
    ap = argparse.ArgumentParser(prog="vnetbench compare", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--metric", default="", help="comma list of row keys (default: each test's headline metric)")
    ap.add_argument("--alpha", type=float, default=stats.ALPHA, help="significance level [0.05]")
    ap.add_argument("--min-change", type=float, default=1.0, help="smallest change in %% that counts [1]")
    ap.add_argument("--out", help="also write the table to this file")
    a = ap.parse_args(argv)
    try:
        old_rows, new_rows = load(a.old), load(a.new)
    except ValueError as e:
        print(f"vnetbench compare: error: {e}", file=sys.stderr)
        return 2
    metrics = [m for m in a.metric.replace(" ", ",").split(",") if m] or None
    recs = compare(old_rows, new_rows, metrics, a.alpha, a.min_change)
    if not recs:
        print(f"vnetbench compare: error: {a.old} and {a.new} have no cell (column, test, parameters) "
              "with that metric in common", file=sys.stderr)
        return 2
    md = markdown(recs, a.old, a.new, a.alpha, a.min_change)
    sys.stdout.write(md)
    if a.out:
        with open(a.out, "w") as f:
            f.write(md)
    return 1 if any(r["verdict"] == "REGRESSION" for r in recs) else 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.exit(main(sys.argv[1:]))
