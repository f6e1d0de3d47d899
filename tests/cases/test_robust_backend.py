"""A backend that dies mid-run (issue 13): the tap goes down, the vhost-user
switch (dpdk-testpmd) is killed, or it stops processing the rings (SIGSTOP:
the device completes nothing more). In every role the appliance ends within
about 5 s with an ERROR line that names the device or the backend, status 1,
and never prints a RESULT for the truncated interval."""

import os
import shutil
import signal
import subprocess
import sys
import time

from lib import BUILD, NS_GUEST_IP, NS_HOST_IP, QEMU_RUN, TOP, Fail, Guest, Skip, per_queue

sys.path.insert(0, os.path.join(TOP, "host", "bench"))

GUEST_NET = f"ip={NS_GUEST_IP}/24"
# role -> (guest app keys, host peer argv, guest line that means it is running)
ROLES = {
    "rr client": ("app=rr rr.peer={host} rr.seconds=30 rr.warmup=0",
                  ["sockperf", "server", "--tcp", "-i", "{host}", "-p", "11111"], r"^rr client "),
    "rr server": ("app=rr rr.role=server rr.warmup=0",
                  ["sockperf", "ping-pong", "--tcp", "-i", "{guest}", "-p", "11111", "-t", "30"],
                  r"^rr server listening"),
    # The same with a client that takes 2 s longer to send its first
    # request (connected, in sockperf's warm-up stage): a slow start, the
    # reproducer of docs/robustness.md "The rr server and an early sockperf client".
    "rr server, late client": ("app=rr rr.role=server rr.warmup=0",
                               ["sockperf", "ping-pong", "--tcp", "-i", "{guest}", "-p", "11111", "-t", "30",
                                "--pre-warmup-wait", "2"], r"^rr server listening"),
    "stream client": ("app=stream stream.peer={host} stream.seconds=30 stream.warmup=0",
                      ["iperf", "-s", "-B", "{host}", "-p", "5001"], r"^stream client "),
    "stream server": ("app=stream stream.role=server stream.warmup=0",
                      ["iperf", "-c", "{guest}", "-p", "5001", "-t", "30"], r"^stream server listening"),
}
LIMIT_S = 7.0  # 5 s of silence (rr.timeout, stream.timeout; servers: rr.idle, stream.idle 2 s) + slack


def expect_backend_error(g, t0, what, names):
    g.wait()
    # When the guest said so (its console line's arrival), not when QEMU
    # was done exiting on a loaded host.
    said = [ts for ts, l in g.lines if l.startswith("ERROR ")]
    took = (said[-1] if said else time.monotonic()) - t0
    errs = [l for l in g.text() if l.startswith("ERROR ")]
    if not errs:
        raise Fail(f"{what}: no ERROR line (status {g.status})")
    if not any(n in errs[-1] for n in names):
        raise Fail(f"{what}: the ERROR line names neither {names}: {errs[-1]}")
    g.expect_not(r"^RESULT ")
    g.expect_status(1)
    # The dump before the ERROR holds both rings' indices (RING lines), so
    # a stall reads as unkicked, held by the device, or not yet reaped.
    rings = per_queue(g, "RING")
    if set(rings) != {"tx", "rx"} or any(not {"pub", "dev_used", "avail_event", "unkicked"} <= set(d) for d in rings.values()):
        raise Fail(f"{what}: expected RING lines for tx and rx with the ring indices before the ERROR, got {rings}")
    if took > LIMIT_S:
        raise Fail(f"{what}: the run ended {took:.1f} s after the backend died (expected <= {LIMIT_S} s)")
    return took, errs[-1]


# A client peer's line that says its requests have begun. sockperf connects,
# then sleeps 2 s (its "warm-up stage") before its first request; until that
# request the rr server is still waiting for its client (rr.wait), not mid-run.
PEER_STARTED = {"sockperf": "Starting test"}


def start_role(t, role, wrap, qemu_args, host, guest, backend):
    import procs
    app, peer, running = ROLES[role]
    fmt = lambda a: a.format(host=host, guest=guest)
    peers = []
    t.cleanups.append(lambda: [p.stop() for p in peers])
    start_peer = lambda: peers.append(procs.Proc(role + " peer", wrap([fmt(a) for a in peer])))
    serves = "server" in role
    if not serves:
        start_peer()
        time.sleep(1)
    argv = [QEMU_RUN] + qemu_args[0] + ["--timeout", "60", "--kernel", os.path.join(BUILD, "vnetlab.elf"),
                                        "--append", f"{fmt(app)} {GUEST_NET} backend={backend}", "--"] + qemu_args[1]
    g = Guest(wrap(argv), 60, t.name)
    t.guests.append(g)
    g.wait_line(running, timeout=30)
    if serves:
        time.sleep(0.3)
        start_peer()
        started = PEER_STARTED.get(peer[0])
        if started and not peers[-1].wait_line(lambda l: started in l, 30):
            raise Fail(f"{role}: the client peer never said '{started}' within 30 s:\n{peers[-1].tail()}")
    g.peers = peers
    time.sleep(3)  # well into the measured interval
    return g


