"""hostgen.py: host packet generators beyond the Python raw socket
(`pkt.generator = testpmd`) and the backend's no-guest reference column
(`guests = reference`), the run kind of `pkt_rxonly`, `pkt_macswap` (the
PVP loop: testpmd flowgen sends and counts what the appliance's macswap
returns) and of `pkt_txonly` with a testpmd sink.

The generator and sink is dpdk-testpmd itself (Debian package dpdk-dev),
in interactive mode, commands on its stdin, in the run's network namespace
and a private mount namespace with a tmpfs on /run (as backends.VhostUser
runs it), `--no-huge --no-pci`:

  vhost-user  testpmd owns the vhost-user socket QEMU connects to (no
              switch, no tap): `txonly` into the guest's port (pkt_rxonly:
              the appliance runs app=pkt pkt.mode=rxonly and counts) or
              `rxonly` out of it (pkt_txonly: the appliance's txonly);
  tap         testpmd's `net_af_packet` PMD on the namespace's kernel tap
              (a PACKET_MMAP socket), txonly onto it or rxonly from it.

testpmd's txonly frames are UDP/IPv4 (here 10.77.0.1 -> 10.77.0.2) with no
VNPK sequence number: the guest counts them as frames (`frames`, not
`seq_frames`), so gaps are never claimed; the count closes instead: what
testpmd's forward statistics say it sent (TX-packets; TX-dropped are the
bursts the port refused, back-pressure, never on the wire) = what the
guest received, exactly on vhost-user; on tap up to the packet socket's
ring may stay unsent at the stop (`closes()`), tun's tx_dropped are
attempts that ring sends again, and the way back into the af_packet PMD
has no drop counter (only >= 0 is checked).

The reference column has no VM: the same generator on the same backend
with the fastest consumer testpmd has behind it --

  vhost-user  a second testpmd with a `net_virtio_user` port on the same
              socket (DPDK's own virtio driver in place of the guest's),
              rxonly, the guest's ring size (256);
  tap         a second testpmd whose `net_tap` PMD owns the tap (in
              place of QEMU) and reads it in rxonly.

Its rate is the consumer's receive rate over the measured interval
(testpmd's own "show port stats" throughput, since the previous show);
pkt_rxonly's and pkt_txonly's reference rows are the same measurement
(the generator's rate into the backend), so report.md divides the
appliance's rate by it (`reference_table`). The reference column's NDR
search (`tests = ndr`) is ndr.py's: the search's own generator with this
module's consumer in macswap.
"""

import json
import os
import re
import sys
import tempfile
import time

import backends
import cpu
import kvmstats
import procs
import runs
import xdprefl
from backends import need_testpmd
from procs import BenchError, Proc

# The af_packet PMD's PACKET_MMAP ring (frames): frames testpmd counted as
# sent into it that the kernel had not sent when forwarding stopped stay
# there (no further sendto() kicks them); a tap count closes within it.
AF_PACKET_RING = 512
START_TIMEOUT = 60
PKTPEER = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tests",
                       "tools", "pktpeer.py")
PKT_TESTS = ("pkt_rxonly", "pkt_txonly", "pkt_macswap")  # the tests with a reference row


# ---- testpmd's output ----

_FWD_HEAD = re.compile(r"-+ Forward statistics for port (\d+)\s+-+")
_ACC_HEAD = re.compile(r"\++ Accumulated forward statistics for all ports\++")
_NIC_HEAD = re.compile(r"#+ NIC statistics for port (\d+)\s+#+")
_PAIR = re.compile(r"([A-Za-z][A-Za-z-]*):\s+(\d+)")


def _pairs(line):
    return {k: int(v) for k, v in _PAIR.findall(line)}


