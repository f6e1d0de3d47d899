"""The benchmark harness (host/bench/): statistics and report code on
synthetic rows, refusals of bad input, and a smoke run of a real matrix
(two variants, a short RR and a short STREAM; tap backend as root, slirp
otherwise) whose report, CSVs, JSON lines and plots must agree with each
other. No test here judges a speed."""

import csv
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from lib import TOP, Fail, Skip, check_kvm_columns

BENCH = os.path.join(TOP, "host", "bench")
VNETBENCH = os.path.join(BENCH, "vnetbench.py")
SMOKE = os.path.join(BENCH, "matrices", "smoke.txt")
sys.path.insert(0, BENCH)

import cpu  # noqa: E402
import idle  # noqa: E402
import report  # noqa: E402
import stats  # noqa: E402
from procs import BenchError, require_tools  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def vnetbench(args, timeout, env=None, python=None):
    r = subprocess.run([python or sys.executable, VNETBENCH, *args], capture_output=True, text=True,
                       timeout=timeout, env=env, cwd=TOP)
    return r


def synthetic_report(rows, columns=("base",)):
    """report.md of synthetic rows (baseline the first column)."""
    with tempfile.TemporaryDirectory() as d:
        report.write_all(d, rows, list(columns), columns[0], {"started": "synthetic", "host_ncpu": 2})
        with open(os.path.join(d, "report.md")) as f:
            return f.read()


def short_run(t, what, args, timeout=300):
    """A one-repetition, one-second vnetbench run into a temporary folder
    (removed at the end of the test): (the folder, its results.jsonl rows)."""
    out = tempfile.mkdtemp(prefix="vnetlab-" + what.split()[0] + "-")
    t.cleanups.append(lambda: shutil.rmtree(out, ignore_errors=True))
    r = vnetbench(args + ["--repetitions", "1", "--seconds", "1", "--warmup", "0", "--out", out], timeout=timeout)
    if r.returncode:
        raise Fail(f"{what} run failed ({r.returncode}): {r.stdout[-600:]}{r.stderr[-300:]}")
    with open(os.path.join(out, "results.jsonl")) as f:
        return out, [json.loads(line) for line in f]


def approx(a, b, rel=1e-6):
    return a is not None and b is not None and abs(a - b) <= rel * max(1.0, abs(a), abs(b))


# ---- statistics on synthetic values ----

def test_harness_cell_statistics(t):
    c = stats.Cell([100.0, 110.0, 90.0, None])
    if c.n != 3 or c.median != 100.0 or c.min != 90.0 or c.max != 110.0:
        raise Fail(f"cell of 100/110/90: expected n=3 median 100 min 90 max 110, got {c.n} {c.median} {c.min} {c.max}")
    if not approx(c.cv, 0.1):
        raise Fail(f"cv of 90/100/110 is stdev 10 / mean 100 = 0.1, got {c.cv}")
    if stats.Cell([5.0]).cv is not None or stats.Cell([]).median is not None:
        raise Fail("one value has no cv (n >= 2 only); no value has no median")
    base = stats.Cell([100.0, 104.0, 98.0, 101.0, 99.0])
    far = stats.Cell([120.0, 125.0, 122.0, 119.0, 121.0])
    near = stats.Cell([103.0, 106.0, 101.0, 99.0, 100.0])
    one = stats.Cell([130.0])
    three = stats.Cell([120.0, 125.0, 122.0])
    base3 = stats.Cell([100.0, 104.0, 98.0])
    for cell, b, want in ((far, base, "sig"), (near, base, "n.s."), (one, base, "?"), (three, base3, "?")):
        got = stats.significance(cell, b)
        if got != want:
            raise Fail(f"significance of {cell.values} vs {b.values}: expected {want}, got {got}")
    if not approx(stats.pct_change(far, base), 21.0):
        raise Fail(f"% change of medians 121 vs 100: expected +21, got {stats.pct_change(far, base)}")
    # Mann-Whitney exact: 5 vs 5 fully separated is p = 2/252.
    if not approx(stats.mann_whitney(far.values, base.values), 2 / 252):
        raise Fail(f"Mann-Whitney p of two separated 5-samples: expected {2 / 252:.5f}, got {stats.mann_whitney(far.values, base.values)}")
    ci = stats.bootstrap_ci(far, base)
    if not (ci and 0 < ci[0] <= 21.0 <= ci[1] < 30):
        raise Fail(f"95% CI of +21% between separated samples must exclude 0 and hold +21: {ci}")
    ci = stats.bootstrap_ci(near, base)
    if not (ci and ci[0] <= 0 <= ci[1]):
        raise Fail(f"95% CI of overlapping samples must include 0: {ci}")


def test_harness_significance_false_positives(t):
    """Two cells drawn from one distribution: the min-max overlap rule the
    report used to apply calls them different ~10% of the time with 3
    repetitions; the Mann-Whitney test may do so at most ~alpha (5%) of the
    time, and with 3 vs 3 never (it says "?": too few to tell)."""
    import random
    rng = random.Random(11)
    trials = 400
    for n, limit in ((3, 0.0), (6, 0.08)):
        sig = overlap_sig = 0
        for _ in range(trials):
            a = stats.Cell([rng.gauss(1000, 50) for _ in range(n)])
            b = stats.Cell([rng.gauss(1000, 50) for _ in range(n)])
            sig += stats.significance(a, b) == "sig"
            overlap_sig += not stats.overlaps(a, b)
        if sig / trials > limit:
            raise Fail(f"n={n}: identical distributions called significant {sig}/{trials} times (limit {limit:.0%})")
        if n == 3 and overlap_sig / trials < 0.05:
            raise Fail(f"the old overlap rule should misfire ~10% with n=3, saw {overlap_sig}/{trials}: is the check real?")


def test_harness_pooled_percentiles(t):
    # Two repetitions' histograms: 90 samples at 10 us and 10 at 1 ms, then
    # 100 at 20 us. Pooled (200 samples): p50 and p90 in the 20 us bucket,
    # p99 in the 1 ms one; the median of the two runs' p99s (1 ms and 20 us)
    # would say ~510 us, a value no transaction took.
    h1 = [[10000, 128, 90], [1000000, 16384, 10]]
    h2 = [[20000, 256, 100]]
    p = stats.pooled_percentiles([h1, h2])
    if p.get(50) != 20000 + 128 or p.get(90) != 20000 + 128 or p.get(99) != 1000000 + 8192:
        raise Fail(f"pooled percentiles: expected p50 and p90 in the 20 us bucket, p99 in the 1 ms one; got {p}")
    c = stats.cdf([h1, h2])
    if not approx(c[-1][1], 1.0) or [round(f, 3) for _, f in c] != [0.45, 0.95, 1.0]:
        raise Fail(f"CDF of the merged buckets: {c}")


