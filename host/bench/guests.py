"""guests.py: the systems under test. Each guest kind turns a run into a
boot and gives back the console's RESULT/ERROR line; the report sees only
the rows, keyed by column, so a new kind is one more class here.

  vnetlab   this appliance: one PVH build per variant (variants.py), the
            benchmark chosen on the kernel command line (apps/rr.c,
            apps/stream.c; apps/echo.c answers pings), booted through
            host/qemu-run.sh, which picks KVM or TCG and applies the hard
            timeout.

  linux     a stock Debian kernel with an initramfs of busybox, sockperf and
            iperf (host/linux-guest/build.sh, from Debian packages only),
            serving the same host peers: `sockperf server` for rr, `iperf
            -s` for stream, the kernel itself for ping. Booted with its own
            QEMU command line -- same machine, CPU model, memory, one vCPU
            and the same virtio-net-pci NIC on the same backend -- under a
            hard `timeout`. It only serves (rr.role/stream.role=server, or
            ping); the host peer measures, and complete() turns the peer's
            figures into the row's tps/lat_*/mbps.

A guest kind implements prepare(), supports(test, backend), start(run,
backend, timeout) -> (Boot, cmdline) and complete(row) (fill in figures
after the peer's are in the row); its console prints `... listening ...`
when it serves and one `RESULT {json}` or `ERROR {json}` line.
"""

import json
import os
import re
import secrets
import tempfile

import backends
import kvmstats
import peers
import procs
import variants
from matrix import MACHINES, TESTS, run_pins
from procs import BenchError, Proc

TOP = variants.TOP
QEMU_RUN = os.path.join(TOP, "host", "qemu-run.sh")


class Boot:
    """One running guest: its console, its accelerator, its QEMU PID."""

    def __init__(self, proc, ctl_token=""):
        self.proc = proc
        self._qemu = None
        self.ctl_token = ctl_token  # the control port's secret for this run ("": none)
        self.qmp = None  # QMP socket path, where kvmstats may sample

    def qemu_pid(self):
        if self._qemu and os.path.exists(f"/proc/{self._qemu}"):
            return self._qemu
        for p in procs.descendants(self.proc.pid):
            if procs.comm(p).startswith("qemu-system"):
                self._qemu = p
                return p
        return None

    def _qemu_run_said(self, pattern):
        """The first group of pattern in qemu-run.sh's stderr, or None."""
        for l in self.proc.text("err"):
            m = re.search(pattern, l)
            if m:
                return m.group(1)
        return None

    def accel(self):
        return self._qemu_run_said(r"qemu-run: accel=(\w+)")

    def cpu_model(self):
        return self._qemu_run_said(r"qemu-run: accel=\w+(?: kvm_mode=\w+)? cpu=(\S+)")

    def wait_ready(self, timeout):
        """Until a serving app says it listens; False on timeout/exit."""
        return bool(self.proc.wait_line(lambda l: bool(re.search(r"\blistening\b", l)) or l.startswith("ERROR "), timeout)) and not self.error()

    def wait_result(self, timeout):
        """(kind, dict, host time) of the first RESULT or ERROR line; kind
        is 'timeout' or 'exit' when neither came."""
        item = self.proc.wait_line(lambda l: l.startswith("RESULT {") or l.startswith("ERROR {"), timeout)
        if not item:
            return ("exit" if not self.proc.alive() else "timeout"), {}, None
        t, _, line = item
        kind, _, js = line.partition(" ")
        try:
            obj = json.loads(js)
        except ValueError:
            return "ERROR", {"where": "harness", "msg": f"unparsable line: {line[:200]}"}, t
        return kind, obj, t

    def error(self):
        for l in self.proc.text("out"):
            if l.startswith("ERROR {"):
                try:
                    return json.loads(l[6:])
                except ValueError:
                    return {"msg": l}
        return None

    def counters(self):
        """The final COUNTERS lines (whole boot), {queue: dict}."""
        out = {}
        for l in self.proc.text("out"):
            if l.startswith("COUNTERS {"):
                try:
                    c = json.loads(l[9:])
                    out[c.get("queue")] = c
                except ValueError:
                    pass
        return out

    def stop(self):
        self.proc.stop()


