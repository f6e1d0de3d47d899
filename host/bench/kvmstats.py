"""KVM's exit counters over a guest's measured interval, from QEMU's QMP
`query-stats` (QEMU 7.1+; KVM's binary stats, vcpu and vm targets).

The 2008 and 2011 threads argue in exits per packet; hardware KVM and this
machine kind's kvm_pvm keep the same counters. Under TCG query-stats
returns nothing, and so does this module (no columns, not zeros).

A Sampler polls query-stats every `period` seconds in a thread, with the
host's monotonic time of each sample. interval() takes the guest's own
interval on the host's clock (runs.guest_window(): RESULT's t_begin_us and
t_end_us placed by the line's arrival) and interpolates each counter
linearly at both ends.
"""

import json
import os
import socket
import threading
import time

# The counters reported per transaction / per MB (KVM's names; a counter a
# kernel does not have is left out).
COUNTERS = ("exits", "io_exits", "mmio_exits", "halt_exits", "halt_wakeup", "insn_emulation",
            "insn_emulation_fail", "irq_injections", "irq_exits", "signal_exits")


class QmpError(Exception):
    pass


class Qmp:
    """A minimal QMP client on a unix socket."""

    def __init__(self, path, timeout=10):
        end = time.monotonic() + timeout
        while True:
            try:
                self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self.sock.settimeout(5)
                self.sock.connect(path)
                break
            except OSError as e:
                self.sock.close()
                if time.monotonic() > end:
                    raise QmpError(f"QMP socket {path}: {e}")
                time.sleep(0.05)
        self.f = self.sock.makefile("rw")
        if "QMP" not in json.loads(self.f.readline() or "{}"):
            raise QmpError(f"QMP socket {path}: no greeting")
        self.command("qmp_capabilities")

    def command(self, name, **arguments):
        msg = {"execute": name}
        if arguments:
            msg["arguments"] = arguments
        self.f.write(json.dumps(msg) + "\n")
        self.f.flush()
        while True:
            line = self.f.readline()
            if not line:
                raise QmpError(f"QMP: connection closed during {name}")
            r = json.loads(line)
            if "event" in r:
                continue
            if "error" in r:
                raise QmpError(f"QMP {name}: {r['error'].get('desc', r['error'])}")
            return r.get("return")

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def virtio_queues(path, timeout=2):
    """QEMU's view of the first virtio-net device's RX and TX queues (QEMU
    7.2's QMP x-query-virtio-queue-status and -element): last_avail (what
    it has taken), shadow_avail and avail_idx (the driver's avail->idx as
    it last read it and as it reads it now), used_idx, inuse; a split
    ring's indices are free-running, a packed ring's wrap at its size.
    {"error": ...} when QEMU cannot be asked (gone, or no QMP)."""
    try:
        q = Qmp(path, timeout=timeout)
    except (QmpError, OSError, ValueError) as e:
        return {"error": str(e)[:200]}
    try:
        dev = next(d["path"] for d in q.command("x-query-virtio") if d["name"] == "virtio-net")
        view = {}
        for i, name in enumerate(("rx", "tx")):
            st = q.command("x-query-virtio-queue-status", path=dev, queue=i)
            v = {"last_avail": st["last-avail-idx"], "shadow_avail": st["shadow-avail-idx"],
                 "used_idx": st["used-idx"], "inuse": st["inuse"], "size": st["vring-num"]}
            try:
                el = q.command("x-query-virtio-queue-element", path=dev, queue=i)
                v["avail_idx"] = el["avail"]["idx"]
            except (QmpError, KeyError):
                v["avail_idx"] = None  # nothing on the ring to show (or a layout it cannot)
            view[name] = v
        return view
    except (QmpError, OSError, ValueError, StopIteration, KeyError) as e:
        return {"error": str(e)[:200]}
    finally:
        q.close()


def vcpu_threads(path, timeout=10):
    """{vCPU index: host thread id} of the QEMU behind the QMP socket
    (query-cpus-fast); raises QmpError when QEMU does not answer."""
    q = Qmp(path, timeout=timeout)
    try:
        return {c["cpu-index"]: c["thread-id"] for c in q.command("query-cpus-fast") or []}
    finally:
        q.close()


def pin_vcpus(path, cpus, setaffinity=os.sched_setaffinity):
    """Pin every vCPU thread of the QEMU behind `path` to the CPU set
    `cpus`; returns {vCPU index: thread id}. A QEMU that never answers
    or names no vCPU is an error (the run must not pass for pinned)."""
    threads = vcpu_threads(path)
    if not threads:
        raise QmpError(f"QMP socket {path}: query-cpus-fast named no vCPU thread")
    for tid in threads.values():
        setaffinity(tid, set(cpus))
    return threads


def stats_sum(reply):
    """query-stats' reply -> {counter: value}, summed over vCPUs (and the
    vm target, whose names carry a vm_ prefix here). Histograms skipped."""
    out = {}
    for entry in reply or []:
        prefix = "vm_" if entry.get("target") == "vm" else ""
        for s in entry.get("stats", []):
            v = s.get("value")
            if isinstance(v, bool) or not isinstance(v, int):
                continue
            k = prefix + s["name"]
            out[k] = out.get(k, 0) + v
    return out


def sample(qmp):
    reply = list(qmp.command("query-stats", target="vcpu") or [])
    reply += list(qmp.command("query-stats", target="vm") or [])
    return stats_sum(reply)


