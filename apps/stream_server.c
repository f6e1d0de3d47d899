/*
 * stream_server.c: a stock `iperf -c` (2.x) or another appliance's stream
 * client drives the appliance, like `iperf -s`. Each connection starts
 * with the client's test header; then either the client sends until it
 * closes (TCP_MAERTS for us), or, with HEADER_REVERSE (`iperf -c -R`), we
 * send on the same connection for the time or bytes it asked (TCP_STREAM)
 * and close. A 2.0.13+ client that sent HEADER_EXTEND without VERSION2
 * gets iperf's header acknowledgment back (Listener::client_test_ack).
 * A dual (-d) or tradeoff (-r) header (HEADER_VERSION1) has
 * stream_back.c connect back to the client now or when this connection
 * ends. --full-duplex is not supported: such a connection is closed with
 * a note. UDP clients on the same port are stream_udp.c's.
 *
 * Phases: wait for the first header or UDP flow (stream.wait), warm-up,
 * then measure until every connection the clients announced (numThreads,
 * at least stream.instances) has closed and every back connection and UDP
 * flow has ended (a UDP flow: its FIN answered UDP_LINGER_NS ago), no data
 * moved for stream.idle seconds, a "stop" on the control port, or
 * stream.seconds.
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

#define MAX_CONNS               64
#define IPERF_HEADER_PEERDETECT 0x02000000u
#define UDP_LINGER_NS           300000000ull /* answer a client's repeated FINs */

struct srv_conn {
	struct tcpsrv_conn base; /* data is handed over whole (ops.recv): base.in stays NULL */
	struct sconn s;
	uint8_t hdr[STREAM_HDR_MAX];
	uint32_t hdr_have, hdr_need;
	bool hdr_sized, key_sized;
	bool back_pending; /* iperf -r: connect back when this connection ends */
	uint16_t back_port;
	int32_t back_amount;
	ip_addr_t back_ip;
};

static struct tcp_pcb *listener;
static struct srv_conn *conns[MAX_CONNS];
static unsigned conns_open, conns_seen, expected, started;

static void conn_release(struct tcpsrv_conn *tc)
{
	struct srv_conn *c = (struct srv_conn *)tc;
	for (unsigned i = 0; i < MAX_CONNS; i++)
		if (conns[i] == c)
			conns[i] = NULL;
	if (c->back_pending)
		stream_back_start(&c->back_ip, c->back_port, c->back_amount);
	conns_open--;
}

/* c is gone afterwards: ERR_CLSD if closed, ERR_ABRT if the pcb had to be
 * aborted (an lwIP callback must then return ERR_ABRT). */
static err_t conn_close(struct srv_conn *c, bool abort)
{
	return tcpsrv_close(&c->base, abort) == ERR_ABRT ? ERR_ABRT : ERR_CLSD;
}

/* Settings_ClientTestHdrLen(): 0 for a client that sends no header. */
static uint32_t header_len(uint32_t flags)
{
	if (!(flags & (IPERF_HEADER_VERSION1 | IPERF_HEADER_VERSION2 | IPERF_HEADER_EXTEND)))
		return 0;
	if (flags & IPERF_HEADER_LEN_BIT)
		return (flags & IPERF_HEADER_LEN_MASK) >> 1;
	uint32_t len = 0;
	if (flags & (IPERF_HEADER_VERSION1 | IPERF_HEADER_EXTEND))
		len += 24;
	if (flags & (IPERF_HEADER_VERSION2 | IPERF_HEADER_EXTEND))
		len += 36;
	return len;
}

static void send_ack(struct tcp_pcb *pcb)
{
	uint8_t a[IPERF_ACK_LEN] = {0};
	stream_put_be32(a + 0, IPERF_CLIENTHDRACK);
	stream_put_be32(a + 4, IPERF_ACK_LEN);
	stream_put_be32(a + 12, IPERF_VERSION_U);
	stream_put_be32(a + 16, IPERF_VERSION_L);
	if (tcp_write(pcb, a, IPERF_ACK_LEN, TCP_WRITE_FLAG_COPY) == ERR_OK)
		tcp_output(pcb);
}

/* The whole header is in c->hdr: do what the client asked. Not ERR_OK: c
 * is gone (conn_close). */
