"""runs.py: one run of the matrix -- backend up, peer and guest started in
the right order, the RESULT line collected, host CPU accounted over the
measured interval, everything torn down -- giving one row (report.py
lists the keys).

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

import os
import time

import backends
import cpu
import kvmstats
import peers
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


def execute(run, m, guest, logdir):
    """Run one configuration; always returns a row, never leaves anything
    running. The run kinds: one guest against host peers (below), a guest
    pair (run.guest "pair": pairs.execute_run(), guest its Sides), the
    NDR/PDR search (test ndr: ndr.execute_run(), trials inside one boot), or
    a point of the load sweep (params "load": loadlat.execute_run(), which
    comes back here with the closed or open loop it stands for)."""
    if run.guest == "pair":
        import pairs  # pairs imports this module

        return pairs.execute_run(run, m, guest, logdir)
    if run.params.get("load") is not None:
        import loadlat  # loadlat imports this module

        return loadlat.execute_run(run, m, guest, logdir, execute)
    row = base_row(run, m)
    if run.test in ("pkt_rxonly", "pkt_macswap", "pkt_rr") or run.guest == "reference" or (
            run.test == "pkt_txonly" and run.params.get("generator") == "testpmd"):
        import hostgen  # hostgen imports this module

        return hostgen.execute_run(run, m, guest, logdir, row)
    if TESTS[run.test]["kind"] == "ndr":
        import ndr  # ndr imports this module

        return ndr.execute_run(run, m, guest, logdir, row)
    backend = backend_for(run, m, guest, row)
    if backend is None:
        return row
    peer = peers.for_test(run.test, roles(m), backend, run.params, run_pins(run, m).get("peer", ""), m.warmup)
    serves = guest_serves(run.test, m)
    sampler = cpu.Sampler()
    boot = None
    t_begin = time.monotonic()
    log = os.path.join(logdir, f"run-{run.index:04d}.log")
    row["log"] = os.path.relpath(log, os.path.dirname(logdir))
    try:
        backend.setup(logdir)
        if backend.proc:
            sampler.watch("backend", _pid_of(backend.proc, "dpdk-testpmd"))
        sampler.start()
        if peer.server:
            peer.start()
            if not peer.ready(10):
                raise BenchError(f"host peer {peer.name} did not start listening within 10s:\n{peer.proc.tail()}")
        boot, cmdline = guest.start(run, backend, m.run_timeout)
        row["cmdline"] = cmdline
        pin_vcpus(run, m, boot, row)
        exits = None
        if getattr(boot, "qmp", None):
            exits = kvmstats.Sampler(boot.qmp)
            exits.start()
        sampler.watch("qemu", boot.qemu_pid)
        if hasattr(boot, "server_pid"):
            sampler.watch("server", boot.server_pid)
        if peer.server:
            sampler.watch("peer", _pid_of(peer.proc, peer.name))
        window = None
        if serves:
            if not boot.wait_ready(60):
                err = boot.error()
                why = err["msg"] if err else ("no listening line within 60s" if boot.proc.alive() else "it ended without a listening line")
                raise BenchError(f"guest never listened: {why}; console tail:\n{boot.proc.tail()}")
            t_p0 = time.monotonic()
            peer.start()
            sampler.watch("peer", _pid_of(peer.proc, peer.name))
            limit = run.params["seconds"] + m.warmup + 60
            st = peer.proc.wait(limit)
            t_p1 = time.monotonic()
            if st is None:
                raise BenchError(f"host peer {peer.name} did not end within {limit}s")
            if st != 0 and run.test != "ping":
                raise BenchError(f"host peer {peer.name} failed (status {st}):\n{peer.proc.tail()}")
            window = peer.window(t_p0, t_p1)
            # A serving app ends by itself when its client goes away; the
            # echo app (ping) and a server that missed it get "stop".
            kind, obj, t_res = boot.wait_result(1 if run.test == "ping" else 5)
            if kind in ("timeout",):
                backend.stop_guest(boot.ctl_token)
                kind, obj, t_res = boot.wait_result(15)
        else:
            kind, obj, t_res = boot.wait_result(m.run_timeout + 15)
        if exits:
            exits.stop()
        st = boot.proc.wait(15)  # the COUNTERS lines and the exit status follow
        row["accel"] = boot.accel()
        row["cpu_model"] = boot.cpu_model()
        if kind == "ERROR":
            raise BenchError(f"guest ERROR in {obj.get('where')}: {obj.get('msg')}")
        if kind != "RESULT":
            raise BenchError(f"no RESULT line from the guest ({kind}); console tail:\n{boot.proc.tail()}")
        said = exit_line(boot.proc.text("out"))
        row["guest_exit"] = st
        if st is None:
            raise BenchError("the guest did not end within 15 s of its RESULT line")
        if st != 0 or said != 0:
            raise BenchError(f"the guest ended with status {st} and the console exit line says "
                             f"{'status ' + str(said) if said is not None else 'nothing'} (both must be 0); "
                             f"console tail:\n{boot.proc.tail()}")

        if "queue" in obj:
            # mq=N (app=pkt): one RESULT per queue pair came first, the
            # total ("queues":N) last; the total is the row, the pairs'
            # own figures go into per_queue.
            obj, t_res, per_queue = mq_results(boot.proc.lines)
            row["per_queue"] = per_queue
        truncated(obj, run.params.get("seconds"), m.warmup)
        row.update(kvmstats.availability(exits))
        if exits and exits.samples and guest_window(obj, t_res):
            row.update(kvmstats.row_columns(kvmstats.interval(exits.samples, *guest_window(obj, t_res)), obj))
            if not any(k.startswith("kvm_") for k in row):
                row["kvm_stats_error"] = "QMP's first sample came after the guest's interval began (a slow start)"
        elif exits and exits.error and row.get("accel") == "kvm":
            row["kvm_stats_error"] = exits.error[:200]  # why a KVM row has no kvm_* columns
        for k, v in obj.items():
            row[("guest_" + k) if k in RESULT_META else k] = v
        h = hist_of(boot.proc.text("out"))
        if h:
            # lat_hist: round trips, merged over repetitions in the report;
            # cycle_hist: an RR server's cycle times, kept but not merged.
            row[f"{h.get('metric', 'lat')}_hist"] = h.get("buckets")
        row.update(peer.parse())
        # A guest that runs stock servers takes its figures from the peer.
        guest.complete(row)
        if TESTS[run.test]["kind"] == "memcached":
            # One client (memcaslap) measures every column: its TPS and
            # round trips are the row's; the appliance's own count stays.
            for k in ("tps", "transactions", "lat_mean_ns", "lat_p50_ns", "lat_p90_ns", "lat_p99_ns", "lat_p999_ns",
                      "lat_max_ns"):
                if row.get(k) is not None and row.get(f"peer_{k}") is not None:
                    row[f"guest_{k}"] = row[k]
                if row.get(f"peer_{k}") is not None:
                    row[k] = row[f"peer_{k}"]
            row["figures_from"] = "peer"
        if run.test == "ping":
            # The host measured; the driver counters cover the whole boot.
            c = boot.counters()
            if "tx" in c and "rx" in c and row.get("transactions"):
                kicks = c["tx"]["kicks"] + c["rx"]["kicks"]
                row.update(kicks=kicks, tx_frames=c["tx"]["frames"], rx_frames=c["rx"]["frames"],
                           reclaim_calls=c["tx"]["reclaim_calls"],
                           kicks_per_txn=round(kicks / row["transactions"], 3),
                           reclaims_per_txn=round(c["tx"]["reclaim_calls"] / row["transactions"], 3),
                           counters_scope="boot")
            if not row.get("transactions"):
                raise BenchError(f"ping got no reply from the guest:\n{peer.proc.tail()}")
        gw = guest_window(obj, t_res)
        if gw:
            window = gw
            row["cpu_window"] = "guest"
        elif window is None:
            # Neither the guest's interval nor a peer's: the old estimate.
            secs = float(obj.get("seconds") or run.params["seconds"])
            window = (t_res - secs, t_res)
            row["cpu_window"] = "line-seconds"
        else:
            row["cpu_window"] = "peer"
        if serves and TESTS[run.test]["kind"] == "rr":
            # The appliance as RR server reports cycle_* (time between a
            # connection's answered requests); the round trip is the peer's.
            for k in ("mean", "p50", "p90", "p99", "p999", "max"):
                if row.get(f"peer_lat_{k}_ns") is not None and row.get(f"lat_{k}_ns") is None:
                    row[f"lat_{k}_ns"] = row[f"peer_lat_{k}_ns"]
                    row["lat_from"] = "peer"
        sampler.stop()
        fig = sampler.interval(*window)
        if fig:
            row.update(cpu.row_columns(fig))
            h = row.get("host_cpu_pct")
            if h:
                if row.get("tps") is not None and TESTS[run.test]["kind"] != "stream":
                    row["tps_per_cpu"] = round(row["tps"] / (h / 100.0), 1)
                if row.get("pps") is not None and TESTS[run.test]["kind"] == "pkt":
                    row["pps_per_cpu"] = round(row["pps"] / (h / 100.0), 1)
                if row.get("mbps") is not None and TESTS[run.test]["kind"] == "stream":
                    row["mbps_per_cpu"] = round(row["mbps"] / (h / 100.0), 2)
            service_demand(row, TESTS[run.test]["kind"])
        if TESTS[run.test]["kind"] == "rr" and row.get("tps") and row.get("lat_mean_ns"):
            # Little's law for a closed loop: transactions/s x mean latency
            # is the mean number in flight, which should be about
            # instances x burst when the client keeps them all busy.
            row["outstanding_mean"] = round(row["tps"] * row["lat_mean_ns"] / 1e9, 2)
        row["status"] = "ok"
    except BenchError as e:
        record_error(row, e)
    finally:
        sampler.stop()
        peer.stop()
        if boot:
            boot.stop()
        bproc = backend.proc
        backend.teardown()
        row["wall_s"] = round(time.monotonic() - t_begin, 2)
        try:
            write_log(log, boot, peer, bproc)
        except OSError:
            pass
    return row