class Sampler(threading.Thread):
    """Samples a QEMU's query-stats until stop(); samples = [(t, {..})]."""

    def __init__(self, path, period=0.1):
        super().__init__(daemon=True)
        self.path, self.period = path, period
        self.samples, self.error = [], None
        self.empty = False  # query-stats answered with nothing (TCG)
        self._stop_ev = threading.Event()

    def run(self):
        try:
            q = Qmp(self.path)
        except (QmpError, OSError, ValueError) as e:
            self.error = str(e)
            return
        try:
            while not self._stop_ev.is_set():
                t = time.monotonic()
                s = sample(q)
                if not s:  # TCG: no stats provider; nothing to sample
                    self.empty = True
                    return
                self.samples.append(((t + time.monotonic()) / 2, s))
                self._stop_ev.wait(self.period)
        except (QmpError, OSError, ValueError) as e:
            # QEMU exiting at the end of the run closes the socket.
            self.error = str(e)
        finally:
            q.close()

    def stop(self):
        self._stop_ev.set()
        self.join(5)

    def settle(self, t, timeout=2.0):
        """Wait (bounded) for a sample taken after host time t, so that an
        interval ending at t can be interpolated, then stop."""
        end = time.monotonic() + timeout
        while self.is_alive() and time.monotonic() < end and not (self.samples and self.samples[-1][0] > t):
            time.sleep(self.period / 4)
        self.stop()


def at(samples, t, name):
    """Counter `name` at host time t, interpolated between samples."""
    pts = [(ts, s[name]) for ts, s in samples if name in s]
    if len(pts) < 2 or t < pts[0][0] or t > pts[-1][0]:
        return None
    for (t0, v0), (t1, v1) in zip(pts, pts[1:]):
        if t0 <= t <= t1:
            return v0 if t1 == t0 else v0 + (v1 - v0) * (t - t0) / (t1 - t0)
    return None


def interval(samples, t_begin, t_end):
    """{counter: increase between host times t_begin and t_end}, for the
    counters sampled on both sides of the interval."""
    if not samples:
        return {}
    out = {}
    for name in samples[-1][1]:
        a, b = at(samples, t_begin, name), at(samples, t_end, name)
        if a is not None and b is not None:
            out[name] = b - a
    return out


def unit(test):
    """What a test's counters are divided by: txn (an RR transaction, a
    pkt_rr round trip included, or a memcached command), frame (the other
    packet tests and the NDR search: a frame sent, received or forwarded)
    or mb (10^6 payload bytes)."""
    if test.endswith("_rr") or test == "memcached":
        return "txn"
    return "frame" if test.startswith("pkt_") or test == "ndr" else "mb"


def availability(sampler, why_none="no QMP socket on this QEMU"):
    """The row's kvm_counters column: "query-stats" when the sampler read
    KVM's counters, else "n/a" and kvm_counters_why (TCG answers
    query-stats with nothing): never zeros that were not counted."""
    if sampler is not None and sampler.samples:
        return {"kvm_counters": "query-stats"}
    if sampler is None:
        why = why_none
    elif sampler.error and not sampler.empty:
        why = f"QMP: {sampler.error}"[:200]
    else:
        why = "query-stats is empty (TCG keeps no exit counters)"
    return {"kvm_counters": "n/a", "kvm_counters_why": why}


def start(boot):
    """A started Sampler on a boot's QMP socket, or None when it has none."""
    if not getattr(boot, "qmp", None):
        return None
    s = Sampler(boot.qmp)
    s.start()
    return s


def trial_columns(samples, trials):
    """The NDR search's trials (ndr.peer_trial dicts carrying the host's
    t_host = (start, end) of each): kvm_exits and kvm_exits_per_frame per
    trial, over the trial's whole window (the peer's start-up included),
    per frame the guest forwarded (else the frames that came back). The
    host times are dropped from the dicts either way."""
    for t in trials:
        window = t.pop("t_host", None)
        if not samples or not window:
            continue
        d = interval(samples, *window)
        frames = t.get("guest_forwarded") or t.get("received") or 0
        if "exits" in d:
            t["kvm_exits"] = round(d["exits"])
            if frames:
                t["kvm_exits_per_frame"] = round(d["exits"] / frames, 5)


def row_columns(delta, result):
    """Row columns: kvm_<counter>_per_txn for RR, kvm_<counter>_per_frame
    for packet tests, kvm_<counter>_per_mb for STREAM (per 10^6 payload
    bytes), for the counters in COUNTERS."""
    cols = {}
    txn = result.get("transactions") or 0
    frames = result.get("frames") or 0
    mb = (result.get("bytes") or 0) / 1e6
    u = unit(result.get("test", ""))
    for name in COUNTERS:
        if name not in delta:
            continue
        cols[f"kvm_{name}"] = round(delta[name])
        if u == "txn" and txn:
            cols[f"kvm_{name}_per_txn"] = round(delta[name] / txn, 4)
        elif u == "frame" and frames:
            cols[f"kvm_{name}_per_frame"] = round(delta[name] / frames, 5)
        elif u == "mb" and mb:
            cols[f"kvm_{name}_per_mb"] = round(delta[name] / mb, 3)
    return cols


def socket_path(directory):
    return os.path.join(directory, "qmp.sock")
