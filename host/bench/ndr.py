"""ndr.py: the zero-loss throughput search (RFC 2544 26.1 "throughput";
FD.io CSIT's NDR and PDR) and its run kind, `tests = ndr` in a matrix.

The search is a binary search over the offered rate, one trial of
`ndr.trial` seconds per step, for two goals in turn:

  NDR  the highest rate with no frame lost;
  PDR  the highest rate with at most `ndr.pdr` percent lost (0.5).

It starts at `ndr.max_rate`; a rate that passes ends the goal there, else
the rate is halved until one passes, then the interval [pass, fail) is
bisected until its width is at most `ndr.precision` percent of the
failing rate. PDR starts from what the NDR trials already showed (every
trial is kept: a rate that lost nothing passes both goals, one that lost
less than the PDR ratio passes PDR), so it costs a few trials more. Every
trial is a step in the row (`ndr_steps`: goal, rate, sent, received, loss,
pass), in the JSONL.

A trial against the appliance (execute_run): the guest runs `app=pkt`
in the matrix's `ndr.mode` (macswap: the PVP loop; reflect) for the whole
search; tests/tools/pktpeer.py `swap` in the backend's namespace offers
rate x trial frames of the row's size and counts what comes back, then a
trial marker. Loss is counted at both ends: the peer's own (sent - back)
is the trial's loss; the guest's PKT_TRIAL line for the marker says what
it received and forwarded of that trial, so each step also says where the
frames were lost (`tap_tx_dropped` into the guest, the peer socket's drops
out of it) and whether that closes (`closes`); the guest's RESULT at the
end must add up with the peer's totals (`ndr_check`).

The host generator is a Python raw socket: it offers some tens of
thousands of frames per second at most, so the search finds the smaller
of the guest's and the generator's limit; each step records what was
really offered (`offered_pps`), and a figure whose trial the generator
could not offer in time is marked `ndr_generator_limited` (a floor). The
testpmd generators and the backend's no-guest reference (hostgen.py) do
not drive the search yet.
"""

import json
import os
import re
import sys
import time

import backends
import hostgen
import kvmstats
import loadlat
import procs
import runs
from matrix import TESTS
from procs import BenchError

GENERATOR_SLACK = 0.95  # a trial offering less than this share of its rate is the generator's limit

_TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PKTPEER = os.path.join(_TOP, "tests", "tools", "pktpeer.py")
# ndr.generator = pacegen: the paced C generator (host/pktgen/pacegen.c, make host-tools)
PACEGEN = os.path.join(_TOP, "build", "host", "pacegen")


def passes(trial, loss_pct):
    """Does a trial (dict with sent, received) lose at most loss_pct %?
    A trial that sent nothing passes nothing."""
    if trial["sent"] <= 0:
        return False
    lost = trial["sent"] - trial["received"]
    if loss_pct == 0:
        return lost <= 0
    return lost * 100.0 <= loss_pct * trial["sent"]


def _search(goal, loss_pct, lo, hi, max_rate, min_rate, precision_pct, run_trial, steps):
    """Binary search for goal between a passing lo (or None) and a failing
    hi (or None), from the trials already in steps; returns the rate found
    (0 when even min_rate fails)."""

    def trial(rate):
        t = dict(run_trial(rate))
        t.update(goal=goal, rate=rate, loss=t["sent"] - t["received"],
                 loss_pct=round(100.0 * (t["sent"] - t["received"]) / t["sent"], 4) if t["sent"] else None)
        t["pass"] = passes(t, loss_pct)
        steps.append(t)
        return t["pass"]

    if lo is None and hi is None:
        if trial(max_rate):
            return max_rate
        hi = max_rate
    if lo is None:
        # Halve from the failing rate until one passes.
        rate = hi
        while True:
            rate = rate // 2
            if rate < min_rate:
                return 0
            if trial(rate):
                lo = rate
                break
            hi = rate
    if hi is None:
        return lo
    while (hi - lo) * 100.0 > precision_pct * hi and hi - lo > 1:
        mid = (lo + hi) // 2
        if trial(mid):
            lo = mid
        else:
            hi = mid
    return lo


