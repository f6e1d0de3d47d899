"""The host generators and the reference column (host/bench/hostgen.py):
testpmd's statistics parsed exactly, the count rule, the report's ratio
table, host/bench/matrices/hostgen.txt, a missing dpdk-testpmd named with
its Debian package, and (as root, with dpdk-testpmd) the matrix run end
to end: every frame testpmd sent counted by the appliance's rxonly, the
PVP loop closing both ways, the reference rows positive."""

import json
import os
import subprocess
import sys
import tempfile

from lib import TOP, Fail, Skip, expect_refused

sys.path.insert(0, os.path.join(TOP, "host", "bench"))

import hostgen  # noqa: E402
from procs import BenchError  # noqa: E402

# testpmd 22.11's layout (the blocks `stop` and `show port stats all` print).
STOP = """testpmd> stop
Telling cores to stop...
Waiting for lcores to finish...

  ---------------------- Forward statistics for port 0  ----------------------
  RX-packets: 12             RX-dropped: 3             RX-total: 15
  TX-packets: 157280         TX-dropped: 532768800     TX-total: 532926080
  ----------------------------------------------------------------------------

  ---------------------- Forward statistics for port 1  ----------------------
  RX-packets: 7              RX-dropped: 0             RX-total: 7
  TX-packets: 0              TX-dropped: 0             TX-total: 0
  ----------------------------------------------------------------------------

  +++++++++++++++ Accumulated forward statistics for all ports+++++++++++++++
  RX-packets: 19             RX-dropped: 3             RX-total: 22
  TX-packets: 157280         TX-dropped: 532768800     TX-total: 532926080
  ++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++

Done.
""".splitlines()

SHOW = """testpmd> show port stats all

  ######################## NIC statistics for port 0  ########################
  RX-packets: 61440      RX-missed: 5          RX-bytes:  3686400
  RX-errors: 2
  RX-nombuf:  0
  TX-packets: 127296     TX-errors: 0          TX-bytes:  7637760

  Throughput (since last show)
  Rx-pps:        19010          Rx-bps:      9125064
  Tx-pps:        30841          Tx-bps:     14803728
  ############################################################################
""".splitlines()


def test_hostgen_parse_forward_stats(t):
    got = hostgen.parse_forward_stats(STOP)
    want0 = {"RX-packets": 12, "RX-dropped": 3, "RX-total": 15, "TX-packets": 157280, "TX-dropped": 532768800,
             "TX-total": 532926080}
    if got.get(0) != want0 or got.get(1, {}).get("RX-packets") != 7 or got.get("all", {}).get("RX-packets") != 19:
        raise Fail(f"forward statistics parsed as {got}")
    # Two stops: the last block of each port counts.
    second = [l.replace("157280", "99") for l in STOP]
    if hostgen.parse_forward_stats(STOP + second)[0]["TX-packets"] != 99:
        raise Fail("the last stop's statistics must win")
    if hostgen.parse_forward_stats(["testpmd> stop", "Packet forwarding not started"]) != {}:
        raise Fail("no block: nothing parsed")


def test_hostgen_parse_port_stats(t):
    got = hostgen.parse_port_stats(SHOW)
    p = got.get(0, {})
    want = {"RX-packets": 61440, "RX-missed": 5, "RX-errors": 2, "TX-packets": 127296, "Rx-pps": 19010,
            "Tx-pps": 30841, "Tx-bps": 14803728}
    if any(p.get(k) != v for k, v in want.items()):
        raise Fail(f"port statistics parsed as {p}, expected at least {want}")
    # Lines outside a block (the forward statistics) are not port figures.
    if hostgen.parse_port_stats(STOP) != {}:
        raise Fail("forward statistics read as port statistics")


def test_hostgen_count_rule(t):
    class B:
        def __init__(self, name):
            self.name = name

    tap, vu = B("tap"), B("vhost-user")
    cases = [(vu, 0, True), (vu, 1, False), (vu, -1, False), (tap, 0, True), (tap, hostgen.AF_PACKET_RING, True),
             (tap, hostgen.AF_PACKET_RING + 1, False), (tap, -1, False)]
    for b, n, want in cases:
        if hostgen.closes(b, n) != want:
            raise Fail(f"closes({b.name}, {n}) should be {want}")


