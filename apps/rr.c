/*
 * rr.c: request/response benchmark, netperf TCP_RR/UDP_RR style, wire
 * compatible with sockperf 3.7 (format in rr.h). This file owns the keys,
 * the measured interval and the RESULT line; rr_client.c and rr_server.c
 * own the two roles.
 *
 * Keys (defaults in brackets):
 *   rr.proto=tcp|udp [tcp]       rr.role=client|server [client]
 *   rr.req=N [256] rr.resp=N [rr.req]  bytes; UDP 1..1472, TCP 1..32768.
 *                                Both >= 14: sockperf framing; otherwise raw
 *                                fixed sizes. A server echoes each request's
 *                                own length unless rr.resp is given (as does
 *                                sockperf's; the RESULT says what came back).
 *   rr.port=N [11111]            sockperf's default port
 *   rr.instances=N [1]           client: connections/sockets, 1..128 (mq=N:
 *                                split over the copies, at least one each);
 *                                server: TCP connections to wait for
 *   rr.warmup=S [1]              seconds not measured at the start
 *   rr.seconds=S                 client: measured seconds [10];
 *                                server: longest measured interval [600]
 *   client only: rr.peer=IP [10.0.2.2] rr.burst=K [1] outstanding requests per
 *                instance (netperf -b), 1..64; rr.timeout=S [5] longest silence
 *                from the peer; rr.loss_ms=MS [200] UDP request given up after
 *   server only: rr.wait=S [60] for the first request; rr.idle=S [2] end this
 *                long after the last request (TCP: also when all clients closed;
 *                idle with TCP connections still open is an ERROR: a client or
 *                the backend vanished); a "stop" datagram on the control port
 *                ends at once.
 *
 * Latency: client role, request sent to response received (TSC). Server
 * role, the interval between two answered requests of one instance: the
 * client's round trip when it waits for each reply (sockperf ping-pong).
 *
 * A run that measured nothing (no reply, no request) ends with an ERROR
 * line instead of a RESULT line.
 */
#include <stdio.h>
#include <string.h>
#include "apps/apps.h"
#include "apps/lib/result.h"
#include "apps/rr.h"
#include "kernel/kernel.h"
#include "net/inst.h"
#include "net/net.h"

struct rr_config rr_cfg;
struct rr_stats rr_st;
uint8_t rr_filler[RR_TCP_MAX];

static struct result_window win;

void rr_configure(void)
{
	static const char *const protos[] = {"tcp", "udp", NULL};
	static const char *const roles[] = {"client", "server", NULL};
	struct rr_config *c = &rr_cfg;

	c->udp = cmdline_choice("rr.proto", protos, 0) == 1;
	c->server = cmdline_choice("rr.role", roles, 0) == 1;
	net_configure_mq(); /* mq=N: a copy per queue pair (server: rr_server.c) */
	uint64_t max = c->udp ? RR_UDP_MAX : RR_TCP_MAX;
	c->req = (uint32_t)cmdline_u64("rr.req", 256, 1, max);
	c->resp_given = cmdline_str("rr.resp", NULL) != NULL;
	c->resp = (uint32_t)cmdline_u64("rr.resp", c->req, 1, max);
	c->sockperf = c->req >= SP_HDR_LEN && c->resp >= SP_HDR_LEN;
	c->port = (uint16_t)cmdline_u64("rr.port", 11111, 1, 65535);
	c->instances = (unsigned)cmdline_u64("rr.instances", 1, 1, RR_INSTANCES);
	if (!c->server)
		c->instances = net_client_share("rr.instances", c->instances);
	c->warmup = cmdline_u64("rr.warmup", 1, 0, 600);
	c->seconds = cmdline_u64("rr.seconds", c->server ? 600 : 10, 1, 86400);

	cmdline_only_if("rr.peer", !c->server, "rr.role=client");
	cmdline_only_if("rr.burst", !c->server, "rr.role=client");
	cmdline_only_if("rr.timeout", !c->server, "rr.role=client");
	cmdline_only_if("rr.loss_ms", !c->server, "rr.role=client");
	cmdline_only_if("rr.wait", c->server, "rr.role=server");
	cmdline_only_if("rr.idle", c->server, "rr.role=server");
	peer_parse("rr.peer", "10.0.2.2", &c->peer);
	c->burst = (unsigned)cmdline_u64("rr.burst", 1, 1, RR_BURST_MAX);
	c->timeout_s = c->server ? cmdline_u64("rr.wait", 60, 1, 86400)
	                         : cmdline_u64("rr.timeout", 5, 1, 3600);
	c->loss_ms = cmdline_u64("rr.loss_ms", 200, 1, 60000);
	c->idle_s = cmdline_u64("rr.idle", 2, 1, 3600);
}

void rr_sp_encode(uint8_t *b, const struct sp_hdr *h)
{
	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(h->seq >> (56 - 8 * i));
	b[8] = (uint8_t)(h->flags >> 8);
	b[9] = (uint8_t)h->flags;
	for (int i = 0; i < 4; i++)
		b[10 + i] = (uint8_t)(h->len >> (24 - 8 * i));
}

