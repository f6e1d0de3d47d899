"""cpu.py: host CPU accounting from /proc over a measured interval.

A sampler thread reads, every PERIOD seconds, /proc/stat (every CPU's
jiffies) and, for each watched process (QEMU, a backend such as testpmd,
the host peer), /proc/PID/stat (utime+stime of the whole process, dead
threads included) and /proc/PID/task/*/stat (each thread's field 39,
`processor`: the CPU it last ran on). A run later asks for the figures of
an interval [t0, t1] in host monotonic time -- e.g. the last `seconds`
before the guest printed its RESULT line -- and gets:

  host_cpu_pct       busy time of all host CPUs, in % of one CPU
                     (0..100*ncpu, the convention of the 2014 vhost thread,
                     where throughput/cpu = throughput / (vhost% + vm%))
  host_cpu_per_cpu   each CPU's busy %, so placement effects are visible
  procs[name].pct    that process's CPU, % of one CPU (as top shows it)
  procs[name].cpus   {cpu: share of the process's CPU time spent on it}
  procs[name].threads {busy thread name: the CPU it mostly ran on}
  procs[name].vcpu_cpus  the same share as .cpus for its vCPU threads
                     alone (QEMU's `CPU n/KVM`), the row's vcpu_cpus

Idle = idle + iowait; steal is counted as busy because the host CPU was not
ours to use.
"""

import os
import re
import threading
import time

PERIOD = 0.2
VCPU_THREAD = re.compile(r"CPU \d+/")
HZ = os.sysconf("SC_CLK_TCK")


def read_stat():
    """{cpu index: (busy jiffies, total jiffies)} plus 'all'."""
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            if not line.startswith("cpu"):
                break
            parts = line.split()
            vals = [int(x) for x in parts[1:]]
            # user nice system idle iowait irq softirq steal guest guest_nice;
            # guest time is already inside user/nice.
            total = sum(vals[:8])
            idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
            key = "all" if parts[0] == "cpu" else int(parts[0][3:])
            out[key] = (total - idle, total)
    return out


def _fields(path):
    with open(path) as f:
        s = f.read()
    name = s[s.index("(") + 1:s.rindex(")")]
    return name, s[s.rindex(")") + 2:].split()


def read_proc(pid):
    """(utime+stime jiffies, {tid: (thread name, processor, jiffies)}) or
    None if the process is gone."""
    try:
        _, f = _fields(f"/proc/{pid}/stat")
        ticks = int(f[11]) + int(f[12])  # fields 14, 15
    except (OSError, ValueError, IndexError):
        return None
    threads = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        tids = []
    for tid in tids:
        try:
            name, tf = _fields(f"/proc/{pid}/task/{tid}/stat")
            # fields 14+15 (this thread's CPU time), 39 (last CPU)
            threads[int(tid)] = (name, int(tf[36]), int(tf[11]) + int(tf[12]))
        except (OSError, ValueError, IndexError):
            continue
    return ticks, threads


class Sampler:
    """Samples /proc in a thread; watch(name, pid_fn) adds a process whose
    PID is looked up by pid_fn() at each sample (it may appear late)."""

    def __init__(self, period=PERIOD):
        self.period = period
        self.samples = []  # (t, stat, {name: (pid, ticks, threads)})
        self.watched = {}
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._t = threading.Thread(target=self._loop, daemon=True)

    def watch(self, name, pid_fn):
        with self._lock:
            self.watched[name] = pid_fn

    def start(self):
        self._sample()
        self._t.start()
        return self

    def stop(self):
        """Idempotent; takes one last sample the first time."""
        if self._stop.is_set():
            return
        self._stop.set()
        if self._t.is_alive():
            self._t.join(5)
        self._sample()

    def _sample(self):
        t = time.monotonic()
        stat = read_stat()
        procs = {}
        with self._lock:
            watched = dict(self.watched)
        for name, pid_fn in watched.items():
            try:
                pid = pid_fn()
            except Exception:  # a lookup racing with process exit
                pid = None
            if pid:
                r = read_proc(pid)
                if r:
                    procs[name] = (pid, r[0], r[1])
        self.samples.append((t, stat, procs))

    def _loop(self):
        while not self._stop.wait(self.period):
            self._sample()

    def interval(self, t0, t1):
        """Figures for [t0, t1]: nearest samples at or after t0 and at or
        before t1 (widened to the nearest pair if the interval is shorter
        than a sampling period)."""
        s = self.samples
        if len(s) < 2:
            return None
        a = next((x for x in s if x[0] >= t0), s[-2])
        b = next((x for x in reversed(s) if x[0] <= t1), s[-1])
        if b[0] <= a[0]:
            i = s.index(a)
            a, b = (s[i - 1], a) if i > 0 else (a, s[i + 1])
        return figures(a, b, [x for x in s if a[0] <= x[0] <= b[0]])


