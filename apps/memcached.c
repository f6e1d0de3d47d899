/*
 * memcached.c: app=memcached, a memcached-compatible server on lwIP's raw
 * API (text protocol: memcached_proto.c; item store: memcached_store.c).
 * A stock client (memcaslap, memccapable, libmemcached, telnet) talks to it
 * on port 11211 as to memcached 1.6 without UDP or the binary protocol.
 *
 * Keys (defaults in brackets):
 *   memcached.port=N [11211]    TCP port
 *   memcached.mem=MiB [64]      the store's fixed memory (hash table and
 *                               items); a full store evicts least recently
 *                               used items of the needed size class
 *   memcached.epoch=S [0]       the host's unix time at boot, for absolute
 *                               exptimes (without it they are refused)
 *   memcached.wait=S [60]       longest wait for the first command
 *   memcached.warmup=S [0]      seconds after the first command not measured
 *   memcached.idle=S [0]        end this long after the last command (0: never)
 *   memcached.seconds=S [600]   longest measured interval
 * A "stop" datagram on the control port ends the run: RESULT (commands as
 * transactions, the driver's kicks and interrupts per command), counters.
 *
 * Flow control is end to end: received bytes are acknowledged to the
 * client (tcp_recved) only once the parser has taken them, and the parser
 * stops while a reply does not fit the send buffer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "apps/apps.h"
#include "apps/memcached.h"
#include "apps/lib/result.h"
#include "kernel/kernel.h"
#include "lwip/tcp.h"
#include "net/net.h"

#define CLOSE_DRAIN_NS 200000000ull

struct srv_conn {
	struct tcpsrv_conn base; /* base.in: received, not yet taken by the parser */
	bool failed;             /* a write failed with room promised: close */
	struct mc_conn mc;
};

static struct {
	uint16_t port;
	uint64_t mem_mib, epoch, wait_s, warmup_s, idle_s, seconds;
} cfg;

static struct tcp_pcb *listener;
static uint64_t first_cmd_ns, last_cmd_ns, last_commands;
static uint64_t write_failures, conns_refused;
static struct result_snap snap_a, snap_b;

void memcached_configure(void)
{
	net_configure();
	cfg.port = (uint16_t)cmdline_u64("memcached.port", MC_PORT, 1, 65535);
	cfg.mem_mib = cmdline_u64("memcached.mem", 64, 1, 4096);
	cfg.epoch = cmdline_u64("memcached.epoch", 0, 0, UINT32_MAX);
	cfg.wait_s = cmdline_u64("memcached.wait", 60, 1, 86400);
	cfg.warmup_s = cmdline_u64("memcached.warmup", 0, 0, 600);
	cfg.idle_s = cmdline_u64("memcached.idle", 0, 0, 3600);
	cfg.seconds = cmdline_u64("memcached.seconds", 600, 1, 86400);
}

/* ---- struct mc_out on a tcp_pcb ---- */

static struct tcp_pcb *pcb_of(struct mc_conn *c)
{
	return ((struct srv_conn *)c->user)->base.pcb;
}

static bool out_room(struct mc_conn *c, uint32_t n)
{
	struct tcp_pcb *pcb = pcb_of(c);
	return tcp_sndbuf(pcb) >= n &&
	       tcp_sndqueuelen(pcb) + 2 * (n / TCP_MSS) + 8 <= TCP_SND_QUEUELEN;
}

static bool out_write(struct mc_conn *c, const void *p, uint32_t n)
{
	struct srv_conn *s = c->user;
	while (n && !s->failed) {
		u16_t k = n > 0xffff ? 0xffff : (u16_t)n;
		if (tcp_write(s->base.pcb, p, k, TCP_WRITE_FLAG_COPY | TCP_WRITE_FLAG_MORE) !=
		    ERR_OK) {
			s->failed = true;
			write_failures++;
		}
		p = (const char *)p + k;
		n -= k;
	}
	return !s->failed;
}