def test_hostgen_reference_table(t):
    rows = [
        dict(status="ok", test="pkt_rxonly", generator="testpmd", backend="vhost-user", size="64", column=c, pps=v,
             closes=True)
        for c, v in (("default", 900000), ("default", 800000), ("default", 1000000), ("reference", 10000000))]
    rows.append(dict(status="ok", test="pkt_txonly", generator="python", backend="tap", size="64", column="default",
                     pps=5, closes=True))
    lines = hostgen.reference_table(rows, ["default", "reference"])
    want = "| pkt_rxonly | vhost-user | 64 | default | 900,000 | 10,000,000 | 0.09 | close |"
    if want not in lines or any("pkt_txonly" in l for l in lines):
        raise Fail("reference table:\n" + "\n".join(lines))
    if hostgen.reference_table([r for r in rows if r["column"] != "reference"], ["default"]) != []:
        raise Fail("no reference rows: no table")
    # A run over two accelerators names its rows default@kvm ..., each
    # against the reference of its accelerator (vnetbench still passes the
    # matrix's names).
    acc = [dict(r, column=f"{r['column']}@{a}", pps=r["pps"] * k) for r in rows for a, k in (("kvm", 2), ("tcg", 1))]
    lines = hostgen.reference_table(acc, ["default", "reference"])
    for want in ("| pkt_rxonly | vhost-user | 64 | default@kvm | 1,800,000 | 20,000,000 | 0.09 | close |",
                 "| pkt_rxonly | vhost-user | 64 | default@tcg | 900,000 | 10,000,000 | 0.09 | close |"):
        if want not in lines:
            raise Fail(f"reference table of @kvm/@tcg rows lacks {want!r}:\n" + "\n".join(lines))


def test_hostgen_matrix_expands(t):
    import matrix

    settings, defs = matrix.parse_file(os.path.join(TOP, "host", "bench", "matrices", "hostgen.txt"))
    m = matrix.Matrix(settings, defs, lambda v: "", ("vnetlab", "reference"))
    runs = m.runs()
    cells = sorted((r.column, r.test, r.backend) for r in runs)
    want = sorted((c, tt, b) for c in ("default", "reference") for tt in ("pkt_rxonly", "pkt_txonly", "pkt_macswap")
                  for b in ("tap", "vhost-user"))
    if cells != want or any(r.params.get("generator") != "testpmd" for r in runs):
        raise Fail(f"matrices/hostgen.txt: expected {want} with generator testpmd, got {cells}")
    settings["pkt.generator"] = "trafgen"
    expect_refused(lambda: matrix.Matrix(settings, defs, lambda v: "", ("vnetlab", "reference")), BenchError,
                   r"pkt\.generator", "pkt.generator=trafgen")


def test_hostgen_missing_testpmd_is_a_clear_error(t):
    old = os.environ.get("PATH", "")
    with tempfile.TemporaryDirectory() as d:
        os.environ["PATH"] = d
        try:
            hostgen.need_testpmd()
        except BenchError as e:
            msg = str(e)
        else:
            msg = None
        finally:
            os.environ["PATH"] = old
    if not msg or "dpdk-testpmd" not in msg or "dpdk-dev" not in msg:
        raise Fail(f"without dpdk-testpmd on PATH: expected a BenchError naming it and Debian's dpdk-dev, got {msg!r}")


def _vnetbench(args, timeout=900):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "res")
        r = subprocess.run([sys.executable, os.path.join(TOP, "host", "bench", "vnetbench.py"), *args, "--out", out],
                           cwd=TOP, capture_output=True, text=True, timeout=timeout)
        if r.returncode:
            raise Fail(f"vnetbench exited {r.returncode}:\n{(r.stdout + r.stderr)[-2000:]}")
        rows = [json.loads(l) for l in open(os.path.join(out, "results.jsonl"))]
        return rows, open(os.path.join(out, "report.md")).read()


