"""The control port (apps/lib/ctl.c, issue 23 finding 7): only a request that
carries the run's token is obeyed; anything else is counted and ignored;
ctl=off opens no port; bad values are refused before the app runs."""

import json
import sys

from lib import NETPEER, NS_GUEST_IP, NS_PREFIX, Fail, echo_guest, json_line, netpeer

PROBE = r"""
import json, socket, sys
# Each datagram on its own connected socket: a reply, an ICMP port
# unreachable (ConnectionRefusedError) or silence, per request.
seen = []
for msg in json.loads(sys.argv[1]):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(1.0)
    s.connect((sys.argv[2], 9999))
    s.send(msg.encode())
    try:
        seen.append(s.recv(64).decode())
    except socket.timeout:
        seen.append("silence")
    except ConnectionRefusedError:
        seen.append("refused")
    s.close()
print(json.dumps(seen), flush=True)
"""


def probe(ns, msgs):
    r = ns.run([sys.executable, "-c", PROBE, json.dumps(msgs), NS_GUEST_IP], timeout=60, capture_output=True,
               text=True)
    if r.returncode:
        raise Fail(f"control-port probe failed: {r.stderr[-400:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def udp_echo_ok(ns):
    r = ns.run([sys.executable, "-c", "import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
                f"s.settimeout(3); s.sendto(b'alive', ('{NS_GUEST_IP}', 7)); print(s.recv(16).decode())"],
               timeout=20, capture_output=True, text=True)
    return r.stdout.strip() == "alive"


def test_requests_without_the_token_are_counted_and_ignored(t):
    with t.netns() as ns:
        g = echo_guest(t, ns)
        tok = t.ctl_token
        bad = ["stop", "stop ", f"stop {tok[:-1]}", f"stop {tok}x", f"stop {'0' * len(tok)}", f"stop{tok}",
               f"pools {tok[::-1]}", f"{tok} stop"]
        seen = probe(ns, bad)
        if seen != ["silence"] * len(bad):
            raise Fail(f"requests without the right token must get no answer at all: {list(zip(bad, seen))}")
        if not udp_echo_ok(ns):
            raise Fail("after the refused stops the echo service no longer answers: a stop without the token "
                       "was obeyed")
        g.wait_line(r"^ctl: request from 10\.77\.0\.1:\d+ without the right token ignored", timeout=5)
        # The right token, with a trailing newline as `echo stop TOKEN | nc -u` sends it.
        good = probe(ns, [f"pools {tok}\n", f"bogus {tok}"])
        if good != ["ok\n", "?"]:
            raise Fail(f"with the token: expected 'ok' to pools and '?' to an unknown command, saw {good}")
        netpeer(ns, ["stop", NS_GUEST_IP], timeout=20)
        g.wait()
        g.expect_ok()
        res = json_line(g, "RESULT")
        ctl = json_line(g, "CTL")
        want = {"port": 9999, "requests": len(bad) + 3, "ok": 2, "unknown": 1, "denied": len(bad)}
        if ctl != want or res["stopped_by"] != "ctl":
            raise Fail(f"expected CTL {want} and stopped_by ctl, saw CTL {ctl}, RESULT {res}")
        print(f"    {len(bad)} requests without the right token ignored (no reply) and counted: CTL {ctl}")


def test_ctl_off_opens_no_port(t):
    with t.netns() as ns:
        g = echo_guest(t, ns, seconds=4, args="ctl=off")
        if not g.expect(r"^echo listening .* ctl=off "):
            raise Fail("listening line does not say ctl=off")
        seen = probe(ns, [f"stop {t.ctl_token}", "state"])
        if seen != ["refused", "refused"]:
            raise Fail(f"ctl=off: expected ICMP port unreachable for every datagram to 9999, saw {seen}")
        if not udp_echo_ok(ns):
            raise Fail("ctl=off: the echo service stopped answering")
        g.wait()
        g.expect_ok()
        res = json_line(g, "RESULT")
        if res["stopped_by"] != "time" or any(l.startswith("CTL ") for l in g.text()):
            raise Fail(f"ctl=off: expected the run to end at echo.seconds without a CTL line, RESULT {res}")
        st = json_line(g, "LWIPSTATS")
        if st["udp_drop"] < 2:
            raise Fail(f"ctl=off: the 2 datagrams to the closed port should count as udp_drop, saw {st['udp_drop']}")
        print(f"    ctl=off: 2 datagrams to UDP 9999 refused (ICMP port unreachable, udp_drop={st['udp_drop']}), "
              f"run ended by time")


def test_made_up_token_without_ctl_token(t):
    """No ctl.token=: the appliance makes one up and prints it, so only
    whoever reads the console can stop the run."""
    with t.netns() as ns:
        g = echo_guest(t, ns, args="ctl=on")
        tok = g.wait_line(r"^ctl udp=9999 token=([0-9a-f]{32}) \(made up: no ctl\.token= given\)", timeout=5).group(1)
        if probe(ns, [f"stop {t.ctl_token}"]) != ["silence"]:
            raise Fail("a token the appliance was not given must not work")
        r = ns.run(["env", f"VNETLAB_CTL_TOKEN={tok}"] + NETPEER + ["stop", NS_GUEST_IP], timeout=20,
                   capture_output=True, text=True)
        if r.returncode:
            raise Fail(f"stop with the printed token failed: {r.stdout}{r.stderr}")
        g.wait()
        g.expect_ok()
        print(f"    made-up token printed on the console works; the test's own token was ignored")


def test_bad_ctl_values_are_refused(t):
    for args, msg in (
        ("ctl=maybe", r"bad value 'maybe' for key 'ctl' \(expected on\|off\)"),
        ("ctl.token=short", r"bad value for key 'ctl.token' \(expected 16\.\.64 characters of A-Z a-z 0-9 \. _ -, "
                            r"got 5\)"),
        ("ctl.token=" + "x" * 65, r"bad value for key 'ctl.token' \(expected 16\.\.64 .*got 65\)"),
        ("ctl.token=0123456789abcdef/", r"bad value for key 'ctl.token' .*got 17\)"),
        ("ctl=off ctl.token=0123456789abcdef", r"key 'ctl.token' applies to ctl=on only"),
    ):
        g = t.boot(append=f"app=echo ip={NS_GUEST_IP}/{NS_PREFIX} {args}", timeout=30)
        g.expect_usage_error(msg)
        errors = [l for l in g.text() if l.startswith("ERROR")]
        if "ctl.token=" in args and any(args.split("ctl.token=")[1] in l for l in errors):
            raise Fail(f"the ERROR line echoes the token's value (a secret): {errors}")
