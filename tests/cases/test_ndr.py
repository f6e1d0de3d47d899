"""The NDR/PDR search (host/bench/ndr.py, after MLRsearch) against a
simulated rate-limited sink, pure Python: it finds a known limit within
its width, on a noisy loss curve too (the exceed ratio), ignores the
warm-up trial, spends the duration sum on the bounds, records every step,
reuses the NDR trials for PDR, and the report's RFC 2544 table
shows the figures; host/bench/matrices/ndr.txt expands to one run per
frame size."""

import os
import sys

from lib import BUILD, TOP, Fail

sys.path.insert(0, os.path.join(TOP, "host", "bench"))

import ndr  # noqa: E402


class FakeProc:
    """A boot's console that has printed lines already (wait_line finds them)."""

    def __init__(self, lines):
        self.lines = lines

    def wait_line(self, pred, timeout):
        return next(((0, "out", l) for l in self.lines if pred(l)), None)


class FakeBoot:
    """What ndr.guest_close and ndr.peer_trial read of a boot: its console, no QMP."""

    def __init__(self, lines):
        self.proc = FakeProc(lines)
        self.qmp = None


def test_ndr_search_finds_a_known_limit(t):
    for limit in (777, 12345, 250000, 999999):
        for precision in (5.0, 1.0):
            sink = ndr.SimulatedSink(limit)
            r = ndr.search(sink, 1000000, pdr_pct=0.5, precision_pct=precision)
            if not limit * (1 - precision / 100) - 1 <= r["ndr"] <= limit:
                raise Fail(f"limit {limit}, precision {precision} %: NDR {r['ndr']} is not within "
                           f"[{limit * (1 - precision / 100):.0f}, {limit}]")
            # PDR may lose 0.5 %: at most limit / 0.995 frames/s offered.
            if not r["ndr"] <= r["pdr"] <= limit / 0.995 + 1:
                raise Fail(f"limit {limit}: PDR {r['pdr']} not in [NDR {r['ndr']}, {limit / 0.995:.0f}]")
            if len(r["steps"]) != sink.trials or len(r["steps"]) > 40:
                raise Fail(f"limit {limit}: {len(r['steps'])} steps recorded for {sink.trials} trials")


def test_ndr_search_steps_and_pdr_reuse(t):
    sink = ndr.SimulatedSink(12345)
    r = ndr.search(sink, 100000, pdr_pct=0.5, precision_pct=1.0)
    goals = [s["goal"] for s in r["steps"]]
    if goals[0] != "warmup" or goals[1:] != sorted(goals[1:]) or "ndr" not in goals:
        raise Fail(f"the warm-up, then NDR steps, then PDR: {goals}")
    for s in r["steps"]:
        for k in ("goal", "rate", "sent", "received", "loss", "loss_pct", "pass"):
            if k not in s:
                raise Fail(f"step without {k}: {s}")
        if s["pass"] != ndr.passes(s, 0.0 if s["goal"] == "ndr" else 0.5):
            raise Fail(f"step's verdict wrong for its goal: {s}")
    # PDR starts from the NDR trials' bounds: it bisects, never from max_rate again.
    pdr_rates = [s["rate"] for s in r["steps"] if s["goal"] == "pdr"]
    if 100000 in pdr_rates or len(pdr_rates) > 4:
        raise Fail(f"PDR did not reuse the NDR trials: {pdr_rates}")
    # A sink that passes everything: the warm-up and one trial, at the first rate.
    r = ndr.search(ndr.SimulatedSink(10 ** 9), 5000)
    if (r["ndr"], r["pdr"], len(r["steps"])) != (5000, 5000, 2):
        raise Fail(f"an unlimited sink: expected NDR = PDR = 5000 in two trials, got {r}")
    # A sink that passes nothing: 0, bounded.
    r = ndr.search(ndr.SimulatedSink(0), 5000)
    if r["ndr"] != 0 or r["pdr"] != 0 or len(r["steps"]) > 20:
        raise Fail(f"a dead sink: expected 0 in a bounded search, got {r['ndr']}, {r['pdr']}, {len(r['steps'])} steps")


def test_ndr_search_loss_below_pdr(t):
    """A sink that loses a few frames above some rate: NDR stops below it,
    PDR (0.5 %) goes on to the real limit."""
    sink = ndr.SimulatedSink(20000, noise=5, noise_from=8000)
    r = ndr.search(sink, 40000, pdr_pct=0.5, precision_pct=2.0)
    if not 8000 * 0.98 - 1 <= r["ndr"] < 8000:
        raise Fail(f"NDR {r['ndr']}: expected just below 8000 (5 frames lost from there)")
    if not 20000 * 0.98 - 1 <= r["pdr"] <= 20000 / 0.995 + 1:
        raise Fail(f"PDR {r['pdr']}: expected about 20000")
    if ndr.passes({"sent": 0, "received": 0}, 0.5):
        raise Fail("a trial that sent nothing passed")


