/*
 * netif.c: lwIP's network interface on the vnet driver.
 *
 * RX is zero-copy: each received buffer becomes a custom pbuf (PBUF_REF)
 * whose payload is the driver's buffer, and a frame merged over several
 * buffers (MRG_RXBUF, large receive) becomes a chain of them; lwIP's final
 * pbuf_free() gives each buffer back to the RX ring. The pbuf_custom lives
 * in the driver's per-buffer scratch area (VNET_RX_PRIV_SIZE), so receiving
 * allocates nothing. Only when the stack holds half the ring (out-of-order
 * queues, an app sitting on data) is a frame copied, so the device always
 * has buffers; copies are counted.
 *
 * TX hands the pbuf chain to the driver as a scatter list with the offload
 * request from offload.c; in zero-copy builds the chain is referenced until
 * the driver reclaims it (tx_done), in copy builds the driver copies it at
 * once. A chain is flattened into one copy only when it has more segments
 * than the driver takes or no headroom for the virtio header (counted:
 * tx_clones; TCP never needs it).
 */
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include "drivers/virtio/vnet.h"
#include "kernel/kernel.h"
#include "kernel/prof.h"
#include "lwip/etharp.h"
#include "lwip/ip4.h"
#include "lwip/ip4_frag.h"
#include "lwip/memp.h"
#include "lwip/pbuf.h"
#include "lwip/stats.h"
#include "net/inst.h"
#include "net/net.h"
#include "netif/ethernet.h"

/* Back-pressure from a full TX ring: reclaim and retry this long before
 * dropping the frame (counted; TCP retransmits it). */
#define TX_FULL_WAIT_NS 20000000ull
#define ETH_HLEN        14
#define ARP_LEN         28 /* an Ethernet/IPv4 ARP packet */

struct rx_pbuf {
	struct pbuf_custom pc;
	struct vnet *vn;
	void *handle;
};
_Static_assert(sizeof(struct rx_pbuf) <= VNET_RX_PRIV_SIZE, "rx_pbuf exceeds driver scratch");

static struct vnetif_stats st;
static uint64_t last_rx_ns;   /* clock_ns() of the last frame received (0: none yet) */
long vnetif_rx_hold_max = -1; /* net.rx_hold_max; above the ring size: half the ring */
static uint16_t link_mtu;     /* the wire's IP MTU; netif->mtu is larger with TSO */

/*
 * The ARP queue (ARP_QUEUEING): lwIP 2.1.3 frees the frames queued on an
 * entry that expires unresolved (etharp_tmr -> etharp_free_entry), or that
 * etharp_find_entry recycles, without a counter. Every queued frame ends
 * either sent, when etharp_input resolves the entry (ethernet_output ->
 * linkoutput, not through netif->output), or freed; while queued it holds
 * one MEMP_ARP_QUEUE entry. So: queued = a unicast etharp_output() that
 * returned ERR_OK without an IPv4 frame reaching linkoutput; sent = an
 * IPv4 frame reaching linkoutput while an ARP frame is being input and no
 * netif->output is running; dropped = queued - sent - entries in use now.
 */
static unsigned output_depth; /* vnetif_output calls on the stack */
static bool in_arp_input;     /* ethernet_input is handling an ARP frame */
static uint64_t ipv4_linkout; /* IPv4 frames that reached linkoutput */

static void rx_pbuf_free(struct pbuf *p)
{
	struct rx_pbuf *rp = (struct rx_pbuf *)p;
	vnet_rx_release(rp->vn, rp->handle);
}

static void tx_done(void *arg, void *cookie)
{
	(void)arg;
	if (cookie)
		pbuf_free(cookie);
}

/* Inline-header zero-copy builds need vnet_tx_headroom writable bytes in
 * front of the first segment. lwIP reserves PBUF_LINK_ENCAPSULATION_HLEN
 * there in every pbuf it allocates for output, but a forwarded or reused
 * pbuf (an ICMP echo built in a received buffer) may lack it. The first
 * segment is the first pbuf with data (linkoutput skips empty ones), so
 * that is the one asked: a zero-length head's headroom says nothing about
 * the PBUF_ROM/REF pbuf after it, whose memory the driver does not own. */
