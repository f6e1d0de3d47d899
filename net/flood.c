/*
 * flood.c: what a flood of unanswerable requests may cost the appliance.
 *
 * A hostile on-link peer can send SYNs from addresses of our own subnet
 * that never answer ARP (issue 23, finding 8: 10,000 in 0.1 s from 100
 * sources). Unbounded, every SYN to an open port held a SYN_RCVD pcb for
 * lwIP's TCP_SYN_RCVD_TIMEOUT (20 s): the 320-pcb pool ran dry and a real
 * client's SYN found none, so service was gone for 20.5 s. Every reply
 * (SYN-ACK, RST) to an unresolved address asked etharp_query() for a new
 * pending ARP entry, and lwIP's etharp_find_entry() recycles the oldest
 * *resolved* entry before any pending one, so the real peer's entry was the
 * first to go. Three bounds, each counted (FLOOD line, and the frames in
 * the RESULT's lwip_drops):
 *
 * - Half-open connections: at most FLOOD_SYNQ_MAX SYN_RCVD pcbs per
 *   listener. A SYN beyond that, or one that arrives while the pcb pool is
 *   full, first evicts the listener's oldest half-open pcb (tcp_abandon
 *   without a RST: the address is likely spoofed), the way Linux drops the
 *   oldest request when its SYN queue overflows. Runs from lwIP's
 *   LWIP_HOOK_TCP_INPACKET_PCB, just before tcp_listen_input().
 * - ARP: a frame to an address without a resolved entry may only create a
 *   pending entry in a free slot of the table (never recycling a resolved
 *   one), at most FLOOD_ARP_PENDING_MAX pending at once and
 *   FLOOD_ARP_QUEUE_MAX frames queued on each (so MEMP_ARP_QUEUE, sized to
 *   their product, never runs dry). lwIP keeps its table private, so the
 *   pending entries this file let lwIP create are shadowed here and
 *   forgotten once resolved or after FLOOD_ARP_PENDING_MS (lwIP gives a
 *   pending entry up within ARP_MAXPENDING, 5 s): the shadow can only
 *   overestimate what is pending, so a resolved entry is never recycled.
 * - Replies that answer nothing: TCP RSTs and ICMP errors leave at most
 *   FLOOD_REPLY_RATE per second (a token bucket of FLOOD_REPLY_BURST), like
 *   Linux's icmp_msgs_per_sec. SYN-ACKs are not limited here: each belongs
 *   to a half-open pcb, which the first bound limits.
 */
#include "lwip/etharp.h"
#include "lwip/ip4_addr.h"
#include "lwip/memp.h"
#include "lwip/priv/tcp_priv.h"
#include "lwip/prot/icmp.h"
#include "lwip/prot/ip4.h"
#include "lwip/prot/tcp.h"
#include "lwip/stats.h"
#include "lwip/sys.h"
#include "lwip/tcp.h"
#include "net/net.h"
#include "net/port/hooks.h"

_Static_assert(MEMP_NUM_ARP_QUEUE >= FLOOD_ARP_PENDING_MAX * FLOOD_ARP_QUEUE_MAX,
               "the ARP queue pool must hold every pending entry's bounded queue");
_Static_assert(FLOOD_ARP_PENDING_MAX < ARP_TABLE_SIZE, "pending entries need free slots");

#define FLOOD_ARP_PENDING_MS 6000 /* lwIP frees a pending entry after at most 5 s */

static struct flood_stats st;

/* Addresses this file let lwIP create a pending ARP entry for. */
static struct pending {
	ip4_addr_t ip;
	u32_t since_ms;
	unsigned queued; /* frames handed to etharp_output() while pending */
} pend[FLOOD_ARP_PENDING_MAX];
static unsigned npend;
static ssize_t resolved_hint = -1; /* the entry the last resolved frame used */

/* Reply token bucket, in thousandths of a token so the refill is exact. */
static u32_t reply_milli = FLOOD_REPLY_BURST * 1000u, reply_ms;
static bool reply_started;

/* ---- half-open connections ---- */

static void flood_syn(struct tcp_pcb_listen *lpcb)
{
	struct tcp_pcb *oldest = NULL;
	unsigned halfopen = 0;
	u32_t age = 0;

	/* The list is newest first: ">=" keeps the last, oldest of equal age. */
	for (struct tcp_pcb *p = tcp_active_pcbs; p; p = p->next) {
		if (p->state != SYN_RCVD || p->listener != lpcb)
			continue;
		halfopen++;
		if ((u32_t)(tcp_ticks - p->tmr) >= age) {
			age = tcp_ticks - p->tmr;
			oldest = p;
		}
	}
	if (halfopen > st.synq_peak)
		st.synq_peak = halfopen;
	const struct stats_mem *pool = lwip_stats.memp[MEMP_TCP_PCB];
	if (oldest && (halfopen >= FLOOD_SYNQ_MAX || pool->used >= pool->avail)) {
		st.synq_evicted++;
		tcp_abandon(oldest, 0);
	}
}

