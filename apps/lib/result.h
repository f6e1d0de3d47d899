/*
 * result.h: the one machine-readable line every benchmark run ends with,
 *
 *	RESULT {"test":"tcp_rr","role":"client","variant":"...","accel":"tcg",
 *	        "backend":"tap", <parameters>, <throughput>, <latency>, <counters>}
 *
 * printed key by key (each line by one CPU: result.c says why and panics
 * when two CPUs meet in one line), and the driver/lwIP counter snapshots that give "per
 *transaction" figures for exactly the measured interval. Decimal figures are printed from integers
 * ("%lu.%03lu"): the guest has no floating point.
 *
 * Times on the guest clock (us since the boot front-end's first instruction,
 * like the ready line's boot_us): t_begin_us and t_end_us bound the measured
 * interval, t_line_us is when this line was printed, so a host that notes
 * when the line arrived can place the interval on its own clock.
 *
 * An RR server does not see round trips, only the interval between a
 * connection's answered requests (its cycle time, which equals the client's
 * round trip only for unthrottled one-outstanding ping-pong): its figures
 * are cycle_mean_ns, cycle_p50_ns, ... instead of lat_*.
 *
 * When the run had a histogram, one more line follows the RESULT line:
 *
 *	HIST {"test":"tcp_rr","role":"client","metric":"lat","unit":"ns",
 *	      "count":N,"buckets":[[low,width,count],...]}
 *
 * with every non-empty bucket, so a host can merge repetitions.
 */
#ifndef VNETLAB_RESULT_H
#define VNETLAB_RESULT_H

#include <stdint.h>
#include "apps/lib/hist.h"
#include "drivers/virtio/vnet.h"
#include "kernel/prof.h"
#include "net/net.h"

struct result_snap {
	uint64_t ns;
	struct vnet_counters rx, tx;
	struct vnetif_stats netif;
	struct offload_stats off;
	struct vnet_idle_stats idle;
	struct prof_snap prof; /* PROFILE builds only */
	uint64_t lwip_drops;   /* lwIP drops at every layer + frames the netif dropped */
};

void result_snap(struct result_snap *s); /* counters and clock now */
/* The same for one queue pair (app=pkt with mq=N: each pair's own). */
void result_snap_of(struct result_snap *s, const struct vnet *vn);

/* A measured interval: the counters at its start and at its end, and its
 * bounds on the guest clock (the end: the one given, if after the start,
 * else the time of the second snapshot). */
struct result_window {
	struct result_snap a, b;
	uint64_t t_start, t_end;
};
void result_measure_begin(struct result_window *w);
void result_measure_end(struct result_window *w, uint64_t end_ns);

/* Opens the line with test, role, variant, accel and backend; the calling
 * CPU holds it until result_end() (another CPU's call in between, or a
 * second begin, panics). */
void result_begin(const char *test, const char *role);
void result_u64(const char *key, uint64_t v);
void result_str(const char *key, const char *v);
/* num/den with three decimals; 0 when den is 0. */
void result_ratio(const char *key, uint64_t num, uint64_t den);
/* "mbps" for bytes moved in ns, "tps" for transactions in ns */
void result_rates(uint64_t bytes, uint64_t transactions, uint64_t ns);
/* lat_mean_ns, lat_p50_ns, lat_p90_ns, lat_p99_ns, lat_p999_ns, lat_max_ns
 * (cycle_* for an RR server); the histogram follows on a HIST line. */
void result_latency(const struct hist *h);
/* Driver counters between two snapshots, totals and per transaction, and
 * the measured interval as t_begin_us (the first snapshot) and t_end_us
 * (t_begin_us plus the interval given to result_rates(), called before). */
void result_counters(const struct result_snap *a, const struct result_snap *b,
                     uint64_t transactions);
/* Closes the line; PROFILE builds then print the PROFILE line for the
 * interval given to result_counters(). */
void result_end(void);

#endif