static bool has_headroom(struct pbuf *p)
{
	if (!vnet_tx_headroom)
		return true;
	while (p && !p->len)
		p = p->next;
	if (!p)
		return true; /* no data: no segment, no header written in front */
	if (pbuf_add_header(p, vnet_tx_headroom))
		return false;
	pbuf_remove_header(p, vnet_tx_headroom);
	return true;
}

static err_t linkoutput(struct netif *netif, struct pbuf *p)
{
	struct vnet *vn = netif->state;
	struct pbuf *send = p;
	struct vnet_seg segs[VNET_TX_MAX_SEGS];
	struct vnet_txo o;
	unsigned n = 0;
	const uint8_t *eth = p->payload;

	if (p->len >= ETH_HLEN && eth[12] == 0x08 && eth[13] == 0x00) {
		ipv4_linkout++;
		if (in_arp_input && !output_depth)
			st.arpq_sent++; /* a queued frame, its entry just resolved */
	}
	int off = offload_tx(p, &o, (uint16_t)(ETH_HLEN + link_mtu));

	if (off < 0 || pbuf_clen(p) > VNET_TX_MAX_SEGS || !has_headroom(p)) {
		/* Flatten into one fresh pbuf with lwIP's standard headroom. */
		send = pbuf_clone(PBUF_LINK, PBUF_RAM, p);
		if (!send) {
			LINK_STATS_INC(link.memerr);
			st.tx_drops++;
			return ERR_MEM;
		}
		st.tx_clones++;
		off = offload_tx(send, &o, (uint16_t)(ETH_HLEN + link_mtu));
	} else {
		pbuf_ref(p); /* the driver's reference, dropped in tx_done */
	}
	for (struct pbuf *q = send; q; q = q->next)
		if (q->len)
			segs[n++] = (struct vnet_seg){q->payload, q->len};

	uint64_t deadline = 0;
	for (;;) {
		prof_enter(PROF_ENQUEUE);
		int r = vnet_tx(vn, segs, n, off > 0 ? &o : NULL, send);
		prof_exit();
		if (r == 0) {
			LINK_STATS_INC(link.xmit);
			return ERR_OK;
		}
		if (r != -VNET_EAGAIN)
			break;
		/* Ring full: the pending kick was flushed by vnet_tx; reclaim
		 * what the device finished and retry, for a bounded time. */
		uint64_t now = clock_ns();
		if (!deadline)
			deadline = now + TX_FULL_WAIT_NS;
		else if (now > deadline)
			break;
		if (vnet_poll(vn) < 0)
			break;
	}
	pbuf_free(send);
	LINK_STATS_INC(link.drop);
	st.tx_drops++;
	return ERR_MEM;
}

/* netif->output: with TSO the netif's MTU lets 64 KB TCP segments through
 * ip4_output unfragmented; everything else still leaves at the link MTU,
 * cut by lwIP's own ip4_frag() (which comes back here per fragment). */
static err_t vnetif_output(struct netif *netif, struct pbuf *p, const ip4_addr_t *dst)
{
	err_t e;

	prof_enter(PROF_IP_OUT);
	if (p->tot_len > link_mtu &&
	    !(offload_tso() && p->len >= 20 && ((const uint8_t *)p->payload)[9] == IP_PROTO_TCP)) {
		uint16_t mtu = netif->mtu;

		st.ip_frags++;
		netif->mtu = link_mtu;
		e = ip4_frag(p, netif, dst);
		netif->mtu = mtu;
	} else {
		uint64_t sent = ipv4_linkout;

		/* Dropped and counted there; ERR_MEM is what lwIP itself returns
		 * when no ARP entry is free (TCP retries from its timers). */
		if (!flood_output_admit(netif, p, dst)) {
			prof_exit();
			return ERR_MEM;
		}
		output_depth++;
		e = etharp_output(netif, p, dst);
		output_depth--;
		if (e == ERR_OK && ipv4_linkout == sent)
			st.arpq_queued++;
	}
	prof_exit();
	return e;
}

