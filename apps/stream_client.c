/*
 * stream_client.c: the appliance connects to a stock `iperf -s` (2.x) or
 * another appliance's stream server, like `iperf -c`: one connection per
 * instance, each starting with iperf 2.1.8's test header. TCP_STREAM: we
 * send records until the measured interval ends, then FIN, and wait for
 * the server to close. TCP_MAERTS: the header asks the server to send
 * (HEADER_REVERSE, iperf -R) for warm-up + measured time + 1 s; we read
 * until it closes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "apps/apps.h"
#include "apps/stream.h"
#include "kernel/kernel.h"
#include "lwip/tcp.h"
#include "net/inst.h"
#include "net/net.h"

#define CONNECT_TIMEOUT_S 10
#define FINISH_TIMEOUT_NS 5000000000ull /* for the server to close after our end */

static struct sconn *conns;
static unsigned connected, closed;
static bool stopping;

static const char *peer_str(void)
{
	static char s[24];
	if (!s[0])
		ipaddr_ntoa_r(&stream_cfg.peer, s, sizeof(s));
	return s;
}

/* iperf 2.1.8's first write (Settings_GenerateClientHdr, TCP case). */
static void make_header(uint8_t h[STREAM_HDR_LEN])
{
	const struct stream_config *c = &stream_cfg;
	uint32_t flags = IPERF_HEADER_EXTEND | IPERF_HEADER_LEN_BIT | (STREAM_HDR_LEN << 1);
	if (c->maerts)
		flags |= IPERF_HEADER_VERSION2;
	memset(h, 0, STREAM_HDR_LEN);
	stream_put_be32(h + 0, flags);
	stream_put_be32(h + 4, c->instances); /* numThreads */
	stream_put_be32(h + 8, c->port);      /* mPort */
	stream_put_be32(h + 12, c->msg);      /* mBufLen */
	/* mAmount: negative = time in 10 ms units; +1 s so a server sending
	 * to us (maerts) is still at it when our measured interval ends */
	stream_put_be32(h + 20, (uint32_t) - (int32_t)((c->warmup + c->seconds + 1) * 100));
	/* client_hdrext: type, length 0; upper flags; version; tos, rates 0 */
	h[32] = (uint8_t)((c->maerts ? IPERF_UPPER_REVERSE : 0) >> 8);
	stream_put_be32(h + 36, IPERF_VERSION_U);
	stream_put_be32(h + 40, IPERF_VERSION_L);
}

/* ERR_ABRT when the pcb had to be aborted: lwIP callbacks must return it. */
static err_t close_conn(struct sconn *s)
{
	struct tcp_pcb *pcb = s->pcb;
	tcpconn_detach(pcb);
	s->pcb = NULL;
	closed++;
	if (tcp_close(pcb) == ERR_OK)
		return ERR_OK;
	tcp_abort(pcb);
	return ERR_ABRT;
}

static err_t on_recv(void *arg, struct tcp_pcb *pcb, struct pbuf *p, err_t err)
{
	struct sconn *s = arg;
	if (!p || err != ERR_OK) {
		if (p)
			pbuf_free(p);
		if (!stopping)
			kernel_error("stream", "%s:%u closed the connection during the run",
			             peer_str(), stream_cfg.port);
		return close_conn(s);
	}
	/* TCP_STREAM: only iperf's header acknowledgment comes back; skip it */
	if (stream_cfg.maerts)
		for (struct pbuf *q = p; q; q = q->next)
			stream_received(s, q->payload, q->len);
	tcp_recved(pcb, p->tot_len);
	pbuf_free(p);
	return ERR_OK;
}

static err_t on_sent(void *arg, struct tcp_pcb *pcb, u16_t len)
{
	struct sconn *s = arg;
	(void)pcb;
	stream_acked(s, len);
	stream_send(s);
	return ERR_OK;
}

static void on_err(void *arg, err_t err)
{
	struct sconn *s = arg;
	s->pcb = NULL;
	closed++;
	if (stopping)
		return;
	if (!s->up && err == ERR_RST)
		kernel_error("stream", "cannot connect to %s:%u: refused (is iperf -s listening?)",
		             peer_str(), stream_cfg.port);
	kernel_error("stream", "connection to %s:%u %s", peer_str(), stream_cfg.port,
	             err == ERR_RST ? "reset by peer" : "aborted");
}