def parse_forward_stats(lines):
    """testpmd's forward statistics (printed by `stop` and at exit): the
    last block of each port and the accumulated block, as
    {port: {"RX-packets": N, "RX-dropped": N, "TX-packets": N,
    "TX-dropped": N, ...}, "all": {...}}; {} when there is none."""
    out = {}
    cur = None
    for l in lines:
        m = _FWD_HEAD.search(l)
        if m:
            cur = int(m.group(1))
            out[cur] = {}
            continue
        if _ACC_HEAD.search(l):
            cur = "all"
            out[cur] = {}
            continue
        if cur is None:
            continue
        if re.match(r"^\s*[-+]{10,}\s*$", l):
            cur = None
            continue
        out[cur].update(_pairs(l))
    return out


def parse_port_stats(lines):
    """The last `show port stats` block of each port: {port: {"RX-packets",
    "TX-packets", "RX-missed", "Rx-pps", "Tx-pps", ...}}; testpmd's pps are
    over the time since the previous show of that port."""
    out = {}
    cur = None
    for l in lines:
        m = _NIC_HEAD.search(l)
        if m:
            cur = int(m.group(1))
            out[cur] = {}
            continue
        if cur is None:
            continue
        if re.match(r"^\s*#{10,}\s*$", l):
            cur = None
            continue
        out[cur].update(_pairs(l))
    return out


class Testpmd:
    """One interactive dpdk-testpmd in the namespace: start() it, send
    commands, read its statistics; stop() ends it by PID on every path."""

    count = 0

    def __init__(self, backend, name, vdevs, mode, lcores, size=None, mem=1024, mbufs=None, flows=False):
        # lcores = (main, forwarding): EAL's main lcore is the lowest of -l
        # unless --main-lcore says otherwise (-l 1,0 alone would put both
        # testpmds' forwarding lcores on CPU 1: measured, a tenth of the rate).
        Testpmd.count += 1
        self.backend = backend
        self.name = name
        prefix = f"vnetgen{os.getpid()}-{Testpmd.count}"
        # --no-flush-rx: `start` would otherwise read and discard what
        # waits in the RX queues, uncounted (found so: the drain after a
        # PVP stop lost the guest's last 128-214 frames).
        args = ["--forward-mode=" + mode, "--nb-cores=1", "-i", "--no-flush-rx"]
        if size is not None:
            # RFC 2544 size, the FCS included: testpmd's length is without it.
            args += [f"--txpkts={int(size) - 4}", f"--tx-ip={backends.HOST_IP},{backends.GUEST_IP}"]
        if flows:
            # flowgen (the PVP loop's generator: it also receives and
            # counts what comes back), one flow, no clones
            args += ["--flowgen-flows=1"]
        if mbufs:
            args += [f"--total-num-mbufs={mbufs}"]
        eal = ["-l", f"{lcores[0]},{lcores[1]}", "--main-lcore", str(lcores[0]), "--no-huge", "-m", str(mem), "--no-pci", "--file-prefix", prefix]
        for v in vdevs:
            eal += ["--vdev", v]
        self.cmdline = ["dpdk-testpmd", *eal, "--", *args]
        self.proc = None

    def start(self):
        script = "mount -t tmpfs vnetbench-dpdk /run && exec \"$@\""
        argv = self.backend.wrap(["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh",
                                  "stdbuf", "-oL", *self.cmdline])
        self.proc = Proc(self.name, argv, keep_stdin=True)
        # Interactive testpmd: ports configured, link checked, then the prompt.
        if not self.proc.wait_line(lambda l: "Checking link statuses" in l, START_TIMEOUT) or \
                not self.proc.wait_line(lambda l: l.strip().endswith("Done") or "Done" == l.strip(), 10):
            tail = self.proc.tail(20)
            self.stop()
            raise BenchError(f"{self.name} (dpdk-testpmd, Debian package dpdk-dev) did not come up within "
                             f"{START_TIMEOUT}s; its output:\n{tail}")
        return self

    def send(self, cmd):
        try:
            self.proc.p.stdin.write((cmd + "\n").encode())
            self.proc.p.stdin.flush()
        except (OSError, ValueError) as e:
            raise BenchError(f"{self.name}: cannot send '{cmd}' ({e}); its output:\n{self.proc.tail(20)}")

    def port_stats(self, timeout=10):
        """`show port stats all`; the last block of each port once it came."""
        n = len(self.proc.lines)
        self.send("show port stats all")
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            new = self.proc.text()[n:]
            if sum(1 for l in new if re.match(r"^\s*#{10,}\s*$", l)) >= 1 and any(_NIC_HEAD.search(l) for l in new):
                time.sleep(0.2)  # every port's block
                return parse_port_stats(self.proc.text()[n:])
            time.sleep(0.05)
        raise BenchError(f"{self.name}: no port statistics within {timeout}s:\n{self.proc.tail(20)}")

    def stop_forwarding(self, timeout=15):
        """`stop`: forwarding ends, the forward statistics of the run."""
        n = len(self.proc.lines)
        self.send("stop")
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            new = self.proc.text()[n:]
            if any(_ACC_HEAD.search(l) for l in new) or any("Packet forwarding not started" in l for l in new):
                time.sleep(0.3)
                return parse_forward_stats(self.proc.text()[n:])
            time.sleep(0.05)
        raise BenchError(f"{self.name}: no forward statistics within {timeout}s:\n{self.proc.tail(20)}")

    def drain(self, seconds=1.0):
        """After a flowgen stop: receive for `seconds` more (rxonly), so
        what was still coming back is counted; the RX-packets of it."""
        self.send("set fwd rxonly")
        self.send("start")
        time.sleep(seconds)
        return self.stop_forwarding().get(0, {}).get("RX-packets", 0)

    def stop(self):
        if self.proc:
            try:
                self.send("quit")
            except BenchError:
                pass
            self.proc.stop()


