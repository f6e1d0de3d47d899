#!/usr/bin/env python3
"""tests/tools/pktpeer.py: the host peer of app=pkt (tests/cases/test_pkt.py).

Runs as root inside the test's network namespace, on its tap, with raw
AF_PACKET sockets (and, for reflect, a plain UDP socket). Frames are the
appliance's own layout (apps/pkt.h): Ethernet, IPv4, UDP with checksum 0,
then "VNPK" and a 64-bit big-endian sequence number. Every socket operation
has a timeout; each subcommand prints one JSON line and exits 0 (1 when it
could not do what it was asked).

  recv IFACE IDLE MAX      count the frames with a sequence number that
                           arrive from the guest until IDLE seconds pass
                           without one (after the first) or MAX seconds in
                           all; prints frames, seq gaps/reorders, sizes seen
                           and what the socket itself dropped
                           (PACKET_STATISTICS). Prints "listening" first.
                           Frames of the Linux kernel's pktgen (its magic
                           0xbe9be955 after the UDP header) count too, as
                           `unnumbered`: pktgen sends one skb many times
                           (clone_skb), so its numbers say nothing of loss
  send IFACE DMAC N RATE [SKIP]   N frames at RATE per second (0: as fast
                           as possible), sequence 0, 1, ... with the number
                           SKIP left out (an injected drop); prints sent and
                           the tap's tx_dropped over the run (frames the
                           backend never took)
  swap IFACE DMAC N RATE MODE [WAIT] [SIZE] [TRIAL] [LAT] [GEN] [GENOPTS]
                           send as `send` and count what comes back: MODE
                           macswap on the raw socket (the returned frame's
                           destination is our MAC),
                           MODE reflect on a UDP socket bound to the source
                           address and port the frames carry (the host stack
                           receives it); waits WAIT seconds (2) after the
                           last frame sent; SIZE the frame size (64, RFC
                           2544's: FCS included) or imix (the 7:4:1 cycle);
                           then, given TRIAL, a trial marker with that
                           number (the guest prints its PKT_TRIAL line);
                           host/bench/ndr.py runs one trial with it; LAT 1:
                           also each numbered frame's round trip, from just
                           after its send() to the kernel's receive stamp
                           (SO_TIMESTAMPNS), as back.rtt percentiles;
                           GEN python (this script sends, the default) or
                           the path of host/pktgen/pacegen (it sends, paced
                           in C, SIZE a number; LAT 1 then takes each send
                           time from the frame's own stamp): with MODE
                           macswap pacegen --back also counts what comes
                           back, waits WAIT and sends the marker, in its one
                           thread (no reader here: this script only turns
                           its line into this one, `back` with its unique,
                           dups, lost, out_of_run and the ring's drops as
                           sock_drops); with MODE reflect this script counts
                           on its UDP socket while pacegen sends; GENOPTS:
                           more of pacegen's options, one argument, space-
                           separated (e.g. "--sleep 60 --batch 32")
  rate IFACE IDLE MAX      sample IFACE's tx_packets + tx_dropped (what a
                           host sender put on a tap, taken or dropped) every
                           10 ms from "listening" until they stood still for
                           IDLE seconds after the first change, or MAX
                           seconds; prints the count, the rate over the
                           middle of the run (the first and last 10 % of the
                           changing span cut) and the frames per 10 ms there
                           (the paced generator's test, host/pktgen/pacegen.c)
  hold IFACE MAX           attach to the tap IFACE as QEMU does (IFF_TAP |
                           IFF_NO_PI: carrier on, frames go to its queue,
                           txqueuelen deep, and are dropped there, counted
                           in tx_dropped, when it is full) and read nothing;
                           prints "listening", then on a line on stdin (or
                           after MAX seconds) reads what waits in the queue
                           and prints that count, `drained`
  stamps IDLE MAX          count the frames app=pkt reflect returns to
                           10.77.0.1:40000 (a UDP socket) until IDLE seconds
                           pass without one (after the first) or MAX seconds;
                           each carries pacegen's send time (offset 54, the
                           low 48 bits of CLOCK_REALTIME ns): prints the
                           count, seq gaps/reorders, the round trips from
                           that stamp to the kernel's receive stamp as
                           percentiles, and how many were out of (0, 1 s)
  mirror IFACE MAX [EDITS]  attach to the tap IFACE as QEMU does and send
                           every numbered frame the host puts on it back
                           with the MACs swapped (a macswap guest), until
                           a trial marker or MAX seconds; EDITS (comma-
                           separated) change that for one number each:
                           drop:N, dup:N (twice), late:N (after N + 1):
                           a wire with known faults for a receiver's count
                           (tests/cases/test_pacegen.py); prints "listening",
                           then what it read, sent back and edited
  tapq IFACE DMAC SPORT... which queue of the multi_queue tap IFACE the
                           kernel's tun puts each flow on (tun's flow hash;
                           QEMU's queue k reads tap queue k): gives IFACE an
                           mq qdisc (a class per tap queue, counting), sends
                           one trial marker (trial number SPORT; app=pkt
                           counts no frame for it) from each UDP SPORT and
                           sees whose class counted it; prints
                           {"queues": {SPORT: queue}}
"""

