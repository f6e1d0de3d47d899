/*
 * rr_server.c: a host client (stock `sockperf ping-pong` / `under-load`,
 * or another appliance's rr client) drives the appliance.
 *
 * Like sockperf's server, each complete message that asks for a reply
 * (CLIENT and PONG set, WARMUP clear) is sent back with CLIENT cleared;
 * everything else is consumed silently. UDP replies reuse the received
 * buffer (zero copy). TCP requests are answered whole: received bytes are
 * acknowledged to the sender (tcp_recved) only once their message has been
 * answered, so a client that outruns us is slowed by TCP, never dropped.
 *
 * Phases: wait for the first request (rr.wait), warm-up (rr.warmup), then
 * measure until the clients are gone (every TCP connection closed once
 * rr.instances were seen, or no request for rr.idle seconds), a "stop" on
 * the control port, or rr.seconds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "apps/apps.h"
#include "apps/rr.h"
#include "kernel/kernel.h"
#include "lwip/tcp.h"
#include "lwip/udp.h"
#include "net/inst.h"
#include "net/net.h"

#define ENDPOINTS      256 /* UDP clients tracked for per-instance cycle times */
#define CLOSE_DRAIN_NS 200000000ull

struct conn {
	struct tcpsrv_conn base; /* base.in: received, not yet answered: whole messages only */
	uint64_t last_ns;        /* arrival of the previous answered request */
};

struct endpoint {
	ip_addr_t addr;
	u16_t port;
	bool used;
	uint64_t last_ns;
};

static struct tcp_pcb *listener;
static struct udp_pcb *udp;
static struct endpoint eps[ENDPOINTS];
static unsigned conns_open, conns_seen;
static uint64_t first_req_ns, last_req_ns;

/* One complete request; last_ns belongs to its instance. */
static void on_message(uint64_t *last_ns, uint32_t req, uint32_t resp, bool answered)
{
	uint64_t now = clock_ns();
	if (!first_req_ns)
		first_req_ns = now;
	last_req_ns = now;
	rr_st.messages += rr_st.measuring;
	rr_st.last_req = req;
	if (!answered)
		return;
	rr_st.last_resp = resp;
	uint64_t cycle = *last_ns ? now - *last_ns : UINT64_MAX;
	*last_ns = now;
	rr_count(cycle, (uint64_t)req + resp);
}

/* ---- TCP ---- */

static void conn_release(struct tcpsrv_conn *c)
{
	(void)c;
	conns_open--;
}

/* ERR_ABRT when the pcb had to be aborted: lwIP callbacks must return it. */
static err_t conn_close(struct conn *c, bool abort)
{
	return tcpsrv_close(&c->base, abort);
}

/* Room for a whole reply: a half-written one would break the framing. */
static bool room(struct tcp_pcb *pcb, uint32_t len)
{
	return tcp_sndbuf(pcb) >= len &&
	       tcp_sndqueuelen(pcb) + 2 * (len / TCP_MSS) + 8 <= TCP_SND_QUEUELEN;
}

/* Reply to the request at the head of c->base.in (len bytes, header h). */
static err_t write_reply(struct conn *c, const struct sp_hdr *h, uint32_t len, uint32_t resp)
{
	struct tcp_pcb *pcb = c->base.pcb;
	if (!rr_cfg.sockperf)
		return tcp_write(pcb, rr_filler, (u16_t)resp, 0);
	uint8_t b[SP_HDR_LEN];
	struct sp_hdr r = {h->seq, (uint16_t)(h->flags & ~SP_F_CLIENT), resp};
	rr_sp_encode(b, &r);
	err_t e = tcp_write(pcb, b, SP_HDR_LEN, TCP_WRITE_FLAG_COPY | TCP_WRITE_FLAG_MORE);
	if (e != ERR_OK || resp == SP_HDR_LEN)
		return e;
	if (rr_cfg.resp_given)
		return tcp_write(pcb, rr_filler, (u16_t)(resp - SP_HDR_LEN), 0);
	/* echo the body, bytes [SP_HDR_LEN, len) of the chain, as sockperf's server does */
	uint32_t pos = 0;
	for (struct pbuf *q = c->base.in; q && pos < len; pos += q->len, q = q->next) {
		uint32_t from = pos > SP_HDR_LEN ? pos : SP_HDR_LEN;
		uint32_t to = pos + q->len < len ? pos + q->len : len;
		if (from >= to)
			continue;
		e = tcp_write(pcb, (uint8_t *)q->payload + (from - pos), (u16_t)(to - from),
		              TCP_WRITE_FLAG_COPY | TCP_WRITE_FLAG_MORE);
		if (e != ERR_OK)
			return e;
	}
	return ERR_OK;
}