def test_ndr_search_noisy_curve_exceed_ratio(t):
    """MLRsearch's exceed ratio on a noisy loss curve: at or below 100,000
    frames/s a trial loses a frame with probability 0.2, above it with
    0.8. With 21 s per load and an exceed ratio of 50 % the search must
    put NDR and PDR at the knee within the 1 % width for every seed; a
    search that takes one lossy trial as the verdict (exceed ratio 0)
    ends far below, one that tolerates 90 % lossy seconds ends above."""
    limit = 100000
    for seed in range(1, 6):
        sink = ndr.SimulatedSink(limit, noise=1, p_below=0.2, p_above=0.8, seed=seed)
        r = ndr.search(sink, 400000, pdr_pct=0.0001, precision_pct=1.0, duration_sum=21, exceed_ratio=0.5)
        for goal in ("ndr", "pdr"):
            if not limit * 0.99 - 1 <= r[goal] <= limit or not limit < r[goal + "_upper"] <= limit / 0.99 + 1:
                raise Fail(f"seed {seed}: {goal} {r[goal]} (upper bound {r[goal + '_upper']}): expected the knee at "
                           f"{limit} within 1 %; {len(r['steps'])} trials")
        # The bounds carry at least half the duration sum of their verdict.
        at = {x: [s for s in r["steps"] if s["rate"] == x and not s["warmup"]] for x in (r["ndr"], r["ndr_upper"])}
        if sum(s["pass"] for s in at[r["ndr"]]) < 11 or sum(not s["pass"] for s in at[r["ndr_upper"]]) < 11:
            raise Fail(f"seed {seed}: a bound decided on less than 11 of 21 s: "
                       f"{[(x, [s['pass'] for s in v]) for x, v in at.items()]}")
    low = ndr.search(ndr.SimulatedSink(limit, noise=1, p_below=0.2, p_above=0.8, seed=1), 400000,
                     precision_pct=1.0, duration_sum=21, exceed_ratio=0.0)
    high = ndr.search(ndr.SimulatedSink(limit, noise=1, p_below=0.2, p_above=0.8, seed=1), 400000,
                      precision_pct=1.0, duration_sum=21, exceed_ratio=0.9)
    if not low["ndr"] < limit * 0.9 or not high["ndr"] > limit:
        raise Fail(f"the exceed ratio does not steer the search: 0 -> {low['ndr']}, 0.9 -> {high['ndr']}")


def test_ndr_search_warmup_and_duration_sum(t):
    """The first trial runs at the maximum load and is not counted: a sink
    whose first trial loses frames (cold) still passes the maximum load in
    one more trial; without the warm-up that trial fails the load. The
    duration sum: a clean lower bound takes 11 lossless seconds of 21."""
    r = ndr.search(ndr.SimulatedSink(10 ** 6, cold=500), 50000, duration_sum=1)
    s0 = r["steps"][0]
    if (s0["rate"], s0["warmup"], s0["loss"]) != (50000, True, 500) or r["ndr"] != 50000 or len(r["steps"]) != 2:
        raise Fail(f"warm-up: expected a lossy uncounted first trial at 50000 and NDR 50000 in 2 trials, got "
                   f"NDR {r['ndr']}, {[(s['rate'], s['warmup'], s['loss']) for s in r['steps']]}")
    r = ndr.search(ndr.SimulatedSink(10 ** 6, cold=500), 50000, duration_sum=1, warmup=False)
    if r["ndr"] == 50000:
        raise Fail("without the warm-up the cold first trial must fail the maximum load")
    r = ndr.search(ndr.SimulatedSink(10 ** 6, cold=500), 50000, duration_sum=21)
    counted = [s for s in r["steps"] if not s["warmup"]]
    if r["ndr"] != 50000 or len(counted) != 11 or not all(s["pass"] for s in counted):
        raise Fail(f"duration sum 21, exceed ratio 50 %: expected 11 lossless counted trials at 50000, got "
                   f"{[(s['rate'], s['pass']) for s in counted]}")
    # classify() itself: 10 bad + 11 good seconds of 21 is a lower bound, 11 bad an upper one, 10 bad undecided.
    one = {"sent": 10, "received": 10, "duration": 1.0}
    lossy = {"sent": 10, "received": 9, "duration": 1.0}
    for trials, want in (([lossy] * 10 + [one] * 11, "lower"), ([lossy] * 11, "upper"), ([lossy] * 10, None),
                         ([one] * 10, None), ([one] * 11, "lower")):
        got = ndr.classify(trials, 0.0, 21, 0.5)
        if got != want:
            raise Fail(f"classify({sum(1 for x in trials if x is lossy)} lossy + {sum(1 for x in trials if x is one)} "
                       f"clean s of 21, 50 %): {got}, expected {want}")


