"""host/pktgen/pacegen.c, the paced frame generator on a tap
(docs/packet-path.md, "A paced generator"): the rate it claims is the rate
the tap's own counters saw, within 1 %, at 10 kpps, 100 kpps and the
highest rate it holds (1 Mpps at least); its frames are the appliance's
(app=pkt reflect numbers them without a gap and returns each send stamp);
bad arguments are usage errors. Traffic only inside the test's namespace;
the rate test's sink is the namespace's tap held open as QEMU holds it but
never read (pktpeer.py hold: its queue fills, then the tap drops and counts
every frame in tx_dropped; what waits in the queue is read at the end)."""

import json
import os
import subprocess
import sys

from lib import BUILD, TOP, Fail, expect_refused, json_line, pkt_guest

PACEGEN = os.path.join(BUILD, "host", "pacegen")
PEER = [sys.executable, os.path.join(TOP, "tests", "tools", "pktpeer.py")]
DMAC = "52:54:00:12:34:56"


def need_pacegen():
    if not os.access(PACEGEN, os.X_OK):
        raise Fail(f"{PACEGEN} not built (make host-tools)")


def tap_count(ns):
    r = ns.run(["cat", f"/sys/class/net/{ns.tap}/statistics/tx_packets", f"/sys/class/net/{ns.tap}/statistics/tx_dropped"],
               timeout=10, capture_output=True, text=True)
    return sum(int(x) for x in r.stdout.split())


