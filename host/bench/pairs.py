#!/usr/bin/env python3
"""pairs.py: the guest-pair run kind of the matrix -- two guests on one
host, one the client, one the server, and nothing of the host's in the
data path but the switch (the 2011 testers' "local guest-to-guest" rows).

    host/bench/vnetbench.py --matrix host/bench/matrices/pairs.txt
    host/bench/vnetbench.py --pairs 'base>v2,linux>linux' [--tests tcp_rr,udp_rr,tcp_stream,tcp_maerts]
        [--switches bridge,testpmd] [--rr-instances N] [--rr-burst N] [--seconds N] ...

A matrix with a `pairs` key (matrix.py) runs pairs instead of one guest
against host peers; parse, the run loop, results.jsonl and the report are
the matrix's (vnetbench.py), kinds.execute() hands a pair run to execute()
below, and the report gains the pair table (report_section(), which
vnetbench.py appends: it comes after every other table).

A pair is CLIENT>SERVER; each side is `linux` (the stock Debian guest of
host/linux-guest/: stock sockperf/iperf, as server or, with
vnl.app=rr-client|stream-client, as client) or an appliance variant name
(`default`, a name in mk/variants.mk's scheme, or `variant NAME = VARS` in
the matrix file), so `base>v2` tests a TX policy on the server side only.

Switches:
  bridge   a Linux bridge br0 in a private network namespace, one tap per
           guest (QEMU's userspace virtio-net on both sides); br0 holds
           10.77.0.1 so the harness can send the control "stop"
  testpmd  dpdk-testpmd (Debian dpdk-dev) forwarding (io mode) between two
           vhost-user ports, the classic DPDK guest-to-guest setup:
           --no-huge in a private mount namespace, guest memory a shared
           memfd; its CPU counts in the host figure. A vhost-user port
           has no queue: a frame for a guest whose RX ring is full is
           dropped, so testpmd runs io forwarding with retry (up to
           TESTPMD_RETRY x TESTPMD_DELAY_US before it drops, as DPDK's
           own vhost switch sample retries by default) and every row
           has the frames it dropped towards each guest
           (switch_drops_to_server, switch_drops_to_client)

The server is 10.77.0.2, the client 10.77.0.3 (MAC ...:57). Tests:
tcp_rr/udp_rr (rr.size bytes each way; an appliance client runs
rr.instances connections with rr.burst outstanding each, a Linux client is
one sockperf ping-pong), tcp_stream (the client sends stream.msg-byte
writes: the appliance's stream client or iperf -c) and tcp_maerts (the
server sends: the appliance client asks like iperf -R, or iperf -c -R), and pkt_txonly at the
packet level (issue 25): the client's generator at full speed (the
appliance's app=pkt txonly, or the Linux guest's kernel pktgen) into the
server's sink (app=pkt rxonly, or xdp-bench drop), pkt.sizes frames to
the server's MAC, which the bridge knows from a static entry so that no
frame floods; the row's pps is what the sink received over the sender's
interval, tx_pps what the sender sent, and the frames lost on the way
are counted where they were dropped (the taps' counters on the bridge,
testpmd's TX-dropped towards the server) and must add up
(pkt_unaccounted = sent - received - counted drops; pkt_closes). Every row has the client's
figures (trans/s and latency, or Mbit/s), host CPU over the client's
measured interval, and both guests' counters: the appliance's kicks,
TX reclaim calls and frames per transaction (its RESULT, measured
interval), the Linux guest's frames and virtio interrupts (its RESULT,
whole run).
"""

import functools
import json
import os
import re
import secrets
import shutil
import statistics
import tempfile
import time

import backends
import cpu
import guests
import kvmstats
import peers
import procs
import runs
import variants
from matrix import PAIR_TESTS as TESTS
from matrix import SWITCHES
from procs import BenchError, Proc

HERE = os.path.dirname(os.path.abspath(__file__))

TOP = os.path.dirname(os.path.dirname(HERE))
QEMU_RUN = os.path.join(TOP, "host", "qemu-run.sh")
BRIDGE_IP = "10.77.0.1"
SERVER_IP = "10.77.0.2"
CLIENT_IP = "10.77.0.3"
PREFIX = 24
MACS = {"server": "52:54:00:12:34:56", "client": "52:54:00:12:34:57"}
TAPS = {"server": "vnptap0", "client": "vnptap1"}

# The kind's interface (kinds.py); claims() and run_row() are below.
OPTIONS = ("pairs", "switches", "rr.instances", "rr.burst", "rr.sizes", "stream.sizes", "stream.instances", "pkt.sizes")
REPORT = ()  # report_section(): appended by vnetbench.py after every other table


