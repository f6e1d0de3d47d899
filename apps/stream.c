/*
 * stream.c: bulk TCP throughput, netperf TCP_STREAM (the appliance sends)
 * and TCP_MAERTS (the appliance receives), wire compatible with iperf 2
 * (format in stream.h); a server also takes iperf 2's UDP test
 * (stream_udp.c, UDP_STREAM) and its dual/tradeoff tests (stream_back.c).
 * This file owns the keys, the data path of one
 * connection in either direction, the measured interval and the RESULT
 * line; stream_client.c and stream_server.c own the roles.
 *
 * Keys (defaults in brackets):
 *   stream.role=client|server [client]
 *   stream.test=stream|maerts [stream]  client: the appliance sends, or
 *                       receives (asks the server to send, like iperf -R);
 *                       a server does what each iperf client asks
 *   stream.msg=N [16384] bytes per write, 1..65535 (iperf -l)
 *   stream.instances=N [1] client: connections (iperf -P), 1..32; server:
 *                       TCP connections to wait for (also taken from the
 *                       header; UDP flows: from theirs)
 *   stream.warmup=S [1]  seconds not measured at the start
 *   stream.seconds=S     client: measured seconds [10]; server: cap [600]
 *   stream.port=N [5001] iperf's default port
 *   stream.check=0|1 [0] verify every received TCP byte against iperf's pattern,
 *                       in records of the sender's write length: a client's
 *                       -l from its header; stream.msg when a server sends
 *                       to us (our header asks iperf -s 2.1.8 for it)
 *   client only: stream.peer=IP [10.0.2.2], stream.timeout=S [5] longest
 *                       time without progress
 *   server only: stream.wait=S [60] for the first client, stream.idle=S [2]
 *                       end this long after the last data (an ERROR while
 *                       connections stay open: a client or the backend
 *                       vanished); a "stop" datagram on the control port
 *                       ends at once
 *
 * Throughput counts payload acknowledged by the peer (sending) or received
 * (receiving) inside the measured interval; the iperf header is excluded.
 */
#include <stdio.h>
#include <string.h>
#include "apps/apps.h"
#include "apps/lib/result.h"
#include "apps/stream.h"
#include "kernel/kernel.h"
#include "kernel/prof.h"
#include "lwip/tcp.h"
#include "net/inst.h"
#include "net/net.h"

struct stream_config stream_cfg;
struct stream_stats stream_st;

static uint8_t pattern[STREAM_MSG_MAX]; /* iperf's compat/string.c pattern() */
static struct result_window win;

void stream_configure(void)
{
	static const char *const roles[] = {"client", "server", NULL};
	static const char *const tests[] = {"stream", "maerts", NULL};
	struct stream_config *c = &stream_cfg;

	c->server = cmdline_choice("stream.role", roles, 0) == 1;
	net_configure_mq(); /* mq=N: a copy per queue pair */
	cmdline_only_if("stream.test", !c->server, "stream.role=client");
	c->maerts = cmdline_choice("stream.test", tests, 0) == 1;
	c->msg = (uint32_t)cmdline_u64("stream.msg", 16384, 1, STREAM_MSG_MAX);
	c->instances = (unsigned)cmdline_u64("stream.instances", 1, 1, STREAM_INSTANCES);
	if (!c->server)
		c->instances = net_client_share("stream.instances", c->instances);
	c->warmup = cmdline_u64("stream.warmup", 1, 0, 600);
	c->seconds = cmdline_u64("stream.seconds", c->server ? 600 : 10, 1, 86400);
	c->port = (uint16_t)cmdline_u64("stream.port", 5001, 1, 65535);
	c->check = cmdline_bool("stream.check", false);
	cmdline_only_if("stream.peer", !c->server, "stream.role=client");
	cmdline_only_if("stream.timeout", !c->server, "stream.role=client");
	cmdline_only_if("stream.wait", c->server, "stream.role=server");
	cmdline_only_if("stream.idle", c->server, "stream.role=server");
	peer_parse("stream.peer", "10.0.2.2", &c->peer);
	c->timeout_s = c->server ? cmdline_u64("stream.wait", 60, 1, 86400)
	                         : cmdline_u64("stream.timeout", 5, 1, 3600);
	c->idle_s = cmdline_u64("stream.idle", 2, 1, 3600);
}

