"""matrix.py: what to run -- parsed from a small matrix file and/or
command-line options, validated, and expanded into a list of runs.

A matrix file is `key = value` lines (# comments), or a JSON object with
the same keys. Lists are separated by commas or blanks. Variants that are
not named in the variants makefile can be defined inline:

    variant v2burst = TX_RECLAIM=v2 TX_KICK=burst

Keys (command-line option --KEY with '.' and '_' written '-', e.g.
--rr-sizes; options override the file):
"""

import json
import os
import re
from dataclasses import dataclass, field

import backends
import idle
from procs import BenchError

# Test name -> kind, the parameter that forms table rows, the headline
# metric and whether bigger is better.
TESTS = {
    "tcp_rr": dict(kind="rr", proto="tcp", row="instances", metric="tps", up=True),
    "udp_rr": dict(kind="rr", proto="udp", row="instances", metric="tps", up=True),
    "tcp_stream": dict(kind="stream", row="msg", metric="mbps", up=True),
    "tcp_maerts": dict(kind="stream", row="msg", metric="mbps", up=True),
    # host `iperf -u -c -b stream.udp_rate` into the appliance's stream server
    "udp_stream": dict(kind="stream", row="msg", metric="mbps", up=True),
    "ping": dict(kind="ping", row="size", metric="lat_p50_ns", up=False),
    # host memcaslap against a memcached server (mcload.py); rows = its -c
    "memcached": dict(kind="memcached", row="instances", metric="tps", up=True),
    # app=pkt txonly at full speed into a tests/tools/pktpeer.py recv sink; rows = frame size
    "pkt_txonly": dict(kind="pkt", row="size", metric="pps", up=True),
    # a host generator (pkt.generator) into app=pkt rxonly, the guest counts (hostgen.py); rows = frame size
    "pkt_rxonly": dict(kind="pkt", row="size", metric="pps", up=True),
    # testpmd flowgen into app=pkt macswap, counting what comes back: the PVP loop (hostgen.py)
    "pkt_macswap": dict(kind="pkt", row="size", metric="pps", up=True),
    # app=pkt rr: one frame at a time to a host reflector and back, timed by the guest (hostgen.py:
    # testpmd macswap on vhost-user, host/xdp/macswap.c's XDP_TX on tap); rows = frame size
    "pkt_rr": dict(kind="pkt", row="size", metric="lat_p50_ns", up=False),
    # app=pkt against tests/tools/pktpeer.py: the NDR/PDR search (ndr.py); rows = frame size
    "ndr": dict(kind="ndr", row="size", metric="ndr_pps", up=True),
}
TEST_ALIASES = {"rr": "tcp_rr", "stream": "tcp_stream", "maerts": "tcp_maerts"}

# Backend name -> options it accepts (backend specs look like
# "tap", "tap:tx=timer", "vhost:poll-us=50"): declared by each backend
# class (backends.py), which is the one registry.
BACKENDS = {name: cls.options for name, cls in backends.CLASSES.items()}

# Guest pairs (pairs.py): the tests two guests can run against each
# other, and the switches between them.
PAIR_TESTS = ("tcp_rr", "udp_rr", "tcp_stream", "tcp_maerts", "pkt_txonly")
SWITCHES = ("bridge", "testpmd")
# With `pairs`, these defaults replace the single-guest ones (a key the
# matrix gives still wins).
PAIR_DEFAULTS = {"seconds": "5", "rr.instances": "1", "stream.sizes": "16K", "stream.instances": "1"}

# queues above 1 (the queues axis): the tests and backends that spread
# over several queue pairs. The appliance runs tcp_rr and tcp_stream with a
# TCP/IP copy per queue (docs/multiqueue.md "One lwIP per vCPU"); its
# memcached has one copy, so memcached spreads on the Linux guest only.
QUEUE_TESTS = ("pkt_txonly", "tcp_rr", "tcp_stream", "memcached")
QUEUE_TCP_TESTS = ("tcp_rr", "tcp_stream")
QUEUE_BACKENDS = ("tap", "vhost-user")


def software_kvm():
    """True when /dev/kvm exists but the CPU has no vmx/svm: this machine
    kind's kvm_pvm, which runs the appliance with one vCPU only."""
    if not os.path.exists("/dev/kvm"):
        return False
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read()
    except OSError:
        return False
    return not re.search(r"\b(vmx|svm)\b", flags)


# Harness machine name -> host/qemu-run.sh --machine value.
MACHINES = {"pc": "pc", "q35": "q35", "microvm": "microvm", "microvm-noacpi": "microvm,acpi=off"}
# placement: `pinned` applies the pin.* keys, `free` only testpmd's own lcores.
PLACEMENTS = ("free", "pinned")


def run_pins(run, m):
    """The CPU lists (pin.* keys without the prefix) that hold for a run:
    placement `free` keeps only testpmd's lcores (pin.backend), `pinned`
    all of them."""
    pin = getattr(m, "pin", None) or {}
    placement = getattr(run, "placement", "") or (getattr(m, "placements", None) or ["pinned"])[0]
    if placement == "free":
        return {"backend": pin.get("backend", "")}
    return pin


# key -> (default, help). Values are strings until validate().
# rr.mps = load (loadlat.py) and ndr.latency: percentages of a maximum.
DEFAULT_FRACTIONS = "10 50 90 99"

