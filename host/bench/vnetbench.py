#!/usr/bin/env python3
"""vnetbench: run a benchmark matrix of the vnetlab appliance and write a
results folder (`make bench` runs this).

    host/bench/vnetbench.py [--matrix FILE] [--KEY VALUE ...] [--out DIR]

Variants x tests x sizes x instances x backends x repetitions: each
variant is built once, then every run boots the appliance under QEMU
(host/qemu-run.sh: KVM when usable, else TCG), with its host peer
(sockperf, iperf, ping) inside a private network namespace, and accounts
host CPU from /proc over the measured interval. Ctrl-C, SIGTERM or any
failure tears down every process and namespace it created and still
writes the report of the runs that finished.

Results in results/<timestamp>/ (or --out): results.jsonl (one row per
run), results.csv, summary.csv (one row per table cell), report.md
(tables in the layout of the 2011 virtio-net thread, host CPU and
throughput per CPU, % change vs the baseline with significance), PNG
plots, logs/ (console and peer output of every run), matrix.json.

Examples:
    make bench BENCH_ARGS="--matrix host/bench/matrices/small.txt"
    host/bench/vnetbench.py --variants default,kick_burst --tests tcp_rr \\
        --rr-instances 1,25 --backends tap,tap:tx=timer --repetitions 3

    host/bench/vnetbench.py --matrix host/bench/matrices/pairs.txt
        # guest pairs: two guests against each other (pairs.py)

    host/bench/vnetbench.py compare OLD NEW [--metric tps] [--min-change 2]
        # two results folders side by side; exit 1 on a significant
        # regression (host/bench/compare.py)

Exit status: 0 all runs ok (or skipped with a reason), 1 a run failed,
2 bad input (the message says what to change), 130 interrupted.
"""

import argparse
import json
import os
import platform
import shlex
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _ensure_matplotlib():
    """Debian's python3-matplotlib lives in /usr/bin/python3's path; a
    python3 earlier in PATH (pyenv, venv) may not see it: re-run under the
    system interpreter, which has it."""
    import importlib.util

    # find_spec, not an import: importing matplotlib costs 0.5-4 s on these
    # hosts, and only a run that plots needs it (plots is imported there).
    if importlib.util.find_spec("matplotlib") is not None:
        return
    sysp = "/usr/bin/python3"
    if os.path.realpath(sys.executable) != os.path.realpath(sysp) and os.path.exists(sysp) and not os.environ.get("VNETBENCH_REEXEC"):
        r = subprocess.run([sysp, "-c", "import importlib.util, sys; "
                            "sys.exit(importlib.util.find_spec('matplotlib') is None)"],
                           capture_output=True, timeout=60)
        if r.returncode == 0:
            os.environ["VNETBENCH_REEXEC"] = "1"
            os.execv(sysp, [sysp, os.path.abspath(__file__)] + sys.argv[1:])
    print("vnetbench: error: python3-matplotlib is not importable (as root: apt-get install -y python3-matplotlib, or `make deps`)", file=sys.stderr)
    sys.exit(2)


sys.path.insert(0, HERE)
if __name__ == "__main__" and sys.argv[1:2] == ["compare"]:
    # Needs no plots (and so no matplotlib): a CI gate should be cheap.
    import compare  # noqa: E402

    sys.exit(compare.main(sys.argv[2:]))
_ensure_matplotlib()