class VhostUserGen(backends.VhostUser):
    """vhost-user with testpmd on the guest's port itself (no switch, no
    tap); hostgen starts that testpmd, this only makes the socket path."""

    def setup(self, workdir):
        self.ns = backends.Netns(make_tap=False).open()
        self.sockdir = tempfile.mkdtemp(prefix="vnetbench-vu-")
        self.sock = os.path.join(self.sockdir, "vhost-user.sock")


class TapRef(backends.Tap):
    """The tap reference: a namespace without a tap; the consumer's tap
    PMD makes it (in place of QEMU)."""

    def setup(self, workdir):
        self.ns = backends.Netns(make_tap=False).open()
        # No IPv6 on links made from now on: the tap PMD's tap would send
        # its router solicitation and MLD reports before address_tap()
        # turns IPv6 off, and the consumer would count them (seen: one
        # frame more received than sent).
        for k in ("default", "all"):
            procs.run(self.ns.wrap(["sysctl", "-qw", f"net.ipv6.conf.{k}.disable_ipv6=1"]), timeout=30)

    def wait_tap(self, timeout=10):
        end = time.monotonic() + timeout
        while not self.ns.has_link(backends.TAP):
            if time.monotonic() > end:
                raise BenchError(f"the consumer's tap PMD did not create {backends.TAP} within {timeout}s")
            time.sleep(0.1)
        self.ns.address_tap()


def lcores(backend):
    """(the generator's lcores, the consumer's): main + one forwarding lcore
    each, the consumer's the other way round, so the two forwarding lcores
    sit on different CPUs."""
    spec = backend.pin or "0,1"
    cpus = backends.cpu_list(spec)
    if len(cpus) < 2:
        raise BenchError(f"pin.backend={spec}: testpmd needs two lcores (main + forwarding), e.g. 0,1")
    return (cpus[0], cpus[1]), (cpus[1], cpus[0])


def generator(backend, mode, size):
    """testpmd on the backend's guest-side port: mode txonly (it generates)
    or rxonly (it sinks)."""
    gen_l, _ = lcores(backend)
    if backend.name == "vhost-user":
        vdev = f"net_vhost0,iface={backend.sock}"
    else:
        vdev = f"net_af_packet0,iface={backends.TAP},framecnt={AF_PACKET_RING}"
    return Testpmd(backend, "dpdk-testpmd", [vdev], mode, gen_l, size=size if mode in ("txonly", "flowgen") else None,
                   mem=1024, mbufs=16384, flows=mode == "flowgen")


