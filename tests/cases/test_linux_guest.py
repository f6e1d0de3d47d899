"""The stock Linux guest (host/linux-guest/, the harness's `linux` column)
is part of the product: built from Debian packages, booted once with the
QEMU command line the harness gives it (same machine, CPU model, NIC, tap
in a namespace), it serves one short sockperf RR and one short iperf stream
from the host, reports what it ran with, and powers off with its exit line.
Short on purpose (TCG boot ~10 s, 2 s of each test)."""

import json
import os
import re
import subprocess
import sys

from lib import BUILD, NS_GUEST_IP, NS_PREFIX, TOP, Fail, Guest

BENCH = os.path.join(TOP, "host", "bench")
sys.path.insert(0, BENCH)


def test_linux_guest_serves_rr_and_stream(t):
    import backends
    import guests
    import matrix

    r = subprocess.run([os.path.join(TOP, "host", "linux-guest", "build.sh")], capture_output=True, text=True,
                       timeout=1200)
    if r.returncode:
        raise Fail(f"host/linux-guest/build.sh failed ({r.returncode}): {(r.stdout + r.stderr)[-1200:]}")
    with t.netns() as ns:
        # The harness's own QEMU command line for this guest, with the
        # busypoll tuning (its sysctls are applied and reported), then
        # told to serve both tests in this one boot.
        m = matrix.Matrix({"guests": "linux:busypoll", "tests": "tcp_rr", "rr.role": "server", "rr.instances": "1",
                           "accel": "tcg", "seconds": "2", "warmup": "0"}, {"default": ""}, lambda v: None,
                          list(guests.KINDS))
        lin = guests.make("linux:busypoll", m, lambda s: None)
        lin.prepare()
        tap = backends.make("tap", "tap", {})
        run = m.runs()[0]
        argv, cmdline, accel = lin.argv(run, tap, 120)
        argv = [re.sub(r"\bvnl\.app=rr\b", "vnl.app=rr+stream", a) if a == cmdline else a for a in argv]
        argv = [a.replace(f"ifname={backends.TAP}", f"ifname={ns.tap}") for a in argv]
        if "-cpu" not in argv or argv[argv.index("-cpu") + 1] != guests.CPU_MODEL[accel]:
            raise Fail(f"the linux guest must run with the shared CPU model {guests.CPU_MODEL[accel]}: {argv}")
        with open(os.path.join(TOP, "host", "qemu-run.sh")) as f:
            qr = f.read()
        # Under KVM qemu-run.sh takes the richest model its probe boots,
        # host first (kvm_pick); TCG has one default.
        for acc, model in guests.CPU_MODEL.items():
            default = f"${{kvm_cpu:-{model}}}" if acc == "kvm" else model
            if f'{acc}) cpu=(-accel {acc} -cpu "${{cpu_model:-{default}}}")' not in qr:
                raise Fail(f"host/qemu-run.sh's default CPU model for {acc} is not guests.CPU_MODEL's {model}")
        g = Guest(ns.exec_argv(argv), 120, t.name)
        t.guests.append(g)
        g.wait_line(r"^vnetlab-linux listening tcp port=11111 app=rr$", timeout=90)
        g.wait_line(r"^vnetlab-linux listening tcp port=5001 app=stream$", timeout=15)
        sp = ns.run(["sockperf", "ping-pong", "-i", NS_GUEST_IP, "-p", "11111", "--tcp", "-m", "64", "-t", "2",
                     "--full-rtt"], timeout=60, capture_output=True, text=True)
        ip = ns.run(["iperf", "-c", NS_GUEST_IP, "-p", "5001", "-t", "2", "-l", "16K", "-f", "m"], timeout=60,
                    capture_output=True, text=True)
        g.wait()
        out = sp.stdout + sp.stderr
        m_rtt = re.search(r"percentile 50.000 =\s+([\d.]+)", out)
        m_n = re.search(r"\[Total Run\].*SentMessages=(\d+); ReceivedMessages=(\d+)", out)
        if not m_rtt or not m_n or int(m_n.group(2)) < int(m_n.group(1)) - 1 or int(m_n.group(2)) < 100:
            raise Fail(f"sockperf ping-pong against the linux guest: no round trips or replies missing:\n{out[-800:]}")
        rates = re.findall(r"([\d.]+) Mbits/sec", ip.stdout)
        if not rates or float(rates[-1]) <= 0:
            raise Fail(f"iperf -c against the linux guest printed no rate:\n{(ip.stdout + ip.stderr)[-800:]}")
        res = json.loads(g.expect(r"^RESULT (\{.*\})$").group(1))
        want = {"guest": "linux", "app": "rr+stream", "tuning": "busypoll",
                "sysctl": "net.core.busy_poll=50,net.core.busy_read=50"}
        bad = {k: res.get(k) for k, v in want.items() if res.get(k) != v}
        if bad or res.get("end") not in ("idle", "stop") or res["rx_frames"] < 100:
            raise Fail(f"linux RESULT: expected {want}, end idle, traffic; differs in {bad}: {res}")
        if not re.fullmatch(r"[a-z]+:mitigated=\d+,vulnerable=\d+,unaffected=\d+", res.get("mitigations", "")):
            raise Fail(f"linux RESULT must report the kernel's mitigations, saw {res.get('mitigations')!r}")
        said = [l for l in g.text() if l.startswith("vnetlab-linux exit status=")]
        if g.status != 0 or said != ["vnetlab-linux exit status=0"]:
            raise Fail(f"the linux guest must power off (QEMU 0) after its exit line: status {g.status}, {said}")
        print(f"    linux guest (TCG, tap, busypoll): sockperf TCP 64 B RTT p50 {float(m_rtt.group(1)):.1f} us, "
              f"iperf host->guest {float(rates[-1]):.0f} Mbit/s (2 s each, smoke figures only)")


