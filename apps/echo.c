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
#include "net/inst.h"
#include "net/net.h"

#define ECHO_PORT 7

struct conn {
	struct tcpsrv_conn base; /* base.in: received, not yet queued for sending back */
	uint16_t offset;         /* bytes of base.in's first pbuf already queued */
};

static uint64_t seconds;
static uint64_t tcp_conns, tcp_bytes, udp_datagrams, udp_bytes;

void echo_configure(void)
{
	net_configure_mq();
	seconds = cmdline_u64("echo.seconds", 600, 1, 86400);
}

/* Queue as much of the pending data as the send buffer takes. */
static err_t conn_push(struct tcpsrv_conn *tc)
{
	struct conn *c = (struct conn *)tc;
	struct tcp_pcb *pcb = tc->pcb;
	while (tc->in) {
		struct pbuf *p = tc->in;
		uint16_t chunk = p->len - c->offset;
		uint16_t room = tcp_sndbuf(pcb);
		if (chunk > room)
			chunk = room;
		if (!chunk)
			break;
		if (tcp_write(pcb, (uint8_t *)p->payload + c->offset, chunk,
		              TCP_WRITE_FLAG_COPY | (p->next ? TCP_WRITE_FLAG_MORE : 0)) != ERR_OK)
			break;
		tcp_recved(pcb, chunk);
		tcp_bytes += chunk;
		c->offset += chunk;
		if (c->offset == p->len) {
			tc->in = p->next;
			if (p->next)
				pbuf_ref(p->next);
			pbuf_free(p);
			c->offset = 0;
		}
	}
	tcp_output(pcb);
	return ERR_OK;
}

static bool on_accept(struct tcpsrv_conn *c)
{
	(void)c;
	tcp_conns++;
	return true;
}

static const struct tcpsrv_ops echo_tcp = {
    .conn_size = sizeof(struct conn),
    .accept = on_accept,
    .serve = conn_push,
};

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

/* mq=N: every copy posts what it served; copy 0 joins the others and
 * prints the total, a RESULT with "queues":N and no "queue". */
static void echo_copies_end(const char *by)
{
	unsigned n = net_inst_queues();
	struct net_inst_total t = {.conns = tcp_conns,
	                           .bytes = tcp_bytes,
	                           .datagrams = udp_datagrams,
	                           .datagram_bytes = udp_bytes};

	net_inst_post_total(net_inst_index(), &t);
	if (net_inst_index())
		return;
	net_join_copies();
	net_inst_sum_totals(n, &t);
	printf("RESULT {\"test\":\"echo\",\"stopped_by\":\"%s\",\"tcp_conns\":%llu,"
	       "\"tcp_bytes\":%llu,\"udp_datagrams\":%llu,\"udp_bytes\":%llu,\"queues\":%u}\n",
	       by, (unsigned long long)t.conns, (unsigned long long)t.bytes,
	       (unsigned long long)t.datagrams, (unsigned long long)t.datagram_bytes, n);
}

int echo_main(void)
{
	net_up();
	if (!tcpsrv_listen(ECHO_PORT, &echo_tcp))
		kernel_error("echo", "cannot listen on TCP port %d", ECHO_PORT);
	struct udp_pcb *u = udp_new();
	if (!u || udp_bind(u, IP_ANY_TYPE, ECHO_PORT) != ERR_OK)
		kernel_error("echo", "cannot bind UDP port %d", ECHO_PORT);
	udp_recv(u, on_udp, NULL);
	ctl_start();
	if (!net_inst_index()) /* mq=N: copy 0 says it once, when every copy listens */
		printf("echo listening tcp=%d udp=%d ctl=%s seconds=%lu\n", ECHO_PORT, ECHO_PORT,
		       ctl_label(), seconds);

	int r = net_run(stop_requested, NULL, seconds * 1000000000ull, NULL);
	const char *by = r == 0 ? "ctl" : "time";
	printf(
	    "RESULT {\"test\":\"echo\",\"stopped_by\":\"%s\",\"tcp_conns\":%lu,\"tcp_bytes\":%lu,"
	    "\"udp_datagrams\":%lu,\"udp_bytes\":%lu,\"queue\":%u,\"queues\":%u}\n",
	    by, tcp_conns, tcp_bytes, udp_datagrams, udp_bytes, net_inst_index(),
	    net_inst_queues());
	net_print_counters();
	ctl_print_counters();
	if (net_inst_queues() > 1)
		echo_copies_end(by);
	return EXIT_OK;
}