def test_harness_cpu_figures(t):
    # Two CPUs over 2 s (HZ jiffies per second each): CPU 0 half busy, CPU 1
    # fully busy. QEMU's vCPU thread used 1.5 s, on CPU 1; its main thread
    # 0.1 s on CPU 0; an idle thread parked on CPU 0 must not count.
    hz = cpu.HZ
    def stat(busy0, busy1, total):
        return {"all": (busy0 + busy1, 2 * total), 0: (busy0, total), 1: (busy1, total)}
    a = (10.0, stat(0, 0, 0), {"qemu": (42, 0, {1: ("qemu-system-x86", 0, 0), 2: ("CPU 0/TCG", 1, 0), 3: ("worker", 0, 5)})})
    mid = (11.0, stat(hz // 2, hz, hz), {"qemu": (42, hz, {1: ("qemu-system-x86", 0, hz // 20), 2: ("CPU 0/TCG", 1, hz - hz // 20), 3: ("worker", 0, 5)})})
    b = (12.0, stat(hz, 2 * hz, 2 * hz), {"qemu": (42, 16 * hz // 10, {1: ("qemu-system-x86", 0, hz // 10), 2: ("CPU 0/TCG", 1, 3 * hz // 2), 3: ("worker", 0, 5)})})
    f = cpu.figures(a, b, [a, mid, b])
    if f["host_cpu_pct"] != 150.0 or f["host_cpu_per_cpu"] != {"0": 50.0, "1": 100.0}:
        raise Fail(f"host CPU: expected 150% (50% + 100% of one CPU), got {f['host_cpu_pct']} {f['host_cpu_per_cpu']}")
    q = f["procs"]["qemu"]
    if q["pct"] != 80.0:
        raise Fail(f"QEMU used 1.6 s of CPU in 2 s: expected 80%, got {q['pct']}")
    if q["cpus"] != {"0": 0.06, "1": 0.94} or q["threads"] != {"CPU 0/TCG": 1, "qemu-system-x86": 0}:
        raise Fail(f"placement weighted by thread CPU time: expected 0:6% 1:94%, vCPU on 1, got {q}")
    if cpu.placement_str(q["cpus"]) != "0:6%,1:94%":
        raise Fail(f"placement string: {cpu.placement_str(q['cpus'])}")


def synthetic_rows():
    """Two variants and a third column from another guest kind, RR at two
    instance counts (four repetitions) and a STREAM (three)."""
    rows, n = [], 0
    tps = {"base": [1000, 1040, 980, 1020], "v2": [1300, 1350, 1280, 1320], "linux": [1010, 990, 1060, 1000]}
    for col in ("base", "v2", "linux"):
        for inst, scale in ((1, 1), (25, 5)):
            for rep, v in enumerate(tps[col]):
                rows.append(dict(run=n, rep=rep, column=col, guest="linux" if col == "linux" else "vnetlab",
                                 variant=col, test="tcp_rr", backend="tap", accel="tcg", req=256, resp=256,
                                 instances=inst, burst=1, seconds=5, status="ok", tps=float(v * scale),
                                 lat_p50_ns=40000 + rep, lat_p90_ns=50000, lat_p99_ns=80000, lat_p999_ns=90000,
                                 host_cpu_pct=150.0, qemu_cpu_pct=100.0, peer_cpu_pct=20.0,
                                 tps_per_cpu=float(v * scale) / 1.5, kicks_per_txn=1.0, reclaims_per_txn=1.0,
                                 host_us_per_txn=1.5e6 / (v * scale), lat_hist=[[40000, 512, 90], [80000, 1024, 10]]))
                n += 1
        for rep, v in enumerate((200.0, 210.0, 190.0)):
            rows.append(dict(run=n, rep=rep, column=col, guest="vnetlab", variant=col, test="tcp_stream",
                             backend="tap", accel="tcg", msg=4096, instances=1, seconds=5, status="ok",
                             mbps=v, host_cpu_pct=100.0, mbps_per_cpu=v, kicks_per_txn=2.0))
            n += 1
    rows.append(dict(run=n, rep=0, column="v2", guest="vnetlab", variant="v2", test="tcp_rr", backend="tap",
                     req=256, resp=256, instances=1, burst=1, seconds=5, status="error", error="guest ERROR"))
    return rows


def test_harness_report_on_synthetic_rows(t):
    rows = synthetic_rows()
    recs, cols = report.summarise(rows, ["base", "v2"], "base")
    if cols != ["base", "v2", "linux"]:
        raise Fail(f"a column from another guest must be appended after the variants, got {cols}")
    rec = {(r["test"], r.get("instances"), r.get("msg"), r["column"]): r for r in recs}
    v2 = rec[("tcp_rr", 1, None, "v2")]
    if v2["n"] != 4 or v2["median"] != 1310.0 or v2["min"] != 1280.0 or v2["max"] != 1350.0:
        raise Fail(f"v2 x1 cell: expected 4 ok runs, median 1310 (1280-1350) -- the error row excluded; got {v2}")
    if v2["significance"] != "sig" or not approx(v2["pct_vs_base"], 300 / 10.1) or not v2["p_value"] < 0.05:
        raise Fail(f"v2 vs base: expected +29.7% significant, got {v2['pct_vs_base']} {v2['significance']} p {v2['p_value']}")
    if not (v2["ci_low_pct"] > 0 and v2["ci_low_pct"] <= v2["pct_vs_base"] <= v2["ci_high_pct"]):
        raise Fail(f"v2 vs base: the CI must hold the change and exclude 0: {v2['ci_low_pct']}..{v2['ci_high_pct']}")
    lin = rec[("tcp_rr", 25, None, "linux")]
    if lin["significance"] != "n.s." or lin["median"] != 5025.0:
        raise Fail(f"linux x25 overlaps base: expected median 5025 n.s., got {lin['median']} {lin['significance']}")
    if v2["pooled_n"] != 4 or v2["pooled_p50_ns"] != 40256 or v2["pooled_p99_ns"] != 80512:
        raise Fail(f"pooled percentiles of the merged HIST buckets: {v2.get('pooled_n')} {v2.get('pooled_p50_ns')} {v2.get('pooled_p99_ns')}")
    if not approx(v2["host_us_per_txn"], statistics.median([1.5e6 / v for v in (1300, 1350, 1280, 1320)])):
        raise Fail(f"service demand cell is the median of the runs': {v2['host_us_per_txn']}")
    base = rec[("tcp_rr", 1, None, "base")]
    if base["pct_vs_base"] is not None or base["significance"] != "":
        raise Fail(f"the baseline cell compares with nothing, got {base}")
    if not approx(rec[("tcp_stream", 1, 4096, "v2")]["cv"], statistics.stdev([200, 210, 190]) / 200):
        raise Fail("stream cell cv is not stdev/mean of its repetitions")

    with tempfile.TemporaryDirectory() as d:
        report.write_all(d, rows, ["base", "v2"], "base", {"started": "synthetic", "host_ncpu": 2})
        md = open(os.path.join(d, "report.md")).read()
        for want in ("| Instances | base | v2 | linux |", "1,310 (1,280-1,350) n=4 cv", "**+29.7% [",
                     "n.s.**", "| Message size | base | v2 | linux |", "host 150% -> 873 trans/s/CPU",
                     "service demand: host CPU us per transaction", "Mann-Whitney", "pooled p50", "(n=4)"):
            if want not in md:
                raise Fail(f"report.md lacks {want!r}:\n{md[:1500]}")
        with open(os.path.join(d, "results.csv")) as f:
            got = list(csv.DictReader(f))
        if len(got) != len(rows) or got[0]["column"] != "base" or float(got[0]["tps"]) != rows[0]["tps"]:
            raise Fail(f"results.csv must hold one row per run in order: {len(got)} rows for {len(rows)}")
        if report.read_jsonl(os.path.join(d, "results.jsonl")) != rows:
            raise Fail("results.jsonl does not round-trip the rows")


def test_harness_rereport_plots(t):
    # The plots need matplotlib, which vnetbench.py finds (it re-runs
    # itself under the system python3 if needed): regenerate a synthetic
    # results folder through the command line.
    with tempfile.TemporaryDirectory() as d:
        report.write_jsonl(os.path.join(d, "results.jsonl"), synthetic_rows())
        r = vnetbench(["--rereport", d, "--baseline", "v2"], timeout=120)
        if r.returncode:
            raise Fail(f"--rereport failed ({r.returncode}): {r.stderr.strip()[-800:]}")
        pngs = sorted(f for f in os.listdir(d) if f.endswith(".png"))
        for prefix in ("latency_", "tps_", "mbps_", "kicks_", "cdf_"):
            if not any(p.startswith(prefix) for p in pngs):
                raise Fail(f"expected a {prefix}*.png plot, got {pngs}")
        for p in pngs:
            with open(os.path.join(d, p), "rb") as f:
                if f.read(8) != PNG_MAGIC:
                    raise Fail(f"{p} is not a PNG file")
        md = open(os.path.join(d, "report.md")).read()
        if "baseline column: **v2**" not in md or "-22.9%" not in md:
            raise Fail("--baseline v2: expected base's x1 cell at -22.9% vs v2 in report.md")
        if not any(p.startswith("cdf_") for p in pngs):
            raise Fail(f"expected a cdf_*.png from the rows' histograms, got {pngs}")
        if "## Failed and skipped runs" not in md:
            raise Fail("the failed synthetic run is not listed in report.md")


# ---- refusals ----

def expect_refusal(args, pattern, env=None, python=None):
    r = vnetbench(args, timeout=60, env=env, python=python)
    if r.returncode != 2 or not re.search(pattern, r.stderr):
        raise Fail(f"vnetbench {' '.join(args)}: expected exit 2 and /{pattern}/, got {r.returncode}: "
                   f"{(r.stderr or r.stdout).strip()[-600:]}")


def test_harness_refuses_bad_input(t):
    expect_refusal(["--variants", "nosuch"], r"unknown variant\(s\) nosuch: known are .*default")
    expect_refusal(["--tests", "tcp_rr,bogus"], r"unknown test 'bogus': known are tcp_rr, udp_rr")
    expect_refusal(["--backends", "macvtap"], r"unknown backend 'macvtap': known are tap, vhost, vhost-user, user")
    expect_refusal(["--backends", "tap:tx=sometimes"], r"tx must be one of bh\|timer")
    expect_refusal(["--rr-sizes", "1/1"], r"below 14 bytes .* sockperf")
    expect_refusal(["--variant-def", "x=TX_BOGUS=1", "--variants", "x"], r"unknown make variable TX_BOGUS")
    expect_refusal(["--matrix", "/nonexistent.txt"], r"cannot read matrix file")
    expect_refusal(["--stream-cc", "nosuchcc"], r"bad stream.cc 'nosuchcc': this host offers .*cubic.* \(or host = ")
    expect_refusal(["--tests", "UDP_STREAM"], r"udp_stream needs stream.role=server")
    expect_refusal(["--tests", "udp_stream", "--stream-role", "server", "--stream-udp-rate", "fast"],
                   r"bad stream.udp_rate 'fast'")
    try:
        require_tools(["vnetbench-no-such-tool", "sockperf"])
    except BenchError as e:
        if "vnetbench-no-such-tool" not in str(e) or "apt-get install" not in str(e):
            raise Fail(f"missing tool message must name the tool and the install command: {e}")
    else:
        raise Fail("require_tools accepted a tool that does not exist")
    # A host peer missing from PATH: named with its Debian package.
    with tempfile.TemporaryDirectory() as d:
        for tool in ("ip", "taskset", "unshare"):
            src = subprocess.run(["bash", "-c", f"command -v {tool}"], capture_output=True, text=True).stdout.strip()
            if src:
                os.symlink(src, os.path.join(d, tool))
        env = dict(os.environ, PATH=d)
        expect_refusal(["--backends", "user", "--tests", "tcp_rr"], r"sockperf.*Debian package\(s\) sockperf",
                       env=env, python="/usr/bin/python3")


def test_harness_refuses_namespace_backends_without_root(t):
    if os.geteuid() != 0:
        expect_refusal(["--backends", "tap"], r"backend tap needs root")
        return
    if not os.path.exists("/usr/bin/setpriv"):
        raise Skip("setpriv (util-linux) missing: cannot drop root to check the refusal")
    # nobody must be able to read the harness: a checkout under a 0700
    # directory (mktemp -d) is not, so run a world-readable copy.
    tmp = tempfile.mkdtemp(prefix="vnetbench-nobody-")
    t.cleanups.append(lambda: shutil.rmtree(tmp, ignore_errors=True))
    os.chmod(tmp, 0o755)
    for sub in ("host/bench", "mk"):
        shutil.copytree(os.path.join(TOP, sub), os.path.join(tmp, sub),
                        ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(os.path.join(TOP, "Makefile"), tmp)
    for root, dirs, files in os.walk(tmp):
        for n in dirs:
            os.chmod(os.path.join(root, n), 0o755)
        for n in files:
            os.chmod(os.path.join(root, n), 0o644)
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3",
                        os.path.join(tmp, "host", "bench", "vnetbench.py"),
                        "--backends", "vhost-user", "--tests", "tcp_rr"],
                       capture_output=True, text=True, timeout=60, cwd="/")
    if r.returncode != 2 or "backend vhost-user needs root" not in r.stderr or "--backends user" not in r.stderr:
        raise Fail(f"as nobody, expected the vhost-user backend refused with the fix named, got {r.returncode}: {r.stderr.strip()[-400:]}")


def test_harness_linux_guest_command_line(t):
    """The `linux` guest kind without booting it: its column, what it
    refuses, its QEMU and kernel command lines (same machine, memory, NIC and
    backend as the appliance), the peer's figures becoming the row's, and
    the initramfs writer."""
    import backends
    import guests
    import matrix
    sys.path.insert(0, os.path.join(TOP, "host", "linux-guest"))
    import mkcpio

    def mx(**kw):
        s = {"guests": "vnetlab linux", "tests": "udp_rr tcp_rr ping", "rr.role": "server", "rr.sizes": "64/64",
             "rr.instances": "1", "accel": "tcg", "seconds": "3", "warmup": "1"}
        s.update(kw)
        return matrix.Matrix(s, {"appliance": ""}, lambda v: None, list(guests.KINDS))

    m = mx()
    if [m.column_name(*c) for c in m.columns] != ["appliance", "linux"] or m.baseline != "appliance":
        raise Fail(f"columns: expected appliance (the variant) then linux, got {m.columns}, baseline {m.baseline}")
    try:
        matrix.Matrix({"guests": "vnetlab linux", "variants": "linux"}, {"linux": ""}, lambda v: None, list(guests.KINDS))
        raise Fail("a variant named like a guest must be refused (the two would share a column)")
    except BenchError as e:
        if "share a column" not in str(e):
            raise Fail(f"variant/guest name clash: unexpected message {e}")
    with tempfile.TemporaryDirectory() as d:
        lin = guests.Linux(m, lambda s: None, directory=d)
        tap = backends.make("tap", "tap", {})
        run = next(r for r in m.runs() if r.guest == "linux" and r.test == "udp_rr")
        argv, cmdline, accel = lin.argv(run, tap, 75)
        words = cmdline.split()
        for w in ("console=ttyS0", "panic=-1", "vnl.app=rr", "vnl.proto=udp", "vnl.port=11111",
                  "vnl.ip=10.77.0.2/24", "vnl.test=udp_rr", "vnl.backend=tap"):
            if w not in words:
                raise Fail(f"linux kernel command line lacks {w}: {cmdline}")
        with open(os.path.join(TOP, "host", "qemu-run.sh")) as f:
            nic = re.search(r'^nic="([^"]+)"', f.read(), re.M).group(1)

        def after(opt):
            return [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == opt]

        want = {"-M": ["pc"], "-accel": ["tcg"], "-m": ["512"], "-smp": ["1"], "-device": [nic],
                "-netdev": ["tap,id=n0,ifname=vnbtap0,script=no,downscript=no"],
                "-kernel": [os.path.join(d, "vmlinuz")], "-initrd": [os.path.join(d, "initrd.gz")]}
        for opt, v in want.items():
            if after(opt) != v:
                raise Fail(f"linux QEMU {opt}: expected {v}, got {after(opt)} in {argv}")
        if argv[:4] != ["timeout", "--kill-after=5", "75", "qemu-system-x86_64"] or accel != "tcg":
            raise Fail(f"the linux guest's QEMU must run under a hard timeout: {argv[:5]}")
        vu = backends.make("vhost-user", "vhost-user", {})
        vu.sock = "/nonexistent/vhost-user.sock"
        argv, _, _ = lin.argv(run, vu, 75)
        if after("-device") != [nic + ",vectors=0"] or "-numa" not in argv or "-netdev" not in argv:
            raise Fail(f"vhost-user: the backend's own NIC and memory arguments, once: {argv}")
        if lin.supports("udp_rr", tap) or lin.supports("ping", tap):
            raise Fail("rr.role=server and ping on tap must be supported")
        why = guests.Linux(mx(**{"rr.role": "client", "rr.instances": "1"}), lambda s: None, d).supports("tcp_rr", tap)
        if not why or "rr.role=server" not in why:
            raise Fail(f"rr.role=client must be refused with the fix named, got {why!r}")
    row = {"peer_tps": 9000.0, "peer_lat_p50_ns": 100000, "peer_lat_p99_ns": 200000, "peer_transactions": 90000}
    lin.complete(row)
    if row.get("tps") != 9000.0 or row.get("lat_p50_ns") != 100000 or row.get("figures_from") != "peer":
        raise Fail(f"linux rows take the host peer's figures: {row}")
    row = {"tps": 5.0, "lat_p50_ns": 7, "peer_tps": 9000.0}
    guests.Vnetlab(m, lambda s: None).complete(row)
    lin.complete(row)
    if row["tps"] != 5.0 or row["lat_p50_ns"] != 7 or "figures_from" in row:
        raise Fail(f"a guest's own figures are never replaced: {row}")

    # The initramfs writer: newc entries, root-owned, device nodes without mknod.
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "root", "bin"))
        os.makedirs(os.path.join(d, "root", "dev"))
        os.chmod(os.path.join(d, "root", "bin"), 0o755)
        with open(os.path.join(d, "root", "init"), "w") as f:
            f.write("#!/bin/sh\n")
        os.chmod(os.path.join(d, "root", "init"), 0o755)
        os.symlink("busybox", os.path.join(d, "root", "bin", "sh"))
        out = os.path.join(d, "initrd.gz")
        mkcpio.main([os.path.join(d, "root"), out, "--node", "/dev/console:c:5:1:600"])
        import gzip
        data = gzip.open(out).read()
        entries, off = {}, 0
        while True:
            h = data[off:off + 110]
            if h[:6] != b"070701":
                raise Fail(f"initrd: bad cpio magic at {off}: {h[:6]!r}")
            f = [int(h[6 + 8 * i:14 + 8 * i], 16) for i in range(13)]
            mode, uid, size, rmaj, rmin, nsz = f[1], f[2], f[6], f[9], f[10], f[11]
            name = data[off + 110:off + 110 + nsz - 1].decode()
            off = (off + 110 + nsz + 3) & ~3
            body = data[off:off + size]
            off = (off + size + 3) & ~3
            if name == "TRAILER!!!":
                break
            entries[name] = (mode, uid, body, rmaj, rmin)
        want = {"bin": (0o40755, None), "bin/sh": (0o120777, b"busybox"), "dev/console": (0o20600, b""),
                "init": (0o100755, b"#!/bin/sh\n")}
        for name, (mode, body) in want.items():
            e = entries.get(name)
            if not e or e[0] != mode or e[1] != 0 or (body is not None and e[2] != body):
                raise Fail(f"initrd entry {name}: expected mode {mode:o} uid 0, got {e and (oct(e[0]), e[1], e[2])}")
        if entries["dev/console"][3:] != (5, 1):
            raise Fail(f"/dev/console must be char 5:1, got {entries['dev/console'][3:]}")
    r = subprocess.run(["sh", "-n", os.path.join(TOP, "host", "linux-guest", "init")], capture_output=True, text=True, timeout=30)
    if r.returncode:
        raise Fail(f"host/linux-guest/init: sh -n: {r.stderr.strip()}")


# ---- a real matrix ----

def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read()
    except OSError:
        return ""


def leftover_namespaces(pid):
    r = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30)
    return [l for l in r.stdout.splitlines() if l.startswith(f"vnetbench-{pid}-")]


def test_harness_sender_congestion_control(t):
    """stream.cc reaches exactly the host sockets that send: iperf -c for
    tcp_maerts (guest receives), iperf -s when the appliance asks it to send;
    never the host's receiving side (tcp_stream, the guest's own TCP sends).
    "host" resolves to the sysctl, so a row names the real algorithm."""
    import matrix
    import peers

    class FakeBackend:
        peer_bind = "10.0.0.1"
        guest_ip = "10.0.0.2"

        def host_port(self, port):
            return port

        def guest_port(self, port, proto="tcp"):
            return (self.guest_ip, port)

    params = dict(msg=16384, instances=1, seconds=2, cc="reno")
    cases = ((peers.IperfClient, "tcp_maerts", True), (peers.IperfClient, "tcp_stream", False),
             (peers.IperfServer, "tcp_maerts", True), (peers.IperfServer, "tcp_stream", False))
    for cls, test, sends in cases:
        argv = cls(FakeBackend(), test, params).argv()
        has = any(a == "-Z" and b == "reno" for a, b in zip(argv, argv[1:]))
        if has != sends:
            raise Fail(f"{cls.__name__} {test}: -Z reno {'missing from' if sends else 'must not be in'} {argv}")
    with open("/proc/sys/net/ipv4/tcp_congestion_control") as f:
        default = f.read().strip()
    if matrix.host_cc("host") != default:
        raise Fail(f"stream.cc=host must resolve to the sysctl's {default}, got {matrix.host_cc('host')}")
    import guests
    import variants

    settings, defs = matrix.parse_file(SMOKE)
    m = matrix.Matrix(settings, defs, variants.resolve, list(guests.KINDS), variants.known_description())
    pts = [p for test in m.tests if matrix.TESTS[test]["kind"] == "stream" for p in m.configs(test)]
    if not pts or any(p.get("cc") != "cubic" for p in pts):
        raise Fail(f"the default stream.cc must be cubic in every stream run's parameters: {pts}")


def test_harness_smoke(t):
    backend = "tap" if os.geteuid() == 0 else "user"
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "res")
        p = subprocess.Popen([sys.executable, VNETBENCH, "--matrix", SMOKE, "--backends", backend, "--out", out],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=TOP)
        try:
            text, _ = p.communicate(timeout=400)
        except subprocess.TimeoutExpired:
            p.kill()
            raise Fail("vnetbench smoke did not finish within 400s")
        if p.returncode:
            raise Fail(f"vnetbench smoke exited {p.returncode}:\n{text[-3000:]}")
        progress = [l for l in text.splitlines() if re.match(r"\[\s*\d+/8\] ", l)]
        if len(progress) != 8 or not all(re.search(r"~\d+m\d\ds left$", l) for l in progress):
            raise Fail(f"expected 8 progress lines ending with the time left:\n{text[-2000:]}")

        rows = report.read_jsonl(os.path.join(out, "results.jsonl"))
        bad = [r for r in rows if r["status"] != "ok"]
        if len(rows) != 8 or bad:
            raise Fail(f"expected 8 ok runs (2 variants x 2 tests x 2 repetitions), got {len(rows)}, failed: "
                       f"{[(r['run'], r['error']) for r in bad]}")
        for r in rows:
            m = r["tps"] if r["test"] == "tcp_rr" else r["mbps"]
            if not m or m <= 0:
                raise Fail(f"run {r['run']} ({r['test']} {r['column']}): throughput must be positive, row {r}")
            if r.get("host_cpu_pct") is None or r.get("qemu_cpu_pct") is None or not r.get("qemu_cpus"):
                raise Fail(f"run {r['run']}: host/QEMU CPU figures or placement missing: {r}")
            if r["accel"] not in ("tcg", "kvm") or r["guest_backend"] != backend:
                raise Fail(f"run {r['run']}: accel {r['accel']} / backend {r.get('guest_backend')} not recorded")
            check_kvm_columns(r, "txn" if r["test"] == "tcp_rr" else "mb")
            per = r.get("tps_per_cpu") if r["test"] == "tcp_rr" else r.get("mbps_per_cpu")
            if per is None or not approx(per, m / (r["host_cpu_pct"] / 100), rel=1e-2):
                raise Fail(f"run {r['run']}: throughput per CPU {per} is not {m} / {r['host_cpu_pct']}%")
            if r["test"] == "tcp_rr" and not (r["lat_p50_ns"] <= r["lat_p90_ns"] <= r["lat_p99_ns"] <= r["lat_max_ns"]):
                raise Fail(f"run {r['run']}: latency percentiles not monotone: {r}")
            # The CPU window is the guest's own measured interval.
            if r.get("cpu_window") != "guest" or abs(r["cpu_interval_s"] - float(r["guest_seconds"])) > 0.45:
                raise Fail(f"run {r['run']}: CPU window {r.get('cpu_window')} of {r.get('cpu_interval_s')} s, the guest "
                           f"measured {r.get('guest_seconds')} s")
            unit = "txn" if r["test"] == "tcp_rr" else "mb"
            rate = r["tps"] if unit == "txn" else r["mbps"] / 8
            if not approx(r.get(f"host_us_per_{unit}"), r["host_cpu_pct"] / 100 * 1e6 / rate, rel=1e-2):
                raise Fail(f"run {r['run']}: service demand host_us_per_{unit} {r.get(f'host_us_per_{unit}')} is not "
                           f"host CPU {r['host_cpu_pct']}% / {rate:.1f} per s")
            if r["test"] == "tcp_rr" and sum(c for _, _, c in r.get("lat_hist") or []) != r["transactions"]:
                raise Fail(f"run {r['run']}: the guest's HIST buckets must hold its {r['transactions']} transactions")
            if r.get("guest_exit") != 0:
                raise Fail(f"run {r['run']}: guest exit {r.get('guest_exit')} recorded for an ok run")
        variants_seen = {r["guest_variant"] for r in rows}
        if len(variants_seen) != 2:
            raise Fail(f"the two variants must be two different builds, guests reported {variants_seen}")

        with open(os.path.join(out, "results.csv")) as f:
            csv_rows = list(csv.DictReader(f))
        if [int(c["run"]) for c in csv_rows] != [r["run"] for r in rows]:
            raise Fail("results.csv and results.jsonl list different runs")
        for c, r in zip(csv_rows, rows):
            key = "tps" if r["test"] == "tcp_rr" else "mbps"
            if not approx(float(c[key]), r[key]):
                raise Fail(f"run {r['run']}: CSV {key} {c[key]} != JSON {r[key]}")

        with open(os.path.join(out, "summary.csv")) as f:
            summary = list(csv.DictReader(f))
        md = open(os.path.join(out, "report.md")).read()
        if len(summary) != 4:
            raise Fail(f"summary.csv: expected 4 cells (2 tests x 2 variants), got {len(summary)}")
        for s in summary:
            key = "tps" if s["test"] == "tcp_rr" else "mbps"
            vals = [r[key] for r in rows if r["test"] == s["test"] and r["column"] == s["column"]]
            if not approx(float(s["median"]), statistics.median(vals)):
                raise Fail(f"summary {s['test']} {s['column']}: median {s['median']} != median of {vals}")
            if s["column"] != "base" and s["significance"] != "?":
                raise Fail(f"summary {s['test']} {s['column']}: two repetitions each cannot tell (Mann-Whitney's "
                           f"smallest p is 1/3), expected '?', got {s['significance']!r}")
            cell = f"{report.fmt_num(float(s['median']))} ({report.fmt_num(float(s['min']))}-{report.fmt_num(float(s['max']))})"
            if cell not in md:
                raise Fail(f"report.md lacks the cell {cell!r} of {s['test']} {s['column']}")
        for want in ("| Instances | base | v2 |", "| Message size | base | v2 |", "host CPU % and", "accel ",
                     "service demand: host CPU us per transaction", "service demand: host CPU us per MB",
                     "pooled p50", " n=2 cv "):
            if want not in md:
                raise Fail(f"report.md lacks {want!r}")
        pngs = [f for f in os.listdir(out) if f.endswith(".png")]
        for prefix in ("latency_tcp_rr", "tps_tcp_rr", "mbps_tcp_stream", "kicks_tcp_rr", "cdf_tcp_rr"):
            if not any(f.startswith(prefix) for f in pngs):
                raise Fail(f"no {prefix}*.png among {pngs}")
            if f"({prefix}" not in md:
                raise Fail(f"report.md does not link the {prefix} plot")
        if os.geteuid() == 0 and leftover_namespaces(p.pid):
            raise Fail(f"namespaces left behind: {leftover_namespaces(p.pid)}")