def end_peers(g):
    """The role's host peers end with it, before the next role starts."""
    for p in g.peers:
        p.stop()


def test_tap_down_mid_run_every_role(t):
    for role in ROLES:
        with t.netns() as ns:
            g = start_role(t, role, ns.exec_argv, (["--net", f"tap:{ns.tap}"], []), NS_HOST_IP, NS_GUEST_IP, "tap")
            t0 = time.monotonic()
            ns.run(["ip", "link", "set", ns.tap, "down"], timeout=10, check=True)
            took, err = expect_backend_error(g, t0, f"{role}, tap down", ["backend tap: no frame received"])
            end_peers(g)
            print(f"    {role}: tap down -> ERROR in {took:.1f} s: {err[:150]}")


def vhost_user(t):
    if not shutil.which("dpdk-testpmd"):
        raise Skip("dpdk-testpmd not installed (Debian package dpdk-dev)")
    if os.geteuid() != 0:
        raise Skip("needs root for testpmd's namespace and tap")
    import backends
    b = backends.make("vhost-user", "vhost-user", {})
    try:
        b.setup(os.path.join(BUILD, "robust"))
    except backends.BenchError as e:
        b.teardown()
        raise Skip(f"dpdk-testpmd does not run here: {str(e).splitlines()[0]}")
    t.cleanups.append(b.teardown)
    return b


def test_vhost_user_switch_killed_or_stalled(t):
    for role, sig, names in (("rr client", signal.SIGKILL, ["link down", "backend vhost-user"]),
                             ("rr server", signal.SIGKILL, ["link down", "backend vhost-user"]),
                             ("stream server", signal.SIGSTOP, ["backend vhost-user: no frame received"])):
        b = vhost_user(t)
        g = start_role(t, role, b.wrap, b.qemu_net(), b.host_ip, b.guest_ip, "vhost-user")
        t0 = time.monotonic()
        os.killpg(b.proc.pid, sig)
        what = f"{role}, testpmd {'killed' if sig == signal.SIGKILL else 'stopped (SIGSTOP)'}"
        took, err = expect_backend_error(g, t0, what, names)
        print(f"    {what} -> ERROR in {took:.1f} s: {err[:150]}")
        b.teardown()


def test_harness_refuses_a_truncated_interval(t):
    """A UDP RR server cannot tell a vanished backend from clients that
    stopped: it ends with a RESULT over the part it saw. The harness
    (host/bench/runs.py) refuses such a RESULT as a truncated interval."""
    import json
    import runs
    from procs import BenchError
    with t.netns() as ns:
        g = t.start(append=f"app=rr rr.role=server rr.proto=udp rr.warmup=1 {GUEST_NET} backend=tap",
                    net=f"tap:{ns.tap}", ns=ns, timeout=60)
        g.wait_line(r"^rr server listening", timeout=30)
        sp = ns.popen(["sockperf", "ping-pong", "-i", NS_GUEST_IP, "-p", "11111", "-t", "8"],
                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        # From sockperf's own start (on a loaded host it may start late:
        # then the interval held no request at all and the guest's ERROR
        # said so), 1 s of warm-up and ~2.5 s measured before the tap goes.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and "Starting test" not in (sp.stdout.readline() or "Starting test"):
            pass
        time.sleep(3.5)
        ns.run(["ip", "link", "set", ns.tap, "down"], timeout=10, check=True)
        g.wait()
        sp.kill()
        res = json.loads(g.expect(r"^RESULT (\{.*\})$").group(1))
    try:
        runs.truncated(res, 8, 1)
    except BenchError as e:
        print(f"    UDP server, tap down after ~2.5 s of 7: the harness says: {e}")
    else:
        raise Fail(f"the harness accepted a RESULT of {res['seconds']} s measured out of ~7 s")
    runs.truncated(dict(res, seconds=6.9), 8, 1)  # a whole interval passes