def consumer(backend, mode="rxonly"):
    """The reference's consumer: what stands where the guest would
    (rxonly, or macswap for the PVP loop)."""
    _, con_l = lcores(backend)
    if backend.name == "vhost-user":
        vdev = f"net_virtio_user0,path={backend.sock},queue_size={backend.ring()}"
    else:
        vdev = f"net_tap0,iface={backends.TAP}"
    return Testpmd(backend, "dpdk-testpmd-consumer", [vdev], mode, con_l, mem=256, mbufs=8192)


def tap_dropped(backend):
    r = procs.run(backend.wrap(["cat", f"/sys/class/net/{backends.TAP}/statistics/tx_dropped"]), timeout=10,
                  check=False)
    try:
        return int(r.stdout.strip())
    except (ValueError, AttributeError):
        return None


def closes(backend, unaccounted):
    """Does a count with a testpmd generator close? Exactly on vhost-user;
    on tap up to the frames its packet socket's ring may still hold."""
    if backend.name == "tap":
        return 0 <= unaccounted <= AF_PACKET_RING
    return unaccounted == 0


def make_backend(run, m, guest, row):
    b = runs.backend_for(run, m, guest, row)
    if b is None:
        return None
    if b.name not in ("tap", "vhost-user") or b.opts:
        row.update(status="skipped", wall_s=0.0,
                   error=f"{run.test} with pkt.generator={run.params.get('generator')}: backends tap and "
                         f"vhost-user (no options) only")
        return None
    if b.queues > 1:
        row.update(status="skipped", wall_s=0.0,
                   error=f"{run.test} with pkt.generator={run.params.get('generator')}: one queue pair only")
        return None
    if b.name == "vhost-user":
        b = VhostUserGen(b.spec, b.opts, b.pin, b.queues)
    elif guest.name == "reference":
        b = TapRef(b.spec, b.opts, b.pin, b.queues)
    return b


def execute_run(run, m, guest, logdir, row):
    """One pkt_rxonly run (or pkt_txonly with a testpmd sink, or a
    reference row); fills row and returns it, every process ended."""
    p = run.params
    gen = p.get("generator", "python")
    backend = make_backend(run, m, guest, row)
    if backend is None:
        return row
    if str(p["size"]) == "imix" and (gen == "testpmd" or guest.name == "reference"):
        row.update(status="skipped", wall_s=0.0, error="testpmd's txonly sends one frame size (no imix)")
        return row
    t0 = time.monotonic()
    log = os.path.join(logdir, f"run-{run.index:04d}.log")
    row["log"] = os.path.relpath(log, os.path.dirname(logdir))
    row["generator"] = "testpmd" if guest.name == "reference" else gen
    boot, tps, extra = None, [], []
    try:
        if guest.name == "reference" or gen == "testpmd":
            need_testpmd()
        backend.setup(logdir)
        if guest.name == "reference":
            _reference(run, m, backend, row, tps)
        else:
            _guest(run, m, guest, backend, row, tps, extra)
        row["status"] = "ok"
    except BenchError as e:
        runs.record_error(row, e)
    finally:
        for t in reversed(tps):
            t.stop()
        if boot:
            boot.stop()
        for b in extra:
            b.stop()
        backend.teardown()
        row["wall_s"] = round(time.monotonic() - t0, 2)
        try:
            with open(log, "w") as f:
                for t in tps:
                    if t.proc:
                        f.write(f"==== {t.name}: {' '.join(t.proc.argv)}\n")
                        for tt, s, l in t.proc.lines:
                            f.write(f"{tt - t.proc.t0:9.3f} {s} {l}\n")
            for b in extra:
                runs.write_log(log + ".guest", b, None, None)
        except OSError:
            pass
    return row


