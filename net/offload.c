/*
 * offload.c: what the netif hands to the device's offloads (virtio 1.2
 * 5.1.6.2 transmit, 5.1.6.4 receive) and the lwIP side of each.
 *
 * Checksums. lwIP's per-netif checksum control decides what lwIP computes
 * and verifies. With the device's CSUM, lwIP leaves the TCP checksum field
 * 0; offload_tx() writes the pseudo-header sum there and marks the frame
 * NEEDS_CSUM, the device sums from the TCP header to the end. On receive
 * the flags word is set per frame before lwIP sees it: a frame the device
 * vouched for (DATA_VALID, or NEEDS_CSUM: a partial checksum from a local
 * sender) skips lwIP's TCP/UDP verification, every other frame is checked
 * in software as before.
 *
 * TSO without changing lwIP. lwIP cuts a send queue into segments of at
 * most pcb->mss bytes (tcp_write(), bounded again by half the peer's
 * largest window). Once a connection is established (the input hook, or
 * offload_tcp_established() from a connected callback), its real MSS moves
 * into the pcb's ext arg and pcb->mss grows to the largest multiple of it
 * that keeps the frame within lwIP's 16-bit pbuf length; offload_tx() then
 * finds the real MSS again for gso_size. cwnd is raised to one such segment
 * (lwIP sends only whole segments that fit it; its later adjustments are
 * all in units of pcb->mss, so cwnd never drops below one segment again).
 * The netif's IP MTU is raised with TSO so lwIP does not fragment the big
 * segments; netif.c fragments everything else at the real MTU.
 */
#include <string.h>
#include "drivers/virtio/virtio.h"
#include "drivers/virtio/vnet.h"
#include "lwip/ip.h"
#include "lwip/netif.h"
#include "lwip/priv/tcp_priv.h"
#include "lwip/tcp.h"
#include "net/net.h"
#include "net/port/hooks.h"
#include "kernel/prof.h"

#define ETH_HLEN 14
/* Largest TCP payload in one frame: lwIP's pbuf tot_len (16 bits) holds the
 * Ethernet, IP and TCP headers too (no TCP options on data: no timestamps). */
#define TSO_PAYLOAD_MAX (VNET_GSO_FRAME_MAX - ETH_HLEN - 20 - 20)

static unsigned offloads;
static uint8_t mss_arg = 0xff; /* tcp_ext_arg id holding the real MSS */
static uint16_t gen_flags;     /* NETIF_CHECKSUM_GEN_* in force */
static uint16_t fallback_mss;
struct offload_stats offload_st;

static inline uint16_t be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

void offload_init(struct netif *netif, unsigned off, uint16_t mtu)
{
	offloads = off;
	gen_flags = NETIF_CHECKSUM_GEN_IP | NETIF_CHECKSUM_GEN_UDP | NETIF_CHECKSUM_GEN_ICMP;
	if (!(off & VNET_OFF_TX_CSUM))
		gen_flags |= NETIF_CHECKSUM_GEN_TCP;
	NETIF_SET_CHECKSUM_CTRL(netif, offload_rx_flags(0));
	fallback_mss = (uint16_t)(mtu - 40);
	if ((off & VNET_OFF_TSO4) && mss_arg == 0xff)
		mss_arg = tcp_ext_arg_alloc_id();
}

bool offload_tso(void)
{
	return offloads & VNET_OFF_TSO4;
}

uint16_t offload_rx_flags(uint32_t vnet_flags)
{
	uint16_t check = NETIF_CHECKSUM_CHECK_IP | NETIF_CHECKSUM_CHECK_ICMP;

	/* The IP header is always verified (20 bytes; DATA_VALID speaks of
	 * the L4 checksum, as Linux reads it). */
	if (!(vnet_flags & VNET_RX_F_CSUM_VALID))
		check |= NETIF_CHECKSUM_CHECK_TCP | NETIF_CHECKSUM_CHECK_UDP;
	return gen_flags | check;
}