static err_t on_connected(void *arg, struct tcp_pcb *pcb, err_t err)
{
	struct sconn *s = arg;
	uint8_t h[STREAM_HDR_LEN];
	if (err != ERR_OK)
		return err;
	offload_tcp_established(pcb); /* before the first write: 64 KB segments from the start */
	make_header(h);
	if (tcp_write(pcb, h, STREAM_HDR_LEN, TCP_WRITE_FLAG_COPY) != ERR_OK)
		kernel_error("stream", "cannot queue the iperf header");
	s->hdr_unacked = STREAM_HDR_LEN;
	if (!stream_cfg.maerts) {
		s->sending = true;
		s->send_left = UINT64_MAX;
	}
	s->up = true;
	stream_send(s);
	tcp_output(pcb);
	connected++;
	return ERR_OK;
}

static void open_conn(struct sconn *s)
{
	s->rec_len = stream_cfg.msg; /* what we asked `iperf -s -l` to write */
	s->pcb = tcp_new();
	if (!s->pcb)
		kernel_error("stream", "cannot open TCP connection %u", (unsigned)(s - conns));
	if (!net_bind_local_port(NULL, s->pcb, &stream_cfg.peer, stream_cfg.port))
		kernel_error("stream", "copy %u: no free local port whose replies reach its queue",
		             net_inst_index());
	tcpconn_attach(s->pcb, s, on_recv, on_sent, on_err);
	if (tcp_connect(s->pcb, &stream_cfg.peer, stream_cfg.port, on_connected) != ERR_OK)
		kernel_error("stream", "tcp_connect to %s:%u failed", peer_str(), stream_cfg.port);
}

static bool all_connected(void *unused)
{
	(void)unused;
	return connected == stream_cfg.instances;
}

static bool all_closed(void *unused)
{
	(void)unused;
	return closed == stream_cfg.instances;
}

/* Resume senders the sent callback did not (e.g. after a zero window), and
 * fail a run that stopped moving. */
static void tick(void *unused)
{
	(void)unused;
	for (unsigned i = 0; i < stream_cfg.instances; i++)
		if (conns[i].pcb && conns[i].sending)
			stream_send(&conns[i]);
	if (clock_ns() - stream_st.last_data_ns > stream_cfg.timeout_s * 1000000000ull)
		kernel_error("stream", "no data moved to or from %s:%u for %lu s (%s)", peer_str(),
		             stream_cfg.port, stream_cfg.timeout_s, vnetif_silence());
}

void stream_client_run(void)
{
	const struct stream_config *c = &stream_cfg;
	conns = calloc(c->instances, sizeof(*conns));
	if (!conns)
		kernel_error("stream", "out of memory for %u connections", c->instances);
	peer_resolve(&c->peer, 5);
	for (unsigned i = 0; i < c->instances; i++)
		open_conn(&conns[i]);
	if (net_run(all_connected, NULL, CONNECT_TIMEOUT_S * 1000000000ull, NULL) < 0)
		kernel_error("stream", "only %u of %u connections to %s:%u up after %d s",
		             connected, c->instances, peer_str(), c->port, CONNECT_TIMEOUT_S);
	printf("stream client %s %s:%u msg=%u instances=%u warmup=%lu seconds=%lu check=%d",
	       c->maerts ? "maerts" : "stream", peer_str(), c->port, c->msg, c->instances,
	       c->warmup, c->seconds, c->check);
	if (net_inst_queues() > 1)
		printf(" queue=%u", net_inst_index());
	printf("\n");

	stream_st.last_data_ns = clock_ns();
	if (c->warmup)
		net_run(NULL, NULL, c->warmup * 1000000000ull, tick);
	stream_measure_begin();
	net_run(NULL, NULL, c->seconds * 1000000000ull, tick);
	stream_measure_end(clock_ns());

	stopping = true;
	for (unsigned i = 0; i < c->instances; i++) {
		if (conns[i].pcb && conns[i].sending) {
			conns[i].send_left = 0;
			stream_send(&conns[i]); /* FIN */
		}
	}
	if (net_run(all_closed, NULL, FINISH_TIMEOUT_NS, NULL) < 0)
		printf("stream: %u of %u connections not closed by the server; closing\n",
		       c->instances - closed, c->instances);
	for (unsigned i = 0; i < c->instances; i++)
		if (conns[i].pcb)
			close_conn(&conns[i]);
	net_run(NULL, NULL, 200000000ull, NULL);
}