static uint32_t out_write_some(struct mc_conn *c, const void *p, uint32_t n)
{
	struct srv_conn *s = c->user;
	uint32_t room = tcp_sndbuf(s->base.pcb);
	if (s->failed || tcp_sndqueuelen(s->base.pcb) + 8 > TCP_SND_QUEUELEN)
		return 0;
	uint32_t k = n < room ? n : room;
	if (k > 0xffff)
		k = 0xffff;
	if (!k || tcp_write(s->base.pcb, p, (u16_t)k, TCP_WRITE_FLAG_COPY | TCP_WRITE_FLAG_MORE) !=
	              ERR_OK)
		return 0; /* resumed from the sent callback */
	return k;
}

static const struct mc_out lwip_out = {out_room, out_write, out_write_some};

/* ---- connections ---- */

static void conn_release(struct tcpsrv_conn *c)
{
	mc_conn_release(&((struct srv_conn *)c)->mc);
}

static void note_commands(void)
{
	if (mc_st.commands == last_commands)
		return;
	last_commands = mc_st.commands;
	last_cmd_ns = clock_ns();
	if (!first_cmd_ns) {
		first_cmd_ns = last_cmd_ns;
		if (!cfg.warmup_s) /* measured from the first command, which counts */
			result_snap(&snap_a);
	}
}

/* Feed what we hold to the parser; ERR_ABRT when s is gone. */
static err_t process(struct tcpsrv_conn *c)
{
	struct srv_conn *s = (struct srv_conn *)c;
	uint32_t consumed = 0;
	if (mc_conn_resume(&s->mc)) {
		while (s->base.in) {
			struct pbuf *q = s->base.in;
			size_t k = q->len ? mc_conn_feed(&s->mc, q->payload, q->len) : 0;
			consumed += (uint32_t)k;
			if (k == q->len) {
				s->base.in = q->next;
				if (q->next)
					pbuf_ref(q->next);
				pbuf_free(q);
				continue;
			}
			s->base.in = pbuf_free_header(q, (u16_t)k);
			break; /* waits for room, or quit */
		}
	}
	note_commands();
	if (s->mc.state == MC_S_QUIT && s->base.in) {
		/* acknowledge what follows "quit": lwIP resets a connection
		 * closed with unacknowledged data */
		consumed += s->base.in->tot_len;
		pbuf_free(s->base.in);
		s->base.in = NULL;
	}
	for (uint32_t left = consumed; left;) {
		u16_t k = left > 0xffff ? 0xffff : (u16_t)left;
		tcp_recved(s->base.pcb, k);
		left -= k;
	}
	if (s->failed || s->mc.state == MC_S_QUIT) {
		tcp_output(s->base.pcb);
		return tcpsrv_close(c, s->failed);
	}
	tcp_output(s->base.pcb);
	return ERR_OK;
}

static bool conn_accept(struct tcpsrv_conn *c)
{
	struct srv_conn *s = (struct srv_conn *)c;
	mc_conn_init(&s->mc, &lwip_out, s);
	return true;
}

static void conn_refused(void)
{
	conns_refused++;
}

/* A reply goes out when the request is done (no Nagle). */
static const struct tcpsrv_ops mc_tcp = {
    .conn_size = sizeof(struct srv_conn),
    .accept = conn_accept,
    .refused = conn_refused,
    .serve = process,
    .release = conn_release,
};

/* ---- phases ---- */

static bool got_command(void *unused)
{
	(void)unused;
	return first_cmd_ns || ctl_stop_requested();
}

static bool finished(void *unused)
{
	(void)unused;
	return cfg.idle_s ? ctl_stop_or_idle(last_cmd_ns, cfg.idle_s) : ctl_stop_requested();
}