def _measure(which, seconds, warmup):
    """Each (testpmd, key)'s rate on port 0 over [warmup, warmup + seconds]
    after the start: the show before the interval resets testpmd's "since
    last show"."""
    time.sleep(warmup)
    for tp, _k in which:
        tp.port_stats()
    time.sleep(seconds)
    out = []
    for tp, key in which:
        st = tp.port_stats().get(0, {})
        if key not in st:
            raise BenchError(f"{tp.name}: port 0 statistics have no {key}:\n{tp.proc.tail(20)}")
        out.append(st[key])
    return out


def _reference(run, m, backend, row, tps):
    p = run.params
    pvp = run.test == "pkt_macswap"
    gmode, cmode = ("flowgen", "macswap") if pvp else ("txonly", "rxonly")
    if backend.name == "tap":
        # The consumer's tap PMD makes the tap (in place of QEMU), then the
        # generator's packet socket sends onto it.
        con = consumer(backend, cmode).start()
        tps.append(con)
        backend.wait_tap()
        gen = generator(backend, gmode, p["size"]).start()
        tps.append(gen)
    else:
        gen = generator(backend, gmode, p["size"]).start()
        tps.append(gen)
        con = consumer(backend, cmode).start()
        tps.append(con)
    con.send("start")
    gen.send("start")
    if pvp:
        # The loop's rate is what came back to the generator.
        pps, gen_pps = _measure([(gen, "Rx-pps"), (gen, "Tx-pps")], p["seconds"], m.warmup)
    else:
        pps, gen_pps = _measure([(con, "Rx-pps"), (gen, "Tx-pps")], p["seconds"], m.warmup)
    g = gen.stop_forwarding()
    back = gen.drain() if pvp else 0
    time.sleep(0.5)
    c = con.stop_forwarding()
    sent = g.get(0, {}).get("TX-packets")
    got = c.get(0, {}).get("RX-packets")
    if pvp:
        row.update(ref_forwarded=c.get(0, {}).get("TX-packets"), gen_back=g.get(0, {}).get("RX-packets", 0) + back)
    drops = tap_dropped(backend) if backend.name == "tap" else 0
    row.update(pps=pps, frames=got, gen_sent=sent, gen_tx_dropped=g.get(0, {}).get("TX-dropped"),
               gen_pps=gen_pps, ref_received=got, tap_tx_dropped=drops,
               mbps=round(pps * int(p["size"]) * 8 / 1e6, 1), accel="none")
    if not pps or pps <= 0:
        raise BenchError(f"reference: the consumer received nothing (generator sent {sent})")
    if sent is None or got is None:
        raise BenchError("reference: no forward statistics from one of the testpmds")
    # The tap's tx_dropped are attempts tun refused (its queue full) that
    # the packet socket's ring sends again: not losses (a guest row closes
    # with sent = received exactly). What a count that does not close
    # leaves over is in `unaccounted` (frames testpmd counted into a ring
    # the kernel never flushed after the stop).
    row["unaccounted"] = sent - got
    row["closes"] = closes(backend, sent - got)


def _guest(run, m, guest, backend, row, tps, extra):
    """The guest's run with the host's CPU (QEMU, the testpmd generator or
    sink as `peer`: on vhost-user it is also the backend) and, under KVM,
    the exit counters sampled over it; both read over the guest's own
    measured interval (runs.guest_window), as peerrun.execute() does."""
    sampler, exits = cpu.Sampler(), []
    try:
        sampler.start()
        boot, obj = _guest_run(run, m, guest, backend, row, tps, extra, sampler, exits)
    finally:
        for s in exits:
            s.stop()
        sampler.stop()
    t_res = next((t for t, stream, l in boot.proc.lines if stream == "out" and l.startswith("RESULT {")), None)
    window = runs.guest_window(obj, t_res)
    if window is None:
        return
    row["cpu_window"] = "guest"
    row.update(kvmstats.availability(exits[0] if exits else None))
    if exits and exits[0].samples:
        row.update(kvmstats.row_columns(kvmstats.interval(exits[0].samples, *window), obj))
    fig = sampler.interval(*window)
    row.update(cpu.row_columns(fig))
    if fig and row.get("pps") and row.get("host_cpu_pct"):
        row["pps_per_cpu"] = round(row["pps"] / (row["host_cpu_pct"] / 100.0), 1)


