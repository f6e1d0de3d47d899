"""backends.py: the host side of the appliance's NIC, one class per backend.

  tap         QEMU's userspace virtio-net on a tap inside a private network
              namespace; option tx=bh|timer (QEMU's own TX batching policy)
  vhost       the same tap with vhost=on (kernel vhost-net), option
              poll-us=N (host busy-polling, the 2014 seed); skipped with one
              line when /dev/vhost-net is missing
  vhost-user  dpdk-testpmd as a polling vhost-user switch: appliance <->
              vhost-user socket <-> testpmd (io forwarding) <-> DPDK tap PMD
              <-> a kernel tap in the namespace, where the host peer runs.
              testpmd runs with --no-huge --no-pci in a private mount
              namespace whose /run is a tmpfs, so its runtime files never
              touch the real /run; its CPU is part of the host figure
  user        QEMU's slirp; the host peer listens on 127.0.0.1 and the guest
              reaches it as 10.0.2.2 (functional checks only)

Each backend, once set up, tells the run: the guest's `ip=`/`gw=` keys,
the host peer's and the guest's addresses as seen from the peer, how to
wrap a peer command (inside the namespace), the host/qemu-run.sh network
options, and the backend process to account CPU for. Teardown ends the
processes it started by PID and deletes the namespace, on every exit path.
Traffic never leaves loopback or the namespace.
"""

import os
import shutil
import socket
import tempfile
import time

import procs
from procs import BenchError, Proc

HOST_IP = "10.77.0.1"
GUEST_IP = "10.77.0.2"
PREFIX = 24
TAP = "vnbtap0"
CTL_PORT = 9999  # apps/lib/lib.h: a "stop TOKEN" datagram ends a serving app


def ctl_request(cmd, token):
    """A control request as apps/lib/ctl.c obeys it, "COMMAND TOKEN" (the token
    the run passed as ctl.token=); a Linux guest's init ends on any
    datagram to the port, so it gets the bare command."""
    return f"{cmd} {token}" if token else cmd

# Same NIC as host/qemu-run.sh: modern-only virtio-net-pci, no option ROM.
NIC = "virtio-net-pci,netdev=n0,disable-legacy=on,romfile="


def need_testpmd():
    if not shutil.which("dpdk-testpmd"):
        raise BenchError("pkt.generator=testpmd (and the reference column) need dpdk-testpmd: "
                         "apt-get install dpdk-dev (host/deps.sh installs it)")


class Netns:
    """A network namespace with a kernel tap (or none, if a DPDK tap PMD will
    create it), deleted on close(); LIVE holds those not yet deleted."""

    count = 0
    LIVE = set()

    def __init__(self, make_tap=True, queues=1):
        Netns.count += 1
        self.name = f"vnetbench-{os.getpid()}-{Netns.count}"
        self.make_tap = make_tap
        self.queues = queues  # above 1: a multi_queue tap (QEMU opens it once per queue)
        self.created = False

    def open(self):
        procs.run(["ip", "netns", "add", self.name], timeout=30)
        self.created = True
        Netns.LIVE.add(self)
        self.ip("link", "set", "lo", "up")
        if self.make_tap:
            self.ip("tuntap", "add", "dev", TAP, "mode", "tap", *(["multi_queue"] if self.queues > 1 else []))
            self.address_tap()
        return self

    def address_tap(self):
        # Keep the host's IPv6 ND/MLD chatter off the wire we measure.
        procs.run(self.wrap(["sysctl", "-qw", f"net.ipv6.conf.{TAP}.disable_ipv6=1"]), timeout=30)
        self.ip("addr", "add", f"{HOST_IP}/{PREFIX}", "dev", TAP)
        self.ip("link", "set", TAP, "up")

    def has_link(self, name):
        r = procs.run(["ip", "-n", self.name, "-o", "link", "show", "dev", name], timeout=30, check=False)
        return r.returncode == 0

    def ip(self, *args):
        procs.run(["ip", "-n", self.name, *args], timeout=30)

    def wrap(self, argv):
        return ["ip", "netns", "exec", self.name, *argv]

    def close(self):
        if self.created:
            procs.run(["ip", "netns", "del", self.name], timeout=30, check=False)
            self.created = False
        Netns.LIVE.discard(self)


