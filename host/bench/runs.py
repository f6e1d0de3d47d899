"""runs.py: the engine's parts every test kind (kinds.py) builds its run
from: the row's first keys, the backend of a run, the guest's RESULT and
exit line, the interval the CPU figures cover, service demand, the error
and the log of a run -- giving one row (report.py lists the keys).
peerrun.py puts them together for a guest against a host peer.

Which interval the CPU figures cover:
  the appliance (client or server): the interval its figures cover, from
      the RESULT line's t_begin_us/t_end_us on the guest clock, placed on
      the host's clock by t_line_us and the host time the line arrived
      (guest_window): not [arrival - seconds, arrival], which would also
      count the close drain or the extra data iperf sends after the
      interval;
  a guest whose RESULT has no interval (the stock Linux guest, ping): the
      host peer's own test (sockperf's "Starting test" .. "Test end"), less
      the warm-up.

Service demand (netperf's S. Demand): CPU microseconds per transaction
(rr, ping) or per MB (10^6 bytes; stream) over that interval, for the whole
host (`host_us_per_txn`), QEMU, the backend process and the host peer each
(`qemu_us_per_txn`, ...) and those together (`procs_us_per_txn`); the
loopback column's stock server plays the guest and counts as `server`.

A run only counts when the guest really ended: the boot's process exited 0
and the console's last exit line says status 0 (`exit_line`).
"""

import json
import re
import time

import backends
import kvmstats
import procs
from matrix import TESTS, run_pins
from procs import BenchError

# RESULT keys that name the run rather than measure it: kept with a
# guest_ prefix, the row's own (harness) values win.
RESULT_META = ("test", "role", "variant", "backend", "accel", "req", "resp", "instances", "burst", "msg", "size", "seconds")


def roles(m):
    return {"rr": m.rr_role, "stream": m.stream_role}


def guest_serves(test, m):
    """Is the appliance the server (the host peer drives the run)?"""
    kind = TESTS[test]["kind"]
    return kind in ("ping", "memcached") or roles(m).get(kind) == "server"


