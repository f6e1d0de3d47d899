/*
 * rr_client.c: the appliance sends requests to a host peer (a stock
 * `sockperf server`, or another appliance's rr server) and times replies.
 *
 * Each instance is its own TCP connection or UDP socket and keeps
 * rr.burst requests outstanding (netperf -b): every reply triggers the next
 * request. A request's send time sits in a slot indexed by its sequence
 * number, so replies may come back in any order (UDP) and a late reply to
 * a request already given up on is recognised and ignored. Requests are
 * timestamped when handed to lwIP, replies when lwIP hands them to us.
 *
 * Phases: resolve the peer, connect every instance (bounded), warm up, the
 * measured interval, stop sending and close. Silence from the peer for
 * rr.timeout seconds ends the run with an ERROR line at any point.
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

#define CONNECT_TIMEOUT_S 10
#define LOSS_SCAN_NS      10000000ull /* UDP: look for lost requests every 10 ms */
#define CLOSE_DRAIN_NS    200000000ull

struct inst {
	struct tcp_pcb *tcp;
	struct udp_pcb *udp;
	bool connected;
	uint64_t next_seq;               /* of the next request; sockperf starts at 1 */
	unsigned outstanding;            /* sent, not answered, not given up */
	unsigned owed;                   /* due to be sent when the socket has room */
	uint64_t slot_seq[RR_BURST_MAX]; /* 0: free */
	uint64_t slot_ns[RR_BURST_MAX];
	/* TCP reply being parsed */
	uint8_t hdr[SP_HDR_LEN];
	uint32_t hdr_have;
	uint32_t left; /* bytes of the current reply still to come; 0 between replies */
	struct sp_hdr cur;
};

static struct inst *insts;
static bool stopping;
static unsigned connected;
static uint64_t last_reply_ns, next_loss_scan_ns;

static const char *peer_str(void)
{
	static char s[24];
	if (!s[0])
		ipaddr_ntoa_r(&rr_cfg.peer, s, sizeof(s));
	return s;
}

/* Oldest outstanding request: raw framing has no sequence numbers, and
 * replies on one instance come back in request order. */
static uint64_t oldest_seq(const struct inst *in)
{
	uint64_t best = 0;
	for (unsigned s = 0; s < RR_BURST_MAX; s++)
		if (in->slot_seq[s] && (!best || in->slot_seq[s] < best))
			best = in->slot_seq[s];
	return best;
}

static void complete(struct inst *in, uint64_t seq, uint32_t resp_len)
{
	uint64_t now = clock_ns();
	unsigned s = seq % RR_BURST_MAX;
	if (!seq || in->slot_seq[s] != seq) {
		rr_st.late++;
		return;
	}
	in->slot_seq[s] = 0;
	in->outstanding--;
	last_reply_ns = now;
	rr_st.last_resp = resp_len; /* a sockperf server echoes the request's size */
	rr_count(now - in->slot_ns[s], (uint64_t)rr_cfg.req + resp_len);
	if (!stopping)
		in->owed++;
}

/* Take a slot for the next request; a request still holding it is older
 * than RR_BURST_MAX sequence numbers and counts as lost. */
static uint64_t take_slot(struct inst *in)
{
	uint64_t seq = in->next_seq++;
	unsigned s = seq % RR_BURST_MAX;
	if (in->slot_seq[s]) {
		rr_st.lost++;
		in->outstanding--;
	}
	in->slot_seq[s] = seq;
	in->slot_ns[s] = clock_ns();
	in->outstanding++;
	in->owed--;
	return seq;
}

static void fill_request(uint8_t *b, uint64_t seq)
{
	uint32_t len = rr_cfg.req;
	if (rr_cfg.sockperf) {
		struct sp_hdr h = {seq, SP_F_CLIENT | SP_F_PONG, len};
		rr_sp_encode(b, &h);
		memcpy(b + SP_HDR_LEN, rr_filler, len - SP_HDR_LEN);
	} else {
		memcpy(b, rr_filler, len);
	}
}

static void pump_udp(struct inst *in)
{
	while (in->owed && !stopping) {
		struct pbuf *p = pbuf_alloc(PBUF_TRANSPORT, (u16_t)rr_cfg.req, PBUF_RAM);
		if (!p)
			return; /* retried from the tick */
		uint64_t seq = take_slot(in);
		fill_request(p->payload, seq);
		/* a failed send is a lost request: the loss scan retries it */
		udp_send(in->udp, p);
		pbuf_free(p);
	}
}

