"""plots.py: PNG plots of the summary records (report.summarise()).

  latency_<test>_<backend>.png   round-trip percentiles per column (RR, ping)
  tps_<test>_<backend>.png       transactions/s vs instances (RR)
  mbps_<test>_<backend>.png      Mbit/s vs message size (STREAM/MAERTS)
  kicks_<test>_<backend>.png     kicks per transaction per column
  cdf_<test>_<backend>_...png    round-trip CDF per column from the guest's
                                 merged histograms (RR client runs)
  scaling_<test>_<backend>_<size>_<accel>.png   the queues axis: frames/s and
                                 frames/s per host CPU vs queue pairs, per column
  loadlat_<test>_<backend>_<req>_<resp>.png      the load sweep (loadlat.py):
                                 sockperf p50 and p99 vs offered msg/s, per column

One line or bar series per column, so another guest is one more series.
Error bars are the min-max over repetitions. Needs python3-matplotlib
(the Agg backend, no display).
"""

import os
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402
import statistics  # noqa: E402

import loadlat  # noqa: E402
import report  # noqa: E402

PCTS = (("lat_p50_ns", "p50"), ("lat_p90_ns", "p90"), ("lat_p99_ns", "p99"), ("lat_p999_ns", "p99.9"))


def _slug(*parts):
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", "_".join(str(p) for p in parts if p is not None)).strip("-")


def _by(records, *keys):
    out = {}
    for r in records:
        out.setdefault(tuple(r.get(k) for k in keys), []).append(r)
    return out


def _subtitle(recs, skip):
    keys = ("req", "resp", "burst", "instances", "msg", "threads")
    d = {k: recs[0].get(k) for k in keys if k not in skip and recs[0].get(k) is not None}
    s = ", ".join(f"{k} {v}" for k, v in d.items())
    return s + f" (accel {recs[0].get('accel')})"


def _save(fig, outdir, name):
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, name), dpi=90)
    plt.close(fig)
    return name


def _errbar(ax, xs, recs, label, scale=1.0):
    ys = [r["median"] / scale for r in recs]
    lo = [(r["median"] - r["min"]) / scale for r in recs]
    hi = [(r["max"] - r["median"]) / scale for r in recs]
    ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label=label)


def plot_all(records, cols, outdir):
    """Write every plot the records allow; returns the file names."""
    files = []
    for (test, backend), recs in _by(records, "test", "backend").items():
        metric = recs[0]["metric"]

        # Latency percentiles per column, at the smallest load measured.
        lat = [r for r in recs if r.get("lat_p50_ns") is not None]
        if lat:
            for sub in _by(lat, "req", "resp", "burst", "msg", "threads").values():
                load_key = "instances" if sub[0].get("instances") is not None else "size"
                low = min(r.get(load_key) or 0 for r in sub)
                sub = [r for r in sub if (r.get(load_key) or 0) == low]
                fig, ax = plt.subplots(figsize=(6, 4))
                for c in cols:
                    rs = [r for r in sub if r["column"] == c]
                    if rs:
                        ax.plot([p for _, p in PCTS], [rs[0].get(k, 0) / 1000 for k, _ in PCTS], marker="o", label=c)
                ax.set_yscale("log")
                ax.set_ylabel("round trip (us)")
                ax.set_title(f"{test} latency percentiles, {backend}\n{_subtitle(sub, ())}", fontsize=9)
                ax.legend(fontsize=8)
                ax.grid(True, which="both", alpha=0.3)
                files.append(_save(fig, outdir, _slug("latency", test, backend, sub[0].get("req"), sub[0].get("resp"), sub[0].get("msg"),
                                                   sub[0].get("threads")) + ".png"))

        if metric == "tps":
            for sub in _by(recs, "req", "resp", "burst", "threads").values():
                fig, ax = plt.subplots(figsize=(6, 4))
                for c in cols:
                    rs = sorted((r for r in sub if r["column"] == c), key=lambda r: r["instances"])
                    if rs:
                        _errbar(ax, [r["instances"] for r in rs], rs, c)
                ax.set_xlabel("instances")
                ax.set_ylabel("transactions/s")
                ax.set_title(f"{test} transactions/s vs instances, {backend}\n{_subtitle(sub, ('instances',))}", fontsize=9)
                ax.legend(fontsize=8)
                ax.grid(True, alpha=0.3)
                files.append(_save(fig, outdir, _slug("tps", test, backend, sub[0].get("req"), sub[0].get("resp"), sub[0].get("burst"),
                                                   sub[0].get("threads")) + ".png"))

        if metric == "mbps":
            for sub in _by(recs, "instances").values():
                fig, ax = plt.subplots(figsize=(6, 4))
                for c in cols:
                    rs = sorted((r for r in sub if r["column"] == c), key=lambda r: r["msg"])
                    if rs:
                        _errbar(ax, [r["msg"] for r in rs], rs, c)
                ax.set_xscale("log", base=2)
                ax.set_xlabel("message size (bytes)")
                ax.set_ylabel("Mbit/s")
                ax.set_title(f"{test} Mbit/s vs message size, {backend}\n{_subtitle(sub, ('msg',))}", fontsize=9)
                ax.legend(fontsize=8)
                ax.grid(True, alpha=0.3)
                files.append(_save(fig, outdir, _slug("mbps", test, backend, "x", sub[0]["instances"]) + ".png"))

        with_cdf = [r for r in recs if r.get("_cdf")]
        for sub in _by(with_cdf, "req", "resp", "burst", "instances").values():
            fig, ax = plt.subplots(figsize=(6, 4))
            for c in cols:
                rs = [r for r in sub if r["column"] == c]
                if rs:
                    xs = [v / 1000 for v, _ in rs[0]["_cdf"]]
                    ys = [f for _, f in rs[0]["_cdf"]]
                    ax.step(xs, ys, where="post", label=f"{c} (n={rs[0].get('pooled_n')})")
            ax.set_xscale("log")
            ax.set_xlabel("round trip (us)")
            ax.set_ylabel("fraction of transactions")
            ax.set_title(f"{test} round-trip CDF, {backend}, pooled over repetitions\n{_subtitle(sub, ())}", fontsize=9)
            ax.legend(fontsize=8)
            ax.grid(True, which="both", alpha=0.3)
            files.append(_save(fig, outdir, _slug("cdf", test, backend, sub[0].get("req"), sub[0].get("resp"),
                                                  sub[0].get("instances")) + ".png"))

        kick = [r for r in recs if r.get("kicks_per_txn") is not None]
        if kick:
            row_key = "instances" if metric == "tps" else ("msg" if metric == "mbps" else "size")
            loads = sorted({r.get(row_key) for r in kick})
            fig, ax = plt.subplots(figsize=(6, 4))
            present = [c for c in cols if any(r["column"] == c for r in kick)]
            width = 0.8 / max(1, len(present))
            for i, c in enumerate(present):
                ys = []
                for ld in loads:
                    rs = [r for r in kick if r["column"] == c and r.get(row_key) == ld]
                    # Several groups (e.g. sizes) can share a load: plot the first.
                    ys.append(rs[0]["kicks_per_txn"] if rs else 0)
                ax.bar([j + i * width for j in range(len(loads))], ys, width, label=c)
            ax.set_xticks([j + width * (len(present) - 1) / 2 for j in range(len(loads))])
            ax.set_xticklabels([str(x) for x in loads])
            ax.set_xlabel(row_key)
            ax.set_ylabel({"tps": "kicks per transaction", "mbps": "kicks per message"}.get(metric, "kicks per ping (whole boot)"))
            ax.set_title(f"{test} kicks per transaction per variant, {backend}\n(accel {kick[0].get('accel')})", fontsize=9)
            ax.legend(fontsize=8)
            ax.grid(True, axis="y", alpha=0.3)
            files.append(_save(fig, outdir, _slug("kicks", test, backend) + ".png"))
    return files


