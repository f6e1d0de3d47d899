/*
 * pktgen.h: what the paced generators share (pacegen.c on AF_PACKET,
 * vupacegen.c on DPDK's vhost PMD): app=pkt's frame, the argument parsers,
 * the spread of frames per 10 ms window, the SCHED_FIFO pacing rule.
 *
 * The frame is apps/pkt_frame.c pkt_frame_build()'s byte for byte (the
 * layout in apps/pkt.h): Ethernet, IPv4 10.77.0.1 -> 10.77.0.2 (DF, TTL
 * 64), UDP 40000 -> 9 with checksum 0, "VNPK" and a 64-bit big-endian
 * sequence number at offset 46; the generators add the send time at
 * offset 54 (PKTGEN_TS_OFF), the low 48 bits of CLOCK_REALTIME in ns, big
 * endian (six bytes: what a 64-byte frame has left; it wraps every 3.2
 * days, a receiver unwraps it against its own clock).
 */
#ifndef VNETLAB_PKTGEN_H
#define VNETLAB_PKTGEN_H

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PKTGEN_FCS     4 /* sizes are RFC 2544's: the FCS counted, never sent */
#define PKTGEN_SEQ_OFF 46
#define PKTGEN_TS_OFF  54
#define PKTGEN_TS_MASK 0xffffffffffffull
#define PKTGEN_MIN     64
#define PKTGEN_MAX     1518
#define PKTGEN_MAX_S   3600 /* the longest run either generator accepts */
/* --fifo: a busy-waiting SCHED_FIFO thread keeps its CPU, so other
 * CPU-bound threads on a shared host take no window from it; but the
 * kernel still gives normal threads 5 % of each second (RT throttling, or
 * the fair server since 6.12), 50 ms at once when they are starved:
 * measured as one 50 ms hole per second. The generators sleep
 * PKTGEN_YIELD_NS every PKTGEN_YIELD_EVERY instead (6 %), which the
 * pacing makes up within the next batches. */
#define PKTGEN_YIELD_EVERY 1000000
#define PKTGEN_YIELD_NS    60000

/* Each program's: the reason on stderr, its usage, exit status 2. */
__attribute__((noreturn, format(printf, 1, 2))) static void usage_error(const char *fmt, ...);

static inline double pktgen_num(const char *s, const char *what, double lo, double hi)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= lo && v <= hi))
		usage_error("%s: '%s' is not a number in %g..%g", what, s, lo, hi);
	return v;
}

static inline void pktgen_mac(const char *s, uint8_t mac[6])
{
	unsigned v[6];
	char tail;

	if (sscanf(s, "%x:%x:%x:%x:%x:%x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &tail) != 6)
		usage_error("DMAC: '%s' is not xx:xx:xx:xx:xx:xx", s);
	for (int i = 0; i < 6; i++) {
		if (v[i] > 255)
			usage_error("DMAC: '%s' is not xx:xx:xx:xx:xx:xx", s);
		mac[i] = (uint8_t)v[i];
	}
}

/* Frames per sendmmsg() / tx burst when none is given: one per >= 16 us,
 * 1 up to 62.5 kpps, 16 at 1 Mpps, at most 32. */
static inline unsigned pktgen_batch(double rate)
{
	return rate / 62500 < 1 ? 1 : rate / 62500 > 32 ? 32 : (unsigned)(rate / 62500);
}

static inline void pktgen_be(uint8_t *p, uint64_t v, int bytes)
{
	for (int i = 0; i < bytes; i++)
		p[i] = (uint8_t)(v >> (8 * (bytes - 1 - i)));
}

/* app=pkt's frame of len bytes (its size less the FCS) with magic "VNPK"
 * (a numbered frame) or "VNPT" (a trial marker); number and stamp zero. */
static inline void pktgen_frame(uint8_t *f, unsigned len, const uint8_t dmac[6],
                                const uint8_t smac[6], const char *magic)
{
	static const uint8_t ip[20] = {0x45, 0, 0,  0,  0, 0, 0x40, 0,  64, 17,
	                               0,    0, 10, 77, 0, 1, 10,   77, 0,  2};
	uint32_t sum = 0;

	memset(f, 0, len);
	memcpy(f, dmac, 6);
	memcpy(f + 6, smac, 6);
	pktgen_be(f + 12, 0x0800, 2);
	memcpy(f + 14, ip, 20);
	pktgen_be(f + 16, len - 14, 2);
	for (int i = 0; i < 20; i += 2)
		sum += (uint32_t)(f[14 + i] << 8 | f[15 + i]);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	pktgen_be(f + 24, (uint16_t)~sum, 2);
	pktgen_be(f + 34, 40000, 2);
	pktgen_be(f + 36, 9, 2);
	pktgen_be(f + 38, len - 34, 2);
	memcpy(f + 42, magic, 4);
}

static inline int pktgen_cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* The spread of frames per 10 ms window over the run's n whole windows
 * (win is sorted in place), printed as the JSON object "win_10ms". */
static inline void pktgen_print_spread(uint32_t *win, uint64_t n, double rate)
{
	double mean = 0, sd = 0;

	if (n) {
		qsort(win, n, sizeof *win, pktgen_cmp_u32);
		for (uint64_t i = 0; i < n; i++)
			mean += win[i];
		mean /= (double)n;
		for (uint64_t i = 0; i < n; i++)
			sd += (win[i] - mean) * (win[i] - mean);
		sd = sqrt(sd / (double)n);
	}
	printf("\"win_10ms\":{\"n\":%llu,\"target\":%.2f,\"mean\":%.2f,\"sd\":%.2f,\"min\":%u,"
	       "\"p1\":%u,"
	       "\"p50\":%u,\"p99\":%u,\"max\":%u}",
	       (unsigned long long)n, rate / 100, mean, sd, n ? win[0] : 0, n ? win[n / 100] : 0,
	       n ? win[n / 2] : 0, n ? win[n - 1 - n / 100] : 0, n ? win[n - 1] : 0);
}

/* Round trips in ns (v sorted in place), printed as tests/tools/pktpeer.py
 * Rtt.report() does: the JSON object "rtt". */
static inline void pktgen_print_rtt(uint32_t *v, uint64_t n)
{
	if (!n) {
		printf(",\"rtt\":{\"n\":0}");
		return;
	}
	qsort(v, n, sizeof *v, pktgen_cmp_u32);
	double sum = 0;
	for (uint64_t i = 0; i < n; i++)
		sum += v[i];
#define PCT(p)                                                                                     \
	v[(uint64_t)((p) / 100.0 * (double)n) < n ? (uint64_t)((p) / 100.0 * (double)n) : n - 1]
	printf(",\"rtt\":{\"n\":%llu,\"p50_ns\":%u,\"p90_ns\":%u,\"p99_ns\":%u,\"p999_ns\":%u,"
	       "\"max_ns\":%u,\"mean_ns\":%.0f}",
	       (unsigned long long)n, PCT(50), PCT(90), PCT(99), PCT(99.9), v[n - 1],
	       sum / (double)n);
#undef PCT
}

#endif