# ---- the switch between the two guests ----

# testpmd io forwarding with retry: a burst the destination guest's RX ring
# cannot take is retried this many times, this many microseconds apart,
# before the rest is dropped (1 ms in all; testpmd's own retry default is
# 64 x 1 us). Longer waits stall the one forwarding core for both
# directions while a starved guest vCPU is not running.
TESTPMD_RETRY = 100
TESTPMD_DELAY_US = 10

class Switch:
    """A namespace (both guests' QEMUs run in it) and the data path between
    their NICs. qemu_net(role) gives the QEMU arguments of one side."""

    def __init__(self, kind):
        self.kind = kind
        self.ns = backends.Netns(make_tap=False)
        self.proc = None
        self.sockdir = None

    def setup(self):
        self.ns.open()
        # No multicast snooping: a snooping bridge joins the all-snoopers
        # group (224.0.0.106) and sends br0's IGMP report for it to every
        # port, which a packet sink counts.
        self.ns.ip("link", "add", "br0", "type", "bridge", "mcast_snooping", "0")
        procs.run(self.ns.wrap(["sysctl", "-qw", "net.ipv6.conf.br0.disable_ipv6=1"]), timeout=30)
        # br0 holds an address but sends nothing by itself: no IGMP report
        # when it comes up (a packet sink would count it)
        self.ns.ip("link", "set", "br0", "multicast", "off")
        self.ns.ip("addr", "add", f"{BRIDGE_IP}/{PREFIX}", "dev", "br0")
        self.ns.ip("link", "set", "br0", "up")
        if self.kind == "bridge":
            for tap in TAPS.values():
                self.ns.ip("tuntap", "add", "dev", tap, "mode", "tap")
                procs.run(self.ns.wrap(["sysctl", "-qw", f"net.ipv6.conf.{tap}.disable_ipv6=1"]), timeout=30)
                self.ns.ip("link", "set", tap, "master", "br0")
                self.ns.ip("link", "set", tap, "up")
            # The bridge knows each guest's port from the start: a sink
            # that never sends (pkt_txonly's) is never learnt, and every
            # frame to it would flood to br0 as well.
            for role, tap in TAPS.items():
                procs.run(self.ns.wrap(["bridge", "fdb", "add", MACS[role], "dev", tap, "master", "static"]),
                          timeout=30)
            return
        # testpmd: two vhost-user ports, io forwarding 0 <-> 1 (testpmd's
        # default port pairing); the bridge stays empty but answers nothing.
        self.sockdir = tempfile.mkdtemp(prefix="vnetpairs-vu-")
        argv = ["dpdk-testpmd", "-l", "0,1", "--no-huge", "-m", "1024", "--no-pci",
                "--file-prefix", f"vnetpairs{os.getpid()}"]
        for i, role in enumerate(("server", "client")):
            argv += ["--vdev", f"net_vhost{i},iface={self.sock(role)},queues=1"]
        cmds = os.path.join(self.sockdir, "testpmd.cmds")
        with open(cmds, "w") as f:
            f.write(f"set fwd io retry\nset burst tx delay {TESTPMD_DELAY_US} retry {TESTPMD_RETRY}\n")
        argv += ["--", "--forward-mode=io", "--nb-cores=1", "--rxq=1", "--txq=1", "--stats-period=0",
                 f"--cmdline-file={cmds}"]
        script = "mount -t tmpfs vnetpairs-dpdk /run && exec \"$@\""
        self.proc = Proc("dpdk-testpmd", self.ns.wrap(["unshare", "-m", "--propagation", "private", "sh", "-c",
                                                       script, "sh", "stdbuf", "-oL", *argv]), keep_stdin=True)
        if not self.proc.wait_line(lambda l: "Press enter to exit" in l, 60):
            raise BenchError(f"dpdk-testpmd did not come up within 60 s; its output:\n{self.proc.tail(20)}")

    def sock(self, role):
        return os.path.join(self.sockdir, f"{role}.sock")

    def qemu_net(self, role):
        """(host/qemu-run.sh --net options, extra QEMU arguments)."""
        mac = ["-global", f"virtio-net-pci.mac={MACS[role]}"]
        if self.kind == "bridge":
            return ["--net", f"tap:{TAPS[role]}"], mac
        return ["--net", "none"], mac + [
            "-object", "memory-backend-memfd,id=mem,size=512M,share=on", "-numa", "node,memdev=mem",
            "-chardev", f"socket,id=c0,path={self.sock(role)}", "-netdev", "vhost-user,id=n0,chardev=c0",
            "-device", backends.NIC + ",vectors=0"]

    def tap_drops(self):
        """Frames the bridge's taps dropped so far: {tap_stat: N} (tx: the
        bridge to a guest's QEMU; rx: a guest's QEMU to the bridge)."""
        out = {}
        if self.kind != "bridge":
            return out
        for tap in TAPS.values():
            for stat in ("rx_dropped", "tx_dropped"):
                r = procs.run(self.ns.wrap(["cat", f"/sys/class/net/{tap}/statistics/{stat}"]), timeout=10)
                out[f"{tap}_{stat}"] = int(r.stdout)
        return out

    def stop_guest(self, ip, token=""):
        msg = backends.ctl_request("stop", token)
        procs.run(self.ns.wrap(["bash", "-c", f"echo -n '{msg}' >/dev/udp/{ip}/{backends.CTL_PORT}"]), timeout=10,
                  check=False)

    def drops(self):
        """Frames testpmd dropped towards each guest, from the forward
        statistics it prints when it quits (port 0 is the server's, 1 the
        client's): {"switch_drops_to_server": N, ...}, {} if none printed."""
        out, port = {}, None
        for line in self.proc.text() if self.proc else ():
            m = re.search(r"Forward statistics for port (\d+)", line)
            if m:
                port = int(m.group(1))
            m = re.search(r"TX-dropped:\s*(\d+)", line)
            if m and port in (0, 1):
                out["switch_drops_to_" + ("server" if port == 0 else "client")] = int(m.group(1))
                port = None
        return out

    def teardown(self):
        if self.proc:
            self.proc.stop()
        self.ns.close()
        if self.sockdir:
            shutil.rmtree(self.sockdir, ignore_errors=True)
            self.sockdir = None