def base_row(run, m):
    row = {
        "run": run.index,
        "rep": run.rep,
        "column": run.column,
        "guest": run.guest,
        "variant": run.variant,
        "variant_vars": m.variant_vars.get(run.variant, "") if run.guest == "vnetlab" else "",
        "test": run.test,
        "backend": run.backend,
        "machine": run.machine or m.machine,
        "queues": run.queues or getattr(m, "queues", 1),
        "placement": run.placement or (getattr(m, "placements", None) or ["pinned"])[0],
        "pins": {k: v for k, v in run_pins(run, m).items() if v},
        "role": roles(m).get(TESTS[run.test]["kind"], "server"),
        "status": "error",
        "error": None,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    row.update(run.params)
    if TESTS[run.test]["kind"] == "rr":
        row["loop"] = "open" if run.params.get("mps") else "closed"
    return row


def _pid_of(proc, comm_prefix):
    """PID of the first descendant of a started Proc whose name matches."""

    def f():
        if proc is None or not proc.alive():
            return None
        for p in procs.descendants(proc.pid):
            if procs.comm(p).startswith(comm_prefix):
                return p
        return None

    return f


def final_result(boot, row, timeout, after=""):
    """The guest's RESULT once its run is over (a packet run's end: the
    search, a generator), its exit status and exit line checked; the row
    gets the accelerator and CPU model it ran with."""
    kind, obj, _ = boot.wait_result(timeout)
    st = boot.proc.wait(15)
    row["accel"] = boot.accel()
    row["cpu_model"] = boot.cpu_model()
    if kind != "RESULT":
        raise BenchError(f"no RESULT from the guest{after} ({kind}):\n{boot.proc.tail()}")
    if st != 0 or exit_line(boot.proc.text("out")) != 0:
        raise BenchError(f"the guest ended with status {st}:\n{boot.proc.tail()}")
    return obj


def guest_window(obj, t_line):
    """Host-clock interval of the RESULT's measured interval, or None when
    the line does not carry one. t_line is when the line arrived."""
    try:
        b, e, l = (int(obj[k]) for k in ("t_begin_us", "t_end_us", "t_line_us"))
    except (KeyError, TypeError, ValueError):
        return None
    if t_line is None or not b < e <= l:
        return None
    return (t_line - (l - b) / 1e6, t_line - (l - e) / 1e6)


def hist_of(lines):
    """The guest's HIST line (apps/lib/result.h) as a dict, or None."""
    for l in lines:
        if l.startswith("HIST {"):
            try:
                return json.loads(l[5:])
            except ValueError:
                return None
    return None


# A RESULT over much less than the interval asked for is not a result: the
# peer or the backend went away mid-run (a UDP server cannot tell; it ends
# when requests stop). The guest's own interval excludes the warm-up.
TRUNCATED_FRACTION = 0.6


def truncated(obj, seconds, warmup):
    """BenchError when the guest's measured interval is a truncated one."""
    if not seconds or obj.get("seconds") is None or obj.get("test") == "ping":
        return
    want = max(float(seconds) - float(warmup or 0), 1.0)
    got = float(obj["seconds"])
    if got < TRUNCATED_FRACTION * want:
        raise BenchError(f"the guest measured {got:.2f} s of the ~{want:.0f} s asked: a truncated interval "
                         f"(peer or backend gone mid-run?), not a result")


EXIT_LINE = re.compile(r"^(?:vnetlab|vnetlab-linux|vnetlab-loopback) exit status=(\d+)$")


def exit_line(lines):
    """Status in the console's last `vnetlab exit status=N` line, or None."""
    said = None
    for l in lines:
        m = EXIT_LINE.match(l)
        if m:
            said = int(m.group(1))
    return said


# Per-queue keys kept in a row's per_queue list.
PER_QUEUE_KEYS = ("queue", "frames", "pps", "tps", "transactions", "mbps", "tx_frames", "tx_full", "frames_per_kick", "seconds")


def mq_results(lines):
    """(total RESULT dict, its host arrival time, [per-queue dicts]) from a
    console's (time, stream, line) items: app=pkt mq=N prints one RESULT
    per queue pair ("queue":k) and then the total ("queues":N)."""
    total, t_total, per = None, None, []
    for t, stream, l in lines:
        if stream != "out" or not l.startswith("RESULT {"):
            continue
        try:
            o = json.loads(l[7:])
        except ValueError:
            continue
        if "queue" in o:
            per.append({k: o[k] for k in PER_QUEUE_KEYS if k in o})
        elif "queues" in o:
            total, t_total = o, t
    if total is None:
        raise BenchError(f"mq: {len(per)} per-queue RESULT line(s) but no total (\"queues\":N) line")
    if len(per) != total["queues"]:
        raise BenchError(f"mq: the total says {total['queues']} queues, the console has {len(per)} per-queue RESULT lines")
    return total, t_total, per


def service_demand(row, kind):
    """CPU us per transaction (rr, ping) or per MB (stream) for each CPU
    figure of the row: what the host paid for one unit of work."""
    if kind == "stream":
        rate, unit = (row.get("mbps") or 0) / 8.0, "mb"  # MB/s (10^6 bytes)
    else:
        rate, unit = row.get("tps") or 0, "txn"
    if rate <= 0:
        return
    total = 0.0
    have = False
    for who in ("host", "qemu", "backend", "peer", "server"):
        pct = row.get(f"{who}_cpu_pct")
        if pct is None:
            continue
        row[f"{who}_us_per_{unit}"] = round(pct / 100.0 * 1e6 / rate, 3)
        if who != "host":
            total += pct
            have = True
    if have:
        row[f"procs_us_per_{unit}"] = round(total / 100.0 * 1e6 / rate, 3)


def record_error(row, e):
    """A run that failed: the error's first line for the table, all of it
    for the record."""
    row["error"] = str(e).splitlines()[0][:300]
    row["error_detail"] = str(e)


def write_log(path, boot, peer, backend_proc):
    with open(path, "w") as f:
        for title, p in (("guest", boot and boot.proc), ("peer", peer and peer.proc),
                         ("backend", backend_proc)):
            if not p:
                continue
            f.write(f"==== {title}: {' '.join(p.argv)}\n")
            for t, s, l in p.lines:
                f.write(f"{t - p.t0:9.3f} {s} {l}\n")


def backend_for(run, m, guest, row):
    """The run's backend, or None with row marked skipped when the guest
    cannot run this test on it (ndr.py uses it too)."""
    name, opts = m.backend_opts(run.backend)
    backend = backends.make(name, run.backend, opts, run_pins(run, m).get("backend", ""), run.queues or getattr(m, "queues", 1))
    reason = guest.supports(run.test, backend)
    if reason:
        row.update(status="skipped", error=reason, wall_s=0.0)
        return None
    return backend


def pin_vcpus(run, m, boot, row):
    """pin.vcpu: move the boot's vCPU threads onto their CPUs as soon as
    QEMU answers on QMP (before the guest's warm-up ends); the row gets
    `vcpu_pin` (the list) and `vcpu_tids`. A guest without QMP cannot."""
    spec = run_pins(run, m).get("vcpu")
    if not spec:
        return
    if not getattr(boot, "qmp", None):
        raise BenchError(f"pin.vcpu={spec}: this guest has no QMP socket to name its vCPU threads; use pin.qemu")
    try:
        tids = kvmstats.pin_vcpus(boot.qmp, backends.cpu_list(spec))
    except (kvmstats.QmpError, OSError, ValueError) as e:
        raise BenchError(f"pin.vcpu={spec}: {e}")
    row.update(vcpu_pin=spec, vcpu_tids=sorted(tids.values()))
