/*
 * pkt_frame.c: what app=pkt's frames hold (layout in pkt.h): the
 * generator's UDP/IPv4 frame, the sequence count of the receive modes, and
 * the two in-place edits of the forwarding modes.
 */
#include <string.h>
#include "apps/pkt.h"

const uint16_t pkt_imix[PKT_IMIX_N] = {64, 570, 64, 64, 570, 64, 1518, 64, 570, 64, 570, 64};

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* RFC 1071 over the 20-byte IPv4 header, its checksum field zero. */
static uint16_t pkt_ip_csum(const uint8_t *ip)
{
	uint32_t sum = 0;

	for (int i = 0; i < 20; i += 2)
		sum += get16(ip + i);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

void pkt_frame_build(uint8_t *f, uint32_t len, const struct pkt_addrs *a, uint16_t sport,
                     uint64_t seq)
{
	uint8_t *ip = f + 14, *udp = f + 34;

	memcpy(f, a->dmac, 6);
	memcpy(f + 6, a->smac, 6);
	put16(f + 12, 0x0800);
	ip[0] = 0x45;
	ip[1] = 0;
	put16(ip + 2, (uint16_t)(len - 14));
	put16(ip + 4, 0);      /* identification: DF set, never fragmented */
	put16(ip + 6, 0x4000); /* DF */
	ip[8] = 64;
	ip[9] = 17;
	put16(ip + 10, 0);
	memcpy(ip + 12, a->src, 4);
	memcpy(ip + 16, a->dst, 4);
	put16(ip + 10, pkt_ip_csum(ip));
	put16(udp, sport);
	put16(udp + 2, a->dport);
	put16(udp + 4, (uint16_t)(len - 34));
	put16(udp + 6, 0); /* no UDP checksum (RFC 768), as testpmd's txonly */
	memcpy(f + PKT_HDR_LEN, "VNPK", 4);
	for (int i = 0; i < 8; i++)
		f[PKT_SEQ_OFF + i] = (uint8_t)(seq >> (56 - 8 * i));
}

/* The number after magic (a sequence number or a trial's), if f is a
 * UDP/IPv4 frame that carries magic. */
static bool pkt_number(const uint8_t *f, uint32_t len, const char *magic, uint64_t *out)
{
	uint64_t v = 0;

	if (len < PKT_SEQ_OFF + 8 || get16(f + 12) != 0x0800 || f[14] != 0x45 || f[23] != 17 ||
	    memcmp(f + PKT_HDR_LEN, magic, 4))
		return false;
	for (int i = 0; i < 8; i++)
		v = v << 8 | f[PKT_SEQ_OFF + i];
	*out = v;
	return true;
}

bool pkt_seq_of(const uint8_t *f, uint32_t len, uint64_t *seq)
{
	return pkt_number(f, len, "VNPK", seq);
}

bool pkt_is_marker(const uint8_t *f, uint32_t len, uint64_t *trial)
{
	return pkt_number(f, len, "VNPT", trial);
}

bool pkt_seq_count(struct pkt_seq *s, const uint8_t *f, uint32_t len)
{
	uint64_t seq;

	if (!pkt_number(f, len, "VNPK", &seq))
		return false;
	s->frames++;
	if (seq >= s->next) {
		s->gaps += seq - s->next;
		s->next = seq + 1;
	} else {
		s->reorder++;
	}
	return true;
}

static void swap(uint8_t *a, uint8_t *b, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		uint8_t t = a[i];

		a[i] = b[i];
		b[i] = t;
	}
}

void pkt_macswap(uint8_t *f)
{
	swap(f, f + 6, 6);
}

/* Swapping source and destination changes no checksum: the IPv4 header
 * sum and the UDP pseudo-header sum are one's-complement sums of the same
 * words in another order (RFC 1071), so a valid (or partial, NEEDS_CSUM)
 * checksum stays valid and nothing is recomputed. */
unsigned pkt_udp4_ihl(const uint8_t *f, uint32_t len)
{
	unsigned ihl;

	if (len < 34 || get16(f + 12) != 0x0800 || (f[14] >> 4) != 4 || f[23] != 17)
		return 0;
	ihl = (f[14] & 0xfu) * 4u;
	if (ihl < 20 || len < 14 + ihl + 8)
		return 0;
	return ihl;
}

bool pkt_reflect(uint8_t *f, uint32_t len)
{
	unsigned ihl = pkt_udp4_ihl(f, len);

	if (!ihl)
		return false;
	swap(f, f + 6, 6);
	swap(f + 26, f + 30, 4);
	swap(f + 14 + ihl, f + 14 + ihl + 2, 2);
	return true;
}