KEYS = {
    "variants": ("", "variant names (from the variants makefile or defined with `variant NAME = VARS`)"),
    "tests": ("tcp_rr,tcp_stream", "tests: " + ", ".join(TESTS) + " (aliases rr, stream, maerts; netperf's TCP_RR etc. too)"),
    "backends": ("tap", "backends: " + backends.spec_help()),
    "guests": ("vnetlab", "guests whose results form columns: vnetlab (one column per variant), linux (a stock Debian kernel serving stock sockperf/iperf; needs rr.role/stream.role=server), linux:T+T... (with tunings busypoll, idlepoll, nomitig, sockperf-bp, or best = all), loopback (no guest: the host peer against the same stock server on the namespace's loopback)"),
    "pairs": ("", "guest pairs CLIENT>SERVER, each side linux or a variant name (default, a mk/variants.mk name, or a `variant`): two guests run against each other through a switch instead of one guest against host peers (pairs.py); columns = pairs, tests " + ", ".join(PAIR_TESTS) + "; defaults then " + ", ".join(f"{k}={v}" for k, v in PAIR_DEFAULTS.items())),
    "switches": ("bridge", "with pairs: the switches between the two guests, a table each: bridge (a Linux bridge, one tap per guest), testpmd (dpdk-testpmd between two vhost-user ports)"),
    "repetitions": ("3", "repetitions of every configuration"),
    "seconds": ("10", "measured seconds per run"),
    "warmup": ("1", "guest warm-up seconds before measuring"),
    "baseline": ("", "column the others are compared with (default: the first variant)"),
    "idle": ("", "idle axis (idle.py): poll budgets in us before halting, e.g. poll,0,5,10,25,50,100; every variant becomes one column per value (NAME-idle_VALUE)"),
    "rr.sizes": ("256/256", "request/response sizes, e.g. 256/256,1/1 or netperf-style 256,256 (pairs then separated by blanks)"),
    "rr.instances": ("1,25,50,100", "concurrent RR instances (table rows)"),
    "rr.burst": ("1", "outstanding transactions per instance (netperf -b)"),
    "rr.mps": ("", "open loop (rr.role=server): host `sockperf under-load --mps N --reply-every 1` offers N transactions/s instead of ping-pong's closed loop; rows loop=open, their latency is the peer's. `load`: the load sweep (loadlat.py): per column a closed-loop run measures the maximum, then one open-loop run per load.fractions"),
    "load.fractions": (DEFAULT_FRACTIONS, "rr.mps=load: the offered loads, percent of each column's closed-loop maximum (sockperf ping-pong trans/s)"),
    "rr.role": ("client", "client: the appliance drives a host `sockperf server`; server: host `sockperf ping-pong` drives the appliance (1 instance)"),
    "stream.sizes": ("256,1K,4K,16K", "message sizes (table rows)"),
    "stream.instances": ("1,4", "concurrent streams"),
    "stream.role": ("client", "client: the appliance connects to a host `iperf -s` (sending, or receiving like iperf -R); server: a host `iperf -c` drives the appliance"),
    "stream.udp_rate": ("50M", "udp_stream: the host iperf's offered rate (iperf -u -b, bits/s with K/M/G)"),
    "stream.cc": ("cubic", "TCP congestion control of the host's sending iperf (iperf -Z), the same for every column: cubic (Linux's default), any name in /proc/sys/net/ipv4/tcp_available_congestion_control, or host = this host's net.ipv4.tcp_congestion_control. Default cubic because BBR without the fq qdisc paces from a per-socket hrtimer whose cost and rate cap (~10 Gbit/s for one flow on this machine kind) are the host's, not the guest's"),
    "ping.sizes": ("56", "ICMP payload sizes (table rows)"),
    "memcached.concurrency": ("128", "memcached: memcaslap -c (connections; table rows)"),
    "memcached.threads": ("2", "memcached: memcaslap -T (client threads); a list gives one table per value"),
    "pkt.sizes": ("64", "pkt_txonly: frame sizes (RFC 2544's, FCS included), 64..1518 or imix (table rows)"),
    "pkt.burst": ("32", "pkt_txonly: frames the appliance sends per pass at most (pkt.burst)"),
    "pkt.generator": ("python", "pkt_rxonly: the host generator, python (tests/tools/pktpeer.py send) or testpmd (dpdk-testpmd txonly on the guest's vhost-user port, or its net_af_packet PMD on the tap); pkt_txonly: the sink, python (pktpeer.py recv) or testpmd (rxonly); hostgen.py"),
    "ndr.sizes": ("64", "ndr: frame sizes in bytes given to the device (FCS excluded), 64..1518 or imix (table rows)"),
    "ndr.trial": ("1", "ndr: seconds per trial of the search (MLRsearch's final trial duration)"),
    "ndr.duration_sum": ("21", "ndr: seconds of trials a load needs for its verdict in the last phase (MLRsearch's goal duration sum; 1 = one trial per load)"),
    "ndr.exceed_ratio": ("50", "ndr: percent of a load's duration sum that may be high-loss trials and the load still pass (MLRsearch's exceed ratio)"),
    "ndr.warmup": ("1", "ndr: 1 = the search's first trial runs at ndr.max_rate and is not counted (a warm-up), 0 = none"),
    "ndr.settle": ("0.5", "ndr: seconds a trial waits after the last frame sent or back before its counters are read and its marker sent"),
    "ndr.repeat": ("1", "ndr: searches per run, in the same boot (the row's figures are their median; report.md gives the spread)"),
    "ndr.mode": ("macswap", "ndr: the appliance's app=pkt mode, macswap (the PVP loop) or reflect"),
    "ndr.max_rate": ("200000", "ndr: the first (highest) offered rate, frames/s"),
    "ndr.pdr": ("0.5", "ndr: PDR's loss bound in percent (NDR: 0)"),
    "ndr.precision": ("0.5", "ndr: the search's width: it ends when [lower, upper bound) is at most this percent of the upper bound"),
    "ndr.generator": ("auto", "ndr: who offers each trial's frames, python (tests/tools/pktpeer.py swap, some tens of kpps here), pacegen (host/pktgen/pacegen.c on the tap, paced in C, one frame size; in macswap it counts what comes back too; on vhost-user through testpmd's switch), vupacegen (host/pktgen/vupacegen.c on the guest's vhost-user socket itself: it paces and counts what comes back; vhost-user only) or auto (vupacegen on vhost-user, pacegen on the other backends, python for imix)"),
    "ndr.latency": ("", "ndr: after the searches, one trial at each of these percentages of the PDR found (median of the searches; e.g. 0 10 50 90; 0 = ndr.LAT0_PPS frames/s or 1 % of the PDR, the lower), the peer timing every frame's round trip from the generator's stamp: latency against offered load at the packet level (report.md's latency table; none by default)"),
    "accel": ("auto", "accelerators, an axis like machine: auto|kvm|tcg, passed to host/qemu-run.sh --accel (kvm also takes this machine kind's kvm_pvm in native mode; the stock Linux guest runs KVM only on hardware virtualisation and TCG otherwise, named in its rows); with more than one, every column splits into COLUMN@ACCEL"),
    "cpu": ("", "QEMU CPU model of every guest (default: per accelerator, guests.CPU_MODEL: TCG qemu64, KVM host)"),
    "machine": ("pc", "machines, an axis like backends: pc, q35, microvm (no PCI: virtio-mmio found through ACPI), microvm-noacpi (microvm,acpi=off: virtio-mmio from the kernel command line, interrupts through the 8259 instead of an I/O APIC); with more than one, every column splits into COLUMN@MACHINE"),
    "queues": ("1", "queue pairs, an axis like machine: N gives the guest N vCPUs (QEMU -smp N) and a NIC with N queue pairs (mq=on, vectors=2N+2) on a multi_queue tap with N queues (tap) or testpmd's vhost-user port with queues=N (vhost-user); the appliance gets mq=N smp=N (app=pkt: a burst loop per queue; rr and stream: a TCP/IP copy per queue, each with its share of rr.instances or stream.instances), the stock Linux guest `ethtool -L eth0 combined N` (and for pkt_txonly one pktgen thread per queue); with more than one, every column splits into COLUMN@qN. Above 1: tests pkt_txonly, tcp_rr, tcp_stream, memcached (Linux guest only), backends tap and vhost-user (the appliance as TCP client: tap only, it needs RSS), instances >= queues, accel tcg where /dev/kvm is kvm_pvm (it refuses smp>1)"),
    "pin.qemu": ("", "taskset CPU list for QEMU (empty: no pinning)"),
    "pin.peer": ("", "taskset CPU list for the host peer"),
    "pin.backend": ("", "CPU list for the backend process (testpmd lcores, default 0,1)"),
    "pin.vcpu": ("", "CPU list for the guest's vCPU threads alone (QEMU's `CPU n/KVM` or `CPU n/TCG`, found through QMP query-cpus-fast once QEMU is up); QEMU's other threads follow pin.qemu"),
    "placement": ("pinned", "an axis like machine: `pinned` applies pin.qemu, pin.vcpu and pin.peer, `free` leaves QEMU and the peer to the scheduler (testpmd always runs on pin.backend's lcores: DPDK pins them); with both, every column splits into COLUMN@free and COLUMN@pinned, one run unpinned against pinned"),
    "run_timeout": ("", "hard limit per run in seconds (default seconds + warmup + 60)"),
}


