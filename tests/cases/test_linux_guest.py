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

from lib import NS_GUEST_IP, NS_PREFIX, TOP, Fail, Guest

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