class Vnetlab:
    name = "vnetlab"

    def __init__(self, matrix, log):
        self.m = matrix
        self.log = log
        self.kernels = {}
        self.packed = {}

    def prepare(self):
        """Build each variant of the matrix once."""
        procs.require_tools(["make", "gcc", "qemu-system-x86_64"])
        for v in self.m.variants:
            self.kernels[v] = variants.build(v, self.m.variant_vars[v], self.log)
            self.packed[v] = variants.is_packed(self.m.variant_vars[v])

    def supports(self, test, backend):
        """None, or why this test cannot run on this backend."""
        if test == "ping" and backend.name == "user":
            return "slirp does not forward ICMP to the guest: ping needs tap, vhost or vhost-user"
        if TESTS[test]["kind"] in ("pkt", "ndr") and backend.name == "user":
            return f"{test}: the host peer is a raw socket on the namespace's kernel tap (tap, vhost, vhost-user)"
        return None

    def keys(self, run, backend):
        """Kernel command line of a run, as an ordered dict."""
        p = run.params
        k = {"backend": run.backend.replace(":", "/").replace(",", "+")}
        test = run.test
        if test == "ndr":
            # app=pkt has no IP stack (no ip=): it runs for the whole search
            # and ends 10 s after the last trial's frames (longer than the
            # harness waits for a trial's PKT_TRIAL line when the marker was
            # lost, ndr.guest_trial(), and than a loaded host takes to start
            # the next trial's peer: the next trial must find it running).
            k.update({"app": "pkt", "pkt.mode": p["mode"], "pkt.seconds": self.m.run_timeout, "pkt.idle": 10})
            return k
        if test in ("pkt_rxonly", "pkt_macswap"):
            # Counts (and swaps back) what the host generator sends
            # (hostgen.py), for as long as the run may last; ends 2 s after
            # the last frame.
            k.update({"app": "pkt", "pkt.mode": test[4:], "pkt.seconds": self.m.run_timeout, "pkt.idle": 2,
                      "pkt.burst": p["burst"]})
            return k
        if test == "pkt_rr":
            # One frame at a time to the host's reflector (hostgen.py).
            k.update({"app": "pkt", "pkt.mode": "rr", "pkt.size": p["size"], "pkt.seconds": p["seconds"],
                      "pkt.warmup": int(self.m.warmup)})
            return k
        if test == "pkt_txonly":
            # Full speed into the host's sink for the run's seconds.
            k.update({"app": "pkt", "pkt.mode": "txonly", "pkt.size": p["size"], "pkt.burst": p["burst"],
                      "pkt.seconds": p["seconds"]})
            q = run_queues(run, self.m)
            if q > 1:
                # One queue pair per vCPU, each running its own burst loop
                # (apps/pkt.c; docs/multiqueue.md).
                k.update({"mq": q, "smp": q})
            return k
        q = run_queues(run, self.m)
        if q > 1 and test not in ("tcp_rr", "tcp_stream"):
            raise BenchError(f"{test}: the harness runs the appliance with mq=N in app=pkt (pkt_txonly) and the "
                             "rr and stream apps (tcp_rr, tcp_stream) only")
        k.update(backend.guest_keys())
        if test in ("tcp_rr", "udp_rr"):
            k.update({"app": "rr", "rr.proto": test[:3], "rr.role": self.m.rr_role})
            if self.m.rr_role == "client":
                k.update({"rr.peer": backend.host_ip, "rr.port": backend.host_port(peers.SOCKPERF_PORT),
                          "rr.req": p["req"], "rr.resp": p["resp"],
                          "rr.instances": p["instances"], "rr.burst": p["burst"],
                          "rr.seconds": p["seconds"], "rr.warmup": self.m.warmup})
            else:
                # The host client decides sizes and duration; the server
                # waits for it and ends when it stops asking.
                k.update({"rr.warmup": self.m.warmup, "rr.wait": 60})
        elif test in ("tcp_stream", "tcp_maerts", "udp_stream"):
            k.update({"app": "stream", "stream.role": self.m.stream_role, "stream.warmup": self.m.warmup})
            if self.m.stream_role == "client":
                k.update({"stream.test": test[4:], "stream.peer": backend.host_ip,
                          "stream.port": backend.host_port(peers.IPERF_PORT), "stream.msg": p["msg"],
                          "stream.instances": p["instances"], "stream.seconds": p["seconds"]})
            else:
                # The host iperf client decides direction, size and count;
                # the appliance writes stream.msg bytes when it sends.
                k.update({"stream.msg": p["msg"], "stream.wait": 60})
        elif test == "ping":
            k.update({"app": "echo", "echo.seconds": p["seconds"] + 120})
        elif test == "memcached":
            # memcaslap decides the load; the server ends 2 s after it stops.
            k.update({"app": "memcached", "memcached.warmup": self.m.warmup, "memcached.idle": 2,
                      "memcached.wait": 60})
        if q > 1:
            # A TCP/IP copy per queue pair on its own vCPU, each with its
            # share of the connections (docs/multiqueue.md).
            k.update({"mq": q, "smp": q})
        return k

    def start(self, run, backend, timeout):
        kernel = self.kernels[run.variant]
        # A fresh control-port secret per run (apps/lib/ctl.c): a stop or a
        # state request from anyone else on the wire is ignored.
        token = secrets.token_hex(16)
        keys = self.keys(run, backend)
        cmdline = " ".join(f"{a}={b}" for a, b in keys.items())
        argv_cmdline = f"{cmdline} ctl.token={token}"
        net_opts, qemu_extra = backend.qemu_net()
        if self.packed.get(run.variant):
            # A RING=packed build refuses a device without RING_PACKED.
            if backend.opts.get("packed") == "off":
                raise BenchError(f"variant {run.variant} is RING=packed: backend {run.backend} "
                                 "(packed=off) cannot run it")
            qemu_extra = [*qemu_extra, *variants.PACKED_QEMU_ARGS]
        # Named QEMU threads ("CPU 0/TCG", "IO ...", "worker") make the
        # per-thread CPU placement readable.
        qemu_extra = ["-name", "vnetlab,debug-threads=on", *qemu_extra]
        q = run_queues(run, self.m)
        if q > 1:
            qemu_extra += ["-smp", str(q)]
        # A QMP socket for KVM's exit counters (kvmstats.py), and under TCG
        # too for QEMU's view of the queues (ndr.py, a trial the guest
        # never counted).
        qmp = kvmstats.socket_path(tempfile.mkdtemp(prefix="vnetbench-qmp-"))
        qemu_extra += ["-qmp", f"unix:{qmp},server=on,wait=off"]
        accel = run.accel or self.m.accel
        argv = [QEMU_RUN, "--kernel", kernel, "--append", argv_cmdline, "--accel", accel,
                "--machine", qemu_machine(run, self.m), "--timeout", str(timeout), *net_opts]
        if getattr(self.m, "cpu", ""):
            argv[1:1] = ["--cpu", self.m.cpu]
        if qemu_extra:
            argv += ["--", *qemu_extra]
        if run_pins(run, self.m).get("qemu"):
            argv = ["taskset", "-c", run_pins(run, self.m)["qemu"]] + argv
        # The row's cmdline leaves the token out: it is no figure of the run.
        boot = Boot(Proc("qemu", backend.wrap(argv)), token)
        boot.qmp = qmp
        return boot, cmdline

    def complete(self, row):
        """The appliance measures itself: nothing to add."""