# ---- one side of a pair ----

# The ELFs of RING=packed sides: their NIC gets packed=on.
PACKED_KERNELS = set()


# pkt_txonly: the sink ends this many seconds after the last frame.
PKT_IDLE_S = 3


def appliance_keys(role, test, p, warmup):
    ip = SERVER_IP if role == "server" else CLIENT_IP
    if test == "pkt_txonly":
        # no lwIP, so no ip= (and no warm-up: the sender's interval is
        # from its first frame to its last)
        k = {"app": "pkt", "backend": "pair"}
        if role == "server":
            k.update({"pkt.mode": "rxonly", "pkt.idle": PKT_IDLE_S, "pkt.seconds": p["seconds"] + warmup + 60})
        else:
            k.update({"pkt.mode": "txonly", "pkt.size": p["size"], "pkt.burst": p["burst"],
                      "pkt.seconds": p["seconds"], "pkt.src": CLIENT_IP, "pkt.dst": SERVER_IP,
                      "pkt.dmac": MACS["server"]})
        return k
    k = {"ip": f"{ip}/{PREFIX}", "backend": "pair"}
    if test in ("tcp_rr", "udp_rr"):
        k.update({"app": "rr", "rr.proto": test[:3], "rr.role": role, "rr.warmup": warmup})
        if role == "server":
            k.update({"rr.wait": 60})
        else:
            k.update({"rr.peer": SERVER_IP, "rr.req": p["size"], "rr.resp": p["size"], "rr.instances": p["instances"],
                      "rr.burst": p["burst"], "rr.seconds": p["seconds"], "rr.timeout": 10})
    else:
        k.update({"app": "stream", "stream.role": role, "stream.warmup": warmup})
        if role == "server":
            # stream.idle: the server's 2 s default is shorter than lwIP's
            # retransmission timeout after a burst of frames the switch
            # dropped (1-3 s, doubling); the client's own no-progress bound
            # still ends a dead run
            k.update({"stream.wait": 60, "stream.msg": p["msg"], "stream.idle": 15})
        else:
            # tcp_stream: the client sends; tcp_maerts: the server sends
            k.update({"stream.test": test[4:], "stream.peer": SERVER_IP, "stream.msg": p["msg"],
                      "stream.seconds": p["seconds"]})
    return k


