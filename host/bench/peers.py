"""peers.py: the stock host tools on the other end of each test, and what
their output says.

  rr, appliance client  `sockperf server -f FEED -F epoll` (TCP or UDP)
  rr, appliance server  `sockperf ping-pong --full-rtt` drives the appliance;
                        its round-trip percentiles become peer_lat_*_ns
  stream, appliance client   `iperf -s` receives (tcp_stream) or sends
                        (tcp_maerts: the appliance asks, like iperf -R,
                        and the server writes -l MSG bytes at a time)
  stream, appliance server   `iperf -c` sends to it (tcp_maerts) or, with
                        -R, receives from it (tcp_stream); `iperf -u -c -b
                        RATE` sends datagrams (udp_stream), whose server
                        report gives peer_udp_lost and peer_udp_datagrams
  ping                  `ping -A` (adaptive: one echo in flight, like an RR);
                        every reply's time gives the percentiles
  memcached             `memcaslap` drives the server (its output: mcload.py)
  pkt_txonly            `tests/tools/pktpeer.py recv` counts the appliance's
                        frames on the tap (ndr runs its peer itself: ndr.py)

A peer is started through the backend's wrap() (inside the namespace) and,
optionally, under `taskset -c LIST`. Every peer has a hard timeout.
"""

import json
import math
import os
import re
import tempfile

from mcload import MEMCACHED_PORT, parse_memcaslap
from procs import Proc

SOCKPERF_PORT = 11111
IPERF_PORT = 5001

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def clean(line):
    return _ANSI.sub("", line)


def percentile(sorted_vals, p):
    """Nearest-rank percentile of an ascending list (p in 0..100)."""
    if not sorted_vals:
        return None
    k = max(1, math.ceil(p / 100.0 * len(sorted_vals)))
    return sorted_vals[min(k, len(sorted_vals)) - 1]


class Peer:
    """One host-side tool for one run."""

    name = "peer"
    server = False  # True: started before the guest, listens
    tools = ()

    def __init__(self, backend, test, params, pin="", warmup=0):
        self.backend = backend
        self.test = test
        self.params = params
        self.pin = pin
        self.warmup = warmup  # seconds the appliance does not measure
        self.proc = None

    def argv(self):
        raise NotImplementedError

    def start(self):
        argv = self.argv()
        if self.pin:
            argv = ["taskset", "-c", self.pin] + argv
        self.proc = Proc(self.name, self.backend.wrap(argv))
        return self.proc

    def ready(self, timeout=10):
        """Wait until a server peer listens; True if it does."""
        return True

    def parse(self):
        """Figures from the peer's output (peer_* keys), {} if none."""
        return {}

    def window(self, t0, t1):
        """The measured part of a driving peer's run [t0, t1] (host
        monotonic times): by default less the appliance's warm-up."""
        return (t0 + self.warmup, t1)

    def stop(self):
        if self.proc:
            self.proc.stop()


class SockperfServer(Peer):
    """`sockperf server` given its address in a feed file with -F epoll:
    started with -i/-p, sockperf 3.7 blocks in recvfrom() on one socket and
    so serves one TCP connection at a time -- 25 instances would run as
    one. epoll multiplexes them all."""

    name = "sockperf"
    server = True
    tools = ("sockperf",)
    feed = None

    def argv(self):
        proto = "T" if self.test == "tcp_rr" else "U"
        fd, self.feed = tempfile.mkstemp(prefix="vnetbench-feed-", suffix=".txt")
        with os.fdopen(fd, "w") as f:
            f.write(f"{proto}:{self.backend.peer_bind}:{self.backend.host_port(SOCKPERF_PORT)}\n")
        return ["sockperf", "server", "-f", self.feed, "-F", "epoll"]

    def stop(self):
        super().stop()
        if self.feed:
            try:
                os.unlink(self.feed)
            except OSError:
                pass
            self.feed = None

    def ready(self, timeout=10):
        # Printed once the socket is bound and the server blocks on it.
        return bool(self.proc.wait_line(lambda l: "to block on socket" in l or "using " in l, timeout))


class SockperfPingPong(Peer):
    name = "sockperf"
    tools = ("sockperf",)

    def argv(self):
        addr, port = self.backend.guest_port(SOCKPERF_PORT, "tcp" if self.test == "tcp_rr" else "udp")
        a = ["sockperf", "ping-pong", "-i", addr, "-p", str(port), "-m", str(self.params["req"]),
             "-t", str(self.params["seconds"]), "--full-rtt"]
        return a + (["--tcp"] if self.test == "tcp_rr" else [])

    def parse(self):
        return parse_sockperf(self.proc.text())

    def window(self, t0, t1):
        # sockperf announces its own measured test: use its line times.
        a = self.proc.wait_line(lambda l: "Starting test" in l, 0)
        b = self.proc.wait_line(lambda l: "Test end" in l, 0)
        return (a[0], b[0]) if a and b and b[0] > a[0] else (t0, t1)