static struct pbuf *rx_wrap(struct vnet *vn, const struct vnet_rx_buf *b, uint32_t skip)
{
	struct rx_pbuf *rp = b->priv;
	uint16_t len = (uint16_t)(b->len - skip);

	rp->vn = vn;
	rp->handle = b->handle;
	rp->pc.custom_free_function = rx_pbuf_free;
	return pbuf_alloced_custom(PBUF_RAW, len, PBUF_REF, &rp->pc, (uint8_t *)b->data + skip,
	                           len);
}

/* One received frame as a pbuf from byte `skip` on: the driver's buffers
 * chained (zero copy) or, when the stack already holds half the ring, one
 * heap copy with the buffers returned at once. */
static struct pbuf *rx_pbuf(struct vnet *vn, const struct vnet_rx *f, uint32_t skip)
{
	struct pbuf *p = NULL;

	long hold = vnetif_rx_hold_max <= vnet_rx_ring_size(vn) ? vnetif_rx_hold_max
	                                                        : vnet_rx_ring_size(vn) / 2;

	if ((long)vnet_rx_held(vn) > hold) {
		p = pbuf_alloc(PBUF_RAW, (uint16_t)(f->len - skip), PBUF_RAM);
		if (!p) {
			st.rx_nomem++;
			vnet_rx_release_frame(vn, f);
			return NULL;
		}
		for (unsigned k = 0, off = 0, s = skip; k < f->nbufs; k++) {
			uint32_t from = s < f->buf[k].len ? s : f->buf[k].len;

			s -= from;
			pbuf_take_at(p, (uint8_t *)f->buf[k].data + from,
			             (uint16_t)(f->buf[k].len - from), (uint16_t)off);
			off += f->buf[k].len - from;
		}
		st.rx_copies++;
		vnet_rx_release_frame(vn, f);
		return p;
	}
	for (unsigned k = 0; k < f->nbufs; k++) {
		if (f->buf[k].len <= (k ? 0 : skip)) { /* nothing of the frame in it */
			vnet_rx_release(vn, f->buf[k].handle);
			continue;
		}
		struct pbuf *q = rx_wrap(vn, &f->buf[k], k ? 0 : skip);
		if (p)
			pbuf_cat(p, q);
		else
			p = q;
	}
	return p;
}

/* lwIP 2.1.3 reads a whole ARP packet (etharp_input) and the IPv4 length
 * field (ip4_input) before checking that the frame holds them; found by
 * tests/fuzz/fuzz_netif (regression inputs arp-truncated-38-bytes,
 * ipv4-header-truncated). Such frames are dropped here, counted. */
static bool too_short(const struct vnet_rx *f)
{
	const uint8_t *eth = f->buf[0].data;

	if (f->buf[0].len < ETH_HLEN || eth[12] != 0x08)
		return false;
	return (eth[13] == 0x06 && f->len < ETH_HLEN + ARP_LEN) ||
	       (eth[13] == 0x00 && f->len < ETH_HLEN + IP_HLEN);
}

/* mq=N with RSS: a TCP or UDP frame of an unfragmented IPv4 packet that
 * arrived on a queue other than the one the driver's RSS table names for
 * it (the device steered it elsewhere) is counted; lwIP then handles it
 * as any frame (a segment of a connection this copy does not own: a RST). */
static void rss_check(const uint8_t *eth, uint32_t len)
{
	int q = vnet_rss_frame_queue(eth, len);

	if (q >= 0 && (unsigned)q != net_inst_index())
		st.rss_misses++;
}

