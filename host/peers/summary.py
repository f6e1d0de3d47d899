#!/usr/bin/env python3
"""host/peers/summary.py: the human summary under `make run`'s RESULT lines.

Reads the console's RESULT and ERROR lines on stdin and prints one line per
run: throughput, latency percentiles (RR), kicks and reclaims per
transaction, named with the accelerator and backend they were measured on.

    summary.py [--net tap|user] [--accel kvm|tcg] [--machine pc|q35|microvm...] < lines
"""

import argparse
import json
import sys


def us(ns):
    return f"{ns / 1000:.1f}"


def rr_line(r):
    # An RR server sees the interval between answered requests (cycle_*),
    # not round trips: the host sockperf's own lines below have those.
    kind = "cycle" if "cycle_p50_ns" in r else "lat"
    lat = " ".join(f"{k} {us(r[kind + '_' + k + '_ns'])}" for k in ("p50", "p90", "p99", "p999"))
    size = f"{r['req']}/{r['resp']} B"
    shape = f"inst {r['instances']}" + (f" burst {r['burst']}" if "burst" in r else "")
    return (f"{r['test']:<10} {r['role']:<6} {size:>11} {shape:<16} {float(r['tps']):>10.1f} trans/s  "
            f"{kind} us: mean {us(r[kind + '_mean_ns'])} {lat} max {us(r[kind + '_max_ns'])}  "
            f"kicks/txn {r['kicks_per_txn']:.3f}  reclaims/txn {r['reclaims_per_txn']:.3f}")


def stream_line(r):
    return (f"{r['test']:<10} {r['role']:<6} {str(r['msg']) + ' B':>11} {'inst ' + str(r['instances']):<16} "
            f"{float(r['mbps']):>10.1f} Mbit/s   kicks/msg {r['kicks_per_txn']:.3f}  "
            f"reclaims/msg {r['reclaims_per_txn']:.3f}  tx/rx frames {r['tx_frames']}/{r['rx_frames']}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--net", default="")
    ap.add_argument("--accel", default="")
    ap.add_argument("--machine", default="pc")
    a = ap.parse_args()
    results, errors = [], []
    for line in sys.stdin:
        kind, _, body = line.strip().partition(" ")
        try:
            obj = json.loads(body)
        except ValueError:
            continue
        (results if kind == "RESULT" else errors).append(obj)
    accel = a.accel or (results[0]["accel"] if results else "?")
    backend = results[0]["backend"] if results else a.net
    variant = results[0]["variant"] if results else "?"
    print(f"summary: accel={accel} machine={a.machine} backend={backend} variant={variant}")
    if accel == "tcg":
        print("  (TCG is software emulation: absolute figures are not KVM figures; compare variants on one host)")
    for r in results:
        print("  " + (rr_line(r) if r["test"].endswith("_rr") else stream_line(r)))
    for e in errors:
        print(f"  FAILED in {e.get('where')}: {e.get('msg')}")
    if not results and not errors:
        print("  no RESULT line: see the console above")


if __name__ == "__main__":
    main()