import backends  # noqa: E402
import cpu  # noqa: E402
import guests  # noqa: E402
import kinds  # noqa: E402
import matrix as matrix_mod  # noqa: E402
import pairs  # noqa: E402
import peers  # noqa: E402
import procs  # noqa: E402
import report  # noqa: E402
import runs  # noqa: E402
import variants  # noqa: E402
from procs import BenchError  # noqa: E402


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="vnetbench",
        description="Run a vnetlab benchmark matrix (see the module docstring and host/bench/matrices/).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Matrix keys (options override the matrix file):\n" + "\n".join(
            f"  {matrix_mod.key_option(k):22} {d} [{v or '-'}]" for k, (v, d) in matrix_mod.KEYS.items()),
    )
    ap.add_argument("--matrix", help="matrix file (key = value lines, or .json)")
    ap.add_argument("--variant-def", action="append", default=[], metavar="NAME=VARS",
                    help="define a variant, e.g. 'v2burst=TX_RECLAIM=v2 TX_KICK=burst'")
    ap.add_argument("--out", help="results folder (default results/<timestamp>)")
    ap.add_argument("--list", action="store_true", help="print the expanded runs and exit")
    ap.add_argument("--rereport", metavar="DIR", help="only rewrite report, CSVs and plots of results folder DIR "
                    "from its results.jsonl (--baseline picks another baseline)")
    ap.add_argument("--quiet", action="store_true", help="no build chatter")
    for k, (_v, d) in matrix_mod.KEYS.items():
        ap.add_argument(matrix_mod.key_option(k), dest="k_" + k, metavar="V", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    # argparse accepts unambiguous prefixes; a typo should not silently pick
    # some other key, so only exact option names are taken.
    settings, defs = {}, {}
    if a.matrix:
        settings, defs = matrix_mod.parse_file(a.matrix)
    for k in matrix_mod.KEYS:
        v = getattr(a, "k_" + k)
        if v is not None:
            settings[k] = v
    for d in a.variant_def:
        name, eq, vars_ = d.partition("=")
        if not eq or not name:
            raise BenchError(f"--variant-def '{d}': expected NAME=VAR=value ...")
        defs[name] = vars_
    return a, settings, defs


def host_info():
    info = {"host_ncpu": os.cpu_count(), "host_kernel": platform.release()}
    try:
        for l in open("/proc/cpuinfo"):
            if l.startswith("model name"):
                info["host_cpu_model"] = l.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        r = subprocess.run(["qemu-system-x86_64", "--version"], capture_output=True, text=True, timeout=10)
        info["qemu_version"] = r.stdout.splitlines()[0] if r.stdout else ""
    except (OSError, subprocess.TimeoutExpired):
        pass
    return info


def host_busy(seconds=1.0):
    """Busy % (of one CPU) of the whole host over a short quiet moment
    before the runs: other load makes every CPU figure (and the noise)
    larger, so it is reported."""
    a = cpu.read_stat()["all"]
    time.sleep(seconds)
    b = cpu.read_stat()["all"]
    total = b[1] - a[1]
    return round(100.0 * (os.cpu_count() or 1) * (b[0] - a[0]) / total, 1) if total > 0 else None


def cpu_list(text):
    """taskset/EAL list '0,2-3' -> [0, 2, 3] (order kept: the first is DPDK's main lcore)."""
    out = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out += list(range(int(a), int(b or a) + 1))
    return out


def fmt_time(s):
    s = int(s)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def progress(i, n, run, row, left):
    if row["status"] == "ok":
        parts = []
        kind = matrix_mod.TESTS[run.test]["kind"]
        if row.get("tps") is not None and kind == "rr":
            parts.append(f"{row['tps']:,.0f} trans/s")
        if row.get("mbps") is not None and kind == "stream":
            parts.append(f"{row['mbps']:,.1f} Mbit/s")
        if row.get("lat_p50_ns"):
            parts.append(f"p50 {row['lat_p50_ns'] / 1000:.1f} us")
        if row.get("host_cpu_pct") is not None:
            per = row.get("tps_per_cpu") or row.get("mbps_per_cpu")
            parts.append(f"host CPU {row['host_cpu_pct']:.0f}%" + (f" ({per:,.0f}/CPU)" if per else ""))
        what = ", ".join(parts)
    elif row["status"] == "skipped":
        what = f"skipped: {row['error']}"
    else:
        what = f"FAILED: {row['error']}"
    print(f"[{i:>{len(str(n))}}/{n}] {run.label()}: {what} | {row['wall_s']:.1f}s, ~{fmt_time(left)} left", flush=True)


class Interrupted(Exception):
    pass


def main(argv):
    try:
        a, settings, defs = parse_args(argv)
        if a.rereport:
            return rereport(a.rereport, settings.get("baseline"))
        guest_names = list(guests.KINDS)
        m = matrix_mod.Matrix(settings, defs, variants.resolve, guest_names, variants.known_description())
        if "vnetlab" in m.guests or m.pairs:
            for v in m.variants:
                variants.parse_vars(v, m.variant_vars[v])
        # Both roles face stock sockperf.
        if any(t.endswith("_rr") for t in m.tests):
            small = [f"{q}/{r}" for q, r in m.rr_sizes if q < 14 or r < 14]
            if small:
                raise BenchError(f"rr sizes {', '.join(small)}: below 14 bytes the appliance uses raw framing, which "
                                 "sockperf does not speak; use sizes of at least 14 (sockperf's header)")
    except BenchError as e:
        print(f"vnetbench: error: {e}", file=sys.stderr)
        return 2

    all_runs = m.runs()
    if a.list:
        for r in all_runs:
            print(r.label())
        return 0

    # Refuse what cannot work before building anything.
    skipped_backends = {}
    try:
        for spec, name, opts in m.backends:
            cls = backends.CLASSES[name]
            why = cls.unavailable()
            if why:
                skipped_backends[spec] = why
                print(f"vnetbench: backend {spec} skipped: {why}", flush=True)
                continue
            cls(spec, opts).check()
        if m.pairs:
            if os.geteuid() != 0:
                raise BenchError("pairs need root (a network namespace with a bridge and taps)")
        else:
            procs.require_tools(peers.tools_for(m.tests, runs.roles(m)))
        if any(m.pin.values()):
            procs.require_tools(["taskset"])
    except BenchError as e:
        print(f"vnetbench: error: {e}", file=sys.stderr)
        return 2

    started = time.strftime("%Y%m%d-%H%M%S")
    out = a.out or os.path.join(variants.TOP, "results", started)
    logdir = os.path.join(out, "logs")
    os.makedirs(logdir, exist_ok=True)
    meta = {
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "command": " ".join(shlex.quote(x) for x in ["host/bench/vnetbench.py"] + list(argv)),
        "repetitions": m.repetitions,
        "seconds": m.seconds,
        "variants": m.variant_vars,
        "stream_cc": m.stream_cc if any(matrix_mod.TESTS[t]["kind"] == "stream" for t in m.tests) else "",
        "notes": [],
        **host_info(),
    }
    for spec, why in skipped_backends.items():
        n = sum(r.backend == spec for r in all_runs)
        meta["notes"].append(f"backend {spec} skipped ({n} runs): {why}")
    for spec, name, _opts in m.backends:
        if name == "vhost-user" and spec not in skipped_backends and m.pin.get("qemu"):
            fwd = set(cpu_list(m.pin.get("backend") or "0,1")[1:])
            shared = fwd & set(cpu_list(m.pin["qemu"]))
            if shared:
                note = (f"pin.qemu={m.pin['qemu']} shares CPU {','.join(map(str, sorted(shared)))} with testpmd's "
                        "busy-polling forwarding lcore: every round trip then waits for a scheduler time slice")
                print(f"vnetbench: warning: {note}", flush=True)
                meta["notes"].append(note)
    busy = host_busy()
    meta["host_busy_before_pct"] = busy
    if busy is not None and busy > 25:
        note = (f"the host was already {busy:.0f}% busy (of one CPU) before the runs: other load inflates "
                "host CPU figures and noise; stop it for numbers worth quoting")
        print(f"vnetbench: warning: {note}", flush=True)
        meta["notes"].append(note)
    with open(os.path.join(out, "matrix.json"), "w") as f:
        json.dump({"matrix": m.describe(), "meta": meta}, f, indent=2)
    n_runs = sum(r.backend not in skipped_backends for r in all_runs)
    print(f"vnetbench: {n_runs} runs -> {out}", flush=True)

    def on_signal(signum, _frame):
        # The first signal unwinds the run (its finally blocks tear down);
        # more signals while that happens must not cut the teardown short.
        for s in old:
            signal.signal(s, lambda *_: print("vnetbench: still cleaning up, please wait", flush=True))
        raise Interrupted(signal.Signals(signum).name)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    rows = []
    status = 0
    jsonl = os.path.join(out, "results.jsonl")
    try:
        sides = {}  # run.guest -> its guests.KINDS object (pairs.Sides for "pair")
        say = (lambda s: None) if a.quiet else (lambda s: print(f"vnetbench: {s}", flush=True))
        if m.pairs:
            sides["pair"] = pairs.Sides(m, say)
            sides["pair"].prepare()
        for g in m.guests:
            sides[g] = guests.make(g, m, say)
            sides[g].prepare()
            describe = getattr(sides[g], "describe", None)
            if describe:
                meta["notes"].append(describe())
        overhead = []
        # A backend this host cannot run was announced once above; its runs
        # are left out rather than listed one by one.
        todo = [r for r in all_runs if r.backend not in skipped_backends]
        for i, run in enumerate(todo, 1):
            row = kinds.execute(run, m, sides[run.guest], logdir)
            if row["status"] != "skipped":
                overhead.append(row["wall_s"] - run.params["seconds"])
            rows.append(row)
            with open(jsonl, "a") as f:
                f.write(json.dumps(row, sort_keys=True) + "\n")
            avg = sum(overhead) / len(overhead) if overhead else 5.0
            left = sum(r.params["seconds"] + avg for r in todo[i:])
            progress(i, len(todo), run, row, left)
            if row["status"] == "error":
                status = 1
                detail = row.get("error_detail", "")
                if "\n" in detail:
                    print("    " + detail.replace("\n", "\n    "), flush=True)
    except Interrupted as e:
        print(f"vnetbench: interrupted ({e}); cleaning up and writing the report of {len(rows)} finished runs", flush=True)
        meta["notes"].append(f"interrupted by {e} after {len(rows)} of {len(all_runs)} runs")
        status = 130
    except BenchError as e:
        print(f"vnetbench: error: {e}", file=sys.stderr)
        meta["notes"].append(f"stopped: {str(e).splitlines()[0]}")
        status = 2
    finally:
        # Whatever was half set up when we were interrupted.
        procs.stop_all()
        backends.close_all()
        for s, h in old.items():
            signal.signal(s, h)

    columns = [m.column_name(*c) for c in m.columns]
    write_results(out, rows, columns, m.baseline, meta)
    with open(os.path.join(out, "matrix.json"), "w") as f:
        json.dump({"matrix": m.describe(), "meta": meta}, f, indent=2)
    return status


def write_results(out, rows, columns, baseline, meta):
    """report.md, CSVs, JSON lines and plots of a results folder."""
    # Never interrupted half-way through writing the report.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        meta["runs_ok"] = sum(r["status"] == "ok" for r in rows)
        meta["runs_error"] = sum(r["status"] == "error" for r in rows)
        meta["runs_skipped"] = sum(r["status"] == "skipped" for r in rows)
        meta["variant_strings"] = {r["column"]: r["guest_variant"] for r in rows if r.get("guest_variant")}
        meta["accel"] = ",".join(sorted({str(r.get("accel")) for r in rows if r.get("accel")})) or "?"
        meta["failures"] = [f"run {r['run']} ({r['test']} {r['column']} {r['backend']}): {r['status']}: {r['error']}"
                            for r in rows if r["status"] != "ok"]
        meta["placement"] = [
            {"run": r["run"], "column": r["column"],
             "label": f"{r['test']} {r.get('instances') or r.get('msg') or r.get('size')}",
             "backend": r.get("backend"), "qemu_cpus": r.get("qemu_cpus"), "qemu_threads": r.get("qemu_threads"),
             "backend_cpus": r.get("backend_cpus"), "backend_threads": r.get("backend_threads"),
             "peer_cpus": r.get("peer_cpus"), "vcpu_cpus": r.get("vcpu_cpus"), "vcpu_pin": r.get("vcpu_pin")}
            for r in rows if r["status"] == "ok"
        ]
        records, cols = report.summarise(rows, columns, baseline)
        import plots  # here, not at the top: matplotlib.pyplot takes 0.6-1.7 s to import

        files = plots.plot_all(records, cols, out) + plots.plot_scaling(rows, out) + plots.plot_loadlat(rows, columns, out)
        report.write_all(out, rows, columns, baseline, meta, files)
        section = pairs.report_section(rows)
        if section:
            with open(os.path.join(out, "report.md"), "a") as f:
                f.write("\n" + "\n".join(section))
        print(f"vnetbench: report {os.path.join(out, 'report.md')} ({meta['runs_ok']} ok, "
              f"{meta['runs_error']} failed, {meta['runs_skipped']} skipped; {len(files)} plots)", flush=True)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_DFL)


def rereport(out, baseline):
    """Rewrite the report, CSVs and plots of a results folder from its
    results.jsonl (e.g. with another baseline)."""
    jsonl = os.path.join(out, "results.jsonl")
    if not os.path.isfile(jsonl):
        print(f"vnetbench: error: {jsonl} not found (--rereport takes a results folder)", file=sys.stderr)
        return 2
    rows = report.read_jsonl(jsonl)
    meta, columns = {}, []
    try:
        with open(os.path.join(out, "matrix.json")) as f:
            saved = json.load(f)
        meta = saved.get("meta", {})
        mx = saved.get("matrix", {})
        columns = mx.get("pairs") or (list(mx.get("variants", {})) + [g for g in mx.get("guests", []) if g != "vnetlab"])
        baseline = baseline or mx.get("baseline")
    except (OSError, ValueError):
        pass
    for r in rows:
        if r["column"] not in columns:
            columns.append(r["column"])
    baseline = baseline or (columns[0] if columns else "")
    if baseline not in columns:
        print(f"vnetbench: error: baseline '{baseline}' is not a column of {out} ({', '.join(columns)})", file=sys.stderr)
        return 2
    meta.setdefault("notes", [])
    write_results(out, rows, columns, baseline, meta)
    return 0

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