def test_harness_udp_stream(t):
    # netperf's name; one cell: a host iperf -u -c at 5 Mbit/s into the appliance's stream server
    if os.geteuid() != 0:
        raise Skip("udp_stream runs on a tap in a namespace (root)")
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "res")
        r = vnetbench(["--tests", "UDP_STREAM", "--stream-role", "server", "--stream-sizes", "1000",
                       "--stream-instances", "1", "--stream-udp-rate", "5M", "--seconds", "2", "--warmup", "1",
                       "--repetitions", "1", "--backends", "tap", "--variants", "default", "--out", out], timeout=300)
        if r.returncode:
            raise Fail(f"vnetbench UDP_STREAM exited {r.returncode}: {(r.stdout + r.stderr)[-2000:]}")
        rows = report.read_jsonl(os.path.join(out, "results.jsonl"))
        if len(rows) != 1 or rows[0]["status"] != "ok":
            raise Fail(f"expected one ok udp_stream run: {rows}")
        row = rows[0]
        if row["test"] != "udp_stream" or not row["mbps"] > 0 or row.get("peer_udp_lost") is None:
            raise Fail(f"expected a udp_stream row with the guest's Mbit/s and iperf's server report: {row}")
        # the report iperf printed is the appliance's: its total counts the FIN
        if (row["peer_udp_datagrams"], row["peer_udp_lost"]) != (row["udp_datagrams"] + 1, row["udp_lost"]):
            raise Fail(f"iperf's server report {row['peer_udp_lost']}/{row['peer_udp_datagrams']} is not the "
                       f"guest's {row['udp_lost']} lost of {row['udp_datagrams']} + the FIN")


