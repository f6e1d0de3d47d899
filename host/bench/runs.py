"""runs.py: one run of the matrix -- backend up, peer and guest started in
the right order, the RESULT line collected, host CPU accounted over the
measured interval, everything torn down -- giving one row (report.py
lists the keys).

Who measures, and so which interval the CPU figures cover:
  the appliance is the client (rr, stream by default): the guest's own
      measured interval, i.e. the `seconds` of its RESULT line, ending when
      that line arrived;
  the host peer drives (rr/stream server role, ping): the peer's run, less
      the warm-up the guest does not count.
"""

import os
import time

import backends
import cpu
import peers
import procs
from matrix import TESTS
from procs import BenchError

# RESULT keys that name the run rather than measure it: kept with a
# guest_ prefix, the row's own (harness) values win.
RESULT_META = ("test", "role", "variant", "backend", "accel", "req", "resp", "instances", "burst", "msg", "size", "seconds")


def roles(m):
    return {"rr": m.rr_role, "stream": m.stream_role}


def guest_serves(test, m):
    """Is the appliance the server (the host peer drives the run)?"""
    kind = TESTS[test]["kind"]
    return kind == "ping" or roles(m).get(kind) == "server"


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
        "machine": m.machine,
        "role": roles(m).get(TESTS[run.test]["kind"], "server"),
        "status": "error",
        "error": None,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    row.update(run.params)
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


def write_log(path, boot, peer, backend_proc):
    with open(path, "w") as f:
        for title, p in (("guest", boot and boot.proc), ("peer", peer and peer.proc),
                         ("backend", backend_proc)):
            if not p:
                continue
            f.write(f"==== {title}: {' '.join(p.argv)}\n")
            for t, s, l in p.lines:
                f.write(f"{t - p.t0:9.3f} {s} {l}\n")


def execute(run, m, guest, logdir):
    """Run one configuration; always returns a row, never leaves anything
    running."""
    row = base_row(run, m)
    name, opts = m.backend_opts(run.backend)
    backend = backends.make(name, run.backend, opts, m.pin.get("backend", ""))
    reason = guest.supports(run.test, backend)
    if reason:
        row.update(status="skipped", error=reason, wall_s=0.0)
        return row
    peer = peers.for_test(run.test, roles(m), backend, run.params, m.pin.get("peer", ""), m.warmup)
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
        sampler.watch("qemu", boot.qemu_pid)
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
                backend.stop_guest()
                kind, obj, t_res = boot.wait_result(15)
        else:
            kind, obj, t_res = boot.wait_result(m.run_timeout + 15)
        boot.proc.wait(15)  # the COUNTERS lines and the exit status follow
        row["accel"] = boot.accel()
        if kind == "ERROR":
            raise BenchError(f"guest ERROR in {obj.get('where')}: {obj.get('msg')}")
        if kind != "RESULT":
            raise BenchError(f"no RESULT line from the guest ({kind}); console tail:\n{boot.proc.tail()}")

        for k, v in obj.items():
            row[("guest_" + k) if k in RESULT_META else k] = v
        row.update(peer.parse())
        # A guest that runs stock servers takes its figures from the peer.
        guest.complete(row)
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
        if window is None:
            secs = float(obj.get("seconds") or run.params["seconds"])
            window = (t_res - secs, t_res)
        sampler.stop()
        fig = sampler.interval(*window)
        if fig:
            row.update(cpu_interval_s=fig["interval_s"], host_cpus=fig["ncpu"], host_cpu_pct=fig["host_cpu_pct"],
                       host_cpu_per_cpu=fig["host_cpu_per_cpu"])
            for who in ("qemu", "backend", "peer"):
                pinfo = fig["procs"].get(who)
                if pinfo:
                    row[f"{who}_cpu_pct"] = pinfo["pct"]
                    row[f"{who}_cpus"] = cpu.placement_str(pinfo["cpus"])
                    row[f"{who}_threads"] = pinfo["threads"]
            h = row.get("host_cpu_pct")
            if h:
                if row.get("tps") is not None and TESTS[run.test]["kind"] != "stream":
                    row["tps_per_cpu"] = round(row["tps"] / (h / 100.0), 1)
                if row.get("mbps") is not None and TESTS[run.test]["kind"] == "stream":
                    row["mbps_per_cpu"] = round(row["mbps"] / (h / 100.0), 2)
        if TESTS[run.test]["kind"] == "rr" and row.get("tps") and row.get("lat_mean_ns"):
            # Little's law for a closed loop: transactions/s x mean latency
            # is the mean number in flight, which should be about
            # instances x burst when the client keeps them all busy.
            row["outstanding_mean"] = round(row["tps"] * row["lat_mean_ns"] / 1e9, 2)
        row["status"] = "ok"
    except BenchError as e:
        row["error"] = str(e).splitlines()[0][:300]
        row["error_detail"] = str(e)
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
