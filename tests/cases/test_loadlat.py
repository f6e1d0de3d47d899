"""The load sweep (host/bench/loadlat.py, `rr.mps = load`): the matrix's
expansion (the closed-loop maximum before its load points, per column),
fractions -> --mps values, the rows' fields, the report's load table and
the latency-vs-load plot on synthetic rows, refusals of bad keys, and one
short end-to-end sweep of the appliance on a tap. No test judges a speed."""

import os
import subprocess
import sys
import tempfile

from lib import TOP, Fail, Skip, expect_refused

BENCH = os.path.join(TOP, "host", "bench")
VNETBENCH = os.path.join(BENCH, "vnetbench.py")
sys.path.insert(0, BENCH)

import loadlat  # noqa: E402
import matrix  # noqa: E402
import report  # noqa: E402
from procs import BenchError  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def vnetbench(args, timeout):
    return subprocess.run([sys.executable, VNETBENCH, *args], capture_output=True, text=True, timeout=timeout, cwd=TOP)


def make_matrix(**kw):
    s = {"variants": "default", "guests": "vnetlab linux", "tests": "udp_rr", "rr.role": "server",
         "rr.instances": "1", "rr.sizes": "64/64", "rr.mps": "load", "repetitions": "2"}
    s.update(kw)
    return matrix.Matrix(s, {}, lambda v: "" if v == "default" else None, ["vnetlab", "linux"])


def test_harness_loadlat_expansion(t):
    m = make_matrix()
    runs = m.runs()
    loads = [(r.rep, r.column, r.params["load"]) for r in runs]
    want = [(rep, col, ld) for rep in (0, 1) for ld in ("max", 10, 50, 90, 99) for col in ("default", "linux")]
    if loads != want:
        raise Fail(f"expected per repetition the closed-loop max of every column first, then 10/50/90/99 %:\n"
                   f"  want {want}\n  got  {loads}")
    if any("mps" in r.params for r in runs):
        raise Fail("no run may carry an mps before its maximum is measured")
    if "load 50%" not in runs[4].label() or "load max (closed loop)" not in runs[0].label():
        raise Fail(f"run labels must name the load: {runs[0].label()!r}, {runs[4].label()!r}")
    m = make_matrix(**{"load.fractions": "25,75.5 5%"})
    if m.load_fractions != [5, 25, 75.5]:
        raise Fail(f"load.fractions '25,75.5 5%' -> expected [5, 25, 75.5], got {m.load_fractions}")
    for kw, pattern in (({"load.fractions": "0"}, r"out of range"), ({"load.fractions": "150"}, r"out of range"),
                        ({"load.fractions": "ten"}, r"bad load.fractions value 'ten'"),
                        ({"load.fractions": "50 50"}, r"twice"),
                        ({"rr.role": "client"}, r"needs rr.role=server"),
                        ({"rr.mps": "1000", "load.fractions": "50"}, r"set rr.mps = load")):
        expect_refused(lambda: make_matrix(**kw), BenchError, pattern, str(kw))
    if "load.fractions" not in matrix.KEYS or "`load.fractions`" not in open(os.path.join(BENCH, "README.md")).read():
        raise Fail("load.fractions must be a matrix key with help and a row in host/bench/README.md's key table")


def fake_execute(tps, sent_scale=1.0, fail=False):
    """kinds.execute's stand-in: records the runs it was given and answers
    with the peer figures parse_sockperf() would have put in the row."""
    seen = []

    def execute(run, m, guest, logdir):
        seen.append(dict(run.params))
        mps = run.params.get("mps")
        rate = tps if mps is None else min(mps, tps)
        row = dict(run=run.index, rep=run.rep, column=run.column, test=run.test, backend=run.backend,
                   status="error" if fail else "ok", error="boom" if fail else None, **run.params)
        if not fail:
            row.update(peer_tps=float(rate), peer_runtime_s=2.0, peer_sent=int(2 * (mps or rate) * sent_scale),
                       peer_lat_p50_ns=20000 if mps is None else int(1e6 * 0.5 / max(1, tps - rate + 1)))
        return row

    return execute, seen