uint32_t stream_be32(const uint8_t *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

void stream_put_be32(uint8_t *b, uint32_t v)
{
	b[0] = (uint8_t)(v >> 24);
	b[1] = (uint8_t)(v >> 16);
	b[2] = (uint8_t)(v >> 8);
	b[3] = (uint8_t)v;
}

/* Records of stream.msg bytes, each starting the pattern afresh (iperf
 * writes one patterned buffer over and over); no-copy writes from the
 * static pattern, so sending costs no memcpy. */
void stream_send(struct sconn *s)
{
	struct tcp_pcb *pcb = s->pcb;
	bool wrote = false;

	prof_enter(PROF_APP);
	while (s->sending) {
		if (s->send_until_ns && clock_ns() >= s->send_until_ns)
			s->send_left = 0;
		if (!s->send_left) {
			s->sending = false;
			tcp_shutdown(pcb, 0, 1); /* FIN after the queued data: "done" to iperf */
			break;
		}
		uint32_t n = stream_cfg.msg - s->rec_off;
		if (n > tcp_sndbuf(pcb))
			n = tcp_sndbuf(pcb);
		if (n > s->send_left)
			n = (uint32_t)s->send_left;
		if (!n)
			break;
		prof_enter(PROF_TCP_OUT);
		err_t e = tcp_write(pcb, pattern + s->rec_off, (u16_t)n, TCP_WRITE_FLAG_MORE);
		prof_exit();
		if (e != ERR_OK)
			break; /* full: the sent callback or the tick resumes */
		wrote = true;
		s->send_left -= s->send_left == UINT64_MAX ? 0 : n;
		s->rec_off = (s->rec_off + n) % stream_cfg.msg;
	}
	if (wrote) {
		prof_enter(PROF_TCP_OUT);
		tcp_output(pcb);
		prof_exit();
	}
	prof_exit();
}

/* n bytes of data in one direction now: counted inside the measured
 * interval, with the first and last time data came. */
static void count_data(uint64_t *bytes, uint64_t *first_ns, uint64_t *last_ns, uint32_t n)
{
	stream_st.last_data_ns = clock_ns();
	if (!stream_st.measuring)
		return;
	*bytes += n;
	if (!*first_ns)
		*first_ns = stream_st.last_data_ns;
	*last_ns = stream_st.last_data_ns;
}

void stream_acked(struct sconn *s, uint32_t len)
{
	uint32_t hdr = len < s->hdr_unacked ? len : s->hdr_unacked;
	s->hdr_unacked -= hdr;
	len -= hdr;
	if (!len)
		return;
	prof_enter(PROF_APP);
	count_data(&stream_st.tx_bytes, &stream_st.tx_first_ns, &stream_st.tx_last_ns, len);
	prof_exit();
}

static void check(struct sconn *s, const uint8_t *d, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		uint64_t off = s->rx_data + i;
		uint32_t r = (uint32_t)(off % s->rec_len);
		uint8_t want;
		if (r >= STREAM_HDR_AREA)
			want = (uint8_t)('0' + r % 10);
		else if (off < STREAM_HDR_AREA)
			want = s->ref[r] = d[i]; /* learn the first record's header area */
		else
			want = s->ref[r];
		if (d[i] != want && !stream_st.check_errors++)
			stream_st.first_bad = off;
	}
}

void stream_received(struct sconn *s, const uint8_t *d, uint32_t n)
{
	prof_enter(PROF_APP);
	if (stream_cfg.check)
		check(s, d, n);
	s->rx_data += n;
	count_data(&stream_st.rx_bytes, &stream_st.rx_first_ns, &stream_st.rx_last_ns, n);
	prof_exit();
}

void stream_measure_begin(void)
{
	stream_st.tx_bytes = stream_st.rx_bytes = stream_st.rx_datagrams = 0;
	stream_st.tx_first_ns = stream_st.rx_first_ns = 0;
	result_measure_begin(&win);
	stream_st.measuring = true;
}

void stream_measure_end(uint64_t end_ns)
{
	stream_st.measuring = false;
	result_measure_end(&win, end_ns);
}

/* One direction of a dual or tradeoff test: its data bytes and rate over
 * its own first to last data inside the measured interval (received_* and
 * sent_*: result_counters() has rx_bytes and tx_bytes, the frames'). */
static void direction(const char *dir, uint64_t bytes, uint64_t first, uint64_t last)
{
	char key[24];
	uint64_t ns = first && last > first ? last - first : 0;
	snprintf(key, sizeof(key), "%s_bytes", dir);
	result_u64(key, bytes);
	snprintf(key, sizeof(key), "%s_seconds", dir);
	result_ratio(key, ns, 1000000000ull);
	snprintf(key, sizeof(key), "%s_mbps", dir);
	result_ratio(key, bytes * 8000, ns); /* bits per ns x 1000 */
}

/* iperf -d/-r against the server: both directions on one line. */
static void report_dual(void)
{
	const struct stream_stats *st = &stream_st;
	uint64_t ns = win.t_end - win.t_start, bytes = st->rx_bytes + st->tx_bytes;
	uint64_t msgs =
	    st->rx_bytes / (st->peer_msg ? st->peer_msg : 1) + st->tx_bytes / stream_cfg.msg;
	result_begin(st->dual == 'd' ? "tcp_dual" : "tcp_tradeoff", "server");
	result_u64("msg", st->peer_msg);
	result_u64("instances", st->peers);
	result_ratio("seconds", ns, 1000000000ull);
	result_u64("warmup", stream_cfg.warmup);
	result_u64("bytes", bytes);
	result_u64("transactions", msgs);
	result_rates(bytes, msgs, ns);
	direction("received", st->rx_bytes, st->rx_first_ns, st->rx_last_ns);
	direction("sent", st->tx_bytes, st->tx_first_ns, st->tx_last_ns);
	result_u64("check", stream_cfg.check);
	result_u64("check_errors", st->check_errors);
	result_counters(&win.a, &win.b, msgs);
	result_end();
}