class SockperfUnderLoad(SockperfPingPong):
    """Open loop: sockperf sends at a fixed rate (--mps) whether or not the
    replies came back, and with --reply-every 1 every message is answered
    and timed. The guest's figures are then its cycle time (~1/rate); the
    latency is this peer's."""

    def argv(self):
        addr, port = self.backend.guest_port(SOCKPERF_PORT, "tcp" if self.test == "tcp_rr" else "udp")
        a = ["sockperf", "under-load", "-i", addr, "-p", str(port), "-m", str(self.params["req"]),
             "-t", str(self.params["seconds"]), "--mps", str(self.params["mps"]), "--reply-every", "1", "--full-rtt"]
        return a + (["--tcp"] if self.test == "tcp_rr" else [])


def parse_sockperf(lines):
    out = {}
    keys = {"50.000": "peer_lat_p50_ns", "90.000": "peer_lat_p90_ns", "99.000": "peer_lat_p99_ns", "99.900": "peer_lat_p999_ns"}
    for raw in lines:
        l = clean(raw)
        m = re.search(r"percentile (\d+\.\d+) =\s*([\d.]+)", l)
        if m and m.group(1) in keys:
            out[keys[m.group(1)]] = round(float(m.group(2)) * 1000)
        m = re.search(r"<MAX> observation =\s*([\d.]+)", l)
        if m:
            out["peer_lat_max_ns"] = round(float(m.group(1)) * 1000)
        m = re.search(r"avg-rtt=([\d.]+)", l)
        if m:
            out["peer_lat_mean_ns"] = round(float(m.group(1)) * 1000)
        m = re.search(r"\[Valid Duration\] RunTime=([\d.]+) sec; SentMessages=(\d+); ReceivedMessages=(\d+)", l)
        if m:
            out["peer_transactions"] = int(m.group(3))
            out["peer_sent"], out["peer_runtime_s"] = int(m.group(2)), float(m.group(1))
            out["peer_tps"] = round(int(m.group(3)) / float(m.group(1)), 1) if float(m.group(1)) else None
    return out


def parse_iperf(lines):
    """Total Mbit/s of an iperf 2 report run with -f m: the [SUM] line if
    there is one, else the sum of the per-connection lines."""
    total, per = None, {}
    for l in lines:
        # "[  1] 0.0000-10.0 sec ...", "[ *1] ..." (reverse), "[SUM] ..."
        m = re.search(r"^\[\s*\*?(\w+)\]\s+[\d.]+-\s*([\d.]+) sec\s+[\d.]+ \w+\s+([\d.]+) Mbits/sec", l)
        if not m:
            continue
        if m.group(1) == "SUM":
            total = float(m.group(3))
        else:
            per[m.group(1)] = float(m.group(3))
    if total is None and per:
        total = sum(per.values())
    out = {"peer_mbps": total} if total is not None else {}
    # iperf -u: the server report's "Lost/Total" per flow (the last line of each)
    udp = {}
    for l in lines:
        m = re.search(r"^\[\s*(\w+)\].* ms\s+(\d+)/(\d+) \(", l)
        if m:
            udp[m.group(1)] = (int(m.group(2)), int(m.group(3)))
    if udp:
        out["peer_udp_lost"] = sum(v[0] for v in udp.values())
        out["peer_udp_datagrams"] = sum(v[1] for v in udp.values())
    return out


def cc_args(params):
    """iperf -Z for the host's sending socket (matrix key stream.cc)."""
    return ["-Z", params["cc"]] if params.get("cc") else []


class Iperf(Peer):
    """iperf 2 either side: what both read back."""
    name = "iperf"
    tools = ("iperf",)

    def parse(self):
        return parse_iperf(self.proc.text())


class IperfServer(Iperf):
    server = True

    def argv(self):
        a = ["iperf", "-s", "-B", self.backend.peer_bind, "-p", str(self.backend.host_port(IPERF_PORT)), "-f", "m"]
        if self.test == "tcp_maerts":
            # the host sends: its congestion control is the matrix's stream.cc
            a += ["-l", str(self.params["msg"])] + cc_args(self.params)
        return a

    def ready(self, timeout=10):
        return bool(self.proc.wait_line(lambda l: "Server listening" in l, timeout))