def test_harness_loadlat_rows(t):
    loadlat.MAXIMA.clear()
    m = make_matrix(**{"guests": "vnetlab", "repetitions": "1"})
    runs = m.runs()
    execute, seen = fake_execute(19193.2)
    rows = [loadlat.execute_run(r, m, None, "/nonexistent", execute) for r in runs]
    if [p.get("mps") for p in seen] != [None, 1919, 9597, 17274, 19001]:
        raise Fail(f"10/50/90/99 % of a closed loop of 19,193.2 trans/s: expected --mps None (ping-pong), 1919, "
                   f"9597, 17274, 19001; the runs got {[p.get('mps') for p in seen]}")
    if any("load" in p for p in seen):
        raise Fail("the run handed on must be a plain closed or open loop (no load param)")
    mx = rows[0]
    if mx["load"] != "max" or mx["load_max_tps"] != 19193.2:
        raise Fail(f"the closed-loop row: load max and load_max_tps 19193.2 expected, got {mx}")
    r50 = rows[2]
    for k, v in (("load", 50), ("mps", 9597), ("offered_mps", 9597), ("load_max_tps", 19193.2),
                 ("achieved_mps", 9597.0), ("sent_mps", 9597.0), ("load_short", False)):
        if r50.get(k) != v:
            raise Fail(f"the 50 % row: expected {k} = {v!r}, got {r50.get(k)!r} in {r50}")

    # a guest that answers only 15,000/s: the 99 % point is short
    loadlat.MAXIMA.clear()
    execute, seen = fake_execute(15000)
    loadlat.MAXIMA[loadlat.max_key(runs[0], m)] = 19193.2
    r99 = loadlat.execute_run(runs[4], m, None, "/nonexistent", execute)
    if r99["achieved_mps"] != 15000.0 or r99["load_short"] is not True or r99["achieved_ratio"] != round(15000 / 19001, 4):
        raise Fail(f"15,000 answered of 19,001 offered: expected load_short True, got {r99}")

    # no maximum: the load points fail with the reason, nothing runs
    loadlat.MAXIMA.clear()
    execute, seen = fake_execute(1000, fail=True)
    rows = [loadlat.execute_run(r, m, None, "/nonexistent", execute) for r in runs]
    if len(seen) != 1 or any(r["status"] != "error" for r in rows) or "no closed-loop maximum" not in rows[1]["error"]:
        raise Fail(f"a failed closed loop: the load points must fail without running: ran {seen}, rows "
                   f"{[(r['status'], r.get('error')) for r in rows]}")
    loadlat.MAXIMA.clear()


def synthetic_rows():
    """Two columns, two repetitions, closed loop + 10/50/90 %."""
    rows, n = [], 0
    for col, guest, mx, base in (("appliance", "vnetlab", 20000.0, 30000), ("linux", "linux", 10000.0, 90000)):
        for rep in (0, 1):
            rows.append(dict(run=n, rep=rep, column=col, guest=guest, variant=col, test="udp_rr", backend="tap",
                             accel="tcg", req=64, resp=64, instances=1, burst=1, seconds=3, status="ok", load="max",
                             tps=mx, peer_tps=mx, load_max_tps=mx, lat_p50_ns=base, lat_p90_ns=base, lat_p99_ns=2 * base,
                             lat_p999_ns=3 * base, peer_lat_p50_ns=base,
                             peer_lat_p90_ns=base, peer_lat_p99_ns=2 * base, peer_lat_p999_ns=3 * base))
            n += 1
            for pct in (10, 50, 90):
                mps = loadlat.offered_mps(mx, pct)
                lat = base * (1 + pct / 10) + rep * 1000
                rows.append(dict(run=n, rep=rep, column=col, guest=guest, variant=col, test="udp_rr", backend="tap",
                                 accel="tcg", req=64, resp=64, instances=1, burst=1, seconds=3, status="ok", load=pct,
                                 mps=mps, offered_mps=mps, sent_mps=float(mps), achieved_mps=float(mps),
                                 load_max_tps=mx, peer_tps=float(mps), tps=float(mps), peer_lat_p50_ns=lat,
                                 peer_lat_p90_ns=2 * lat, peer_lat_p99_ns=4 * lat, peer_lat_p999_ns=8 * lat,
                                 achieved_ratio=1.0, load_short=pct == 90 and col == "linux" and rep == 0))
                n += 1
    return rows