def linux_keys(role, test, p, warmup):
    ip = SERVER_IP if role == "server" else CLIENT_IP
    k = {"vnl.test": test, "vnl.backend": "pair", "vnl.ip": f"{ip}/{PREFIX}"}
    rr = test in ("tcp_rr", "udp_rr")
    if test == "pkt_txonly":
        # the kernel's own fastest paths: XDP drop as the sink, pktgen
        # (burst with xmit_more, clone_skb) as the generator
        if role == "server":
            k.update({"vnl.app": "xdp-drop", "vnl.wait": 60, "vnl.idle": PKT_IDLE_S,
                      "vnl.seconds": p["seconds"] + warmup + 60})
        else:
            if p["size"] == "imix":
                raise BenchError("pkt_txonly: the linux guest's pktgen sends one frame size (no imix)")
            k.update({"vnl.app": "pktgen", "vnl.size": p["size"], "vnl.burst": p["burst"], "vnl.time": p["seconds"],
                      "vnl.dst": SERVER_IP, "vnl.dmac": MACS["server"]})
        return k
    if role == "server":
        k.update({"vnl.app": "rr" if rr else "stream", "vnl.wait": 60, "vnl.idle": 15,
                  "vnl.seconds": p["seconds"] + warmup + 60})
        if rr:
            k["vnl.proto"] = test[:3]
    else:
        # a stock client has no warm-up: it runs that much longer
        if rr and (p["instances"] > 1 or p["burst"] > 1):
            raise BenchError("a linux client is one sockperf ping-pong: rr.instances=1 rr.burst=1")
        k.update({"vnl.app": "rr-client" if rr else "stream-client", "vnl.peer": SERVER_IP,
                  "vnl.msg": p["size"] if rr else p["msg"], "vnl.time": p["seconds"] + warmup})
        if test == "tcp_maerts":
            k["vnl.reverse"] = 1  # iperf -c -R: the server sends
        if rr:
            k["vnl.proto"] = test[:3]
    return k


def start_side(kind, kernel, role, test, p, warmup, switch, timeout, accel="auto"):
    """A side's QEMU. The appliance runs under accel (host/qemu-run.sh
    --accel) with a QMP socket for KVM's exit counters (proc.qmp); the
    stock Linux guest under guests.pick_accel("auto")."""
    token = ""
    qmp = None  # a Linux guest's init ends on any datagram to the control port
    net, extra = switch.qemu_net(role)
    extra = ["-name", f"{role},debug-threads=on", *extra]
    if kernel in PACKED_KERNELS:
        extra += variants.PACKED_QEMU_ARGS  # a RING=packed build needs packed=on
    if kind == "linux":
        accel = guests.pick_accel("auto")
        keys = linux_keys(role, test, p, warmup)
        cmdline = " ".join(["console=ttyS0", "quiet", "panic=-1"] + [f"{a}={b}" for a, b in keys.items()])
        argv = ["timeout", "--kill-after=5", str(timeout), "qemu-system-x86_64", "-M", "pc", "-accel", accel,
                "-cpu", guests.CPU_MODEL[accel], "-m", str(guests.GUEST_MEM_MIB), "-smp", "1", "-nodefaults",
                "-display", "none", "-no-reboot", "-serial", "stdio", "-monitor", "none",
                "-kernel", os.path.join(guests.LINUX_DIR, "vmlinuz"),
                "-initrd", os.path.join(guests.LINUX_DIR, "initrd.gz"), "-append", cmdline,
                *guests.qemu_net_args(net), *extra]
    else:
        keys = appliance_keys(role, test, p, warmup)
        cmdline = " ".join(f"{a}={b}" for a, b in keys.items())
        # The control port's secret for this run (apps/lib/ctl.c); kept out of
        # the row's cmdline.
        token = secrets.token_hex(16)
        qmp = kvmstats.socket_path(tempfile.mkdtemp(prefix="vnetbench-qmp-"))
        argv = [QEMU_RUN, "--kernel", kernel, "--append", f"{cmdline} ctl.token={token}", "--timeout", str(timeout),
                "--accel", accel, *net, "--", *extra, "-qmp", f"unix:{qmp},server=on,wait=off"]
    proc = Proc(f"qemu-{role}", switch.ns.wrap(argv))
    proc.ctl_token = token
    proc.qmp = qmp
    return proc, cmdline


def result_of(proc, timeout):
    """(RESULT dict or None, arrival time, ERROR dict or None)."""
    item = proc.wait_line(lambda l: l.startswith(("RESULT {", "ERROR {")), timeout)
    if not item:
        return None, None, None
    obj = json.loads(item[2].split(" ", 1)[1])
    return (obj, item[0], None) if item[2].startswith("RESULT") else (None, item[0], obj)


def qemu_pid(proc):
    def f():
        if not proc.alive():
            return None
        for p in procs.descendants(proc.pid):
            if procs.comm(p).startswith("qemu-system"):
                return p
        return None
    return f