def test_ndr_report_table_and_matrix(t):
    import matrix

    rows = [{"test": "ndr", "status": "ok", "backend": "tap", "column": "base", "size": z, "mode": "macswap",
             "trial": 2, "pdr": 0.5, "ndr_pps": p, "pdr_pps": p + 100, "ndr_mbps": p * 512 / 1e6,
             "pdr_mbps": (p + 100) * 512 / 1e6, "ndr_trials": 7, "ndr_check": {"closes": True}}
            for z, p in (("64", 15625), ("imix", 9000), ("1518", 5000))]
    text = "\n".join(ndr.rfc2544_table(rows, ["base"]))
    for want in ("RFC 2544 throughput (tap; mode macswap", "| 64 | NDR 0.0156 Mpps", "| imix | NDR 0.0090 Mpps"):
        if want not in text:
            raise Fail(f"RFC 2544 table lacks {want!r}:\n{text}")
    if text.index("| 64 |") > text.index("| 1518 |") or text.index("| 1518 |") > text.index("| imix |"):
        raise Fail(f"rows not in frame-size order:\n{text}")
    # Repetitions: the median and the spread (lowest-highest), n.
    reps = [dict(rows[0], ndr_pps=p, pdr_pps=p + 50, ndr_mbps=p * 512 / 1e6, pdr_mbps=(p + 50) * 512 / 1e6)
            for p in (15000, 16000, 9000)]
    text = "\n".join(ndr.rfc2544_table(reps, ["base"]))
    if "| 64 | NDR 0.0150 Mpps" not in text or "(n=3, NDR 0.0090-0.0160 PDR 0.0091-0.0160 Mpps" not in text:
        raise Fail(f"three repetitions: expected the median 0.0150 and the spread 0.0090-0.0160:\n{text}")
    # ndr.repeat: the searches of one boot count each; the ratio table puts
    # each appliance column against Linux of the same accelerator, and a
    # failed Linux column says so instead of a figure.
    one = dict(rows[0], ndr_searches=[{"ndr": p, "pdr": p + 10, "trials": 9} for p in (300000, 310000, 290000)],
               kvm_exits_per_mframe=1234.0)
    rows2 = [dict(one, column="base@kvm"), dict(one, column="base@tcg", kvm_exits_per_mframe=None),
             dict(rows[0], column="linux@tcg", ndr_pps=100000, pdr_pps=100000),
             {"test": "ndr", "status": "failed", "backend": "tap", "column": "linux@kvm", "size": "64",
              "error": "guest not ready for the search"}]
    text = "\n".join(ndr.rfc2544_table(rows2, ["base@kvm", "base@tcg", "linux@kvm", "linux@tcg"]))
    # vnetbench passes the matrix's names (base, linux) while the rows of a
    # run over two accelerators are named base@kvm ...: the same tables.
    if "\n".join(ndr.rfc2544_table(rows2, ["base", "linux"])) != text:
        raise Fail(f"RFC 2544 table given the matrix's column names (base, linux) differs from the one given the "
                   f"rows' names:\n{chr(10).join(ndr.rfc2544_table(rows2, ['base', 'linux']))}")
    for want in ("NDR 0.3000 Mpps", "(n=3, NDR 0.2900-0.3100", "| 64 | base@tcg | 300,000 | 300,010 | 100,000 | 3.00 | "
                 "not run | - | - |", "| 64 | base@kvm | 300,000 | 300,010 | failed: guest not ready for the search | - | "
                 "not run | - | 1,234 |"):
        if want not in text:
            raise Fail(f"RFC 2544 / ratio table lacks {want!r}:\n{text}")
    import guests

    settings, defs = matrix.parse_file(os.path.join(TOP, "host", "bench", "matrices", "ndr.txt"))
    m = matrix.Matrix(settings, defs, lambda v: None, list(guests.KINDS))
    runs = m.runs()
    sizes = ["64", "128", "256", "512", "1024", "1518", "imix"]
    cells = sorted((r.column, r.backend, r.params["size"]) for r in runs)
    want = sorted((c, b, z) for c in ("base", "pkt", "linux") for b in ("tap", "vhost-user") for z in sizes)
    if cells != want or m.tests != ["ndr"]:
        raise Fail(f"matrices/ndr.txt: expected one ndr run per frame size, column (base, pkt, linux) and "
                   f"backend (tap, vhost-user), got {m.tests} {cells}")


def test_ndr_pkt2011_matrix_expands(t):
    import matrix

    settings, defs = matrix.parse_file(os.path.join(TOP, "host", "bench", "matrices", "pkt2011.txt"))
    m = matrix.Matrix(settings, defs, lambda v: None, ("vnetlab",))
    runs = m.runs()
    cols = sorted({r.column for r in runs})
    want = sorted(f"{r}-{k}" for r in ("base", "v0", "v1", "v2", "v3") for k in ("every", "burst"))
    if cols != want or sorted({r.test for r in runs}) != ["ndr", "pkt_txonly"] or len(runs) != 60:
        raise Fail(f"matrices/pkt2011.txt: expected 10 columns x (pkt_txonly, ndr) x 3, got {len(runs)} runs, "
                   f"{cols}")


