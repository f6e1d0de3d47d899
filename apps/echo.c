/*
 * echo.c: RFC 862 echo over TCP and UDP on port 7, for tests and quick
 * checks from the host (ping, nc, the integrity tests).
 *
 * Keys: echo.seconds=N serve at most N seconds (default 600), then print
 * the counters and exit 0; a "stop" datagram on the control port ends
 * sooner.
 *
 * TCP flow control is end to end: received data is acknowledged to the
 * sender (tcp_recved) only once it has been queued for sending back, so a
 * fast sender is slowed down by our send buffer, never dropped.
 */
#include <stdio.h>
#include <stdlib.h>
#include "apps/apps.h"
#include "kernel/kernel.h"
#include "lwip/tcp.h"
#include "lwip/udp.h"
#include "net/net.h"

#define ECHO_PORT 7

struct conn {
	struct tcp_pcb *pcb;
	struct pbuf *pending; /* received, not yet queued for sending back */
	uint16_t offset;      /* bytes of pending->payload chain already queued */
};

static uint64_t seconds;
static uint64_t tcp_conns, tcp_bytes, udp_datagrams, udp_bytes;

void echo_configure(void)
{
	net_configure();
	seconds = cmdline_u64("echo.seconds", 600, 1, 86400);
}

static void conn_close(struct conn *c)
{
	tcpconn_detach(c->pcb);
	if (tcp_close(c->pcb) != ERR_OK)
		tcp_abort(c->pcb);
	if (c->pending)
		pbuf_free(c->pending);
	free(c);
}

/* Queue as much of the pending data as the send buffer takes. */
static void conn_push(struct conn *c)
{
	while (c->pending) {
		struct pbuf *p = c->pending;
		uint16_t chunk = p->len - c->offset;
		uint16_t room = tcp_sndbuf(c->pcb);
		if (chunk > room)
			chunk = room;
		if (!chunk)
			break;
		if (tcp_write(c->pcb, (uint8_t *)p->payload + c->offset, chunk,
		              TCP_WRITE_FLAG_COPY | (p->next ? TCP_WRITE_FLAG_MORE : 0)) != ERR_OK)
			break;
		tcp_recved(c->pcb, chunk);
		tcp_bytes += chunk;
		c->offset += chunk;
		if (c->offset == p->len) {
			c->pending = p->next;
			if (p->next)
				pbuf_ref(p->next);
			pbuf_free(p);
			c->offset = 0;
		}
	}
	tcp_output(c->pcb);
}

static err_t on_recv(void *arg, struct tcp_pcb *pcb, struct pbuf *p, err_t err)
{
	struct conn *c = arg;
	(void)pcb;
	if (!p || err != ERR_OK) {
		if (p)
			pbuf_free(p);
		conn_close(c);
		return ERR_OK;
	}
	if (c->pending)
		pbuf_cat(c->pending, p);
	else
		c->pending = p;
	conn_push(c);
	return ERR_OK;
}

static err_t on_sent(void *arg, struct tcp_pcb *pcb, u16_t len)
{
	(void)pcb;
	(void)len;
	conn_push(arg);
	return ERR_OK;
}

static void on_err(void *arg, err_t err)
{
	struct conn *c = arg;
	(void)err;
	if (c) {
		if (c->pending)
			pbuf_free(c->pending);
		free(c); /* the pcb is already gone */
	}
}

static err_t on_accept(void *arg, struct tcp_pcb *pcb, err_t err)
{
	(void)arg;
	if (err != ERR_OK || !pcb)
		return ERR_VAL;
	struct conn *c = calloc(1, sizeof(*c));
	if (!c) {
		tcp_abort(pcb);
		return ERR_ABRT;
	}
	c->pcb = pcb;
	tcp_conns++;
	tcp_nagle_disable(pcb);
	tcpconn_attach(pcb, c, on_recv, on_sent, on_err);
	return ERR_OK;
}

static void on_udp(void *arg, struct udp_pcb *pcb, struct pbuf *p, const ip_addr_t *addr,
                   u16_t port)
{
	(void)arg;
	udp_datagrams++;
	udp_bytes += p->tot_len;
	udp_sendto(pcb, p, addr, port); /* zero-copy: the reply references the RX buffer */
	pbuf_free(p);
}

static bool stop_requested(void *unused)
{
	(void)unused;
	return ctl_stop_requested();
}

int echo_main(void)
{
	net_up();
	struct tcp_pcb *l = tcp_new();
	if (!l || tcp_bind(l, IP_ANY_TYPE, ECHO_PORT) != ERR_OK || !(l = tcp_listen(l)))
		kernel_error("echo", "cannot listen on TCP port %d", ECHO_PORT);
	tcp_accept(l, on_accept);
	struct udp_pcb *u = udp_new();
	if (!u || udp_bind(u, IP_ANY_TYPE, ECHO_PORT) != ERR_OK)
		kernel_error("echo", "cannot bind UDP port %d", ECHO_PORT);
	udp_recv(u, on_udp, NULL);
	ctl_start();
	printf("echo listening tcp=%d udp=%d ctl=%s seconds=%lu\n", ECHO_PORT, ECHO_PORT,
	       ctl_label(), seconds);

	int r = net_run(stop_requested, NULL, seconds * 1000000000ull, NULL);
	printf(
	    "RESULT {\"test\":\"echo\",\"stopped_by\":\"%s\",\"tcp_conns\":%lu,\"tcp_bytes\":%lu,"
	    "\"udp_datagrams\":%lu,\"udp_bytes\":%lu}\n",
	    r == 0 ? "ctl" : "time", tcp_conns, tcp_bytes, udp_datagrams, udp_bytes);
	net_print_counters();
	ctl_print_counters();
	return EXIT_OK;
}