def side_figures(prefix, res):
    """Counters of one guest for the row, prefixed client_/server_."""
    out = {}
    if res is None:
        return out
    if res.get("guest") == "linux":
        out.update({f"{prefix}_rx_frames": res.get("rx_frames"), f"{prefix}_tx_frames": res.get("tx_frames"),
                    f"{prefix}_virtio_irqs": res.get("virtio_irqs"), f"{prefix}_scope": "run"})
        return out
    for k in ("kicks", "kicks_suppressed", "reclaim_calls", "reclaimed", "tx_frames", "rx_frames", "ring_full",
              "kicks_per_txn", "reclaims_per_txn", "irqs_rx", "irqs_tx", "halts", "variant"):
        if k in res:
            out[f"{prefix}_{k}"] = res[k]
    if "irqs_rx" in res and "irqs_tx" in res:
        # builds with an idle policy count their interrupts (RESULT irqs_*)
        out[f"{prefix}_virtio_irqs"] = res["irqs_rx"] + res["irqs_tx"]
    out[f"{prefix}_scope"] = "measured"
    return out


def pkt_figures(row, cres, sres, p):
    """pkt_txonly: what the sender sent (its own count and rate), what the
    sink received (app=pkt rxonly's frames; a Linux sink's eth0 rx_packets,
    where XDP_DROP's frames are counted), and the delivered rate: the
    sink's count over the sender's interval."""
    sent, got = cres.get("frames"), sres.get("rx_frames") if sres.get("guest") == "linux" else sres.get("frames")
    if not isinstance(sent, int) or not isinstance(got, int) or not sent or not cres.get("pps"):
        raise BenchError(f"pkt_txonly: no frame count (sender frames={sent} pps={cres.get('pps')}, sink {got})")
    if sres.get("guest") != "linux":
        # app=pkt rxonly counts what is not UDP/IPv4 apart (rx_other); from
        # an appliance sender it also tells the sender's frames (their
        # sequence tag) from any other
        row["sink_other_frames"] = sres.get("rx_other", 0)
        if cres.get("guest") != "linux":
            row["sink_other_frames"] += got - sres["seq_frames"]
            got = sres["seq_frames"]
    per_frame = cres["bytes"] / sent if cres.get("bytes") else int(p["size"])  # bytes with the FCS
    row.update(frames_sent=sent, frames_received=got, tx_pps=cres["pps"],
               pps=round(cres["pps"] * got / sent, 1), loss_pct=round(100.0 * (sent - got) / sent, 4))
    row["mbps"] = round(row["pps"] * per_frame * 8 / 1e6, 2)
    for k in ("seq_frames", "seq_gaps", "seq_reorder", "frames_per_kick", "frames_per_reclaim", "tx_full"):
        for prefix, res in (("client", cres), ("server", sres)):
            if k in res and res.get("guest") != "linux":
                row[f"{prefix}_{k}"] = res[k]


def pkt_close(row):
    """Every frame sent was received or dropped where someone counted it:
    the bridge's taps (tx_dropped: towards a guest's QEMU; rx_dropped: from
    it), or testpmd towards the server. pkt_unaccounted is what is left
    (a Linux sink also counts any frame of its own stack: it may be below
    0 there)."""
    counted = sum(v for k, v in row.items() if k.startswith("vnptap") and k.endswith("_dropped"))
    counted += row.get("switch_drops_to_server") or 0
    row["pkt_drops_counted"] = counted
    row["pkt_unaccounted"] = row["frames_sent"] - row["frames_received"] - counted
    row["pkt_closes"] = row["pkt_unaccounted"] == 0


def per_pair_txn(row):
    """Both sides' counters per transaction of the pair: the client's count
    (RR), or its writes of stream.msg bytes (STREAM; from Mbit/s when the
    client is a stock iperf)."""
    txn = row.get("transactions") or (row.get("frames_sent") if row.get("test") == "pkt_txonly" else None)
    if not txn and row.get("test") in ("tcp_stream", "tcp_maerts") and row.get("mbps") and row.get("msg"):
        txn = row["mbps"] * 1e6 / 8 * row["seconds"] / row["msg"]
    if not txn and row.get("tps"):
        txn = row["tps"] * row["seconds"]
    if not txn:
        return
    row["pair_transactions"] = round(txn)
    for side in ("client", "server"):
        for k, out in (("kicks", "kicks_per_pair_txn"), ("reclaim_calls", "reclaims_per_pair_txn"),
                       ("virtio_irqs", "irqs_per_txn")):
            if row.get(f"{side}_{k}") is not None:
                row[f"{side}_{out}"] = round(row[f"{side}_{k}"] / txn, 3)


