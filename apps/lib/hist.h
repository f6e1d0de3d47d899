/*
 * hist.h: a log-linear latency histogram, integers only (the guest has no
 * floating point). Values below 2^HIST_SUB_BITS are counted exactly; above,
 * every power of two is split into 2^HIST_SUB_BITS equal buckets, so a
 * reported percentile is within 1/2^(HIST_SUB_BITS+1) (0.8 %) of a sample
 * that really occurred (HdrHistogram's layout with one significant figure
 * of binary precision more than netperf's decade histogram).
 */
#ifndef VNETLAB_HIST_H
#define VNETLAB_HIST_H

#include <stdint.h>

#define HIST_SUB_BITS 6
#define HIST_SUB      (1u << HIST_SUB_BITS)
/* exact range [0, HIST_SUB) plus one row of HIST_SUB buckets per octave up to 2^64 */
#define HIST_BUCKETS (HIST_SUB + (64 - HIST_SUB_BITS) * HIST_SUB)

struct hist {
	uint64_t count;
	uint64_t sum; /* for the mean; 2^64 ns is 584 years of samples */
	uint64_t min, max;
	uint64_t bucket[HIST_BUCKETS];
};

void hist_reset(struct hist *h);
void hist_add(struct hist *h, uint64_t v);
uint64_t hist_mean(const struct hist *h);
/* Nearest-rank percentile, p in parts per 100000 (99900 = p99.9): the
 * midpoint of the bucket holding that rank, clamped to [min, max]. 0 when
 * the histogram is empty. */
uint64_t hist_percentile(const struct hist *h, uint32_t p);
/* Lowest value of bucket i (< HIST_BUCKETS) and how many values it covers:
 * what a host needs to merge histograms of several runs. */
uint64_t hist_bucket_low(unsigned i, uint64_t *width);

#endif