void vnetif_input_all(struct netif *netif)
{
	struct vnet *vn = netif->state;
	struct vnet_rx f;

	for (bool any = false;; any = true) {
		prof_enter(PROF_RX);
		int got = vnet_rx(vn, &f);
		prof_exit();
		if (got <= 0) {
			if (any)
				last_rx_ns = clock_ns();
			break;
		}
		/* A large-receive frame may be a full 64 KB IP packet plus its
		 * Ethernet header: more than a pbuf's 16-bit tot_len. Check the
		 * Ethernet header here and hand IP the packet without it. */
		bool big = f.len > 0xffff;
		const uint8_t *eth = f.buf[0].data;
		struct pbuf *p;

		if (big && (f.buf[0].len < ETH_HLEN || eth[12] != 0x08 || eth[13] != 0x00 ||
		            memcmp(eth, netif->hwaddr, ETH_HWADDR_LEN))) {
			LINK_STATS_INC(link.drop);
			st.rx_drops++;
			vnet_rx_release_frame(vn, &f);
			continue;
		}
		if (!big && too_short(&f)) {
			LINK_STATS_INC(link.lenerr);
			LINK_STATS_INC(link.drop);
			vnet_rx_release_frame(vn, &f);
			continue;
		}
		bool arp = !big && f.buf[0].len >= ETH_HLEN && eth[12] == 0x08 &&
		           eth[13] == 0x06; /* read before a copy gives f back */
		/* mq=N: an ARP frame arrives on one queue, but every copy sends
		 * (each from its own ARP table), so each must learn from it. */
		if (arp && net_inst_queues() > 1) {
			net_inst_arp_post(net_inst_index(), net_inst_queues(), eth, f.buf[0].len);
			st.arp_posted++;
		}

		if (net_inst_queues() > 1)
			rss_check(eth, f.buf[0].len);
		p = rx_pbuf(vn, &f, big ? ETH_HLEN : 0);
		LINK_STATS_INC(link.recv);
		if (!p) {
			LINK_STATS_INC(link.memerr);
			continue;
		}
		NETIF_SET_CHECKSUM_CTRL(netif, offload_rx_flags(f.flags));
		prof_enter(PROF_LWIP_IN);
		if (big) {
			st.rx_big++;
			ip4_input(p, netif); /* frees p whatever happens */
		} else {
			in_arp_input = arp;
			if (netif->input(p, netif) != ERR_OK)
				pbuf_free(p);
			in_arp_input = false;
		}
		prof_exit();
	}
	NETIF_SET_CHECKSUM_CTRL(netif, offload_rx_flags(0));
}

void vnetif_input_shared_arp(struct netif *netif)
{
	uint8_t frame[NET_ARP_FRAME_MAX];
	size_t len;

	while ((len = net_inst_arp_take(net_inst_index(), net_inst_queues(), frame))) {
		struct pbuf *p = pbuf_alloc(PBUF_RAW, (u16_t)len, PBUF_RAM);
		if (!p) {
			LINK_STATS_INC(link.memerr);
			LINK_STATS_INC(link.drop);
			continue;
		}
		memcpy(p->payload, frame, len);
		st.arp_taken++;
		in_arp_input = true;
		if (netif->input(p, netif) != ERR_OK)
			pbuf_free(p);
		in_arp_input = false;
	}
}

/* lwIP names its pools only in debug builds: the same X-macro list. */
static const char *const memp_names[] = {
#define LWIP_MEMPOOL(name, num, size, desc) #name,
#include "lwip/priv/memp_std.h"
};

void vnetif_print_pool_line(struct vnet *vn)
{
	struct vnet_counters rx, tx;
	struct mallinfo mi = mallinfo();

	vnet_counters(vn, &rx, &tx);
	printf("POOLS {\"rx_held\":%u,\"rx_ring\":%u,\"tx_inflight\":%llu,\"heap_used\":%lu,"
	       "\"heap_arena\":%lu",
	       vnet_rx_held(vn), vnet_rx_ring_size(vn),
	       (unsigned long long)(tx.frames - tx.reclaimed - tx.idle_reclaimed),
	       (unsigned long)mi.uordblks, (unsigned long)mi.arena);
	for (int i = 0; i < MEMP_MAX; i++)
		printf(",\"%s\":%lu", memp_names[i], (unsigned long)lwip_stats.memp[i]->used);
	printf("}\n");
}

