"""The benchmark apps (app=rr, app=stream) against stock peers: sockperf 3.7
and iperf 2 in a network namespace (root), slirp without; ping -f; the
numbers' sanity (never their speed: TCG is slow); error paths; make run."""

import json
import os
import re
import socket
import subprocess
import sys
import time

from lib import BUILD, NETPEER, NS_GUEST_IP, NS_HOST_IP, NS_PREFIX, TOP, Fail, wait_listening

GUEST_NET = f"ip={NS_GUEST_IP}/{NS_PREFIX} backend=tap"
RR_PORT, STREAM_PORT = 11111, 5001
WARMUP, SECONDS = 1, 2

# Every RESULT line carries these (apps/lib/result.h).
COMMON_KEYS = ("test", "role", "variant", "accel", "backend", "instances", "seconds", "transactions",
               "tps", "mbps", "tx_frames", "rx_frames", "kicks", "kicks_suppressed", "reclaim_calls",
               "reclaimed", "ring_full", "lwip_drops", "kicks_per_txn", "reclaims_per_txn")
RR_FIGS = ("mean", "p50", "p90", "p99", "p999", "max")
# Client: round trips (lat_*); server: the interval between a connection's
# answered requests (cycle_*), never called a latency.
RR_KEYS = {"client": ("req", "resp") + tuple(f"lat_{k}_ns" for k in RR_FIGS),
           "server": ("req", "resp") + tuple(f"cycle_{k}_ns" for k in RR_FIGS)}
INTERVAL_KEYS = ("t_begin_us", "t_end_us", "t_line_us")


def result(g):
    """The guest's RESULT line, checked for shape and internal consistency."""
    m = g.expect(r"^RESULT (\{.*\})$")
    r = json.loads(m.group(1))
    rr = r["test"].endswith("_rr")
    keys = COMMON_KEYS + INTERVAL_KEYS + (RR_KEYS[r["role"]] if rr else ("msg", "bytes"))
    missing = [k for k in keys if k not in r]
    if missing:
        raise Fail(f"RESULT lacks {missing}: {r}")
    if rr:
        wrong = [k for k in r if k.startswith("cycle_" if r["role"] == "client" else "lat_")]
        if wrong:
            raise Fail(f"an RR {r['role']} RESULT must not carry {wrong}")
    # The measured interval on the guest clock: begin < end <= the line, and
    # as long as the seconds the line claims.
    if not 0 < r["t_begin_us"] < r["t_end_us"] <= r["t_line_us"]:
        raise Fail(f"expected 0 < t_begin_us < t_end_us <= t_line_us, saw {[r[k] for k in INTERVAL_KEYS]}")
    if abs((r["t_end_us"] - r["t_begin_us"]) / 1e6 - float(r["seconds"])) > 0.002:
        raise Fail(f"t_end_us - t_begin_us = {(r['t_end_us'] - r['t_begin_us']) / 1e6:.4f} s but seconds = {r['seconds']}")
    if r["accel"] not in ("tcg", "kvm") or r["backend"] not in ("tap", "user"):
        raise Fail(f"expected accel tcg|kvm and backend tap|user, RESULT says {r['accel']}/{r['backend']}")
    if r["transactions"] <= 0 or r["tps"] <= 0 or r["mbps"] <= 0:
        raise Fail(f"expected non-zero transactions, tps, mbps, saw {r['transactions']}, {r['tps']}, {r['mbps']}")
    for key, num in (("kicks_per_txn", "kicks"), ("reclaims_per_txn", "reclaim_calls")):
        want = r[num] / r["transactions"]
        if abs(r[key] - want) > 0.0011:
            raise Fail(f"{key}={r[key]} but {num}/transactions = {want:.4f}")
    if rr:
        kind = "lat" if r["role"] == "client" else "cycle"
        pct = [r[f"{kind}_{k}_ns"] for k in ("p50", "p90", "p99", "p999", "max")]
        if pct != sorted(pct) or pct[0] <= 0:
            raise Fail(f"expected 0 < p50 <= p90 <= p99 <= p99.9 <= max, saw {pct}")
        if not 0 < r[f"{kind}_mean_ns"] <= r[f"{kind}_max_ns"]:
            raise Fail(f"expected 0 < mean <= max, saw mean {r[kind + '_mean_ns']} max {r[kind + '_max_ns']}")
        hist_line(g, r, kind)
    return r