import json
import os
import re
import select
import socket
import struct
import subprocess
import sys
import time

ETH_P_ALL = 0x0003
PACKET_STATISTICS = 6
PACKET_OUTGOING = 4
PACKET_IGNORE_OUTGOING = 23  # linux/if_packet.h (4.20)
SOL_PACKET = 263  # linux/socket.h (Python exposes no name for it)
HOST_IP, GUEST_IP = "10.77.0.1", "10.77.0.2"
SPORT, DPORT = 40000, 9
MAGIC = b"VNPK"
MARKER = b"VNPT"
PKTGEN_MAGIC = b"\xbe\x9b\xe9\x55"  # net/core/pktgen.c struct pktgen_hdr
FCS = 4  # frame sizes are RFC 2544's (apps/pkt.h): counted, never sent
IMIX = (64, 570, 64, 64, 570, 64, 1518, 64, 570, 64, 570, 64)  # apps/pkt_frame.c pkt_imix


def out(**kw):
    print(json.dumps(kw), flush=True)


def mac_bytes(s):
    return bytes(int(x, 16) for x in s.split(":"))


def if_mac(iface):
    with open(f"/sys/class/net/{iface}/address") as f:
        return mac_bytes(f.read().strip())


def if_stat(iface, name):
    with open(f"/sys/class/net/{iface}/statistics/{name}") as f:
        return int(f.read())


def ip_csum(h):
    s = sum(struct.unpack("!10H", h))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def frame(dmac, smac, seq, size=64, magic=MAGIC):
    """The appliance's generator frame (apps/pkt_frame.c pkt_frame_build) of
    RFC 2544 size `size`: size - 4 bytes, the FCS is the wire's. With magic
    MARKER and seq the trial's number it is a trial marker (apps/pkt.h)."""
    size -= FCS
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, size - 14, 0, 0x4000, 64, 17, 0,
                     socket.inet_aton(HOST_IP), socket.inet_aton(GUEST_IP))
    ip = ip[:10] + struct.pack("!H", ip_csum(ip)) + ip[12:]
    udp = struct.pack("!HHHH", SPORT, DPORT, size - 34, 0)
    payload = magic + struct.pack("!Q", seq)
    f = dmac + smac + b"\x08\x00" + ip + udp + payload
    return f + bytes(size - len(f))


def seq_of(f):
    if len(f) < 54 or f[12:14] != b"\x08\x00" or f[23] != 17 or f[42:46] != MAGIC:
        return None
    return struct.unpack("!Q", f[46:54])[0]


UNNUMBERED = -1  # seq_of_any: a pktgen frame


def seq_of_any(f):
    """seq_of, or UNNUMBERED for a pktgen frame."""
    if len(f) >= 46 and f[12:14] == b"\x08\x00" and f[23] == 17 and f[42:46] == PKTGEN_MAGIC:
        return UNNUMBERED
    return seq_of(f)