def bounds(steps, loss_pct):
    """(highest passing, lowest failing) rate of the trials so far for a
    loss ratio; None where there is none. A failing rate below a passing
    one (noise) keeps the lower failing rate: the search stays honest."""
    ok = [s["rate"] for s in steps if passes(s, loss_pct)]
    bad = [s["rate"] for s in steps if not passes(s, loss_pct)]
    hi = min(bad) if bad else None
    lo = max([r for r in ok if hi is None or r < hi], default=None)
    return lo, hi


def search(run_trial, max_rate, pdr_pct=0.5, precision_pct=5.0, min_rate=1):
    """NDR then PDR; run_trial(rate) -> {"sent": N, "received": N, ...}.
    Returns {"ndr": rate, "pdr": rate, "steps": [...]} (rates in frames/s)."""
    steps = []
    ndr = _search("ndr", 0.0, None, None, max_rate, min_rate, precision_pct, run_trial, steps)
    lo, hi = bounds(steps, pdr_pct)  # never both None: NDR ran at least one trial
    pdr = _search("pdr", pdr_pct, lo, hi, max_rate, min_rate, precision_pct, run_trial, steps)
    return {"ndr": ndr, "pdr": max(pdr, ndr), "steps": steps}


class SimulatedSink:
    """A sink that forwards at most `limit` frames/s and loses the rest,
    plus `noise` frames lost per trial above `noise_from` (for tests): the
    search must find the limit without a VM."""

    def __init__(self, limit, trial_s=1.0, noise=0, noise_from=None):
        self.limit, self.trial_s, self.noise, self.noise_from = limit, trial_s, noise, noise_from
        self.trials = 0

    def __call__(self, rate):
        self.trials += 1
        sent = int(rate * self.trial_s)
        got = min(sent, int(self.limit * self.trial_s))
        if self.noise and self.noise_from is not None and rate >= self.noise_from:
            got = max(0, got - self.noise)
        return {"sent": sent, "received": got}


# ---- the run kind ----

def frame_bits(size):
    """Bits of one frame as the rates count them (RFC 2544 sizes, the FCS
    included; imix: the 7:4:1 mean)."""
    return (sum([64] * 7 + [570] * 4 + [1518]) / 12.0 if size == "imix" else float(size)) * 8


def guest_trial(boot, number, timeout=5.0):
    """The guest's PKT_TRIAL line for trial `number` (apps/pkt.c), or None
    when it never came (the marker lost on the way)."""
    pat = re.compile(r'^PKT_TRIAL (\{"trial":%d,.*\})$' % number)
    item = boot.proc.wait_line(lambda l: bool(pat.match(l)), timeout)
    return json.loads(pat.match(item[2]).group(1)) if item else None


def peer_trial(backend, boot, mac, size, mode, rate, trial_s, log, marks=True, lat=False, gen="python"):
    """One trial: pktpeer.py swap in the backend's namespace, its trial
    marker, and the guest's own count of the trial (marks: the guest
    prints PKT_TRIAL lines; the linux guest's XDP_TX does not, and its
    trials are counted by the peer alone). lat: the peer also times each
    frame's round trip (the trial's `rtt`). gen: who sends the frames,
    python (pktpeer.py itself) or pacegen (ndr.generator)."""
    if gen == "pacegen" and not os.access(PACEGEN, os.X_OK):
        raise BenchError(f"ndr.generator = pacegen: {PACEGEN} is not built (make host-tools)")
    n = max(1, int(rate * trial_s))
    number = len(log)
    argv = backend.wrap([sys.executable, PKTPEER, "swap", backend.tap, mac, str(n), str(rate), mode, "1",
                         str(size), str(number), "1" if lat else "0", PACEGEN if gen == "pacegen" else "python"])
    t_a = time.monotonic()
    r = procs.run(argv, timeout=trial_s * 4 + 60, check=False)
    t_b = time.monotonic()
    lines = (r.stdout or "").strip().splitlines()
    if r.returncode or not lines:
        raise BenchError(f"pktpeer swap failed ({r.returncode}): {(r.stdout or '')[-300:]} {(r.stderr or '')[-300:]}")
    res = json.loads(lines[-1])
    log.append(res)
    back = res["back"]
    # What the generator really offered: a Python socket falls behind
    # well below what a rate asks at some point, and then a passing trial
    # says nothing about the rate asked.
    offered = res["sent"] / res["send_s"] if res["send_s"] > 0 else 0.0
    t = {"sent": res["sent"], "received": back["frames"], "tap_tx_dropped": res["tap_tx_dropped"],
         "peer_sock_drops": back.get("sock_drops", back.get("udp_rcvbuf_errors", 0)),
         "send_s": res["send_s"], "offered_pps": round(offered, 1),
         "generator_limited": offered < GENERATOR_SLACK * rate, "marker_s": res.get("marker_s"),
         "t_host": (t_a, t_b)}  # for the KVM exit counters; execute_run drops it
    if lat:
        t["rtt"] = back.get("rtt")
    # Loss at both ends, this trial alone: into the guest (sent = what it
    # received + the tap's drops) and out of it (what it forwarded = what
    # came back + the peer socket's drops).
    g = guest_trial(boot, number) if marks else None
    if g:
        t.update(guest_received=g["seq_frames"], guest_forwarded=g["frames"], guest_seq_gaps=g["seq_gaps"],
                 guest_other=g["rx_other"], guest_pend=g["pend"])
        t["closes"] = (t["sent"] == g["seq_frames"] + t["tap_tx_dropped"] and
                       g["frames"] + g["pend"] == t["received"] + t["peer_sock_drops"])
    else:
        t.update(guest_received=None, closes=None)  # the marker never reached the guest
        t["qemu_queues"] = qemu_queue_view(boot)
    return t