def linux_boot(t, ns, settings, keys_edit=None, timeout=120):
    """The harness's own QEMU command line for the linux guest in one
    matrix's first run, on this test's namespace tap."""
    import backends
    import guests
    import matrix

    r = subprocess.run([os.path.join(TOP, "host", "linux-guest", "build.sh")], capture_output=True, text=True,
                       timeout=1200)
    if r.returncode:
        raise Fail(f"host/linux-guest/build.sh failed ({r.returncode}): {(r.stdout + r.stderr)[-1200:]}")
    m = matrix.Matrix({"guests": "linux", "accel": "tcg", "warmup": "0", **settings}, {"default": ""},
                      lambda v: None, list(guests.KINDS))
    lin = guests.make("linux", m, lambda s: None)
    lin.prepare()
    tap = backends.make("tap", "tap", {})
    argv, _, _ = lin.argv(m.runs()[0], tap, timeout)
    argv = [a.replace(f"ifname={backends.TAP}", f"ifname={ns.tap}") for a in argv]
    g = Guest(ns.exec_argv(argv), timeout, t.name)
    t.guests.append(g)
    return g


PKTPEER = os.path.join(TOP, "tests", "tools", "pktpeer.py")


def test_linux_guest_pktgen_counts_exactly(t):
    """The linux column of pkt_txonly: the kernel's pktgen (loaded only for
    it) at full speed; every frame it says it sent left eth0 and reached
    the host's sink or a counted drop."""
    with t.netns() as ns:
        sink = ns.popen([sys.executable, PKTPEER, "recv", ns.tap, "3", "120"], stdout=subprocess.PIPE, text=True)
        if sink.stdout.readline().strip() != "listening":
            raise Fail("pktpeer recv did not start")
        g = linux_boot(t, ns, {"tests": "pkt_txonly", "pkt.sizes": "64", "seconds": "3"})
        g.wait_line(r"^vnetlab-linux pktgen start size=64 burst=32 seconds=3 queues=1$", timeout=90)
        res = json.loads(g.wait_line(r"^RESULT (\{.*\})$", timeout=60).group(1))
        g.wait()
        peer = json.loads(sink.communicate(timeout=60)[0].strip().splitlines()[-1])
        if res.get("app") != "pktgen" or res.get("errors") != 0 or not res.get("pps") or res["frames"] < 1000:
            raise Fail(f"pktgen RESULT: expected frames, a rate and no errors: {res}")
        # pktgen's own count is what the driver took; eth0 counted each.
        if res["tx_frames"] != res["frames"]:
            raise Fail(f"pktgen says {res['frames']} frames sent, eth0 counted {res['tx_frames']}: {res}")
        got = peer["unnumbered"] + peer["sock_drops"]
        if peer["frames"] != peer["unnumbered"] or got != res["frames"]:
            raise Fail(f"the sink got {peer['unnumbered']} pktgen frames + {peer['sock_drops']} socket drops, "
                       f"pktgen sent {res['frames']}: {peer}")
        if g.status != 0:
            raise Fail(f"the linux guest must power off cleanly after pktgen: status {g.status}")
        print(f"    linux pktgen (TCG, tap, 64 B, 3 s): {res['pps']} pps by pktgen's count, "
              f"{peer['sock_drops']} dropped by the Python sink's socket (smoke figures only)")