def test_harness_ctrl_c_tears_down(t):
    if os.geteuid() != 0:
        raise Skip("needs root for the tap backend's namespace")
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "res")
        p = subprocess.Popen(["/usr/bin/python3", VNETBENCH, "--variants", "base", "--variant-def", "base=TX_RECLAIM=before",
                              "--tests", "tcp_rr", "--rr-instances", "1", "--seconds", "60", "--repetitions", "1",
                              "--backends", "tap", "--out", out],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=TOP,
                             start_new_session=True)
        try:
            # Interrupt once QEMU and the peer run inside the namespace.
            end = time.monotonic() + 120
            qemu = []
            while time.monotonic() < end and not qemu:
                time.sleep(0.5)
                ns = leftover_namespaces(p.pid)
                if ns:
                    r = subprocess.run(["ip", "netns", "pids", ns[0]], capture_output=True, text=True, timeout=10)
                    qemu = [x for x in r.stdout.split() if comm(x).startswith("qemu")]
            if not qemu:
                raise Fail("QEMU never showed up in the harness's namespace within 120s")
            time.sleep(1)
            os.kill(p.pid, signal.SIGINT)
            text, _ = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        if p.returncode != 130 or "interrupted (SIGINT)" not in text:
            raise Fail(f"expected exit 130 with an 'interrupted' line, got {p.returncode}:\n{text[-1500:]}")
        alive = [x for x in qemu if os.path.exists(f"/proc/{x}")]
        if alive or leftover_namespaces(p.pid):
            raise Fail(f"after Ctrl-C: QEMU {alive} still running or namespaces {leftover_namespaces(p.pid)} left")
        if not os.path.exists(os.path.join(out, "report.md")):
            raise Fail("an interrupted harness must still write report.md")


# ---- vnetbench compare: the regression gate ----

def synthetic_folder(d, name, tps_scale, lat_scale, seed, reps=8):
    """A results folder of one column, tcp_rr x1 and tcp_stream 16K, with
    run-to-run noise of ~3% (a seeded generator: same folders every time)."""
    import random
    rng = random.Random(seed)
    rows, n = [], 0
    for rep in range(reps):
        rows.append(dict(run=n, rep=rep, column="base", test="tcp_rr", backend="tap", req=256, resp=256, instances=1,
                         burst=1, seconds=5, status="ok", tps=10000 * tps_scale * rng.gauss(1, 0.03),
                         lat_p50_ns=50000 * lat_scale * rng.gauss(1, 0.03)))
        rows.append(dict(run=n + 1, rep=rep, column="base", test="tcp_stream", backend="tap", msg=16384, instances=1,
                         seconds=5, status="ok", mbps=400 * rng.gauss(1, 0.03)))
        n += 2
    rows.append(dict(run=n, rep=0, column="base", test="tcp_rr", backend="tap", req=256, resp=256, instances=1,
                     burst=1, seconds=5, status="error", error="guest ERROR", tps=1.0))
    path = os.path.join(d, name)
    os.makedirs(path)
    report.write_jsonl(os.path.join(path, "results.jsonl"), rows)
    return path


def test_harness_compare_gate(t):
    with tempfile.TemporaryDirectory() as d:
        old = synthetic_folder(d, "old", 1.0, 1.0, seed=1)
        noise = synthetic_folder(d, "noise", 1.0, 1.0, seed=2)
        slower = synthetic_folder(d, "slower", 0.85, 1.0, seed=3)
        laggy = synthetic_folder(d, "laggy", 1.0, 1.2, seed=4)
        faster = synthetic_folder(d, "faster", 1.2, 1.0, seed=5)

        r = vnetbench(["compare", old, noise], timeout=60)
        if r.returncode != 0 or "REGRESSION" in r.stdout.split("| verdict |")[-1].split("cells compared")[0]:
            raise Fail(f"compare of two folders of the same distribution must pass (exit 0), got {r.returncode}:\n"
                       f"{r.stdout[-1500:]}{r.stderr[-500:]}")
        if "| tcp_rr 256/256 x1 tap [base] | tps |" not in r.stdout or "(8)" not in r.stdout or "[" not in r.stdout:
            raise Fail(f"compare must show each cell with n and a confidence interval:\n{r.stdout[-1500:]}")

        r = vnetbench(["compare", old, slower], timeout=60)
        line = next((l for l in r.stdout.splitlines() if l.startswith("| tcp_rr") and "| tps |" in l), "")
        if r.returncode != 1 or "REGRESSION" not in line:
            raise Fail(f"15% fewer trans/s must be flagged (exit 1, REGRESSION), got {r.returncode}:\n{r.stdout[-1500:]}")
        stream = next((l for l in r.stdout.splitlines() if l.startswith("| tcp_stream")), "")
        if "REGRESSION" in stream:
            raise Fail(f"the unchanged stream cell must not be flagged: {stream}")

        r = vnetbench(["compare", old, faster], timeout=60)
        if r.returncode != 0 or "improved" not in r.stdout:
            raise Fail(f"20% more trans/s is an improvement, not a failure: {r.returncode}\n{r.stdout[-1200:]}")

        # Lower is better for latency: +20% p50 is a regression, and the
        # default metric (tps) of the same folders is not.
        r = vnetbench(["compare", old, laggy, "--metric", "lat_p50_ns"], timeout=60)
        if r.returncode != 1 or "REGRESSION" not in r.stdout:
            raise Fail(f"+20% p50 latency must be flagged: {r.returncode}\n{r.stdout[-1200:]}")
        r = vnetbench(["compare", old, laggy], timeout=60)
        if r.returncode != 0:
            raise Fail(f"trans/s unchanged in 'laggy': expected exit 0, got {r.returncode}\n{r.stdout[-1200:]}")

        # A change smaller than --min-change is never a regression.
        r = vnetbench(["compare", old, slower, "--min-change", "30"], timeout=60)
        if r.returncode != 0:
            raise Fail(f"-15% with --min-change 30 must pass, got {r.returncode}")
        r = vnetbench(["compare", old, os.path.join(d, "missing")], timeout=60)
        if r.returncode != 2 or "not found" not in r.stderr:
            raise Fail(f"a missing folder: expected exit 2 naming it, got {r.returncode}: {r.stderr}")


