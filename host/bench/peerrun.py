"""peerrun.py: the test kind of one guest against a stock host peer
(peers.py): tcp_rr/udp_rr, the streams, ping, memcached (memcaslap) and
pkt_txonly into pktpeer.py's sink. Backend up, peer and guest started in
the right order, the RESULT line collected, host CPU accounted over the
measured interval (runs.py says which), everything torn down: one row.

A kind module of kinds.py (OPTIONS, claims, run_row, REPORT); the last in
its table, so the packet kinds take the pkt runs they own first.
"""

import os
import time

import cpu
import kvmstats
import peers
import runs
from matrix import TESTS, run_pins
from procs import BenchError

OPTIONS = ("rr.sizes", "rr.instances", "rr.burst", "rr.mps", "rr.role", "stream.sizes", "stream.instances",
           "stream.role", "stream.udp_rate", "stream.cc", "ping.sizes", "memcached.concurrency",
           "memcached.threads", "pkt.sizes", "pkt.burst")
REPORT = ()  # report.py's own tables are this kind's


def claims(run):
    return TESTS[run.test]["kind"] in ("rr", "stream", "ping", "memcached", "pkt")


def run_row(run, m, guest, logdir, execute):
    return execute_run(run, m, guest, logdir)


def execute_run(run, m, guest, logdir):
    """Run one configuration; always returns a row, never leaves anything
    running."""
    row = runs.base_row(run, m)
    backend = runs.backend_for(run, m, guest, row)
    if backend is None:
        return row
    peer = peers.for_test(run.test, runs.roles(m), backend, run.params, run_pins(run, m).get("peer", ""), m.warmup)
    serves = runs.guest_serves(run.test, m)
    sampler = cpu.Sampler()
    boot = None
    t_begin = time.monotonic()
    log = os.path.join(logdir, f"run-{run.index:04d}.log")
    row["log"] = os.path.relpath(log, os.path.dirname(logdir))
    try:
        backend.setup(logdir)
        if backend.proc:
            sampler.watch("backend", runs._pid_of(backend.proc, "dpdk-testpmd"))
        sampler.start()
        if peer.server:
            peer.start()
            if not peer.ready(10):
                raise BenchError(f"host peer {peer.name} did not start listening within 10s:\n{peer.proc.tail()}")
        boot, cmdline = guest.start(run, backend, m.run_timeout)
        row["cmdline"] = cmdline
        runs.pin_vcpus(run, m, boot, row)
        exits = None
        if getattr(boot, "qmp", None):
            exits = kvmstats.Sampler(boot.qmp)
            exits.start()
        sampler.watch("qemu", boot.qemu_pid)
        if hasattr(boot, "server_pid"):
            sampler.watch("server", boot.server_pid)
        if peer.server:
            sampler.watch("peer", runs._pid_of(peer.proc, peer.name))
        window = None
        if serves:
            if not boot.wait_ready(60):
                err = boot.error()
                why = err["msg"] if err else ("no listening line within 60s" if boot.proc.alive() else "it ended without a listening line")
                raise BenchError(f"guest never listened: {why}; console tail:\n{boot.proc.tail()}")
            t_p0 = time.monotonic()
            peer.start()
            sampler.watch("peer", runs._pid_of(peer.proc, peer.name))
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
        said = runs.exit_line(boot.proc.text("out"))
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
            obj, t_res, per_queue = runs.mq_results(boot.proc.lines)
            row["per_queue"] = per_queue
        runs.truncated(obj, run.params.get("seconds"), m.warmup)
        row.update(kvmstats.availability(exits))
        if exits and exits.samples and runs.guest_window(obj, t_res):
            row.update(kvmstats.row_columns(kvmstats.interval(exits.samples, *runs.guest_window(obj, t_res)), obj))
            if not any(k.startswith("kvm_") for k in row):
                row["kvm_stats_error"] = "QMP's first sample came after the guest's interval began (a slow start)"
        elif exits and exits.error and row.get("accel") == "kvm":
            row["kvm_stats_error"] = exits.error[:200]  # why a KVM row has no kvm_* columns
        for k, v in obj.items():
            row[("guest_" + k) if k in runs.RESULT_META else k] = v
        h = runs.hist_of(boot.proc.text("out"))
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
        gw = runs.guest_window(obj, t_res)
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
            runs.service_demand(row, TESTS[run.test]["kind"])
        if TESTS[run.test]["kind"] == "rr" and row.get("tps") and row.get("lat_mean_ns"):
            # Little's law for a closed loop: transactions/s x mean latency
            # is the mean number in flight, which should be about
            # instances x burst when the client keeps them all busy.
            row["outstanding_mean"] = round(row["tps"] * row["lat_mean_ns"] / 1e9, 2)
        row["status"] = "ok"
    except BenchError as e:
        runs.record_error(row, e)
    finally:
        sampler.stop()
        peer.stop()
        if boot:
            boot.stop()
        bproc = backend.proc
        backend.teardown()
        row["wall_s"] = round(time.monotonic() - t_begin, 2)
        try:
            runs.write_log(log, boot, peer, bproc)
        except OSError:
            pass
    return row
