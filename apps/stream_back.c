/*
 * stream_back.c: the stream server's half of iperf 2's dual (-d) and
 * tradeoff (-r) tests. Such a client's header carries HEADER_VERSION1
 * (RUN_NOW for -d), its listening port (mPort) and the amount; the server
 * connects back to that port on the client's address and sends iperf's
 * pattern (stream.msg records, no header: what iperf -s 2.1.8 sends) for
 * the time or bytes asked, then FIN, and waits for the client to close.
 * stream_server.c starts one now (-d) or when the client's own connection
 * has ended (-r). A back connection that is refused or reset is an ERROR.
 */
#include <stdio.h>
#include <stdlib.h>
#include "apps/apps.h"
#include "apps/stream.h"
#include "kernel/kernel.h"
#include "lwip/tcp.h"
#include "net/net.h"

#define MAX_BACK 32

struct back {
	struct sconn s;
	int32_t amount;
	uint16_t port;
};

static struct back *backs[MAX_BACK];
static unsigned nback, open_count;

static void peer_str(const struct back *b, char *out, int size)
{
	ipaddr_ntoa_r(&b->s.pcb->remote_ip, out, size);
}

static err_t finish(struct back *b)
{
	struct tcp_pcb *pcb = b->s.pcb;
	tcpconn_detach(pcb);
	b->s.pcb = NULL;
	b->s.sending = false;
	open_count--;
	if (tcp_close(pcb) == ERR_OK)
		return ERR_OK;
	tcp_abort(pcb);
	return ERR_ABRT;
}

static err_t on_recv(void *arg, struct tcp_pcb *pcb, struct pbuf *p, err_t err)
{
	struct back *b = arg;
	if (!p || err != ERR_OK) {
		if (p)
			pbuf_free(p);
		return finish(b); /* the client closed: done */
	}
	tcp_recved(pcb, p->tot_len); /* iperf sends nothing back; ignore it */
	pbuf_free(p);
	return ERR_OK;
}

static err_t on_sent(void *arg, struct tcp_pcb *pcb, u16_t len)
{
	struct back *b = arg;
	(void)pcb;
	stream_acked(&b->s, len);
	stream_send(&b->s);
	return ERR_OK;
}

static void on_err(void *arg, err_t err)
{
	struct back *b = arg;
	bool connected = b->s.up;
	b->s.pcb = NULL;
	b->s.sending = false;
	open_count--;
	if (connected && !b->s.send_left)
		return; /* reset after our FIN: iperf closed its side early */
	kernel_error("stream", "back connection (iperf -d/-r) to the client's port %u %s", b->port,
	             err == ERR_RST ? (connected ? "reset" : "refused") : "aborted");
}

static err_t on_connected(void *arg, struct tcp_pcb *pcb, err_t err)
{
	struct back *b = arg;
	char ip[24];
	if (err != ERR_OK)
		return err;
	offload_tcp_established(pcb);
	peer_str(b, ip, sizeof(ip));
	printf("stream: back connection to %s:%u, sending for amount %ld (iperf: < 0 is 10 ms "
	       "units)\n",
	       ip, b->port, (long)b->amount);
	b->s.up = true;
	b->s.sending = true;
	b->s.send_left = b->amount < 0 ? UINT64_MAX : (uint64_t)b->amount;
	b->s.send_until_ns =
	    b->amount < 0 ? clock_ns() + (uint64_t) - (int64_t)b->amount * 10000000ull : 0;
	stream_st.last_data_ns = clock_ns();
	stream_send(&b->s);
	return ERR_OK;
}

void stream_back_start(const ip_addr_t *ip, uint16_t port, int32_t amount)
{
	if (nback == MAX_BACK)
		kernel_error("stream", "more than %d back connections (iperf -d/-r)", MAX_BACK);
	struct back *b = calloc(1, sizeof(*b));
	if (!b || !(b->s.pcb = tcp_new()))
		kernel_error("stream", "out of memory for a back connection (iperf -d/-r)");
	backs[nback++] = b;
	open_count++;
	b->amount = amount;
	b->port = port;
	b->s.rec_len = stream_cfg.msg;
	tcpconn_attach(b->s.pcb, b, on_recv, on_sent, on_err);
	if (tcp_connect(b->s.pcb, ip, port, on_connected) != ERR_OK)
		kernel_error("stream", "tcp_connect back to the client's port %u failed", port);
}

unsigned stream_back_open(void)
{
	return open_count;
}

void stream_back_tick(void)
{
	for (unsigned i = 0; i < nback; i++)
		if (backs[i]->s.pcb && backs[i]->s.sending)
			stream_send(&backs[i]->s);
}