def hist_line(g, r, kind):
    """The HIST line after an RR RESULT: its buckets hold exactly the
    transactions' samples and reproduce the line's percentiles."""
    h = json.loads(g.expect(r"^HIST (\{.*\})$").group(1))
    if (h["test"], h["role"], h["metric"]) != (r["test"], r["role"], kind):
        raise Fail(f"HIST line names {h['test']}/{h['role']}/{h['metric']}, RESULT is {r['test']}/{r['role']}/{kind}")
    n = sum(c for _, _, c in h["buckets"])
    if n != h["count"] or n <= 0:
        raise Fail(f"HIST buckets sum to {n}, count says {h['count']}")
    lows = [b[0] for b in h["buckets"]]
    if lows != sorted(set(lows)):
        raise Fail("HIST buckets are not in ascending order")
    rank, seen = (n * 50 + 99) // 100, 0
    for low, width, c in h["buckets"]:
        seen += c
        if seen >= rank:
            if not low <= r[f"{kind}_p50_ns"] < low + width + 1:
                raise Fail(f"p50 {r[kind + '_p50_ns']} is not in the HIST bucket [{low}, {low + width}) of rank {rank}")
            break


def frames_cover(r, per_txn_max):
    """Every transaction needs at least one frame each way (RR, one message per
    frame); and far more frames than transactions means something loops."""
    n = r["transactions"]
    for k in ("tx_frames", "rx_frames"):
        if not n * 0.98 <= r[k] <= n * per_txn_max + 100:
            raise Fail(f"{k}={r[k]} is not consistent with {n} transactions (expected "
                       f"{n * 0.98:.0f}..{n * per_txn_max + 100:.0f})")
    if r["kicks"] > r["tx_frames"] + r["rx_frames"]:
        raise Fail(f"more kicks ({r['kicks']}) than frames ({r['tx_frames']} + {r['rx_frames']})")


def within(name, guest, host, factor):
    if not host / factor <= guest <= host * factor:
        raise Fail(f"{name}: guest {guest} vs host tool {host}, more than a factor {factor} apart")


def sockperf_figures(out):
    """Round-trip percentiles (usec) and counts from `sockperf ... --full-rtt`."""
    f = {}
    for line in out.splitlines():
        m = re.search(r"percentile (\d+\.\d+) =\s+([\d.]+)", line)
        if m:
            f["p" + m.group(1)] = float(m.group(2))
        m = re.search(r"\[Total Run\].*SentMessages=(\d+); ReceivedMessages=(\d+)", line)
        if m:
            f["sent"], f["received"] = int(m.group(1)), int(m.group(2))
    if "sent" not in f:
        raise Fail(f"sockperf printed no summary: {out[-600:]}")
    return f


def iperf_mbps(out):
    rates = re.findall(r"([\d.]+) Mbits/sec", out)
    if not rates:
        raise Fail(f"iperf printed no Mbits/sec figure: {out[-600:]}")
    return float(rates[-1])


def run_peer(ns, argv, timeout):
    r = ns.run(argv, timeout=timeout, capture_output=True, text=True)
    return r.stdout + r.stderr


def serve(t, ns, app_args, listening):
    g = t.start(append=f"{app_args} {GUEST_NET}", net=f"tap:{ns.tap}", ns=ns, timeout=90)
    g.wait_line(listening, timeout=30)
    return g


def boot_client(t, ns, app_args, timeout=60):
    return t.start(append=f"{app_args} {GUEST_NET}", net=f"tap:{ns.tap}", ns=ns, timeout=timeout).wait()


# ---- rr server against stock sockperf clients ----