/* Answer every complete request we have room for; ERR_ABRT: c is gone. */
static err_t serve(struct tcpsrv_conn *tc)
{
	struct conn *c = (struct conn *)tc;
	uint32_t consumed = 0;
	while (tc->in) {
		struct sp_hdr h = {0, 0, 0};
		uint32_t len = rr_cfg.req, resp = rr_cfg.resp;
		bool answer = true;
		if (rr_cfg.sockperf) {
			uint8_t b[SP_HDR_LEN];
			if (tc->in->tot_len < SP_HDR_LEN)
				break;
			pbuf_copy_partial(tc->in, b, SP_HDR_LEN, 0);
			rr_sp_decode(b, &h);
			if (h.len < SP_HDR_LEN || h.len > RR_TCP_MAX) {
				printf(
				    "rr: closing a connection: message length %u outside %u..%u\n",
				    h.len, SP_HDR_LEN, RR_TCP_MAX);
				rr_st.errors++;
				return conn_close(c, true);
			}
			len = h.len;
			answer = (h.flags & (SP_F_CLIENT | SP_F_PONG | SP_F_WARMUP)) ==
			         (SP_F_CLIENT | SP_F_PONG);
			if (!rr_cfg.resp_given)
				resp = len;
		}
		if (tc->in->tot_len < len)
			break;
		if (answer) {
			if (!room(tc->pcb, resp))
				break; /* resumed from the sent callback */
			if (write_reply(c, &h, len, resp) != ERR_OK) {
				printf("rr: closing a connection: tcp_write failed mid-reply\n");
				rr_st.errors++;
				return conn_close(c, true);
			}
		}
		on_message(&c->last_ns, len, resp, answer);
		tc->in = pbuf_free_header(tc->in, (u16_t)len);
		consumed += len;
	}
	if (consumed)
		tcp_recved(tc->pcb, (u16_t)consumed);
	tcp_output(tc->pcb);
	return ERR_OK;
}

static bool conn_accept(struct tcpsrv_conn *c)
{
	(void)c;
	conns_open++;
	rr_st.peers = ++conns_seen;
	return true;
}

static const struct tcpsrv_ops rr_tcp = {
    .conn_size = sizeof(struct conn),
    .accept = conn_accept,
    .serve = serve,
    .release = conn_release,
};

/* ---- UDP ---- */

static struct endpoint *endpoint(const ip_addr_t *addr, u16_t port)
{
	unsigned h = (ip4_addr_get_u32(ip_2_ip4(addr)) * 2654435761u ^ port) % ENDPOINTS;
	for (unsigned i = 0; i < ENDPOINTS; i++) {
		struct endpoint *e = &eps[(h + i) % ENDPOINTS];
		if (!e->used) {
			*e = (struct endpoint){*addr, port, true, 0};
			rr_st.peers++;
			return e;
		}
		if (e->port == port && ip_addr_cmp(&e->addr, addr))
			return e;
	}
	return NULL;
}

static struct pbuf *make_reply(const struct sp_hdr *h, uint32_t resp)
{
	struct pbuf *r = pbuf_alloc(PBUF_TRANSPORT, (u16_t)resp, PBUF_RAM);
	if (!r)
		return NULL;
	memcpy(r->payload, rr_filler, resp);
	if (h) {
		struct sp_hdr rh = {h->seq, (uint16_t)(h->flags & ~SP_F_CLIENT), resp};
		rr_sp_encode(r->payload, &rh);
	}
	return r;
}

static void on_udp(void *arg, struct udp_pcb *pcb, struct pbuf *p, const ip_addr_t *addr,
                   u16_t port)
{
	(void)arg;
	uint32_t len = p->tot_len, resp = rr_cfg.resp;
	struct sp_hdr h;
	bool answer = true;
	struct pbuf *reply = NULL;
	if (rr_cfg.sockperf) {
		uint8_t b[SP_HDR_LEN];
		if (len < SP_HDR_LEN) {
			rr_st.errors++;
			pbuf_free(p);
			return;
		}
		pbuf_copy_partial(p, b, SP_HDR_LEN, 0);
		rr_sp_decode(b, &h);
		answer = (h.flags & (SP_F_CLIENT | SP_F_PONG | SP_F_WARMUP)) ==
		         (SP_F_CLIENT | SP_F_PONG);
		if (!rr_cfg.resp_given)
			resp = len;
		if (answer && resp == len) {
			/* echo in place: clear CLIENT in the received buffer */
			pbuf_put_at(p, 9, (u8_t)(h.flags & ~SP_F_CLIENT));
			reply = p;
		} else if (answer) {
			reply = make_reply(&h, resp);
		}
	} else {
		reply = resp == len ? p : make_reply(NULL, resp);
	}
	if (answer && reply) {
		udp_sendto(pcb, reply, addr, port);
		if (reply != p)
			pbuf_free(reply);
	}
	struct endpoint *e = endpoint(addr, port);
	uint64_t none = 0;
	on_message(e ? &e->last_ns : &none, len, resp, answer && reply);
	pbuf_free(p);
}