def test_harness_linux_tunings_and_loopback_kinds(t):
    """Guest kinds without booting: linux:TUNING columns put their kernel
    parameters, sysctls and server options where the init reads them; bad
    tunings are refused; loopback serves like the Linux guest; every guest
    gets one CPU model per accelerator, overridable by the cpu key."""
    import backends
    import guests
    import matrix

    def mx(g, **kw):
        s = {"guests": g, "tests": "udp_rr tcp_stream", "rr.role": "server", "stream.role": "server",
             "rr.sizes": "64,64", "rr.instances": "1", "stream.sizes": "16K", "stream.instances": "1",
             "accel": "tcg", "seconds": "3", "warmup": "1"}
        s.update(kw)
        return matrix.Matrix(s, {"appliance": ""}, lambda v: None, list(guests.KINDS))

    m = mx("vnetlab linux linux:best linux:busypoll+nomitig loopback")
    names = [m.column_name(*c) for c in m.columns]
    if names != ["appliance", "linux", "linux:best", "linux:busypoll+nomitig", "loopback"]:
        raise Fail(f"columns: {names}")
    if m.rr_sizes != [(64, 64)]:
        raise Fail(f"netperf-style rr.sizes 64,64 must be one 64/64 pair, got {m.rr_sizes}")
    tap = backends.make("tap", "tap", {})
    with tempfile.TemporaryDirectory() as d:
        lin = guests.Linux(m, lambda s: None, directory=d, spec="linux:busypoll+nomitig")
        run = next(r for r in m.runs() if r.column == "linux:best" and r.test == "udp_rr")
        argv, cmdline, accel = lin.argv(run, tap, 60)
        words = cmdline.split()
        for w in ("mitigations=off", "vnl.tuning=busypoll+nomitig",
                  "vnl.sysctl=net.core.busy_poll=50,net.core.busy_read=50"):
            if w not in words:
                raise Fail(f"linux:busypoll+nomitig kernel command line lacks {w}: {cmdline}")
        if "idle=poll" in words or any(w.startswith("vnl.srvopt") for w in words):
            raise Fail(f"tunings not asked for must not appear: {cmdline}")
        if argv[argv.index("-cpu") + 1] != guests.CPU_MODEL["tcg"]:
            raise Fail(f"linux guest CPU model under TCG must be {guests.CPU_MODEL['tcg']}: {argv}")
        best = guests.Linux(m, lambda s: None, directory=d, spec="linux:best")
        _, cl, _ = best.argv(run, tap, 60)
        for w in ("idle=poll", "mitigations=off", "vnl.srvopt=--lls,50", "vnl.tuning=best"):
            if w not in cl.split():
                raise Fail(f"linux:best lacks {w}: {cl}")
        srun = next(r for r in m.runs() if r.column == "linux:best" and r.test == "tcp_stream")
        _, cl, _ = best.argv(srun, tap, 60)
        if "vnl.srvopt" in cl:
            raise Fail(f"sockperf's options must not reach iperf: {cl}")
        mm = mx("linux", cpu="max")
        _, _, _ = guests.Linux(mm, lambda s: None, directory=d).argv(mm.runs()[0], tap, 60)
        a2, _, _ = guests.Linux(mm, lambda s: None, directory=d).argv(mm.runs()[0], tap, 60)
        if a2[a2.index("-cpu") + 1] != "max":
            raise Fail(f"cpu = max must reach the linux guest's QEMU: {a2}")
    for bad, pattern in (("linux:turbo", "unknown linux tuning 'turbo'"), ("loopback:x", "only linux takes tunings")):
        try:
            guests.make(bad, m, lambda s: None)
            raise Fail(f"guest {bad} must be refused")
        except BenchError as e:
            if pattern not in str(e):
                raise Fail(f"guest {bad}: expected /{pattern}/, got {e}")
    lo = guests.make("loopback", m, lambda s: None)
    if lo.supports("udp_rr", tap) or lo.supports("tcp_stream", tap):
        raise Fail("loopback serves rr and stream on tap")
    if not lo.supports("udp_rr", backends.make("user", "user", {})):
        raise Fail("loopback needs a namespace: slirp must be refused")
    client = guests.make("loopback", mx("loopback", **{"rr.role": "client"}), lambda s: None)
    if "rr.role=server" not in (client.supports("udp_rr", tap) or ""):
        raise Fail("loopback with rr.role=client must be refused with the fix named")
    row = {"peer_tps": 5.0, "peer_lat_p50_ns": 9000}
    lo.complete(row)
    if row.get("tps") != 5.0 or row.get("lat_p50_ns") != 9000 or row.get("figures_from") != "peer":
        raise Fail(f"loopback rows take the host peer's figures: {row}")
    import runs
    w = runs.guest_window({"t_begin_us": 1_000_000, "t_end_us": 6_000_000, "t_line_us": 6_200_000}, 100.0)
    if not (approx(w[0], 94.8) and approx(w[1], 99.8)):
        raise Fail(f"guest interval 1..6 s printed at 6.2 s, line at host 100 s: expected (94.8, 99.8), got {w}")
    if runs.guest_window({"seconds": 5}, 100.0) is not None:
        raise Fail("a RESULT without the interval keys has no guest window")
    row = {"tps": 10000.0, "host_cpu_pct": 150.0, "qemu_cpu_pct": 100.0, "peer_cpu_pct": 20.0}
    runs.service_demand(row, "rr")
    if row != dict(row, host_us_per_txn=150.0, qemu_us_per_txn=100.0, peer_us_per_txn=20.0, procs_us_per_txn=120.0):
        raise Fail(f"service demand at 10,000 trans/s: 150% host = 150 us/txn, QEMU 100, peer 20, both 120: {row}")
    row = {"tps": 10000.0, "host_cpu_pct": 80.0, "peer_cpu_pct": 30.0, "server_cpu_pct": 40.0}
    runs.service_demand(row, "rr")
    if row.get("server_us_per_txn") != 40.0 or row.get("procs_us_per_txn") != 70.0:
        raise Fail(f"loopback: the stock server counts as a process of its own and in the sum: {row}")
    row = {"mbps": 800.0, "host_cpu_pct": 100.0}
    runs.service_demand(row, "stream")
    if row.get("host_us_per_mb") != 10000.0:
        raise Fail(f"800 Mbit/s = 100 MB/s at one CPU = 10,000 us per MB: {row}")
    if runs.exit_line(["vnetlab exit status=0", "x", "vnetlab-linux exit status=3"]) != 3 or runs.exit_line(["no"]) is not None:
        raise Fail("exit_line: the last exit line of any guest kind, None without one")

    # Open loop: rr.mps makes the host peer sockperf under-load at that rate,
    # every message answered, the rows labelled; closed-loop rows stay so.
    import peers
    om = mx("vnetlab loopback", **{"rr.mps": "2000 20000", "tests": "udp_rr"})
    ps = sorted({r.params.get("mps") for r in om.runs()})
    if ps != [2000, 20000] or not all("open-loop" in r.label() for r in om.runs()):
        raise Fail(f"rr.mps 2000 20000: expected two open-loop configurations, got {ps}")
    run = om.runs()[0]
    pr = peers.for_test(run.test, runs.roles(om), tap, run.params)
    a = pr.argv()
    if not isinstance(pr, peers.SockperfUnderLoad) or a[1] != "under-load" or a[a.index("--mps") + 1] != "2000" \
            or a[a.index("--reply-every") + 1] != "1":
        raise Fail(f"open-loop peer: expected sockperf under-load --mps 2000 --reply-every 1, got {a}")
    if runs.base_row(run, om)["loop"] != "open" or runs.base_row(m.runs()[0], m)["loop"] != "closed":
        raise Fail("rows must say loop=open for rr.mps runs and loop=closed otherwise")
    if not isinstance(peers.for_test("udp_rr", runs.roles(m), tap, m.runs()[0].params), peers.SockperfPingPong) or \
            isinstance(peers.for_test("udp_rr", runs.roles(m), tap, m.runs()[0].params), peers.SockperfUnderLoad):
        raise Fail("without rr.mps the peer stays ping-pong")
    try:
        mx("vnetlab", **{"rr.mps": "1000", "rr.role": "client"})
        raise Fail("rr.mps with rr.role=client must be refused")
    except BenchError as e:
        if "needs rr.role=server" not in str(e):
            raise Fail(f"rr.mps refusal: {e}")


def test_harness_idle_axis(t):
    """`idle = poll, 0, 50` makes one column per poll budget with the
    IDLE make variables, a bad value is refused, and the report's idle
    table has a row per budget with the guest's interrupts per second."""
    r = vnetbench(["--matrix", os.path.join(BENCH, "matrices", "idle.txt"), "--list"], timeout=60)
    cols = re.findall(r"^tcp_rr \S+ x1 (default-idle_\S+) tap rep 1$", r.stdout, re.M)
    if r.returncode or cols != [f"default-idle_{x}" for x in ("poll", "0", "5", "10", "25", "50", "100")]:
        raise Fail(f"idle.txt --list: expected one column per budget, got {cols} ({r.stderr[-300:]})")
    names, vars_ = idle.expand(["v2"], {"v2": "TX_RECLAIM=v2"}, idle.parse(["poll", "0", "50"]))
    want = {"v2-idle_poll": "TX_RECLAIM=v2 IDLE=poll", "v2-idle_0": "TX_RECLAIM=v2 IDLE=halt",
            "v2-idle_50": "TX_RECLAIM=v2 IDLE=adaptive IDLE_POLL_US=50"}
    if names != list(want) or vars_ != want:
        raise Fail(f"idle.expand: {names} {vars_}")
    try:
        idle.parse(["fast"])
        raise Fail("idle value 'fast' accepted")
    except BenchError as e:
        if "bad idle value 'fast'" not in str(e):
            raise Fail(f"unclear refusal: {e}")
    rows = [dict(status="ok", column=c, test="tcp_rr", backend="tap", accel="tcg", instances=1, seconds=2.0,
                 tps=tps, lat_p50_ns=p50, lat_p99_ns=2 * p50, host_cpu_pct=cpu_, tps_per_cpu=tps / cpu_ * 100,
                 irqs_rx=irqs, irqs_tx=0, busy_pct=busy)
            for c, tps, p50, cpu_, irqs, busy in (("v2-idle_poll", 10000, 50000, 200.0, 0, 100.0),
                                                   ("v2-idle_0", 8000, 60000, 100.0, 16000, 30.0))]
    md = "\n".join(idle.table(rows, names))
    for want_line in ("| poll | 50.0 | 100.0 | 10,000 |", "| 0 | 60.0 | 120.0 | 8,000 |", "| 8,000 | 30.0 |"):
        if want_line not in md:
            raise Fail(f"idle table lacks {want_line!r}:\n{md}")


def test_harness_machine_axis(t):
    """`machine = pc,microvm` runs every column on each machine
    (COLUMN@MACHINE), one machine keeps the plain names, and a bad machine
    or the Linux guest on microvm is refused; a real pair of runs reports
    the machine per row."""
    r = vnetbench(["--machine", "pc,microvm-noacpi", "--tests", "tcp_rr", "--rr-instances", "1",
                   "--repetitions", "1", "--list"], timeout=60)
    cols = re.findall(r"^tcp_rr \S+ x1 (\S+) tap rep 1$", r.stdout, re.M)
    if r.returncode or cols != ["default@pc", "default@microvm-noacpi"]:
        raise Fail(f"machine axis --list: expected default@pc, default@microvm-noacpi, got {cols} ({r.stderr[-300:]})")
    r = vnetbench(["--machine", "microvm", "--tests", "tcp_rr", "--rr-instances", "1", "--repetitions", "1",
                   "--list"], timeout=60)
    if re.findall(r"^tcp_rr \S+ x1 (\S+) tap", r.stdout, re.M) != ["default"]:
        raise Fail(f"one machine: expected the plain column name, got {r.stdout[-300:]}")
    for args, msg in ((["--machine", "pc,nosuch"], "bad machine 'nosuch'"),
                      (["--machine", "pc,microvm", "--guests", "vnetlab,linux", "--rr-role", "server", "--rr-instances", "1"],
                       "stock Linux guest runs on pc and q35 only")):
        r = vnetbench(args + ["--list"], timeout=60)
        if r.returncode != 2 or msg not in r.stderr:
            raise Fail(f"{args}: expected status 2 and '{msg}', got {r.returncode}: {r.stderr[-300:]}")
    if os.geteuid() != 0:
        return
    _, rows = short_run(t, "machine axis", ["--machine", "pc,microvm", "--tests", "tcp_rr", "--rr-instances", "1"])
    got = sorted((row["column"], row["machine"], row["status"]) for row in rows)
    if got != [("default@microvm", "microvm", "ok"), ("default@pc", "pc", "ok")]:
        raise Fail(f"machine axis rows: {got}")


