/*
 * ctl.c: a UDP control port for serving apps (echo, the benchmark
 * servers). A datagram "stop" makes the app finish cleanly: print its
 * result and counters, then exit 0. Anything else is answered with "?".
 */
#include <string.h>
#include "apps/apps.h"
#include "lwip/udp.h"

static bool stop;

static void ctl_recv(void *arg, struct udp_pcb *pcb, struct pbuf *p, const ip_addr_t *addr,
                     u16_t port)
{
	(void)arg;
	char buf[8] = "";
	pbuf_copy_partial(p, buf, sizeof(buf) - 1, 0);
	pbuf_free(p);
	bool is_stop = !strncmp(buf, "stop", 4);
	stop |= is_stop;
	struct pbuf *r = pbuf_alloc(PBUF_TRANSPORT, is_stop ? 3 : 1, PBUF_RAM);
	if (r) {
		memcpy(r->payload, is_stop ? "ok\n" : "?", r->len);
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