static void report(uint64_t commands, uint64_t ns, const struct mc_proto_stats *a)
{
	const struct mc_store_stats *s = mc_store_stats();
	result_begin("memcached", "server");
	result_u64("port", cfg.port);
	result_u64("mem_mib", cfg.mem_mib);
	result_u64("conns", mc_st.total_conns - a->total_conns);
	result_u64("conns_open", mc_st.curr_conns);
	result_ratio("seconds", ns, 1000000000ull);
	result_u64("warmup", cfg.warmup_s);
	result_u64("transactions", commands);
	result_u64("cmd_get", mc_st.cmd_get - a->cmd_get);
	result_u64("get_hits", mc_st.get_hits - a->get_hits);
	result_u64("get_misses", mc_st.get_misses - a->get_misses);
	result_u64("cmd_set", mc_st.cmd_set - a->cmd_set);
	result_u64("client_errors", mc_st.client_errors - a->client_errors);
	result_u64("server_errors", mc_st.server_errors - a->server_errors);
	result_u64("unknown_commands", mc_st.unknown_commands - a->unknown_commands);
	result_u64("binary_refused", mc_st.binary_refused - a->binary_refused);
	result_u64("write_failures", write_failures);
	result_u64("conns_refused", conns_refused);
	result_u64("curr_items", s->curr_items);
	result_u64("evictions", s->evictions);
	result_u64("outofmemory", s->outofmemory);
	result_rates((mc_st.bytes_read - a->bytes_read) + (mc_st.bytes_written - a->bytes_written),
	             commands, ns);
	result_counters(&snap_a, &snap_b, commands);
	result_end();
}

int memcached_main(void)
{
	size_t bytes = cfg.mem_mib << 20;
	if (bytes + (16ull << 20) > pmm_free_bytes())
		kernel_error("memcached", "memcached.mem=%lu MiB does not fit: %lu MiB free",
		             cfg.mem_mib, pmm_free_bytes() >> 20);
	if (!mc_store_init(pmm_alloc_uninit(bytes, 4096), bytes))
		kernel_error("memcached", "memcached.mem=%lu MiB holds no item page", cfg.mem_mib);
	mc_store_set_epoch(cfg.epoch);
	net_up();
	if (!(listener = tcpsrv_listen(cfg.port, &mc_tcp)))
		kernel_error("memcached", "cannot listen on TCP port %u", cfg.port);
	ctl_start();
	const struct mc_store_stats *ss = mc_store_stats();
	printf("memcached listening tcp=%u mem_mib=%lu pages=%lu classes=%lu buckets=%lu "
	       "ctl=%s\n",
	       cfg.port, cfg.mem_mib, ss->pages_total, ss->classes, ss->hash_buckets, ctl_label());

	if (net_run(got_command, NULL, cfg.wait_s * 1000000000ull, NULL) < 0)
		kernel_error("memcached", "no command on TCP port %u within %lu s", cfg.port,
		             cfg.wait_s);
	if (!first_cmd_ns)
		kernel_error("memcached", "stopped from the control port before any command");
	if (cfg.warmup_s && net_run(finished, NULL, cfg.warmup_s * 1000000000ull, NULL) == 0)
		kernel_error("memcached", "stopped within the %lu s warm-up: nothing measured",
		             cfg.warmup_s);
	struct mc_proto_stats at_begin = {0};
	if (cfg.warmup_s) {
		at_begin = mc_st;
		result_snap(&snap_a);
	}
	net_run(finished, NULL, cfg.seconds * 1000000000ull, NULL);
	result_snap(&snap_b);
	uint64_t commands = mc_st.commands - at_begin.commands;
	uint64_t end = last_cmd_ns > snap_a.ns ? last_cmd_ns : snap_a.ns + 1;
	tcp_close(listener);
	net_run(NULL, NULL, CLOSE_DRAIN_NS, NULL);
	if (!commands) {
		net_print_counters();
		ctl_print_counters();
		kernel_error("memcached", "no command in the measured interval");
	}
	report(commands, end - snap_a.ns, &at_begin);
	net_print_counters();
	ctl_print_counters();
	return EXIT_OK;
}
