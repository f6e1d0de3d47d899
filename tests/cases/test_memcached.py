"""app=memcached against stock clients over a tap in a namespace: the
libmemcached conformance suite (memccapable), memcaslap with data
verification, hostile protocol input, and LRU eviction in a small store."""

import json
import os
import re
import subprocess
import sys

from lib import BUILD, NS_GUEST_IP, NS_PREFIX, TOP, Fail, json_line

sys.path.insert(0, os.path.join(TOP, "host", "bench"))
import mcload  # noqa: E402  (the harness's memcaslap parser)

MCPEER = [sys.executable, os.path.join(TOP, "tests", "tools", "mcpeer.py")]
NETPEER = [sys.executable, os.path.join(TOP, "tests", "tools", "netpeer.py")]
PORT = 11211
LISTENING = r"^memcached listening tcp=11211 mem_mib=(\d+) pages=(\d+)"

# memccapable's ascii tests (libmemcached-tools 1.1.4, `memccapable -a`);
# every one must be run and pass. Its binary tests are not run: the
# appliance speaks the text protocol only (memcaslap, the load generator,
# uses text by default), see docs/memcached.md.
ASCII_TESTS = ("version", "quit", "verbosity", "set", "set noreply", "get", "gets", "mget", "flush",
               "flush noreply", "add", "add noreply", "replace", "replace noreply", "cas", "cas noreply",
               "delete", "delete noreply", "incr", "incr noreply", "decr", "decr noreply", "append",
               "append noreply", "prepend", "prepend noreply", "stat")


def serve(t, ns, extra=""):
    g = t.start(append=f"app=memcached ip={NS_GUEST_IP}/{NS_PREFIX} backend=tap memcached.seconds=120 {extra}",
                net=f"tap:{ns.tap}", ns=ns, timeout=150)
    g.wait_line(LISTENING, timeout=30)
    return g


def stop(t, ns, g):
    ns.run(NETPEER + ["stop", NS_GUEST_IP], timeout=20, capture_output=True)
    g.wait()
    g.expect_ok()
    return json_line(g, "RESULT")


def talk(ns, steps):
    r = ns.run(MCPEER + ["talk", NS_GUEST_IP, str(PORT)], input=json.dumps(steps), timeout=120,
               capture_output=True, text=True)
    if not r.stdout.strip():
        raise Fail(f"mcpeer printed nothing: {r.stderr.strip()[-300:]}")
    out = json.loads(r.stdout.strip().splitlines()[-1])
    if not out["ok"]:
        raise Fail(f"mcpeer: {out['error']} (replies so far: {out['replies']})")
    return out["replies"]


def check_result(r, min_txn):
    if r["test"] != "memcached" or r["role"] != "server":
        raise Fail(f"expected a memcached server RESULT, saw {r}")
    if r["transactions"] < min_txn:
        raise Fail(f"expected at least {min_txn} commands in the RESULT, saw {r['transactions']}")
    if r["write_failures"] or r["conns_refused"]:
        raise Fail(f"replies lost: write_failures={r['write_failures']} conns_refused={r['conns_refused']}")


def test_parser_and_store_unit(t):
    """tests/memcached/test_mc_unit.c on the host (ASan + UBSan): the parser
    fed in pieces of every size, expiry on a fake clock, back-pressure with
    a small send buffer, eviction next to a reply in progress."""
    exe = os.path.join(BUILD, "mc_unit", "test_mc_unit")
    os.makedirs(os.path.dirname(exe), exist_ok=True)
    cc = ["gcc", "-std=gnu11", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-fsanitize=address,undefined",
          "-fno-sanitize-recover=all", "-I", TOP, os.path.join(TOP, "tests", "memcached", "test_mc_unit.c"),
          os.path.join(TOP, "apps", "memcached_proto.c"), os.path.join(TOP, "apps", "memcached_store.c"), "-o", exe]
    r = subprocess.run(cc, capture_output=True, text=True, timeout=120)
    if r.returncode:
        raise Fail(f"building the memcached unit test failed:\n{r.stderr[-2000:]}")
    r = subprocess.run([exe], capture_output=True, text=True, timeout=120)
    last = (r.stdout.strip().splitlines() or [""])[-1]
    if r.returncode or not re.fullmatch(r"mc_unit: \d+ checks, 0 failed", last):
        raise Fail(f"memcached unit test: status {r.returncode}\n{(r.stdout + r.stderr)[-3000:]}")
    print("    " + last)