def test_hostgen_harness_runs(t):
    """matrices/hostgen.txt through vnetbench, 2 s per run: every row ok;
    on vhost-user the appliance's rxonly counted every frame testpmd sent
    and the PVP loop closes both ways; on tap within the packet socket's
    ring; the reference rows are positive and close; report.md divides."""
    if os.geteuid() != 0:
        raise Skip("needs root for the harness's network namespace")
    import shutil

    if not shutil.which("dpdk-testpmd"):
        raise Skip("needs dpdk-testpmd (Debian package dpdk-dev)")
    rows, report = _vnetbench(["--matrix", os.path.join(TOP, "host", "bench", "matrices", "hostgen.txt"),
                               "--seconds", "2", "--accel", "tcg"])
    if len(rows) != 12 or any(r["status"] != "ok" for r in rows):
        raise Fail(f"expected 12 ok rows: {[(r['test'], r['backend'], r['column'], r['status'], r.get('error')) for r in rows]}")
    for r in rows:
        what = (r["test"], r["backend"], r["column"])
        if not r["pps"] > 0:
            raise Fail(f"{what}: no rate")
        if not r["closes"]:
            raise Fail(f"{what}: the count does not close: sent {r.get('gen_sent')}, guest {r.get('frames')}, "
                       f"back {r.get('gen_back')}, sink {r.get('sink_received')}, unaccounted {r.get('unaccounted')}")
        if r["column"] != "reference" and r["backend"] == "vhost-user":
            if r["test"] == "pkt_rxonly" and r["gen_sent"] != r["frames"]:
                raise Fail(f"{what}: testpmd sent {r['gen_sent']}, the guest received {r['frames']}")
            if r["test"] == "pkt_macswap" and not r["gen_sent"] == r["frames"] == r["gen_back"]:
                raise Fail(f"{what}: testpmd sent {r['gen_sent']}, the guest forwarded {r['frames']}, "
                           f"testpmd got back {r['gen_back']}")
            if r["test"] == "pkt_rxonly" and r.get("seq_frames") != 0:
                raise Fail(f"{what}: testpmd's frames carry no sequence number, seq_frames {r.get('seq_frames')}")
        if r["column"] != "reference" and not (r.get("qemu_cpu_pct") is not None and r.get("peer_cpu_pct")
                                                and r.get("qemu_cpus") and r.get("peer_cpus")):
            raise Fail(f"{what}: the host CPU of QEMU and of testpmd (peer) over the guest's interval is missing: "
                       f"qemu {r.get('qemu_cpu_pct')} on {r.get('qemu_cpus')}, peer {r.get('peer_cpu_pct')} on "
                       f"{r.get('peer_cpus')}")
    # On tap the way back into testpmd's packet socket has no drop count:
    # what the guest sent back is at least what testpmd got, never less.
    for r in rows:
        if r["backend"] == "tap" and r["test"] == "pkt_macswap" and r["column"] != "reference":
            if not r["unaccounted_back"] >= 0 or r["gen_back"] <= 0:
                raise Fail(f"tap PVP: guest forwarded {r['frames']}, testpmd got back {r['gen_back']}")
    if "Against the backend's no-guest reference" not in report or "| pkt_rxonly | vhost-user | 64 | default |" not in report:
        raise Fail("report.md has no reference table")


def test_hostgen_pkt_rr_harness(t):
    """pkt_rr through vnetbench (TCG, 2 s after a 1 s warm-up): on tap
    against the XDP_TX reflector, on vhost-user against testpmd macswap;
    round trips counted, none lost, latency quantiles in order and the
    HIST kept; on vhost-user no kick at all (testpmd polls: NO_NOTIFY) and
    testpmd's CPU as the peer."""
    if os.geteuid() != 0:
        raise Skip("needs root for the harness's network namespace")
    import shutil

    if not shutil.which("dpdk-testpmd"):
        raise Skip("needs dpdk-testpmd (Debian package dpdk-dev)")
    rows, report = _vnetbench(["--tests", "pkt_rr", "--backends", "tap,vhost-user", "--pkt-sizes", "64",
                               "--variants", "default", "--seconds", "2", "--warmup", "1", "--repetitions", "1",
                               "--accel", "tcg"])
    if len(rows) != 2 or any(r["status"] != "ok" for r in rows):
        raise Fail(f"expected 2 ok rows: {[(r['backend'], r['status'], r.get('error')) for r in rows]}")
    for r in rows:
        what = f"pkt_rr on {r['backend']}"
        want = "xdp-macswap" if r["backend"] == "tap" else "testpmd-macswap"
        if r.get("generator") != want or not r.get("transactions") or r.get("lost") != 0:
            raise Fail(f"{what}: reflector {r.get('generator')} (expected {want}), {r.get('transactions')} round "
                       f"trips, {r.get('lost')} lost")
        if not 0 < r["lat_p50_ns"] <= r["lat_p99_ns"] <= r["lat_max_ns"] or not r.get("lat_hist"):
            raise Fail(f"{what}: latencies out of order or no histogram: {r}")
        if r["backend"] == "vhost-user" and (r.get("kicks_per_txn") != 0 or not r.get("peer_cpu_pct")):
            raise Fail(f"{what}: expected no kicks and testpmd's CPU, got {r.get('kicks_per_txn')} kicks per round "
                       f"trip and peer CPU {r.get('peer_cpu_pct')}")
    if "## pkt_rr" not in report or "latency p50" not in report:
        raise Fail(f"report.md has no pkt_rr section with latencies:\n{report[:1500]}")


