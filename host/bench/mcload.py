"""mcload.py: what the memcached test's host peer, Debian's `memcaslap`
(libmemcached-tools), prints (its Peer class: peers.Memcaslap).

    memcaslap -s ADDR:11211 -c CONCURRENCY -T THREADS -t Ns -S Ns

drives every column the same way: the appliance (app=memcached), stock
memcached in the Linux guest, stock memcached on the namespace's loopback.
Its defaults are the 2014 mail's memslap load: 90 % get / 10 % set, ~1 KB
values, a 10k-key window per concurrency. The figures it prints:

  Run time: 5.0s Ops: 143581 TPS: 28714 Net_rate: 32.1M/s
      -> peer_tps, peer_transactions (every column's tps: the same client
         measures all of them)
  Total Statistics (N events) ... Min/Max/Avg ... Log2 Dist
      -> peer_lat_mean_ns, peer_lat_max_ns and peer_lat_p50/p90/p99/p999_ns;
         the distribution is memcaslap's log2 histogram (bucket i holds
         round trips up to 2^i us), so a percentile is the upper bound of
         its bucket: a factor-2 resolution, said in every row
         (peer_lat_resolution = "log2")
  cmd_get, cmd_set, get_misses -> peer_cmd_get, peer_cmd_set, peer_get_misses
"""

import re

MEMCACHED_PORT = 11211


def parse_memcaslap(lines):
    out = {}
    total = False
    dist = {}
    for raw in lines:
        l = raw.strip()
        m = re.search(r"Run time: ([\d.]+)s Ops: (\d+) TPS: (\d+)", l)
        if m:
            out["peer_transactions"] = int(m.group(2))
            out["peer_tps"] = float(m.group(3))
        m = re.match(r"^(cmd_get|cmd_set|get_misses|verify_misses|verify_failed): (\d+)$", l)
        if m:
            out[f"peer_{m.group(1)}"] = int(m.group(2))
        if l.startswith("Total Statistics ("):
            total, dist = True, {}
            continue
        if total:
            m = re.match(r"^(Min|Max|Avg):\s+([\d.]+)$", l)
            if m:
                out[{"Min": "peer_lat_min_ns", "Max": "peer_lat_max_ns", "Avg": "peer_lat_mean_ns"}[m.group(1)]] = round(
                    float(m.group(2)) * 1000)
            m = re.match(r"^(\d+):\s+([\d\s]+)$", l)
            if m:
                for j, n in enumerate(m.group(2).split()):
                    dist[int(m.group(1)) + j] = int(n)
            elif dist and not l:
                total = False
    if dist:
        n = sum(dist.values())
        keys = (("peer_lat_p50_ns", 50), ("peer_lat_p90_ns", 90), ("peer_lat_p99_ns", 99), ("peer_lat_p999_ns", 99.9))
        for k, p in keys:
            want, seen = p / 100.0 * n, 0
            for i in sorted(dist):
                seen += dist[i]
                if seen >= want:
                    out[k] = (1 << i) * 1000
                    break
        out["peer_lat_resolution"] = "log2"
        out["peer_lat_events"] = n
    return out