static err_t apply_header(struct srv_conn *c, uint32_t len)
{
	struct sconn *s = &c->s;
	uint32_t flags = stream_be32(c->hdr);
	uint32_t threads = stream_be32(c->hdr + 4), buflen = stream_be32(c->hdr + 12);
	int32_t amount = (int32_t)stream_be32(c->hdr + 20);
	uint16_t upper = 0;
	if ((flags & (IPERF_HEADER_EXTEND | IPERF_HEADER_VERSION2)) && len >= 36)
		upper = (uint16_t)(c->hdr[32] << 8 | c->hdr[33]);
	bool v2 = flags & IPERF_HEADER_VERSION2;

	if (v2 && (upper & IPERF_UPPER_FULLDUPLEX)) {
		printf("stream: closing a connection: --full-duplex not supported\n");
		return conn_close(c, false);
	}
	if (flags & IPERF_HEADER_VERSION1) {
		uint32_t port = stream_be32(c->hdr + 8);
		if (!port || port > 65535) {
			printf("stream: closing a connection: dual test to port %u\n", port);
			return conn_close(c, true);
		}
		stream_st.dual = flags & IPERF_RUN_NOW ? 'd' : 'r';
		if (flags & IPERF_RUN_NOW) {
			stream_back_start(&s->pcb->remote_ip, (uint16_t)port, amount);
		} else {
			c->back_pending = true;
			c->back_port = (uint16_t)port;
			c->back_amount = amount;
			ip_addr_copy(c->back_ip, s->pcb->remote_ip);
		}
	}
	if (threads > expected)
		expected = threads < MAX_CONNS ? threads : MAX_CONNS;
	s->rec_len = buflen ? buflen : STREAM_IPERF_BUF;
	stream_st.peer_msg = s->rec_len;
	s->up = true;
	started++;
	if ((flags & IPERF_HEADER_EXTEND && !v2) || flags & IPERF_HEADER_PEERDETECT)
		send_ack(s->pcb);
	if (v2 && (upper & IPERF_UPPER_REVERSE)) {
		s->sending = true;
		s->send_left = amount < 0 ? UINT64_MAX : (uint64_t)amount;
		s->send_until_ns =
		    amount < 0 ? clock_ns() + (uint64_t) - (int64_t)amount * 10000000ull : 0;
		stream_st.last_data_ns = clock_ns();
		stream_send(s);
	}
	return ERR_OK;
}

/* Header first (its length is in its first word), data after. Not ERR_OK:
 * c is gone (conn_close). */
static err_t feed(struct srv_conn *c, const uint8_t *d, uint32_t n)
{
	while (n) {
		if (c->s.up) {
			stream_received(&c->s, d, n);
			return ERR_OK;
		}
		if (!tcpconn_gather(c->hdr, &c->hdr_have, c->hdr_need, &d, &n))
			return ERR_OK;
		uint32_t len = header_len(stream_be32(c->hdr));
		if (!c->hdr_sized) {
			c->hdr_sized = true;
			if (!len) { /* no header: those were data bytes */
				c->s.up = true;
				started++;
				c->s.rec_len = STREAM_IPERF_BUF;
				stream_received(&c->s, c->hdr, c->hdr_have);
				continue;
			}
			if (len < 24 || len > 256) {
				printf("stream: closing a connection: bad iperf header length %u\n",
				       len);
				return conn_close(c, true);
			}
			c->hdr_need = len;
			continue;
		}
		if ((stream_be32(c->hdr) & IPERF_HEADER_KEYCHECK) && !c->key_sized) {
			/* a permit key follows, its length in the header's last 2 bytes */
			c->key_sized = true;
			c->hdr_need = len + (c->hdr[len - 2] << 8 | c->hdr[len - 1]);
			if (c->hdr_need > STREAM_HDR_MAX)
				return conn_close(c, true);
			continue;
		}
		err_t e = apply_header(c, len);
		if (e != ERR_OK)
			return e;
	}
	return ERR_OK;
}

static err_t conn_recv(struct tcpsrv_conn *tc, struct pbuf *p)
{
	struct srv_conn *c = (struct srv_conn *)tc;
	struct tcp_pcb *pcb = tc->pcb;
	u16_t total = p->tot_len;
	for (struct pbuf *q = p; q; q = q->next) {
		err_t e = feed(c, q->payload, q->len);
		if (e != ERR_OK) {
			pbuf_free(p);
			return e == ERR_ABRT ? ERR_ABRT : ERR_OK;
		}
	}
	tcp_recved(pcb, total);
	pbuf_free(p);
	return ERR_OK;
}

static err_t conn_sent(struct tcpsrv_conn *tc, u16_t len)
{
	struct srv_conn *c = (struct srv_conn *)tc;
	stream_acked(&c->s, len);
	stream_send(&c->s);
	return ERR_OK;
}

static bool conn_accept(struct tcpsrv_conn *tc)
{
	struct srv_conn *c = (struct srv_conn *)tc;
	unsigned slot = 0;
	while (slot < MAX_CONNS && conns[slot])
		slot++;
	if (slot == MAX_CONNS)
		return false;
	conns[slot] = c;
	c->s.pcb = tc->pcb;
	c->hdr_need = 4;
	conns_open++;
	stream_st.peers = ++conns_seen;
	return true;
}