def side_accel(proc):
    """The accelerator a side's banner names (tcg, kvm, ...), or None."""
    m = next((re.search(r" accel=(\w+)", l) for l in proc.text("out") if l.startswith("vnetlab boot=")), None)
    return m.group(1) if m else None


def kvm_columns(who, exits, window, res, test):
    """One side's KVM exit counters over the row's window, prefixed with
    the side (client_kvm_exits_per_txn, ...), and <who>_kvm_counters: n/a
    where none were read (TCG, or a stock Linux side: no QMP)."""
    cols = {f"{who}_{k}": v for k, v in kvmstats.availability(
        exits, "a stock Linux side (no QMP socket)").items()}
    if exits and exits.samples and window and res:
        delta = kvmstats.interval(exits.samples, *window)
        cols.update({f"{who}_{k}": v for k, v in kvmstats.row_columns(delta, dict(res, test=test)).items()})
    return cols


def execute(pair, test, switch_kind, p, warmup, kernels, logdir, index, accel="auto"):
    client_kind, server_kind = pair.split(">")
    row = {"run": index, "pair": pair, "client": client_kind, "server": server_kind, "test": test,
           "switch": switch_kind, "status": "error", "error": None, **p}
    switch = Switch(switch_kind)
    sampler = cpu.Sampler()
    server = client = None
    exits = {}  # side -> kvmstats.Sampler (appliance sides)
    limit = p["seconds"] + warmup + 90
    try:
        switch.setup()
        if switch.proc:
            sampler.watch("switch", lambda: switch.proc.pid if switch.proc and switch.proc.alive() else None)
        sampler.start()
        server, row["server_cmdline"] = start_side(server_kind, kernels.get(server_kind), "server", test, p, warmup,
                                                   switch, limit, accel)
        exits["server"] = kvmstats.start(server)
        sampler.watch("qemu_server", qemu_pid(server))
        # servers say "listening"; app=pkt's sink says "pkt: mode=rxonly ... ready"
        if not server.wait_line(lambda l: " listening" in l or (l.startswith("pkt: mode=") and l.endswith(" ready")),
                                90):
            raise BenchError(f"the server guest never listened:\n{server.tail()}")
        taps0 = switch.tap_drops()
        client, row["client_cmdline"] = start_side(client_kind, kernels.get(client_kind), "client", test, p, warmup,
                                                   switch, limit, accel)
        exits["client"] = kvmstats.start(client)
        sampler.watch("qemu_client", qemu_pid(client))
        cres, t_line, cerr = result_of(client, limit)
        if cerr:
            raise BenchError(f"client ERROR in {cerr.get('where')}: {cerr.get('msg')}\n{client.tail()}")
        if cres is None:
            raise BenchError(f"no RESULT from the client guest:\n{client.tail()}")
        client.wait(20)
        sres, _, serr = result_of(server, 8)
        if sres is None and serr is None:
            switch.stop_guest(SERVER_IP, server.ctl_token)
            sres, _, serr = result_of(server, 15)
        server.wait(20)
        if serr:
            raise BenchError(f"server ERROR in {serr.get('where')}: {serr.get('msg')}")
        if sres is None:
            raise BenchError(f"no RESULT from the server guest:\n{server.tail()}")
        for who, proc in (("client", client), ("server", server)):
            said = runs.exit_line(proc.text("out"))
            if said != 0:
                raise BenchError(f"the {who} guest's exit line says {said}, expected 0:\n{proc.tail()}")
        taps1 = switch.tap_drops()
        # the client's figures are the row's
        if test == "pkt_txonly":
            pkt_figures(row, cres, sres, p)
            row.update({k: taps1[k] - taps0[k] for k in taps1})
            window = runs.guest_window(cres, t_line) or (t_line - p["seconds"], t_line)
        elif client_kind == "linux":
            figs = peers.parse_sockperf(client.text("out")) if "rr" in test else peers.parse_iperf(client.text("out"))
            for k, v in figs.items():
                row[k[5:] if k.startswith("peer_") else k] = v
            a = client.wait_line(lambda l: "Starting test" in l or "Client connecting" in l, 0)
            window = ((a[0] if a else t_line - p["seconds"]) + warmup, t_line)
        else:
            for k in ("tps", "transactions", "mbps", "lat_mean_ns", "lat_p50_ns", "lat_p90_ns", "lat_p99_ns",
                      "lat_p999_ns", "lat_max_ns"):
                if k in cres:
                    row[k] = cres[k]
            window = runs.guest_window(cres, t_line) or (t_line - p["seconds"], t_line)
        row.update(side_figures("client", cres))
        row.update(side_figures("server", sres))
        per_pair_txn(row)
        for who, res in (("client", cres), ("server", sres)):
            if exits.get(who):
                exits[who].settle(window[1] if window else 0)
            row.update(kvm_columns(who, exits.get(who), window, res, test))
        sampler.stop()
        fig = sampler.interval(*window)
        if fig:
            row.update(host_cpu_pct=fig["host_cpu_pct"], cpu_interval_s=fig["interval_s"])
            for who in ("qemu_server", "qemu_client", "switch"):
                if fig["procs"].get(who):
                    row[f"{who}_cpu_pct"] = fig["procs"][who]["pct"]
            h = row["host_cpu_pct"]
            if h and row.get("tps"):
                row["tps_per_cpu"] = round(row["tps"] / (h / 100.0), 1)
            if h and row.get("mbps"):
                row["mbps_per_cpu"] = round(row["mbps"] / (h / 100.0), 2)
            if h and row.get("pps"):
                row["pps_per_cpu"] = round(row["pps"] / (h / 100.0), 1)
        sides = {side_accel(client), side_accel(server)} - {None}
        row["accel"] = sides.pop() if len(sides) == 1 else "/".join(sorted(sides)) or guests.pick_accel("auto")
        row["status"] = "ok"
    except BenchError as e:
        runs.record_error(row, e)
    finally:
        sampler.stop()
        for s in exits.values():
            if s:
                s.stop()
        for pr in (client, server):
            if pr:
                pr.stop()
        switch.teardown()
        row.update(switch.drops())
        if row["status"] == "ok" and test == "pkt_txonly":
            pkt_close(row)
        log = os.path.join(logdir, f"pair-{index:04d}.log")
        with open(log, "w") as f:
            for title, pr in (("server", server), ("client", client), ("switch", switch.proc)):
                if pr:
                    f.write(f"==== {title}: {' '.join(pr.argv)}\n")
                    f.writelines(f"{t - pr.t0:9.3f} {s} {l}\n" for t, s, l in pr.lines)
        row["log"] = os.path.relpath(log, os.path.dirname(logdir))
    return row