/* ---- phases ---- */

/* mq=N: the phases follow the clients of every copy (net/inst.h slots):
 * a copy starts when any copy saw the first request, and the clients are
 * gone when rr.instances connections were seen and none is open on any
 * queue, or no queue saw a request for rr.idle seconds. */
static void publish(void)
{
	unsigned k = net_inst_index();
	net_inst_slot_set(k, NET_SLOT_FIRST_NS, first_req_ns);
	net_inst_slot_set(k, NET_SLOT_LAST_NS, last_req_ns);
	net_inst_slot_set(k, NET_SLOT_CONNS_OPEN, conns_open);
	net_inst_slot_set(k, NET_SLOT_CONNS_SEEN, conns_seen);
}

static bool got_request(void *unused)
{
	(void)unused;
	unsigned n = net_inst_queues();
	if (n > 1) {
		publish(); /* once per pass, as stream_server.c does */
		if (net_inst_slot_max(NET_SLOT_FIRST_NS, n))
			return true;
	}
	return first_req_ns || ctl_stop_requested();
}

static bool clients_gone(void *unused)
{
	(void)unused;
	unsigned n = net_inst_queues();
	if (n > 1) {
		publish();
		return ctl_stop_or_idle(net_inst_slot_max(NET_SLOT_LAST_NS, n), rr_cfg.idle_s) ||
		       (!rr_cfg.udp &&
		        net_inst_slot_sum(NET_SLOT_CONNS_SEEN, n) >= rr_cfg.instances &&
		        !net_inst_slot_sum(NET_SLOT_CONNS_OPEN, n));
	}
	return ctl_stop_or_idle(last_req_ns, rr_cfg.idle_s) ||
	       (!rr_cfg.udp && conns_seen >= rr_cfg.instances && !conns_open);
}

static void open_sockets(void)
{
	const struct rr_config *c = &rr_cfg;
	if (c->udp) {
		udp = udp_new();
		if (!udp || udp_bind(udp, IP_ANY_TYPE, c->port) != ERR_OK)
			kernel_error("rr", "cannot bind UDP port %u", c->port);
		udp_recv(udp, on_udp, NULL);
	} else {
		if (!(listener = tcpsrv_listen(c->port, &rr_tcp)))
			kernel_error("rr", "cannot listen on TCP port %u", c->port);
	}
	ctl_start();
	if (!net_inst_index()) /* mq=N: copy 0 says it once, when every copy listens */
		printf("rr server listening %s port=%u framing=%s resp=%s ctl=%s wait=%lu\n",
		       c->udp ? "udp" : "tcp", c->port, c->sockperf ? "sockperf" : "raw",
		       c->resp_given ? "fixed" : "echo", ctl_label(), c->timeout_s);
}

void rr_server_run(void)
{
	const struct rr_config *c = &rr_cfg;
	open_sockets();
	if (net_run(got_request, NULL, c->timeout_s * 1000000000ull, NULL) < 0)
		kernel_error("rr", "no request on %s port %u within %lu s", c->udp ? "UDP" : "TCP",
		             c->port, c->timeout_s);
	if (!first_req_ns && net_inst_queues() == 1)
		kernel_error("rr", "stopped from the control port before any request");
	if (c->warmup && net_run(clients_gone, NULL, c->warmup * 1000000000ull, NULL) == 0)
		kernel_error("rr", "the client stopped within the %lu s warm-up: nothing measured",
		             c->warmup);
	rr_measure_begin();
	net_run(clients_gone, NULL, c->seconds * 1000000000ull, NULL);
	/* Clients close their connections when they finish; silence with
	 * connections still open means a client or the backend vanished
	 * mid-run, and the interval measured so far is not a result. */
	if (!c->udp && conns_open && !ctl_stop_requested() &&
	    clock_ns() - last_req_ns > c->idle_s * 1000000000ull)
		kernel_error("rr",
		             "no request for %lu s while %u connection(s) stay open: a client or "
		             "the backend went away mid-run (%s)",
		             c->idle_s, conns_open, vnetif_silence());
	rr_measure_end(last_req_ns);
	if (listener)
		tcp_close(listener);
	if (udp)
		udp_remove(udp);
	net_run(NULL, NULL, CLOSE_DRAIN_NS, NULL);
}