class Backend:
    """A subclass is a backend: `name` (its spec word), `options` (option ->
    a tuple of the values it takes, or int) and `help` (one line) are all
    the matrix needs; CLASSES below registers it."""

    name = ""
    options = {}
    help = ""
    needs_root = True
    tools = ("ip",)
    host_ip = HOST_IP  # the host peer's address as the guest sees it
    guest_ip = GUEST_IP  # the guest's address as the host peer sees it
    peer_bind = HOST_IP  # where a host server listens

    def __init__(self, spec, opts, pin="", queues=1):
        self.spec = spec
        self.opts = opts
        self.pin = pin
        self.queues = queues  # queue pairs of the guest's NIC (the matrix's queues axis)
        self.ns = None
        self.proc = None  # backend process (testpmd), for CPU accounting

    def host_port(self, port):
        """The port a host server listens on (and the guest connects to)
        for a tool's default port: the default itself inside a private
        namespace."""
        return port

    @classmethod
    def unavailable(cls):
        """A reason this host cannot run the backend at all, or None."""
        return None

    def check(self):
        if self.needs_root and os.geteuid() != 0:
            raise BenchError(
                f"backend {self.name} needs root (network namespace and tap): run as root, "
                "or use --backends user (slirp) for a functional check"
            )
        procs.require_tools(self.tools)

    def guest_keys(self):
        return {"ip": f"{GUEST_IP}/{PREFIX}"}

    def setup(self, workdir):
        self.ns = Netns(queues=self.queues).open()

    def qemu_net(self):
        """(host/qemu-run.sh options, extra QEMU arguments)."""
        raise NotImplementedError

    def wrap(self, argv):
        return self.ns.wrap(argv) if self.ns else argv

    def guest_port(self, port, proto="tcp"):
        """(address, port) at which the host reaches a guest server port."""
        return self.guest_ip, port

    def stop_guest(self, token=""):
        """Send the control "stop" datagram to a serving guest app."""
        addr, port = self.guest_port(CTL_PORT, "udp")
        procs.run(self.wrap(["bash", "-c", f"echo -n '{ctl_request('stop', token)}' >/dev/udp/{addr}/{port}"]),
                  timeout=10, check=False)

    def teardown(self):
        if self.proc:
            self.proc.stop()
            self.proc = None
        if self.ns:
            self.ns.close()
            self.ns = None


class Tap(Backend):
    name = "tap"
    options = {"tx": ("bh", "timer"), "packed": ("on", "off"), "qlen": int}
    help = ("QEMU's userspace virtio-net on a tap; tx = QEMU's TX batching, packed = offer the packed ring, "
            "qlen = the tap's txqueuelen (frames the host queues for QEMU; the kernel's default 1000)")
    QLEN_MAX = 1000000

    def setup(self, workdir):
        super().setup(workdir)
        if "qlen" in self.opts:
            # What the host may queue towards QEMU before the tap drops
            # (tun's ring is txqueuelen long): a deeper queue rides out the
            # times QEMU's I/O thread is off its CPU (docs/packet-path.md,
            # "The tap's queue"). Every guest of the run gets the same tap.
            qlen = int(self.opts["qlen"])
            if not 1 <= qlen <= self.QLEN_MAX:
                raise BenchError(f"backend '{self.spec}': qlen must be 1..{self.QLEN_MAX}")
            self.ns.ip("link", "set", TAP, "txqueuelen", str(qlen))

    def qemu_net(self):
        extra = []
        if "tx" in self.opts:
            # QEMU's TX policy for the device: bh (bottom half, default) or
            # timer (batch for x-txtimer ns). -global reaches the NIC that
            # host/qemu-run.sh creates.
            extra += ["-global", f"virtio-net-pci.tx={self.opts['tx']}"]
        if "packed" in self.opts:
            # The packed ring (virtio 1.2 2.8) offered to every variant,
            # split builds included (they do not negotiate it and run
            # split); a RING=packed variant gets it anyway (guests.py).
            # The device's own type, so both transports see it.
            extra += ["-global", f"virtio-net-device.packed={self.opts['packed']}"]
        net = ["--net", f"tap:{TAP}"]
        if self.queues > 1:
            # host/qemu-run.sh: -netdev queues=N, the NIC mq=on with 2N+2
            # MSI-X vectors, on the multi_queue tap Netns made.
            net += ["--queues", str(self.queues)]
        return net, extra