# ---- the matrix's pair run kind ----

class Sides:
    """Stands for the guests of a pair matrix: prepare() builds every side
    once (each appliance variant with variants.build(), the Linux guest with
    host/linux-guest/build.sh)."""

    def __init__(self, m, log):
        self.m = m
        self.log = log
        self.kernels = {}

    def prepare(self):
        sides = {x for p in self.m.pairs for x in p.split(">")}
        for s in sorted(sides):
            if s == "linux":
                r = procs.run([guests.LINUX_BUILD], timeout=1200, check=False)
                if r.returncode:
                    raise BenchError(f"host/linux-guest/build.sh failed:\n{(r.stdout + r.stderr)[-1500:]}")
                continue
            vars_text = self.m.variant_vars[s]
            self.kernels[s] = variants.build(s, vars_text, self.log)
            if variants.is_packed(vars_text):
                PACKED_KERNELS.add(self.kernels[s])


def claims(run):
    return run.guest == "pair"


def run_row(run, m, guest, logdir, execute):
    return execute_run(run, m, guest, logdir)


def execute_run(run, m, sides, logdir):
    """One pair run of the matrix (kinds.execute() calls it): the matrix's
    row fields, then the pair's."""
    row = runs.base_row(run, m)
    row["role"] = "pair"
    t0 = time.monotonic()
    row.update(execute(run.variant, run.test, run.backend, run.params, m.warmup, sides.kernels, logdir, run.index,
                       run.accel or m.accel))
    row["wall_s"] = round(time.monotonic() - t0, 2)
    return row


# ---- report ----

def fmt(v, unit=""):
    if v is None:
        return "-"
    return f"{v:,.0f}{unit}" if abs(v) >= 100 else f"{v:,.2f}{unit}"


def median_of(rows, k, scale=1.0):
    v = [r[k] * scale for r in rows if r.get(k) is not None]
    return statistics.median(v) if v else None


def cell_of(rows, k):
    """median (min-max) n=N of field k over rows, or -."""
    v = [r[k] for r in rows if r.get(k) is not None]
    return f"{fmt(statistics.median(v))} ({fmt(min(v))}-{fmt(max(v))}) n={len(v)}" if v else "-"


def split_ok(rows):
    """(the ok rows, the others)."""
    return [r for r in rows if r["status"] == "ok"], [r for r in rows if r["status"] != "ok"]


def table_line(*cells):
    return "| " + " | ".join(cells) + " |"


def failed_note(bad):
    """A table line's tail naming its failed runs, or ""."""
    return f" ({len(bad)} failed: {bad[0]['error']})" if bad else ""