def test_harness_queues_scaling_table(t):
    """report.queues_table on synthetic pkt rows: one line per queue count
    with the medians, the q2/q1 ratios of frames/s and of frames/s per host
    CPU, and each queue's frames/s; and the scaling plot; neither when only
    one queue count ran."""
    def row(col, q, pps, cpu_pct, per=()):
        return {"status": "ok", "test": "pkt_txonly", "backend": "tap", "size": "64", "column": col, "queues": q,
                "accel": "tcg", "pps": pps, "host_cpu_pct": cpu_pct, "qemu_cpu_pct": cpu_pct / 2, "pps_per_cpu": pps / (cpu_pct / 100.0),
                "per_queue": [{"queue": k, "pps": v} for k, v in enumerate(per)] or None}
    rows = [row("default@q1", 1, 100000, 100), row("default@q1", 1, 120000, 100), row("default@q1", 1, 110000, 100),
            row("default@q2", 2, 200000, 200, (90000, 110000)), row("default@q2", 2, 220000, 200, (100000, 120000))]
    text = "\n".join(report.queues_table(rows))
    if "### pkt_txonly 64 B: default (tap, accel tcg)" not in text:
        raise Fail(f"scaling table: no section for the default column:\n{text}")
    want = ["| 1 | 3 | 110,000 | 1.00 | 100 | 50.0 | 110,000 | 1.00 | - |",
            "| 2 | 2 | 210,000 | 1.91 | 200 | 100 | 105,000 | 0.95 | 95,000 / 115,000 |"]
    for w in want:
        if w not in text:
            raise Fail(f"scaling table: missing line {w}:\n{text}")
    if report.queues_table([r for r in rows if r["queues"] == 2]):
        raise Fail("scaling table from one queue count: expected none")
    # A TCP test: its own metric (trans/s), per host CPU worked out from
    # host CPU %, each queue's trans/s; grouped by its instances.
    tcp = [{"status": "ok", "test": "tcp_rr", "backend": "tap", "instances": 4, "column": f"default@q{q}",
            "queues": q, "accel": "tcg", "tps": tps, "host_cpu_pct": 200, "qemu_cpu_pct": 90.5,
            "per_queue": [{"queue": k, "tps": tps / q} for k in range(q)] if q > 1 else None}
           for q, tps in ((1, 4000), (1, 4400), (2, 6000), (2, 6400))]
    text = "\n".join(report.queues_table(tcp))
    want = ["### tcp_rr 4 instances: default (tap, accel tcg)",
            "| queues | n | trans/s | ratio q/q1 | host CPU % | QEMU CPU % | trans/s per host CPU |",
            "| 1 | 2 | 4,200 | 1.00 | 200 | 90.5 | 2,100 | 1.00 | - |",
            "| 2 | 2 | 6,200 | 1.48 | 200 | 90.5 | 3,100 | 1.48 | 3,100 / 3,100 |"]
    for w in want:
        if w not in text:
            raise Fail(f"tcp_rr scaling table: missing line {w}:\n{text}")
    # plots.plot_scaling() through the command line (matplotlib: see
    # test_harness_rereport_plots): one figure for the group, none from
    # one queue count.
    for subset, want in ((rows, ["scaling_pkt_txonly_tap_64_tcg.png"]), ([r for r in rows if r["queues"] == 2], [])):
        with tempfile.TemporaryDirectory() as d:
            report.write_jsonl(os.path.join(d, "results.jsonl"), [dict(x, run=i + 1) for i, x in enumerate(subset)])
            r = vnetbench(["--rereport", d], timeout=120)
            pngs = sorted(f for f in os.listdir(d) if f.startswith("scaling_"))
            if r.returncode or pngs != want:
                raise Fail(f"--rereport of the queues rows: expected {want}, got {pngs} "
                           f"({r.returncode}: {r.stderr.strip()[-400:]})")
            for p in pngs:
                with open(os.path.join(d, p), "rb") as f:
                    if f.read(8) != PNG_MAGIC:
                        raise Fail(f"{p} is not a PNG file")


def test_harness_queues_axis(t):
    """`queues = 1,2` splits every column into COLUMN@q1 and COLUMN@q2, for
    pkt_txonly, tcp_rr and tcp_stream (the appliance gets mq=2 smp=2, the
    Linux guest vnl.queues=2); what cannot take several queue pairs (udp_rr,
    fewer connections than queues, one sockperf ping-pong, the appliance as
    client without RSS on vhost-user, the appliance's memcached, slirp,
    kvm_pvm) is refused with its reason; a real queues=2 cell on tap (TCG,
    1 s) boots the appliance with mq=2 smp=2 on QEMU -smp 2 and gives one
    row with queues=2 whose per_queue lists queue 0 and queue 1, adding up
    to the total."""
    r = vnetbench(["--tests", "pkt_txonly", "--queues", "1,2", "--accel", "tcg", "--repetitions", "1", "--list"],
                  timeout=60)
    cols = re.findall(r"^pkt_txonly size 64 (\S+) tap rep 1$", r.stdout, re.M)
    if r.returncode or cols != ["default@q1", "default@q2"]:
        raise Fail(f"queues axis --list: expected default@q1, default@q2, got {cols} ({r.stderr[-300:]})")
    r = vnetbench(["--tests", "tcp_rr,tcp_stream", "--rr-instances", "2", "--stream-instances", "2",
                   "--stream-sizes", "16K", "--queues", "1,2", "--accel", "tcg", "--repetitions", "1", "--list"],
                  timeout=60)
    cols = re.findall(r"^tcp_(?:rr|stream) .* (default@q\d) tap rep 1$", r.stdout, re.M)
    if r.returncode or sorted(cols) != ["default@q1", "default@q1", "default@q2", "default@q2"]:
        raise Fail(f"queues axis --list for tcp_rr and tcp_stream: got {cols} ({r.stdout[-300:]}{r.stderr[-300:]})")
    expect_refusal(["--tests", "udp_rr", "--queues", "2", "--accel", "tcg"],
                   r"queues=2 with test\(s\) udp_rr: the harness runs only pkt_txonly, tcp_rr, tcp_stream, "
                   r"memcached on several queue pairs")
    expect_refusal(["--tests", "tcp_rr", "--queues", "2", "--accel", "tcg"],
                   r"queues=2 with tcp_rr: rr.instances 1 is fewer connections than queues .* rr.instances >= 2")
    expect_refusal(["--tests", "tcp_stream", "--stream-instances", "1", "--queues", "2", "--accel", "tcg"],
                   r"queues=2 with tcp_stream: stream.instances 1 is fewer connections than queues")
    expect_refusal(["--tests", "tcp_rr", "--rr-instances", "1", "--rr-role", "server", "--queues", "2",
                    "--accel", "tcg"], r"queues=2 with tcp_rr and rr.role=server: one `sockperf ping-pong` is one flow")
    expect_refusal(["--tests", "tcp_rr", "--rr-instances", "2", "--queues", "2", "--accel", "tcg",
                    "--backends", "vhost-user"],
                   r"queues=2 with tcp_rr \(the appliance as client\) on backend\(s\) vhost-user: .* needs RSS")
    expect_refusal(["--tests", "memcached", "--queues", "2", "--accel", "tcg"],
                   r"queues=2 with memcached on the appliance: its memcached runs one TCP/IP copy")
    # The appliance's keys for a TCP test on two queues: mq=2 smp=2 after
    # the app's own; the Linux guest's vnl.queues=2 for its servers.
    import backends  # noqa: E402
    import guests  # noqa: E402
    import matrix  # noqa: E402

    m = type("M", (), dict(accel="tcg", cpu="", pin={}, rr_role="client", stream_role="client", warmup=0,
                           machine="pc", queues=2, tunings=[]))()
    params = {"req": 64, "resp": 64, "instances": 2, "burst": 1, "seconds": 1, "msg": 16384}
    for test, app in (("tcp_rr", "rr"), ("tcp_stream", "stream")):
        k = guests.Vnetlab(m, lambda s: None).keys(matrix.Run(0, "vnetlab", "default", test, "tap", params, 0,
                                                              queues=2), backends.make("tap", "tap", {}))
        if (k.get("app"), k.get("mq"), k.get("smp")) != (app, 2, 2):
            raise Fail(f"{test} on two queues: appliance keys {k}: expected app={app} mq=2 smp=2")
    k = guests.Linux(m, lambda s: None).keys(matrix.Run(0, "linux", "default", "memcached", "tap", params, 0, queues=2),
                backends.make("tap", "tap", {}))
    if k.get("vnl.queues") != 2 or k.get("vnl.app") != "memcached":
        raise Fail(f"memcached on two queues: linux guest keys {k}: expected vnl.app=memcached vnl.queues=2")
    expect_refusal(["--tests", "pkt_txonly", "--queues", "2", "--accel", "tcg", "--backends", "user"],
                   r"queues=2 on backend\(s\) user: .* tap and vhost-user only")
    if matrix.software_kvm():
        expect_refusal(["--tests", "pkt_txonly", "--queues", "2"],
                       r"queues=2 with accel auto: this host's /dev/kvm is a software KVM .* use accel=tcg")
    if os.geteuid() != 0:
        raise Skip("the queues=2 run needs root (network namespace, multi_queue tap)")
    out, rows = short_run(t, "queues=2", ["--tests", "pkt_txonly", "--queues", "2", "--accel", "tcg"])
    if len(rows) != 1 or rows[0]["status"] != "ok":
        raise Fail(f"expected one ok row: {[(x.get('column'), x.get('status'), x.get('error')) for x in rows]}")
    row = rows[0]
    if row.get("queues") != 2 or "mq=2 smp=2" not in row.get("cmdline", ""):
        raise Fail(f"row queues={row.get('queues')}, cmdline '{row.get('cmdline')}': expected queues=2 and mq=2 smp=2")
    per = row.get("per_queue") or []
    if sorted(e.get("queue") for e in per) != [0, 1] or not all(e.get("frames") for e in per):
        raise Fail(f"per_queue must list queue 0 and queue 1, each with frames: {per}")
    if sum(e["frames"] for e in per) != row.get("frames"):
        raise Fail(f"the queues' frames {[e['frames'] for e in per]} do not add up to the row's {row.get('frames')}")
    with open(os.path.join(out, "report.md")) as f:
        rep = f.read()
    if "## Scaling with queue pairs" in rep:
        raise Fail("one queue count gave a scaling table (it needs two to compare)")


def test_harness_packed_variants_get_packed_on(t):
    """A RING=packed variant (a name with -packed, or `variant X =
    RING=packed`) boots on a NIC that offers the packed ring on either
    transport (-global virtio-net-device.packed=on, which also reaches
    virtio-net-pci's inner device and NICs a backend adds itself); a split
    variant gets nothing; tap:packed=off with a packed variant is refused
    before QEMU starts. With root, a real pc + microvm pair of runs of a
    packed variant reports ring=packed in both rows."""
    import backends
    import guests
    import matrix
    import variants

    vars_ = variants.from_scheme("base-every-ei1-eager-inline-zc1-packed")
    if not vars_ or "RING=packed" not in vars_.split() or not variants.is_packed(vars_):
        raise Fail(f"from_scheme(...-packed) = {vars_!r}: expected RING=packed")
    if variants.is_packed(variants.from_scheme("base-every-ei1-eager-inline-zc1")) or \
            variants.is_packed("RING=packed RING=split") or not variants.is_packed("RING=packed"):
        raise Fail("variants.is_packed() misreads RING=")
    started = []

    class FakeProc:
        def __init__(self, name, argv, **kw):
            started.append(argv)

    m = type("M", (), dict(accel="tcg", cpu="", pin={}, rr_role="client", warmup=0, machine="pc",
                           variants=["pk", "sp"], variant_vars={"pk": "RING=packed", "sp": ""}))()
    g = guests.Vnetlab(m, lambda s: None)
    g.kernels = {"pk": "/nonexistent/pk.elf", "sp": "/nonexistent/sp.elf"}
    g.packed = {v: variants.is_packed(m.variant_vars[v]) for v in m.variants}
    params = {"req": 64, "resp": 64, "instances": 1, "burst": 1, "seconds": 1}
    real_proc = guests.Proc
    guests.Proc = FakeProc
    try:
        for v, mach, want in (("pk", "pc", True), ("pk", "microvm", True), ("sp", "pc", False)):
            run = matrix.Run(0, "vnetlab", v, "tcp_rr", "tap", params, 0, machine=mach)
            g.start(run, backends.make("tap", "tap", {}), 30)
            argv = started[-1]
            got = "virtio-net-device.packed=on" in argv
            if got != want or ("--machine" not in argv):
                raise Fail(f"variant {v} on {mach}: packed=on {'missing' if want else 'given'}: {argv}")
        run = matrix.Run(0, "vnetlab", "pk", "tcp_rr", "tap:packed=off", params, 0, machine="pc")
        try:
            g.start(run, backends.make("tap", "tap:packed=off", {"packed": "off"}), 30)
            raise Fail("a packed variant on tap:packed=off was started")
        except BenchError as e:
            if "packed=off" not in str(e):
                raise Fail(f"refusal does not say why: {e}")
    finally:
        guests.Proc = real_proc
    if os.geteuid() != 0:
        return
    _, rows = short_run(t, "packed variant", ["--variants", "base-every-ei1-eager-inline-zc1-packed", "--machine",
                                              "pc,microvm", "--tests", "tcp_rr", "--rr-instances", "1"], timeout=900)
    got = sorted((row["machine"], row["status"], str(row.get("guest_variant", "")).endswith(",ring=packed"))
                 for row in rows)
    if got != [("microvm", "ok", True), ("pc", "ok", True)]:
        raise Fail(f"packed variant rows (machine, status, variant names ring=packed): {got}")