def test_linux_guest_xdp_tx_reflects_and_counts(t):
    """The linux column of ndr: xdp-bench tx (XDP_TX, MACs swapped) sends
    every frame back; what the peer sent is what came back plus the drops
    counted on the way (the tap's, the guest's XDP_TX, the peer socket's)."""
    with t.netns() as ns:
        g = linux_boot(t, ns, {"tests": "ndr", "ndr.sizes": "64"})
        m = g.wait_line(r"^vnetlab-linux listening l2 port=0 app=xdp-tx mac=(\S+)$", timeout=90)
        mac = m.group(1)
        r = ns.run([sys.executable, PKTPEER, "swap", ns.tap, mac, "3000", "3000", "macswap", "2", "64"],
                   timeout=90, capture_output=True, text=True)
        if r.returncode:
            raise Fail(f"pktpeer swap failed: {r.stdout[-400:]} {r.stderr[-400:]}")
        peer = json.loads(r.stdout.strip().splitlines()[-1])
        res = json.loads(g.wait_line(r"^RESULT (\{.*\})$", timeout=60).group(1))
        g.wait()
        back = peer["back"]
        guest_drops = res["rx_frames"] - res["tx_frames"]
        if res.get("app") != "xdp-tx" or res.get("end") != "idle":
            raise Fail(f"xdp-tx RESULT: expected app xdp-tx ending idle: {res}")
        if (peer["sent"] != res["rx_frames"] + peer["tap_tx_dropped"] or
                res["tx_frames"] != back["frames"] + back["sock_drops"]):
            raise Fail(f"counts do not close: peer sent {peer['sent']}, tap dropped {peer['tap_tx_dropped']}, "
                       f"guest rx {res['rx_frames']} tx {res['tx_frames']}, back {back}")
        if back["frames"] < 0.9 * peer["sent"] or back["seq_gaps"] != peer["sent"] - back["frames"] - guest_drops - \
                peer["tap_tx_dropped"] - back["sock_drops"]:
            raise Fail(f"at 3000 pps the XDP_TX loop must return nearly all frames, gaps = the counted drops: "
                       f"{peer}, guest drops {guest_drops}")
        print(f"    linux xdp-tx (TCG, tap, 64 B, 3000 pps): {back['frames']} of {peer['sent']} back, "
              f"tap drops {peer['tap_tx_dropped']}, XDP_TX drops {guest_drops}")