class SeqCount:
    def __init__(self):
        self.next = self.frames = self.gaps = self.reorder = self.unnumbered = 0
        self.sizes = {}

    def add(self, seq, size):
        self.frames += 1
        self.sizes[size] = self.sizes.get(size, 0) + 1
        if seq == UNNUMBERED:
            self.unnumbered += 1
        elif seq >= self.next:
            self.gaps += seq - self.next
            self.next = seq + 1
        else:
            self.reorder += 1

    def report(self):
        return {"frames": self.frames, "unnumbered": self.unnumbered, "seq_gaps": self.gaps, "seq_reorder": self.reorder,
                "last_seq": self.next - 1, "sizes": {str(k): v for k, v in sorted(self.sizes.items())}}


def raw_socket(iface):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.bind((iface, ETH_P_ALL))
    return s


def sock_drops(s):
    """Frames the kernel dropped for this packet socket (its buffer was full)."""
    _, drops = struct.unpack("II", s.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8))
    return drops


SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # asm-generic/socket.h; SCM_TIMESTAMPNS is the same


def stamped_recv(s):
    """Kernel receive timestamps on s (SO_TIMESTAMPNS): a function that
    reads one frame as (data, addr, t_ns), t_ns (CLOCK_REALTIME) when the
    frame reached the socket, not when this loop got round to reading it."""
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)

    def recv():
        data, anc, _flags, addr = s.recvmsg(65536, socket.CMSG_SPACE(16))
        for level, kind, v in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(v) >= 16:
                sec, nsec = struct.unpack("qq", v[:16])
                return data, addr, sec * 1000000000 + nsec
        return data, addr, time.time_ns()
    return recv


class Rtt:
    """Round trips of numbered frames: the send time of each number
    (stamps, filled by send_frames) against the kernel's receive stamp."""

    def __init__(self, n):
        self.stamps = [0] * n
        self.ns = []

    def add(self, seq, t_ns):
        if 0 <= seq < len(self.stamps) and self.stamps[seq]:
            self.ns.append(t_ns - self.stamps[seq])
            self.stamps[seq] = 0  # a duplicate is no second round trip

    def report(self):
        v = sorted(self.ns)
        if not v:
            return {"n": 0}

        def pct(p):
            return v[min(len(v) - 1, int(p / 100.0 * len(v)))]
        return {"n": len(v), "p50_ns": pct(50), "p90_ns": pct(90), "p99_ns": pct(99), "p999_ns": pct(99.9),
                "max_ns": v[-1], "mean_ns": round(sum(v) / len(v))}


def drain(s, count, accept, idle, deadline, hdr=0, recv=None, rtt=None, since=None):
    """Read frames into count until idle seconds pass with none accepted
    or the deadline; returns when it stopped. The idle clock starts at
    `since` (a time.monotonic() value), or with the first frame accepted
    when since is None (a receiver waiting for its sender to begin). hdr:
    the header bytes the socket does not return (a UDP socket's 42);
    recv, rtt: read with stamped_recv() and time each numbered frame into
    rtt."""
    last = since
    while True:
        now = time.monotonic()
        if now >= deadline or (last is not None and now - last >= idle):
            return
        r, _, _ = select.select([s], [], [], min(0.1, deadline - now))
        if not r:
            continue
        data, addr, t_ns = recv() if recv else (*s.recvfrom(65536), 0)
        seq = accept(data, addr)
        if seq is not None:
            count.add(seq, hdr + len(data) + FCS)
            if rtt:
                rtt.add(seq, t_ns)
            last = time.monotonic()


def cmd_recv(iface, idle, maxs):
    s = raw_socket(iface)
    count = SeqCount()
    sock_drops(s)  # reading resets the counter: count from here
    print("listening", flush=True)

    def accept(data, addr):
        return None if addr[2] == PACKET_OUTGOING else seq_of_any(data)

    drain(s, count, accept, float(idle), time.monotonic() + float(maxs))
    out(**count.report(), sock_drops=sock_drops(s))
    return 0


def pace(i, t0, rate):
    if rate:
        delay = t0 + i / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)