def qemu_queue_view(boot):
    """QEMU's own view of the NIC's queues (kvmstats.virtio_queues()) for a
    trial whose marker the guest never saw: the device side, next to the
    driver's counters. None without a QMP socket."""
    return kvmstats.virtio_queues(boot.qmp) if getattr(boot, "qmp", None) else None


def kvm_columns(exits, trials, ndr_rate):
    """Under KVM: the exit counters per frame of the trial at the NDR (the
    last passing one at that rate; the row's kvm_* columns) and each
    trial's kvm_exits_per_frame (in ndr_steps / lat_steps); kvm_counters
    says n/a (and why) where none were read, as under TCG."""
    import kvmstats
    cols = kvmstats.availability(exits)
    samples = exits.samples if exits else []
    at_ndr = [t for t in trials if t.get("pass") and t.get("rate") == ndr_rate]
    if samples and at_ndr and at_ndr[-1].get("t_host"):
        t = at_ndr[-1]
        frames = t.get("guest_forwarded") or t.get("received") or 0
        cols.update(kvmstats.row_columns(kvmstats.interval(samples, *t["t_host"]), {"test": "ndr", "frames": frames}))
    kvmstats.trial_columns(samples, trials)
    return cols


def execute_run(run, m, guest, logdir, row):
    """The search on one column; fills row (runs.base_row()'s) and returns it."""
    backend = runs.backend_for(run, m, guest, row)
    if backend is None:
        return row
    p = run.params
    boot = None
    t0 = time.monotonic()
    log = os.path.join(logdir, f"run-{run.index:04d}.log")
    row["log"] = os.path.relpath(log, os.path.dirname(logdir))
    peer_log = []
    exits = None
    try:
        backend.setup(logdir)
        backend.tap = backends.TAP
        boot, cmdline = guest.start(run, backend, m.run_timeout)
        row["cmdline"] = cmdline
        exits = kvmstats.start(boot)
        linux = guest.name == "linux"
        item = boot.proc.wait_line(lambda l: (l.startswith("pkt: ") or l.startswith("vnetlab-linux listening l2 ") or
                                              l.startswith("ERROR {")), 90)
        if not item or item[2].startswith("ERROR"):
            raise BenchError(f"guest not ready for the search; console tail:\n{boot.proc.tail()}")
        # The appliance's driver line, or the linux guest's listening line.
        mac = next((mm.group(1) for l in boot.proc.text("out")
                    for mm in [re.match(r"^(?:virtio-net: mac=|vnetlab-linux listening l2 .* mac=)(\S+)", l)] if mm),
                   None)
        gen = p.get("generator", "python")
        found = search(lambda rate: peer_trial(backend, boot, mac, p["size"], p["mode"], rate, p["trial"],
                                               peer_log, marks=not linux, gen=gen),
                       p["max_rate"], p["pdr"], p["precision"])
        # Latency against offered load: one timed trial at each
        # ndr.latency percentage of the NDR just found, the same boot.
        lat_steps = []
        for pct in p.get("latency") or ():
            rate = loadlat.offered_mps(found["ndr"], pct)
            t = peer_trial(backend, boot, mac, p["size"], p["mode"], rate, p["trial"], peer_log, marks=not linux,
                           lat=True, gen=gen)
            lat_steps.append(dict(t, load=pct, rate=rate))
        if exits:
            exits.settle(time.monotonic())
        row.update(kvm_columns(exits, found["steps"] + lat_steps, found["ndr"]))
        obj = runs.final_result(boot, row, p["trial"] + 30, " after the search")
        bits = frame_bits(p["size"])
        steps = found["steps"]
        row.update(ndr_pps=found["ndr"], pdr_pps=found["pdr"], ndr_mbps=round(found["ndr"] * bits / 1e6, 3),
                   pdr_mbps=round(found["pdr"] * bits / 1e6, 3), ndr_trials=len(steps), ndr_steps=steps)
        # A figure whose trial the generator could not offer in time is a
        # floor of the guest's limit, not the limit: said in the row.
        row["ndr_generator_limited"] = any(
            s["generator_limited"] for s in steps if s["pass"] and s["rate"] in (found["ndr"], found["pdr"]))
        row["ndr_max_offered_pps"] = max(s["offered_pps"] for s in steps)
        if lat_steps:
            row["lat_steps"] = [{k: v for k, v in t.items() if k != "rtt"} | {
                f"lat_{k}": v for k, v in (t.get("rtt") or {}).items() if k != "n"} | {
                "lat_n": (t.get("rtt") or {}).get("n", 0)} for t in lat_steps]
        # Both ends, over every trial of the boot (search and latency):
        # what the peer sent must be what the guest received plus the
        # tap's drops, what the guest forwarded must be what came back plus
        # what the peer's socket dropped.
        trials = steps + lat_steps
        sent = sum(s["sent"] for s in trials)
        back = sum(s["received"] for s in trials)
        tap_drops = sum(s["tap_tx_dropped"] for s in trials)
        sock_drops = sum(s["peer_sock_drops"] for s in trials)
        if linux:
            # eth0's counters over the serving phase: every frame, the
            # trial markers (one per trial, reflected too) included.
            marks = len(trials)
            check = {"peer_sent": sent, "tap_dropped": tap_drops, "markers": marks,
                     "guest_received": obj.get("rx_frames"), "guest_forwarded": obj.get("tx_frames"),
                     "guest_dropped": (obj.get("rx_frames") or 0) - (obj.get("tx_frames") or 0),
                     "peer_back": back, "peer_sock_drops": sock_drops, "counted_by": "eth0 statistics"}
        else:
            check = {"peer_sent": sent, "tap_dropped": tap_drops, "guest_received": obj.get("seq_frames"),
                     "guest_forwarded": obj.get("frames"),
                     "guest_counted": (obj.get("rx_other") or 0) + (obj.get("fwd_unsent") or 0),
                     "peer_back": back, "peer_sock_drops": sock_drops}
        check["closes"] = run_closes(check, linux)
        check["trials_closed"] = sum(1 for s in trials if s.get("closes"))
        check["trials_unmarked"] = sum(1 for s in trials if s.get("closes") is None)
        row["ndr_check"] = check
        if check["trials_unmarked"] and not linux:
            # A trial the guest never counted makes every loss figure of
            # the run doubtful: the row fails, saying what each side saw.
            bad = [{k: s.get(k) for k in ("rate", "sent", "received", "tap_tx_dropped", "marker_s",
                                          "qemu_queues")} for s in trials if s.get("closes") is None]
            raise BenchError(f"{check['trials_unmarked']} trial(s) without the guest's PKT_TRIAL line "
                             f"(the guest ended at {obj.get('t_line_us')} us, its last frame at "
                             f"{obj.get('t_end_us')} us): {json.dumps(bad)}")
        for k in ("variant", "accel", "backend"):
            if k in obj:
                row["guest_" + k] = obj[k]
        row["status"] = "ok"
    except BenchError as e:
        row["error"] = str(e).splitlines()[0][:300]
        row["error_detail"] = str(e)
    finally:
        if exits:
            exits.stop()
        if boot:
            boot.stop()
        bproc = backend.proc
        backend.teardown()
        if row.get("status") == "ok" and backend.name == "vhost-user" and bproc:
            close_at_switch(row["ndr_check"], hostgen.parse_forward_stats(bproc.text()), linux)
        row["wall_s"] = round(time.monotonic() - t0, 2)
        try:
            runs.write_log(log, boot, None, bproc)
            with open(log, "a") as f:
                for r in peer_log:
                    f.write("pktpeer " + json.dumps(r) + "\n")
        except OSError:
            pass
    return row