void rr_sp_decode(const uint8_t *b, struct sp_hdr *h)
{
	h->seq = 0;
	for (int i = 0; i < 8; i++)
		h->seq = h->seq << 8 | b[i];
	h->flags = (uint16_t)(b[8] << 8 | b[9]);
	h->len = 0;
	for (int i = 0; i < 4; i++)
		h->len = h->len << 8 | b[10 + i];
}

void rr_count(uint64_t latency_ns, uint64_t bytes)
{
	uint64_t now = clock_ns();
	if (!rr_st.measuring)
		return;
	rr_st.transactions++;
	rr_st.bytes += bytes;
	rr_st.last_txn_ns = now;
	if (latency_ns != UINT64_MAX)
		hist_add(&rr_st.lat, latency_ns);
}

void rr_measure_begin(void)
{
	hist_reset(&rr_st.lat);
	rr_st.transactions = rr_st.messages = rr_st.bytes = 0;
	rr_st.lost = rr_st.late = rr_st.errors = 0;
	result_measure_begin(&win);
	rr_st.last_txn_ns = win.t_start;
	rr_st.measuring = true;
}

void rr_measure_end(uint64_t end_ns)
{
	rr_st.measuring = false;
	result_measure_end(&win, end_ns);
}

static void report(void)
{
	const struct rr_config *c = &rr_cfg;
	uint64_t ns = win.t_end - win.t_start;
	result_begin(c->udp ? "udp_rr" : "tcp_rr", c->server ? "server" : "client");
	result_str("framing", c->sockperf ? "sockperf" : "raw");
	if (net_inst_queues() > 1)
		result_u64("queue", net_inst_index()); /* mq=N: one line per copy */
	if (c->server) {
		/* sizes and instances are the client's choice: report what came */
		result_u64("req", rr_st.last_req);
		result_u64("resp", rr_st.last_resp);
		result_u64("instances", rr_st.peers);
		result_u64("messages", rr_st.messages);
	} else {
		result_u64("req", c->req);
		result_u64("resp", rr_st.last_resp);
		result_u64("instances", c->instances);
		result_u64("burst", c->burst);
		result_u64("lost", rr_st.lost);
		result_u64("late", rr_st.late);
	}
	result_ratio("seconds", ns, 1000000000ull);
	result_u64("warmup", c->warmup);
	result_u64("errors", rr_st.errors);
	result_u64("transactions", rr_st.transactions);
	result_rates(rr_st.bytes, rr_st.transactions, ns);
	result_latency(&rr_st.lat);
	result_counters(&win.a, &win.b, rr_st.transactions);
	result_end();
}

/* mq=N: each copy prints its RESULT if its queue saw requests (a server:
 * tun may give one queue every connection; a client's copy drives its own
 * share) and publishes its figures; copy 0 joins the others and prints the
 * total (`"queues":N`, no latency percentiles). The run fails only if no
 * copy measured a transaction. */
static int rr_copies_end(void)
{
	unsigned k = net_inst_index(), n = net_inst_queues();
	struct net_inst_total t = {.transactions = rr_st.transactions,
	                           .messages = rr_st.messages,
	                           .bytes = rr_st.bytes,
	                           .conns = rr_cfg.server ? rr_st.peers : rr_cfg.instances,
	                           .ns = win.t_end - win.t_start};

	if (rr_cfg.server ? rr_st.messages : rr_st.transactions)
		report();
	else
		printf("rr: queue %u saw no %s in the measured interval\n", k,
		       rr_cfg.server ? "request" : "reply");
	net_print_counters();
	ctl_print_counters();
	net_inst_post_total(k, &t);
	if (k)
		return EXIT_OK;
	net_join_copies();
	net_inst_sum_totals(n, &t);
	if (rr_cfg.server ? !t.messages : !t.transactions)
		kernel_error("rr", "no %s in the measured interval on any of the %u queues",
		             rr_cfg.server ? "request" : "reply", n);
	result_begin(rr_cfg.udp ? "udp_rr" : "tcp_rr", rr_cfg.server ? "server" : "client");
	result_u64("queues", n);
	result_u64("instances", t.conns);
	if (rr_cfg.server)
		result_u64("messages", t.messages);
	result_ratio("seconds", t.ns, 1000000000ull);
	result_u64("transactions", t.transactions);
	result_rates(t.bytes, t.transactions, t.ns);
	result_end();
	return EXIT_OK;
}

int rr_main(void)
{
	for (size_t i = 0; i < sizeof(rr_filler); i++)
		rr_filler[i] = (uint8_t)('0' + i % 10);
	hist_reset(&rr_st.lat);
	net_up();
	if (rr_cfg.server)
		rr_server_run();
	else
		rr_client_run();
	if (net_inst_queues() > 1)
		return rr_copies_end();
	/* a run that measured nothing did not complete: no RESULT for it */
	if (rr_cfg.server ? !rr_st.messages : !rr_st.transactions) {
		net_print_counters();
		ctl_print_counters();
		if (rr_cfg.server)
			kernel_error("rr", "no request in the measured interval");
		kernel_error("rr",
		             "no reply from %s:%u in the measured interval (%lu requests lost)",
		             ipaddr_ntoa(&rr_cfg.peer), rr_cfg.port, rr_st.lost);
	}
	report();
	net_print_counters();
	ctl_print_counters();
	return EXIT_OK;
}