def test_ndr_harness_runs_on_tap(t):
    """tests = pkt_txonly ndr through vnetbench on a tap, a short MLRsearch
    (2 s per load) and latency trials at 0, 10 and 90 % of the PDR
    (pacegen, the default, stamps every frame): the rows are ok, every
    trial's count closes at both ends (a trial whose marker the guest never saw fails the
    row: the 2026-12-04 "RX stall on tap", docs/packet-path.md), report.md
    has the RFC 2544 table."""
    import json
    import subprocess

    from lib import Skip

    if os.geteuid() != 0:
        raise Skip("needs root for the harness's network namespace with a tap")
    # Kept in build/ for a look after a failure.
    d = os.path.join(BUILD, "test-ndr-harness")
    subprocess.run(["rm", "-rf", d], check=False)
    out = os.path.join(d, "res")
    r = subprocess.run([sys.executable, os.path.join(TOP, "host", "bench", "vnetbench.py"), "--matrix",
                        os.path.join(TOP, "host", "bench", "matrices", "ndr.txt"), "--tests", "pkt_txonly,ndr",
                        "--variants", "base", "--guests", "vnetlab", "--backends", "tap",
                        "--ndr-sizes", "64", "--pkt-sizes", "64", "--ndr-trial", "1", "--ndr-max-rate", "4000",
                        "--ndr-latency", "0 10 90", "--ndr-duration-sum", "2", "--seconds", "2", "--out", out], cwd=TOP, capture_output=True, text=True, timeout=600)
    if r.returncode:
        raise Fail(f"vnetbench exited {r.returncode}:\n{(r.stdout + r.stderr)[-2000:]}")
    rows = [json.loads(l) for l in open(os.path.join(out, "results.jsonl"))]
    report = open(os.path.join(out, "report.md")).read()
    by = {row["test"]: row for row in rows}
    if len(rows) != 2 or sorted(by) != ["ndr", "pkt_txonly"] or any(row["status"] != "ok" for row in rows):
        raise Fail(f"expected an ok pkt_txonly and an ok ndr row: {[(x['test'], x['status'], x.get('error')) for x in rows]}")
    tx = by["pkt_txonly"]
    if tx["frames"] != tx["peer_frames"] + tx["peer_sock_drops"] or not tx["pps"] > 0:
        raise Fail(f"pkt_txonly: guest sent {tx['frames']}, the peer counted {tx['peer_frames']} + "
                   f"{tx['peer_sock_drops']} dropped")
    n = by["ndr"]
    # Under TCG (accel auto here) no exit counters, and the rows say so.
    from lib import check_kvm_columns
    check_kvm_columns(tx, "frame")
    check_kvm_columns(n, "frame")
    if any(k.startswith("kvm_") for s in n["ndr_steps"] for k in s):
        raise Fail(f"ndr under {n['accel']}: a trial carries kvm_* figures: {n['ndr_steps']}")
    if not n["ndr_check"]["closes"] or not n["ndr_steps"] or not 0 < n["ndr_pps"] <= 4000:
        raise Fail(f"ndr row: counts must close and NDR be in (0, 4000]: {n['ndr_check']} ndr {n['ndr_pps']}")
    # Every trial, the latency trials included, has the guest's PKT_TRIAL
    # line and closes at both ends: the frames add up into and out of the
    # guest.
    lat = n.get("lat_steps") or []
    c = n["ndr_check"]
    if len(lat) != 3 or c["trials_unmarked"] or c["trials_closed"] != len(n["ndr_steps"]) + len(lat):
        raise Fail(f"ndr: {c['trials_closed']} closed, {c['trials_unmarked']} unmarked of "
                   f"{len(n['ndr_steps'])} + {len(lat)} (latency) trials: "
                   f"{[(s['rate'], s.get('guest_received'), s.get('closes')) for s in n['ndr_steps'] + lat]}")
    if "RFC 2544 throughput (tap; mode macswap" not in report or "| 64 | NDR " not in report:
        raise Fail("report.md has no RFC 2544 table")


