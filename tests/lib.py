"""tests/lib.py: what every test uses to boot the appliance and check its console.

A test is a function ``test_*(t)`` in ``tests/cases/test_*.py``; ``t`` is a
``T``. It boots QEMU through host/qemu-run.sh (the same path as ``make run``),
always with a hard timeout, and asserts on serial lines and the guest's exit
status. A failure raises ``Fail`` with what was expected and what was seen;
the runner prints it with the tail of the console.
"""

import json
import os
import queue
import re
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("VNETLAB_BUILD", os.path.join(TOP, "build"))
QEMU_RUN = os.path.join(TOP, "host", "qemu-run.sh")

# Namespace, tap and addresses of the test network. The host end lives only
# inside a namespace the test creates, so nothing outside this machine (or
# outside the namespace) is ever addressed.
NS_HOST_IP = "10.77.0.1"
NS_GUEST_IP = "10.77.0.2"
NS_PREFIX = 24


def linked_variants():
    """The representative driver variants mk/variants.mk links into
    build/v/<name>/vnetlab.elf (VARIANT_LINKED): together they cover every
    TX_RECLAIM, every TX_KICK, EVENT_IDX both ways, and both values of
    AVAIL_PUBLISH, TXHDR and ZEROCOPY."""
    with open(os.path.join(TOP, "mk", "variants.mk")) as f:
        text = f.read().replace("\\\n", " ")
    m = re.search(r"^VARIANT_LINKED\s*:=\s*(.*)$", text, re.M)
    if not m:
        raise RuntimeError("mk/variants.mk has no VARIANT_LINKED line")
    return tuple(m.group(1).split())


def linked_kernel(name):
    """build/v/<name>/vnetlab.elf, a variant `make variants-link` linked."""
    path = os.path.join(BUILD, "v", name, "vnetlab.elf")
    if not os.path.exists(path):
        raise Fail(f"{path} missing (tests/run.sh links it with `make variants-link`)")
    return path


def make_list(var):
    """The variant names a make variable lists (VARIANT_IDLE_LINKED,
    VARIANT_PACKED_LINKED, ...), from `make print-VAR`; Fail if empty."""
    r = subprocess.run(["make", "-s", f"print-{var}"], cwd=TOP, capture_output=True, text=True, timeout=60)
    names = r.stdout.split()
    if r.returncode or not names:
        raise Fail(f"make print-{var} failed: {r.stderr[-300:]}")
    return names


def run_all(argvs, timeout, workers=2):
    """subprocess.run() each argv (cwd TOP, output captured), at most
    workers at once: for checks that run many short independent commands
    (make -n, vnetbench.py --list), each a CPU-bound process of its own, on
    this project's two-core hosts. The results come back in argvs' order."""
    import concurrent.futures

    def one(argv):
        return subprocess.run(argv, cwd=TOP, capture_output=True, text=True, timeout=timeout)

    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, argvs))


class Fail(Exception):
    """A test expectation did not hold."""


NETPEER = [sys.executable, os.path.join(TOP, "tests", "tools", "netpeer.py")]


def netpeer(ns, args, timeout):
    """Run tests/tools/netpeer.py in the namespace; its JSON line, or Fail."""
    r = ns.run(NETPEER + args, timeout=timeout, capture_output=True, text=True)
    lines = r.stdout.strip().splitlines()
    if not lines:
        raise Fail(f"netpeer {args[0]} printed nothing (status {r.returncode}): {r.stderr.strip()[-300:]}")
    res = json.loads(lines[-1])
    if r.returncode != 0:
        raise Fail(f"netpeer {' '.join(args)} failed: {json.dumps(res)[:600]}")
    return res


def ping(ns, args, timeout=60):
    """ping -q the guest from the namespace: (sent, received, the run)."""
    r = ns.run(["ping", "-q"] + args + [NS_GUEST_IP], timeout=timeout, capture_output=True, text=True)
    m = re.search(r"(\d+) packets transmitted, (\d+) received", r.stdout)
    if not m:
        raise Fail(f"ping {' '.join(args)} printed no summary (status {r.returncode}): {r.stdout}{r.stderr}")
    return int(m.group(1)), int(m.group(2)), r


