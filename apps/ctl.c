/*
 * ctl.c: a UDP control port for serving apps (echo, the benchmark
 * servers). A datagram "stop" makes the app finish cleanly: print its
 * result and counters, then exit 0. "pools" prints a POOLS line now (what
 * is in use: RX buffers, TX slots, lwIP pools, heap), for soak runs that
 * compare a run's end with its warm-up. "state" prints where both rings
 * stand, each TCP connection's send and receive state and the POOLS line
 * (net_print_state(): what a host peer that sees no progress asks for, so
 * a stall's console says why). Anything else is answered with "?".
 */
#include <string.h>
#include "apps/apps.h"
#include "lwip/udp.h"
#include "net/net.h"

static bool stop;

static void ctl_recv(void *arg, struct udp_pcb *pcb, struct pbuf *p, const ip_addr_t *addr,
                     u16_t port)
{
	(void)arg;
	char buf[8] = "";
	pbuf_copy_partial(p, buf, sizeof(buf) - 1, 0);
	pbuf_free(p);
	bool is_stop = !strncmp(buf, "stop", 4), is_pools = !strncmp(buf, "pools", 5);
	bool is_state = !strncmp(buf, "state", 5), ok = is_stop || is_pools || is_state;
	stop |= is_stop;
	if (is_pools)
		vnetif_print_pool_line(net_vnet());
	if (is_state)
		net_print_state();
	struct pbuf *r = pbuf_alloc(PBUF_TRANSPORT, ok ? 3 : 1, PBUF_RAM);
	if (r) {
		memcpy(r->payload, ok ? "ok\n" : "?", r->len);
		udp_sendto(pcb, r, addr, port);
		pbuf_free(r);
	}
}

void ctl_start(void)
{
	struct udp_pcb *pcb = udp_new();
	if (pcb && udp_bind(pcb, IP_ANY_TYPE, CTL_PORT) == ERR_OK)
		udp_recv(pcb, ctl_recv, NULL);
}

bool ctl_stop_requested(void)
{
	return stop;
}