def test_ndr_tap_200kpps_known_host_limit(t):
    """Issue 38's tap goal, an NDR above 200,000 frames/s at 64 B, kept
    visible: a search from 200,000 frames/s (width 50 %, one trial per
    load) on tap, the appliance's `pkt` build and the no-guest reference
    (testpmd's tap PMD in the guest's place) in one run. Where both stop
    below 200,000 it is this host's tap path (QEMU's tap reads or the tap
    PMD's, one syscall a frame, on 2 CPUs beside a polling vCPU and the
    generator; docs/results/ndr-mlrsearch.md): a known fault (XFAIL).
    Where the appliance reaches it, the goal is met (fixed: make this a
    real check); where only the reference does, the appliance is the
    limit: a failure."""
    import json
    import subprocess

    from lib import KnownFault, Skip

    if os.geteuid() != 0:
        raise Skip("needs root for the harness's network namespace with a tap")
    goal = 200000
    out = os.path.join(BUILD, "test-ndr-tap-goal")
    subprocess.run(["rm", "-rf", out], check=False)
    r = subprocess.run([sys.executable, os.path.join(TOP, "host", "bench", "vnetbench.py"), "--matrix",
                        os.path.join(TOP, "host", "bench", "matrices", "ndr.txt"), "--variants", "pkt",
                        "--guests", "vnetlab,reference", "--backends", "tap", "--ndr-sizes", "64",
                        "--ndr-trial", "1", "--ndr-duration-sum", "1", "--ndr-max-rate", str(goal),
                        "--ndr-precision", "50", "--accel", "tcg", "--out", out], cwd=TOP, capture_output=True, text=True, timeout=600)
    if r.returncode:
        raise Fail(f"vnetbench exited {r.returncode}:\n{(r.stdout + r.stderr)[-2000:]}")
    by = {row["column"]: row for row in map(json.loads, open(os.path.join(out, "results.jsonl")))}
    if sorted(by) != ["pkt", "reference"] or any(x["status"] != "ok" or not x["ndr_check"]["closes"]
                                                 for x in by.values()):
        raise Fail(f"expected ok rows pkt and reference whose counts close: "
                   f"{[(k, x['status'], x.get('error'), x.get('ndr_check')) for k, x in by.items()]}")
    app, ref = by["pkt"]["ndr_pps"], by["reference"]["ndr_pps"]
    c = by["pkt"]["ndr_check"]
    if c["trials_unmarked"]:
        raise Fail(f"the appliance left {c['trials_unmarked']} trial(s) without its PKT_TRIAL line: {c}")
    if app >= goal:
        raise Fail(f"fixed: the appliance's tap NDR reached {app:,} frames/s (reference {ref:,}): turn this "
                   "known fault into a real check")
    if ref >= goal:
        raise Fail(f"the no-guest reference takes {ref:,} frames/s on this tap with no loss, the appliance only "
                   f"{app:,}: the appliance, not the host, is the limit")
    def said(row):
        top = [s["received"] for s in row["ndr_steps"] if s["rate"] == goal and not s["warmup"]]
        return (f"NDR between {row['ndr_pps']:,} and {row['ndr_searches'][0]['ndr_upper'] or goal:,}, "
                f"{max(top or [0]):,} of {goal:,} back at {goal:,} frames/s")

    raise KnownFault(f"issue 38: tap NDR at 64 B below {goal:,} frames/s (TCG): the appliance {said(by['pkt'])}, "
                     f"the no-guest reference {said(by['reference'])}: this host's tap path")


def test_ndr_latency_table_rtt_and_key(t):
    """The packet-level latency pieces without a guest: the peer's round-trip
    percentiles, report.md's table, and the ndr.latency key's checks."""
    import guests
    import matrix
    from procs import BenchError

    sys.path.insert(0, os.path.join(TOP, "tests", "tools"))
    import pktpeer

    rtt = pktpeer.Rtt(200)
    for i in range(100):
        rtt.stamps[i] = 1000
    for i in range(100):
        rtt.add(i, 1000 + (i + 1) * 10)  # round trips of 10, 20, ... 1000 ns
    rtt.add(5, 99999)  # a duplicate: no second round trip
    rtt.add(150, 5000)  # never sent: not timed
    got = rtt.report()
    want = {"n": 100, "p50_ns": 510, "p90_ns": 910, "p99_ns": 1000, "p999_ns": 1000, "max_ns": 1000, "mean_ns": 505}
    if got != want:
        raise Fail(f"Rtt.report(): {got}, expected {want}")
    rows = [{"test": "ndr", "status": "ok", "backend": "tap", "column": c, "size": "64",
             "lat_steps": [{"load": 50, "rate": r, "offered_pps": r - 1, "sent": 1000, "received": 990, "lat_n": 990,
                            "lat_p50_ns": 40000 * k, "lat_p90_ns": 50000 * k, "lat_p99_ns": 90000 * k,
                            "lat_p999_ns": 95000 * k, "lat_max_ns": 99000 * k}]}
            for c, r, k in (("base", 5000, 1), ("linux", 2500, 3))]
    text = "\n".join(ndr.latency_table(rows, ["base", "linux"]))
    for want in ("| base | 50 | 5,000 | 4,999 | 1.00 | 40.0 | 50.0 | 90.0 | 95.0 | 99.0 | 1 |",
                 "| linux | 50 | 2,500 | 2,499 | 1.00 | 120.0 | 150.0 | 270.0 | 285.0 | 297.0 | 1 |"):
        if want not in text:
            raise Fail(f"latency table lacks {want!r}:\n{text}")
    # A run over two accelerators names its rows base@kvm ...; vnetbench
    # still passes the matrix's names.
    acc = [dict(r, column=r["column"] + "@kvm") for r in rows]
    text = "\n".join(ndr.latency_table(acc, ["base", "linux"]))
    if "| base@kvm | 50 | 5,000 |" not in text or "| linux@kvm | 50 | 2,500 |" not in text:
        raise Fail(f"latency table of base@kvm and linux@kvm rows given the names base, linux:\n{text}")
    if ndr.latency_table([dict(rows[0], lat_steps=None)], ["base"]):
        raise Fail("a table without latency trials")
    base = {"tests": "ndr", "guests": "vnetlab", "backends": "tap"}
    m = matrix.Matrix(dict(base, **{"ndr.latency": "90 10"}), {"default": ""}, lambda v: None, list(guests.KINDS))
    if {str(r.params.get("latency")) for r in m.runs()} != {"[10, 90]"}:
        raise Fail(f"ndr.latency 90 10: runs carry {[r.params.get('latency') for r in m.runs()]}")
    m = matrix.Matrix(dict(base, **{"ndr.latency": "50 0"}), {"default": ""}, lambda v: None, list(guests.KINDS))
    if {str(r.params.get("latency")) for r in m.runs()} != {"[0, 50]"}:
        raise Fail(f"ndr.latency 50 0 (0: the stream alone): runs carry {[r.params.get('latency') for r in m.runs()]}")
    if [ndr.lat_rate(200000, p) for p in (0, 10)] != [1000, 20000] or ndr.lat_rate(5000, 0) != 50:
        raise Fail("ndr.lat_rate: 0 % is LAT0_PPS or 1 % of the PDR, the lower; 10 % of 200000 is 20000")
    for bad in ("0 0", "-5", "150", "fast", "10 10"):
        try:
            matrix.Matrix(dict(base, **{"ndr.latency": bad}), {"default": ""}, lambda v: None, list(guests.KINDS))
        except BenchError:
            continue
        raise Fail(f"ndr.latency {bad!r} accepted")