def test_memccapable_ascii(t):
    with t.netns() as ns:
        g = serve(t, ns)
        r = ns.run(["memccapable", "-h", NS_GUEST_IP, "-p", str(PORT), "-a", "-v", "-t", "10"], timeout=120,
                   capture_output=True, text=True)
        out = r.stdout + r.stderr
        res = stop(t, ns, g)
        passed = set(re.findall(r"^ascii (.+?)\s+\[pass\]", out, re.M))
        missing = [n for n in ASCII_TESTS if n not in passed]
        if r.returncode != 0 or missing or "All tests passed" not in out:
            raise Fail(f"memccapable -a: status {r.returncode}, not passed: {missing}\n{out[-1500:]}")
        check_result(res, 50)


def test_memcaslap_verify(t):
    with t.netns() as ns:
        g = serve(t, ns)
        r = ns.run(["memcaslap", "-s", f"{NS_GUEST_IP}:{PORT}", "-c", "32", "-T", "2", "-t", "3s",
                    "-S", "3s", "--verify=0.2"], timeout=60, capture_output=True, text=True)
        res = stop(t, ns, g)
        out = r.stdout
        fig = dict(re.findall(r"^(cmd_get|cmd_set|get_misses|verify_misses|verify_failed): (\d+)$", out, re.M))
        if r.returncode != 0 or len(fig) != 5:
            raise Fail(f"memcaslap: status {r.returncode}, figures {fig}\n{out[-800:]}{r.stderr[-300:]}")
        fig = {k: int(v) for k, v in fig.items()}
        if fig["cmd_get"] < 1000 or fig["verify_failed"] or fig["verify_misses"] or fig["get_misses"]:
            raise Fail(f"memcaslap --verify=0.2: expected >= 1000 gets, no misses or failed verifications, saw {fig}")
        # memcaslap counts the requests it sent; the last window of them may
        # still be in flight when its time is up
        check_result(res, (fig["cmd_get"] + fig["cmd_set"]) * 9 // 10)
        if res["get_misses"] or not fig["cmd_get"] * 9 // 10 <= res["cmd_get"] <= fig["cmd_get"]:
            raise Fail(f"guest saw {res['cmd_get']} gets ({res['get_misses']} misses), memcaslap sent {fig['cmd_get']}")
        # the harness reads the same output: its figures must be memcaslap's
        p = mcload.parse_memcaslap(out.splitlines())
        tps = re.search(r"TPS: (\d+)", out)
        if (not tps or p.get("peer_tps") != float(tps.group(1)) or p.get("peer_cmd_get") != fig["cmd_get"]
                or not 0 < p.get("peer_lat_p50_ns", 0) <= p.get("peer_lat_p99_ns", 0)
                or not p.get("peer_lat_events", 0) >= fig["cmd_get"] * 9 // 10):
            raise Fail(f"mcload.parse_memcaslap read {p} from memcaslap's output")
        print(f"    memcaslap -c 32 -T 2: {tps.group(1) if tps else '?'} TPS, guest "
              f"{res['tps']:.0f} commands/s, kicks/txn {res['kicks_per_txn']} (TCG, tap)")


def test_bad_input_gets_errors_and_service_continues(t):
    long_key = "x" * 251
    steps = [
        # oversized key: refused, its value block discarded (not read as commands)
        ({"send": f"set {long_key} 0 0 3\r\nabc\r\n", "until": "\r\n"}, "CLIENT_ERROR bad command line format\r\n"),
        ({"send": f"get {long_key}\r\n", "until": "\r\n"}, "CLIENT_ERROR bad command line format\r\n"),
        # bad lengths
        ({"send": "set k 0 0 -1\r\n", "until": "\r\n"}, "CLIENT_ERROR bad command line format\r\n"),
        ({"send": "set k 0 0 abc\r\n", "until": "\r\n"}, "CLIENT_ERROR bad command line format\r\n"),
        ({"send": "set k 0 0 3\r\nabcde\r\n", "until": "ERROR\r\n"}, "CLIENT_ERROR bad data chunk\r\nERROR\r\n"),
        ({"send": "set big 0 0 2000000\r\n" + "z" * 2000000 + "\r\n", "until": "\r\n"},
         "SERVER_ERROR object too large for cache\r\n"),
        # garbage and a line longer than any command
        ({"send": "\x01\x02garbage \xff here\r\n", "until": "\r\n"}, "ERROR\r\n"),
        ({"send": "a" * 20000 + "\r\n", "until": "\r\n"}, "CLIENT_ERROR line too long\r\n"),
        ({"send": "\r\n", "until": "\r\n"}, "ERROR\r\n"),
        # one command split across four segments, in the line and in the value
        ({"send": "se", "pause": 0.1}, ""),
        ({"send": "t split 5 0 5\r\nhel", "pause": 0.1}, ""),
        ({"send": "lo\r", "pause": 0.1}, ""),
        ({"send": "\n", "until": "\r\n"}, "STORED\r\n"),
        ({"send": "get sp", "pause": 0.1}, ""),
        ({"send": "lit nothere split\r\n", "until": "END\r\n"},
         "VALUE split 5 5\r\nhello\r\nVALUE split 5 5\r\nhello\r\nEND\r\n"),
        ({"send": "incr split 1\r\n", "until": "\r\n"},
         "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"),
        ({"send": "incr split x\r\n", "until": "\r\n"}, "CLIENT_ERROR invalid numeric delta argument\r\n"),
        # still serving: this connection (pipelined) and a new one
        ({"send": "set n 0 0 2\r\n10\r\nincr n 5\r\ndecr n 100\r\ngets n\r\n", "until": "END\r\n"},
         "STORED\r\n15\r\n0\r\nVALUE n 0 1 "),
        ({"send": "get split\r\n", "until": "END\r\n", "conn": 1}, "VALUE split 5 5\r\nhello\r\nEND\r\n"),
        # a binary-protocol request (magic 0x80, "version"): refused by name, closed
        ({"send": "\x80\x0b" + "\x00" * 22, "until": "\r\n", "conn": 2},
         "SERVER_ERROR binary protocol not supported\r\n"),
        ({"send": "get n\r\n", "until": "END\r\n", "conn": 3}, "VALUE n 0 1\r\n0\r\nEND\r\n"),
    ]
    with t.netns() as ns:
        g = serve(t, ns)
        replies = talk(ns, [s for s, _ in steps])
        res = stop(t, ns, g)
        for (step, want), got in zip(steps, replies):
            ok = got.startswith(want) if want.endswith(" ") else got == want
            if not ok:
                raise Fail(f"sent {step['send'][:60]!r}...: expected reply {want!r}, got {got[:200]!r}")
        if (res["client_errors"] != 8 or res["server_errors"] != 1 or res["unknown_commands"] != 3
                or res["binary_refused"] != 1):
            raise Fail(f"expected the errors counted in the RESULT, saw {res}")


def test_lru_eviction_in_fixed_memory(t):
    # 4 MiB holds 3 pages of ~1 MiB; 6000 values of 1000 bytes need ~6.5 MiB,
    # so the oldest must go and every survivor must be intact
    count, size = 6000, 1000
    with t.netns() as ns:
        g = serve(t, ns, "memcached.mem=4")
        r = ns.run(MCPEER + ["fill", NS_GUEST_IP, str(PORT), str(count), str(size)], timeout=120,
                   capture_output=True, text=True)
        res = stop(t, ns, g)
        if r.returncode != 0 or not r.stdout.strip():
            raise Fail(f"mcpeer fill failed: {r.stderr[-500:]}")
        f = json.loads(r.stdout.strip().splitlines()[-1])
        if f["bad"] or not 1000 < f["hits"] < count or f["last_miss"] + 1 != f["first_hit"]:
            raise Fail(f"expected the newest items intact and exactly the oldest evicted, saw {f}")
        if res["evictions"] != f["misses"] or res["curr_items"] != f["hits"]:
            raise Fail(f"guest counted {res['evictions']} evictions / {res['curr_items']} items, "
                       f"client saw {f['misses']} misses / {f['hits']} hits")


def test_linux_guest_serves_stock_memcached(t):
    """The harness's Linux column for the memcached test: the stock guest
    booted with the harness's own command line runs stock memcached, which
    passes the same conformance suite; its RESULT counts virtio interrupts."""
    import backends
    import guests
    import matrix

    r = subprocess.run([os.path.join(TOP, "host", "linux-guest", "build.sh")], capture_output=True, text=True,
                       timeout=1200)
    if r.returncode:
        raise Fail(f"host/linux-guest/build.sh failed ({r.returncode}): {(r.stdout + r.stderr)[-1200:]}")
    from lib import Guest

    with t.netns() as ns:
        m = matrix.Matrix({"guests": "linux", "tests": "memcached", "accel": "tcg", "seconds": "2", "warmup": "0"},
                          {"default": ""}, lambda v: None, list(guests.KINDS))
        lin = guests.make("linux", m, lambda s: None)
        lin.prepare()
        run = m.runs()[0]
        argv, cmdline, _ = lin.argv(run, backends.make("tap", "tap", {}), 120)
        argv = [a.replace(f"ifname={backends.TAP}", f"ifname={ns.tap}") for a in argv]
        g = Guest(ns.exec_argv(argv), 120, t.name)
        t.guests.append(g)
        g.wait_line(r"^vnetlab-linux listening tcp port=11211 app=memcached$", timeout=90)
        r = ns.run(["memccapable", "-h", NS_GUEST_IP, "-p", str(PORT), "-a", "-t", "10"], timeout=120,
                   capture_output=True, text=True)
        g.wait()
        out = r.stdout + r.stderr
        if r.returncode != 0 or "All tests passed" not in out:
            raise Fail(f"memccapable -a against stock memcached in the linux guest: status {r.returncode}\n{out[-1200:]}")
        res = json.loads(g.expect(r"^RESULT (\{.*\})$").group(1))
        if res.get("app") != "memcached" or res.get("test") != "memcached" or not res.get("virtio_irqs"):
            raise Fail(f"linux RESULT: expected app/test memcached and virtio interrupts counted, saw {res}")
        if g.status != 0:
            raise Fail(f"the linux guest must power off cleanly, QEMU status {g.status}")


def test_bench_matrices_expand(t):
    """host/bench/matrices/memcached.txt and pairs.txt parse and expand to
    the runs the README tables were measured with (no QEMU)."""
    import guests
    import matrix
    import pairs
    import variants

    s, defs = matrix.parse_file(os.path.join(TOP, "host", "bench", "matrices", "memcached.txt"))
    m = matrix.Matrix(s, defs, variants.resolve, list(guests.KINDS))
    runs = m.runs()
    got = sorted({(r.column, r.params["instances"], r.params["threads"]) for r in runs})
    # The 2014 mail's C=128, T=8 among them; the fair Linux column too.
    want = sorted((c, n, t) for c in ("appliance", "linux", "linux:best", "loopback") for n in (16, 128)
                  for t in (2, 8))
    if got != want or len(runs) != 4 * len(want) or {r.test for r in runs} != {"memcached"}:
        raise Fail(f"matrices/memcached.txt expands to {got} x {len(runs)} runs, expected {want} x 4")
    # One table per -T: the report's group key and title keep them apart.
    import report
    keys = {report.group_key(dict(test="memcached", backend="tap", instances=16, threads=t, seconds=5))
            for t in (2, 8)}
    titles = sorted(report.group_title(k) for k in keys)
    if len(keys) != 2 or not titles[1].endswith("memcaslap -T 8 -- backend tap"):
        raise Fail(f"memcaslap -T 2 and -T 8 must be two tables, report says {titles}")
    ps, pdefs = pairs.parse_matrix(os.path.join(TOP, "host", "bench", "matrices", "pairs.txt"))
    sides = {x for p in pairs.words(ps["pairs"]) for x in p.split(">")}
    if sides != {"default", "base", "v2", "linux"} or set(pdefs) != {"base", "v2"}:
        raise Fail(f"matrices/pairs.txt: sides {sides}, variants {pdefs}")
    try:
        matrix.Matrix(dict(s, **{"memcached.threads": "32", "memcached.concurrency": "16"}), defs, variants.resolve,
                      list(guests.KINDS))
    except Exception as e:  # BenchError: -T above -c is refused by name
        if "memcached.threads" not in str(e):
            raise Fail(f"memcaslap -T > -c refused with the wrong reason: {e}")
    else:
        raise Fail("memcached.threads > memcached.concurrency was accepted")