err_t flood_tcp_inpacket(struct tcp_pcb *pcb, const struct tcp_hdr *hdr)
{
	/* A listening pcb shares only the common fields: check state first. */
	if (pcb->state == LISTEN) {
		if ((TCPH_FLAGS(hdr) & (TCP_SYN | TCP_ACK | TCP_RST)) == TCP_SYN)
			flood_syn((struct tcp_pcb_listen *)pcb);
		return ERR_OK;
	}
	return offload_tcp_inpacket(pcb);
}

/* ---- replies that answer nothing ---- */

static bool is_unsolicited_reply(const struct pbuf *p)
{
	const uint8_t *ip = p->payload;

	/* A later fragment's first bytes are data, not a header (only ICMP
	 * echo replies are ever big enough to be fragmented). */
	if (p->len < IP_HLEN || (ip[6] & 0x1f) || ip[7])
		return false;
	unsigned hl = (ip[0] & 15u) * 4u;
	if (ip[9] == IP_PROTO_TCP && p->len >= hl + TCP_HLEN)
		return ip[hl + 13] & TCP_RST;
	if (ip[9] == IP_PROTO_ICMP && p->len > hl) {
		uint8_t type = ip[hl];
		return type == ICMP_DUR || type == ICMP_TE || type == ICMP_PP;
	}
	return false;
}

static bool reply_admit(void)
{
	u32_t now = sys_now();

	if (!reply_started) {
		reply_started = true;
		reply_ms = now;
	}
	u32_t dt = now - reply_ms;
	reply_ms = now;
	uint64_t milli = reply_milli + (uint64_t)dt * FLOOD_REPLY_RATE;
	reply_milli = milli > FLOOD_REPLY_BURST * 1000u ? FLOOD_REPLY_BURST * 1000u : (u32_t)milli;
	if (reply_milli < 1000) {
		st.reply_limited++;
		return false;
	}
	reply_milli -= 1000;
	return true;
}

/* ---- ARP ---- */

static bool is_resolved(struct netif *netif, const ip4_addr_t *hop)
{
	ip4_addr_t *ip;
	struct netif *nif;
	struct eth_addr *eth;
	const ip4_addr_t *ipr;

	/* One-entry cache first: every frame of a benchmark goes to one peer. */
	if (resolved_hint >= 0 && etharp_get_entry((size_t)resolved_hint, &ip, &nif, &eth) &&
	    ip4_addr_cmp(ip, hop))
		return true;
	ssize_t i = etharp_find_addr(netif, hop, &eth, &ipr);
	if (i < 0)
		return false;
	resolved_hint = i;
	return true;
}

static unsigned resolved_entries(void)
{
	ip4_addr_t *ip;
	struct netif *nif;
	struct eth_addr *eth;
	unsigned n = 0;

	for (size_t i = 0; i < ARP_TABLE_SIZE; i++)
		n += etharp_get_entry(i, &ip, &nif, &eth) == 1;
	return n;
}

/* Forget shadowed entries lwIP has resolved or given up by now. */
static void pending_expire(struct netif *netif)
{
	u32_t now = sys_now();

	for (unsigned i = 0; i < npend;) {
		if (now - pend[i].since_ms >= FLOOD_ARP_PENDING_MS ||
		    is_resolved(netif, &pend[i].ip))
			pend[i] = pend[--npend];
		else
			i++;
	}
}

static bool arp_admit(struct netif *netif, const ip4_addr_t *dst)
{
	const ip4_addr_t *hop = dst;

	/* etharp_output()'s own choice of next hop; only unicast needs ARP. */
	if (ip4_addr_isbroadcast(dst, netif) || ip4_addr_ismulticast(dst))
		return true;
	if (!ip4_addr_netcmp(dst, netif_ip4_addr(netif), netif_ip4_netmask(netif)) &&
	    !ip4_addr_islinklocal(dst))
		hop = netif_ip4_gw(netif);
	/* No gateway: etharp_output() refuses it (ERR_RTE) without ARP. */
	if (ip4_addr_isany(hop) || is_resolved(netif, hop))
		return true;
	pending_expire(netif);
	for (unsigned i = 0; i < npend; i++) {
		if (!ip4_addr_cmp(&pend[i].ip, hop))
			continue;
		if (pend[i].queued >= FLOOD_ARP_QUEUE_MAX) {
			st.arp_queue_full++;
			return false;
		}
		pend[i].queued++;
		return true;
	}
	if (npend >= FLOOD_ARP_PENDING_MAX || resolved_entries() + npend >= ARP_TABLE_SIZE) {
		st.arp_pending_full++;
		return false;
	}
	pend[npend++] = (struct pending){*hop, sys_now(), 1};
	return true;
}

bool flood_output_admit(struct netif *netif, const struct pbuf *p, const ip4_addr_t *dst)
{
	if (is_unsolicited_reply(p) && !reply_admit())
		return false;
	return arp_admit(netif, dst);
}

const struct flood_stats *flood_stats(void)
{
	st.arp_pending = npend;
	return &st;
}

uint64_t flood_frame_drops(void)
{
	return st.arp_pending_full + st.arp_queue_full + st.reply_limited;
}
