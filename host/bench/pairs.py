#!/usr/bin/env python3
"""pairs.py: guest-to-guest runs -- two guests on one host, one the client,
one the server, and nothing of the host's in the data path but the switch
(the 2011 testers' "local guest-to-guest" rows).

    host/bench/pairs.py [--matrix host/bench/matrices/pairs.txt] [--pairs P,...]
        [--tests tcp_rr,udp_rr,tcp_stream,tcp_maerts] [--switches bridge,testpmd]
        [--rr-instances N] [--rr-burst N]
        [--seconds N] [--warmup N] [--repetitions N] [--out DIR]
    make bench BENCH_ARGS=... is the single-guest harness; this is its pair
    counterpart, sharing its pieces (procs, cpu, variants, guests).

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
server sends: the appliance client asks like iperf -R, or iperf -c -R). Every row has the client's
figures (trans/s and latency, or Mbit/s), host CPU over the client's
measured interval, and both guests' counters: the appliance's kicks,
TX reclaim calls and frames per transaction (its RESULT, measured
interval), the Linux guest's frames and virtio interrupts (its RESULT,
whole run). Results: DIR/pairs.jsonl and DIR/report.md.
"""

import argparse
import json
import os
import re
import secrets
import shutil
import signal
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import backends  # noqa: E402
import cpu  # noqa: E402
import guests  # noqa: E402
import peers  # noqa: E402
import procs  # noqa: E402
import runs  # noqa: E402
import variants  # noqa: E402
from procs import BenchError, Proc  # noqa: E402

TOP = os.path.dirname(os.path.dirname(HERE))
QEMU_RUN = os.path.join(TOP, "host", "qemu-run.sh")
BRIDGE_IP = "10.77.0.1"
SERVER_IP = "10.77.0.2"
CLIENT_IP = "10.77.0.3"
PREFIX = 24
MACS = {"server": "52:54:00:12:34:56", "client": "52:54:00:12:34:57"}
TAPS = {"server": "vnptap0", "client": "vnptap1"}
TESTS = ("tcp_rr", "udp_rr", "tcp_stream", "tcp_maerts")
SWITCHES = ("bridge", "testpmd")

DEFAULTS = {"pairs": "default>default", "tests": "tcp_rr tcp_stream", "switches": "bridge", "seconds": "5",
            "warmup": "1", "repetitions": "3", "rr.size": "256", "rr.instances": "1", "rr.burst": "1",
            "stream.msg": "16K"}


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
        self.ns.ip("link", "add", "br0", "type", "bridge")
        procs.run(self.ns.wrap(["sysctl", "-qw", "net.ipv6.conf.br0.disable_ipv6=1"]), timeout=30)
        self.ns.ip("addr", "add", f"{BRIDGE_IP}/{PREFIX}", "dev", "br0")
        self.ns.ip("link", "set", "br0", "up")
        if self.kind == "bridge":
            for tap in TAPS.values():
                self.ns.ip("tuntap", "add", "dev", tap, "mode", "tap")
                procs.run(self.ns.wrap(["sysctl", "-qw", f"net.ipv6.conf.{tap}.disable_ipv6=1"]), timeout=30)
                self.ns.ip("link", "set", tap, "master", "br0")
                self.ns.ip("link", "set", tap, "up")
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


def appliance_keys(role, test, p, warmup):
    ip = SERVER_IP if role == "server" else CLIENT_IP
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


def start_side(kind, kernel, role, test, p, warmup, switch, timeout):
    token = ""  # a Linux guest's init ends on any datagram to the control port
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
        # The control port's secret for this run (apps/ctl.c); kept out of
        # the row's cmdline.
        token = secrets.token_hex(16)
        argv = [QEMU_RUN, "--kernel", kernel, "--append", f"{cmdline} ctl.token={token}", "--timeout", str(timeout),
                *net, "--", *extra]
    proc = Proc(f"qemu-{role}", switch.ns.wrap(argv))
    proc.ctl_token = token
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


def per_pair_txn(row):
    """Both sides' counters per transaction of the pair: the client's count
    (RR), or its writes of stream.msg bytes (STREAM; from Mbit/s when the
    client is a stock iperf)."""
    txn = row.get("transactions")
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