class Vhost(Backend):
    name = "vhost"
    options = {"poll-us": int}
    help = "the tap with vhost=on, kernel vhost-net; poll-us = host busy-polling"

    @classmethod
    def unavailable(cls):
        if not os.path.exists("/dev/vhost-net"):
            return "/dev/vhost-net does not exist on this host (as root: modprobe vhost_net; not possible inside some VMs)"
        return None

    def qemu_net(self):
        netdev = f"tap,id=n0,ifname={TAP},script=no,downscript=no,vhost=on"
        if "poll-us" in self.opts:
            netdev += f",poll-us={self.opts['poll-us']}"
        return ["--net", "none"], ["-netdev", netdev, "-device", NIC]


class VhostUser(Backend):
    name = "vhost-user"
    options = {"ring": ("256", "512", "1024")}
    help = ("dpdk-testpmd as a polling vhost-user switch; ring = the NIC's queue size (QEMU's rx_queue_size and "
            "tx_queue_size, 256 by default; the no-guest reference's virtio_user ring too; the appliance's "
            "variant needs QUEUE_MAX as large, or the matrix is refused: its driver would keep 256)")
    tools = ("ip", "dpdk-testpmd", "unshare", "taskset")
    START_TIMEOUT = 60

    def ring(self):
        """The NIC's queue size (the `ring` option; QEMU 7.2's default 256)."""
        return int(self.opts.get("ring", 256))

    def setup(self, workdir):
        # The DPDK tap PMD creates the kernel tap itself, in the namespace
        # testpmd runs in.
        self.ns = Netns(make_tap=False).open()
        self.sockdir = tempfile.mkdtemp(prefix="vnetbench-vu-")
        self.sock = os.path.join(self.sockdir, "vhost-user.sock")
        lcores = self.pin or "0,1"
        if "," not in lcores and "-" not in lcores:
            raise BenchError(f"pin.backend={lcores}: testpmd needs two lcores (main + forwarding), e.g. 0,1")
        # queues=N: N queues on both ports (the tap PMD makes a multi_queue
        # kernel tap), forwarded by as many lcores as pin.backend gives
        # beyond the main one, at most N: on a 2-core host one forwarding
        # lcore polls every queue.
        q = self.queues
        fwd = max(1, min(q, len(cpu_list(lcores)) - 1))
        testpmd = [
            "dpdk-testpmd", "-l", lcores, "--no-huge", "-m", "1024", "--no-pci",
            "--file-prefix", f"vnetbench{os.getpid()}",
            "--vdev", f"net_vhost0,iface={self.sock},queues={q}",
            "--vdev", f"net_tap0,iface={TAP}",
            "--", "--forward-mode=io", f"--nb-cores={fwd}", f"--rxq={q}", f"--txq={q}",
            "--stats-period=0",
        ]
        self.fwd_lcores = fwd
        # Private mount namespace: a tmpfs over /run holds DPDK's runtime
        # directory (/var/run/dpdk is /run/dpdk), so nothing is left behind.
        script = "mount -t tmpfs vnetbench-dpdk /run && exec \"$@\""
        # stdbuf: testpmd's stdout is a pipe here; line-buffer it so its
        # readiness line arrives when printed.
        argv = self.ns.wrap(["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", "stdbuf", "-oL", *testpmd])
        self.proc = Proc("dpdk-testpmd", argv, keep_stdin=True)
        # Non-interactive testpmd forwards until its stdin closes
        # ("Press enter to exit"); it is ready once it says so.
        ok = self.proc.wait_line(lambda l: "Press enter to exit" in l, self.START_TIMEOUT)
        if not ok or not os.path.exists(self.sock):
            tail = self.proc.tail(20)
            self.teardown()
            raise BenchError(
                f"dpdk-testpmd did not come up within {self.START_TIMEOUT}s (needs Debian package dpdk-dev, "
                f"root, and /dev/net/tun); its output:\n{tail}"
            )
        end = time.monotonic() + 10
        while not self.ns.has_link(TAP):
            if time.monotonic() > end:
                self.teardown()
                raise BenchError(f"dpdk-testpmd's tap PMD did not create {TAP} within 10s")
            time.sleep(0.1)
        self.ns.address_tap()

    def qemu_net(self):
        mem = "512M"
        return ["--net", "none"], [
            # vhost-user maps guest memory into testpmd: it must be a shared
            # memfd and the guest's only NUMA node.
            "-object", f"memory-backend-memfd,id=mem,size={mem},share=on",
            "-numa", "node,memdev=mem",
            "-chardev", f"socket,id=c0,path={self.sock}",
            "-netdev", "vhost-user,id=n0,chardev=c0" + (f",queues={self.queues}" if self.queues > 1 else ""),
            # vectors=0: without it QEMU 7.2 crashed when the guest enabled
            # the device on this backend.
            "-device", NIC + ",vectors=0" + (",mq=on" if self.queues > 1 else "") +
            (f",rx_queue_size={self.ring()},tx_queue_size={self.ring()}" if self.ring() != 256 else ""),
        ]

    def teardown(self):
        super().teardown()
        if getattr(self, "sockdir", None):
            shutil.rmtree(self.sockdir, ignore_errors=True)
            self.sockdir = None


