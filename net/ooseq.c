/*
 * ooseq.c: count what lwIP's bounded out-of-order queue throws away.
 *
 * lwipopts.h bounds each connection's out-of-order queue
 * (TCP_OOSEQ_MAX_PBUFS, TCP_OOSEQ_MAX_BYTES) so queued segments can never
 * pin the zero-copy RX buffers. When a new segment takes a queue past the
 * bound, tcp_receive() (lwIP core/tcp_in.c) frees the segment where the
 * bound is crossed and every later one, silently. Its only way in is the
 * per-pcb limit macro TCP_OOSEQ_PBUFS_LIMIT(pcb), evaluated just before
 * that walk: here it walks the same queue by the same rule first and counts
 * what the walk will free, so every such discard shows in LWIPSTATS
 * (tcp_ooseq_drop, tcp_ooseq_drop_bytes) and in the RESULT's lwip_drops.
 */
#include "lwip/tcp.h"
#include "lwip/priv/tcp_priv.h"
#include "net/net.h"

static uint64_t drops, drop_bytes;

u16_t vnet_tcp_ooseq_pbufs_limit(struct tcp_pcb *pcb)
{
	uint32_t blen = 0;
	unsigned qlen = 0;
	struct tcp_seg *s;

	for (s = pcb->ooseq; s; s = s->next) {
		blen += s->p->tot_len;
		qlen += pbuf_clen(s->p);
		if (blen > TCP_OOSEQ_MAX_BYTES || qlen > TCP_OOSEQ_MAX_PBUFS)
			break;
	}
	for (; s; s = s->next) {
		drops++;
		drop_bytes += s->len;
	}
	return TCP_OOSEQ_MAX_PBUFS;
}

uint64_t net_tcp_ooseq_drops(void)
{
	return drops;
}

uint64_t net_tcp_ooseq_drop_bytes(void)
{
	return drop_bytes;
}