def execute(pair, test, switch_kind, p, warmup, kernels, logdir, index):
    client_kind, server_kind = pair.split(">")
    row = {"run": index, "pair": pair, "client": client_kind, "server": server_kind, "test": test,
           "switch": switch_kind, "status": "error", "error": None, **p}
    switch = Switch(switch_kind)
    sampler = cpu.Sampler()
    server = client = None
    limit = p["seconds"] + warmup + 90
    try:
        switch.setup()
        if switch.proc:
            sampler.watch("switch", lambda: switch.proc.pid if switch.proc and switch.proc.alive() else None)
        sampler.start()
        server, row["server_cmdline"] = start_side(server_kind, kernels.get(server_kind), "server", test, p, warmup,
                                                   switch, limit)
        sampler.watch("qemu_server", qemu_pid(server))
        if not server.wait_line(lambda l: " listening" in l, 90):
            raise BenchError(f"the server guest never listened:\n{server.tail()}")
        client, row["client_cmdline"] = start_side(client_kind, kernels.get(client_kind), "client", test, p, warmup,
                                                   switch, limit)
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
        # the client's figures are the row's
        if client_kind == "linux":
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
        row["accel"] = guests.pick_accel("auto")
        row["status"] = "ok"
    except BenchError as e:
        row["error"] = str(e).splitlines()[0][:300]
        row["error_detail"] = str(e)
    finally:
        sampler.stop()
        for pr in (client, server):
            if pr:
                pr.stop()
        switch.teardown()
        row.update(switch.drops())
        log = os.path.join(logdir, f"pair-{index:04d}.log")
        with open(log, "w") as f:
            for title, pr in (("server", server), ("client", client), ("switch", switch.proc)):
                if pr:
                    f.write(f"==== {title}: {' '.join(pr.argv)}\n")
                    f.writelines(f"{t - pr.t0:9.3f} {s} {l}\n" for t, s, l in pr.lines)
        row["log"] = os.path.relpath(log, os.path.dirname(logdir))
    return row


# ---- matrix, report ----