def expect_refused(make, exc, pattern, what):
    """make() must raise exc with a message matching the regex pattern
    (a matrix refusing bad input, say)."""
    try:
        make()
    except exc as e:
        if not re.search(pattern, str(e)):
            raise Fail(f"{what}: refused, but the message {str(e)!r} lacks /{pattern}/")
        return
    raise Fail(f"{what}: accepted, expected a refusal /{pattern}/")


def json_line(g, prefix):
    """The JSON object of the guest's first console line `PREFIX {...}`."""
    m = g.expect(r"^" + prefix + r" (\{.*\})$")
    return json.loads(m.group(1))


def per_queue(g, prefix):
    """{queue: JSON object} of the guest's `PREFIX {"queue":...}` lines
    (COUNTERS, RING), the last of each queue."""
    out = {}
    for line in g.text():
        m = re.match(r"^" + prefix + r" (\{.*\})$", line)
        if m:
            d = json.loads(m.group(1))
            out[d["queue"]] = d
    return out


class Skip(Exception):
    """The test cannot run on this host (reason given)."""


class KnownFault(Exception):
    """The test reproduced a fault found and not fixed yet (the message
    names it and what was seen): the runner prints XFAIL and counts it, so
    it stays visible in every run. When the fault no longer reproduces, the
    test must raise Fail instead ("fixed: turn me into a real check")."""