# Where host/linux-guest/build.sh writes (it honours VNETLAB_DEPS too).
LINUX_DIR = os.path.join(os.environ.get("VNETLAB_DEPS") or os.path.join(TOP, "deps"), "linux-guest")
LINUX_BUILD = os.path.join(TOP, "host", "linux-guest", "build.sh")
# Same as host/qemu-run.sh's default --mem (vhost-user's memfd is 512M too).
GUEST_MEM_MIB = 512
# The CPU model of every guest, per accelerator: host/qemu-run.sh's defaults
# (its header says why; a test checks the two agree).
CPU_MODEL = {"kvm": "host", "tcg": "qemu64"}


def run_queues(run, m):
    """The run's queue pairs (= vCPUs), the queues axis value."""
    return getattr(run, "queues", 0) or getattr(m, "queues", 1)


def qemu_machine(run, m):
    """The run's machine axis value as host/qemu-run.sh (and -M) spell it."""
    return MACHINES[run.machine or m.machine]


def pick_accel(requested):
    """kvm|tcg for the stock Linux guest's QEMU command line. auto: KVM only
    when the CPU shows vmx/svm and /dev/kvm is usable. A software /dev/kvm
    (this machine kind's kvm_pvm) runs only a guest that registers with it
    (the appliance, kernel/pvm.c); stock Linux stays in its instruction
    emulator there (it did not get past real-mode setup in 60 s), so its
    column stays TCG and names it."""
    if requested in ("kvm", "tcg"):
        return requested
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read()
    except OSError:
        flags = ""
    if re.search(r"\b(vmx|svm)\b", flags) and os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "kvm"
    return "tcg"