def close_at_switch(check, fwd, linux):
    """vhost-user: testpmd forwards between the tap the peer sits on and
    the guest, and drops what the guest's ring (port 0) or the tap (port
    1) cannot take at that instant (a vhost-user port has no queue): its
    forward statistics at the end (TX-dropped) count those frames, and the
    whole run closes with them. A trial alone cannot: testpmd's counts are
    the run's."""
    to_guest = fwd.get(0, {}).get("TX-dropped")
    to_peer = fwd.get(1, {}).get("TX-dropped")
    if to_guest is None or to_peer is None:
        check["switch_counted"] = False
        return
    check.update(switch_counted=True, switch_dropped_to_guest=to_guest, switch_dropped_to_peer=to_peer)
    check["closes"] = run_closes(check, linux, to_guest, to_peer)


def run_closes(check, linux, to_guest=0, to_peer=0):
    """The whole run's count: what the peer sent (and, for Linux, whose eth0
    counts them, the markers) = what the guest received + the tap's and the
    switch's drops towards it; what it forwarded = what came back + the
    peer socket's and the switch's drops on the way back."""
    marks = check["markers"] if linux else 0
    forwarded = (check["guest_forwarded"] or 0) if linux else check["guest_forwarded"]
    return (check["peer_sent"] + marks == (check["guest_received"] or 0) + check["tap_dropped"] + to_guest and
            forwarded == check["peer_back"] + marks + check["peer_sock_drops"] + to_peer)