def test_harness_loadlat_report_and_plot(t):
    rows = synthetic_rows()
    md = "\n".join(loadlat.table(rows, ["appliance"]))
    for want in ("## Latency against offered load", "### udp_rr 64/64 bytes -- backend tap",
                 "| appliance | 10 % | 2,000 | 2,000 | 2,000 | 60.5 | 121.0 | 242.0 | 484.0 | 2 |  | tcg |",
                 "| appliance | max (closed loop, 20,000/s) | - | - | 20,000 | 30.0 | 30.0 | 60.0 | 90.0 | 2 |",
                 "| linux | 90 % | 9,000 | 9,000 | 9,000 | 900.5 | 1801.0 | 3602.0 | 7204.0 | 2 | 1 | tcg |"):
        if want not in md:
            raise Fail(f"the load table lacks {want!r}:\n{md}")
    if md.index("| appliance | 10 %") > md.index("| appliance | 90 %") or md.index("| appliance |") > md.index("| linux |"):
        raise Fail(f"the load table: columns in order, loads ascending within each:\n{md}")
    recs, cols = report.summarise(rows, ["appliance"], "appliance")
    if {r.get("mps") for r in recs} != {None} or {r["n"] for r in recs} != {2}:
        raise Fail("the load points (mps differs per column) must stay out of the per-test tables; only the "
                   f"closed-loop rows form their cells: {[(r['column'], r.get('mps'), r['n']) for r in recs]}")
    if loadlat.table([dict(r, load=None) for r in rows], ["appliance"]):
        raise Fail("no load table without sweep rows")
    with tempfile.TemporaryDirectory() as d:
        report.write_jsonl(os.path.join(d, "results.jsonl"), rows)
        r = vnetbench(["--rereport", d], timeout=120)
        if r.returncode:
            raise Fail(f"--rereport failed ({r.returncode}): {r.stderr.strip()[-800:]}")
        png = os.path.join(d, "loadlat_udp_rr_tap_64_64.png")
        if not os.path.isfile(png) or open(png, "rb").read(8) != PNG_MAGIC:
            raise Fail(f"expected the plot {os.path.basename(png)}, got {sorted(os.listdir(d))}")
        md = open(os.path.join(d, "report.md")).read()
        if "## Latency against offered load" not in md or "(loadlat_udp_rr_tap_64_64.png)" not in md:
            raise Fail("report.md must hold the load table and link the loadlat plot")


