/*
 * peer.c: the host peer of a client-role benchmark: its address from the
 * command line, and its link-layer address resolved before the first
 * request is sent.
 *
 * Why resolve first: lwIP queues only the newest packet per unresolved
 * ARP entry (ARP_QUEUEING 0), so 100 UDP instances starting at once would
 * lose 99 requests, and a TCP SYN lost to ARP waits out lwIP's 3 s initial
 * retransmission timeout. A bounded wait here turns "nobody there" into a
 * clear ERROR line instead.
 */
#include "apps/lib/lib.h"
#include "kernel/kernel.h"
#include "lwip/etharp.h"
#include "net/net.h"

void peer_parse(const char *key, const char *def, ip_addr_t *out)
{
	const char *v = cmdline_str(key, def);
	if (!ipaddr_aton(v, out))
		kernel_usage_error("cmdline", "bad value '%s' for key '%s' (not an IPv4 address)",
		                   v, key);
}

struct arp_wait {
	const ip4_addr_t *hop;
	uint64_t next_request_ns;
};

static bool arp_resolved(void *arg)
{
	struct arp_wait *w = arg;
	struct eth_addr *mac;
	const ip4_addr_t *ip;
	return etharp_find_addr(net_netif(), w->hop, &mac, &ip) >= 0;
}

/* Re-ask every 200 ms: the host may still be setting up its side. */
static void arp_tick(void *arg)
{
	struct arp_wait *w = arg;
	uint64_t now = clock_ns();
	if (now < w->next_request_ns)
		return;
	etharp_request(net_netif(), w->hop);
	w->next_request_ns = now + 200000000ull;
}

void peer_resolve(const ip_addr_t *peer, uint64_t timeout_s)
{
	struct netif *nif = net_netif();
	const ip4_addr_t *dst = ip_2_ip4(peer);
	const ip4_addr_t *hop = dst;
	if (!ip4_addr_netcmp(dst, netif_ip4_addr(nif), netif_ip4_netmask(nif))) {
		hop = netif_ip4_gw(nif);
		if (ip4_addr_isany(hop))
			kernel_error("peer",
			             "%s is not on the local subnet and there is no gateway (gw=)",
			             ipaddr_ntoa(peer));
	}
	struct arp_wait w = {hop, 0};
	if (net_run(arp_resolved, &w, timeout_s * 1000000000ull, arp_tick) < 0)
		kernel_error("peer", "no ARP reply from %s within %lu s (is the host side up?)",
		             ip4addr_ntoa(hop), timeout_s);
}