void offload_tcp_established(struct tcp_pcb *pcb)
{
	uint16_t real = pcb->mss, big;

	if (!(offloads & VNET_OFF_TSO4) || pcb->state != ESTABLISHED || !real ||
	    tcp_ext_arg_get(pcb, mss_arg))
		return;
	big = (uint16_t)(TSO_PAYLOAD_MAX / real * real);
	tcp_ext_arg_set(pcb, mss_arg, (void *)(uintptr_t)real);
	pcb->mss = big;
	if (pcb->cwnd < big)
		pcb->cwnd = big;
	offload_st.tso_conns++;
}

err_t offload_tcp_inpacket(struct tcp_pcb *pcb)
{
	/* A listening pcb shares only the common fields: check state first. */
	if (pcb->state == ESTABLISHED)
		offload_tcp_established(pcb);
	return ERR_OK;
}

/* The real MSS of the connection that sent this segment. */
static uint16_t offload_mss_of(const uint8_t *ip, const uint8_t *tcp)
{
	uint16_t sport = be16(tcp), dport = be16(tcp + 2);

	for (struct tcp_pcb *pcb = tcp_active_pcbs; pcb; pcb = pcb->next) {
		if (pcb->local_port != sport || pcb->remote_port != dport ||
		    memcmp(&pcb->remote_ip.addr, ip + 16, 4))
			continue;
		void *real = tcp_ext_arg_get(pcb, mss_arg);
		if (real)
			return (uint16_t)(uintptr_t)real;
		break;
	}
	offload_st.tso_no_pcb++;
	return fallback_mss;
}

int offload_tx(struct pbuf *p, struct vnet_txo *o, uint16_t max_frame)
{
	uint8_t *f = p->payload, *ip = f + ETH_HLEN, *tcp;
	uint32_t ihl, thl, iplen, tcplen, sum;

	if (!(offloads & VNET_OFF_TX_CSUM) || p->len < ETH_HLEN + 20 || be16(f + 12) != 0x0800 ||
	    ip[9] != IP_PROTO_TCP)
		return 0;
	ihl = (ip[0] & 0xfu) * 4u;
	iplen = be16(ip + 2);
	if (ihl < 20 || p->len < ETH_HLEN + ihl + 20)
		return -1; /* headers split over pbufs: flatten first */
	tcp = ip + ihl;
	thl = (tcp[12] >> 4) * 4u;
	if (thl < 20 || p->len < ETH_HLEN + ihl + thl || iplen < ihl + thl ||
	    ETH_HLEN + iplen != p->tot_len)
		return -1;
	tcplen = iplen - ihl;
	/* RFC 793 pseudo header: addresses, protocol, TCP length; stored
	 * folded but not complemented, the device adds the rest (5.1.6.2). */
	sum = be16(ip + 12) + be16(ip + 14) + be16(ip + 16) + be16(ip + 18) + IP_PROTO_TCP + tcplen;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	tcp[16] = (uint8_t)(sum >> 8);
	tcp[17] = (uint8_t)sum;
	*o = (struct vnet_txo){.csum = true,
	                       .csum_start = (uint16_t)(ETH_HLEN + ihl),
	                       .csum_offset = 16,
	                       .gso_type = VIRTIO_NET_HDR_GSO_NONE};
	offload_st.tx_csum++;
	if (tcplen == thl && !(tcp[13] & (TCP_SYN | TCP_FIN | TCP_RST)))
		offload_st.tx_acks++;
	if (ETH_HLEN + iplen > max_frame) {
		o->gso_type = VIRTIO_NET_HDR_GSO_TCPV4;
		o->gso_size = offload_mss_of(ip, tcp);
		o->hdr_len = (uint16_t)(ETH_HLEN + ihl + thl);
		offload_st.tx_tso++;
	}
	return 1;
}

#if VNETLAB_PROFILE
u16_t lwip_standard_chksum(const void *dataptr, int len);

unsigned short offload_prof_chksum(const void *data, int len)
{
	prof_enter(PROF_CSUM);
	u16_t r = lwip_standard_chksum(data, len);
	prof_exit();
	return r;
}
#endif