def cpu_list(spec):
    """A taskset/EAL CPU list (0,1 or 0-3,5) -> [CPU numbers]."""
    out = []
    for part in spec.split(","):
        a, _, b = part.partition("-")
        if a.isdigit():
            out += list(range(int(a), int(b) + 1)) if b.isdigit() else [int(a)]
    return out


def free_port(kind=socket.SOCK_STREAM):
    s = socket.socket(socket.AF_INET, kind)
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class User(Backend):
    """slirp: the guest is 10.0.2.15, the host's loopback is 10.0.2.2 to it.
    Guest servers are reached through hostfwd on 127.0.0.1."""

    name = "user"
    help = "QEMU's slirp, functional checks only"
    needs_root = False
    tools = ()
    host_ip = "10.0.2.2"
    guest_ip = "127.0.0.1"
    peer_bind = "127.0.0.1"
    GUEST_FWD = (("tcp", 5001), ("tcp", 11111), ("udp", 11111), ("udp", CTL_PORT))

    def guest_keys(self):
        return {"ip": "10.0.2.15/24", "gw": "10.0.2.2"}

    def host_port(self, port):
        # The host's loopback is shared with everything else on the
        # machine: a free port, not the tool's well-known one.
        if port not in self.ports:
            self.ports[port] = free_port()
        return self.ports[port]

    def setup(self, workdir):
        self.ports = {}
        self.fwd = {}
        for proto, gport in self.GUEST_FWD:
            self.fwd[(proto, gport)] = free_port(socket.SOCK_STREAM if proto == "tcp" else socket.SOCK_DGRAM)

    def guest_port(self, port, proto="tcp"):
        if (proto, port) not in self.fwd:
            raise BenchError(f"backend user: guest {proto} port {port} is not forwarded (see User.GUEST_FWD)")
        return "127.0.0.1", self.fwd[(proto, port)]

    def qemu_net(self):
        fwd = ",".join(f"hostfwd={p}:127.0.0.1:{h}-:{g}" for (p, g), h in self.fwd.items())
        return ["--net", "none"], ["-netdev", f"user,id=n0,{fwd}", "-device", NIC]

    def stop_guest(self, token=""):
        addr, port = self.guest_port(CTL_PORT, "udp")
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(ctl_request("stop", token).encode(), (addr, port))


def close_all():
    for ns in list(Netns.LIVE):
        ns.close()


CLASSES = {c.name: c for c in (Tap, Vhost, VhostUser, User)}


def spec_help():
    """The backends and their options, for the matrix's help text:
    tap[:tx=bh|timer][:packed=on|off] (...), vhost[:poll-us=N] (...), ..."""
    out = []
    for name, cls in CLASSES.items():
        opts = "".join(f"[:{k}={'N' if v is int else '|'.join(v)}]" for k, v in cls.options.items())
        out.append(f"{name}{opts}: {cls.help}")
    return "; ".join(out)


def make(name, spec, opts, pin="", queues=1):
    return CLASSES[name](spec, opts, pin, queues)