def test_ndr_vhost_user_closes_with_testpmd_drops(t):
    """On vhost-user what is lost into the guest is testpmd's (a vhost-user
    port has no queue): the run closes only with its TX-dropped counts."""
    base = {"peer_sent": 1000, "guest_received": 900, "tap_dropped": 0, "guest_forwarded": 900, "peer_back": 895,
            "peer_sock_drops": 0, "markers": 3}
    for fwd, linux, want in (({0: {"TX-dropped": 100}, 1: {"TX-dropped": 5}}, False, True),
                             ({0: {"TX-dropped": 99}, 1: {"TX-dropped": 5}}, False, False),
                             ({0: {"TX-dropped": 100}, 1: {"TX-dropped": 0}}, False, False),
                             ({0: {"TX-dropped": 103}, 1: {"TX-dropped": 2}}, True, True),
                             ({}, False, None)):
        check = dict(base, closes=None)
        ndr.close_at_switch(check, fwd, linux)
        if check["closes"] is not want or check["switch_counted"] != bool(fwd):
            raise Fail(f"close_at_switch({fwd}, linux={linux}): closes {check['closes']}, expected {want}")


def test_ndr_vupacegen_steps_and_reference_check(t):
    """The vhost-user generator's and the reference column's pieces without
    a VM: vupacegen's trial line becomes a step in peer_trial()'s terms
    (offered = sent + refused, the refused frames the loss into the guest),
    a step closes against the guest's PKT_TRIAL line, the reference's run
    closes with its testpmd's forward statistics, ndr.generator auto picks
    vupacegen on vhost-user and pacegen on tap, and the columns a generator
    cannot search are skipped with the reason."""
    import guests
    import matrix
    from procs import BenchError

    line = {"trial": 3, "offered": 2000, "sent": 1900, "refused": 100, "back": 1890, "back_other": 1,
            "elapsed_ns": 1000000000, "marker": True, "marker_s": 0.51, "port_imissed": 0, "nomem": 0,
            "rtt": {"n": 1890, "p50_ns": 9000}}
    st = ndr.vu_step(line, 2000)
    want = {"sent": 2000, "received": 1890, "tap_tx_dropped": 100, "peer_sock_drops": 0, "offered_pps": 2000.0,
            "generator_limited": False, "marker_sent": True, "rtt": {"n": 1890, "p50_ns": 9000}}
    if {k: st.get(k) for k in want} != want:
        raise Fail(f"vu_step: {st}, expected {want}")
    if not ndr.vu_step(dict(line, elapsed_ns=2000000000), 2000)["generator_limited"]:
        raise Fail("vu_step: 2000 frames in 2 s asked at 2000 frames/s is the generator's limit")
    for bad in (dict(line, sent=1901), {k: v for k, v in line.items() if k != "back"}):
        try:
            ndr.vu_step(bad, 2000)
        except BenchError:
            continue
        raise Fail(f"vu_step accepted {bad}")

    g = 'PKT_TRIAL {"trial":3,"seq_frames":1900,"seq_gaps":100,"seq_reorder":0,"frames":1890,"rx_other":0,"pend":0}'
    # 1900 received + 100 refused = 2000 offered; forwarded + pend = 1890 back.
    for guest_line, closes in ((g, True), (g.replace('"pend":0', '"pend":1'), False),
                               (g.replace('"seq_frames":1900', '"seq_frames":1899'), False), (None, None)):
        s = ndr.guest_close(dict(st), FakeBoot([guest_line] if guest_line else []), 3, True)
        if s["closes"] is not closes:
            raise Fail(f"guest_close with {guest_line}: closes {s['closes']}, expected {closes}")
    # (sent, backend drops, markers, the consumer's port 0, back, socket drops)
    fwd = {"RX-packets": 1003, "TX-packets": 1000, "TX-dropped": 3}
    for args, want in (((1000, 0, 3, fwd, 997, 0), True),  # 3 markers reflected, 3 frames its port refused
                       ((1000, 0, 3, dict(fwd, **{"TX-packets": 1003, "TX-dropped": 0}), 1000, 0), True),
                       ((1010, 10, 3, fwd, 997, 0), True),  # 10 dropped at the backend into it
                       ((1010, 9, 3, fwd, 997, 0), False),
                       ((1000, 0, 3, dict(fwd, **{"TX-packets": 1003, "TX-dropped": 0}), 999, 0), False),
                       ((1000, 0, 3, dict(fwd, **{"TX-dropped": 0}), 997, 0), False)):
        c = ndr.ref_check(*args)
        if c["closes"] is not want:
            raise Fail(f"ref_check{args}: closes {c['closes']}, expected {want}: {c}")
    try:
        ndr.ref_check(1000, 0, 3, {}, 1000, 0)
        raise Fail("ref_check without the consumer's statistics closed")
    except BenchError:
        pass

    base = {"tests": "ndr", "guests": "vnetlab reference", "backends": "tap vhost-user", "ndr.sizes": "64 imix"}
    m = matrix.Matrix(base, {"default": ""}, lambda v: None, list(guests.KINDS))
    got = sorted({(r.backend, r.params["size"], r.params.get("generator", "python")) for r in m.runs()})
    want = [("tap", "64", "pacegen"), ("tap", "imix", "python"), ("vhost-user", "64", "vupacegen"),
            ("vhost-user", "imix", "python")]
    if got != want or sorted({r.column for r in m.runs()}) != ["default", "reference"]:
        raise Fail(f"ndr.generator auto: expected {want} in columns default and reference, got {got}")
    for bad in ({"ndr.generator": "vupacegen"}, {"ndr.generator": "vupacegen", "backends": "vhost-user",
                                                 "ndr.sizes": "64 imix"}):
        try:
            matrix.Matrix(dict(base, **bad), {"default": ""}, lambda v: None, list(guests.KINDS))
        except BenchError as e:
            if "ndr" not in str(e):
                raise Fail(f"{bad}: refused without naming the key: {e}")
            continue
        raise Fail(f"{bad} accepted")
    m = matrix.Matrix(dict(base, backends="vhost-user", **{"ndr.generator": "vupacegen", "ndr.sizes": "64"}),
                      {"default": ""}, lambda v: None, list(guests.KINDS))
    if {r.params.get("generator") for r in m.runs()} != {"vupacegen"}:
        raise Fail(f"ndr.generator = vupacegen: {[r.params for r in m.runs()]}")

    class Backend:
        def __init__(self, name, opts=None, queues=1):
            self.name, self.opts, self.queues = name, opts or {}, queues

    cases = ((("vupacegen", Backend("vhost-user"), False), None), (("vupacegen", Backend("vhost-user"), True), None),
             (("pacegen", Backend("tap"), True), None), (("pacegen", Backend("tap"), False), None),
             (("vupacegen", Backend("tap"), False), "vhost-user"),
             (("vupacegen", Backend("vhost-user", queues=2), False), "one queue pair"),
             (("pacegen", Backend("vhost-user"), True), "vupacegen"),
             (("python", Backend("tap"), True), "pacegen (tap)"),
             (("pacegen", Backend("tap", {"tx": "timer"}), True), "no backend options"))
    for args, want in cases:
        why = ndr.unsupported(*args)
        if (why is None) != (want is None) or (want and want not in why):
            raise Fail(f"ndr.unsupported{args[0], args[1].name, args[2]}: {why!r}, expected {want!r}")
    run = matrix.Run(0, "reference", None, "ndr", "tap", {}, 0, "reference")
    if not ndr.claims(run) or guests.Reference(None, None).supports("ndr", Backend("tap")):
        raise Fail("the reference column's ndr run: ndr.py claims it, the guest kind supports it")


