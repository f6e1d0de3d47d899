/*
 * netif.c: lwIP's network interface on the vnet driver.
 *
 * RX is zero-copy: each received frame becomes a custom pbuf (PBUF_REF)
 * whose payload is the driver's buffer; lwIP's final pbuf_free() gives the
 * buffer back to the RX ring. TX hands the pbuf chain to the driver as a
 * scatter list; in zero-copy builds the chain is referenced until the driver
 * reclaims it (tx_done), in copy builds the driver copies it at once.
 * The pbuf_custom lives in the driver's per-buffer scratch area
 * (VNET_RX_PRIV_SIZE), so receiving allocates nothing.
 */
#include <string.h>
#include "drivers/virtio/vnet.h"
#include "kernel/kernel.h"
#include "lwip/etharp.h"
#include "lwip/pbuf.h"
#include "lwip/stats.h"
#include "net/net.h"
#include "netif/ethernet.h"

/* Back-pressure from a full TX ring: reclaim and retry this long before
 * dropping the frame (counted; TCP retransmits it). */
#define TX_FULL_WAIT_NS 20000000ull

struct rx_pbuf {
	struct pbuf_custom pc;
	struct vnet *vn;
	void *handle;
};
_Static_assert(sizeof(struct rx_pbuf) <= VNET_RX_PRIV_SIZE, "rx_pbuf exceeds driver scratch");

static uint64_t tx_drops;

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
 * pbuf (an ICMP echo built in a received buffer) may lack it. */
static bool has_headroom(struct pbuf *p)
{
	if (!vnet_tx_headroom)
		return true;
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
	unsigned n = 0;

	if (pbuf_clen(p) > VNET_TX_MAX_SEGS || !has_headroom(p)) {
		/* Flatten into one fresh pbuf with lwIP's standard headroom. */
		send = pbuf_clone(PBUF_LINK, PBUF_RAM, p);
		if (!send) {
			LINK_STATS_INC(link.memerr);
			tx_drops++;
			return ERR_MEM;
		}
	} else {
		pbuf_ref(p); /* the driver's reference, dropped in tx_done */
	}
	for (struct pbuf *q = send; q; q = q->next)
		if (q->len)
			segs[n++] = (struct vnet_seg){q->payload, q->len};

	uint64_t deadline = 0;
	for (;;) {
		int r = vnet_tx(vn, segs, n, NULL, send);
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
	tx_drops++;
	return ERR_MEM;
}

void vnetif_input_all(struct netif *netif)
{
	struct vnet *vn = netif->state;
	struct vnet_rx f;
	while (vnet_rx(vn, &f) > 0) {
		struct rx_pbuf *rp = f.priv;
		rp->vn = vn;
		rp->handle = f.handle;
		rp->pc.custom_free_function = rx_pbuf_free;
		struct pbuf *p = pbuf_alloced_custom(PBUF_RAW, (u16_t)f.len, PBUF_REF, &rp->pc,
		                                     f.data, (u16_t)f.len);
		LINK_STATS_INC(link.recv);
		if (netif->input(p, netif) != ERR_OK)
			pbuf_free(p);
	}
}

uint64_t vnetif_tx_drops(void)
{
	return tx_drops;
}

err_t vnetif_init(struct netif *netif)
{
	struct vnet *vn = netif->state;
	netif->name[0] = 'v';
	netif->name[1] = 'n';
	netif->hwaddr_len = ETH_HWADDR_LEN;
	memcpy(netif->hwaddr, vnet_mac(vn), ETH_HWADDR_LEN);
	netif->mtu = vnet_mtu(vn);
	netif->flags = NETIF_FLAG_BROADCAST | NETIF_FLAG_ETHARP | NETIF_FLAG_ETHERNET;
	netif->output = etharp_output;
	netif->linkoutput = linkoutput;
	vnet_set_tx_done(vn, tx_done, NULL);
	return ERR_OK;
}