def parse_matrix(path):
    settings, defs = dict(DEFAULTS), {}
    if path:
        for n, line in enumerate(open(path).read().splitlines(), 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            m = re.fullmatch(r"variant\s+([A-Za-z0-9_.-]+)\s*=\s*(.*)", line)
            if m:
                defs[m.group(1)] = m.group(2).strip()
                continue
            m = re.fullmatch(r"([a-z_.]+)\s*=\s*(.*)", line)
            if not m or m.group(1) not in DEFAULTS:
                raise BenchError(f"{path}:{n}: expected `variant NAME = VARS` or one of {', '.join(DEFAULTS)} = ...")
            settings[m.group(1)] = m.group(2).strip()
    return settings, defs


def words(v):
    return [x for x in re.split(r"[,\s]+", str(v).strip()) if x]


def fmt(v, unit=""):
    if v is None:
        return "-"
    return f"{v:,.0f}{unit}" if abs(v) >= 100 else f"{v:,.2f}{unit}"


def report(rows, out, meta):
    L = [f"# guest pairs {meta.get('date') or time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", "",
         f"- command: `{meta['command']}`", f"- accelerator: {meta['accel']} (TCG latencies are not KVM latencies)",
         f"- {meta['seconds']} s measured per run after {meta['warmup']} s warm-up, {meta['repetitions']} repetitions;"
         " cells are median (min-max) n", ""]
    for test in TESTS:
        for sw in SWITCHES:
            rs = [r for r in rows if r["test"] == test and r["switch"] == sw]
            if not rs:
                continue
            metric, unit = ("tps", "trans/s") if "rr" in test else ("mbps", "Mbit/s")
            L += [f"## {test} -- switch {sw}", "",
                  f"| pair (client>server) | {unit} | host CPU % | {unit} per host CPU | client kicks/txn | "
                  f"server kicks/txn | client reclaims/txn | server reclaims/txn | virtio irqs/txn (client, server) |"
                  + (" RTT p50 us |" if "rr" in test else ""),
                  "|---|---|---|---|---|---|---|---|---|" + ("---|" if "rr" in test else "")]
            for pair in dict.fromkeys(r["pair"] for r in rs):
                ok = [r for r in rs if r["pair"] == pair and r["status"] == "ok"]
                bad = [r for r in rs if r["pair"] == pair and r["status"] != "ok"]

                def med(k, scale=1.0):
                    v = [r[k] * scale for r in ok if r.get(k) is not None]
                    return statistics.median(v) if v else None

                def cell(k, scale=1.0):
                    v = [r[k] * scale for r in ok if r.get(k) is not None]
                    if not v:
                        return "-"
                    return f"{fmt(statistics.median(v))} ({fmt(min(v))}-{fmt(max(v))}) n={len(v)}"

                irq = f"{fmt(med('client_irqs_per_txn'))}, {fmt(med('server_irqs_per_txn'))}"
                line = (f"| {pair} | {cell(metric)} | {fmt(med('host_cpu_pct'))} | {fmt(med(metric + '_per_cpu'))} | "
                        f"{fmt(med('client_kicks_per_pair_txn'))} | {fmt(med('server_kicks_per_pair_txn'))} | "
                        f"{fmt(med('client_reclaims_per_pair_txn'))} | {fmt(med('server_reclaims_per_pair_txn'))} | {irq} |")
                if "rr" in test:
                    line += f" {fmt(med('lat_p50_ns', 1e-3))} |"
                if sw == "testpmd":
                    line += (f" switch dropped {fmt(med('switch_drops_to_server'))} frames to the server, "
                             f"{fmt(med('switch_drops_to_client'))} to the client (median)")
                if bad:
                    line += f" ({len(bad)} failed: {bad[0]['error']})"
                L.append(line)
            L.append("")
    L += ["Per transaction: RR = one request and its reply; STREAM = one client write of stream.msg bytes. "
          "Appliance kicks and reclaims are its RESULT's, over its measured interval, divided by the client's "
          "transaction count, and so are its interrupts when its build has an idle policy that takes them (RESULT "
          "irqs_rx + irqs_tx; a polling build has none); a Linux guest's virtio interrupts (/proc/interrupts) "
          "cover its whole run.", ""]
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(L))


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--matrix")
    for k in DEFAULTS:
        ap.add_argument("--" + k.replace(".", "-"), dest=k.replace(".", "_"))
    ap.add_argument("--out")
    ap.add_argument("--rereport", metavar="DIR", help="rewrite DIR/report.md from DIR/pairs.jsonl")
    a = ap.parse_args(argv)
    if a.rereport:
        rows = [json.loads(line) for line in open(os.path.join(a.rereport, "pairs.jsonl"))]
        for r in rows:
            if r["status"] == "ok":
                per_pair_txn(r)
        meta = json.load(open(os.path.join(a.rereport, "meta.json")))
        report(rows, a.rereport, meta)
        return 0
    settings, defs = parse_matrix(a.matrix)
    for k in DEFAULTS:
        v = getattr(a, k.replace(".", "_"))
        if v is not None:
            settings[k] = v
    if os.geteuid() != 0:
        raise BenchError("pairs need root (a network namespace with a bridge and taps)")
    pairs = words(settings["pairs"])
    tests = words(settings["tests"])
    switches = words(settings["switches"])
    for t in tests:
        if t not in TESTS:
            raise BenchError(f"unknown pair test '{t}' (known: {', '.join(TESTS)})")
    for s in switches:
        if s not in SWITCHES:
            raise BenchError(f"unknown switch '{s}' (known: {', '.join(SWITCHES)})")
    p = {"seconds": int(settings["seconds"]), "size": int(settings["rr.size"]),
         "instances": int(settings["rr.instances"]), "burst": int(settings["rr.burst"]),
         "msg": peers_size(settings["stream.msg"])}
    warmup, reps = int(settings["warmup"]), int(settings["repetitions"])
    sides = set()
    for pair in pairs:
        if pair.count(">") != 1:
            raise BenchError(f"bad pair '{pair}' (CLIENT>SERVER, each linux or a variant name)")
        sides.update(pair.split(">"))
    kernels = {}
    log = lambda s: print(f"pairs: {s}", flush=True)  # noqa: E731
    for s in sorted(sides):
        if s == "linux":
            r = procs.run([guests.LINUX_BUILD], timeout=1200, check=False)
            if r.returncode:
                raise BenchError(f"host/linux-guest/build.sh failed:\n{(r.stdout + r.stderr)[-1500:]}")
            continue
        vars_text = defs.get(s, variants.resolve(s))
        if vars_text is None:
            raise BenchError(f"pair side '{s}': not linux, default, a mk/variants.mk name or a `variant` in the matrix")
        kernels[s] = variants.build(s, vars_text, log)
        if variants.is_packed(vars_text):
            PACKED_KERNELS.add(kernels[s])
    out = a.out or os.path.join(TOP, "results", "pairs-" + time.strftime("%Y%m%d-%H%M%S"))
    logdir = os.path.join(out, "logs")
    os.makedirs(logdir, exist_ok=True)
    rows = []
    plan = [(rep, sw, t, pair) for rep in range(reps) for sw in switches for t in tests for pair in pairs]

    def on_signal(sig, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    try:
        for i, (rep, sw, t, pair) in enumerate(plan):
            row = execute(pair, t, sw, p, warmup, kernels, logdir, i)
            row["rep"] = rep
            rows.append(row)
            what = (f"{fmt(row.get('tps'))} trans/s" if "rr" in t else f"{fmt(row.get('mbps'))} Mbit/s") \
                if row["status"] == "ok" else f"FAILED: {row['error']}"
            log(f"[{i + 1}/{len(plan)}] {t} {pair} {sw} rep {rep + 1}: {what}")
    except KeyboardInterrupt:
        log("interrupted: report of the finished runs follows")
    finally:
        procs.stop_all()
        backends.close_all()
    with open(os.path.join(out, "pairs.jsonl"), "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    meta = {"command": "host/bench/pairs.py " + " ".join(argv), "accel": guests.pick_accel("auto"),
            "seconds": p["seconds"], "warmup": warmup, "repetitions": reps,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(meta, f)
    report(rows, out, meta)
    log(f"report {out}/report.md ({sum(r['status'] == 'ok' for r in rows)} ok of {len(rows)})")
    return 0 if rows and all(r["status"] == "ok" for r in rows) else 1


def peers_size(s):
    m = re.fullmatch(r"(\d+)([kK]?)", str(s))
    if not m:
        raise BenchError(f"bad size '{s}'")
    return int(m.group(1)) * (1024 if m.group(2) else 1)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BenchError as e:
        print(f"pairs: error: {e}", file=sys.stderr)
        sys.exit(2)