def qemu_net_args(net_opts):
    """host/qemu-run.sh network options (what Backend.qemu_net() returns)
    -> QEMU arguments, the NIC exactly as qemu-run.sh makes it."""
    out, vhost, net, queues = [], False, None, 1
    i = 0
    while i < len(net_opts):
        o = net_opts[i]
        if o == "--net" and i + 1 < len(net_opts):
            net = net_opts[i + 1]
            i += 2
        elif o == "--queues" and i + 1 < len(net_opts):
            queues = int(net_opts[i + 1])
            i += 2
        elif o == "--vhost":
            vhost = True
            i += 1
        else:
            raise BenchError(f"linux guest: unsupported qemu-run.sh network option '{o}' (known: --net, --vhost, --queues)")
    if net is None or net == "none":
        return out
    if net == "user":
        return ["-netdev", "user,id=n0", "-device", backends.NIC]
    if net.startswith("tap:"):
        netdev = f"tap,id=n0,ifname={net[4:]},script=no,downscript=no" + (",vhost=on" if vhost else "")
        nic = backends.NIC
        if queues > 1:
            netdev += f",queues={queues}"
            nic += f",mq=on,vectors={2 * queues + 2}"
        return ["-netdev", netdev, "-device", nic]
    raise BenchError(f"linux guest: unknown --net '{net}' (user|tap:IFNAME|none)")


class LinuxBoot(Boot):
    """A Boot whose accelerator is known from its own command line."""

    def __init__(self, proc, accel, cpu=""):
        super().__init__(proc)
        self._accel = accel
        self._cpu = cpu

    def accel(self):
        return self._accel

    def cpu_model(self):
        return self._cpu or CPU_MODEL.get(self._accel)


# Tunings a performance engineer would try on the Linux guest, as
# `linux:NAME[+NAME...]` columns: (kernel parameters, sysctls, extra
# server options for rr). Stock `linux` has none of them.
LINUX_TUNINGS = {
    # Busy-poll the NIC from the socket calls instead of sleeping for the
    # interrupt (Documentation/networking/napi.rst).
    "busypoll": ([], ["net.core.busy_poll=50", "net.core.busy_read=50"], []),
    # Never halt the vCPU in the idle loop: no wake-up latency (and under
    # TCG no exit from the CPU loop).
    "idlepoll": (["idle=poll"], [], []),
    # No speculative-execution mitigations (retpolines, IBRS, ...).
    "nomitig": (["mitigations=off"], [], []),
    # sockperf's own per-socket busy poll (SO_BUSY_POLL, --lls usec).
    "sockperf-bp": ([], [], ["--lls", "50"]),
}
LINUX_TUNINGS["best"] = tuple(sum((v[i] for v in LINUX_TUNINGS.values()), []) for i in range(3))