class FakeQmp:
    """A QMP server on a unix socket whose query-stats counters grow at a
    known rate: vcpu 'exits' 2,000/s on each of two vCPUs, vm 'max_mmu_page_hash_collisions'
    constant, and a histogram to be skipped. empty=True answers as TCG does."""

    def __init__(self, path, empty=False):
        import socket
        import threading
        self.path, self.empty, self.t0 = path, empty, time.monotonic()
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(path)
        self.srv.listen(1)
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        c, _ = self.srv.accept()
        f = c.makefile("rw")
        f.write(json.dumps({"QMP": {"version": {}, "capabilities": []}}) + "\n")
        f.flush()
        for line in f:
            cmd = json.loads(line)
            ret = {}
            if cmd["execute"] == "query-stats":
                dt = time.monotonic() - self.t0
                if self.empty:
                    ret = []
                elif cmd["arguments"]["target"] == "vcpu":
                    ret = [{"provider": "kvm", "target": "vcpu", "qom-path": f"/cpu{i}",
                            "stats": [{"name": "exits", "value": int(2000 * dt)},
                                      {"name": "insn_emulation", "value": int(1000 * dt)},
                                      {"name": "halt_poll_success_hist", "value": [1, 2, 3]}]} for i in (0, 1)]
                else:
                    ret = [{"provider": "kvm", "target": "vm", "stats": [{"name": "remote_tlb_flush", "value": 7}]}]
            elif cmd["execute"] == "query-cpus-fast":
                ret = [] if self.empty else [{"cpu-index": i, "thread-id": 4000 + i, "target": "x86_64"} for i in (0, 1)]
            f.write(json.dumps({"event": "NOISE"}) + "\n")  # events interleave with replies
            f.write(json.dumps({"return": ret}) + "\n")
            f.flush()

    def close(self):
        self.srv.close()


def test_harness_kvm_exit_counters_from_qmp(t):
    sys.path.insert(0, BENCH)
    import kvmstats
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "qmp.sock")
        srv = FakeQmp(path)
        s = kvmstats.Sampler(path, period=0.05)
        s.start()
        time.sleep(1.0)
        s.stop()
        srv.close()
        if s.error or len(s.samples) < 10:
            raise Fail(f"sampler: {len(s.samples)} samples, error {s.error}")
        last = s.samples[-1][1]
        if "halt_poll_success_hist" in last or last.get("vm_remote_tlb_flush") != 7:
            raise Fail(f"histograms must be skipped and the vm target prefixed vm_: {last}")
        t0, t1 = s.samples[2][0] + 0.01, s.samples[-3][0] - 0.01
        delta = kvmstats.interval(s.samples, t0, t1)
        want = 4000 * (t1 - t0)  # two vCPUs at 2,000/s
        if not abs(delta["exits"] - want) <= 0.05 * want + 4:
            raise Fail(f"exits over {t1 - t0:.3f} s: {delta['exits']:.0f}, expected ~{want:.0f}")
        if kvmstats.interval(s.samples, t0 - 100, t1):
            raise Fail("an interval that starts before the first sample must give no counters, not a guess")
        cols = kvmstats.row_columns(delta, {"test": "udp_rr", "transactions": 1000})
        if not approx(cols["kvm_exits_per_txn"], round(delta["exits"] / 1000, 4)) or "kvm_exits_per_mb" in cols:
            raise Fail(f"RR rows get per-transaction columns: {cols}")
        cols = kvmstats.row_columns(delta, {"test": "tcp_stream", "bytes": 2_000_000})
        if not approx(cols["kvm_insn_emulation_per_mb"], round(delta["insn_emulation"] / 2, 3)):
            raise Fail(f"STREAM rows get per-MB columns: {cols}")
        cols = kvmstats.row_columns(delta, {"test": "pkt_txonly", "frames": 50000, "bytes": 3_200_000})
        if not approx(cols["kvm_exits_per_frame"], round(delta["exits"] / 50000, 5)) or "kvm_exits_per_mb" in cols:
            raise Fail(f"packet rows get per-frame columns: {cols}")
        # Under TCG query-stats is empty: no samples, so no columns at all.
        path2 = os.path.join(d, "tcg.sock")
        srv = FakeQmp(path2, empty=True)
        s = kvmstats.Sampler(path2, period=0.05)
        s.start()
        time.sleep(0.3)
        s.stop()
        srv.close()
        if s.samples:
            raise Fail(f"an empty query-stats (TCG) must give no samples, got {s.samples[:2]}")
    # The report's KVM table, from rows that carry the columns.
    rows = [dict(run=i, rep=i, column="base", guest="vnetlab", variant="base", test="udp_rr", backend="tap",
                 accel="kvm", req=64, resp=64, instances=1, burst=1, seconds=5, status="ok", tps=30000.0 + i,
                 kvm_exits_per_txn=1.04, kvm_insn_emulation_per_txn=1.02, kvm_irq_injections_per_txn=0.0,
                 kvm_halt_exits_per_txn=0.0) for i in range(3)]
    md = synthetic_report(rows)
    if "KVM: exits / instruction emulations" not in md or "1.04 / 1.02 / 0.00 / 0.00" not in md:
        raise Fail(f"report.md lacks the KVM exits table:\n{md[-1200:]}")
    rows = [dict(run=i, rep=i, column="base", guest="vnetlab", variant="base", test="pkt_txonly", backend="tap",
                 accel="kvm", size=64, seconds=5, status="ok", pps=150000.0 + i, kvm_exits_per_frame=0.023,
                 kvm_insn_emulation_per_frame=0.022, kvm_irq_injections_per_frame=0.0,
                 kvm_halt_exits_per_frame=0.0) for i in range(3)]
    md = synthetic_report(rows)
    if "halt exits per frame" not in md or "0.023 / 0.022 / 0.00 / 0.00" not in md:
        raise Fail(f"report.md lacks the per-frame KVM exits table of a packet test:\n{md[-1200:]}")


def test_harness_kvm_columns_ndr_pairs_memcached(t):
    """The exit counters on the ndr, pairs and memcached rows (issue 37
    item 1): memcached per command, the NDR search per frame (the row at the
    NDR trial, each trial in ndr_steps), each pair side prefixed client_ /
    server_; and where nothing was counted (TCG's empty query-stats, a side
    without QMP) kvm_counters says n/a with why, no kvm_* figure at all."""
    import kvmstats
    import ndr
    import pairs
    if kvmstats.unit("memcached") != "txn" or kvmstats.unit("ndr") != "frame":
        raise Fail(f"units: memcached {kvmstats.unit('memcached')}, ndr {kvmstats.unit('ndr')} (want txn, frame)")
    with tempfile.TemporaryDirectory() as d:
        samplers = {}
        for name, empty in (("kvm", False), ("tcg", True)):
            path = os.path.join(d, f"{name}.sock")
            srv = FakeQmp(path, empty=empty)
            s = kvmstats.Sampler(path, period=0.05)
            s.start()
            time.sleep(1.0 if name == "kvm" else 0.3)
            s.stop()
            srv.close()
            samplers[name] = s
    kvm, tcg = samplers["kvm"], samplers["tcg"]
    if kvmstats.availability(kvm) != {"kvm_counters": "query-stats"}:
        raise Fail(f"a sampler with samples: {kvmstats.availability(kvm)}")
    for s, why in ((tcg, "TCG"), (None, "no QMP")):
        a = kvmstats.availability(s)
        if a.get("kvm_counters") != "n/a" or why not in a.get("kvm_counters_why", ""):
            raise Fail(f"nothing counted must say n/a ({why}): {a}")
    t0, t1 = kvm.samples[2][0] + 0.01, kvm.samples[-3][0] - 0.01
    exits = kvmstats.interval(kvm.samples, t0, t1)["exits"]

    def trials():
        return [dict(rate=1000, **{"pass": True}, guest_forwarded=500, received=500, t_host=(t0, t1)),
                dict(rate=2000, **{"pass": False}, guest_forwarded=800, received=700, t_host=(t0, t1))]
    steps = trials()
    cols = ndr.kvm_columns(kvm, steps, 1000)
    if cols.get("kvm_counters") != "query-stats" or not approx(cols.get("kvm_exits_per_frame"),
                                                                 round(exits / 500, 5), 1e-3):
        raise Fail(f"ndr row: exits per frame of the NDR trial {round(exits / 500, 5)} expected: {cols}")
    if any("t_host" in s for s in steps) or not approx(steps[1].get("kvm_exits_per_frame"), round(exits / 800, 5), 1e-3):
        raise Fail(f"ndr steps: each trial's exits per forwarded frame, no host times left: {steps}")
    for s in (tcg, None):
        steps = trials()
        cols = ndr.kvm_columns(s, steps, 1000)
        figs = [k for k in cols if k.startswith("kvm_") and k not in ("kvm_counters", "kvm_counters_why")]
        if cols.get("kvm_counters") != "n/a" or figs or any(k.startswith(("kvm_", "t_host")) for st in steps for k in st):
            raise Fail(f"ndr without counters: n/a and no kvm_* figures in the row or its steps: {cols} {steps}")
    cols = pairs.kvm_columns("client", kvm, (t0, t1), {"transactions": 1000}, "tcp_rr")
    if cols.get("client_kvm_counters") != "query-stats" or not approx(cols.get("client_kvm_exits_per_txn"),
                                                                        round(exits / 1000, 4), 1e-3):
        raise Fail(f"pair side: client_kvm_exits_per_txn expected {round(exits / 1000, 4)}: {cols}")
    for s in (tcg, None):
        cols = pairs.kvm_columns("server", s, (t0, t1), {"transactions": 1000}, "tcp_rr")
        if cols.get("server_kvm_counters") != "n/a" or any("exits" in k for k in cols):
            raise Fail(f"pair side without counters: n/a, no figures: {cols}")
    cols = kvmstats.row_columns(kvmstats.interval(kvm.samples, t0, t1), {"test": "memcached", "transactions": 2000})
    if not approx(cols.get("kvm_exits_per_txn"), round(exits / 2000, 4)) or "kvm_exits_per_mb" in cols:
        raise Fail(f"memcached rows: per command (transaction), not per MB: {cols}")