def send_frames(s, iface, dmac, n, rate, skip, on_idle=None, size="64", stamps=None):
    smac = if_mac(iface)
    sizes = IMIX if size == "imix" else (int(size),)
    dropped0 = if_stat(iface, "tx_dropped")
    sent, seq, t0 = 0, 0, time.monotonic()
    while sent < n:
        if seq == skip:
            seq += 1
            continue
        pace(sent, t0, rate)
        try:
            s.send(frame(dmac, smac, seq, sizes[seq % len(sizes)]))
        except BlockingIOError:
            time.sleep(0.0005)
            continue
        if stamps is not None:
            stamps[seq] = time.time_ns()  # the tap has it: its round trip starts
        sent += 1
        seq += 1
        if on_idle:
            on_idle()
    return {"sent": sent, "tap_tx_dropped": if_stat(iface, "tx_dropped") - dropped0,
            "send_s": round(time.monotonic() - t0, 3)}


def arp_frame(dmac, smac):
    """A 42-byte ARP request (not UDP/IPv4: what a sink counts apart)."""
    return (dmac + smac + b"\x08\x06" + b"\x00\x01\x08\x00\x06\x04\x00\x01" + smac + bytes([10, 77, 0, 1])
            + bytes(6) + bytes([10, 77, 0, 2]))


def cmd_send(iface, dmac, n, rate, skip=-1, other=0):
    """n sequenced frames at rate (skipping number skip), after `other` ARP
    requests."""
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((iface, 0))
    s.settimeout(5)
    for _ in range(int(other)):
        s.send(arp_frame(mac_bytes(dmac), if_mac(iface)))
    out(**send_frames(s, iface, mac_bytes(dmac), int(n), float(rate), int(skip)), other=int(other))
    return 0


class FrameStampRtt(Rtt):
    """Round trips from the send time pacegen wrote into each frame
    (offset 54 of the frame; hdr: the header bytes the socket does not
    return), to the kernel's receive stamp; `last` is the frame just read."""

    def __init__(self, hdr):
        super().__init__(0)
        self.off = 54 - hdr
        self.last = b""

    def add(self, seq, t_ns):
        d = (t_ns - int.from_bytes(self.last[self.off:self.off + 6], "big")) & TS_MASK
        if 0 < d < 1000000000:
            self.ns.append(d)