def linux_tuning(spec):
    """'linux' or 'linux:busypoll+idlepoll' -> (names, kernel args, sysctls,
    server options)."""
    _, _, t = spec.partition(":")
    names = [x for x in t.split("+") if x] if t else []
    for n in names:
        if n not in LINUX_TUNINGS:
            raise BenchError(f"guest '{spec}': unknown linux tuning '{n}' (known: {', '.join(LINUX_TUNINGS)})")
    kargs, sysctls, srv = [], [], []
    for n in names:
        k, c, o = LINUX_TUNINGS[n]
        kargs += [x for x in k if x not in kargs]
        sysctls += [x for x in c if x not in sysctls]
        srv += o if not set(o) <= set(srv) else []
    return names, kargs, sysctls, srv


class Linux:
    """A stock Debian kernel serving stock sockperf/iperf (host/linux-guest/),
    optionally with named tunings (LINUX_TUNINGS)."""

    name = "linux"
    BUILD_TIMEOUT = 1200
    # The peer measures; these of its keys become the row's own figures.
    FROM_PEER = (("tps", "peer_tps"), ("transactions", "peer_transactions"), ("mbps", "peer_mbps"),
                 ("lat_mean_ns", "peer_lat_mean_ns"), ("lat_p50_ns", "peer_lat_p50_ns"),
                 ("lat_p90_ns", "peer_lat_p90_ns"), ("lat_p99_ns", "peer_lat_p99_ns"),
                 ("lat_p999_ns", "peer_lat_p999_ns"), ("lat_max_ns", "peer_lat_max_ns"))

    def __init__(self, matrix, log, directory=LINUX_DIR, spec="linux"):
        self.m = matrix
        self.log = log
        self.spec = spec
        self.tunings, self.kargs, self.sysctls, self.srvopt = linux_tuning(spec)
        self.dir = directory
        self.kernel = os.path.join(directory, "vmlinuz")
        self.initrd = os.path.join(directory, "initrd.gz")
        self.manifest = {}

    def prepare(self):
        """Build (or check) the guest: build.sh is idempotent and quick when
        nothing changed."""
        procs.require_tools(["qemu-system-x86_64", "timeout"])
        self.log("linux guest: host/linux-guest/build.sh")
        r = procs.run([LINUX_BUILD], timeout=self.BUILD_TIMEOUT, check=False)
        if r.returncode:
            raise BenchError(f"host/linux-guest/build.sh failed ({r.returncode}); its output:\n"
                             f"{(r.stdout + r.stderr).strip()[-1500:]}")
        for f in (self.kernel, self.initrd):
            if not os.path.isfile(f):
                raise BenchError(f"linux guest: {f} missing after host/linux-guest/build.sh (run it by hand to see why)")
        self.manifest = read_manifest(os.path.join(self.dir, "manifest"))

    def describe(self):
        """One line for the report header."""
        mf = self.manifest
        pk = {k[4:]: v for k, v in mf.items() if k.startswith("pkg.")}
        tun = (f" tunings {'+'.join(self.tunings)}: kernel {' '.join(self.kargs) or '-'}, sysctl "
               f"{' '.join(self.sysctls) or '-'}, sockperf server {' '.join(self.srvopt) or '-'};"
               if self.tunings else " stock (no tuning);")
        return (f"guest {self.spec}:{tun} Debian kernel {mf.get('kernel', '?')} ({mf.get('kernel_pkg', '?')} "
                f"{pk.get(mf.get('kernel_pkg'), '?')}), sockperf {pk.get('sockperf', '?')}, iperf {pk.get('iperf', '?')}, "
                f"busybox {pk.get('busybox-static', '?')}; modules {mf.get('modules', '-')}; vCPUs = queue pairs (queues axis, 1 by default), "
                f"{GUEST_MEM_MIB} MiB, same NIC and backend; its tps/latency/Mbit/s are the host peer's figures")

    def supports(self, test, backend):
        kind = TESTS[test]["kind"]
        if kind == "rr" and self.m.rr_role != "server":
            return "the linux guest only serves (stock sockperf server): use rr.role=server"
        if kind == "stream" and self.m.stream_role != "server":
            return "the linux guest only serves (stock iperf -s): use stream.role=server"
        if test == "udp_stream":
            return "udp_stream: the linux guest's iperf -s serves TCP only"
        if test == "ping" and backend.name == "user":
            return "slirp does not forward ICMP to the guest: ping needs tap, vhost or vhost-user"
        if kind in ("pkt", "ndr") and backend.name == "user":
            return f"{test}: the host peer is a raw socket on the namespace's kernel tap (tap, vhost, vhost-user)"
        if test in ("pkt_rxonly", "pkt_macswap") and backend.name == "tap" and self.m.pkt_generator == "testpmd":
            return (f"{test} with pkt.generator=testpmd on tap: not run on the linux guest (against testpmd's "
                    "af_packet generator its XDP serving loop never reported before the run's limit, 2026-12-04; "
                    "cause not found): use vhost-user")
        if kind == "ndr" and self.m.ndr_mode != "macswap":
            return "ndr: the linux guest forwards with XDP_TX (xdp-bench tx, MACs swapped): use ndr.mode=macswap"
        return None

    def keys(self, run, backend):
        """The guest's words on the kernel command line (host/linux-guest/init)."""
        g = backend.guest_keys()
        k = {"vnl.test": run.test, "vnl.backend": run.backend.replace(":", "/").replace(",", "+"),
             "vnl.ip": g["ip"]}
        if g.get("gw"):
            k["vnl.gw"] = g["gw"]
        kind = TESTS[run.test]["kind"]
        if kind == "rr":
            k.update({"vnl.app": "rr", "vnl.proto": run.test[:3], "vnl.port": peers.SOCKPERF_PORT})
        elif kind == "stream":
            k.update({"vnl.app": "stream", "vnl.port": peers.IPERF_PORT})
        elif kind == "memcached":
            k.update({"vnl.app": "memcached", "vnl.port": 11211})
        elif run.test == "pkt_txonly":
            # The kernel's pktgen at full speed, as the appliance's txonly.
            if run.params["size"] == "imix":
                raise BenchError("pkt_txonly: the linux guest's pktgen sends one frame size (no imix)")
            k.update({"vnl.app": "pktgen", "vnl.size": run.params["size"], "vnl.burst": run.params["burst"],
                      "vnl.time": run.params["seconds"]})
            q = run_queues(run, self.m)
            if q > 1:
                # init: ethtool -L eth0 combined N, one pktgen thread per
                # queue (kpktgend_k sends on eth0@k, queue_map k).
                k["vnl.queues"] = q
            return k
        elif run.test in ("pkt_rxonly", "pkt_macswap"):
            # The host generator's frames into XDP (hostgen.py): dropped
            # (rxonly) or sent back with the MACs swapped (XDP_TX, the PVP
            # loop), counted by eth0; ends 2 s after the last frame.
            k.update({"vnl.app": "xdp-drop" if run.test == "pkt_rxonly" else "xdp-tx", "vnl.wait": 60,
                      "vnl.idle": 2, "vnl.seconds": self.m.run_timeout})
            return k
        elif kind == "ndr":
            # XDP_TX for the whole search; ends once eth0 is idle after it
            # for 10 s (the appliance's pkt.idle: on a loaded host the next
            # trial's peer took over 4 s to start).
            k.update({"vnl.app": "xdp-tx", "vnl.wait": 60, "vnl.idle": 10, "vnl.seconds": self.m.run_timeout})
            return k
        else:
            k["vnl.app"] = "ping"
        # The host client decides sizes and duration; the guest serves until
        # eth0 is idle for vnl.idle s, a "stop", or the run's hard limit.
        k.update({"vnl.wait": 60, "vnl.idle": 2, "vnl.seconds": run.params["seconds"] + self.m.warmup + 60})
        k["vnl.tuning"] = "+".join(self.tunings) or "stock"
        if run_queues(run, self.m) > 1:
            # init: ethtool -L eth0 combined N before the server starts;
            # the kernel spreads the host's connections over the queues.
            k["vnl.queues"] = run_queues(run, self.m)
        if self.sysctls:
            k["vnl.sysctl"] = ",".join(self.sysctls)
        if self.srvopt and kind == "rr":
            k["vnl.srvopt"] = ",".join(self.srvopt)
        return k

    def argv(self, run, backend, timeout):
        """(QEMU command line under `timeout`, kernel command line)."""
        cmdline = " ".join(["console=ttyS0", "quiet", "panic=-1", *self.kargs] +
                           [f"{a}={b}" for a, b in self.keys(run, backend).items()])
        net_opts, extra = backend.qemu_net()
        accel = pick_accel(run.accel or self.m.accel)
        cpu = ["-accel", accel, "-cpu", getattr(self.m, "cpu", "") or CPU_MODEL[accel]]
        argv = ["timeout", "--kill-after=5", str(timeout), "qemu-system-x86_64",
                "-M", qemu_machine(run, self.m), *cpu, "-m", str(GUEST_MEM_MIB), "-smp", str(run_queues(run, self.m)),
                "-nodefaults", "-display", "none", "-no-reboot", "-serial", "stdio", "-monitor", "none",
                "-name", "linux,debug-threads=on",
                "-kernel", self.kernel, "-initrd", self.initrd, "-append", cmdline,
                *qemu_net_args(net_opts), *extra]
        if run_pins(run, self.m).get("qemu"):
            argv = ["taskset", "-c", run_pins(run, self.m)["qemu"]] + argv
        return argv, cmdline, accel

    def start(self, run, backend, timeout):
        argv, cmdline, accel = self.argv(run, backend, timeout)
        return LinuxBoot(Proc("qemu", backend.wrap(argv)), accel, getattr(self.m, "cpu", "")), cmdline

    def complete(self, row):
        """The guest runs stock servers, which measure nothing: its
        throughput and latency are the host peer's (sockperf --full-rtt
        round trips, iperf Mbit/s; ping's are already the row's own)."""
        took = False
        for mine, theirs in self.FROM_PEER:
            if row.get(mine) is None and row.get(theirs) is not None:
                row[mine] = row[theirs]
                took = True
        if took:
            row["figures_from"] = "peer"
        # What ran, in every row: kernel, tunings, tool versions (the
        # mitigations and idle= come from the guest's RESULT line).
        mf = self.manifest
        row.setdefault("linux_kernel", mf.get("kernel"))
        row["linux_tuning"] = "+".join(self.tunings) or "stock"
        row["linux_kargs"] = " ".join(self.kargs)
        for tool, pkg in (("sockperf", "sockperf"), ("iperf", "iperf"), ("busybox", "busybox-static"),
                          ("memcached", "memcached")):
            if mf.get(f"pkg.{pkg}"):
                row[f"{tool}_version"] = mf[f"pkg.{pkg}"]