/* iperf -u against the server: the measured interval, then the flows'. */
static void report_udp(void)
{
	const struct stream_stats *st = &stream_st;
	uint64_t ns = win.t_end - win.t_start;
	result_begin("udp_stream", "server");
	result_u64("msg", st->peer_msg);
	result_u64("instances", stream_udp_started());
	result_ratio("seconds", ns, 1000000000ull);
	result_u64("warmup", stream_cfg.warmup);
	result_u64("bytes", st->rx_bytes);
	result_u64("transactions", st->rx_datagrams);
	result_rates(st->rx_bytes, st->rx_datagrams, ns);
	stream_udp_result();
	result_counters(&win.a, &win.b, st->rx_datagrams);
	result_end();
}

static void report(void)
{
	const struct stream_config *c = &stream_cfg;
	const struct stream_stats *st = &stream_st;
	bool rx = st->rx_bytes >= st->tx_bytes; /* a server does what its clients asked */
	uint64_t bytes = rx ? st->rx_bytes : st->tx_bytes;
	uint32_t msg = c->server && rx ? st->peer_msg : c->msg;
	uint64_t ns = win.t_end - win.t_start, msgs = msg ? bytes / msg : 0;
	result_begin(rx ? "tcp_maerts" : "tcp_stream", c->server ? "server" : "client");
	if (net_inst_queues() > 1)
		result_u64("queue", net_inst_index()); /* mq=N: one line per copy */
	result_u64("msg", msg);
	result_u64("instances", c->server ? st->peers : c->instances);
	result_ratio("seconds", ns, 1000000000ull);
	result_u64("warmup", c->warmup);
	result_u64("bytes", bytes);
	result_u64("transactions", msgs);
	result_rates(bytes, msgs, ns);
	result_u64("check", c->check);
	result_u64("check_errors", st->check_errors);
	if (st->check_errors)
		result_u64("check_first_bad", st->first_bad);
	result_counters(&win.a, &win.b, msgs);
	result_end();
}

/* mq=N: each copy prints its RESULT if data moved on its queue and
 * publishes its bytes; copy 0 joins the others and prints the total
 * (`"queues":N`). The run fails only if no data moved on any queue. */
static int stream_copies_end(void (*line)(void))
{
	unsigned k = net_inst_index(), n = net_inst_queues();
	const struct stream_stats *st = &stream_st;
	struct net_inst_total t = {
	    .rx_bytes = st->rx_bytes, .tx_bytes = st->tx_bytes, .ns = win.t_end - win.t_start};

	if (st->rx_bytes || st->tx_bytes)
		line();
	else
		printf("stream: queue %u moved no data in the measured interval\n", k);
	net_print_counters();
	ctl_print_counters();
	if (st->check_errors)
		kernel_error("stream",
		             "queue %u: pattern check: %lu bytes differ, first at data offset %lu",
		             k, st->check_errors, st->first_bad);
	net_inst_post_total(k, &t);
	if (k)
		return EXIT_OK;
	net_join_copies();
	net_inst_sum_totals(n, &t);
	if (!t.rx_bytes && !t.tx_bytes)
		kernel_error("stream",
		             "no data moved in the measured interval on any of the %u queues", n);
	bool rx = t.rx_bytes >= t.tx_bytes;
	uint64_t bytes = rx ? t.rx_bytes : t.tx_bytes;
	result_begin(rx ? "tcp_maerts" : "tcp_stream", stream_cfg.server ? "server" : "client");
	result_u64("queues", n);
	result_ratio("seconds", t.ns, 1000000000ull);
	result_u64("bytes", bytes);
	result_rates(bytes, 0, t.ns);
	result_end();
	return EXIT_OK;
}

int stream_main(void)
{
	for (size_t i = 0; i < sizeof(pattern); i++)
		pattern[i] = (uint8_t)('0' + i % 10);
	net_up();
	if (stream_cfg.server)
		stream_server_run();
	else
		stream_client_run();
	void (*line)(void) = report;
	if (stream_st.dual)
		line = report_dual;
	else if (stream_cfg.server && stream_udp_started())
		line = report_udp;
	if (net_inst_queues() > 1)
		return stream_copies_end(line);
	/* a run that moved nothing did not complete: no RESULT for it; one
	 * that moved corrupted data did, and its RESULT says how */
	if (!stream_st.check_errors && !stream_st.rx_bytes && !stream_st.tx_bytes) {
		net_print_counters();
		ctl_print_counters();
		kernel_error("stream", "no data moved in the measured interval");
	}
	line();
	net_print_counters();
	ctl_print_counters();
	if (stream_st.check_errors)
		kernel_error("stream", "pattern check: %lu bytes differ, first at data offset %lu",
		             stream_st.check_errors, stream_st.first_bad);
	return EXIT_OK;
}
