"""procs.py: starting, watching and ending the processes a run needs.

Every process the harness starts gets its own session (setsid), so all of
its descendants -- including those that move to their own process group,
as coreutils `timeout` inside host/qemu-run.sh does -- can be found again by
session id and ended by PID. Nothing else on the machine is ever signalled.
Every blocking call has a timeout.
"""

import os
import queue
import shutil
import signal
import subprocess
import threading
import time


class BenchError(Exception):
    """A refusal or failure the user can act on; the message names the fix."""


# Host tools and the Debian package that provides each.
TOOL_PACKAGES = {
    "ip": "iproute2",
    "qemu-system-x86_64": "qemu-system-x86",
    "sockperf": "sockperf",
    "iperf": "iperf",
    "ping": "iputils-ping",
    "taskset": "util-linux",
    "unshare": "util-linux",
    "dpdk-testpmd": "dpdk-dev",
    "make": "make",
    "gcc": "gcc",
    "timeout": "coreutils",
}


def require_tools(tools):
    """Refuse clearly when a host tool is missing, naming its Debian package."""
    missing = sorted({t for t in tools if not shutil.which(t)})
    if missing:
        pkgs = sorted({TOOL_PACKAGES.get(t, t) for t in missing})
        raise BenchError(
            f"missing host tool(s) {', '.join(missing)}: install Debian package(s) "
            f"{' '.join(pkgs)} (as root: apt-get install -y {' '.join(pkgs)}, or `make deps`)"
        )


def run(argv, timeout, check=True, **kw):
    """subprocess.run with a mandatory timeout and a readable failure."""
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)
    except subprocess.TimeoutExpired:
        raise BenchError(f"`{' '.join(argv)}` did not finish within {timeout}s")
    if check and r.returncode:
        raise BenchError(f"`{' '.join(argv)}` failed ({r.returncode}): {(r.stderr or r.stdout).strip()[-400:]}")
    return r


def _stat_fields(pid):
    """Fields of /proc/PID/stat after the command name (field 3 is index 0)."""
    with open(f"/proc/{pid}/stat") as f:
        s = f.read()
    return s[s.rindex(")") + 2:].split()


def session_members(sid):
    """PIDs whose session id is sid (the leader included)."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            if int(_stat_fields(d)[3]) == sid:
                pids.append(int(d))
        except (OSError, ValueError, IndexError):
            continue
    return pids


def descendants(pid):
    """PID and all its descendants, found through the ppid field."""
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            children.setdefault(int(_stat_fields(d)[1]), []).append(int(d))
        except (OSError, ValueError, IndexError):
            continue
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def kill_session(sid, grace=2.0):
    """End every process of session sid: SIGTERM, then SIGKILL after grace."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        members = session_members(sid)
        if not members:
            return
        for p in members:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
        end = time.monotonic() + grace
        while time.monotonic() < end and session_members(sid):
            time.sleep(0.05)


# Every Proc not yet stopped, so that an interrupted harness can end them
# all on its way out (vnetbench.py), whatever was half set up.
LIVE = set()


def stop_all():
    for p in list(LIVE):
        p.stop()


class Proc:
    """A started process in its own session, its output read line by line
    with host timestamps, ended (with its whole session) by stop()."""

    def __init__(self, name, argv, stdin=subprocess.DEVNULL, env=None, keep_stdin=False):
        self.name = name
        self.argv = argv
        self.lines = []  # (monotonic time, stream, text)
        self._q = queue.Queue()
        self.t0 = time.monotonic()
        try:
            self.p = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE if keep_stdin else stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                env=env,
            )
        except OSError as e:
            raise BenchError(f"cannot start {name} (`{' '.join(argv)}`): {e}")
        self.pid = self.p.pid
        LIVE.add(self)
        self._threads = [
            threading.Thread(target=self._read, args=(self.p.stdout, "out"), daemon=True),
            threading.Thread(target=self._read, args=(self.p.stderr, "err"), daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _read(self, f, stream):
        for raw in iter(f.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            item = (time.monotonic(), stream, line)
            self.lines.append(item)
            self._q.put(item)
        self._q.put((time.monotonic(), stream, None))

    def wait_line(self, pred, timeout):
        """First line (any stream) for which pred(text) is true, with its
        arrival time; seen lines included. None on timeout or end of output."""
        for item in list(self.lines):
            if pred(item[2]):
                return item
        end = time.monotonic() + timeout
        ended = 0
        while ended < 2:
            left = end - time.monotonic()
            if left <= 0:
                return None
            try:
                item = self._q.get(timeout=left)
            except queue.Empty:
                return None
            if item[2] is None:
                ended += 1
                continue
            if pred(item[2]):
                return item
        return None

    def alive(self):
        return self.p.poll() is None

    def wait(self, timeout):
        """Exit status, or None if still running after timeout."""
        try:
            s = self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        for t in self._threads:
            t.join(2)
        return s

    def text(self, stream=None):
        return [l for _, s, l in self.lines if stream is None or s == stream]

    def tail(self, n=15):
        return "\n".join(f"    {s}| {l}" for _, s, l in self.lines[-n:])

    def stop(self, grace=2.0):
        """Close stdin (testpmd's way to quit), then end the whole session."""
        if self.p.stdin:
            try:
                self.p.stdin.close()
            except OSError:
                pass
        if self.p.poll() is None and self.p.stdin:
            try:
                self.p.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        kill_session(self.pid, grace)
        try:
            self.p.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
        for t in self._threads:
            t.join(1)
        LIVE.discard(self)