def test_rr_server_sockperf_ping_pong_tcp_udp(t):
    for proto in ("tcp", "udp"):
        with t.netns() as ns:
            g = serve(t, ns, f"app=rr rr.role=server rr.proto={proto} rr.warmup={WARMUP}", r"^rr server listening")
            argv = ["sockperf", "ping-pong", "-i", NS_GUEST_IP, "-p", str(RR_PORT), "-m", "64",
                    "-t", str(WARMUP + SECONDS + 1), "--full-rtt"] + (["--tcp"] if proto == "tcp" else [])
            sp = sockperf_figures(run_peer(ns, argv, timeout=60))
            g.wait()
            g.expect_ok()
            r = result(g)
            if r["test"] != f"{proto}_rr" or r["role"] != "server" or r["req"] != 64 or r["resp"] != 64:
                raise Fail(f"expected a {proto}_rr server RESULT with 64/64 bytes, saw {r}")
            if sp["received"] < sp["sent"] - 1:
                raise Fail(f"sockperf got {sp['received']} replies to {sp['sent']} requests")
            if not sp["sent"] * 0.2 <= r["transactions"] <= sp["sent"]:
                raise Fail(f"guest answered {r['transactions']} in its window, sockperf sent {sp['sent']}")
            frames_cover(r, 2.5)
            # guest: interval between requests = sockperf's round trip only
            # for this unthrottled one-outstanding ping-pong
            within(f"{proto} p50 cycle vs round trip (ns)", r["cycle_p50_ns"], sp["p50.000"] * 1000, 4)
            print(f"    {proto}_rr server: guest cycle p50 {r['cycle_p50_ns'] / 1000:.1f} us, sockperf p50 "
                  f"{sp['p50.000']:.1f} us, {r['tps']:.0f} trans/s (TCG, tap)")


def test_rr_server_sockperf_under_load(t):
    with t.netns() as ns:
        g = serve(t, ns, f"app=rr rr.role=server rr.warmup={WARMUP}", r"^rr server listening")
        argv = ["sockperf", "under-load", "--tcp", "-i", NS_GUEST_IP, "-p", str(RR_PORT), "-m", "200",
                "--mps", "2000", "--reply-every", "20", "-t", str(WARMUP + SECONDS + 1), "--full-rtt"]
        sp = sockperf_figures(run_peer(ns, argv, timeout=60))
        g.wait()
        g.expect_ok()
        r = result(g)
        msgs = json.loads(g.expect(r"^RESULT (\{.*\})$").group(1))["messages"]
        if not sp["sent"] * 0.2 <= msgs <= sp["sent"]:
            raise Fail(f"guest saw {msgs} messages in its window, sockperf sent {sp['sent']}")
        # only every 20th message asks for a reply
        if not msgs / 20 - 3 <= r["transactions"] <= msgs / 20 + 3:
            raise Fail(f"expected about {msgs / 20:.0f} replies to {msgs} messages, guest sent {r['transactions']}")
        if sp["received"] < sp["sent"] // 20 - 2:
            raise Fail(f"sockperf got {sp['received']} replies, expected about {sp['sent'] // 20}")


# ---- rr client against a stock sockperf server ----