def test_harness_loadlat_tap_sweep(t):
    # The appliance only (the Linux guest's closed loop is exercised by
    # test_harness_linux_tunings_and_loopback_kinds): 2 s per point.
    if os.geteuid() != 0:
        raise Skip("the sweep runs on a tap in a namespace (root)")
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "res")
        r = vnetbench(["--matrix", os.path.join(BENCH, "matrices", "loadlat.txt"), "--guests", "vnetlab",
                       "--load-fractions", "10,50", "--seconds", "2", "--out", out, "--quiet"], timeout=300)
        if r.returncode:
            raise Fail(f"vnetbench loadlat exited {r.returncode}:\n{(r.stdout + r.stderr)[-2500:]}")
        rows = report.read_jsonl(os.path.join(out, "results.jsonl"))
        if [(x["load"], x["status"]) for x in rows] != [("max", "ok"), (10, "ok"), (50, "ok")]:
            raise Fail(f"expected 3 ok runs: the closed loop, 10 % and 50 %: "
                       f"{[(x['load'], x['status'], x.get('error')) for x in rows]}")
        mx = rows[0]
        if mx.get("loop") != "closed" or not mx.get("peer_tps") or mx.get("load_max_tps") != mx["peer_tps"]:
            raise Fail(f"the closed loop row: loop closed, peer_tps = load_max_tps expected: {mx}")
        for x, pct in zip(rows[1:], (10, 50)):
            want = max(1, int(round(mx["peer_tps"] * pct / 100)))
            if x.get("loop") != "open" or x.get("offered_mps") != want or x.get("mps") != want:
                raise Fail(f"{pct} % of {mx['peer_tps']}: expected an open loop at --mps {want}, got {x}")
            if "--mps" not in open(os.path.join(out, x["log"])).read():
                raise Fail(f"the {pct} % run's log shows no sockperf under-load --mps")
            if not x.get("achieved_mps") or x.get("load_max_tps") != mx["peer_tps"] or x.get("peer_lat_p50_ns") is None:
                raise Fail(f"the {pct} % row lacks achieved_mps, load_max_tps or the peer's p50: {x}")
        md = open(os.path.join(out, "report.md")).read()
        if "## Latency against offered load" not in md or "| appliance | 50 % |" not in md:
            raise Fail(f"report.md lacks the load table:\n{md[-2000:]}")
        if not os.path.isfile(os.path.join(out, "loadlat_udp_rr_tap_64_64.png")):
            raise Fail(f"no loadlat plot among {sorted(os.listdir(out))}")


def test_harness_loadlat_pcap_tool(t):
    # tests/tools/sockperf_pcap.py on a synthetic capture: three requests
    # in a burst (5 us apart), replies 40, 80 and (for sequence 7) none.
    sys.path.insert(0, os.path.join(TOP, "tests", "tools"))
    import sockperf_pcap

    def frame(src, dst, seq):
        payload = seq.to_bytes(8, "big") + bytes(56)
        udp = (11111).to_bytes(2, "big") * 2 + (8 + len(payload)).to_bytes(2, "big") + bytes(2) + payload
        ip = bytes([0x45, 0]) + (20 + len(udp)).to_bytes(2, "big") + bytes(5) + bytes([17]) + bytes(2) + \
            bytes(src) + bytes(dst) + udp
        return bytes(12) + b"\x08\x00" + ip

    host, guest = (10, 77, 0, 1), (10, 77, 0, 2)
    pkts = [(1.000000, frame(host, guest, 5)), (1.000005, frame(host, guest, 6)), (1.000010, frame(host, guest, 7)),
            (1.000040, frame(guest, host, 5)), (1.000085, frame(guest, host, 6))]
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "cap.pcap")
        with open(path, "wb") as f:
            f.write((0xA1B2C3D4).to_bytes(4, "little") + bytes(20))
            for ts, data in pkts:
                sec, usec = int(ts), round((ts - int(ts)) * 1e6)
                f.write(sec.to_bytes(4, "little") + usec.to_bytes(4, "little") + len(data).to_bytes(4, "little") * 2)
                f.write(data)
        s = sockperf_pcap.summary(sockperf_pcap.sockperf_events(path))
    want = {"matched": 2, "unanswered": 1, "tap_rtt_p50_us": 40.0, "tap_rtt_p99_us": 80.0, "reqs": 3, "reps": 2,
            "req_burst_pct": 100.0, "rep_burst_pct": 0.0}
    bad = {k: (v, s.get(k)) for k, v in want.items() if s.get(k) != v}
    if bad:
        raise Fail(f"sockperf_pcap summary: (expected, got) {bad}")
