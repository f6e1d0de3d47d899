"""guests.py: the systems under test. Each guest kind turns a run into a
boot and gives back the console's RESULT/ERROR line; the report sees only
the rows, keyed by column, so a new kind is one more class here.

  vnetlab   this appliance: one PVH build per variant (variants.py), the
            benchmark chosen on the kernel command line (apps/rr.c,
            apps/stream.c; apps/echo.c answers pings), booted through
            host/qemu-run.sh, which picks KVM or TCG and applies the hard
            timeout.

A stock Linux guest running the same peers would implement the same three
methods (prepare, supports, start) and print the same RESULT line from a
wrapper around sockperf/iperf inside the guest.
"""

import json
import os
import re

import peers
import procs
import variants
from procs import BenchError, Proc

TOP = variants.TOP
QEMU_RUN = os.path.join(TOP, "host", "qemu-run.sh")


class Boot:
    """One running guest: its console, its accelerator, its QEMU PID."""

    def __init__(self, proc):
        self.proc = proc
        self._qemu = None

    def qemu_pid(self):
        if self._qemu and os.path.exists(f"/proc/{self._qemu}"):
            return self._qemu
        for p in procs.descendants(self.proc.pid):
            if procs.comm(p).startswith("qemu-system"):
                self._qemu = p
                return p
        return None

    def accel(self):
        for l in self.proc.text("err"):
            m = re.search(r"qemu-run: accel=(\w+)", l)
            if m:
                return m.group(1)
        return None

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

    def prepare(self):
        """Build each variant of the matrix once."""
        procs.require_tools(["make", "gcc", "qemu-system-x86_64"])
        for v in self.m.variants:
            self.kernels[v] = variants.build(v, self.m.variant_vars[v], self.log)

    def supports(self, test, backend):
        """None, or why this test cannot run on this backend."""
        if test == "ping" and backend.name == "user":
            return "slirp does not forward ICMP to the guest: ping needs tap, vhost or vhost-user"
        return None

    def keys(self, run, backend):
        """Kernel command line of a run, as an ordered dict."""
        p = run.params
        k = {"backend": run.backend.replace(":", "/").replace(",", "+")}
        k.update(backend.guest_keys())
        test = run.test
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
        elif test in ("tcp_stream", "tcp_maerts"):
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
        return k

    def start(self, run, backend, timeout):
        kernel = self.kernels[run.variant]
        cmdline = " ".join(f"{a}={b}" for a, b in self.keys(run, backend).items())
        net_opts, qemu_extra = backend.qemu_net()
        # Named QEMU threads ("CPU 0/TCG", "IO ...", "worker") make the
        # per-thread CPU placement readable.
        qemu_extra = ["-name", "vnetlab,debug-threads=on", *qemu_extra]
        argv = [QEMU_RUN, "--kernel", kernel, "--append", cmdline, "--accel", self.m.accel,
                "--machine", self.m.machine, "--timeout", str(timeout), *net_opts]
        if qemu_extra:
            argv += ["--", *qemu_extra]
        if self.m.pin.get("qemu"):
            argv = ["taskset", "-c", self.m.pin["qemu"]] + argv
        return Boot(Proc("qemu", backend.wrap(argv))), cmdline


KINDS = {"vnetlab": Vnetlab}


def make(name, matrix, log):
    if name not in KINDS:
        raise BenchError(f"unknown guest '{name}' (known: {', '.join(KINDS)})")
    return KINDS[name](matrix, log)