def figures(a, b, between):
    """CPU figures between two samples; `between` gives placement samples."""
    dt = b[0] - a[0]
    out = {"interval_s": round(dt, 3), "ncpu": len([k for k in b[1] if k != "all"])}
    busy = b[1]["all"][0] - a[1]["all"][0]
    total = b[1]["all"][1] - a[1]["all"][1]
    # Busy share of all CPUs, expressed in % of one CPU.
    out["host_cpu_pct"] = round(100.0 * out["ncpu"] * busy / total, 1) if total > 0 else None
    per = {}
    for k in sorted(k for k in b[1] if k != "all"):
        db = b[1][k][0] - a[1][k][0]
        dtot = b[1][k][1] - a[1][k][1]
        per[str(k)] = round(100.0 * db / dtot, 1) if dtot > 0 else None
    out["host_cpu_per_cpu"] = per
    procs = {}
    names = set()
    for x in between:
        names.update(x[2])
    for name in sorted(names):
        seen = [x for x in between if name in x[2]]
        first, last = seen[0], seen[-1]
        pct = None
        if first[2][name][0] == last[2][name][0] and last[0] > first[0]:
            # Ticks over the part of the interval the process was seen in,
            # divided by the whole interval: a peer that ran for half the
            # interval at 100% shows 50%.
            pct = round(100.0 * (last[2][name][1] - first[2][name][1]) / HZ / dt, 1) if dt > 0 else None
        # Placement weighted by the CPU time each thread used since the
        # previous sample, charged to the CPU it was last seen on; an idle
        # helper thread parked on some CPU does not count.
        cpus, threads = {}, {}
        prev = {}
        for x in seen:
            for tid, (tname, cpu, ticks) in x[2][name][2].items():
                w = ticks - prev[tid] if tid in prev else 0
                prev[tid] = ticks
                if w > 0:
                    cpus[cpu] = cpus.get(cpu, 0) + w
                    threads.setdefault(tname, {}).setdefault(cpu, 0)
                    threads[tname][cpu] += w
        n = sum(cpus.values())
        # QEMU's vCPU threads (named `CPU n/KVM` or `CPU n/TCG` with
        # debug-threads=on): where the guest itself ran.
        vcpu = {}
        for t, c in threads.items():
            if VCPU_THREAD.match(t):
                for k, w in c.items():
                    vcpu[k] = vcpu.get(k, 0) + w
        nv = sum(vcpu.values())
        procs[name] = {
            "pid": last[2][name][0],
            "pct": pct,
            "cpus": {str(c): round(v / n, 2) for c, v in sorted(cpus.items())} if n else {},
            "threads": {t: max(c, key=c.get) for t, c in sorted(threads.items())},
            **({"vcpu_cpus": {str(c): round(v / nv, 2) for c, v in sorted(vcpu.items())}} if nv else {}),
        }
    out["procs"] = procs
    return out


def row_columns(fig):
    """A row's CPU columns from interval()'s figures: host_cpu_pct and,
    per watched process, <name>_cpu_pct, <name>_cpus, <name>_threads."""
    if not fig:
        return {}
    row = dict(cpu_interval_s=fig["interval_s"], host_cpus=fig["ncpu"], host_cpu_pct=fig["host_cpu_pct"],
               host_cpu_per_cpu=fig["host_cpu_per_cpu"])
    for who, pinfo in fig["procs"].items():
        row[f"{who}_cpu_pct"] = pinfo["pct"]
        row[f"{who}_cpus"] = placement_str(pinfo["cpus"])
        row[f"{who}_threads"] = pinfo["threads"]
        if "vcpu_cpus" in pinfo:
            row["vcpu_cpus"] = placement_str(pinfo["vcpu_cpus"])
    return row


def placement_str(cpus):
    """{'0': 0.25, '1': 0.75} -> '0:25%,1:75%' (for CSV and tables)."""
    return ",".join(f"{c}:{round(100 * v)}%" for c, v in cpus.items() if v >= 0.005)