class LoopbackBoot(Boot):
    """No VM: the stock server on the namespace's loopback."""

    def accel(self):
        return "none"

    def cpu_model(self):
        return None

    def qemu_pid(self):
        return None

    def server_pid(self):
        """The stock server (sockperf/iperf) under loopback_server.py: it
        plays the guest, so its CPU is accounted as `server`."""
        if not self.proc.alive():
            return None
        for p in procs.descendants(self.proc.pid):
            if procs.comm(p).startswith(("sockperf", "iperf", "memcached")):
                return p
        return None


class Loopback:
    """The host stack's floor: the same host peer against the same stock
    server (sockperf server, iperf -s), both on the loopback of the run's
    network namespace (host/bench/loopback_server.py). No guest, no NIC,
    no QEMU: whatever a guest column adds on top of this is the VM's and
    the guest's."""

    name = "loopback"
    SERVER = os.path.join(TOP, "host", "bench", "loopback_server.py")
    FROM_PEER = Linux.FROM_PEER

    def __init__(self, matrix, log):
        self.m = matrix
        self.log = log

    def prepare(self):
        procs.require_tools(["python3", "ip"])

    def describe(self):
        return ("guest loopback: no VM -- the host peer against the same stock server on the loopback of the "
                "run's network namespace (the host stack's floor); its figures are the host peer's")

    def supports(self, test, backend):
        kind = TESTS[test]["kind"]
        if backend.name == "user":
            return "loopback runs in the network namespace of a tap-like backend; slirp has none"
        if kind in ("pkt", "ndr"):
            return f"{test}: the loopback column has no packet-level path (the backend's reference is guests = reference)"
        if kind == "rr" and self.m.rr_role != "server":
            return "loopback only serves (stock sockperf server): use rr.role=server"
        if kind == "stream" and self.m.stream_role != "server":
            return "loopback only serves (stock iperf -s): use stream.role=server"
        if test == "udp_stream":
            return "udp_stream: the loopback server serves TCP only"
        return None

    def start(self, run, backend, timeout):
        kind = TESTS[run.test]["kind"]
        port = {"rr": peers.SOCKPERF_PORT, "stream": peers.IPERF_PORT, "memcached": 11211}.get(kind, 0)
        argv = ["timeout", "--kill-after=5", str(timeout), "python3", self.SERVER, "--app", kind,
                "--proto", "udp" if run.test == "udp_rr" else "tcp", "--port", str(port),
                "--test", run.test, "--backend", run.backend, "--wait", "60",
                "--limit", str(run.params["seconds"] + self.m.warmup + 60)]
        # The host peer reaches this "guest" on the namespace's loopback.
        backend.guest_ip = "127.0.0.1"
        cmdline = " ".join(argv[4:])
        return LoopbackBoot(Proc("qemu", backend.wrap(argv))), cmdline

    def complete(self, row):
        for mine, theirs in self.FROM_PEER:
            if row.get(mine) is None and row.get(theirs) is not None:
                row[mine] = row[theirs]
                row["figures_from"] = "peer"