/* Nagle stays on: a bulk sender fills its segments. */
static const struct tcpsrv_ops stream_tcp = {
    .conn_size = sizeof(struct srv_conn),
    .nagle = true,
    .accept = conn_accept,
    .recv = conn_recv,
    .sent = conn_sent,
    .release = conn_release,
};

/* mq=N: what this copy's clients did, for the others' phases (net/inst.h
 * slots, this copy's own cache line), once per pass. */
static void publish(void)
{
	unsigned k = net_inst_index();
	net_inst_slot_set(k, NET_SLOT_FIRST_NS, started || stream_udp_started());
	net_inst_slot_set(k, NET_SLOT_LAST_NS, stream_st.last_data_ns);
	net_inst_slot_set(k, NET_SLOT_CONNS_OPEN, conns_open + stream_back_open());
	net_inst_slot_set(k, NET_SLOT_CONNS_SEEN, conns_seen);
	net_inst_slot_set(k, NET_SLOT_EXPECTED, expected);
}

static bool got_client(void *unused)
{
	(void)unused;
	unsigned n = net_inst_queues();
	if (n > 1) {
		publish();
		if (net_inst_slot_max(NET_SLOT_FIRST_NS, n))
			return true;
	}
	return started || stream_udp_started() || ctl_stop_requested();
}

/* With mq=N the TCP clients are gone when the connections the clients
 * announced, on any queue, were seen and none is open on any queue; the
 * idle limit counts from the last data on any queue. */
static bool clients_gone(void *unused)
{
	(void)unused;
	unsigned n = net_inst_queues();
	uint64_t last = stream_st.last_data_ns;
	bool tcp;
	if (n > 1) {
		publish();
		last = net_inst_slot_max(NET_SLOT_LAST_NS, n);
		tcp = net_inst_slot_sum(NET_SLOT_CONNS_SEEN, n) >=
		          net_inst_slot_max(NET_SLOT_EXPECTED, n) &&
		      !net_inst_slot_sum(NET_SLOT_CONNS_OPEN, n);
	} else {
		tcp = conns_seen >= expected && !conns_open && !stream_back_open();
	}
	if (ctl_stop_or_idle(last, stream_cfg.idle_s))
		return true;
	bool udp = stream_udp_finished(UDP_LINGER_NS);
	if (!stream_udp_started())
		return tcp;
	return udp && (tcp || !conns_seen);
}

/* Senders whose time ran out while the window was closed stop here. */
static void tick(void *unused)
{
	(void)unused;
	for (unsigned i = 0; i < MAX_CONNS; i++)
		if (conns[i] && conns[i]->s.sending)
			stream_send(&conns[i]->s);
	stream_back_tick();
}

void stream_server_run(void)
{
	const struct stream_config *c = &stream_cfg;
	if (!(listener = tcpsrv_listen(c->port, &stream_tcp)))
		kernel_error("stream", "cannot listen on TCP port %u", c->port);
	stream_udp_listen();
	ctl_start();
	expected = c->instances;
	if (!net_inst_index()) /* mq=N: copy 0 says it once, when every copy listens */
		printf("stream server listening tcp+udp port=%u msg=%u check=%d ctl=%s wait=%lu\n",
		       c->port, c->msg, c->check, ctl_label(), c->timeout_s);

	if (net_run(got_client, NULL, c->timeout_s * 1000000000ull, tick) < 0)
		kernel_error("stream", "no iperf client on TCP or UDP port %u within %lu s%s",
		             c->port, c->timeout_s, stream_udp_drops());
	if (!started && !stream_udp_started() && net_inst_queues() == 1)
		kernel_error("stream", "stopped from the control port before any client");
	stream_st.last_data_ns = clock_ns();
	if (c->warmup && net_run(clients_gone, NULL, c->warmup * 1000000000ull, tick) == 0)
		kernel_error("stream",
		             "the client finished within the %lu s warm-up: nothing measured",
		             c->warmup);
	stream_measure_begin();
	net_run(clients_gone, NULL, c->seconds * 1000000000ull, tick);
	/* As in rr_server.c: silence with connections still open is a client
	 * or backend that vanished, not the end of a measurement. */
	unsigned open = conns_open + stream_back_open() + stream_udp_unfinished();
	if (open && !ctl_stop_requested() &&
	    clock_ns() - stream_st.last_data_ns > c->idle_s * 1000000000ull)
		kernel_error(
		    "stream",
		    "no data for %lu s while %u connection(s) or UDP flow(s) without a FIN "
		    "stay open: a client or the backend went away mid-run (%s)",
		    c->idle_s, open, vnetif_silence());
	stream_measure_end(stream_st.last_data_ns);
	tcp_close(listener);
	stream_udp_close();
	net_run(NULL, NULL, 200000000ull, NULL);
}
