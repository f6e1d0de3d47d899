"""ndr.py: the zero-loss throughput search (RFC 2544 26.1 "throughput";
FD.io CSIT's NDR and PDR after MLRsearch, RFC 9971) and its run kind,
`tests = ndr` in a matrix.

One search finds both goals over shared trials of `ndr.trial` seconds:

  NDR  the highest load with no frame lost;
  PDR  the highest load with at most `ndr.pdr` percent lost (0.5).

A load's verdict for a goal comes from all its trials (classify()): it
is an upper bound once more than `ndr.exceed_ratio` (50 %) of
`ndr.duration_sum` seconds (21) were high-loss trials, a lower bound
once that can no longer happen; until then it is measured again. The
search ends for a goal when [lower, upper bound) is within `ndr.precision`
percent (the width, 0.5) of the upper bound; earlier phases with half the
duration sum and twice the width each narrow it cheaply from one trial per
load. The first trial runs at `ndr.max_rate` and is not counted (a
warm-up, `ndr.warmup`). Every trial is a step in the row (`ndr_steps`:
search, goal, rate, sent, received, loss, pass, warmup), in the JSONL;
`ndr.repeat` searches run in one boot (`ndr_searches`; the row's figures
are their medians).

A trial against the appliance (execute_run): the guest runs `app=pkt`
in the matrix's `ndr.mode` (macswap: the PVP loop; reflect) for the whole
search; tests/tools/pktpeer.py `swap` in the backend's namespace offers
rate x trial frames of the row's size and counts what comes back, waits
`ndr.settle` seconds after the last frame sent or back, reads the
counters and sends a trial marker (with pacegen in macswap, pacegen
--back does all of that in its one thread and pktpeer.py only passes its
line on: no Python reader shares the CPUs during the trial). Loss is counted at both ends: the
peer's own (sent - back) is the trial's loss; the guest's PKT_TRIAL line
for the marker says what it received and forwarded of that trial, so
each step also says where the frames were lost (`tap_tx_dropped` into the
guest, the peer socket's drops out of it) and whether that closes
(`closes`); the guest's RESULT at the end must add up with the peer's
totals (`ndr_check`).

The frames come from `ndr.generator`: pacegen (host/pktgen/pacegen.c,
paced in C on the tap, one frame size, in macswap also the receiver, per
sequence number: a step's `received` is the unique numbers back,
`back_frames` every frame, duplicates included, which the guest's
forwarded count closes with; `auto`'s choice on tap for every size but
imix), vupacegen (host/pktgen/vupacegen.c --serve, DPDK's vhost
PMD on the guest's vhost-user socket itself, no switch, no tap: it paces
each trial's frames into the guest and counts what comes back in one
process, VuGen below; `auto`'s choice on vhost-user) or the Python raw
socket (some tens of thousands of frames per second at most: the search
then finds the smaller of the guest's and the generator's limit; imix).
pacegen and the Python socket on vhost-user send through dpdk-testpmd's
switch and its tap (backends.VhostUser). Each step records what was
really offered (`offered_pps`), and a figure whose trial the generator
could not offer in time is marked `ndr_generator_limited` (a floor).

The no-guest reference (`guests = reference`, execute_run with no boot):
the same search with the same generator, and where the guest would be
hostgen.py's consumer, a dpdk-testpmd in macswap (the tap PMD owning the
tap on tap, virtio_user on vupacegen's socket on vhost-user): its NDR is
the table's "x reference" divisor. Its trials carry no guest line (as
the Linux guest's); the run closes with that testpmd's forward
statistics (ref_check).
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
# pacegen's options in every trial (pktpeer.py swap GENOPTS)
PACEGEN_OPTS = ""

# ndr.generator = vupacegen: the same on the vhost-user socket (host/pktgen/vupacegen.c --serve)
VUPACEGEN = os.path.join(_TOP, "build", "host", "vupacegen")
VU_DRAIN_S = 30  # vupacegen.c SERVE_DRAIN_S: its longest wait for frames back after a trial
# The reference's destination MAC (QEMU's default guest MAC): its testpmd
# consumer swaps the addresses of whatever it receives.
REF_MAC = "52:54:00:12:34:56"


def passes(trial, loss_pct):
    """Does a trial (dict with sent, received) lose at most loss_pct %?
    A trial that sent nothing passes nothing."""
    if trial["sent"] <= 0:
        return False
    lost = trial["sent"] - trial["received"]
    if loss_pct == 0:
        return lost <= 0
    return lost * 100.0 <= loss_pct * trial["sent"]


def classify(trials, loss_pct, duration_sum, exceed_ratio):
    """MLRsearch's load classification (RFC 9971): "lower" (a lower
    bound), "upper" or None (undecided: more trials needed) for the
    counted trials of one load against a goal. A trial is high-loss when
    it loses more than loss_pct %; the load is an upper bound once its
    high-loss seconds exceed exceed_ratio of the duration sum even if
    every missing second were low-loss, a lower bound once they cannot,
    even if every missing second were high-loss."""
    good = sum(t["duration"] for t in trials if passes(t, loss_pct))
    bad = sum(t["duration"] for t in trials if not passes(t, loss_pct))
    whole = max(good + bad, duration_sum)
    limit = whole * exceed_ratio
    if whole - good <= limit + 1e-9:
        return "lower"
    if bad > limit + 1e-9:
        return "upper"
    return None


def bounds(loads, loss_pct, duration_sum, exceed_ratio):
    """(lower bound, upper bound, load to measure again) of a goal from the
    counted trials per load. An undecided load counts on the side its
    trials so far lean to (high-loss seconds above the exceed ratio of
    what was measured: upper); the upper candidate is the lowest load on
    the upper side, the lower candidate the highest below it on the lower
    side (a lower bound above an upper one, noise, is not used: the search
    stays on the safe side). An undecided candidate is returned to measure
    again (the upper first) with both bounds None, else the two decided
    bounds (None where there is none)."""
    cls = {r: classify(ts, loss_pct, duration_sum, exceed_ratio) for r, ts in loads.items()}

    def upper_side(r):
        if cls[r]:
            return cls[r] == "upper"
        return classify(loads[r], loss_pct, 0.0, exceed_ratio) == "upper"

    up = [r for r in loads if upper_side(r)]
    hi = min(up) if up else None
    lo = max([r for r in loads if not upper_side(r) and (hi is None or r < hi)], default=None)
    for r in (hi, lo):
        if r is not None and cls[r] is None:
            return None, None, r
    return lo, hi, None


def _goal(goal, loss_pct, phases, exceed_ratio, max_rate, min_rate, loads, trial):
    """One goal's search over the shared trials (loads: rate -> counted
    trials), phase by phase (duration sum, width %): measure an undecided
    candidate bound again, else find an upper bound (the maximum load),
    then a lower one (halving), then bisect until the bounds are within
    the width. Returns (lower bound or 0, upper bound or None) of the last
    phase."""
    lo = hi = None
    for dsum, width in phases:
        while True:
            lo, hi, again = bounds(loads, loss_pct, dsum, exceed_ratio)
            if again is not None:
                trial(again, goal)
                continue
            if hi is None:
                if lo == max_rate:
                    break  # the maximum load is a lower bound: done
                trial(max_rate, goal)
                continue
            if lo is None:
                if hi <= min_rate:
                    break  # even the lowest load fails
                trial(max(min_rate, hi // 2), goal)
                continue
            if hi - lo <= width / 100.0 * hi or hi - lo <= 1:
                break
            trial((lo + hi) // 2, goal)
    return lo or 0, hi


def search(run_trial, max_rate, pdr_pct=0.5, precision_pct=0.5, min_rate=1, trial_s=1.0, duration_sum=None,
           exceed_ratio=0.5, warmup=True):
    """NDR and PDR in one search after MLRsearch (RFC 9971, FD.io CSIT):
    run_trial(rate) -> {"sent": N, "received": N, ...}, one trial of
    trial_s seconds. Each load's trials are kept and count for both goals
    (NDR: 0 % loss, PDR: pdr_pct %): a load is classified by the duration
    sum of its trials (duration_sum, default one trial) and the exceed
    ratio. Earlier phases narrow the interval cheaply (from one trial per
    load; each phase halves the width and doubles the duration sum of the
    one before); the last needs the whole duration sum at the loads that
    bound the result, within precision_pct % (the width).
    With warmup, the first trial runs at max_rate and is not counted (a
    cold guest and generator). Returns {"ndr", "pdr" (frames/s; 0 when
    even min_rate fails), "ndr_upper", "pdr_upper" (None: no load failed),
    "steps": every trial in order, warmup, goal and pass included}."""
    dsum = max(trial_s, duration_sum or trial_s)
    # CSIT's preceding targets: each phase halves the width and doubles
    # the duration sum of the one before, from one trial per load.
    phases = [(dsum, precision_pct)]
    while phases[0][0] / 2 >= trial_s and phases[0][1] < 25:
        phases.insert(0, (phases[0][0] / 2, phases[0][1] * 2))
    if phases[0][0] > trial_s:
        phases.insert(0, (trial_s, min(phases[0][1] * 2, 50.0)))
    steps, loads = [], {}

    def trial(rate, goal, warm=False):
        t = dict(run_trial(rate))
        lost = t["sent"] - t["received"]
        t.update(goal=goal, rate=rate, duration=trial_s, loss=lost,
                 loss_pct=round(100.0 * lost / t["sent"], 4) if t["sent"] else None,
                 warmup=warm, search_trial=len(steps))
        t["pass"] = passes(t, 0.0 if goal in ("ndr", "warmup") else pdr_pct)
        steps.append(t)
        if not warm:
            loads.setdefault(rate, []).append(t)

    if warmup:
        trial(max_rate, "warmup", warm=True)
    ndr, ndr_hi = _goal("ndr", 0.0, phases, exceed_ratio, max_rate, min_rate, loads, trial)
    pdr, pdr_hi = _goal("pdr", pdr_pct, phases, exceed_ratio, max_rate, min_rate, loads, trial)
    return {"ndr": ndr, "pdr": pdr, "ndr_upper": ndr_hi, "pdr_upper": pdr_hi, "steps": steps,
            "settings": {"trial_s": trial_s, "duration_sum": dsum, "exceed_ratio": exceed_ratio,
                         "width_pct": precision_pct, "warmup": warmup, "pdr_pct": pdr_pct}}


class SimulatedSink:
    """A sink that forwards at most `limit` frames/s and loses the rest,
    plus `noise` frames lost per trial above `noise_from` (for tests): the
    search must find the limit without a VM. With p_below/p_above (and a
    seed), a noisy curve instead: a trial at or below the limit loses
    `noise` (at least 1) frames with probability p_below, one above it
    with p_above, else nothing (trials at a rate are independent); with
    cold, the first trial loses that many frames whatever its rate."""

    def __init__(self, limit, trial_s=1.0, noise=0, noise_from=None, p_below=None, p_above=None, seed=1, cold=0):
        import random
        self.limit, self.trial_s, self.noise, self.noise_from = limit, trial_s, noise, noise_from
        self.p_below, self.p_above, self.cold = p_below, p_above, cold
        self.rng = random.Random(seed)
        self.trials = 0

    def __call__(self, rate):
        self.trials += 1
        sent = int(rate * self.trial_s)
        if self.p_below is not None:
            p = self.p_below if rate <= self.limit else self.p_above
            got = sent - min(sent, max(1, self.noise)) if self.rng.random() < p else sent
        else:
            got = min(sent, int(self.limit * self.trial_s))
            if self.noise and self.noise_from is not None and rate >= self.noise_from:
                got = max(0, got - self.noise)
        if self.trials == 1 and self.cold:
            got = max(0, got - self.cold)
        return {"sent": sent, "received": got}


# ---- the run kind ----

def frame_bits(size):
    """Bits of one frame as the rates count them (RFC 2544 sizes, the FCS
    included; imix: the 7:4:1 mean)."""
    return (sum([64] * 7 + [570] * 4 + [1518]) / 12.0 if size == "imix" else float(size)) * 8


LAT0_PPS = 1000  # ndr.latency's 0 %: the latency stream alone, at most this


def median(values):
    """The median of a list (the lower middle one of an even count: a
    rate that was measured)."""
    v = sorted(values)
    return v[(len(v) - 1) // 2]


def lat_rate(pdr, pct):
    """The rate of a latency trial at pct % of the PDR; 0 % is the stream
    alone: LAT0_PPS or 1 % of the PDR, the lower (at least 1)."""
    if pct == 0:
        return max(1, min(LAT0_PPS, int(pdr // 100)))
    return loadlat.offered_mps(pdr, pct)


def guest_trial(boot, number, timeout=5.0):
    """The guest's PKT_TRIAL line for trial `number` (apps/pkt.c), or None
    when it never came (the marker lost on the way)."""
    pat = re.compile(r'^PKT_TRIAL (\{"trial":%d,.*\})$' % number)
    item = boot.proc.wait_line(lambda l: bool(pat.match(l)), timeout)
    return json.loads(pat.match(item[2]).group(1)) if item else None


def peer_trial(backend, boot, mac, size, mode, rate, trial_s, log, marks=True, lat=False, gen="python", settle=1.0):
    """One trial: pktpeer.py swap in the backend's namespace, its trial
    marker, and the guest's own count of the trial (marks: the guest
    prints PKT_TRIAL lines; the linux guest's XDP_TX does not, and its
    trials are counted by the peer alone). lat: the peer also times each
    frame's round trip (the trial's `rtt`). gen: who sends the frames,
    python (pktpeer.py itself) or pacegen (ndr.generator). settle: seconds
    the peer waits after the last frame sent or back before it reads the
    counters and sends the marker (ndr.settle)."""
    if gen == "pacegen" and not os.access(PACEGEN, os.X_OK):
        raise BenchError(f"ndr.generator = pacegen: {PACEGEN} is not built (make host-tools)")
    n = max(1, int(rate * trial_s))
    number = len(log)
    argv = backend.wrap([sys.executable, PKTPEER, "swap", backend.tap, mac, str(n), str(rate), mode, repr(settle),
                         str(size), str(number), "1" if lat else "0", PACEGEN if gen == "pacegen" else "python",
                         PACEGEN_OPTS if gen == "pacegen" else ""])
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
    # received: the numbers that came back (pacegen's receiver counts a
    # duplicate apart: it must not hide a lost frame); back_frames: every
    # frame back, what the guest's forwarded count closes with.
    t = {"sent": res["sent"], "received": back["frames"] - back.get("dups", 0), "back_frames": back["frames"],
         "tap_tx_dropped": res["tap_tx_dropped"],
         "peer_sock_drops": back.get("sock_drops", back.get("udp_rcvbuf_errors", 0)),
         "send_s": res["send_s"], "offered_pps": round(offered, 1),
         "generator_limited": offered < GENERATOR_SLACK * rate, "marker_s": res.get("marker_s"),
         "receiver": res.get("receiver", "pktpeer"), "t_host": (t_a, t_b)}  # t_host: for KVM's exit counters
    if "dups" in back:
        t.update(back_dups=back["dups"], back_out_of_run=back["out_of_run"], back_other=back["other"],
                 gen_max_lag_ns=res.get("gen_max_lag_ns"))
    if "marker_sent" in res:
        t["marker_sent"] = bool(res["marker_sent"])
    if lat:
        t["rtt"] = back.get("rtt")
    return guest_close(t, boot, number, marks and t.get("marker_sent", True))


def guest_close(t, boot, number, marks):
    """A trial's loss at both ends, this trial alone: into the guest (sent
    = what it received + the backend's drops, tap_tx_dropped: the tap's, or
    what vupacegen's port refused) and out of it (what it forwarded = what
    came back + the peer socket's drops). No guest line (marks False, or
    the marker lost): closes None."""
    g = guest_trial(boot, number) if marks else None
    if g:
        t.update(guest_received=g["seq_frames"], guest_forwarded=g["frames"], guest_seq_gaps=g["seq_gaps"],
                 guest_other=g["rx_other"], guest_pend=g["pend"])
        # The guest's stalls this trial (apps/pkt.c: passes over 20 us)
        t.update({f"guest_{k}": g[k] for k in ("stalls", "stall_max_us", "stalled_us") if k in g})
        t["closes"] = (t["sent"] == g["seq_frames"] + t["tap_tx_dropped"] and
                       g["frames"] + g["pend"] == t.get("back_frames", t["received"]) + t["peer_sock_drops"])
    else:
        t.update(guest_received=None, closes=None)  # the marker never reached the guest
        t["qemu_queues"] = qemu_queue_view(boot)
    return t


class VuGen:
    """vupacegen --serve (host/pktgen/vupacegen.c) where testpmd's switch
    would be: it owns the vhost-user socket QEMU (or the reference's
    virtio_user) connects to, in the run's namespace and a private mount
    namespace with a tmpfs on /run (DPDK's runtime files), on the
    generator's lcore (hostgen.lcores), and runs each trial on command:
    paced frames in, what comes back counted, the trial marker. stop()
    ends it on every path."""

    count = 0

    def __init__(self, backend, size):
        if not os.access(VUPACEGEN, os.X_OK):
            raise BenchError(f"ndr.generator = vupacegen: {VUPACEGEN} is not built (make host-tools; needs "
                             "Debian's dpdk-dev)")
        VuGen.count += 1
        lcore = hostgen.lcores(backend)[0][1]
        eal = ["--no-huge", "-m", "512", "--no-pci", "-l", str(lcore), "--file-prefix",
               f"vnetndr{os.getpid()}-{VuGen.count}", "--vdev", f"net_vhost0,iface={backend.sock}",
               # DPDK logs to stdout too: its INFO lines (vhost's negotiation) stay out of the trial lines
               "--log-level", "*:warning"]
        script = "mount -t tmpfs vnetbench-dpdk /run && exec \"$@\""
        self.argv = backend.wrap(["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", VUPACEGEN,
                                  *eal, "--", "--size", str(size), "--serve"])
        self.proc = None

    def start(self, timeout=60):
        """Up to its socket (before QEMU, the socket's client, starts)."""
        self.proc = procs.Proc("vupacegen", self.argv, keep_stdin=True)
        if not self.proc.wait_line(lambda l: "waiting for the guest" in l or l.startswith("{\"error"), timeout) or \
                not any("waiting for the guest" in l for l in self.proc.text("out")):
            raise BenchError(f"vupacegen did not come up within {timeout}s; its output:\n{self.proc.tail(20)}")
        return self

    def ready(self, timeout=90):
        """The other end's driver is up (the port's link): trials may start."""
        item = self.proc.wait_line(lambda l: l == "vupacegen: ready" or l.startswith("{\"error"), timeout)
        if not item or item[2].startswith("{"):
            raise BenchError(f"vupacegen: no driver on the socket within {timeout}s; its output:\n"
                             f"{self.proc.tail(20)}")

    def trial(self, number, dmac, rate, seconds, settle, lat):
        """One trial's JSON line (vupacegen.c serve())."""
        try:
            self.proc.p.stdin.write(f"trial {number} {dmac} {rate} {seconds} {settle} {1 if lat else 0}\n".encode())
            self.proc.p.stdin.flush()
        except (OSError, ValueError) as e:
            raise BenchError(f"vupacegen: cannot send trial {number} ({e}); its output:\n{self.proc.tail(20)}")
        head = '{"trial":%d,' % number
        item = self.proc.wait_line(lambda l: l.startswith(head), seconds * 2 + settle + VU_DRAIN_S + 30)
        if not item:
            raise BenchError(f"vupacegen: no result for trial {number}; its output:\n{self.proc.tail(20)}")
        return json.loads(item[2])

    def stop(self):
        if self.proc:
            try:
                self.proc.p.stdin.write(b"quit\n")
                self.proc.p.stdin.close()
            except (OSError, ValueError):
                pass
            self.proc.wait(5)
            self.proc.stop()


def vu_step(res, rate):
    """A trial's figures from vupacegen's line, in peer_trial()'s terms:
    sent = what it offered (the port took `sent`, refused the rest: the
    guest's ring had no buffer, a vhost-user port has no queue, so those
    are the loss into the guest, in tap_tx_dropped's place), received =
    the numbered frames back, peer_sock_drops = the port's imissed."""
    for k in ("offered", "sent", "refused", "back", "elapsed_ns", "marker"):
        if k not in res:
            raise BenchError(f"vupacegen: trial line without {k}: {json.dumps(res)[:300]}")
    if res["sent"] + res["refused"] != res["offered"]:
        raise BenchError(f"vupacegen: sent {res['sent']} + refused {res['refused']} != offered {res['offered']}")
    offered = res["offered"] / (res["elapsed_ns"] / 1e9) if res["elapsed_ns"] > 0 else 0.0
    t = {"sent": res["offered"], "received": res["back"], "tap_tx_dropped": res["refused"],
         "peer_sock_drops": res.get("port_imissed", 0), "send_s": round(res["elapsed_ns"] / 1e9, 3),
         "offered_pps": round(offered, 1), "generator_limited": offered < GENERATOR_SLACK * rate,
         "marker_s": res.get("marker_s"), "marker_sent": bool(res["marker"]), "generator": "vupacegen",
         "back_other": res.get("back_other", 0), "back_gaps": res.get("back_gaps"), "gen_nomem": res.get("nomem")}
    if "rtt" in res:
        t["rtt"] = res["rtt"]
    return t


def vu_trial(vu, boot, mac, rate, trial_s, log, marks=True, lat=False, settle=1.0):
    """One trial with vupacegen (peer_trial()'s counterpart on vhost-user)."""
    number = len(log)
    t_a = time.monotonic()
    res = vu.trial(number, mac, rate, trial_s, settle, lat)
    log.append(res)
    t = vu_step(res, rate)
    t["t_host"] = (t_a, time.monotonic())
    return guest_close(t, boot, number, marks and t["marker_sent"])


def ref_check(sent, tap_drops, marks, fwd, back, sock_drops):
    """The reference's whole run, counted at both ends as the Linux
    guest's (markers included, its consumer reflects them too): what the
    generator sent + markers = what the consumer testpmd received + the
    backend's drops into it; what it sent back = what came back + markers
    + the drops on the way (fwd: its forward statistics of port 0;
    TX-dropped: what its port refused, never sent)."""
    rx, tx = fwd.get("RX-packets"), fwd.get("TX-packets")
    if rx is None or tx is None:
        raise BenchError(f"reference: no forward statistics from the consumer testpmd ({fwd})")
    check = {"peer_sent": sent, "tap_dropped": tap_drops, "markers": marks, "guest_received": rx,
             "guest_forwarded": tx, "guest_dropped": fwd.get("TX-dropped", 0), "peer_back": back,
             "peer_sock_drops": sock_drops, "counted_by": "the consumer testpmd's forward statistics"}
    check["closes"] = run_closes(check, True) and rx == tx + check["guest_dropped"]
    return check


def kvm_counters(boot):
    """KVM's counters of the boot's QEMU now (kvmstats.sample over QMP,
    summed over vCPUs), or None (TCG has none, or no QMP socket)."""
    import kvmstats
    if not getattr(boot, "qmp", None):
        return None
    try:
        q = kvmstats.Qmp(boot.qmp)
    except (kvmstats.QmpError, OSError, ValueError):
        return None
    try:
        return kvmstats.sample(q) or None
    except (kvmstats.QmpError, OSError, ValueError):
        return None
    finally:
        q.close()


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


def unsupported(gen, backend, ref):
    """Why this generator cannot run this column's search on this backend,
    or None."""
    # The backend options these searches cannot carry: all but vhost-user's
    # ring, which sizes vupacegen's peer (the guest's NIC) and the
    # reference's virtio_user alike (hostgen.consumer()).
    other = set(backend.opts) - ({"ring"} if backend.name == "vhost-user" else set())
    if gen == "vupacegen" and (backend.name != "vhost-user" or other or backend.queues > 1):
        return "ndr.generator = vupacegen: on vhost-user (one queue pair; of its options ring only) only"
    if ref and backend.name == "vhost-user" and gen != "vupacegen":
        return ("the reference column's search on vhost-user runs with vupacegen (ndr.generator auto or vupacegen): "
                "the guest's socket is where its consumer sits")
    if ref and (gen == "python" or other or backend.queues > 1):
        return ("the reference column's search runs with pacegen (tap) or vupacegen (vhost-user), no backend "
                "options but vhost-user's ring, one queue pair")
    return None


def execute_run(run, m, guest, logdir, row):
    """The search on one column (the reference: no boot, hostgen's
    consumer in the guest's place); fills row (runs.base_row()'s) and
    returns it, every process ended."""
    backend = runs.backend_for(run, m, guest, row)
    if backend is None:
        return row
    p = run.params
    gen = p.get("generator", "python")
    ref = guest.name == "reference"
    why = unsupported(gen, backend, ref)
    if why:
        row.update(status="skipped", error=why, wall_s=0.0)
        return row
    if gen == "vupacegen":
        # vupacegen owns the guest's socket: no switch, no tap.
        backend = hostgen.VhostUserGen(backend.spec, backend.opts, backend.pin, backend.queues)
    elif ref:
        backend = hostgen.TapRef(backend.spec, backend.opts, backend.pin, backend.queues)
    row["generator"] = gen
    boot = vu = con = None
    t0 = time.monotonic()
    log = os.path.join(logdir, f"run-{run.index:04d}.log")
    row["log"] = os.path.relpath(log, os.path.dirname(logdir))
    peer_log = []
    exits = None
    linux = guest.name == "linux"
    try:
        if ref:
            backends.need_testpmd()
        backend.setup(logdir)
        backend.tap = backends.TAP
        if gen == "vupacegen":
            vu = VuGen(backend, p["size"]).start()  # before its socket's client
        if ref:
            # The consumer where the guest would be: on tap its tap PMD
            # makes the tap, on vhost-user its virtio_user connects to
            # vupacegen's socket.
            con = hostgen.consumer(backend, "macswap")
            con.start()
            if backend.name == "tap":
                backend.wait_tap()
            con.send("start")
            mac = REF_MAC
            row["cmdline"] = " ".join(con.cmdline)
        else:
            boot, cmdline = guest.start(run, backend, m.run_timeout)
            row["cmdline"] = cmdline
            runs.pin_vcpus(run, m, boot, row)  # pin.vcpu, before the first trial
            exits = kvmstats.start(boot)
            item = boot.proc.wait_line(lambda l: (l.startswith("pkt: ") or
                                                  l.startswith("vnetlab-linux listening l2 ") or
                                                  l.startswith("ERROR {")), 90)
            if not item or item[2].startswith("ERROR"):
                raise BenchError(f"guest not ready for the search; console tail:\n{boot.proc.tail()}")
            # The appliance's driver line, or the linux guest's listening line.
            mac = next((mm.group(1) for l in boot.proc.text("out")
                        for mm in [re.match(r"^(?:virtio-net: mac=|vnetlab-linux listening l2 .* mac=)(\S+)", l)]
                        if mm), None)
        if vu:
            vu.ready()
        settle = p.get("settle", 1.0)
        # Trials the guest counts too (PKT_TRIAL): the appliance's.
        guest_marks = marks_expected(linux, ref)

        def one(rate, lat=False):
            if vu:
                return vu_trial(vu, boot, mac, rate, p["trial"], peer_log, marks=guest_marks, lat=lat,
                                settle=settle)
            return peer_trial(backend, boot, mac, p["size"], p["mode"], rate, p["trial"], peer_log, marks=guest_marks,
                              lat=lat, gen=gen, settle=settle)

        # ndr.repeat searches in this boot, each after MLRsearch with its
        # own warm-up; the row's figures are their medians.
        searches, steps = [], []
        # KVM's counters over the searches: from the exit sampler's samples
        # (it holds the QMP socket, which takes one client: a second
        # connection got nothing under vupacegen, 2026-12-07), else read
        # directly.
        t_kvm0 = time.monotonic()
        kvm0 = kvm_counters(boot) if boot and not exits else None
        for i in range(p.get("repeat", 1)):
            f = search(one, p["max_rate"], p["pdr"], p["precision"], trial_s=p["trial"],
                       duration_sum=p.get("duration_sum", p["trial"]), exceed_ratio=p.get("exceed_ratio", 50) / 100.0,
                       warmup=bool(p.get("warmup", 1)))
            for st in f["steps"]:
                st["search"] = i
            steps += f["steps"]
            searches.append({"ndr": f["ndr"], "pdr": f["pdr"], "ndr_upper": f["ndr_upper"],
                             "pdr_upper": f["pdr_upper"], "trials": len(f["steps"])})
        found = {"ndr": median([x["ndr"] for x in searches]), "pdr": median([x["pdr"] for x in searches])}
        # Latency against offered load: one timed trial at each
        # ndr.latency percentage of the PDR found (0: the stream alone,
        # LAT0_PPS or 1 % of the PDR), the same boot.
        lat_steps = []
        for pct in p.get("latency") or ():
            rate = lat_rate(found["pdr"], pct)
            lat_steps.append(dict(one(rate, lat=True), load=pct, rate=rate))
        trials = steps + lat_steps
        if ref:
            # The consumer's count of the run: stop it after the last trial,
            # once it read the last marker (stopped at once, it missed it
            # in one run of 2026-12-07: sent + markers = its RX + 1).
            time.sleep(max(0.5, settle))
            fwd = con.stop_forwarding().get(0, {})
            obj = {"rx_frames": fwd.get("RX-packets"), "tx_frames": fwd.get("TX-packets")}
            row.update(accel="none", kvm_counters="n/a", kvm_counters_why="no VM")
        else:
            t_kvm1 = time.monotonic()
            kvm1 = kvm_counters(boot) if not exits else None
            if exits:
                exits.settle(time.monotonic())
            row.update(kvm_columns(exits, trials, found["ndr"]))
            obj = runs.final_result(boot, row, p["trial"] + 30, " after the search")
        bits = frame_bits(p["size"])
        row.update(ndr_pps=found["ndr"], pdr_pps=found["pdr"], ndr_mbps=round(found["ndr"] * bits / 1e6, 3),
                   pdr_mbps=round(found["pdr"] * bits / 1e6, 3), ndr_trials=len(steps) // len(searches),
                   ndr_steps=steps, ndr_searches=searches, ndr_settings=f["settings"])
        # A figure whose trial the generator could not offer in time is a
        # floor of the guest's limit, not the limit: said in the row.
        row["ndr_generator_limited"] = any(
            s["generator_limited"] for s in steps if s["pass"] and not s["warmup"] and
            s["rate"] in (found["ndr"], found["pdr"]))
        row["ndr_max_offered_pps"] = max(s["offered_pps"] for s in steps)
        if lat_steps:
            row["lat_steps"] = [{k: v for k, v in t.items() if k != "rtt"} | {
                f"lat_{k}": v for k, v in (t.get("rtt") or {}).items() if k != "n"} | {
                "lat_n": (t.get("rtt") or {}).get("n", 0)} for t in lat_steps]
        # Both ends, over every trial of the boot (search and latency):
        # what the peer sent must be what the guest received plus the
        # backend's drops, what the guest forwarded must be what came back
        # plus what the peer's socket dropped.
        sent = sum(s["sent"] for s in trials)
        back = sum(s.get("back_frames", s["received"]) for s in trials)
        tap_drops = sum(s["tap_tx_dropped"] for s in trials)
        sock_drops = sum(s["peer_sock_drops"] for s in trials)
        # Markers the backend took (pktpeer's always; vupacegen's port may
        # refuse one, said in its step).
        marks = sum(1 for s in trials if s.get("marker_sent", True))
        if ref:
            check = ref_check(sent, tap_drops, marks, fwd, back, sock_drops)
        elif linux:
            # eth0's counters over the serving phase: every frame, the
            # trial markers (one per trial, reflected too) included.
            check = {"peer_sent": sent, "tap_dropped": tap_drops, "markers": marks,
                     "guest_received": obj.get("rx_frames"), "guest_forwarded": obj.get("tx_frames"),
                     "guest_dropped": (obj.get("rx_frames") or 0) - (obj.get("tx_frames") or 0),
                     "peer_back": back, "peer_sock_drops": sock_drops, "counted_by": "eth0 statistics"}
            check["closes"] = run_closes(check, linux)
        else:
            check = {"peer_sent": sent, "tap_dropped": tap_drops, "guest_received": obj.get("seq_frames"),
                     "guest_forwarded": obj.get("frames"),
                     "guest_counted": (obj.get("rx_other") or 0) + (obj.get("fwd_unsent") or 0),
                     "peer_back": back, "peer_sock_drops": sock_drops}
            check["closes"] = run_closes(check, linux)
        if vu:
            check["dropped_at"] = ("refused at vupacegen's port: the receiving ring (the guest's, or the reference's "
                                  "virtio_user's) was full")
        check["trials_closed"] = sum(1 for s in trials if s.get("closes"))
        check["trials_unmarked"] = sum(1 for s in trials if s.get("closes") is None)
        row["ndr_check"] = check
        if exits and exits.samples:
            grew = kvmstats.interval(exits.samples, t_kvm0, t_kvm1)
        else:
            grew = {k: kvm1[k] - kvm0[k] for k in kvm0 if k in kvm1} if kvm0 and kvm1 else {}
        if not ref and grew and check.get("guest_received"):
            # KVM's exits over every trial of the boot (QMP query-stats,
            # before the first search and after the last trial) per million
            # frames the guest received.
            per = 1e6 / check["guest_received"]
            for k in ("exits", "io_exits", "halt_exits", "irq_injections"):
                if k in grew:
                    row[f"kvm_{k}_per_mframe"] = round(grew[k] * per, 1)
        if check["trials_unmarked"] and guest_marks:
            # A trial the guest never counted makes every loss figure of
            # the run doubtful: the row fails, saying what each side saw.
            bad = [{k: s.get(k) for k in ("rate", "sent", "received", "tap_tx_dropped", "marker_s", "marker_sent",
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
        for other in (con, vu):
            if other:
                other.stop()
        bproc = backend.proc
        backend.teardown()
        if row.get("status") == "ok" and backend.name == "vhost-user" and bproc:
            close_at_switch(row["ndr_check"], hostgen.parse_forward_stats(bproc.text()), linux)
        row["wall_s"] = round(time.monotonic() - t0, 2)
        try:
            runs.write_log(log, boot, None, bproc)
            with open(log, "a") as f:
                for other in (con, vu):
                    if other and other.proc:
                        f.write(f"==== {other.proc.name}: {' '.join(other.proc.argv)}\n")
                        for tt, st_, l in other.proc.lines:
                            f.write(f"{tt - other.proc.t0:9.3f} {st_} {l}\n")
                for r in peer_log:
                    f.write("pktpeer " + json.dumps(r) + "\n")
        except OSError:
            pass
    return row


def marks_expected(linux, ref):
    """Does every trial of this column carry the guest's PKT_TRIAL line?
    The appliance's do; the Linux guest's XDP_TX and the reference's
    testpmd print none."""
    return not (linux or ref)


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


def searches_of(row):
    """The searches of a row: ndr.repeat of them in one boot
    (ndr_searches), or the row's figures as one."""
    return row.get("ndr_searches") or [{"ndr": row["ndr_pps"], "pdr": row["pdr_pps"],
                                        "trials": row.get("ndr_trials")}]


def _accel_of(column):
    """COLUMN@ACCEL's accelerator suffix ("" without one)."""
    return column.split("@", 1)[1] if "@" in column else ""


def report_columns(columns, rows):
    """The columns to show, in the given order, then those only the rows
    name: vnetbench passes the matrix's guest and variant names, while a
    run over several accelerators (or machines, queue counts) names its
    rows COLUMN@ACCEL."""
    out = [c for c in columns if any(r["column"] == c for r in rows)]
    return out + list(dict.fromkeys(r["column"] for r in rows if r["column"] not in out))


def rfc2544_table(rows, columns):
    """report.md lines: frame size x column, NDR and PDR in Mpps and
    Gbit/s (medians over every search: repetitions x ndr.repeat), per
    backend; then per backend and frame size the appliance's columns
    against the Linux guest's and the no-guest reference's of the same
    accelerator (x Linux, x reference: NDR / NDR)."""
    out = []
    ok = [r for r in rows if r.get("test") == "ndr" and r.get("status") == "ok"]
    if not ok:
        return out
    for backend in sorted({r["backend"] for r in ok}):
        sel = [r for r in ok if r["backend"] == backend]
        st = sel[0].get("ndr_settings") or {}
        how = (f"MLRsearch: duration sum {st['duration_sum']} s, exceed ratio {st['exceed_ratio'] * 100:g} %, width "
               f"{st['width_pct']} %, warm-up {'yes' if st['warmup'] else 'no'}; " if st else "")
        out += [f"### RFC 2544 throughput ({backend}; mode {sel[0].get('mode')}, trial {sel[0].get('trial')} s, "
                f"PDR <= {sel[0].get('pdr')} % loss)", "",
                "NDR / PDR per frame size (RFC 2544 sizes, the FCS included; Gbit/s of those frame bytes): "
                f"{how}Mpps, Gbit/s; median of the searches, n = searches (repetitions x ndr.repeat; then the "
                "lowest-highest NDR and PDR), trials = trials of one search (median); "
                "generator-limited: the host peer could not offer that rate in time, the figure is a floor", ""]
        cols = report_columns(columns, sel)
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
                bits = frame_bits(rs[0]["size"]) / 1e9
                ss = [x for r in rs for x in searches_of(r)]
                ndr_v, pdr_v = [x["ndr"] for x in ss], [x["pdr"] for x in ss]
                # The spread of the searches: a median alone hides a
                # search that found half the rate.
                spread = "" if len(ss) < 2 else (
                    f", NDR {min(ndr_v) / 1e6:.4f}-{max(ndr_v) / 1e6:.4f}"
                    f" PDR {min(pdr_v) / 1e6:.4f}-{max(pdr_v) / 1e6:.4f} Mpps")
                trials = median([x["trials"] or 0 for x in ss])
                cells.append(f"NDR {median(ndr_v) / 1e6:.4f} Mpps {median(ndr_v) * bits:.4f} Gbit/s, "
                             f"PDR {median(pdr_v) / 1e6:.4f} Mpps {median(pdr_v) * bits:.4f} Gbit/s "
                             f"(n={len(ss)}{spread}, trials {trials}"
                             f"{'' if all(r['ndr_check']['closes'] for r in rs) else ', counts do not close'}"
                             f"{', generator-limited' if any(r.get('ndr_generator_limited') for r in rs) else ''})")
            out.append(f"| {z} | " + " | ".join(cells) + " |")
        out.append("")
        out += ratio_table(sel, cols, sizes, backend,
                           [r for r in rows if r.get("test") == "ndr" and r.get("backend") == backend])
    return out


def ratio_table(sel, cols, sizes, backend, every):
    """The appliance's columns against the Linux guest (XDP_TX) and the
    no-guest reference of the same accelerator and frame size: NDR, PDR
    (medians, frames/s), x Linux and x reference (NDR / NDR), and KVM's
    exits per million frames the guest received (kvm_exits_per_mframe:
    over the whole boot's trials, the gaps between them included); a column
    whose rows failed says so with its error (every: all ndr rows of the
    backend, failed ones too)."""
    mine = [c for c in cols if not c.split("@")[0] in ("linux", "reference")]
    if not mine:
        return []
    out = [f"**{backend}: the appliance against Linux XDP_TX and the no-guest reference (NDR / NDR, one run)**", "",
           "| frame size | column | NDR frames/s | PDR frames/s | Linux NDR | x Linux | reference NDR | x reference | "
           "KVM exits per million frames |",
           "|---|---|---|---|---|---|---|---|---|"]
    for z in sizes:
        for c in mine:
            rs = [r for r in sel if r["column"] == c and str(r["size"]) == z]
            if not rs:
                continue
            ndr_v = median([x["ndr"] for r in rs for x in searches_of(r)])
            pdr_v = median([x["pdr"] for r in rs for x in searches_of(r)])
            cells = [f"{ndr_v:,}", f"{pdr_v:,}"]
            for other in ("linux", "reference"):
                name = other + ("@" + _accel_of(c) if _accel_of(c) else "")
                os_ = [r for r in sel if r["column"] == name and str(r["size"]) == z]
                if not os_:
                    bad = [r for r in every if r["column"] == name and str(r["size"]) == z]
                    cells += [f"failed: {bad[0].get('error', '?')[:120]}" if bad else "not run", "-"]
                    continue
                o = median([x["ndr"] for r in os_ for x in searches_of(r)])
                cells += [f"{o:,}", f"{ndr_v / o:.2f}" if o else "-"]
            ex = [r["kvm_exits_per_mframe"] for r in rs if r.get("kvm_exits_per_mframe") is not None]
            cells.append(f"{median(ex):,.0f}" if ex else "-")
            out.append(f"| {z} | {c} | " + " | ".join(cells) + " |")
    out.append("")
    return out


def latency_table(rows, columns):
    """report.md lines: the round trips of the timed trials at ndr.latency
    percentages of each run's PDR (the peer's, from send() to the kernel's
    receive stamp), per backend and frame size: a row per column and load,
    medians over the repetitions."""
    ok = [r for r in rows if r.get("test") == "ndr" and r.get("status") == "ok" and r.get("lat_steps")]
    if not ok:
        return []
    out = ["### Latency against offered load (packet level: ndr.latency)", "",
           "Each run found its PDR (the median of its searches), then offered one trial at each percentage of it in "
           "the same boot (0 %: the stream alone, ndr.LAT0_PPS frames/s or 1 % of the PDR), the peer timing every "
           "frame's round trip (tests/tools/pktpeer.py swap with LAT 1: from the generator's send stamp in the "
           "frame, or with the Python peer from just after its send(), to the kernel's receive stamp of the frame "
           "that came back; vupacegen on vhost-user: from its send stamp to the TSC when it read the frame back). "
           "Asked = the trial's rate, offered = what "
           "the peer really sent per second (below asked: the peer's limit, not the guest's). Latencies in us, "
           "medians over n runs; loss = frames of that trial that did not come back.", ""]
    for backend in sorted({r["backend"] for r in ok}):
        for z in sorted({str(r["size"]) for r in ok if r["backend"] == backend}):
            out += [f"**{backend}, {z} B**", "",
                    "| column | load % of PDR | asked frames/s | offered frames/s | loss % | p50 | p90 | p99 | p99.9 | "
                    "max | n |",
                    "|---|---|---|---|---|---|---|---|---|---|---|"]
            for c in report_columns(columns, ok):
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
           "ndr.latency", "ndr.duration_sum", "ndr.exceed_ratio", "ndr.warmup", "ndr.settle", "ndr.repeat")
REPORT = (rfc2544_table, latency_table)  # report.md: the RFC 2544 table, the packet-level latency table


def claims(run):
    # the reference column's searches too (execute_run: no boot)
    return TESTS[run.test]["kind"] == "ndr"


def run_row(run, m, guest, logdir, execute):
    return execute_run(run, m, guest, logdir, runs.base_row(run, m))