def pacegen_frames(gen, iface, dmac, n, rate, size, poll_rx, rx):
    """Run pacegen (the path gen) for n frames at rate while poll_rx()
    reads what comes back; what it sent, as send_frames() says it."""
    import subprocess
    if not str(size).isdigit() or rate <= 0:
        raise ValueError(f"pacegen sends one frame size at a rate, not size {size} at {rate}")
    p = subprocess.Popen([gen, "--size", str(size), iface, dmac, str(rate), repr(n / rate)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    end = time.monotonic() + n / rate + 60
    while p.poll() is None and time.monotonic() < end:
        r, _, _ = select.select([rx], [], [], 0.05)
        if r:
            poll_rx()
    if p.poll() is None:
        p.kill()
    out_, err = p.communicate()
    lines = out_.strip().splitlines()
    g = json.loads(lines[-1]) if lines else {}
    if p.returncode or "error" in g or "sent" not in g:
        raise ValueError(f"pacegen exit {p.returncode}: {out_[-300:]} {err[-300:]}")
    return {"sent": g["sent"], "tap_tx_dropped": g["if_tx_dropped"], "send_s": round(g["elapsed_ns"] / 1e9, 3),
            "generator": "pacegen", "gen_refused": g["refused"], "gen_win_10ms": g["win_10ms"]}


def pacegen_swap(gen, iface, dmac, n, rate, wait, size, trial, lat, genopts):
    """swap with MODE macswap and GEN pacegen: pacegen --back paces the
    frames, counts what comes back in the same thread, waits `wait` s and
    sends the marker; its line in send_frames()' terms and `back` as
    SeqCount.report()'s (with its own keys too)."""
    if not str(size).isdigit() or rate <= 0:
        raise ValueError(f"pacegen sends one frame size at a rate, not size {size} at {rate}")
    argv = [gen, "--size", str(size), "--back", "--settle", str(wait), *genopts.split()]
    if trial is not None:
        argv += ["--trial", str(trial)]
    if lat == "1":
        argv.append("--lat")
    argv += [iface, dmac, str(rate), repr(n / rate)]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=n / rate + float(wait) + 90)
    lines = p.stdout.strip().splitlines()
    g = json.loads(lines[-1]) if lines else {}
    if p.returncode or "error" in g or "back" not in g:
        raise ValueError(f"pacegen exit {p.returncode}: {p.stdout[-300:]} {p.stderr[-300:]}")
    res = {"sent": g["sent"], "tap_tx_dropped": g["if_tx_dropped"], "send_s": round(g["elapsed_ns"] / 1e9, 3),
           "generator": "pacegen", "receiver": "pacegen", "gen_refused": g["refused"], "gen_win_10ms": g["win_10ms"],
           "gen_max_lag_ns": g["max_lag_ns"], "gen_sleeps": g["sleeps"]}
    if trial is not None:
        res["marker_s"] = g["marker_s"]
        res["marker_sent"] = g["marker"]
    return res, g["back"]


def cmd_swap(iface, dmac, n, rate, mode, wait=2, size="64", trial=None, lat="0", gen="python", genopts=""):
    if gen != "python" and mode == "macswap":
        res, back = pacegen_swap(gen, iface, dmac, int(n), float(rate), wait, size, trial, lat, genopts)
        out(**res, back=back)
        return 0
    tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    tx.bind((iface, 0))
    tx.settimeout(5)
    count = SeqCount()
    mine = if_mac(iface)
    hdr = 0
    if mode == "macswap":
        rx = raw_socket(iface)
        # Our own frames are not queued to it (a raw socket sees every
        # outgoing frame too): a sender faster than this loop otherwise
        # fills its buffer with them and its drop count is theirs (found
        # with pacegen: 263,523 "drops" for 31,471 frames lost).
        rx.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        sock_drops(rx)

        def accept(data, addr):
            if addr[2] == PACKET_OUTGOING or data[:6] != mine:
                return None
            return seq_of(data)
    elif mode == "reflect":
        rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        rx.bind((HOST_IP, SPORT))
        hdr = 42  # Ethernet, IPv4, UDP: the socket returns the payload

        def accept(data, addr):
            if addr != (GUEST_IP, DPORT) or data[:4] != MAGIC:
                return None
            return struct.unpack("!Q", data[4:12])[0]
    else:
        out(error=f"unknown mode {mode}")
        return 1
    rtt = (Rtt(int(n)) if gen == "python" else FrameStampRtt(hdr)) if lat == "1" else None
    recv = stamped_recv(rx) if rtt else None
    if rtt and gen != "python":
        stamped = recv

        def recv():
            data, addr, t_ns = stamped()
            rtt.last = data
            return data, addr, t_ns
    rx.setblocking(False)

    def poll_rx():
        # At most a burst per frame sent: frames arriving as fast as this
        # loop reads them would otherwise keep it here and stop the sender
        # (drain() reads the rest at the end).
        for _ in range(64):
            try:
                data, addr, t_ns = recv() if recv else (*rx.recvfrom(65536), 0)
            except BlockingIOError:
                return
            seq = accept(data, addr)
            if seq is not None:
                count.add(seq, hdr + len(data) + FCS)
                if rtt:
                    rtt.add(seq, t_ns)

    if gen == "python":
        res = send_frames(tx, iface, mac_bytes(dmac), int(n), float(rate), -1, poll_rx, size,
                          rtt.stamps if rtt else None)
    else:
        res = pacegen_frames(gen, iface, dmac, int(n), float(rate), size, poll_rx, rx)
    rx.setblocking(True)
    # WAIT seconds after the last frame sent, or after the last one back,
    # whichever is later. The idle clock starts now, not at the first frame
    # drain() itself reads: when every frame came back while sending (a slow
    # trial, each reply read by poll_rx()), drain() reads none, and it used
    # to wait out its 30 s deadline before the marker went out; a guest
    # with a shorter idle bound (the NDR search's 10 s) had ended by then,
    # so the marker and the next trial met a tap nobody read (the "RX stall
    # on tap" of 2026-12-04, docs/packet-path.md).
    t_sent = time.monotonic()
    drain(rx, count, accept, float(wait), t_sent + 30, hdr, recv, rtt, since=t_sent)
    if count.frames == 0:
        rx.setblocking(False)  # what is there, never a wait: nothing may come back
        poll_rx()
    if trial is not None:
        # After everything came back: the guest prints what it counted.
        tx.send(frame(mac_bytes(dmac), mine, int(trial), 64, MARKER))
        res["marker_s"] = round(time.monotonic() - t_sent, 3)  # after the last frame sent
    rep = count.report()
    if rtt:
        rep["rtt"] = rtt.report()
    if mode == "macswap":
        rep["sock_drops"] = sock_drops(rx)
    else:
        with open("/proc/net/snmp") as f:
            rows = [l.split() for l in f if l.startswith("Udp:")]
        udp = dict(zip(rows[0][1:], map(int, rows[1][1:])))
        rep["udp_rcvbuf_errors"] = udp.get("RcvbufErrors", 0)
    out(**res, back=rep)
    return 0


def cmd_rate(iface, idle, maxs):
    def count():
        return if_stat(iface, "tx_packets") + if_stat(iface, "tx_dropped")

    c0, t_start = count(), time.monotonic()
    samples = [(t_start, c0)]
    first = last = None  # the first and last sample that saw a change
    print("listening", flush=True)
    while True:
        time.sleep(0.01)
        t, c = time.monotonic(), count()
        if c != samples[-1][1]:
            first = len(samples) - 1 if first is None else first  # the sample before the change
            last = len(samples)
        samples.append((t, c))
        if t - t_start >= float(maxs) or (last is not None and t - samples[last][0] >= float(idle)):
            break
    if first is None:
        out(frames=0, pps=0, windows={})
        return 0
    span = samples[last][0] - samples[first][0]
    mid = [s for s in samples[first:last + 1] if samples[first][0] + span / 10 <= s[0] <= samples[last][0] - span / 10]
    if len(mid) < 3:
        out(frames=samples[last][1] - c0, pps=0, windows={}, error="run too short for a middle")
        return 1
    pps = (mid[-1][1] - mid[0][1]) / (mid[-1][0] - mid[0][0])
    # Frames per 10 ms, each interval scaled to exactly 10 ms (a sleep wakes late).
    w = sorted((b[1] - a[1]) * 0.01 / (b[0] - a[0]) for a, b in zip(mid, mid[1:]))
    mean = sum(w) / len(w)
    out(frames=samples[last][1] - c0, span_s=round(span, 4), pps=round(pps, 1),
        windows={"n": len(w), "mean": round(mean, 1), "sd": round((sum((x - mean) ** 2 for x in w) / len(w)) ** 0.5, 1),
                 "min": round(w[0]), "p1": round(w[len(w) // 100]), "p50": round(w[len(w) // 2]),
                 "p99": round(w[-1 - len(w) // 100]), "max": round(w[-1])})
    return 0


TUNSETIFF, IFF_TAP, IFF_NO_PI = 0x400454CA, 0x0002, 0x1000  # linux/if_tun.h


def cmd_hold(iface, maxs):
    import fcntl
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", iface.encode(), IFF_TAP | IFF_NO_PI))
    print("listening", flush=True)
    select.select([sys.stdin], [], [], float(maxs))
    drained = 0
    while True:
        try:
            os.read(fd, 65536)
        except BlockingIOError:
            break
        drained += 1
    out(drained=drained)
    return 0


TS_MASK = (1 << 48) - 1


def cmd_stamps(idle, maxs):
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    rx.bind((HOST_IP, SPORT))
    recv = stamped_recv(rx)
    count, rtt, bad = SeqCount(), [], 0
    print("listening", flush=True)

    def accept(data, addr):
        nonlocal bad
        if addr != (GUEST_IP, DPORT) or data[:4] != MAGIC or len(data) < 18:
            return None
        return struct.unpack("!Q", data[4:12])[0]

    class Stamps:  # drain()'s rtt: the send time is in the frame, not a table
        last = None

        def add(self, seq, t_ns):
            nonlocal bad
            d = (t_ns - int.from_bytes(Stamps.last[12:18], "big")) & TS_MASK
            if 0 < d < 1000000000:
                rtt.append(d)
            else:
                bad += 1

    def rd():
        data, addr, t_ns = recv()
        Stamps.last = data
        return data, addr, t_ns

    drain(rx, count, accept, float(idle), time.monotonic() + float(maxs), 42, rd, Stamps())
    r = Rtt(0)
    r.ns = rtt
    out(**count.report(), rtt=r.report(), stamp_out_of_range=bad)
    return 0


def cmd_mirror(iface, maxs, edits=""):
    import fcntl
    todo = {}
    for e in filter(None, edits.split(",")):
        kind, _, num = e.partition(":")
        if kind not in ("drop", "dup", "late") or not num.isdigit():
            out(error=f"bad edit {e!r} (drop:N, dup:N, late:N)")
            return 1
        todo[int(num)] = kind
    fd = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", iface.encode(), IFF_TAP | IFF_NO_PI))
    print("listening", flush=True)
    got = back = 0
    done, held = [], {}
    deadline = time.monotonic() + float(maxs)
    while time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], 0.1)
        if not r:
            continue
        f = os.read(fd, 65536)
        if len(f) >= 54 and f[42:46] == MARKER:
            break
        seq = seq_of(f)
        if seq is None:
            continue
        got += 1
        f = f[6:12] + f[:6] + f[12:]
        kind = todo.pop(seq, None)
        copies = {"drop": 0, "dup": 2, "late": 0}.get(kind, 1)
        if kind == "late":
            held[seq + 1] = f
        for _ in range(copies):
            os.write(fd, f)
            back += 1
        if seq in held:  # the one held back goes after this one
            os.write(fd, held.pop(seq))
            back += 1
        if kind:
            done.append(f"{kind}:{seq}")
    out(read=got, sent_back=back, edited=done, not_seen=sorted(f"{k}:{n}" for n, k in todo.items()))
    return 0


def tap_class_packets(iface):
    """Packets each tap queue's mq class sent: {queue: packets}, from
    `tc -s class show` (iproute2 6.1 prints mq classes as text even with
    -j): "class mq 1:N root" then " Sent B bytes P pkt", class 1:N being
    tap queue N-1 (hex)."""
    r = subprocess.run(["tc", "-s", "class", "show", "dev", iface], capture_output=True, text=True, timeout=10,
                       check=True)
    got = {}
    for m in re.finditer(r"^class mq 1:([0-9a-f]+) .*\n\s*Sent \d+ bytes (\d+) pkt", r.stdout, re.M):
        got[int(m.group(1), 16) - 1] = int(m.group(2))
    return got


def cmd_tapq(iface, dmac, *sports):
    subprocess.run(["tc", "qdisc", "replace", "dev", iface, "root", "handle", "1:", "mq"], capture_output=True,
                   text=True, timeout=10, check=True)
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((iface, 0))
    s.settimeout(5)
    queues = {}
    for sport in sports:
        f = bytearray(frame(mac_bytes(dmac), if_mac(iface), int(sport), magic=MARKER))
        f[34:36] = struct.pack("!H", int(sport))
        before = tap_class_packets(iface)
        s.send(bytes(f))
        deadline = time.monotonic() + 2
        while True:
            moved = [q for q, n in tap_class_packets(iface).items() if n != before.get(q, 0)]
            if len(moved) == 1:
                queues[sport] = moved[0]
                break
            if moved or time.monotonic() > deadline:
                out(error=f"sport {sport}: tap queues that counted the frame: {moved}")
                return 1
            time.sleep(0.01)
    out(queues=queues)
    return 0


def main(argv):
    cmds = {"recv": cmd_recv, "send": cmd_send, "swap": cmd_swap, "rate": cmd_rate, "stamps": cmd_stamps,
            "hold": cmd_hold, "tapq": cmd_tapq, "mirror": cmd_mirror}
    if len(argv) < 2 or argv[1] not in cmds:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        return cmds[argv[1]](*argv[2:])
    except (OSError, ValueError, TypeError, subprocess.SubprocessError) as e:
        out(error=f"{type(e).__name__}: {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