def parse_fractions(values):
    """load.fractions -> sorted percentages (numbers above 0, at most 100)."""
    out = []
    for x in values:
        try:
            v = float(str(x).rstrip("%"))
        except ValueError:
            raise BenchError(f"bad load.fractions value '{x}' (percentages of the maximum, e.g. 10 50 90 99)")
        if not 0 < v <= 100:
            raise BenchError(f"load.fractions value {x} out of range (above 0, at most 100 %)")
        out.append(int(v) if v == int(v) else v)
    if not out:
        raise BenchError("load.fractions is empty (give percentages, e.g. 10 50 90 99)")
    if len(set(out)) != len(out):
        raise BenchError(f"load.fractions lists a value twice: {' '.join(map(str, out))}")
    return sorted(out)


def key_option(k):
    return "--" + k.replace(".", "-").replace("_", "-")


def split_list(v):
    if isinstance(v, (list, tuple)):
        out = []
        for x in v:
            out += split_list(x)
        return out
    return [x for x in re.split(r"[,\s]+", str(v).strip()) if x]


def parse_size(s):
    m = re.fullmatch(r"(\d+)([kKmM]?)", s)
    if not m:
        raise BenchError(f"bad size '{s}' (expected a number, optionally with K or M)")
    return int(m.group(1)) * {"": 1, "k": 1024, "m": 1 << 20}[m.group(2).lower()]


def rr_size_list(v):
    """rr.sizes -> [(req, resp)]. Items REQ/RESP separated by commas or
    blanks (256/256,1/1), or netperf's -r REQ,RESP pairs separated by blanks
    or ';' (256,256 64,64), or one size N for N/N."""
    out = []
    for item in re.split(r"[;\s]+", " ".join(v) if isinstance(v, (list, tuple)) else str(v).strip()):
        if not item:
            continue
        parts = item.split(",") if "/" in item else [item]
        for x in parts:
            if not x:
                continue
            m = re.fullmatch(r"(\w+)(?:[/,](\w+))?", x)
            if not m:
                raise BenchError(f"bad rr size '{x}' (expected REQ/RESP such as 256/256, netperf's 256,256, or 256)")
            out.append((m.group(1), m.group(2) or m.group(1)))
    return out


CC_DIR = "/proc/sys/net/ipv4"


def host_cc(name):
    """The congestion control the host's sending iperf uses: `name`, or the
    host's sysctl for "host"; an error if this kernel does not offer it."""
    try:
        with open(f"{CC_DIR}/tcp_available_congestion_control") as f:
            avail = f.read().split()
        with open(f"{CC_DIR}/tcp_congestion_control") as f:
            default = f.read().strip()
    except OSError as e:
        raise BenchError(f"stream.cc: cannot read the host's TCP congestion controls: {e}")
    cc = default if name == "host" else name
    if cc not in avail:
        raise BenchError(f"bad stream.cc '{name}': this host offers {' '.join(avail)} (or host = {default})")
    return cc