void vnetif_print_pools(struct netif *netif)
{
	struct vnet *vn = netif->state;
	unsigned long memp_err = 0; /* every pool: frag pbufs, reassembly, ARP queue, pcbs */

	for (int i = 0; i < MEMP_MAX; i++)
		memp_err += lwip_stats.memp[i]->err;
	/* LWIPSTATS continued (net.c prints its first fields): fragments and
	 * reassembly, ARP queue memory, all pools. */
	printf(",\"frag_recv\":%u,\"frag_drop\":%u,\"frag_memerr\":%u,\"reasm_oks\":%lu,"
	       "\"reasm_fails\":%lu,\"frag_fails\":%lu,\"etharp_memerr\":%u,"
	       "\"arp_queue_drop\":%llu,\"memp_err\":%lu}\n",
	       lwip_stats.ip_frag.recv, lwip_stats.ip_frag.drop, lwip_stats.ip_frag.memerr,
	       (unsigned long)lwip_stats.mib2.ipreasmoks,
	       (unsigned long)lwip_stats.mib2.ipreasmfails,
	       (unsigned long)lwip_stats.mib2.ipfragfails, lwip_stats.etharp.memerr,
	       (unsigned long long)vnetif_arpq_drops(), memp_err);
	vnetif_print_pool_line(vn);
	for (int i = 0; i < MEMP_MAX; i++)
		if (lwip_stats.memp[i]->err)
			printf("net warning: lwIP pool %s exhausted %u times\n", memp_names[i],
			       lwip_stats.memp[i]->err);
	if (lwip_stats.mem.err)
		printf("net warning: lwIP heap allocation failed %u times\n", lwip_stats.mem.err);
}

const char *vnetif_silence(void)
{
	static char buf[160];
	struct vnet_counters rx, tx;
	uint64_t ms = (clock_ns() - last_rx_ns) / 1000000;
	int n;

	/* Frames the device has not completed: a backend that stopped
	 * processing the rings (a paused switch) keeps them. */
	vnet_counters(net_vnet(), &rx, &tx);
	if (!last_rx_ns)
		n = snprintf(buf, sizeof(buf), "backend %s: no frame received since boot",
		             net_backend());
	else
		n = snprintf(buf, sizeof(buf), "backend %s: no frame received for %llu ms",
		             net_backend(), (unsigned long long)ms);
	snprintf(buf + n, sizeof(buf) - (size_t)n, ", %llu TX frames not completed by the device",
	         (unsigned long long)(tx.frames - tx.reclaimed - tx.idle_reclaimed));
	return buf;
}

uint64_t vnetif_tx_drops(void)
{
	return st.tx_drops;
}

uint64_t vnetif_arpq_drops(void)
{
	return st.arpq_queued - st.arpq_sent - lwip_stats.memp[MEMP_ARP_QUEUE]->used;
}

const struct vnetif_stats *vnetif_stats(void)
{
	return &st;
}

err_t vnetif_init(struct netif *netif)
{
	struct vnet *vn = netif->state;
	netif->name[0] = 'v';
	netif->name[1] = 'n';
	netif->hwaddr_len = ETH_HWADDR_LEN;
	memcpy(netif->hwaddr, vnet_mac(vn), ETH_HWADDR_LEN);
	link_mtu = vnet_mtu(vn);
	offload_init(netif, vnet_offloads(vn), link_mtu);
	/* With TSO, IP packets up to a whole 16-bit pbuf reach linkoutput. */
	netif->mtu = offload_tso() ? (uint16_t)(0xffff - ETH_HLEN) : link_mtu;
	netif->flags = NETIF_FLAG_BROADCAST | NETIF_FLAG_ETHARP | NETIF_FLAG_ETHERNET;
	netif->output = vnetif_output;
	netif->linkoutput = linkoutput;
	vnet_set_tx_done(vn, tx_done, NULL);
	return ERR_OK;
}