def test_linux_guest_ndr_vupacegen_closes(t):
    """The Linux column of ndr on vhost-user with vupacegen on the guest's
    socket (ndr.generator auto, no testpmd switch), TCG, a short
    MLRsearch up to 200,000 frames/s (more than a TCG guest takes: its
    port refuses frames) and one latency trial: the row is ok, its trials carry no
    guest line (XDP_TX prints none: counted by vupacegen alone), and the
    whole run closes with eth0's counters, recomputed here from the steps:
    vupacegen offered + the trial markers its port took = eth0 received +
    what its port refused (the guest's RX ring full); eth0 sent = the
    numbered frames back + the reflected markers + the port's misses."""
    from lib import Skip

    if os.geteuid() != 0:
        raise Skip("needs root for the harness's network namespace and DPDK's private /run")
    r = subprocess.run([os.path.join(TOP, "host", "linux-guest", "build.sh")], capture_output=True, text=True,
                       timeout=1200)
    if r.returncode:
        tail = (r.stdout + r.stderr).strip().splitlines()
        raise Skip(f"the Linux guest cannot be built here: {tail[-1] if tail else r.returncode}")
    d = os.path.join(BUILD, "test-ndr-linux-vupacegen")
    subprocess.run(["rm", "-rf", d], check=False)
    r = subprocess.run([sys.executable, os.path.join(BENCH, "vnetbench.py"), "--matrix",
                        os.path.join(BENCH, "matrices", "ndr.txt"), "--guests", "linux", "--backends", "vhost-user",
                        "--accel", "tcg", "--ndr-sizes", "64", "--ndr-trial", "1", "--ndr-max-rate", "200000",
                        "--ndr-precision", "20", "--ndr-latency", "50", "--ndr-duration-sum", "1", "--out", d], cwd=TOP,
                       capture_output=True, text=True, timeout=900)
    if r.returncode:
        raise Fail(f"vnetbench exited {r.returncode}:\n{(r.stdout + r.stderr)[-2000:]}")
    rows = [json.loads(l) for l in open(os.path.join(d, "results.jsonl"))]
    if len(rows) != 1 or rows[0]["status"] != "ok" or rows[0]["column"] != "linux":
        raise Fail(f"expected one ok linux row: {[(x['column'], x['status'], x.get('error')) for x in rows]}")
    n = rows[0]
    c, steps = n["ndr_check"], n["ndr_steps"] + (n.get("lat_steps") or [])
    if n["generator"] != "vupacegen" or not 0 < n["ndr_pps"] < 200000 or len(n.get("lat_steps") or []) != 1:
        raise Fail(f"generator {n['generator']} (want vupacegen), NDR {n['ndr_pps']} (want below the 200,000 "
                   f"frames/s a TCG guest cannot take), "
                   f"latency trials {len(n.get('lat_steps') or [])} (want 1)")
    if c.get("counted_by") != "eth0 statistics" or c["trials_closed"] or c["trials_unmarked"] != len(steps):
        raise Fail(f"the Linux column's trials carry no guest line and its run is counted by eth0: {c}")
    sent = sum(s["sent"] for s in steps)
    refused = sum(s["tap_tx_dropped"] for s in steps)
    back = sum(s["received"] for s in steps)
    misses = sum(s["peer_sock_drops"] for s in steps)
    marks = sum(1 for s in steps if s.get("marker_sent"))
    into = sent + marks == c["guest_received"] + refused
    out = c["guest_forwarded"] == back + marks + misses
    if (c["peer_sent"], c["markers"], c["tap_dropped"]) != (sent, marks, refused) or not (into and out):
        raise Fail(f"the Linux column's run does not close: vupacegen offered {sent} + {marks} markers, its port "
                   f"refused {refused}, eth0 received {c['guest_received']}; eth0 sent {c['guest_forwarded']}, "
                   f"back {back} + markers + {misses} missed; ndr_check {c}")
    if not c["closes"] or not c["guest_received"]:
        raise Fail(f"ndr_check must say the run closes, with frames through the guest: {c}")
    print(f"    linux XDP_TX, vhost-user with vupacegen (TCG, 64 B): NDR {n['ndr_pps']:,} frames/s; offered "
          f"{sent} + {marks} markers = eth0 {c['guest_received']} + refused {refused}; eth0 sent "
          f"{c['guest_forwarded']} = back {back} + markers + {misses} (XDP_TX dropped {c['guest_dropped']})")
