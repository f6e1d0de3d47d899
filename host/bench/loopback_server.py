#!/usr/bin/env python3
"""loopback_server.py: the `loopback` reference column's "guest" -- no VM,
the same stock server the Linux guest runs (sockperf server, iperf -s,
memcached),
bound to 127.0.0.1 inside the run's network namespace, so that the same
host peer measures the host stack's own floor.

    loopback_server.py --app rr|stream|ping|memcached [--proto tcp|udp] [--port N]
                       [--idle S] [--wait S] [--limit S] [--test NAME]

Console lines in the shapes guests.py expects of a guest:

    vnetlab-loopback listening <proto> port=N app=...
    RESULT {"test":...,"guest":"loopback","end":"idle|wait|limit|exited",...}
    vnetlab-loopback exit status=N

It ends when lo has been idle for --idle s after traffic, when nothing came
within --wait s, or at --limit s; the server is ended with it. Run inside
the namespace (backends.Backend.wrap), never on the host's own loopback.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time


def lo_rx():
    with open("/sys/class/net/lo/statistics/rx_packets") as f:
        return int(f.read())


def bound(proto, port):
    """Is a socket bound to port (TCP: listening) in this namespace?"""
    path = "/proc/net/tcp" if proto == "tcp" else "/proc/net/udp"
    want = f":{port:04X}"
    with open(path) as f:
        for line in f.readlines()[1:]:
            parts = line.split()
            if parts[1].endswith(want) and (proto != "tcp" or parts[3] == "0A"):
                return True
    return False


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--app", choices=("rr", "stream", "ping", "memcached"), required=True)
    ap.add_argument("--proto", choices=("tcp", "udp"), default="tcp")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--idle", type=float, default=2)
    ap.add_argument("--wait", type=float, default=60)
    ap.add_argument("--limit", type=float, default=600)
    ap.add_argument("--test", default="")
    ap.add_argument("--backend", default="")
    a = ap.parse_args(argv)

    status = 0
    srv = None
    proto = a.proto if a.app == "rr" else ("tcp" if a.app in ("stream", "memcached") else "icmp")
    try:
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True, timeout=10)
        if a.app == "rr":
            port = a.port or 11111
            argv_srv = ["sockperf", "server", "-i", "127.0.0.1", "-p", str(port)] + (["--tcp"] if proto == "tcp" else [])
        elif a.app == "stream":
            port = a.port or 5001
            argv_srv = ["iperf", "-s", "-B", "127.0.0.1", "-p", str(port)]
        elif a.app == "memcached":
            # stock Debian memcached as its package starts it (-m 64, 4
            # threads), no UDP; as root it needs a user to run as
            port = a.port or 11211
            argv_srv = ["memcached", "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-m", "64", "-u", "nobody"]
        else:
            port, argv_srv = 0, None
        if argv_srv:
            srv = subprocess.Popen(argv_srv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
            end = time.monotonic() + 10
            while not bound(proto, port):
                if srv.poll() is not None or time.monotonic() > end:
                    raise RuntimeError(f"{argv_srv[0]} did not bind {proto} port {port} within 10 s")
                time.sleep(0.05)
        print(f"vnetlab-loopback listening {proto} port={port} app={a.app}", flush=True)

        t0 = time.monotonic()
        rx0 = prev = lo_rx()
        first = last = None
        why = ""
        while True:
            time.sleep(0.5)
            now = time.monotonic()
            rx = lo_rx()
            if rx != prev:
                prev = rx
                last = now
                first = first or now
            if first and now - last >= a.idle:
                why = "idle"
                break
            if not first and now - t0 >= a.wait:
                why = "wait"
                break
            if now - t0 >= a.limit:
                why = "limit"
                break
            if srv and srv.poll() is not None:
                why = "exited"
                break
        if not first:
            raise RuntimeError(f"no traffic on lo within {a.wait:g} s")
        if why == "exited":
            raise RuntimeError(f"{argv_srv[0]} exited while serving")
        res = {"test": a.test or a.app, "role": "server", "guest": "loopback", "variant": "host-loopback",
               "backend": a.backend, "app": a.app, "proto": proto, "end": why,
               "traffic_s": round((last or t0) - first, 1), "lo_rx_frames": prev - rx0}
        print("RESULT " + json.dumps(res), flush=True)
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        print("ERROR " + json.dumps({"where": "loopback", "msg": str(e)}), flush=True)
        status = 1
    finally:
        if srv and srv.poll() is None:
            srv.send_signal(signal.SIGTERM)
            try:
                srv.wait(5)
            except subprocess.TimeoutExpired:
                srv.kill()
                srv.wait()
    print(f"vnetlab-loopback exit status={status}", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