def pacegen(ns, args, timeout=60):
    r = ns.run([PACEGEN] + args, timeout=timeout, capture_output=True, text=True)
    if r.returncode or not r.stdout.strip():
        raise Fail(f"pacegen {' '.join(args)}: exit {r.returncode}: {r.stdout[-300:]} {r.stderr[-300:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def started(p, what):
    if p.stdout.readline().strip() != "listening":
        raise Fail(f"pktpeer {what} did not start")
    return p


def last_json(p, timeout):
    out, _ = p.communicate(timeout=timeout)
    return json.loads(out.strip().splitlines()[-1])


def paced_run(ns, rate, seconds):
    """One run of pacegen at rate into the tap, held open by pktpeer.py
    hold and sampled by pktpeer.py rate; returns (generator, sampler, tap
    delta once the holder read its queue)."""
    hold = started(ns.popen(PEER + ["hold", ns.tap, str(seconds + 60)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True), "hold")
    s = started(ns.popen(PEER + ["rate", ns.tap, "0.5", str(seconds + 20)], stdout=subprocess.PIPE, text=True),
                "rate")
    c0 = tap_count(ns)
    g = pacegen(ns, ["--fifo", ns.tap, DMAC, str(rate), str(seconds)], timeout=seconds + 30)
    sampled = last_json(s, seconds + 30)
    hold.stdin.write("\n")
    hold.stdin.flush()
    last_json(hold, 30)
    return g, sampled, tap_count(ns) - c0


def check_rate(ns, rate, seconds=2):
    """None if pacegen held rate, else what went wrong."""
    g, s, delta = paced_run(ns, rate, seconds)
    w, sw = g["win_10ms"], s["windows"]
    print(f"    pacegen {rate} frames/s, {seconds} s (no guest, a held tap nobody reads, --fifo): "
          f"{g['achieved_pps']:.0f} by its clock, {s['pps']:.0f} by the tap's counters (middle 80 %); "
          f"frames per 10 ms (target {w['target']:.0f}): its own p1/p50/p99 {w['p1']}/{w['p50']}/{w['p99']} "
          f"min {w['min']} max {w['max']} sd {w['sd']:.1f}; at the tap p1/p50/p99 {sw.get('p1')}/{sw.get('p50')}/"
          f"{sw.get('p99')} sd {sw.get('sd')}; late batches {g['late_batches']}, max lag "
          f"{g['max_lag_ns'] / 1e6:.2f} ms", flush=True)
    if g["refused"] or g["sent"] != g["offered"] or g["offered"] != round(rate * seconds):
        return f"offered {g['offered']} (expected {round(rate * seconds)}), sent {g['sent']}, refused {g['refused']}"
    if delta != g["sent"]:
        return f"the tap counted {delta} frames, pacegen says it sent {g['sent']}"
    if not 0 <= delta - s["frames"] <= 1000:
        return f"the sampler saw {s['frames']} frames, the tap's counters {delta} (the difference must be " \
               f"what waited in the tap's 1000-frame queue)"
    if abs(g["achieved_pps"] - rate) > rate / 100:
        return f"achieved {g['achieved_pps']} frames/s by its clock, not within 1 % of {rate}"
    if abs(s["pps"] - rate) > rate / 100:
        return f"the tap's counters rose by {s['pps']} frames/s, not within 1 % of {rate}"
    return None


def test_pacegen_rate_on_tap_within_one_percent(t):
    """10 k, 100 k, then 1, 1.5, 2, 2.5 Mpps until one is not held: the rate by
    the generator's clock and by the tap's counters (sampled every 10 ms
    from outside, the first and last 10 % of the run cut) within 1 % of the
    asked rate, every frame counted by the tap; 1 Mpps must hold (a run
    that misses gets one more try: this host is shared)."""
    need_pacegen()
    with t.netns() as ns:
        for rate in (10000, 100000):
            err = check_rate(ns, rate)
            if err:
                raise Fail(f"{rate} frames/s: {err}")
        best = None
        for rate in (1000000, 1500000, 2000000, 2500000):
            err = check_rate(ns, rate)
            if err and rate == 1000000:
                err = check_rate(ns, rate)
            if err:
                print(f"    pacegen: {rate} frames/s not held: {err}", flush=True)
                break
            best = rate
        if best is None:
            raise Fail(f"1 Mpps not held (twice): {err}")
        print(f"    pacegen: highest rate held within 1 %: {best} frames/s", flush=True)


def test_pacegen_frames_reflected_by_the_appliance(t):
    """pacegen's frames into app=pkt reflect at 5 kpps for 1 s, then a
    trial marker: the guest counts every frame the tap did not drop with
    its sequence number (no gap but the tap's drops, no reorder), prints
    its PKT_TRIAL line on the marker, and every frame comes back to the
    host's UDP socket carrying the send stamp pacegen wrote, 0-1 s before
    the kernel's receive stamp."""
    need_pacegen()
    rate, n = 5000, 5000
    with t.netns() as ns:
        g, mac = pkt_guest(t, ns, "pkt.mode=reflect pkt.idle=4")
        rx = ns.popen(PEER + ["stamps", "2", "60"], stdout=subprocess.PIPE, text=True)
        if rx.stdout.readline().strip() != "listening":
            raise Fail("pktpeer stamps did not start")
        gen = pacegen(ns, ["--trial", "1", "--marker-wait", "500", ns.tap, mac, str(rate), "1"])
        m = g.wait_line(r"^PKT_TRIAL (\{.*\})$", timeout=30)
        trial = json.loads(m.group(1))
        out, _ = rx.communicate(timeout=90)
        back = json.loads(out.strip().splitlines()[-1])
        g.wait()
        g.expect_ok()
        res = json_line(g, "RESULT")
    dropped = gen["if_tx_dropped"]
    print(f"    pacegen -> reflect (TCG, tap, {rate} frames/s, 1 s): sent {gen['sent']}, tap dropped {dropped}, "
          f"guest counted {trial['seq_frames']} (gaps {trial['seq_gaps']}), back {back['frames']}, round trip "
          f"from the frame's stamp p50 {back['rtt'].get('p50_ns', 0) / 1000:.0f} us "
          f"p99 {back['rtt'].get('p99_ns', 0) / 1000:.0f} us", flush=True)
    if gen["sent"] != n or gen["refused"] or gen["marker"] is not True:
        raise Fail(f"pacegen: expected {n} sent, none refused, the marker sent; saw {gen}")
    if trial["trial"] != 1 or trial["seq_frames"] + dropped != n or trial["seq_reorder"]:
        raise Fail(f"guest PKT_TRIAL: expected {n} - {dropped} tap drops numbered frames, no reorder; saw {trial}\n"
                   f"{g.tail(12)}")
    if trial["seq_gaps"] > dropped:
        raise Fail(f"guest saw {trial['seq_gaps']} sequence gaps, more than the tap's {dropped} drops")
    if back["frames"] != trial["seq_frames"] or back["seq_reorder"] or back["seq_gaps"] > dropped:
        raise Fail(f"back at the host: expected {trial['seq_frames']} frames in order, saw {back}")
    if back["stamp_out_of_range"] or back["rtt"]["n"] != back["frames"]:
        raise Fail(f"send stamps: every frame's must be 0-1 s before its receive stamp; saw {back}")
    if res["markers"] != 1:
        raise Fail(f"RESULT markers: expected 1, saw {res['markers']}")


def test_pacegen_counts_what_comes_back(t):
    """pacegen --back, the NDR search's receiver on tap, against a wire with
    known faults and no guest: pktpeer.py mirror holds the tap as QEMU does
    and returns every frame with the MACs swapped, as macswap does, but
    twice for number 5, never for 7, and 10 only after 11. pacegen at 2,000
    frames/s for 0.5 s must count exactly that: 1,000 frames back, 999
    numbers, one duplicate, one lost, one reordered, two gaps (7, and 10
    when 11 came first), nothing else read, no drop at its ring; each
    number's first copy timed (999 round trips); the marker after --settle
    ends the mirror. A count that is wrong in any of these fails."""
    need_pacegen()
    with t.netns() as ns:
        m = started(ns.popen(PEER + ["mirror", ns.tap, "60", "dup:5,drop:7,late:10"], stdout=subprocess.PIPE,
                             text=True), "mirror")
        g = pacegen(ns, ["--back", "--settle", "0.3", "--lat", "--trial", "3", ns.tap, DMAC, "2000", "0.5"])
        mir = last_json(m, 30)
    b = g.get("back") or {}
    print(f"    pacegen --back through a mirror that duplicates 5, drops 7 and returns 10 after 11: back {b}; "
          f"mirror {mir}", flush=True)
    if mir != {"read": 1000, "sent_back": 1000, "edited": ["dup:5", "drop:7", "late:10"], "not_seen": []}:
        raise Fail(f"the mirror: expected 1000 frames read and sent back, every edit made; saw {mir}")
    if g["sent"] != 1000 or g["refused"] or g["marker"] is not True or g["settle"] != 0.3:
        raise Fail(f"pacegen: expected 1000 sent, none refused, the marker sent after a 0.3 s settle; saw {g}")
    want = {"frames": 1000, "unique": 999, "dups": 1, "lost": 1, "seq_gaps": 2, "seq_reorder": 1, "last_seq": 999,
            "out_of_run": 0, "other": 0, "sock_drops": 0}
    got = {k: b.get(k) for k in want}
    if got != want:
        raise Fail(f"pacegen's count of what came back: expected {want}, saw {got}")
    rtt = b.get("rtt") or {}
    if rtt.get("n") != 999 or b.get("rtt_untimed") or not 0 < rtt.get("p50_ns", 0) < 1000000000:
        raise Fail(f"round trips: expected each of the 999 numbers timed once, 0-1 s; saw {rtt}, untimed "
                   f"{b.get('rtt_untimed')}")


def test_pacegen_bad_arguments(t):
    """A bad argument is exit status 2 with the reason on stderr, before any
    socket is opened."""
    need_pacegen()
    cases = [
        ([], "expected IFACE DMAC RATE SECONDS"),
        (["lo", "52:54:00:12:34:56", "0", "1"], "RATE"),
        (["lo", "52:54:00:12:34:56", "1e9", "1"], "RATE"),
        (["lo", "52:54:00:12:34:56", "1000", "0"], "SECONDS"),
        (["lo", "52:54:00:12:34:56", "1000", "4000"], "SECONDS"),
        (["lo", "52:54:00:12:34", "1000", "1"], "DMAC"),
        (["lo", "52:54:00:12:34:56:77", "1000", "1"], "DMAC"),
        (["no-such-if0", "52:54:00:12:34:56", "1000", "1"], "no interface"),
        (["--size", "63", "lo", "52:54:00:12:34:56", "1000", "1"], "--size"),
        (["--batch", "65", "lo", "52:54:00:12:34:56", "1000", "1"], "--batch"),
        (["--frobnicate", "lo", "52:54:00:12:34:56", "1000", "1"], "unknown option"),
        (["--lat", "lo", "52:54:00:12:34:56", "1000", "1"], "only with --back"),
        (["--settle", "1", "lo", "52:54:00:12:34:56", "1000", "1"], "only with --back"),
        (["--back", "--settle", "31", "lo", "52:54:00:12:34:56", "1000", "1"], "--settle"),
        (["--back", "--marker-wait", "5", "lo", "52:54:00:12:34:56", "1000", "1"], "no --marker-wait"),
        (["--back", "lo", "52:54:00:12:34:56", "100000000", "20"], "RATE x SECONDS"),
        (["--sleep", "5", "lo", "52:54:00:12:34:56", "1000", "1"], "--sleep"),
    ]
    for args, want in cases:
        r = subprocess.run([PACEGEN] + args, capture_output=True, text=True, timeout=10)
        if r.returncode != 2 or want not in r.stderr or r.stdout:
            raise Fail(f"pacegen {' '.join(args)}: expected exit 2 and '{want}' on stderr, nothing on stdout; "
                       f"saw {r.returncode}, stderr {r.stderr.strip()[:200]!r}, stdout {r.stdout[:100]!r}")


VUPACEGEN = os.path.join(BUILD, "host", "vupacegen")
# DPDK's runtime files go to /run: a tmpfs there, in a private mount namespace
VU_SCRIPT = "mount -t tmpfs vnetlab-vupacegen /run && exec \"$@\""


def vu_null_pmd(tag, args, timeout):
    """vupacegen's command line on DPDK's null PMD (no VM, no socket), in a
    private mount namespace, killed after timeout s; Fail when it is not
    built, Skip without root."""
    if not os.access(VUPACEGEN, os.X_OK):
        raise Fail(f"{VUPACEGEN} not built (make host-tools; needs Debian's dpdk-dev)")
    if os.geteuid() != 0:
        from lib import Skip
        raise Skip("needs root (a private mount namespace for DPDK's runtime files)")
    eal = ["--no-huge", "-m", "128", "--no-pci", "-l", "1", "--file-prefix", f"vnetlab-vupacegen-{tag}-{os.getpid()}",
           "--vdev", "net_null0", "--log-level", "*:error"]
    return ["timeout", "-s", "KILL", str(timeout), "unshare", "-m", "--propagation", "private", "sh", "-c", VU_SCRIPT,
            "sh", VUPACEGEN, *eal, "--", *args]


def vu_run(t, tmp, rate, seconds, mode="rxonly", kernel=None, gen_opts=()):
    """vupacegen on a vhost-user socket (its own private mount namespace
    with a tmpfs on /run for DPDK's runtime files, a hard timeout), the
    appliance in `mode` on the other end; returns (generator's line,
    guest's PKT_TRIAL, guest's RESULT)."""
    if not os.access(VUPACEGEN, os.X_OK):
        raise Fail(f"{VUPACEGEN} not built (make host-tools; needs Debian's dpdk-dev)")
    sock = os.path.join(tmp, "vu.sock")
    argv = ["timeout", "-s", "KILL", str(seconds + 150), "unshare", "-m", "--propagation", "private", "sh", "-c",
            VU_SCRIPT, "sh", VUPACEGEN, "--no-huge", "-m", "512", "--no-pci", "-l", "1", "--file-prefix",
            f"vnetlab-vupacegen-{os.getpid()}", "--vdev", f"net_vhost0,iface={sock}", "--",
            "--wait-go", "--trial", "1", *gen_opts, "52:54:00:12:34:56", str(rate), str(seconds)]
    errlog = open(os.path.join(tmp, "vupacegen.err"), "w")  # DPDK's own log
    gen = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog, text=True,
                           start_new_session=True)

    def stop_gen():
        if gen.poll() is None:
            os.killpg(gen.pid, 9)
            gen.wait()
    t.cleanups.append(stop_gen)
    line = gen.stdout.readline()
    if "waiting for the guest" not in line:
        errlog.flush()
        raise Fail(f"vupacegen did not come up: {line!r}; its log:\n{open(errlog.name).read()[-1500:]}")
    g = t.start(append=f"app=pkt backend=vhost-user pkt.mode={mode} pkt.seconds={seconds + 60} pkt.idle=3",
                net="none", timeout=seconds + 120, kernel=kernel,
                extra=["-object", "memory-backend-memfd,id=mem,size=512M,share=on", "-numa", "node,memdev=mem",
                       "-chardev", f"socket,id=c0,path={sock}", "-netdev", "vhost-user,id=n0,chardev=c0",
                       "-device", "virtio-net-pci,netdev=n0,disable-legacy=on,romfile=,vectors=0"])
    g.wait_line(r"^pkt: mode=\S+ .* ready$", timeout=60)
    line = gen.stdout.readline()
    if "guest up" not in line:
        raise Fail(f"vupacegen did not see the guest: {line!r}")
    gen.stdin.write("go\n")
    gen.stdin.flush()
    line = gen.stdout.readline()  # the result; the port stays up until stdin closes
    try:
        res = json.loads(line)
    except ValueError:
        raise Fail(f"vupacegen: no result line: {line!r}")
    if "error" in res:
        raise Fail(f"vupacegen: {res}")
    trial = json.loads(g.wait_line(r"^PKT_TRIAL (\{.*\})$", timeout=30).group(1))
    g.wait()
    gen.stdin.close()
    gen.wait(timeout=30)
    g.expect_ok()
    return res, trial, json_line(g, "RESULT")


def test_vupacegen_paced_into_rxonly_on_vhost_user(t):
    """vupacegen --fifo (DPDK, the vhost PMD on the guest's socket) at 100 kpps
    for 2 s into app=pkt rxonly: its rate within 1 % by its TSC, the
    guest's count = what the port took (its opackets, less the marker),
    gaps at most what the port refused (the guest's ring was full; no
    reorder), the trial marker seen."""
    import tempfile
    if os.geteuid() != 0:
        from lib import Skip
        raise Skip("needs root (a private mount namespace for DPDK's runtime files)")
    rate, seconds = 100000, 2
    with tempfile.TemporaryDirectory(prefix="vnetlab-vu-") as tmp:
        res, trial, r = vu_run(t, tmp, rate, seconds, gen_opts=("--fifo",))
    w = res["win_10ms"]
    print(f"    vupacegen -> rxonly (TCG, vhost-user, {rate} frames/s, {seconds} s): {res['achieved_pps']:.0f} by its "
          f"TSC, sent {res['sent']}, refused {res['refused']}, guest counted {trial['seq_frames']} "
          f"(gaps {trial['seq_gaps']}); frames per 10 ms (target {w['target']:.0f}) p1/p50/p99 "
          f"{w['p1']}/{w['p50']}/{w['p99']} min {w['min']} max {w['max']}; guest pps {r.get('pps')}", flush=True)
    n = rate * seconds
    if res["offered"] != n or res["sent"] + res["refused"] != n or res["port_opackets"] != res["sent"] + 1:
        raise Fail(f"vupacegen: expected {n} offered = sent + refused, opackets = sent + the marker; saw {res}")
    if abs(res["achieved_pps"] - rate) > rate / 100:
        raise Fail(f"vupacegen: {res['achieved_pps']} frames/s by its TSC, not within 1 % of {rate}")
    if trial["seq_frames"] != res["sent"] or trial["seq_reorder"] or trial["seq_gaps"] > res["refused"]:
        raise Fail(f"guest: expected {res['sent']} numbered frames, at most {res['refused']} gaps, no reorder; "
                   f"saw {trial}")
    if res["marker"] is not True or r["markers"] != 1:
        raise Fail(f"trial marker: sent {res['marker']}, the guest saw {r['markers']}")


def test_pacegen_as_ndr_generator_key(t):
    """ndr.generator: auto by default (pacegen in the params of every
    frame size but imix on tap, vupacegen on vhost-user, imix keeps the
    Python peer), pacegen reaches the run's params, anything else and
    pacegen with imix are refused naming the key; ndr.py hands pktpeer.py
    swap the built generator's path and runs the built vupacegen."""
    sys.path.insert(0, os.path.join(TOP, "host", "bench"))
    import matrix
    import ndr
    from procs import BenchError

    settings, defs = matrix.parse_file(os.path.join(TOP, "host", "bench", "matrices", "ndr.txt"))
    settings["ndr.sizes"] = "64 1518 imix"
    runs = [r for r in matrix.Matrix(settings, defs, lambda v: "", ("vnetlab", "linux")).runs() if r.test == "ndr"]
    def auto(r):
        return None if r.params["size"] == "imix" else "vupacegen" if r.backend == "vhost-user" else "pacegen"
    if not runs or any(r.params.get("generator") != auto(r) for r in runs) or \
            {r.backend for r in runs} != {"tap", "vhost-user"}:
        raise Fail(f"default ndr.generator: expected pacegen on tap, vupacegen on vhost-user, python for imix, "
                   f"got {[(r.backend, r.params) for r in runs][:4]}")
    settings["ndr.generator"], settings["ndr.sizes"] = "pacegen", "64 1518"
    runs = [r for r in matrix.Matrix(settings, defs, lambda v: "", ("vnetlab", "linux")).runs() if r.test == "ndr"]
    if not runs or any(r.params.get("generator") != "pacegen" for r in runs):
        raise Fail(f"ndr.generator = pacegen: expected it in every ndr run's params, got {[r.params for r in runs][:2]}")
    for bad, sizes in (("trafgen", "64"), ("pacegen", "64 imix")):
        settings["ndr.generator"], settings["ndr.sizes"] = bad, sizes
        expect_refused(lambda: matrix.Matrix(settings, defs, lambda v: "", ("vnetlab", "linux")), BenchError,
                       r"ndr\.generator", f"ndr.generator = {bad} with ndr.sizes = {sizes}")
    if ndr.PACEGEN != PACEGEN or ndr.VUPACEGEN != VUPACEGEN:
        raise Fail(f"ndr.py runs {ndr.PACEGEN} and {ndr.VUPACEGEN}, make builds {PACEGEN} and {VUPACEGEN}")

    # peer_trial's pktpeer.py command line, the peer faked.
    class Backend:
        tap = "vnbtap0"

        def wrap(self, argv):
            return argv

    argvs = []

    def fake_run(argv, timeout, check):
        argvs.append(argv)
        line = json.dumps({"sent": 10, "tap_tx_dropped": 0, "send_s": 1.0, "back": {"frames": 10, "sock_drops": 0}})
        return subprocess.CompletedProcess(argv, 0, line, "")

    real = ndr.procs.run
    ndr.procs.run = fake_run
    try:
        for gen, want in (("python", "python"), ("pacegen", PACEGEN)):
            ndr.peer_trial(Backend(), None, DMAC, 64, "macswap", 10, 1, [], marks=False, gen=gen)
            if argvs[-1][-2] != want or argvs[-1][2] != "swap" or \
                    argvs[-1][-1] != (ndr.PACEGEN_OPTS if gen == "pacegen" else ""):
                raise Fail(f"ndr.peer_trial with gen={gen}: expected pktpeer.py swap ... {want}, got {argvs[-1]}")
    finally:
        ndr.procs.run = real


def test_pacegen_drives_an_ndr_trial(t):
    """One NDR trial as ndr.py runs it with ndr.generator = pacegen
    (pktpeer.py swap GEN=pacegen: pacegen --back sends, counts what comes
    back in its own thread and times it from each frame's stamp, then the
    trial marker), into
    app=pkt macswap at 100,000 frames/s for 1 s (more than the guest takes
    under TCG: loss at the tap and at the peer's socket): the count closes
    at both ends (sent = guest received + tap drops; forwarded = back +
    socket drops, which must not count the peer's own outgoing frames),
    and every returned frame has a round trip."""
    need_pacegen()
    rate, n = 100000, 100000
    with t.netns() as ns:
        g, mac = pkt_guest(t, ns, "pkt.mode=macswap pkt.idle=4")
        r = ns.run(PEER + ["swap", ns.tap, mac, str(n), str(rate), "macswap", "1", "64", "0", "1", PACEGEN],
                   timeout=120, capture_output=True, text=True)
        if r.returncode or not r.stdout.strip():
            raise Fail(f"pktpeer swap with pacegen: exit {r.returncode}: {r.stdout[-300:]} {r.stderr[-300:]}")
        res = json.loads(r.stdout.strip().splitlines()[-1])
        trial = json.loads(g.wait_line(r"^PKT_TRIAL (\{.*\})$", timeout=30).group(1))
        g.wait()
        g.expect_ok()
    back = res["back"]
    print(f"    ndr trial by pacegen (TCG, tap, macswap, {rate} frames/s, 1 s): sent {res['sent']} in "
          f"{res['send_s']} s, tap dropped {res['tap_tx_dropped']}, guest received {trial['seq_frames']}, "
          f"forwarded {trial['frames']}, back {back['frames']} (+{back['sock_drops']} socket drops); round trip "
          f"p50 {back['rtt'].get('p50_ns', 0) / 1000:.0f} us p99 {back['rtt'].get('p99_ns', 0) / 1000:.0f} us",
          flush=True)
    if res.get("generator") != "pacegen" or res.get("receiver") != "pacegen" or res["sent"] + res["gen_refused"] != n:
        raise Fail(f"expected pacegen to offer {n} frames, saw {res}")
    if abs(res["sent"] / res["send_s"] - rate) > rate / 100:
        raise Fail(f"pacegen offered {res['sent']} in {res['send_s']} s, not within 1 % of {rate} frames/s")
    if res["sent"] != trial["seq_frames"] + res["tap_tx_dropped"]:
        raise Fail(f"into the guest: sent {res['sent']} != received {trial['seq_frames']} + tap drops "
                   f"{res['tap_tx_dropped']}")
    if trial["frames"] + trial["pend"] != back["frames"] + back["sock_drops"]:
        raise Fail(f"out of the guest: forwarded {trial['frames']} + pending {trial['pend']} != back "
                   f"{back['frames']} + socket drops {back['sock_drops']}")
    if back["dups"] or back["out_of_run"] or back["unique"] != back["frames"] or \
            back["lost"] != res["sent"] - back["frames"]:
        raise Fail(f"pacegen's count of what came back: no duplicate, every number of this run, lost = sent - "
                   f"back; saw {back}")
    if back["rtt"]["n"] != back["frames"]:
        raise Fail(f"every returned frame timed from its stamp: {back['rtt']['n']} of {back['frames']}")


def test_vupacegen_bad_arguments(t):
    """vupacegen: a bad argument after the EAL's is exit status 2 with the
    reason on stderr, before the port is set up (EAL on DPDK's null PMD, in
    a private mount namespace)."""
    vu_null_pmd("args", [], 60)  # built, root
    cases = [
        ([], "expected DMAC RATE SECONDS"),
        (["52:54:00:12:34:56", "0", "1"], "RATE"),
        (["52:54:00:12:34:56", "1000", "4000"], "SECONDS"),
        (["52:54:00:12:34", "1000", "1"], "DMAC"),
        (["--size", "1519", "52:54:00:12:34:56", "1000", "1"], "--size"),
        (["--burst", "0", "52:54:00:12:34:56", "1000", "1"], "--burst"),
        (["--serve", "52:54:00:12:34:56"], "--serve takes its trials on stdin"),
        (["--serve", "--fifo"], "--fifo"),
    ]
    for args, want in cases:
        r = subprocess.run(vu_null_pmd("args", args, 60), capture_output=True, text=True, timeout=90)
        if r.returncode != 2 or want not in r.stderr:
            raise Fail(f"vupacegen -- {' '.join(args)}: expected exit 2 and '{want}' on stderr; saw {r.returncode}, "
                       f"stderr {r.stderr.strip()[-300:]!r}, stdout {r.stdout[-200:]!r}")


def test_vupacegen_serve_protocol(t):
    """vupacegen --serve (the NDR search's generator on vhost-user) on
    DPDK's null PMD, no VM: "ready" once the port is up, a bad trial line
    answered with an error and the loop going on, a trial's line with
    offered = rate x seconds = sent + refused, the marker sent (the port's
    opackets = sent + 1), nothing numbered back (the null PMD returns no
    frame of ours; what it returns is back_other), round trips asked for
    and none timed; quit ends it with status 0."""
    gen = subprocess.Popen(vu_null_pmd("serve", ["--serve"], 90), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           start_new_session=True)

    def stop_gen():
        if gen.poll() is None:
            os.killpg(gen.pid, 9)
            gen.wait()
    t.cleanups.append(stop_gen)

    def ask(line):
        gen.stdin.write(line + "\n")
        gen.stdin.flush()
        return json.loads(gen.stdout.readline())

    lines = []
    while len(lines) < 50 and not (lines and (lines[-1] in ("vupacegen: ready", "") or lines[-1].startswith("{"))):
        lines.append(gen.stdout.readline().strip())
    mine = [l for l in lines if l.startswith(("vupacegen", "{"))]
    if mine != ["vupacegen: port 0 up, waiting for the guest", "vupacegen: ready"]:
        raise Fail(f"vupacegen --serve: expected the port up, then ready; saw {lines}")
    for bad in ("trial 0 52:54:00:12:34:56 0 1 0 0", "trial 1 52:54:00:12:34 1000 0.1 0 0",
                "trial 1 52:54:00:12:34:56 1000 0.1 0 2", "trial 1 52:54:00:12:34:56 1000 0.1 0 0 extra", "go"):
        r = ask(bad)
        if "error" not in r or "trial N DMAC RATE" not in r["error"]:
            raise Fail(f"vupacegen --serve: {bad!r} answered {r}, expected the command's usage as an error")
    r = ask(f"trial 7 {DMAC} 10000 0.5 0.05 1")
    if r.get("trial") != 7 or r["offered"] != 5000 or r["sent"] + r["refused"] != 5000 or r["marker"] is not True or \
            r["port_opackets"] != r["sent"] + 1 or r["back"] != 0 or r["rtt"] != {"n": 0}:
        raise Fail(f"vupacegen --serve trial 7 at 10000 frames/s for 0.5 s: {r}")
    if abs(r["achieved_pps"] - 10000) > 100:
        raise Fail(f"vupacegen --serve: {r['achieved_pps']} frames/s by its TSC, not within 1 % of 10000")
    gen.stdin.write("quit\n")
    gen.stdin.flush()
    if gen.wait(timeout=30) != 0:
        raise Fail(f"vupacegen --serve: quit ended it with {gen.returncode}: {gen.stderr.read()[-300:]}")