static void pump_tcp(struct inst *in)
{
	struct tcp_pcb *pcb = in->tcp;
	uint32_t len = rr_cfg.req;
	bool wrote = false;
	while (in->owed && !stopping && in->connected) {
		/* the whole request or nothing: a half-written one breaks framing */
		if (tcp_sndbuf(pcb) < len ||
		    tcp_sndqueuelen(pcb) + len / TCP_MSS + 4 > TCP_SND_QUEUELEN)
			break;
		uint64_t seq = take_slot(in);
		err_t e;
		if (rr_cfg.sockperf) {
			uint8_t hdr[SP_HDR_LEN];
			struct sp_hdr h = {seq, SP_F_CLIENT | SP_F_PONG, len};
			rr_sp_encode(hdr, &h);
			e = tcp_write(pcb, hdr, SP_HDR_LEN,
			              TCP_WRITE_FLAG_COPY | TCP_WRITE_FLAG_MORE);
			if (e == ERR_OK && len > SP_HDR_LEN)
				e = tcp_write(pcb, rr_filler, (u16_t)(len - SP_HDR_LEN), 0);
		} else {
			e = tcp_write(pcb, rr_filler, (u16_t)len, 0);
		}
		if (e != ERR_OK)
			kernel_error("rr", "tcp_write of a %u-byte request failed (err %d)", len,
			             e);
		wrote = true;
	}
	if (wrote)
		tcp_output(pcb);
}

static void pump(struct inst *in)
{
	if (rr_cfg.udp)
		pump_udp(in);
	else
		pump_tcp(in);
}

/* End of one TCP reply: sockperf replies carry their sequence number. */
static void reply_done(struct inst *in)
{
	if (!rr_cfg.sockperf)
		complete(in, oldest_seq(in), rr_cfg.resp);
	else if (!(in->cur.flags & (SP_F_CLIENT | SP_F_WARMUP)))
		complete(in, in->cur.seq, in->cur.len);
	in->hdr_have = 0;
}

static void parse_tcp(struct inst *in, const uint8_t *d, uint32_t n)
{
	while (n) {
		if (rr_cfg.sockperf && !in->left) {
			if (!tcpconn_gather(in->hdr, &in->hdr_have, SP_HDR_LEN, &d, &n))
				return;
			rr_sp_decode(in->hdr, &in->cur);
			if (in->cur.len < SP_HDR_LEN || in->cur.len > RR_TCP_MAX)
				kernel_error("rr", "malformed reply from %s: message length %u",
				             peer_str(), in->cur.len);
			in->left = in->cur.len - SP_HDR_LEN;
			if (!in->left)
				reply_done(in);
			continue;
		}
		if (!in->left)
			in->left = rr_cfg.resp; /* raw: a new fixed-size reply starts */
		uint32_t take = n < in->left ? n : in->left;
		in->left -= take;
		d += take;
		n -= take;
		if (!in->left)
			reply_done(in);
	}
}

static err_t on_recv(void *arg, struct tcp_pcb *pcb, struct pbuf *p, err_t err)
{
	struct inst *in = arg;
	if (!p || err != ERR_OK) {
		if (p)
			pbuf_free(p);
		if (!stopping)
			kernel_error("rr", "%s:%u closed the connection during the run", peer_str(),
			             rr_cfg.port);
		return ERR_OK;
	}
	for (struct pbuf *q = p; q; q = q->next)
		parse_tcp(in, q->payload, q->len);
	tcp_recved(pcb, p->tot_len);
	pbuf_free(p);
	pump(in);
	return ERR_OK;
}

static err_t on_sent(void *arg, struct tcp_pcb *pcb, u16_t len)
{
	(void)pcb;
	(void)len;
	pump(arg);
	return ERR_OK;
}

static const char *err_name(err_t e)
{
	switch (e) {
	case ERR_RST:
		return "reset by peer";
	case ERR_ABRT:
		return "aborted (no answer to retransmissions)";
	case ERR_CLSD:
		return "closed";
	default:
		return "lwIP error";
	}
}

static void on_err(void *arg, err_t err)
{
	struct inst *in = arg;
	in->tcp = NULL; /* lwIP has freed the pcb */
	if (stopping)
		return;
	if (!in->connected)
		kernel_error("rr", "cannot connect to %s:%u: %s (is a TCP peer listening?)",
		             peer_str(), rr_cfg.port, err == ERR_RST ? "refused" : err_name(err));
	kernel_error("rr", "connection to %s:%u lost: %s", peer_str(), rr_cfg.port, err_name(err));
}

static err_t on_connected(void *arg, struct tcp_pcb *pcb, err_t err)
{
	struct inst *in = arg;
	if (err != ERR_OK)
		return err;
	offload_tcp_established(pcb);
	in->connected = true;
	connected++;
	return ERR_OK;
}

static void on_udp(void *arg, struct udp_pcb *pcb, struct pbuf *p, const ip_addr_t *addr,
                   u16_t port)
{
	struct inst *in = arg;
	(void)pcb;
	(void)addr;
	(void)port;
	if (!rr_cfg.sockperf) {
		complete(in, oldest_seq(in), p->tot_len);
	} else if (p->tot_len < SP_HDR_LEN) {
		rr_st.errors++;
	} else {
		uint8_t b[SP_HDR_LEN];
		struct sp_hdr h;
		pbuf_copy_partial(p, b, SP_HDR_LEN, 0);
		rr_sp_decode(b, &h);
		if (!(h.flags & (SP_F_CLIENT | SP_F_WARMUP)))
			complete(in, h.seq, p->tot_len);
	}
	pbuf_free(p);
	pump(in);
}