def parse_file(path):
    """Matrix file -> (settings dict, inline variant definitions)."""
    try:
        text = open(path).read()
    except OSError as e:
        raise BenchError(f"cannot read matrix file {path}: {e.strerror} (see host/bench/matrices/ for examples)")
    settings, defs = {}, {}
    if path.endswith(".json"):
        try:
            obj = json.loads(text)
        except ValueError as e:
            raise BenchError(f"{path}: not valid JSON ({e})")
        defs = obj.pop("variant_defs", {})
        settings = {k: v for k, v in obj.items()}
    else:
        for n, line in enumerate(text.splitlines(), 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            m = re.fullmatch(r"variant\s+([A-Za-z0-9_.-]+)\s*=\s*(.*)", line)
            if m:
                defs[m.group(1)] = m.group(2).strip()
                continue
            m = re.fullmatch(r"([a-z_.]+)\s*=\s*(.*)", line)
            if not m:
                raise BenchError(f"{path}:{n}: expected `key = value` or `variant NAME = VARS`, got '{line}'")
            settings[m.group(1)] = m.group(2).strip()
    for k in settings:
        if k not in KEYS:
            raise BenchError(f"{path}: unknown key '{k}' (known: {', '.join(KEYS)})")
    return settings, defs


@dataclass
class Run:
    """One boot: one column (guest + variant), one test configuration, one repetition."""

    index: int
    guest: str
    variant: str
    test: str
    backend: str
    params: dict
    rep: int
    column: str = ""
    extra: dict = field(default_factory=dict)
    machine: str = ""  # MACHINES key; "" = the matrix's first
    accel: str = ""  # auto|kvm|tcg; "" = the matrix's first
    queues: int = 0  # queue pairs = vCPUs; 0 = the matrix's first
    placement: str = ""  # free|pinned; "" = the matrix's first

    def label(self):
        p = self.params
        if TESTS[self.test]["kind"] == "rr":
            cfg = f"{p['req']}/{p['resp']} x{p['instances']}" + (f" b{p['burst']}" if p["burst"] > 1 else "")
            if p.get("mps"):
                cfg += f" open-loop {p['mps']}/s"
            if p.get("load") is not None:
                cfg += " load " + ("max (closed loop)" if p["load"] == "max" else f"{p['load']}%")
        elif TESTS[self.test]["kind"] == "stream":
            cfg = f"msg {p['msg']} x{p['instances']}"
        elif TESTS[self.test]["kind"] == "memcached":
            cfg = f"-c {p['instances']} -T {p['threads']}"
        else:
            cfg = f"size {p['size']}"
        return f"{self.test} {cfg} {self.column} {self.backend} rep {self.rep + 1}"


class Matrix:
    def __init__(self, settings, variant_defs, resolve_variant, guests_known, known_text="default"):
        """resolve_variant(name) -> make variables of a named variant or None."""
        s = {k: v[0] for k, v in KEYS.items()}
        given = {k: v for k, v in settings.items() if v is not None}
        if split_list(given.get("pairs", "")):
            s.update(PAIR_DEFAULTS)
        s.update(given)
        self.raw = s
        self.given = set(given)
        self.variant_defs = dict(variant_defs)
        self._validate(resolve_variant, guests_known, known_text)

    def _validate(self, resolve_variant, guests_known, known_text):
        s = self.raw
        # Pairs: their appliance sides are the variants to build.
        self.pairs = split_list(s["pairs"])
        for pair in self.pairs:
            if pair.count(">") != 1 or not all(pair.split(">")):
                raise BenchError(f"bad pair '{pair}' (CLIENT>SERVER, each linux or a variant name)")
        if len(set(self.pairs)) != len(self.pairs):
            raise BenchError(f"pair listed twice in '{s['pairs']}'")
        # Variants: named in the variants makefile or defined inline.
        self.variants = split_list(s["variants"])
        if self.pairs:
            self.variants = list(dict.fromkeys(x for p in self.pairs for x in p.split(">") if x != "linux"))
        elif not self.variants:
            self.variants = list(self.variant_defs) or ["default"]
        table = dict(self.variant_defs)
        for v in self.variants:
            if v not in table and resolve_variant(v) is not None:
                table[v] = resolve_variant(v)
        unknown = [v for v in self.variants if v not in table]
        if unknown:
            defined = f" (defined here: {', '.join(self.variant_defs)})" if self.variant_defs else ""
            raise BenchError(
                f"unknown variant(s) {', '.join(unknown)}: known are {known_text}{defined}; "
                "define others with `variant NAME = VAR=value ...` in a matrix file or --variant-def"
            )
        for v in list(self.variants) + list(self.variant_defs):
            if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", v):
                raise BenchError(f"bad variant name '{v}' (letters, digits, _ . - only: it names a build directory)")
        if len(set(self.variants)) != len(self.variants):
            raise BenchError(f"variant listed twice in '{s['variants']}'")
        self.variant_vars = {v: table[v] for v in self.variants}
        if s.get("idle") and self.pairs:
            raise BenchError("the idle axis is for single-guest matrices: define idle variants for pairs with `variant`")
        if s.get("idle"):
            self.variants, self.variant_vars = idle.expand(self.variants, self.variant_vars,
                                                           idle.parse(split_list(s["idle"])))

        self.tests = []
        for t in split_list(s["tests"]):
            t = t.lower()  # netperf's names: TCP_RR, UDP_RR, TCP_STREAM, TCP_MAERTS, UDP_STREAM
            t = TEST_ALIASES.get(t, t)
            if t not in TESTS:
                raise BenchError(f"unknown test '{t}': known are {', '.join(TESTS)} (aliases {', '.join(TEST_ALIASES)})")
            if t not in self.tests:
                self.tests.append(t)
        if not self.tests:
            raise BenchError("no tests given (--tests tcp_rr,tcp_stream,...)")

        self.switches = split_list(s["switches"])
        for sw in self.switches:
            if sw not in SWITCHES:
                raise BenchError(f"unknown switch '{sw}' (known: {', '.join(SWITCHES)})")
        if self.pairs:
            bad = [t for t in self.tests if t not in PAIR_TESTS]
            if bad:
                raise BenchError(f"test(s) {', '.join(bad)} do not run between guests (pairs: {', '.join(PAIR_TESTS)})")
            if not self.switches:
                raise BenchError("pairs need a switch (--switches bridge|testpmd)")

        self.backends = [] if self.pairs else [self._backend(b) for b in split_list(s["backends"])]
        if not self.backends and not self.pairs:
            raise BenchError("no backend given (--backends tap|vhost|vhost-user|user)")

        self.guests = [] if self.pairs else split_list(s["guests"])
        for g in self.guests:
            # A kind may take tunings after a colon (guests.py: linux:busypoll+idlepoll).
            if g.split(":", 1)[0] not in guests_known:
                raise BenchError(f"unknown guest '{g}': known are {', '.join(guests_known)}")

        self.repetitions = self._int("repetitions", 1, 100)
        self.seconds = self._int("seconds", 1, 3600)
        self.warmup = self._int("warmup", 0, 600)
        self.rr_sizes = [(parse_size(q), parse_size(r)) for q, r in rr_size_list(s["rr.sizes"])]
        self.rr_instances = self._ints("rr.instances", 1, 128)  # apps/rr.h RR_INSTANCES
        self.rr_burst = self._ints("rr.burst", 1, 64)  # RR_BURST_MAX
        self.rr_role = s["rr.role"]
        if self.rr_role not in ("client", "server"):
            raise BenchError(f"bad rr.role '{self.rr_role}' (client|server)")
        self.load_fractions = []
        if str(s["rr.mps"]).strip() == "load":
            self.load_fractions = parse_fractions(split_list(s["load.fractions"]))
            self.rr_mps = [0]
        else:
            self.rr_mps = self._ints("rr.mps", 1, 1000000) if str(s["rr.mps"]).strip() else [0]
            if "load.fractions" in self.given:
                raise BenchError("load.fractions is for the load sweep: set rr.mps = load too")
        if (self.rr_mps != [0] or self.load_fractions) and self.rr_role != "server":
            raise BenchError("rr.mps (open loop) needs rr.role=server: the host's sockperf under-load drives the guest")
        if self.rr_role == "server" and (max(self.rr_instances) > 1 or max(self.rr_burst) > 1):
            raise BenchError("rr.role=server is driven by one `sockperf ping-pong`: use rr.instances=1 rr.burst=1")
        self.stream_role = s["stream.role"]
        if self.stream_role not in ("client", "server"):
            raise BenchError(f"bad stream.role '{self.stream_role}' (client|server)")
        self.stream_sizes = [parse_size(x) for x in split_list(s["stream.sizes"])]
        for z in self.stream_sizes:
            if not 1 <= z <= 65535:
                raise BenchError(f"stream size {z} out of range 1..65535 (one write of the appliance)")
        self.stream_instances = self._ints("stream.instances", 1, 32)
        self.stream_udp_rate = str(s["stream.udp_rate"]).strip()
        if "udp_stream" in self.tests:
            if self.stream_role != "server":
                raise BenchError("udp_stream needs stream.role=server: a host `iperf -u -c` drives the appliance's "
                                 "stream server (the appliance has no UDP client)")
            if not re.fullmatch(r"\d+(\.\d+)?[KMG]?", self.stream_udp_rate):
                raise BenchError(f"bad stream.udp_rate '{self.stream_udp_rate}' (bits/s, e.g. 50M)")
            if max(self.stream_sizes) > 65507:
                raise BenchError("udp_stream: stream.sizes above 65507 do not fit one UDP datagram")
        self.stream_cc = host_cc(str(s["stream.cc"]).strip())
        self.ping_sizes = [parse_size(x) for x in split_list(s["ping.sizes"])]
        self.pkt_sizes, self.ndr_sizes = [], []
        for key, out in (("pkt.sizes", self.pkt_sizes), ("ndr.sizes", self.ndr_sizes)):
            for z in split_list(s[key]):
                if z != "imix" and not (z.isdigit() and 64 <= int(z) <= 1518):
                    raise BenchError(f"bad {key} entry '{z}' (64..1518 or imix: app=pkt's pkt.size)")
                out.append(z)  # strings: "imix" sorts with them
        self.pkt_burst = self._int("pkt.burst", 1, 256)
        self.pkt_generator = str(s["pkt.generator"]).strip()
        if self.pkt_generator not in ("python", "testpmd"):
            raise BenchError(f"bad pkt.generator '{self.pkt_generator}' (python|testpmd)")
        self.ndr_trial = self._int("ndr.trial", 1, 600)
        self.ndr_mode = str(s["ndr.mode"]).strip()
        if self.ndr_mode not in ("macswap", "reflect"):
            raise BenchError(f"bad ndr.mode '{self.ndr_mode}' (macswap|reflect)")
        self.ndr_max_rate = self._int("ndr.max_rate", 2, 100000000)
        self.ndr_generator = str(s["ndr.generator"]).strip()
        if self.ndr_generator not in ("python", "pacegen", "vupacegen", "auto"):
            raise BenchError(f"bad ndr.generator '{self.ndr_generator}' (python|pacegen|vupacegen|auto)")
        if self.ndr_generator in ("pacegen", "vupacegen") and "imix" in self.ndr_sizes:
            raise BenchError(f"ndr.generator = {self.ndr_generator} sends one frame size: ndr.sizes without imix")
        if self.ndr_generator == "vupacegen" and "ndr" in self.tests and \
                any(name != "vhost-user" for _spec, name, _o in self.backends):
            raise BenchError("ndr.generator = vupacegen runs on the vhost-user socket: backends = vhost-user only "
                             "(auto picks it there and pacegen on tap)")
        lat = split_list(s["ndr.latency"])
        # 0 % (the latency stream alone) is a load here, not in load.fractions.
        zero = [x for x in lat if x.strip() in ("0", "0%")]
        rest = [x for x in lat if x.strip() not in ("0", "0%")]
        if len(zero) > 1:
            raise BenchError(f"ndr.latency lists 0 twice: {' '.join(lat)}")
        self.ndr_latency = [0] * len(zero) + (parse_fractions(rest) if rest else [])
        self.ndr_duration_sum, self.ndr_repeat = self._int("ndr.duration_sum", 1, 3600), self._int("ndr.repeat", 1, 100)
        self.ndr_warmup = self._int("ndr.warmup", 0, 1)
        try:
            self.ndr_exceed, self.ndr_settle = float(s["ndr.exceed_ratio"]), float(s["ndr.settle"])
        except ValueError:
            raise BenchError(f"ndr.exceed_ratio and ndr.settle take numbers, not '{s['ndr.exceed_ratio']}', "
                             f"'{s['ndr.settle']}'")
        if not (0 <= self.ndr_exceed < 100 and 0 <= self.ndr_settle <= 30):
            raise BenchError("ndr.exceed_ratio is a percentage 0..99, ndr.settle seconds 0..30")
        try:
            self.ndr_pdr, self.ndr_precision = float(s["ndr.pdr"]), float(s["ndr.precision"])
        except ValueError:
            raise BenchError(f"ndr.pdr and ndr.precision take numbers (percent), not '{s['ndr.pdr']}', "
                             f"'{s['ndr.precision']}'")
        if not (0 < self.ndr_pdr < 100 and 0 < self.ndr_precision < 100):
            raise BenchError("ndr.pdr and ndr.precision are percentages above 0 and below 100")
        self.mc_concurrency = self._ints("memcached.concurrency", 1, 1024)
        self.mc_threads = self._ints("memcached.threads", 1, 64)
        if max(self.mc_threads) > min(self.mc_concurrency):
            raise BenchError(f"memcached.threads {max(self.mc_threads)} exceeds memcached.concurrency "
                             f"{min(self.mc_concurrency)} (memcaslap -T <= -c)")
        self.accels = split_list(s["accel"])
        for a in self.accels:
            if a not in ("auto", "kvm", "tcg"):
                raise BenchError(f"bad accel '{a}' (auto|kvm|tcg)")
        if not self.accels or len(set(self.accels)) != len(self.accels):
            raise BenchError(f"accel '{s['accel']}': give each accelerator once")
        self.accel = self.accels[0]
        self.cpu = str(s["cpu"]).strip()
        if self.cpu and not re.fullmatch(r"[A-Za-z0-9_.,=+-]+", self.cpu):
            raise BenchError(f"bad cpu '{self.cpu}' (a QEMU -cpu model such as qemu64, max, host)")
        self.machines = split_list(s["machine"])
        for mach in self.machines:
            if mach not in MACHINES:
                raise BenchError(f"bad machine '{mach}' ({'|'.join(MACHINES)})")
        if not self.machines or len(set(self.machines)) != len(self.machines):
            raise BenchError(f"machine '{s['machine']}': give each machine once")
        if any(mach.startswith("microvm") for mach in self.machines) and any(
                g.split(":", 1)[0] == "linux" for g in self.guests):
            raise BenchError("the stock Linux guest runs on pc and q35 only (its virtio-net is PCI): "
                             "drop microvm from machine or linux from guests")
        self.machine = self.machines[0]
        if self.pairs:
            if self.machines != ["pc"]:
                raise BenchError("pairs run on machine pc only")
            if len(self.accels) != 1:
                raise BenchError("pairs take one accelerator (accel auto, kvm or tcg: the appliance sides "
                                 "run under it; a stock Linux side takes KVM only with vmx/svm)")
            if any(q != r for q, r in self.rr_sizes):
                raise BenchError("pairs: rr.sizes must be N/N (both sides send rr size bytes)")
            if self.stream_instances != [1] or self.rr_mps != [0] or self.load_fractions:
                raise BenchError("pairs: one stream per pair (stream.instances=1) and closed-loop RR (no rr.mps)")
        self.queues_list = self._ints("queues", 1, 8)  # vnet.h: vnet_open_mq() takes 1..8 pairs
        if len(set(self.queues_list)) != len(self.queues_list):
            raise BenchError(f"queues '{s['queues']}': give each queue count once")
        self.queues = self.queues_list[0]
        if max(self.queues_list) > 1:
            self._check_queues()
        self._check_ring()
        self.pin = {}
        for who in ("qemu", "peer", "backend", "vcpu"):
            v = str(s[f"pin.{who}"]).strip()
            if v and not re.fullmatch(r"\d+(-\d+)?(,\d+(-\d+)?)*", v):
                raise BenchError(f"bad pin.{who} '{v}' (a taskset CPU list such as 0 or 0,1 or 0-1)")
            self.pin[who] = v
        ncpu = os.cpu_count() or 1
        for who, v in self.pin.items():
            for c in re.findall(r"\d+", v):
                if int(c) >= ncpu:
                    raise BenchError(f"pin.{who}={v}: this host has CPUs 0..{ncpu - 1} only")
        self.placements = split_list(s["placement"])
        bad = [p for p in self.placements if p not in PLACEMENTS]
        if bad or not self.placements or len(set(self.placements)) != len(self.placements):
            raise BenchError(f"placement '{s['placement']}': give free, pinned or both, each once")
        if "pinned" in self.placements and len(self.placements) > 1 and not any(
                self.pin[w] for w in ("qemu", "peer", "vcpu")):
            raise BenchError("placement free,pinned: pinned would pin nothing; set pin.vcpu, pin.qemu or pin.peer")
        if self.pin["vcpu"] and self.pairs:
            raise BenchError("pin.vcpu: guest pairs have no vCPU pinning (pairs.py); use pin.qemu")
        self.run_timeout = int(s["run_timeout"]) if str(s["run_timeout"]).strip() else self.seconds + self.warmup + 60
        if "ndr" in self.tests and not str(s["run_timeout"]).strip():
            # A search is up to ~40 trials and 4 per second of the duration
            # sum (MLRsearch's last phase), each with a peer start around it.
            trials = (40 + 4 * self.ndr_duration_sum // self.ndr_trial) * self.ndr_repeat + 5
            self.run_timeout = max(self.run_timeout, trials * (self.ndr_trial + 3) + 60)

        self.columns = [(g, v) for g in self.guests for v in (self.variants if g == "vnetlab" else [g])]
        if self.pairs:
            self.columns = [("pair", p) for p in self.pairs]
        clash = [v for v in self.variants if v in self.guests and v != "vnetlab"] if "vnetlab" in self.guests else []
        if clash:
            raise BenchError(f"variant name(s) {', '.join(clash)} are also guest names and would share a column: rename the variant")
        base = s["baseline"] or self.column_name(*self.columns[0], self.machines[0], self.accels[0],
                                                 self.queues_list[0], self.placements[0])
        names = [self.column_name(*c, mach, a, q, pl) for c in self.columns for mach in self.machines
                 for a in self.accels for q in self.queues_list for pl in self.placements]
        if base not in names:
            raise BenchError(f"baseline '{base}' is not one of the columns {', '.join(names)}")
        self.baseline = base

    def column_name(self, guest, variant, machine=None, accel=None, queues=None, placement=None):
        name = variant if guest in ("vnetlab", "pair") else guest
        if machine and len(getattr(self, "machines", ())) > 1:
            name += "@" + machine
        if accel and len(getattr(self, "accels", ())) > 1:
            name += "@" + accel
        if queues and len(getattr(self, "queues_list", ())) > 1:
            name += f"@q{queues}"
        if placement and len(getattr(self, "placements", ())) > 1:
            name += "@" + placement
        return name


    def _check_queues(self):
        """queues above 1: refuse what cannot run, each with its reason."""
        q = max(self.queues_list)
        if self.pairs:
            raise BenchError("queues: guest pairs run one queue pair per guest (pairs.py has no queues axis)")
        bad = [t for t in self.tests if t not in QUEUE_TESTS]
        if bad:
            raise BenchError(
                f"queues={q} with test(s) {', '.join(bad)}: the harness runs only {', '.join(QUEUE_TESTS)} on "
                "several queue pairs so far (ndr's and pkt_rxonly's offered traffic is one flow, which tun puts on "
                f"one queue; udp_rr and tcp_maerts are not wired up). Use tests={','.join(QUEUE_TESTS)} or queues=1")
        if "vnetlab" in [g.split(":", 1)[0] for g in self.guests]:
            self._check_queues_appliance(q)
        bad = [b[0] for b in self.backends if b[1] not in QUEUE_BACKENDS]
        if bad:
            raise BenchError(f"queues={q} on backend(s) {', '.join(bad)}: the harness gives several queue pairs on "
                             f"{' and '.join(QUEUE_BACKENDS)} only (a multi_queue tap; testpmd's vhost-user queues=N); "
                             "slirp has one queue and vhost needs /dev/vhost-net")
        bad = [g for g in self.guests if g.split(":", 1)[0] not in ("vnetlab", "linux")]
        if bad:
            raise BenchError(f"queues={q} with guest(s) {', '.join(bad)}: only the appliance and the stock Linux "
                             "guest have a NIC with queues")
        if any(m_.startswith("microvm") for m_ in self.machines):
            raise BenchError(f"queues={q} on microvm: the harness sets up MQ (mq=on, MSI-X vectors) on virtio-net-pci "
                             "only: use machine pc or q35")
        if any(v != "poll" and "IDLE=" + v in self.variant_vars.get(x, "")
               for x in self.variants for v in ("halt", "adaptive")):
            raise BenchError(f"queues={q}: a variant with IDLE=halt or IDLE=adaptive: the appliance takes mq>1 there "
                             "(an MSI-X vector per queue, docs/multiqueue.md), but the queues axis has not been run "
                             "with one (its vhost-user NIC has vectors=0): use IDLE=poll")
        if "kvm" in self.accels or "auto" in self.accels:
            if software_kvm():
                raise BenchError(
                    f"queues={q} with accel {'/'.join(a for a in self.accels if a != 'tcg')}: this host's /dev/kvm is "
                    "a software KVM (kvm_pvm, no vmx/svm), where the appliance runs natively with one vCPU and "
                    f"refuses smp>1 (kernel/pvm.c): use accel=tcg for queues above 1")

    def _check_ring(self):
        """vhost-user:ring=N on the appliance: its driver takes at most
        QUEUE_MAX descriptors of the device's N (256 by default), so a
        variant below N would run smaller rings than the Linux guest and
        the reference beside it; refuse instead of comparing unlike rings."""
        rings = [int(o["ring"]) for _, _, o in self.backends if "ring" in o]
        if not rings or "vnetlab" not in [g.split(":", 1)[0] for g in self.guests]:
            return
        for v in self.variants:
            m = re.search(r"\bQUEUE_MAX=(\d+)", self.variant_vars.get(v, ""))
            cap = int(m.group(1)) if m else 256
            if cap < max(rings):
                raise BenchError(f"variant {v}: its driver keeps {cap}-descriptor rings (QUEUE_MAX), below the "
                                 f"backend's ring={max(rings)}: add QUEUE_MAX={max(rings)} to the variant, so the "
                                 "appliance, the Linux guest and the reference run the same ring size")

    def _check_queues_appliance(self, q):
        """queues above 1 on the appliance: its TCP tests run a client (or
        server) copy per queue, each with its share of the connections."""
        if "memcached" in self.tests:
            raise BenchError(f"queues={q} with memcached on the appliance: its memcached runs one TCP/IP copy "
                             "(mq is a usage error there, docs/multiqueue.md); the Linux guest takes it "
                             "(guests = linux)")
        tcp = [t for t in self.tests if t in QUEUE_TCP_TESTS]
        if not tcp:
            return
        if "tcp_rr" in tcp and self.rr_role == "server":
            raise BenchError(f"queues={q} with tcp_rr and rr.role=server: one `sockperf ping-pong` is one flow, "
                             "on one queue: use rr.role=client (a client copy per queue)")
        need = {"tcp_rr": ("rr.instances", self.rr_instances), "tcp_stream": ("stream.instances", self.stream_instances)}
        for t in tcp:
            key, vals = need[t]
            if min(vals) < q:
                raise BenchError(f"queues={q} with {t}: {key} {min(vals)} is fewer connections than queues (each "
                                 f"queue's copy opens its share, at least one): give {key} >= {q}")
        clients = [t for t in tcp if (self.rr_role if t == "tcp_rr" else self.stream_role) == "client"]
        bad = [b[0] for b in self.backends if b[1] != "tap"]
        if clients and bad:
            raise BenchError(f"queues={q} with {', '.join(clients)} (the appliance as client) on backend(s) "
                             f"{', '.join(bad)}: a client copy per queue needs RSS on the NIC (the replies of the "
                             "connections it opens must come back on its queue), which QEMU gives on tap "
                             "(host/qemu-run.sh --queues: rss=on) but not on vhost-user")

    def ndr_gen(self, size, backend=None):
        """ndr.generator for one frame size on one backend (its name): auto
        is vupacegen on vhost-user, pacegen elsewhere, python for imix."""
        if self.ndr_generator != "auto":
            return self.ndr_generator
        if size == "imix":
            return "python"
        return "vupacegen" if backend == "vhost-user" else "pacegen"

    def _int(self, k, lo, hi):
        try:
            v = int(str(self.raw[k]))
        except ValueError:
            raise BenchError(f"bad {k} '{self.raw[k]}' (expected a whole number {lo}..{hi})")
        if not lo <= v <= hi:
            raise BenchError(f"{k}={v} out of range {lo}..{hi}")
        return v

    def _ints(self, k, lo, hi):
        out = []
        for x in split_list(self.raw[k]):
            if not x.isdigit() or not lo <= int(x) <= hi:
                raise BenchError(f"bad {k} value '{x}' (whole numbers {lo}..{hi})")
            out.append(int(x))
        if not out:
            raise BenchError(f"{k} is empty")
        return out

    def _backend(self, spec):
        name, _, opts = spec.partition(":")
        if name not in BACKENDS:
            raise BenchError(f"unknown backend '{name}': known are {', '.join(BACKENDS)}")
        parsed = {}
        for o in split_list(opts.replace("+", ",")) if opts else []:
            k, eq, v = o.partition("=")
            allowed = BACKENDS[name].get(k)
            if not eq or allowed is None:
                known = ", ".join(BACKENDS[name]) or "none"
                raise BenchError(f"backend '{spec}': unknown option '{o}' (options of {name}: {known})")
            if allowed is int:
                if not v.isdigit():
                    raise BenchError(f"backend '{spec}': {k} needs a whole number")
            elif v not in allowed:
                raise BenchError(f"backend '{spec}': {k} must be one of {'|'.join(allowed)}")
            parsed[k] = v
        return spec, name, parsed

    def configs(self, test):
        """Parameter dicts of one test, in table order."""
        kind = TESTS[test]["kind"]
        if self.pairs:
            # pairs.py: one size both ways (size), the client's instances and burst
            if kind == "rr":
                return [dict(size=q, req=q, resp=q, instances=i, burst=b, seconds=self.seconds)
                        for (q, _r) in self.rr_sizes for b in self.rr_burst for i in self.rr_instances]
            if kind == "pkt":
                return [dict(size=z, burst=self.pkt_burst, seconds=self.seconds) for z in self.pkt_sizes]
            return [dict(msg=m, instances=1, seconds=self.seconds) for m in self.stream_sizes]
        if kind == "rr" and self.load_fractions:
            # loadlat.py: the closed-loop maximum first, then its fractions
            return [dict(req=q, resp=r, instances=1, burst=1, seconds=self.seconds, load=ld)
                    for (q, r) in self.rr_sizes for ld in ["max"] + self.load_fractions]
        if kind == "rr":
            return [
                dict(req=q, resp=r, instances=i, burst=b, seconds=self.seconds, **({"mps": mps} if mps else {}))
                for mps in self.rr_mps
                for (q, r) in self.rr_sizes
                for b in self.rr_burst
                for i in self.rr_instances
            ]
        if kind == "stream":
            return [dict(msg=m, instances=i, seconds=self.seconds, cc=self.stream_cc, udp_rate=self.stream_udp_rate)
                    for i in self.stream_instances for m in self.stream_sizes]
        if kind == "memcached":
            return [dict(instances=c, threads=t, seconds=self.seconds)
                    for t in self.mc_threads for c in self.mc_concurrency]
        if kind == "pkt":
            return [dict(size=z, burst=self.pkt_burst, seconds=self.seconds, generator=self.pkt_generator)
                    for z in self.pkt_sizes]
        if kind == "ndr":
            return [dict(size=z, trial=self.ndr_trial, mode=self.ndr_mode, max_rate=self.ndr_max_rate,
                         pdr=self.ndr_pdr, precision=self.ndr_precision, seconds=self.ndr_trial,
                         duration_sum=self.ndr_duration_sum, exceed_ratio=self.ndr_exceed, warmup=self.ndr_warmup,
                         settle=self.ndr_settle, repeat=self.ndr_repeat,
                         **({"latency": self.ndr_latency} if self.ndr_latency else {}),
                         **({"generator": self.ndr_gen(z)} if self.ndr_gen(z) != "python" else {}))
                    for z in self.ndr_sizes]
        return [dict(size=z, seconds=self.seconds) for z in self.ping_sizes]

    def runs(self):
        """Every run, repetition-major so that slow drifts of the host are
        spread over all columns instead of landing on one."""
        out = []
        if self.pairs:
            for rep in range(self.repetitions):
                for sw in self.switches:
                    for test in self.tests:
                        for params in self.configs(test):
                            for pair in self.pairs:
                                out.append(Run(len(out), "pair", pair, test, sw, dict(params), rep, pair,
                                               machine="pc"))
            return out
        for rep in range(self.repetitions):
            for spec, name, _opts in self.backends:
                for test in self.tests:
                    for params in self.configs(test):
                        if TESTS[test]["kind"] == "ndr" and "generator" in params:
                            params = dict(params, generator=self.ndr_gen(params["size"], name))
                        for guest, variant in self.columns:
                            for mach in self.machines:
                                for a in self.accels:
                                    for q in self.queues_list:
                                        for pl in self.placements:
                                            out.append(
                                                Run(len(out), guest, variant, test, spec, dict(params), rep,
                                                    self.column_name(guest, variant, mach, a, q, pl),
                                                    machine=mach, accel=a, queues=q, placement=pl)
                                            )
        return out

    def backend_opts(self, spec):
        for s, name, opts in self.backends:
            if s == spec:
                return name, opts
        raise KeyError(spec)

    def describe(self):
        return {
            "variants": {v: self.variant_vars[v] for v in self.variants},
            "tests": self.tests,
            "backends": [b[0] for b in self.backends],
            "guests": self.guests,
            "pairs": self.pairs,
            "switches": self.switches if self.pairs else [],
            "repetitions": self.repetitions,
            "seconds": self.seconds,
            "warmup": self.warmup,
            "baseline": self.baseline,
            "rr.sizes": [f"{q}/{r}" for q, r in self.rr_sizes],
            "rr.instances": self.rr_instances,
            "rr.burst": self.rr_burst,
            "rr.mps": "load" if self.load_fractions else self.rr_mps,
            "load.fractions": self.load_fractions,
            "rr.role": self.rr_role,
            "stream.sizes": self.stream_sizes,
            "stream.instances": self.stream_instances,
            "stream.role": self.stream_role,
            "stream.cc": self.stream_cc,
            "stream.udp_rate": self.stream_udp_rate,
            "ping.sizes": self.ping_sizes,
            "memcached.concurrency": self.mc_concurrency,
            "memcached.threads": self.mc_threads,
            "accel": self.accels,
            "cpu": self.cpu,
            "machine": self.machines,
            "queues": self.queues_list,
            "pin": self.pin,
            "placement": self.placements,
        }


__doc__ += "\n".join(f"  {k:18} {d}  (default: {v or '-'})" for k, (v, d) in KEYS.items())