def _guest_run(run, m, guest, backend, row, tps, extra, sampler, exits):
    """The measurement itself: (the boot, its RESULT); sampler watches the
    processes as they appear, a KVM exit sampler goes into exits."""

    if run.test == "pkt_rr":
        return _rr(run, m, guest, backend, row, tps, extra, sampler, exits)

    p = run.params
    gen_kind = p.get("generator", "python")
    rxonly = run.test == "pkt_rxonly"
    pvp = run.test == "pkt_macswap"
    tp = None
    if gen_kind == "testpmd":
        # Up before QEMU: on vhost-user the socket is testpmd's (QEMU is
        # the client). The sink forwards from the start, the generator once
        # the guest is ready.
        tp = generator(backend, "flowgen" if pvp else "txonly" if rxonly else "rxonly", p["size"]).start()
        tps.append(tp)
        sampler.watch("peer", runs._pid_of(tp.proc, "dpdk-testpmd"))
        if not (rxonly or pvp):
            tp.send("start")
    elif pvp:
        raise BenchError("pkt_macswap needs pkt.generator=testpmd (the Python peer's PVP loop is tests = ndr)")
    # Ready: app=pkt's "pkt: ..." line, the Linux guest's XDP program
    # attached ("listening l2") or its pktgen starting.
    boot = _boot_pkt(run, m, guest, backend, row, extra, sampler, exits,
                     ("pkt: ", "vnetlab-linux listening l2 ", "vnetlab-linux pktgen start"))
    d0 = tap_dropped(backend) if backend.name == "tap" else 0
    if (rxonly or pvp) and gen_kind == "testpmd":
        tp.send("start")
        gen_pps, back_pps = _measure([(tp, "Tx-pps"), (tp, "Rx-pps")], p["seconds"], m.warmup)
        g = tp.stop_forwarding().get(0, {})
        row.update(gen_sent=g.get("TX-packets"), gen_tx_dropped=g.get("TX-dropped"), gen_pps=gen_pps)
        if pvp:
            # What the guest still forwards after the stop is counted too.
            row.update(gen_back=g.get("RX-packets", 0) + tp.drain(2.0), gen_back_pps=back_pps)
    elif rxonly:
        # The Python raw socket as fast as it goes.
        n = int(p["seconds"]) * 100000
        r = procs.run(backend.wrap([sys.executable, PKTPEER, "send", backends.TAP, "ff:ff:ff:ff:ff:ff", str(n), "0"]),
                      timeout=m.run_timeout, check=False)
        lines = (r.stdout or "").strip().splitlines()
        if r.returncode or not lines:
            raise BenchError(f"pktpeer send failed ({r.returncode}): {(r.stderr or '')[-300:]}")
        res = json.loads(lines[-1])
        row.update(gen_sent=res.get("sent"), gen_pps=round(res["sent"] / res["send_s"], 1) if res.get("send_s") else None)
    obj = runs.final_result(boot, row, m.run_timeout + 15)
    for k, v in obj.items():
        row[("guest_" + k) if k in runs.RESULT_META else k] = v
    if guest.name == "linux" and (rxonly or pvp):
        # XDP counts nothing of its own: eth0's counters over the serving
        # phase are what it received (and, XDP_TX, sent back).
        # XDP_TX's own drops (received, not sent back) count as rx_other.
        # Its rate is testpmd's over the measured interval: what the
        # guest's ring took (rxonly), what came back (the PVP loop).
        rx, tx = obj.get("rx_frames") or 0, obj.get("tx_frames") or 0
        obj = dict(obj, frames=tx if pvp else rx, rx_other=rx - tx if pvp else 0, fwd_unsent=0)
        row.update(frames=obj["frames"], rx_other=obj["rx_other"], fwd_unsent=0,
                   pps=row.get("gen_back_pps") if pvp else row.get("gen_pps"))
    drops = (tap_dropped(backend) - d0) if backend.name == "tap" else 0
    row["tap_tx_dropped"] = drops
    if pvp:
        # Both directions: what testpmd sent = what the guest forwarded,
        # counted or still held (on tap what tun refused is sent again by
        # the packet socket's ring); what the guest forwarded = what came
        # back. What does not add up is in `unaccounted`/`unaccounted_back`.
        got = (obj.get("frames") or 0) + (obj.get("rx_other") or 0) + (obj.get("fwd_unsent") or 0)
        row["unaccounted"] = (row.get("gen_sent") or 0) - got
        row["unaccounted_back"] = (obj.get("frames") or 0) - (row.get("gen_back") or 0)
        # On tap the way back ends in testpmd's packet socket, whose drops
        # DPDK 22.11's af_packet PMD does not report: there the loss back
        # is only bounded below (>= 0), the rest is `unaccounted_back`.
        back_ok = row["unaccounted_back"] >= 0 if backend.name == "tap" else row["unaccounted_back"] == 0
        row["closes"] = closes(backend, row["unaccounted"]) and back_ok
        row["unsequenced"] = True
    elif rxonly:
        # Every frame the generator sent reached the guest or was dropped
        # at the tap; testpmd's frames carry no sequence number, so the
        # guest's seq_* say nothing of them (frames is the count).
        # On tap the testpmd generator's packet socket sends what tun
        # refused again (tx_dropped are retries), the Python one does not.
        lost = drops if (gen_kind == "python" or backend.name != "tap") else 0
        row["unaccounted"] = (row.get("gen_sent") or 0) - (obj.get("frames") or 0) - (lost or 0)
        row["closes"] = closes(backend, row["unaccounted"]) if gen_kind == "testpmd" else row["unaccounted"] == 0
        row["unsequenced"] = gen_kind == "testpmd"
    elif tp:
        time.sleep(1)
        ps = tp.port_stats().get(0, {})
        s = tp.stop_forwarding().get(0, {})
        # RX-missed: what the sink's port could not take (the packet
        # socket's ring full: PACKET_STATISTICS drops; vhost-user: none).
        missed = ps.get("RX-missed") or 0
        row.update(sink_received=s.get("RX-packets"), sink_rx_missed=missed)
        row["unaccounted"] = (obj.get("frames") or 0) - (s.get("RX-packets") or 0) - missed - (drops or 0)
        # The same on tap: the packet socket's own drops are not reported.
        row["closes"] = row["unaccounted"] >= 0 if backend.name == "tap" else row["unaccounted"] == 0
    return boot, obj