def rfc2544_table(rows, columns):
    """report.md lines: frame size x column, NDR and PDR in Mpps and
    Gbit/s (medians over repetitions), per backend."""
    out = []
    ok = [r for r in rows if r.get("test") == "ndr" and r.get("status") == "ok"]
    if not ok:
        return out
    for backend in sorted({r["backend"] for r in ok}):
        sel = [r for r in ok if r["backend"] == backend]
        out += [f"### RFC 2544 throughput ({backend}; mode {sel[0].get('mode')}, trial {sel[0].get('trial')} s, "
                f"PDR <= {sel[0].get('pdr')} % loss)", "",
                "NDR / PDR per frame size (RFC 2544 sizes, the FCS included; Gbit/s of those frame bytes): "
                "Mpps, Gbit/s; median of the repetitions, n = repetitions (then the lowest-highest NDR and PDR), "
                "trials = search steps of one run; "
                "generator-limited: the host peer could not offer that rate in time, the figure is a floor", ""]
        cols = [c for c in columns if any(r["column"] == c for r in sel)]
        out.append("| frame size | " + " | ".join(cols) + " |")
        out.append("|---|" + "---|" * len(cols))
        sizes = sorted({str(r["size"]) for r in sel}, key=lambda s: (s == "imix", int(s) if s.isdigit() else 0))
        for z in sizes:
            cells = []
            for c in cols:
                rs = [r for r in sel if r["column"] == c and str(r["size"]) == z]
                if not rs:
                    cells.append("-")
                    continue

                def med(k):
                    v = sorted(r[k] for r in rs)
                    return v[len(v) // 2]

                # The spread of the repetitions: a median alone hides a
                # run that found half the rate.
                spread = "" if len(rs) < 2 else (
                    f", NDR {min(r['ndr_pps'] for r in rs) / 1e6:.4f}-{max(r['ndr_pps'] for r in rs) / 1e6:.4f}"
                    f" PDR {min(r['pdr_pps'] for r in rs) / 1e6:.4f}-{max(r['pdr_pps'] for r in rs) / 1e6:.4f}"
                    " Mpps")
                cells.append(f"NDR {med('ndr_pps') / 1e6:.4f} Mpps {med('ndr_mbps') / 1e3:.4f} Gbit/s, "
                             f"PDR {med('pdr_pps') / 1e6:.4f} Mpps {med('pdr_mbps') / 1e3:.4f} Gbit/s "
                             f"(n={len(rs)}{spread}, trials {rs[0]['ndr_trials']}"
                             f"{'' if all(r['ndr_check']['closes'] for r in rs) else ', counts do not close'}"
                             f"{', generator-limited' if any(r.get('ndr_generator_limited') for r in rs) else ''})")
            out.append(f"| {z} | " + " | ".join(cells) + " |")
        out.append("")
    return out


def latency_table(rows, columns):
    """report.md lines: the round trips of the timed trials at ndr.latency
    percentages of each run's NDR (the peer's, from send() to the kernel's
    receive stamp), per backend and frame size: a row per column and load,
    medians over the repetitions."""
    ok = [r for r in rows if r.get("test") == "ndr" and r.get("status") == "ok" and r.get("lat_steps")]
    if not ok:
        return []
    out = ["### Latency against offered load (packet level: ndr.latency)", "",
           "Each run found its NDR, then offered one trial at each percentage of it in the same boot, the peer "
           "timing every frame's round trip (tests/tools/pktpeer.py swap with LAT 1: from just after its send() "
           "to the kernel's receive stamp of the frame that came back). Asked = the trial's rate, offered = what "
           "the peer really sent per second (below asked: the peer's limit, not the guest's). Latencies in us, "
           "medians over n runs; loss = frames of that trial that did not come back.", ""]
    for backend in sorted({r["backend"] for r in ok}):
        for z in sorted({str(r["size"]) for r in ok if r["backend"] == backend}):
            out += [f"**{backend}, {z} B**", "",
                    "| column | load % of NDR | asked frames/s | offered frames/s | loss % | p50 | p90 | p99 | p99.9 | "
                    "max | n |",
                    "|---|---|---|---|---|---|---|---|---|---|---|"]
            for c in [c for c in columns if any(r["column"] == c for r in ok)]:
                rs = [r for r in ok if r["column"] == c and r["backend"] == backend and str(r["size"]) == z]
                for pct in sorted({t["load"] for r in rs for t in r["lat_steps"]}):
                    ts = [t for r in rs for t in r["lat_steps"] if t["load"] == pct and t.get("lat_n")]

                    def med(k, scale=1.0):
                        v = sorted(t[k] * scale for t in ts if t.get(k) is not None)
                        return v[len(v) // 2] if v else None

                    def us(k):
                        v = med(k, 1e-3)
                        return "-" if v is None else f"{v:,.1f}"

                    loss = [100.0 * (t["sent"] - t["received"]) / t["sent"] for t in ts if t["sent"]]
                    out.append(f"| {c} | {pct} | {med('rate') or 0:,.0f} | {med('offered_pps') or 0:,.0f} | "
                               f"{(sorted(loss)[len(loss) // 2] if loss else 0):.2f} | {us('lat_p50_ns')} | "
                               f"{us('lat_p90_ns')} | {us('lat_p99_ns')} | {us('lat_p999_ns')} | {us('lat_max_ns')} | "
                               f"{len(ts)} |")
            out.append("")
    return out


# ---- the kind's interface (kinds.py) ----

OPTIONS = ("ndr.sizes", "ndr.trial", "ndr.mode", "ndr.max_rate", "ndr.pdr", "ndr.precision", "ndr.generator",
           "ndr.latency")
REPORT = (rfc2544_table, latency_table)  # report.md: the RFC 2544 table, the packet-level latency table


def claims(run):
    # the reference column's ndr runs are hostgen.py's (skipped there)
    return TESTS[run.test]["kind"] == "ndr" and run.guest != "reference"


def run_row(run, m, guest, logdir, execute):
    return execute_run(run, m, guest, logdir, runs.base_row(run, m))