def test_harness_placement_axis(t):
    """`placement = free pinned` runs every column unpinned and pinned in
    one run (COLUMN@free, COLUMN@pinned): free keeps only testpmd's lcores,
    pinned adds pin.qemu, pin.vcpu and pin.peer; pin.vcpu moves QEMU's
    vCPU threads (QMP query-cpus-fast) and the report's placement table
    says where the vCPU thread, QEMU, testpmd and the peer ran. A real
    pair of TCG runs (root) must show the pinned vCPU on its CPU."""
    import kvmstats
    import matrix
    base = ["--tests", "tcp_rr", "--rr-instances", "1", "--repetitions", "1"]
    r = vnetbench(base + ["--placement", "free,pinned", "--pin-vcpu", "0", "--pin-peer", "1", "--list"], timeout=60)
    cols = re.findall(r"^tcp_rr \S+ x1 (\S+) tap rep 1$", r.stdout, re.M)
    if r.returncode or cols != ["default@free", "default@pinned"]:
        raise Fail(f"placement axis --list: expected default@free, default@pinned, got {cols} ({r.stderr[-300:]})")
    r = vnetbench(base + ["--pin-vcpu", "0", "--list"], timeout=60)
    if r.returncode or re.findall(r"^tcp_rr \S+ x1 (\S+) tap", r.stdout, re.M) != ["default"]:
        raise Fail(f"one placement: expected the plain column name, got {r.stdout[-300:]}{r.stderr[-300:]}")
    ncpu = os.cpu_count() or 1
    for args, msg in ((["--placement", "free,nosuch"], "give free, pinned or both"),
                      (["--placement", "free,free"], "give free, pinned or both"),
                      (["--placement", "free,pinned"], "pinned would pin nothing"),
                      (["--pin-vcpu", "zero"], "bad pin.vcpu 'zero'"),
                      (["--pin-vcpu", str(ncpu)], f"pin.vcpu={ncpu}: this host has CPUs 0..{ncpu - 1} only")):
        r = vnetbench(base + args + ["--list"], timeout=60)
        if r.returncode != 2 or msg not in r.stderr:
            raise Fail(f"{args}: expected status 2 and '{msg}', got {r.returncode}: {r.stderr[-300:]}")
    # Which CPU lists hold for a run of each placement.
    m = matrix.Matrix(dict(tests="udp_rr", placement="free pinned", repetitions="1", **{"rr.instances": "1", "pin.vcpu": "0", "pin.peer": "0",
                                                                       "pin.backend": "0,1"}),
                      {}, lambda v: "" if v == "default" else None, ["vnetlab"])
    runs_ = m.runs()
    got = [(r_.column, matrix.run_pins(r_, m)) for r_ in runs_]
    want = [("default@free", {"backend": "0,1"}),
            ("default@pinned", {"qemu": "", "peer": "0", "backend": "0,1", "vcpu": "0"})]
    if got != want:
        raise Fail(f"run_pins: expected {want}, got {got}")
    # pin_vcpus: every vCPU thread QMP names gets the CPU set; none named is an error.
    with tempfile.TemporaryDirectory() as d:
        calls = []
        srv = FakeQmp(os.path.join(d, "q.sock"))
        tids = kvmstats.pin_vcpus(os.path.join(d, "q.sock"), [1], setaffinity=lambda tid, c: calls.append((tid, c)))
        srv.close()
        if tids != {0: 4000, 1: 4001} or calls != [(4000, {1}), (4001, {1})]:
            raise Fail(f"pin_vcpus: expected both vCPU threads on CPU 1, got {tids} {calls}")
        srv = FakeQmp(os.path.join(d, "e.sock"), empty=True)
        try:
            kvmstats.pin_vcpus(os.path.join(d, "e.sock"), [1], setaffinity=lambda tid, c: calls.append((tid, c)))
            raise Fail("pin_vcpus with no vCPU named must fail, not pass for pinned")
        except kvmstats.QmpError:
            pass
        srv.close()
    # The vCPU thread's own share, beside the whole QEMU's.
    hz = cpu.HZ
    st = {"all": (0, 2), 0: (0, 1), 1: (0, 1)}
    a = (0.0, st, {"qemu": (42, 0, {1: ("qemu-system-x86", 0, 0), 2: ("CPU 0/KVM", 1, 0)})})
    b = (1.0, {"all": (hz, 2 * hz), 0: (hz // 2, hz), 1: (hz // 2, hz)},
         {"qemu": (42, hz, {1: ("qemu-system-x86", 0, hz // 4), 2: ("CPU 0/KVM", 1, 3 * hz // 4)})})
    row = cpu.row_columns(cpu.figures(a, b, [a, b]))
    if row.get("vcpu_cpus") != "1:100%" or row.get("qemu_cpus") != "0:25%,1:75%":
        raise Fail(f"vcpu_cpus must be the vCPU thread's own placement: {row}")
    if os.geteuid() != 0:
        return
    out = tempfile.mkdtemp(prefix="vnetlab-placement-")
    t.cleanups.append(lambda: shutil.rmtree(out, ignore_errors=True))
    vcpu = str(ncpu - 1)
    r = vnetbench(base + ["--accel", "tcg", "--placement", "free,pinned", "--pin-vcpu", vcpu, "--seconds", "1",
                          "--warmup", "1", "--out", out], timeout=300)
    if r.returncode:
        raise Fail(f"placement run failed ({r.returncode}): {r.stdout[-600:]}{r.stderr[-300:]}")
    with open(os.path.join(out, "results.jsonl")) as f:
        rows = {row["column"]: row for row in map(json.loads, f)}
    free, pinned = rows.get("default@free", {}), rows.get("default@pinned", {})
    if free.get("placement") != "free" or free.get("vcpu_pin") or free.get("pins"):
        raise Fail(f"the free row must pin nothing: {free.get('placement')} {free.get('vcpu_pin')} {free.get('pins')}")
    share = dict(x.split(":") for x in (pinned.get("vcpu_cpus") or "").split(",") if x)
    if (pinned.get("placement") != "pinned" or pinned.get("vcpu_pin") != vcpu or not pinned.get("vcpu_tids")
            or int(share.get(vcpu, "0%").rstrip("%")) < 90):
        raise Fail(f"the pinned row's vCPU thread must run on CPU {vcpu}: {pinned.get('vcpu_pin')} "
                   f"{pinned.get('vcpu_tids')} {pinned.get('vcpu_cpus')}")
    md = open(os.path.join(out, "report.md")).read()
    if not re.search(rf"\| default@pinned \| tcp_rr 1 \| tap \| [^|]* \| [^|]*{vcpu}:\d+%[^|]*\(pinned {vcpu}\) \|", md):
        raise Fail(f"report.md's placement table lacks the pinned vCPU:\n{md[md.find('Where the processes'):][:1500]}")


def test_harness_tap_qlen_sets_the_taps_queue(t):
    """backend tap:qlen=N: the tap every guest of the run uses gets
    txqueuelen N (what the host queues towards QEMU before it drops); a
    non-number and 0 are refused with the reason."""
    r = vnetbench(["--backends", "tap:qlen=lots", "--tests", "ndr", "--list"], timeout=120)
    if r.returncode != 2 or "qlen needs a whole number" not in r.stderr:
        raise Fail(f"tap:qlen=lots: expected exit 2 naming the reason, got {r.returncode}: {r.stderr.strip()[-300:]}")
    if os.geteuid() != 0:
        raise Skip("tap:qlen needs root (a network namespace and a tap)")
    import backends  # noqa: E402
    qlens = {}
    for opts in ({"qlen": "0"}, {}, {"qlen": "20000"}):
        b = backends.Tap("tap" + "".join(f":{k}={v}" for k, v in opts.items()), opts)
        try:
            b.setup(tempfile.gettempdir())
            out = subprocess.run(["ip", "-n", b.ns.name, "-o", "link", "show", "dev", backends.TAP],
                                 capture_output=True, text=True, timeout=30).stdout
            m = re.search(r"qlen (\d+)", out)
            qlens[b.spec] = int(m.group(1)) if m else out
        except BenchError as e:
            qlens[b.spec] = str(e)
        finally:
            b.teardown()
    want = {"tap:qlen=0": "backend 'tap:qlen=0': qlen must be 1..1000000", "tap": 1000, "tap:qlen=20000": 20000}
    if qlens != want:
        raise Fail(f"expected {want}, got {qlens}")


def test_harness_vhost_user_ring_sizes_both_sides(t):
    """backend vhost-user:ring=N: the guest's NIC gets rx_queue_size and
    tx_queue_size N and the no-guest reference's virtio_user the same ring
    (a fair column); the default adds nothing to QEMU's line and keeps the
    reference at 256; a size QEMU does not take is refused at once, and so
    is an appliance variant whose QUEUE_MAX would keep smaller rings."""
    r = vnetbench(["--backends", "vhost-user:ring=300", "--tests", "ndr", "--list"], timeout=120)
    if r.returncode != 2 or "ring must be one of 256|512|1024" not in r.stderr:
        raise Fail(f"vhost-user:ring=300: expected exit 2 naming the sizes, got {r.returncode}: "
                   f"{r.stderr.strip()[-300:]}")
    with tempfile.TemporaryDirectory() as d:
        for vars_, want in (("TX_RECLAIM=after", 2), ("QUEUE_MAX=512 TX_RECLAIM=after", 2),
                            ("QUEUE_MAX=1024 TX_RECLAIM=after", 0)):
            m = os.path.join(d, "m.txt")
            with open(m, "w") as f:
                f.write(f"variant q = {vars_}\nvariants = q\nguests = vnetlab reference\ntests = ndr\n"
                        "backends = vhost-user:ring=1024\n")
            r = vnetbench(["--matrix", m, "--list"], timeout=120)
            said = "QUEUE_MAX=1024 to the variant" in r.stderr
            if r.returncode != want or said != (want == 2):
                raise Fail(f"variant '{vars_}' on vhost-user:ring=1024: expected exit {want}"
                           f"{' naming QUEUE_MAX' if want else ''}, got {r.returncode}: {r.stderr.strip()[-300:]}")
    import backends  # noqa: E402
    import hostgen  # noqa: E402
    seen = {}
    for spec, opts in (("vhost-user", {}), ("vhost-user:ring=1024", {"ring": "1024"})):
        b = hostgen.VhostUserGen(spec, opts)
        b.sock = "/nonexistent/vhost-user.sock"
        nic = [a for a in b.qemu_net()[1] if a.startswith(backends.NIC)]
        seen[spec] = (nic, b.ring())
        # The reference's consumer (built, not started): its virtio_user
        # vdev carries the same size.
        vdev = [a for a in hostgen.consumer(b, "macswap").cmdline if a.startswith("net_virtio_user0,")]
        seen[spec] += (vdev,)
    want = {"vhost-user": ([backends.NIC + ",vectors=0"], 256,
                           ["net_virtio_user0,path=/nonexistent/vhost-user.sock,queue_size=256"]),
            "vhost-user:ring=1024": ([backends.NIC + ",vectors=0,rx_queue_size=1024,tx_queue_size=1024"], 1024,
                                     ["net_virtio_user0,path=/nonexistent/vhost-user.sock,queue_size=1024"])}
    if seen != want:
        raise Fail(f"expected {want}, got {seen}")
    print(f"    {seen}")