def pkt_table(rs, sw):
    """pkt_txonly between two guests: per frame size, a row per pair."""
    L = []
    for size in dict.fromkeys(r["size"] for r in rs):
        L += [f"## pkt_txonly {size} B -- switch {sw}", "",
              "| pair (client>server) | delivered frames/s | sent frames/s | loss % | drops counted (where) | "
              "unaccounted frames | host CPU % | delivered frames/s per host CPU | client kicks/frame |",
              "|---|---|---|---|---|---|---|---|---|"]
        for pair in dict.fromkeys(r["pair"] for r in rs if r["size"] == size):
            ok, bad = split_ok([r for r in rs if r["pair"] == pair and r["size"] == size])
            med, cell = functools.partial(median_of, ok), functools.partial(cell_of, ok)
            where = "testpmd to the server" if sw == "testpmd" else "the taps"
            un = sorted({r["pkt_unaccounted"] for r in ok if r.get("pkt_unaccounted") is not None})
            L.append(table_line(pair, cell('pps'), cell('tx_pps'), fmt(med('loss_pct')),
                                f"{fmt(med('pkt_drops_counted'))} ({where})", ', '.join(str(u) for u in un) or '-',
                                fmt(med('host_cpu_pct')), fmt(med('pps_per_cpu')),
                                fmt(med('client_kicks_per_pair_txn'))) + failed_note(bad))
        L.append("")
    L += ["Delivered = the sink's count (app=pkt rxonly's frames with the sender's sequence tag; a Linux sink's eth0 "
          "rx_packets, XDP_DROP's frames among them) over the sender's interval; sent = the sender's own count and "
          "rate (app=pkt txonly, or pktgen's). Unaccounted = sent - delivered - drops counted, per run (0: every "
          "frame is accounted for).", ""]
    return L


def report_section(rows):
    """The pair tables of report.md: per test and switch, a row per pair
    with both guests' counters per transaction (the matrix's own tables
    above them have the figures with their spread and comparison)."""
    rows = [r for r in rows if r.get("pair")]
    if not rows:
        return []
    L = ["# Guest pairs: both sides' counters", "",
         "Cells are median (min-max) n over the repetitions.", ""]
    for test in TESTS:
        for sw in SWITCHES:
            rs = [r for r in rows if r["test"] == test and r["switch"] == sw]
            if not rs:
                continue
            if test == "pkt_txonly":
                L += pkt_table(rs, sw)
                continue
            metric, unit = ("tps", "trans/s") if "rr" in test else ("mbps", "Mbit/s")
            L += [f"## {test} -- switch {sw}", "",
                  f"| pair (client>server) | {unit} | host CPU % | {unit} per host CPU | client kicks/txn | "
                  f"server kicks/txn | client reclaims/txn | server reclaims/txn | virtio irqs/txn (client, server) |"
                  + (" RTT p50 us |" if "rr" in test else ""),
                  "|---|---|---|---|---|---|---|---|---|" + ("---|" if "rr" in test else "")]
            for pair in dict.fromkeys(r["pair"] for r in rs):
                ok, bad = split_ok([r for r in rs if r["pair"] == pair])
                med, cell = functools.partial(median_of, ok), functools.partial(cell_of, ok)
                irq = f"{fmt(med('client_irqs_per_txn'))}, {fmt(med('server_irqs_per_txn'))}"
                cells = [pair, cell(metric), fmt(med('host_cpu_pct')), fmt(med(metric + '_per_cpu')),
                         fmt(med('client_kicks_per_pair_txn')), fmt(med('server_kicks_per_pair_txn')),
                         fmt(med('client_reclaims_per_pair_txn')), fmt(med('server_reclaims_per_pair_txn')), irq]
                if "rr" in test:
                    cells.append(fmt(med('lat_p50_ns', 1e-3)))
                line = table_line(*cells)
                if sw == "testpmd":
                    line += (f" switch dropped {fmt(med('switch_drops_to_server'))} frames to the server, "
                             f"{fmt(med('switch_drops_to_client'))} to the client (median)")
                L.append(line + failed_note(bad))
            L.append("")
    L += ["Per transaction: RR = one request and its reply; STREAM = one client write of stream.msg bytes. "
          "Appliance kicks and reclaims are its RESULT's, over its measured interval, divided by the client's "
          "transaction count, and so are its interrupts when its build has an idle policy that takes them (RESULT "
          "irqs_rx + irqs_tx; a polling build has none); a Linux guest's virtio interrupts (/proc/interrupts) "
          "cover its whole run.", ""]
    return L