def test_rr_client_sockperf_server_tcp_udp(t):
    for proto, inst, burst in (("tcp", 1, 1), ("udp", 2, 2)):
        with t.netns() as ns:
            ns.popen(["sockperf", "server", "-i", NS_HOST_IP, "-p", str(RR_PORT)] + (["--tcp"] if proto == "tcp" else []),
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wait_listening(ns, proto, RR_PORT)
            g = boot_client(t, ns, f"app=rr rr.proto={proto} rr.peer={NS_HOST_IP} rr.instances={inst} "
                                   f"rr.burst={burst} rr.seconds={SECONDS} rr.warmup={WARMUP}")
            g.expect_ok()
            r = result(g)
            if (r["test"], r["role"], r["instances"], r["burst"], r["req"], r["resp"]) != (
                    f"{proto}_rr", "client", inst, burst, 256, 256):
                raise Fail(f"RESULT parameters differ from the command line: {r}")
            if r["lost"] or r["errors"]:
                raise Fail(f"expected no lost or unexpected replies on a private tap, saw {r['lost']}/{r['errors']}")
            if proto == "udp":
                frames_cover(r, 1.2)  # one datagram each way per transaction
            else:
                frames_cover(r, 2.5)
            if not 0.5 <= float(r["seconds"]) / SECONDS <= 1.5:
                raise Fail(f"measured {r['seconds']} s for rr.seconds={SECONDS}")


def test_rr_client_over_slirp(t):
    # The non-root path of `make run`: guest -> 10.0.2.2 -> host loopback.
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    peer = subprocess.Popen(["sockperf", "server", "--tcp", "-i", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    t.cleanups.append(lambda: (peer.kill(), peer.wait()))
    g = t.boot(append=f"app=rr rr.peer=10.0.2.2 rr.port={port} rr.seconds={SECONDS} rr.warmup={WARMUP} "
                      "backend=user", net="user", timeout=60)
    g.expect_ok()
    r = result(g)
    if r["backend"] != "user":
        raise Fail(f"expected backend=user in the RESULT, saw {r['backend']}")


# ---- stream against stock iperf 2 ----

def test_stream_server_iperf_client_both_directions(t):
    for reverse in (False, True):
        with t.netns() as ns:
            g = serve(t, ns, f"app=stream stream.role=server stream.check=1 stream.msg=4096 stream.warmup={WARMUP}",
                      r"^stream server listening")
            argv = ["iperf", "-c", NS_GUEST_IP, "-p", str(STREAM_PORT), "-f", "m", "-l", "16K",
                    "-t", str(WARMUP + SECONDS + 1)] + (["-R"] if reverse else [])
            host = iperf_mbps(run_peer(ns, argv, timeout=60))
            g.wait()
            g.expect_ok()
            r = result(g)
            want = ("tcp_stream", 4096) if reverse else ("tcp_maerts", 16384)
            if (r["test"], r["msg"]) != want or r["check_errors"]:
                raise Fail(f"expected {want[0]} with {want[1]}-byte messages and a clean pattern check, saw {r}")
            within("Mbit/s", float(r["mbps"]), host, 3)
            print(f"    {r['test']} server: guest {r['mbps']} Mbit/s, iperf {host} Mbit/s (TCG, tap)")


def test_stream_client_iperf_server_both_directions(t):
    for test, inst in (("stream", 2), ("maerts", 1)):
        with t.netns() as ns:
            ns.popen(["iperf", "-s", "-B", NS_HOST_IP, "-p", str(STREAM_PORT)],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wait_listening(ns, "tcp", STREAM_PORT)
            g = boot_client(t, ns, f"app=stream stream.test={test} stream.peer={NS_HOST_IP} stream.msg=1024 "
                                   f"stream.instances={inst} stream.check=1 stream.seconds={SECONDS} "
                                   f"stream.warmup={WARMUP}")
            g.expect_ok()
            r = result(g)
            if (r["test"], r["instances"], r["msg"], r["check_errors"]) != (f"tcp_{test}", inst, 1024, 0):
                raise Fail(f"expected tcp_{test}, {inst} instances, 1024-byte messages, no check errors: {r}")
            if r["transactions"] != r["bytes"] // 1024:
                raise Fail(f"transactions {r['transactions']} are not bytes {r['bytes']} / 1024")
            # a bulk transfer moves full-size frames: far fewer frames than
            # bytes / 100 (with TSO and large receive up to 64 KB each)
            data_frames = r["tx_frames"] if test == "stream" else r["rx_frames"]
            if not r["bytes"] / 65549 <= data_frames <= r["bytes"] / 100:
                raise Fail(f"{data_frames} data frames for {r['bytes']} bytes")


def iperf_udp_report(out):
    """iperf -u -c's datagram count and the server report it printed."""
    sent = re.search(r"Sent (\d+) datagrams", out)
    rep = re.search(r"Server Report:\n.*\n.* ([\d.]+) ms +(\d+)/(\d+) ", out)
    if not sent or not rep or "WARNING" in out:
        raise Fail(f"expected iperf to print Sent N datagrams and the server report, no WARNING: {out[-800:]}")
    return int(sent.group(1)), float(rep.group(1)), int(rep.group(2)), int(rep.group(3))


def test_stream_server_iperf_udp(t):
    with t.netns() as ns:
        g = serve(t, ns, "app=stream stream.role=server stream.warmup=0", r"^stream server listening")
        out = run_peer(ns, ["iperf", "-u", "-c", NS_GUEST_IP, "-p", str(STREAM_PORT), "-b", "2M", "-l", "1000",
                            "-t", "3", "-f", "m"], timeout=60)
        sent, jitter_ms, lost, total = iperf_udp_report(out)
        g.wait()
        g.expect_ok()
        r = result(g)
        # iperf 2.1.8 numbers data from 1, its first FIN with the next id
        # (a datagram in iperf's count), then prints Sent = that id + 1
        if (r["test"], r["msg"], r["instances"]) != ("udp_stream", 1000, 1):
            raise Fail(f"expected a udp_stream RESULT of one flow of 1000-byte datagrams: {r}")
        if (r["udp_datagrams"], r["udp_lost"], r["udp_out_of_order"], r["udp_fins"]) != (sent - 2, 0, 0, 1):
            raise Fail(f"iperf sent {sent - 2} data datagrams and a FIN; the guest counted {r}")
        if (lost, total) != (0, sent - 1) or r["udp_bytes"] != r["udp_datagrams"] * 1000:
            raise Fail(f"server report {lost}/{total}, guest {r['udp_datagrams']} datagrams {r['udp_bytes']} bytes")
        if abs(jitter_ms * 1000 - float(r["udp_jitter_us"])) > 1 or r["transactions"] > r["udp_datagrams"]:
            raise Fail(f"iperf's jitter {jitter_ms} ms, guest {r['udp_jitter_us']} us; window {r['transactions']}")
        print(f"    udp_stream server: {r['udp_datagrams']} datagrams, 0 lost, jitter {jitter_ms} ms, "
              f"{r['mbps']} Mbit/s at iperf -b 2M (TCG, tap)")


def test_stream_server_udp_gap_reorder_and_bad_datagrams(t):
    with t.netns() as ns:
        g = serve(t, ns, "app=stream stream.role=server stream.warmup=0", r"^stream server listening")
        peer = json.loads(run_peer(ns, [sys.executable, os.path.join(TOP, "tests", "tools", "iperfudp.py"), "flow",
                                        NS_GUEST_IP, str(STREAM_PORT)], timeout=30).strip().splitlines()[-1])
        g.wait()
        g.expect_ok()
        r = result(g)
        rep = peer["report"]
        if peer["refused_answered"] or not rep:
            raise Fail(f"expected a report for the flow and none for the refused one: {peer}")
        # ids 1..20 without 6, 10 after 11, FIN 21: iperf's server says 1/21, 1 out of order
        if (rep["lost"], rep["out_of_order"], rep["datagrams"], rep["bytes"], rep["length"]) != (1, 1, 21, 4000, 128):
            raise Fail(f"expected the report to say lost 1, 1 out of order, 21 datagrams, 4000 bytes: {rep}")
        want = dict(udp_datagrams=19, udp_lost=1, udp_out_of_order=1, udp_fins=1, udp_malformed=3, udp_refused=3,
                    instances=1)
        seen = {k: r[k] for k in want}
        if seen != want:
            raise Fail(f"expected {want}, RESULT says {seen}")
        g.expect(r"^stream: refusing a UDP flow: dual test")


def test_stream_server_bad_peers_are_errors(t):
    # Only malformed datagrams: no client, and the ERROR says what came.
    with t.netns() as ns:
        g = serve(t, ns, "app=stream stream.role=server stream.wait=3", r"^stream server listening")
        code = (f"import socket; s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.connect(('{NS_GUEST_IP}',"
                f"{STREAM_PORT})); s.send(b'x'); s.send(bytes(11))")
        run_peer(ns, [sys.executable, "-c", code], timeout=10)
        g.wait()
        expect_error(g, "stream", r"no iperf client on TCP or UDP port 5001 within 3 s \(2 malformed, 0 refused "
                                  r"UDP datagrams\)", 20)
    # A dual test (-d header) whose listening port is closed: the back
    # connection is refused, an ERROR at once, not a wait.
    code = (f"import socket,struct,time\ns=socket.create_connection(('{NS_GUEST_IP}',{STREAM_PORT}),timeout=10)\n"
            "s.sendall(struct.pack('>Iiiiii',0xc0010079,1,5999,1000,0,-300)+bytes(36))\ntime.sleep(3)\n")
    with t.netns() as ns:
        g = serve(t, ns, "app=stream stream.role=server", r"^stream server listening")
        run_peer(ns, [sys.executable, "-c", code], timeout=20)
        g.wait()
        expect_error(g, "stream", r"back connection \(iperf -d/-r\) to the client's port 5999 refused", 25)


def test_stream_server_iperf_dual_and_tradeoff(t):
    for mode, test in (("-d", "tcp_dual"), ("-r", "tcp_tradeoff")):
        with t.netns() as ns:
            g = serve(t, ns, f"app=stream stream.role=server stream.warmup={WARMUP}", r"^stream server listening")
            out = run_peer(ns, ["iperf", "-c", NS_GUEST_IP, "-p", str(STREAM_PORT), mode, "-l", "16K", "-f", "m",
                                "-t", str(WARMUP + SECONDS)], timeout=60)
            rates = re.findall(r"([\d.]+) Mbits/sec", out)
            if len(rates) < 2 or "ERROR" in out or "WARNING" in out:
                raise Fail(f"expected iperf {mode} to report both directions: {out[-800:]}")
            g.wait()
            g.expect_ok()
            r = result(g)
            rx, tx = r["received_bytes"], r["sent_bytes"]
            if r["test"] != test or not rx or not tx or r["bytes"] != rx + tx:
                raise Fail(f"expected a {test} RESULT with both directions: {r}")
            for d in ("received", "sent"):
                within(f"{d} Mbit/s", float(r[f"{d}_mbps"]), r[f"{d}_bytes"] * 8e-6 / float(r[f"{d}_seconds"]), 1.01)
            if mode == "-r" and float(r["received_seconds"]) + float(r["sent_seconds"]) > float(r["seconds"]) + 0.1:
                raise Fail(f"a tradeoff's directions take turns; they overlap: {r}")
            print(f"    {test} server: received {r['received_mbps']} sent {r['sent_mbps']} Mbit/s, "
                  f"iperf {rates} Mbit/s (TCG, tap)")


def test_stream_pattern_check_catches_corruption(t):
    # An iperf-2.1.8-shaped client whose 3rd record has one byte flipped.
    code = (
        "import socket,struct,time\n"
        f"s=socket.create_connection(('{NS_GUEST_IP}',{STREAM_PORT}),timeout=10)\n"
        "h=struct.pack('>6i',0x40010000|(60<<1),1,5001,1000,0,-300)+bytes(36)\n"
        "rec=bytearray(b''.join(bytes([48+i%10]) for i in range(1000)))\n"
        "s.sendall(h)\n"
        "for i in range(40):\n"
        "    r=bytearray(rec)\n"
        "    if i==2: r[500]^=1\n"
        "    s.sendall(r)\n"
        "s.shutdown(socket.SHUT_WR); s.recv(100); time.sleep(0.5); s.close()\n")
    with t.netns() as ns:
        g = serve(t, ns, "app=stream stream.role=server stream.check=1 stream.warmup=0", r"^stream server listening")
        run_peer(ns, [sys.executable, "-c", code], timeout=30)
        g.wait()
        g.expect(r'^ERROR \{"where":"stream","msg":"pattern check: 1 bytes differ, first at data offset 2500"')
        g.expect_status(1)


# ---- ping ----

def test_ping_flood(t):
    with t.netns() as ns:
        # any serving app answers ICMP; echo stops cleanly from the control port
        g = serve(t, ns, "app=echo echo.seconds=120", r"^echo listening")
        r = ns.run(["ping", "-q", "-f", "-c", "500", "-w", "60", NS_GUEST_IP], timeout=90, capture_output=True, text=True)
        m = re.search(r"(\d+) packets transmitted, (\d+) received", r.stdout)
        rtt = re.search(r"rtt min/avg/max/mdev = ([\d.]+)/([\d.]+)/([\d.]+)/", r.stdout)
        if not m or not rtt or (m.group(1), m.group(2)) != ("500", "500"):
            raise Fail(f"expected 500 of 500 echo replies with an rtt line, ping said: {r.stdout}{r.stderr}")
        if not float(rtt.group(1)) <= float(rtt.group(2)) <= float(rtt.group(3)):
            raise Fail(f"ping's rtt min/avg/max are not ordered: {rtt.group(0)}")
        run_peer(ns, NETPEER + ["stop", NS_GUEST_IP], timeout=20)
        g.wait()
        g.expect_ok()
        print(f"    ping -f -c 500: {rtt.group(0)} ms (TCG, tap)")


# ---- error paths: an ERROR line and a non-zero exit, promptly ----

def expect_error(g, where, msg, limit_s):
    g.expect(r'^ERROR \{"where":"' + where + r'","msg":"' + msg)
    g.expect_not(r"^RESULT ")
    g.expect_status(1)
    took = g.lines[-1][0] - g.t0
    if took > limit_s:
        raise Fail(f"the run took {took:.1f}s to fail, more than the {limit_s}s it should")


def test_client_peer_absent(t):
    with t.netns() as ns:
        g = boot_client(t, ns, f"app=rr rr.peer={NS_HOST_IP} rr.seconds=2")
        expect_error(g, "rr", r"cannot connect to 10\.77\.0\.1:11111: refused", 15)
        g = boot_client(t, ns, f"app=rr rr.proto=udp rr.peer={NS_HOST_IP} rr.seconds=2 rr.warmup=0")
        expect_error(g, "rr", r"no reply from 10\.77\.0\.1:11111", 15)
        g = boot_client(t, ns, "app=rr rr.peer=10.77.0.99 rr.seconds=2")
        expect_error(g, "peer", r"no ARP reply from 10\.77\.0\.99 within 5 s", 20)
        g = boot_client(t, ns, f"app=stream stream.peer={NS_HOST_IP} stream.seconds=2")
        expect_error(g, "stream", r"cannot connect to 10\.77\.0\.1:5001: refused", 15)


def test_server_without_client(t):
    g = t.boot(append="app=rr rr.role=server rr.wait=2", timeout=30)
    expect_error(g, "rr", r"no request on TCP port 11111 within 2 s", 15)
    g = t.boot(append="app=stream stream.role=server stream.wait=2", timeout=30)
    expect_error(g, "stream", r"no iperf client on TCP or UDP port 5001 within 2 s", 15)


def test_bad_keys(t):
    for args, msg in (
        ("app=rr rr.proto=sctp", r"bad value 'sctp' for key 'rr.proto' \(expected tcp\|udp\)"),
        ("app=rr rr.proto=udp rr.req=1473", r"bad value '1473' for key 'rr.req' \(expected an integer 1\.\.1472\)"),
        ("app=rr rr.instances=129", r"bad value '129' for key 'rr.instances'"),
        ("app=rr rr.role=server rr.peer=10.0.0.1", r"key 'rr.peer' applies to rr.role=client only"),
        ("app=rr rr.peer=10.0.0.300", r"bad value '10.0.0.300' for key 'rr.peer' \(not an IPv4 address\)"),
        ("app=stream stream.msg=0", r"bad value '0' for key 'stream.msg'"),
        ("app=stream stream.role=server stream.test=maerts", r"key 'stream.test' applies to stream.role=client only"),
        ("app=stream stream.bogus=1", r"unknown key 'stream.bogus'"),
    ):
        g = t.boot(append=args, timeout=30)
        g.expect_usage_error(msg)


# ---- make run ----

def test_make_run_prints_results_and_summary(t):
    env = dict(os.environ, TEST="tcp_rr,tcp_stream", DURATION="1", WARMUP="0",
               KERNEL=os.path.join(BUILD, "vnetlab.elf"))
    r = subprocess.run(["bash", os.path.join(TOP, "host", "run.sh")], env=env, capture_output=True, text=True,
                       timeout=150)
    out = r.stdout
    if r.returncode != 0:
        raise Fail(f"host/run.sh exited {r.returncode}: {out[-800:]}{r.stderr[-800:]}")
    for test in ("tcp_rr", "tcp_stream"):
        if not re.search(r'^RESULT \{"test":"' + test, out, re.M):
            raise Fail(f"host/run.sh printed no {test} RESULT line: {out[-800:]}")
    m = re.search(r"^summary: accel=(\w+) machine=\S+ backend=(\w+) ", out, re.M)
    if not m or not re.search(r"trans/s .*p99", out) or "Mbit/s" not in out:
        raise Fail(f"expected a summary naming accel and backend with trans/s, percentiles, Mbit/s: {out[-800:]}")
    backend = "tap" if os.geteuid() == 0 else "user"
    if m.group(2) != backend:
        raise Fail(f"expected backend {backend} as {'root' if backend == 'tap' else 'non-root'}, summary says {m.group(2)}")
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    if "vnetlab-run-" in left:
        raise Fail(f"host/run.sh left a network namespace behind: {left}")