def test_ndr_harness_vupacegen_and_reference(t):
    """The search on vhost-user with vupacegen on the guest's socket (no
    testpmd switch, no tap: ndr.generator auto), a short MLRsearch and
    latency trials at 0 and 50 % of the PDR timed by vupacegen: the row
    is ok, finds an NDR, every trial carries the guest's PKT_TRIAL line
    and closes at both ends; the no-guest reference column (guests =
    reference: testpmd macswap where the guest would be) searches with the
    same generator on vhost-user and with pacegen on tap, each a row that
    closes with its testpmd's counts, and report.md's ratio table divides
    the appliance's NDR by the reference's ("x reference" filled)."""
    import json
    import subprocess

    from lib import Skip

    if os.geteuid() != 0:
        raise Skip("needs root for the harness's network namespace and DPDK's private /run")
    d = os.path.join(BUILD, "test-ndr-vupacegen")
    subprocess.run(["rm", "-rf", d], check=False)
    rows, reports = [], []
    for backends, guests_ in (("vhost-user", "vnetlab,reference"), ("tap", "reference")):
        out = os.path.join(d, backends)
        r = subprocess.run([sys.executable, os.path.join(TOP, "host", "bench", "vnetbench.py"), "--matrix",
                            os.path.join(TOP, "host", "bench", "matrices", "ndr.txt"), "--variants", "base",
                            "--guests", guests_, "--backends", backends, "--ndr-sizes", "64", "--ndr-trial", "1",
                            "--ndr-max-rate", "4000", "--ndr-latency", "0 50", "--ndr-duration-sum", "2",
                            "--out", out], cwd=TOP, capture_output=True, text=True, timeout=600)
        if r.returncode:
            raise Fail(f"vnetbench ({backends}) exited {r.returncode}:\n{(r.stdout + r.stderr)[-2000:]}")
        rows += [json.loads(l) for l in open(os.path.join(out, "results.jsonl"))]
        reports.append(open(os.path.join(out, "report.md")).read())
    by = {(row["column"], row["backend"]): row for row in rows}
    want = [("base", "vhost-user"), ("reference", "tap"), ("reference", "vhost-user")]
    if sorted(by) != want or any(row["status"] != "ok" for row in rows):
        raise Fail(f"expected ok rows {want}: {[(x['column'], x['backend'], x['status'], x.get('error')) for x in rows]}")
    n = by[("base", "vhost-user")]
    c, lat = n["ndr_check"], n.get("lat_steps") or []
    if n["generator"] != "vupacegen" or not 0 < n["ndr_pps"] <= 4000 or not c["closes"]:
        raise Fail(f"vhost-user: generator {n['generator']}, NDR {n['ndr_pps']}, counts {c}")
    if len(lat) != 2 or c["trials_unmarked"] or c["trials_closed"] != len(n["ndr_steps"]) + len(lat):
        raise Fail(f"vhost-user: {c['trials_closed']} closed, {c['trials_unmarked']} unmarked of "
                   f"{len(n['ndr_steps'])} + {len(lat)} (latency) trials: "
                   f"{[(s['rate'], s.get('guest_received'), s.get('closes')) for s in n['ndr_steps'] + lat]}")
    if any(not s.get("lat_n") for s in lat):
        raise Fail(f"vhost-user latency trials: vupacegen timed no round trip: {lat}")
    for b, gen in (("tap", "pacegen"), ("vhost-user", "vupacegen")):
        ref = by[("reference", b)]
        if ref["generator"] != gen or not ref["ndr_pps"] > 0 or not ref["ndr_check"]["closes"]:
            raise Fail(f"reference on {b}: generator {ref['generator']} (want {gen}), NDR {ref['ndr_pps']}, "
                       f"counts {ref['ndr_check']}")
    line = next((l for l in reports[0].splitlines() if l.startswith("| 64 | base |")), "")
    cells = [x.strip() for x in line.split("|")]
    ref_ndr = by[("reference", "vhost-user")]["ndr_pps"]
    if len(cells) < 9 or cells[7] != f"{ref_ndr:,}" or cells[8] != f"{n['ndr_pps'] / ref_ndr:.2f}":
        raise Fail(f"report.md's ratio table: expected the reference's NDR {ref_ndr:,} and x reference; got {line!r}")