class IperfClient(Iperf):

    def argv(self):
        addr, port = self.backend.guest_port(IPERF_PORT, "tcp")
        # The appliance skips its warm-up: run that much longer.
        a = ["iperf", "-c", addr, "-p", str(port), "-f", "m", "-l", str(self.params["msg"]),
             "-t", str(self.params["seconds"] + self.warmup), "-P", str(self.params["instances"])]
        if self.test == "tcp_stream":
            return a + ["-R"]  # the guest sends with its own congestion control
        if self.test == "udp_stream":
            return a + ["-u", "-b", self.params["udp_rate"]]
        return a + cc_args(self.params)


class Ping(Peer):
    name = "ping"
    tools = ("ping",)

    def argv(self):
        return ["ping", "-A", "-n", "-s", str(self.params["size"]), "-w", str(self.params["seconds"]),
                self.backend.guest_ip]

    def parse(self):
        return parse_ping(self.proc.text(), self.params["seconds"])

    def window(self, t0, t1):
        return (t0, t1)


def parse_ping(lines, seconds):
    rtts = []
    out = {}
    for l in lines:
        m = re.search(r"time=([\d.]+) ms", l)
        if m:
            rtts.append(float(m.group(1)) * 1e6)
        m = re.search(r"(\d+) packets transmitted, (\d+) received", l)
        if m:
            out["ping_sent"], out["ping_received"] = int(m.group(1)), int(m.group(2))
        m = re.search(r"= ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) ms", l)
        if m:
            out["ping_min_ns"], out["ping_avg_ns"], out["ping_max_ns"], out["ping_mdev_ns"] = (
                round(float(x) * 1e6) for x in m.groups()
            )
    if rtts:
        s = sorted(rtts)
        out.update(
            transactions=len(s),
            tps=round(len(s) / seconds, 1),
            lat_mean_ns=round(sum(s) / len(s)),
            lat_p50_ns=round(percentile(s, 50)),
            lat_p90_ns=round(percentile(s, 90)),
            lat_p99_ns=round(percentile(s, 99)),
            lat_p999_ns=round(percentile(s, 99.9)),
            lat_max_ns=round(s[-1]),
        )
    return out


PKTPEER = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tests",
                       "tools", "pktpeer.py")


class PktSink(Peer):
    """pkt_txonly: `tests/tools/pktpeer.py recv` on the namespace's tap
    counts the appliance's frames (and what its own socket dropped) until
    2 s without one."""

    name = "python3"
    server = True
    tools = ()

    def argv(self):
        return ["python3", PKTPEER, "recv", "vnbtap0", "2", str(self.params["seconds"] + 60)]

    def ready(self, timeout=10):
        return bool(self.proc.wait_line(lambda l: l.strip() == "listening", timeout))

    def parse(self):
        self.proc.wait(30)  # it ends 2 s after the guest's last frame
        for l in reversed(self.proc.text()):
            if l.startswith("{"):
                try:
                    d = json.loads(l)
                except ValueError:
                    break
                return {"peer_frames": d.get("frames"), "peer_sock_drops": d.get("sock_drops"),
                        "peer_seq_gaps": d.get("seq_gaps"), "peer_seq_reorder": d.get("seq_reorder")}
        return {}


class Memcaslap(Peer):
    name = "memcaslap"
    tools = ("memcaslap",)

    def argv(self):
        addr, port = self.backend.guest_port(MEMCACHED_PORT, "tcp")
        secs = self.params["seconds"] + self.warmup  # the appliance skips its warm-up
        return ["memcaslap", "-s", f"{addr}:{port}", "-c", str(self.params["instances"]),
                "-T", str(self.params["threads"]), "-t", f"{secs}s", "-S", f"{secs}s"]

    def parse(self):
        return parse_memcaslap(self.proc.text())

    def window(self, t0, t1):
        return (t0 + self.warmup, t1)


def for_test(test, roles, backend, params, pin="", warmup=0):
    """The peer of a test (matrix.TESTS names); roles = {"rr": client|server,
    "stream": client|server}, the appliance's role."""
    if test in ("tcp_rr", "udp_rr"):
        cls = SockperfServer if roles["rr"] == "client" else SockperfPingPong
        if cls is SockperfPingPong and params.get("mps"):
            cls = SockperfUnderLoad
    elif test in ("tcp_stream", "tcp_maerts", "udp_stream"):
        cls = IperfServer if roles["stream"] == "client" else IperfClient
    elif test == "memcached":
        cls = Memcaslap
    elif test == "pkt_txonly":
        cls = PktSink
    else:
        cls = Ping
    return cls(backend, test, params, pin, warmup)


def tools_for(tests, roles):
    t = set()
    for test in tests:
        t.update(for_test(test, roles, None, {}).tools)
    return t