def _boot_pkt(run, m, guest, backend, row, extra, sampler, exits, ready=("pkt: ",)):
    """The guest's boot, watched (CPU, KVM exits), up to a line starting
    with one of `ready` (app=pkt's "pkt: ..." by default)."""
    boot, cmdline = guest.start(run, backend, m.run_timeout)
    extra.append(boot)
    row["cmdline"] = cmdline
    import runs  # runs imports this module

    runs.pin_vcpus(run, m, boot, row)
    sampler.watch("qemu", boot.qemu_pid)
    if getattr(boot, "qmp", None):
        exits.append(kvmstats.Sampler(boot.qmp))
        exits[0].start()
    item = boot.proc.wait_line(lambda l: l.startswith((*ready, "ERROR {")), 90)
    if not item or item[2].startswith("ERROR"):
        raise BenchError(f"guest not ready; console tail:\n{boot.proc.tail()}")
    return boot


def _rr(run, m, guest, backend, row, tps, extra, sampler, exits):
    """pkt_rr: the appliance's round trips against a polling reflector --
    testpmd macswap on the guest's vhost-user socket (two busy threads:
    the guest's vCPU and testpmd's forwarding lcore), or on tap
    host/xdp/macswap.c's XDP_TX (no host process at all)."""
    if guest.name != "vnetlab":
        raise BenchError("pkt_rr: the appliance's app=pkt only")
    if backend.name == "vhost-user":
        need_testpmd()
        tp = generator(backend, "macswap", None).start()
        tps.append(tp)
        sampler.watch("peer", runs._pid_of(tp.proc, "dpdk-testpmd"))
        tp.send("start")
        row["generator"] = "testpmd-macswap"
    else:
        xdprefl.attach(backend.wrap, backends.TAP)
        row["generator"] = "xdp-macswap"
    boot = _boot_pkt(run, m, guest, backend, row, extra, sampler, exits)
    obj = runs.final_result(boot, row, m.run_timeout + 15)
    for k, v in obj.items():
        row[("guest_" + k) if k in runs.RESULT_META else k] = v
    h = runs.hist_of(boot.proc.text("out"))
    if h:
        row["lat_hist"] = h.get("buckets")
    if not obj.get("transactions"):
        raise BenchError(f"pkt_rr: no frame came back from the reflector ({obj.get('lost')} lost)")
    return boot, obj