class Guest:
    """One QEMU run: console lines with arrival times, then the exit status."""

    def __init__(self, argv, timeout, name):
        self.argv = argv
        self.timeout = timeout
        self.name = name
        self.lines = []  # (host monotonic seconds, text)
        self.stderr = []
        self.status = None
        self._q = queue.Queue()
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self._out = threading.Thread(target=self._read, args=(self.proc.stdout, True), daemon=True)
        self._err = threading.Thread(target=self._read, args=(self.proc.stderr, False), daemon=True)
        self._out.start()
        self._err.start()

    def _read(self, f, is_out):
        for raw in iter(f.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            # OVMF's clear-screen sequences end up in front of the first
            # kernel line (the ready line, or an early ERROR/PANIC or smp
            # line); drop everything before it.
            m = FIRST_LINE.search(line) if is_out else None
            if m and m.start():
                line = line[m.start():]
            if is_out:
                self.lines.append((time.monotonic(), line))
                self._q.put(line)
            else:
                self.stderr.append(line)
        if is_out:
            self._q.put(None)

    def wait_line(self, pattern, timeout=30):
        """Block until a console line matches; returns the match."""
        rx = re.compile(pattern)
        for _, line in list(self.lines):
            m = rx.search(line)
            if m:
                return m
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            if left <= 0:
                raise Fail(f"{self.name}: no console line matching /{pattern}/ within {timeout}s")
            try:
                line = self._q.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise Fail(f"{self.name}: console ended without a line matching /{pattern}/")
            m = rx.search(line)
            if m:
                return m

    def wait(self):
        """Wait for QEMU to end (qemu-run.sh enforces the hard timeout)."""
        try:
            self.status = self.proc.wait(timeout=self.timeout + 30)
        except subprocess.TimeoutExpired:
            self.kill()
            raise Fail(f"{self.name}: qemu-run.sh did not end within {self.timeout + 30}s")
        self._out.join(5)
        self._err.join(5)
        return self

    def kill(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()

    # ---- assertions ----
    def text(self):
        return [l for _, l in self.lines]

    def tail(self, n=25):
        return "\n".join(["    | " + l for l in self.text()[-n:]] + ["    ! " + l for l in self.stderr[-5:]])

    def expect(self, pattern):
        rx = re.compile(pattern)
        for l in self.text():
            m = rx.search(l)
            if m:
                return m
        raise Fail(f"{self.name}: expected a console line matching /{pattern}/, saw none")

    def expect_not(self, pattern):
        rx = re.compile(pattern)
        for l in self.text():
            if rx.search(l):
                raise Fail(f"{self.name}: unexpected console line: {l!r}")

    def expect_usage_error(self, msg):
        """A command-line error: the cmdline ERROR line matching msg (a
        regex), no ready line, exit status 2."""
        self.expect(r'^ERROR \{"where":"cmdline","msg":"' + msg)
        self.expect_not(r"^vnetlab ready")
        self.expect_status(2)

    def expect_run_error(self, where, msg):
        """A run that failed: the ERROR line from where matching msg (a
        regex), exit status 1."""
        self.expect(r'^ERROR \{"where":"' + where + r'","msg":"' + msg)
        self.expect_status(1)

    def expect_status(self, status):
        if self.status != status:
            raise Fail(f"{self.name}: expected exit status {status}, got {self.status}")
        # A guest status (0..3, docs/interface.md "Console format") also has to be the
        # guest's own last word, not just a number QEMU returned.
        if 0 <= status <= 3:
            said = [l for l in self.text() if l.startswith("vnetlab exit status=")]
            if not said or said[-1] != f"vnetlab exit status={status}":
                raise Fail(f"{self.name}: exit status {status} but the console's exit line is "
                           f"{said[-1] if said else 'missing'}")

    def expect_ok(self):
        """Ready line, no panic, no ERROR line, status 0."""
        self.expect(r"^vnetlab ready boot_us=\d+")
        self.expect_not(r"^PANIC")
        self.expect_not(r"^ERROR ")
        self.expect_status(0)

    def banner(self):
        """The banner's key=value fields as a dict."""
        m = self.expect(r"^vnetlab boot=")
        return dict(re.findall(r'(\w+)=("[^"]*"|\S+)', m.string))


FIRST_LINE = re.compile(r"vnetlab (?:ready|boot=)|smp cpus?=|ERROR \{|PANIC: ")


class Netns:
    """A network namespace with a tap for QEMU, removed on every exit path."""

    count = 0

    def __init__(self, t):
        Netns.count += 1
        self.t = t
        self.name = f"vnetlab-{os.getpid()}-{Netns.count}"
        self.tap = "vnltap0"
        self.procs = []

    def __enter__(self):
        if os.geteuid() != 0:
            raise Skip("needs root for a network namespace with a tap")
        if not shutil.which("ip"):
            raise Fail("'ip' not found (Debian package iproute2)")
        self.t.cleanups.append(self.close)
        ip = ["ip", "-n", self.name]
        self._run(["ip", "netns", "add", self.name])
        for cmd in (
            ip + ["link", "set", "lo", "up"],
            ip + ["tuntap", "add", "dev", self.tap, "mode", "tap"],
            # Keep the host's IPv6 ND/MLD chatter off the wire we measure.
            ["ip", "netns", "exec", self.name, "sysctl", "-qw", f"net.ipv6.conf.{self.tap}.disable_ipv6=1"],
            ip + ["addr", "add", f"{NS_HOST_IP}/{NS_PREFIX}", "dev", self.tap],
            ip + ["link", "set", self.tap, "up"],
        ):
            self._run(cmd)
        return self

    def _run(self, cmd):
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        if r.returncode:
            raise Fail(f"{' '.join(cmd)} failed: {r.stderr.strip()}")

    def exec_argv(self, argv):
        return ["ip", "netns", "exec", self.name] + argv

    def popen(self, argv, **kw):
        """Start a host-side peer inside the namespace; ended on close."""
        p = subprocess.Popen(self.exec_argv(argv), start_new_session=True, **kw)
        self.procs.append(p)
        return p

    def run(self, argv, timeout, **kw):
        return subprocess.run(self.exec_argv(argv), timeout=timeout, **kw)

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
        self.procs = []
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)

    def __exit__(self, *exc):
        self.close()
        return False


class T:
    """Per-test context handed to every test function."""

    def __init__(self, name):
        self.name = name
        self.guests = []
        self.cleanups = []
        # The control port's shared secret for this test's appliances
        # (apps/lib/ctl.c): passed as ctl.token= and exported for netpeer.py and
        # every other peer the test runs (VNETLAB_CTL_TOKEN).
        self.ctl_token = secrets.token_hex(16)
        os.environ["VNETLAB_CTL_TOKEN"] = self.ctl_token

    def start(self, append="", machine="pc", net="user", image=None, timeout=60, ns=None, extra=(), kernel=None,
              packed=False, accel=None, cpu=None, nic_opts="", queues=1):
        argv = [QEMU_RUN, "--machine", machine, "--net", net, "--timeout", str(timeout)]
        if queues != 1:
            argv += ["--queues", str(queues)]  # tap queues=N, the NIC mq=on (a multi_queue tap)
        if accel:
            argv += ["--accel", accel]
        if cpu:
            argv += ["--cpu", cpu]
        if packed:
            argv.append("--packed")  # the NIC offers the packed ring (RING=packed builds need it)
        if nic_opts:
            argv += ["--nic-opts", nic_opts]  # more NIC properties (iommu_platform=on, ...)
        if image:
            argv += ["--image", image]
        else:
            argv += ["--kernel", kernel or os.path.join(BUILD, "vnetlab.elf"), "--append", self.with_token(append)]
        if extra:
            argv += ["--"] + list(extra)
        if ns:
            argv = ns.exec_argv(argv)
        g = Guest(argv, timeout, self.name)
        self.guests.append(g)
        return g

    SERVING = re.compile(r"(^|\s)app=(echo|rr|stream|memcached)(\s|$)")

    def with_token(self, append):
        """A serving app's command line gets this test's ctl.token= unless it
        says ctl= or ctl.token= itself (other boots keep theirs verbatim:
        test_boot compares the banner's cmdline)."""
        if not self.SERVING.search(append) or re.search(r"(^|\s)ctl(\.token)?=", append):
            return append
        return f"{append.rstrip()} ctl.token={self.ctl_token}"

    def boot(self, **kw):
        """Boot, wait for the end, return the Guest."""
        return self.start(**kw).wait()

    def netns(self):
        return Netns(self)

    def close(self):
        for g in self.guests:
            g.kill()
        for c in reversed(self.cleanups):
            c()
        self.cleanups = []


def wait_listening(ns, proto, port, timeout=10):
    """A host peer just started in ns must be listening before the guest,
    which boots in milliseconds, connects (a loaded host may take longer)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        r = ns.run(["ss", "-Hln" + ("t" if proto == "tcp" else "u"), f"sport = :{port}"],
                   timeout=5, capture_output=True, text=True)
        if r.stdout.strip():
            return
        time.sleep(0.05)
    raise Fail(f"host peer not listening on {proto} port {port} within {timeout} s")


def check_kvm_columns(r, unit, who=""):
    """A row's KVM exit counters agree with its accelerator: under TCG
    kvm_counters says n/a (with why) and no kvm_* figure is there, not
    even a zero; under KVM the exits per unit are there."""
    figs = [k for k in r if k.startswith(f"{who}kvm_") and not k.startswith(f"{who}kvm_counters")]
    if r["accel"] == "tcg":
        if r.get(f"{who}kvm_counters") != "n/a" or not r.get(f"{who}kvm_counters_why") or figs:
            raise Fail(f"run {r.get('run')} ({r['test']}, TCG): {who}kvm_counters must be n/a with a reason and "
                       f"no {who}kvm_* figures: {r.get(f'{who}kvm_counters')} {figs}")
    elif r["accel"] == "kvm":
        if r.get(f"{who}kvm_counters") != "query-stats" or not r.get(f"{who}kvm_exits_per_{unit}"):
            raise Fail(f"run {r.get('run')} ({r['test']}, KVM): expected {who}kvm_exits_per_{unit} from query-stats: "
                       f"{r.get(f'{who}kvm_counters')} {figs}")


def pkt_guest(t, ns, args, seconds=60, kernel=None, packed=False, extra=()):
    """An app=pkt boot on the namespace's tap, up to its ready line;
    returns (guest, its MAC)."""
    g = t.start(append=f"app=pkt backend=tap pkt.seconds={seconds} {args}", net=f"tap:{ns.tap}", ns=ns,
                timeout=seconds + 60, kernel=kernel, packed=packed, extra=extra)
    mac = g.wait_line(r"^virtio-net: mac=(\S+) ", timeout=60).group(1)
    g.wait_line(r"^pkt: mode=\S+ .* ready$", timeout=30)
    return g, mac


def echo_guest(t, ns, kernel=None, seconds=300, args="", extra=(), machine="pc", packed=False, accel=None):
    """The appliance's echo service (TCP/UDP port 7) on the namespace's tap."""
    g = t.start(append=f"app=echo ip={NS_GUEST_IP}/{NS_PREFIX} backend=tap echo.seconds={seconds} {args}",
                net=f"tap:{ns.tap}", ns=ns, timeout=seconds + 60, kernel=kernel, extra=extra, machine=machine,
                packed=packed, accel=accel)
    g.wait_line(r"^echo listening", timeout=30)
    return g


def stop_echo(ns, g):
    """Stop the echo service over its control port; it must end cleanly."""
    netpeer(ns, ["stop", NS_GUEST_IP], timeout=20)
    g.wait()
    g.expect_ok()
    return g
