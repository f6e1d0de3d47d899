/*
 * hist.c: log-linear histogram (layout in hist.h).
 *
 * Bucket of v: below HIST_SUB the value itself. Otherwise, with
 * e = floor(log2 v) >= HIST_SUB_BITS, the top HIST_SUB_BITS+1 bits of v
 * select the bucket: row e - HIST_SUB_BITS, column (v >> shift) - HIST_SUB
 * with shift = e - HIST_SUB_BITS; the bucket covers 2^shift values.
 */
#include <string.h>
#include "apps/lib/hist.h"

void hist_reset(struct hist *h)
{
	memset(h, 0, sizeof(*h));
	h->min = UINT64_MAX;
}

static unsigned bucket_of(uint64_t v)
{
	if (v < HIST_SUB)
		return (unsigned)v;
	unsigned shift = 63 - (unsigned)__builtin_clzll(v) - HIST_SUB_BITS;
	return HIST_SUB + shift * HIST_SUB + (unsigned)(v >> shift) - HIST_SUB;
}

uint64_t hist_bucket_low(unsigned i, uint64_t *width)
{
	if (i < HIST_SUB) {
		*width = 1;
		return i;
	}
	unsigned shift = (i - HIST_SUB) / HIST_SUB;
	uint64_t col = (i - HIST_SUB) % HIST_SUB;
	*width = 1ull << shift;
	return (HIST_SUB + col) << shift;
}

void hist_add(struct hist *h, uint64_t v)
{
	h->bucket[bucket_of(v)]++;
	h->count++;
	h->sum += v;
	if (v < h->min)
		h->min = v;
	if (v > h->max)
		h->max = v;
}

uint64_t hist_mean(const struct hist *h)
{
	return h->count ? h->sum / h->count : 0;
}

uint64_t hist_percentile(const struct hist *h, uint32_t p)
{
	if (!h->count)
		return 0;
	if (p >= 100000)
		return h->max;
	/* nearest rank: the smallest sample with at least p% of samples <= it */
	uint64_t rank = (h->count * p + 99999) / 100000;
	if (rank < 1)
		rank = 1;
	uint64_t seen = 0;
	for (unsigned i = 0; i < HIST_BUCKETS; i++) {
		seen += h->bucket[i];
		if (seen < rank)
			continue;
		uint64_t width, v = hist_bucket_low(i, &width);
		v += width / 2;
		if (v < h->min)
			v = h->min;
		if (v > h->max)
			v = h->max;
		return v;
	}
	return h->max;
}