def test_hostgen_python_rxonly_counts_exactly(t):
    """pkt_rxonly with the Python generator on a tap: sent = the guest's
    sequenced frames + the tap's drops, no gap beyond those drops."""
    if os.geteuid() != 0:
        raise Skip("needs root for the harness's network namespace with a tap")
    rows, _ = _vnetbench(["--tests", "pkt_rxonly", "--guests", "vnetlab", "--backends", "tap", "--pkt-sizes", "64",
                          "--pkt-generator", "python", "--seconds", "1", "--repetitions", "1", "--accel", "tcg"])
    r = rows[0]
    if r["status"] != "ok" or not r["closes"] or r["gen_sent"] != r["seq_frames"] + r["tap_tx_dropped"]:
        raise Fail(f"python generator: sent {r.get('gen_sent')}, guest {r.get('seq_frames')} + tap drops "
                   f"{r.get('tap_tx_dropped')} ({r['status']} {r.get('error')})")


def test_hostgen_linux_guest_on_vhost_user(t):
    """The Linux column against the testpmd generator: its XDP drop counts
    every frame testpmd put on its ring (eth0's rx_packets), its XDP_TX
    sends back what it received less what it counted as dropped, and
    pktgen's frames reach testpmd's sink."""
    if os.geteuid() != 0:
        raise Skip("needs root for the harness's network namespace")
    import shutil
    import subprocess

    if not shutil.which("dpdk-testpmd"):
        raise Skip("needs dpdk-testpmd (Debian package dpdk-dev)")
    r = subprocess.run([os.path.join(TOP, "host", "linux-guest", "build.sh")], capture_output=True, text=True,
                       timeout=1200)
    if r.returncode:
        raise Fail(f"host/linux-guest/build.sh failed ({r.returncode}): {(r.stdout + r.stderr)[-1200:]}")
    rows, report = _vnetbench(["--matrix", os.path.join(TOP, "host", "bench", "matrices", "hostgen.txt"),
                               "--guests", "linux", "--backends", "vhost-user", "--seconds", "2", "--accel", "tcg"])
    by = {r["test"]: r for r in rows}
    if sorted(by) != ["pkt_macswap", "pkt_rxonly", "pkt_txonly"] or any(r["status"] != "ok" for r in rows):
        raise Fail(f"expected 3 ok rows: {[(r['test'], r['status'], r.get('error')) for r in rows]}")
    rx, pvp, tx = by["pkt_rxonly"], by["pkt_macswap"], by["pkt_txonly"]
    if rx["gen_sent"] != rx["frames"] or not rx["pps"] > 0:
        raise Fail(f"linux rxonly: testpmd sent {rx['gen_sent']}, eth0 received {rx['frames']}, pps {rx['pps']}")
    if pvp["gen_sent"] != pvp["frames"] + pvp["rx_other"] or pvp["frames"] != pvp["gen_back"] or not pvp["closes"]:
        raise Fail(f"linux PVP: testpmd sent {pvp['gen_sent']}, XDP_TX sent back {pvp['frames']} and dropped "
                   f"{pvp['rx_other']}, testpmd got back {pvp['gen_back']}")
    if not tx["closes"] or not tx["frames"] > 0:
        raise Fail(f"linux pktgen into testpmd: sent {tx.get('frames')}, sink {tx.get('sink_received')}, "
                   f"unaccounted {tx.get('unaccounted')}")