def read_manifest(path):
    out = {}
    try:
        with open(path) as f:
            for line in f:
                k, eq, v = line.strip().partition("=")
                if eq:
                    out[k] = v
    except OSError:
        pass
    return out


class Reference:
    """The backend's no-guest reference (hostgen.py): the host generator
    into the same backend with a testpmd consumer where the guest would be;
    pkt tests on tap and vhost-user only. Its runs never boot anything."""

    name = "reference"

    def __init__(self, matrix, log):
        self.m = matrix
        self.log = log

    def prepare(self):
        backends.need_testpmd()

    def describe(self):
        return ("guest reference: no VM -- dpdk-testpmd txonly into the backend with a second testpmd "
                "where the guest would be (virtio_user on vhost-user, the tap PMD on tap): the generator's "
                "own rate on that backend (hostgen.py); for ndr the search's own generator with that testpmd "
                "in macswap (ndr.py)")

    def supports(self, test, backend):
        if test not in ("pkt_rxonly", "pkt_txonly", "pkt_macswap", "ndr"):
            return (f"{test}: the reference column measures the packet tests only (pkt_rxonly, pkt_txonly, "
                    "pkt_macswap, ndr)")
        if backend.name not in ("tap", "vhost-user"):
            return f"the reference column runs on tap and vhost-user, not {backend.name}"
        return None


KINDS = {"vnetlab": Vnetlab, "linux": Linux, "loopback": Loopback, "reference": Reference}


def make(name, matrix, log):
    kind = name.split(":", 1)[0]
    if kind not in KINDS:
        raise BenchError(f"unknown guest '{name}' (known: {', '.join(KINDS)})")
    if kind == "linux":
        return Linux(matrix, log, spec=name)
    if ":" in name:
        raise BenchError(f"guest '{name}': only linux takes tunings (linux:busypoll+idlepoll)")
    return KINDS[kind](matrix, log)