def test_ndr_pacegen_receiver_step(t):
    """A tap trial whose frames pacegen --back counted (pktpeer.py swap's
    line, the peer faked): a duplicate does not hide a lost frame (received
    = the unique numbers back, so 999 of 1000 with one copy twice fails the
    NDR goal), the step closes with every frame back (the guest forwarded
    1000), the ring's drops are the socket's, and a marker pacegen could not
    send leaves the trial unmarked instead of waiting for the guest."""
    import json
    import subprocess

    class Backend:
        tap = "vnbtap0"

        def wrap(self, argv):
            return argv

    back = {"frames": 1000, "unique": 999, "dups": 1, "lost": 1, "seq_gaps": 1, "seq_reorder": 0, "last_seq": 999,
            "out_of_run": 0, "other": 2, "sock_drops": 0}
    line = {"sent": 1000, "tap_tx_dropped": 0, "send_s": 1.0, "generator": "pacegen", "receiver": "pacegen",
            "gen_refused": 0, "gen_max_lag_ns": 5000, "marker_s": 0.5, "marker_sent": True, "back": back}
    guest = 'PKT_TRIAL {"trial":0,"seq_frames":1000,"seq_gaps":0,"seq_reorder":0,"frames":1000,"rx_other":0,"pend":0}'
    real = ndr.procs.run
    try:
        for res, lines, want in (
                (line, [guest], {"received": 999, "back_frames": 1000, "back_dups": 1, "closes": True}),
                (dict(line, back=dict(back, sock_drops=3, frames=997, unique=996)), [guest],
                 {"received": 996, "peer_sock_drops": 3, "closes": True}),
                (dict(line, back=dict(back, frames=999)), [guest], {"received": 998, "closes": False}),
                (dict(line, marker_sent=False), [guest], {"closes": None, "marker_sent": False})):
            ndr.procs.run = lambda argv, timeout, check, res=res: subprocess.CompletedProcess(
                argv, 0, json.dumps(res), "")
            st = ndr.peer_trial(Backend(), FakeBoot(lines), "52:54:00:12:34:56", 64, "macswap", 1000, 1, [],
                                gen="pacegen")
            if {k: st.get(k) for k in want} != want:
                raise Fail(f"peer_trial with pacegen's count {res['back']} (marker sent {res['marker_sent']}): "
                           f"{ {k: st.get(k) for k in want} }, expected {want}")
            if ndr.passes(st, 0.0):
                raise Fail(f"a trial with {st['sent'] - st['received']} numbers not back passed the NDR goal")
    finally:
        ndr.procs.run = real