static void open_instance(struct inst *in)
{
	in->next_seq = 1;
	if (rr_cfg.udp) {
		in->udp = udp_new();
		if (!in->udp || !net_bind_local_port(in->udp, NULL, &rr_cfg.peer, rr_cfg.port) ||
		    udp_connect(in->udp, &rr_cfg.peer, rr_cfg.port) != ERR_OK)
			kernel_error("rr", "cannot open UDP socket %u (lwIP MEMP_NUM_UDP_PCB)",
			             (unsigned)(in - insts));
		udp_recv(in->udp, on_udp, in);
		in->connected = true;
		connected++;
		return;
	}
	in->tcp = tcp_new();
	if (!in->tcp)
		kernel_error("rr", "cannot open TCP connection %u (lwIP MEMP_NUM_TCP_PCB)",
		             (unsigned)(in - insts));
	if (!net_bind_local_port(NULL, in->tcp, &rr_cfg.peer, rr_cfg.port))
		kernel_error("rr", "copy %u: no free local port whose replies reach its queue",
		             net_inst_index());
	tcp_nagle_disable(in->tcp); /* a request goes out the moment it is written */
	tcpconn_attach(in->tcp, in, on_recv, on_sent, on_err);
	err_t e = tcp_connect(in->tcp, &rr_cfg.peer, rr_cfg.port, on_connected);
	if (e != ERR_OK)
		kernel_error("rr", "tcp_connect to %s:%u failed: lwIP err %d", peer_str(),
		             rr_cfg.port, (int)e);
}

static bool all_connected(void *unused)
{
	(void)unused;
	return connected == rr_cfg.instances;
}

/* UDP: a request unanswered for rr.loss_ms is lost; send a new one. */
static void scan_losses(uint64_t now)
{
	uint64_t limit = rr_cfg.loss_ms * 1000000ull;
	for (unsigned i = 0; i < rr_cfg.instances; i++) {
		struct inst *in = &insts[i];
		for (unsigned s = 0; s < RR_BURST_MAX; s++) {
			if (in->slot_seq[s] && now - in->slot_ns[s] > limit) {
				in->slot_seq[s] = 0;
				in->outstanding--;
				rr_st.lost++;
				if (!stopping)
					in->owed++;
			}
		}
		pump(in);
	}
}

static void tick(void *unused)
{
	(void)unused;
	uint64_t now = clock_ns();
	if (now - last_reply_ns > rr_cfg.timeout_s * 1000000000ull)
		kernel_error("rr", "no reply from %s:%u for %lu s (%lu transactions measured; %s)",
		             peer_str(), rr_cfg.port, rr_cfg.timeout_s, rr_st.transactions,
		             vnetif_silence());
	if (rr_cfg.udp && now >= next_loss_scan_ns) {
		scan_losses(now);
		next_loss_scan_ns = now + LOSS_SCAN_NS;
	}
}

static void close_all(void)
{
	stopping = true;
	for (unsigned i = 0; i < rr_cfg.instances; i++) {
		struct inst *in = &insts[i];
		if (in->udp)
			udp_remove(in->udp);
		if (!in->tcp)
			continue;
		tcpconn_detach(in->tcp);
		if (tcp_close(in->tcp) != ERR_OK)
			tcp_abort(in->tcp);
	}
	net_run(NULL, NULL, CLOSE_DRAIN_NS, NULL); /* let the FINs out */
}

void rr_client_run(void)
{
	const struct rr_config *c = &rr_cfg;
	insts = calloc(c->instances, sizeof(*insts));
	if (!insts)
		kernel_error("rr", "out of memory for %u instances", c->instances);
	peer_resolve(&c->peer, 5);
	for (unsigned i = 0; i < c->instances; i++)
		open_instance(&insts[i]);
	if (net_run(all_connected, NULL, CONNECT_TIMEOUT_S * 1000000000ull, NULL) < 0)
		kernel_error("rr", "only %u of %u connections to %s:%u up after %d s", connected,
		             c->instances, peer_str(), c->port, CONNECT_TIMEOUT_S);
	printf("rr client %s %s:%u framing=%s req=%u resp=%u instances=%u burst=%u "
	       "warmup=%lu seconds=%lu",
	       c->udp ? "udp" : "tcp", peer_str(), c->port, c->sockperf ? "sockperf" : "raw",
	       c->req, c->resp, c->instances, c->burst, c->warmup, c->seconds);
	if (net_inst_queues() > 1)
		printf(" queue=%u", net_inst_index());
	printf("\n");

	last_reply_ns = clock_ns();
	for (unsigned i = 0; i < c->instances; i++) {
		insts[i].owed = c->burst;
		pump(&insts[i]);
	}
	if (c->warmup)
		net_run(NULL, NULL, c->warmup * 1000000000ull, tick);
	rr_measure_begin();
	net_run(NULL, NULL, c->seconds * 1000000000ull, tick);
	rr_measure_end(clock_ns());
	close_all();
}