def reference_table(rows, columns):
    """report.md lines: per packet test, backend and frame size, each
    column's frames/s (median) over the reference column's (issue 25's
    acceptance: the appliance at >= 0.8x the backend's no-guest rate)."""
    ok = [r for r in rows if r.get("status") == "ok" and r.get("test") in PKT_TESTS and r.get("generator") == "testpmd"]
    refs = [r for r in ok if r["column"].split("@")[0] == "reference"]
    if not refs:
        return []
    out = ["### Against the backend's no-guest reference (testpmd generator)", "",
           "frames/s, median of the repetitions; the reference column is dpdk-testpmd txonly into the backend "
           "with a second testpmd where the guest would be (hostgen.py); x = column / reference; "
           "counts: sent = received (+ counted drops) in every run", "",
           "| test | backend | frame size | column | frames/s | reference frames/s | x reference | counts |",
           "|---|---|---|---|---|---|---|---|"]

    def med(rs):
        v = sorted(r["pps"] for r in rs)
        return v[len(v) // 2]

    for test in PKT_TESTS:
        for backend in sorted({r["backend"] for r in refs if r["test"] == test}):
            for size in sorted({str(r["size"]) for r in refs if r["test"] == test and r["backend"] == backend}):
                sel = [r for r in ok if r["test"] == test and r["backend"] == backend and str(r["size"]) == size]
                # Columns as the rows name them (COLUMN@ACCEL in a run over
                # two accelerators), each against the reference of its own.
                cols = [c for c in columns if c in {r["column"] for r in sel}]
                cols += list(dict.fromkeys(r["column"] for r in sel if r["column"] not in cols))
                for c in cols:
                    acc = c.partition("@")[2]
                    rs = [r for r in sel if r["column"] == c and c.split("@")[0] != "reference"]
                    rf = [r for r in sel if r["column"] == "reference" + ("@" + acc if acc else "")]
                    if not rs or not rf:
                        continue
                    v, ref = med(rs), med(rf)
                    closes = "close" if all(r.get("closes") for r in rs) else "do not close"
                    out.append(f"| {test} | {backend} | {size} | {c} | {v:,.0f} | {ref:,.0f} | "
                               f"{v / ref:.2f} | {closes} |")
    out.append("")
    return out


# ---- the kind's interface (kinds.py) ----

OPTIONS = ("pkt.sizes", "pkt.burst", "pkt.generator")
REPORT = (reference_table,)  # report.md: the columns against the no-guest reference


def claims(run):
    # (the reference column's ndr searches are ndr.py's, a kind before this one)
    return run.test in ("pkt_rxonly", "pkt_macswap", "pkt_rr") or run.guest == "reference" or (
        run.test == "pkt_txonly" and run.params.get("generator") == "testpmd")


def run_row(run, m, guest, logdir, execute):
    return execute_run(run, m, guest, logdir, runs.base_row(run, m))