def plot_scaling(rows, outdir):
    """The queues axis (report.queues_groups()): per test, backend, row
    parameter (frame or message size, instances) and accelerator, the
    test's metric (frames/s, trans/s, Mbit/s) and that per host CPU against
    the queue count, one line per column (median, min-max bars); the file
    names."""
    figs = {}
    for (test, backend, size, col, accel), byq in sorted(report.queues_groups(rows).items()):
        key = (test, backend, size, accel)
        if key not in figs:
            figs[key] = plt.subplots(1, 2, figsize=(9, 4))
        fig, (a1, a2) = figs[key]
        qs = sorted(byq)
        for ax, i in ((a1, 0), (a2, 1)):
            vals = [[v for v in (report.scaling_values(r)[i] for r in byq[q]) if isinstance(v, (int, float))]
                    for q in qs]
            xs = [q for q, v in zip(qs, vals) if v]
            vals = [v for v in vals if v]
            med = [statistics.median(v) for v in vals]
            ax.errorbar(xs, med, yerr=[[m - min(v) for m, v in zip(med, vals)], [max(v) - m for m, v in zip(med, vals)]],
                        marker="o", capsize=3, label=col)
    files = []
    for (test, backend, size, accel), (fig, (a1, a2)) in figs.items():
        _, unit = report.scaling_metric(test)
        for ax, label in ((a1, f"{unit} (all queues)"), (a2, f"{unit} per host CPU")):
            ax.set_xlabel("queue pairs (= vCPUs)")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_ylabel(label)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8)
        fig.suptitle(f"{test} {size}{' B' if report.TESTS[test]['row'] in ('size', 'msg') else ''} scaling with queue pairs, {backend} (accel {accel})", fontsize=9)
        files.append(_save(fig, outdir, _slug("scaling", test, backend, size, accel) + ".png"))
    return files



def plot_loadlat(rows, cols, outdir):
    """The load sweep (loadlat.points()): per test, backend and size, the
    host peer's p50 (solid) and p99 (dashed) round trip against the offered
    msg/s, one colour per column (medians); the file names."""
    files = []
    for (test, backend, req, resp), bycol in sorted(loadlat.load_rows(rows).items(), key=lambda kv: str(kv[0])):
        fig, ax = plt.subplots(figsize=(6, 4))
        accels = set()
        for i, c in enumerate([c for c in cols if c in bycol] + [c for c in bycol if c not in cols]):
            pts = [(f["offered_mps"], f) for load, f in loadlat.points(bycol[c]) if load != "max"]
            pts = [(x, f) for x, f in pts if x]
            if not pts:
                continue
            accels.update(f["accel"] for _, f in pts)
            colour = f"C{i % 10}"
            for key, style, name in (("peer_lat_p50_ns", "-", "p50"), ("peer_lat_p99_ns", "--", "p99")):
                xy = [(x, f[key] / 1000) for x, f in pts if f.get(key) is not None]
                if xy:
                    ax.plot([x for x, _ in xy], [y for _, y in xy], style, color=colour, marker="o", label=f"{c} {name}")
        if not ax.lines:
            plt.close(fig)
            continue
        ax.set_yscale("log")
        ax.set_xlabel("offered msg/s (sockperf under-load --mps)")
        ax.set_ylabel("round trip (us, sockperf --full-rtt)")
        ax.set_title(f"{test} {req}/{resp} B latency vs offered load, {backend}\n(accel {','.join(sorted(accels))})",
                     fontsize=9)
        ax.legend(fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
        files.append(_save(fig, outdir, _slug("loadlat", test, backend, req, resp) + ".png"))
    return files
