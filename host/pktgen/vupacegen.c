/*
 * vupacegen: the paced generator on vhost-user, linked against Debian's
 * DPDK (dpdk-dev): the host side of app=pkt's receive modes and of the
 * NDR search's PVP loop when the guest's NIC is a vhost-user port
 * (docs/packet-path.md, "A paced generator").
 *
 *   vupacegen EAL-ARGS -- [--size N] [--burst N] [--fifo] [--trial N]
 *             [--wait-go] DMAC RATE SECONDS
 *   vupacegen EAL-ARGS -- [--size N] [--burst N] --serve
 *
 * EAL-ARGS name one port, e.g. `--no-huge -m 512 --no-pci -l 1 --vdev
 * net_vhost0,iface=SOCK`: the vhost PMD owns the socket QEMU connects to
 * (no switch). Once the guest's driver is up (link up), and with --wait-go
 * once a line arrives on stdin (the caller saw the guest's ready line), it
 * sends RATE frames per second for SECONDS: rte_eth_tx_burst() of a burst,
 * each burst's start paced by a busy wait on the TSC (--fifo: as pacegen's,
 * pktgen.h). Frames are pktgen.h's (the appliance's generator frame, a
 * sequence number from 0, the send time at offset 54); a
 * frame the port refuses (the guest's RX ring has no buffer: a vhost-user
 * port has no queue) is counted and freed, never sent again, so the guest
 * sees a gap. With --trial N a trial marker follows after 100 ms. RX is
 * drained and freed. One JSON line: offered, sent, refused, the achieved
 * rate, the frames per 10 ms window against RATE / 100, the port's
 * counters; with --wait-go the port then stays up until stdin ends. Exit
 * 0; 1 when the run failed; 2 on a bad argument.
 *
 * --serve: the NDR search's generator and counter in one process (one
 * lcore polls both directions: a burst is sent when due, and while it
 * waits the port's RX is read). After link up it prints "ready" and
 * obeys lines on stdin until `quit` or the end of stdin:
 *
 *   trial N DMAC RATE SECONDS SETTLE LAT
 *
 * offers RATE x SECONDS numbered frames (from 0) to DMAC (the guest's MAC,
 * known only once it is up) paced as above, counts
 * what comes back (numbered frames addressed to this port: the guest's
 * macswap; seq gaps and reorders; with LAT 1 each one's round trip from
 * its send stamp to the TSC when it was read), waits until SETTLE seconds
 * pass without a frame back after the last one sent (at most
 * SERVE_DRAIN_S), then sends trial marker N (the guest prints PKT_TRIAL)
 * and prints one JSON line: offered, sent, refused, back, back_other
 * (anything else read), the seq counts, rtt percentiles, the marker. A bad
 * line gets {"error": ...} and the loop goes on. No --fifo: the waits after
 * a trial spin without the pacing loop's yields.
 */
#include <getopt.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <time.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include "pktgen.h"

#define MAX_BURST     64
#define LINK_WAIT_S   60
#define RING          1024
#define NB_MBUFS      8191
#define SERVE_DRAIN_S 30         /* --serve: the longest wait for frames back after a trial */
#define SERVE_MAX_S   60         /* --serve: the longest trial */
#define RTT_MAX       (1u << 22) /* --serve: round trips kept per trial */

static void usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "vupacegen: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr,
	        "\nusage: vupacegen EAL-ARGS -- [--size 64..1518] [--burst 1..%d] [--fifo] "
	        "[--trial N]\n"
	        "       [--wait-go] DMAC RATE SECONDS\n"
	        "       vupacegen EAL-ARGS -- [--size 64..1518] [--burst 1..%d] --serve\n"
	        "  RATE 1..100000000 frames/s, SECONDS 0.01..%d\n",
	        MAX_BURST, MAX_BURST, PKTGEN_MAX_S);
	exit(2);
}

__attribute__((noreturn)) static void fail(const char *what, int err)
{
	printf("{\"error\":\"%s: %s\"}\n", what, strerror(err < 0 ? -err : err));
	fflush(stdout);
	exit(1);
}

/* The port and what every trial shares. */
struct gen {
	uint16_t port;
	struct rte_mempool *pool;
	uint8_t dmac[6], smac[6];
	unsigned size, burst; /* burst 0: pktgen_batch(rate) per trial */
	bool fifo;
	uint64_t hz;
};

/* What came back in one trial (--serve), or NULL: drained uncounted. */
struct back {
	uint64_t frames, other, gaps, reorder, next;
	uint64_t t0, wall0,
	    last;      /* the trial's TSC and wall clock at its start; the last frame back */
	uint32_t *rtt; /* round trips in ns, nrtt of them (NULL: not timed) */
	uint64_t nrtt;
};

static uint64_t be_get(const uint8_t *p, int bytes)
{
	uint64_t v = 0;

	for (int i = 0; i < bytes; i++)
		v = v << 8 | p[i];
	return v;
}

/* Is f (len bytes) a numbered frame addressed to this port? Its number. */
static bool back_numbered(const struct gen *g, const uint8_t *f, unsigned len, uint64_t *seq)
{
	if (len < PKTGEN_TS_OFF + 6 || memcmp(f, g->smac, 6) || f[12] != 0x08 || f[13] != 0x00 ||
	    f[23] != 17 || memcmp(f + 42, "VNPK", 4))
		return false;
	*seq = be_get(f + PKTGEN_SEQ_OFF, 8);
	return true;
}

static void back_count(const struct gen *g, struct back *b, const uint8_t *f, unsigned len,
                       uint64_t now)
{
	uint64_t seq;

	if (!back_numbered(g, f, len, &seq)) {
		b->other++;
		return;
	}
	b->frames++;
	b->last = now;
	if (seq >= b->next) { /* as tests/tools/pktpeer.py SeqCount */
		b->gaps += seq - b->next;
		b->next = seq + 1;
	} else {
		b->reorder++;
	}
	if (b->rtt && b->nrtt < RTT_MAX) {
		uint64_t now_ns =
		    b->wall0 + (uint64_t)((double)(now - b->t0) * 1e9 / (double)g->hz);
		uint64_t d = (now_ns - be_get(f + PKTGEN_TS_OFF, 6)) & PKTGEN_TS_MASK;

		if (d > 0 && d < 1000000000ull)
			b->rtt[b->nrtt++] = (uint32_t)d;
	}
}

/* Read what the port has (one burst): counted into b, or only into *rx. */
static void drain_rx(const struct gen *g, uint64_t *rx, struct back *b)
{
	struct rte_mbuf *m[MAX_BURST];
	uint16_t n = rte_eth_rx_burst(g->port, 0, m, MAX_BURST);

	*rx += n;
	if (b && n) {
		uint64_t now = rte_rdtsc();

		for (uint16_t i = 0; i < n; i++)
			back_count(g, b, rte_pktmbuf_mtod(m[i], const uint8_t *), m[i]->data_len,
			           now);
	}
	rte_pktmbuf_free_bulk(m, n);
}

/* One paced run's figures. */
struct paced {
	uint64_t total, sent, refused, nomem, max_lag, yields, t0, t_end, elapsed, wall0;
	unsigned burst;
	uint32_t *win;
	uint64_t nwin;
};

/* RATE x SECONDS numbered frames, paced; RX read while waiting (into b
 * when given). 0, or -ENOMEM. */
static int pace(const struct gen *g, double rate, double seconds, uint64_t *rx, struct back *b,
                struct paced *p)
{
	unsigned len = g->size - PKTGEN_FCS;
	uint8_t tmpl[1518];
	struct rte_mbuf *m[MAX_BURST];

	memset(p, 0, sizeof *p);
	p->burst = g->burst ? g->burst : pktgen_batch(rate);
	pktgen_frame(tmpl, len, g->dmac, g->smac, "VNPK");
	p->total = (uint64_t)llround(rate * seconds);
	if (!p->total)
		p->total = 1;
	uint64_t hz = g->hz, win_cyc = hz / 100;
	p->nwin = (uint64_t)(seconds * 100) + 2;
	p->win = calloc(p->nwin, sizeof *p->win);
	if (!p->win)
		return -ENOMEM;
	double cyc_per_frame = (double)hz / rate;
	struct timespec rt;
	clock_gettime(CLOCK_REALTIME, &rt);
	p->t0 = rte_rdtsc();
	p->wall0 = (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec;
	if (b) {
		b->t0 = p->t0;
		b->wall0 = p->wall0;
	}
	uint64_t seq = 0, t0 = p->t0, yield_every = hz * PKTGEN_YIELD_EVERY / 1000000000ull,
	         next_yield = t0 + yield_every, rx_ahead = hz / 200000; /* 5 us */

	while (seq < p->total) {
		uint64_t due = t0 + (uint64_t)((double)seq * cyc_per_frame), t;
		if (g->fifo && rte_rdtsc() >= next_yield) {
			struct timespec ts = {.tv_sec = 0, .tv_nsec = PKTGEN_YIELD_NS};

			nanosleep(&ts, NULL);
			p->yields++;
			next_yield = rte_rdtsc() + yield_every;
		}
		/* Waiting: read what came back while a burst of RX fits before
		 * the next send is due, then spin. */
		while ((t = rte_rdtsc()) < due) {
			if (b && due - t > rx_ahead)
				drain_rx(g, rx, b);
			else
				rte_pause();
		}
		if (t - due > p->max_lag)
			p->max_lag = t - due;
		unsigned n = p->total - seq < p->burst ? (unsigned)(p->total - seq) : p->burst;
		if (rte_pktmbuf_alloc_bulk(g->pool, m, n)) {
			p->nomem++; /* every mbuf in flight: the same burst again */
			drain_rx(g, rx, b);
			continue;
		}
		uint64_t stamp =
		    (p->wall0 + (uint64_t)((double)(t - t0) * 1e9 / (double)hz)) & PKTGEN_TS_MASK;
		for (unsigned i = 0; i < n; i++) {
			uint8_t *f = rte_pktmbuf_mtod(m[i], uint8_t *);

			memcpy(f, tmpl, len);
			pktgen_be(f + PKTGEN_SEQ_OFF, seq + i, 8);
			pktgen_be(f + PKTGEN_TS_OFF, stamp, 6);
			m[i]->data_len = m[i]->pkt_len = len;
		}
		uint16_t k = rte_eth_tx_burst(g->port, 0, m, (uint16_t)n);
		p->sent += k;
		if (k < n) { /* the guest's ring is full: offered, refused, never sent again */
			p->refused += n - k;
			rte_pktmbuf_free_bulk(m + k, n - k);
		}
		uint64_t w = (t - t0) / win_cyc;
		if (w < p->nwin)
			p->win[w] += n;
		seq += n;
		drain_rx(g, rx, b);
	}
	p->t_end = rte_rdtsc();
	uint64_t slot_end = t0 + (uint64_t)((double)p->total * cyc_per_frame);
	p->elapsed = (p->t_end > slot_end ? p->t_end : slot_end) - t0;
	return 0;
}

/* The trial marker N (apps/pkt.h): true once the port took it (1 s at most). */
static bool send_marker(const struct gen *g, long long trial, uint64_t *rx, struct back *b)
{
	for (int k = 0; k < 1000; k++) {
		struct rte_mbuf *mk = rte_pktmbuf_alloc(g->pool);

		if (mk) {
			uint8_t *f = rte_pktmbuf_mtod(mk, uint8_t *);

			pktgen_frame(f, 60, g->dmac, g->smac, "VNPT");
			pktgen_be(f + PKTGEN_SEQ_OFF, (uint64_t)trial, 8);
			mk->data_len = mk->pkt_len = 60;
			if (rte_eth_tx_burst(g->port, 0, &mk, 1) == 1)
				return true;
			rte_pktmbuf_free(mk);
		}
		uint64_t t1 = rte_rdtsc() + g->hz / 1000;
		while (rte_rdtsc() < t1)
			drain_rx(g, rx, b);
	}
	return false;
}

/* The paced run's common JSON fields (no braces). */
static void print_paced(const struct gen *g, const struct paced *p, double rate, double seconds)
{
	double hz = (double)g->hz;
	uint64_t win_cyc = g->hz / 100;
	uint64_t full = p->elapsed / win_cyc < p->nwin ? p->elapsed / win_cyc : p->nwin;

	if ((p->t_end - p->t0) / win_cyc < full)
		full = (p->t_end - p->t0) / win_cyc;
	printf("\"gen\":\"vupacegen\",\"rate\":%.0f,\"size\":%u,\"burst\":%u,\"fifo\":%d,"
	       "\"seconds\":%.3f,\"offered\":%llu,\"sent\":%llu,\"refused\":%llu,\"nomem\":%llu,"
	       "\"elapsed_ns\":%.0f,\"achieved_pps\":%.1f,\"max_lag_ns\":%.0f,\"yields\":%llu,",
	       rate, g->size, p->burst, g->fifo, seconds, (unsigned long long)p->total,
	       (unsigned long long)p->sent, (unsigned long long)p->refused,
	       (unsigned long long)p->nomem, (double)p->elapsed * 1e9 / hz,
	       (double)p->total * hz / (double)p->elapsed, (double)p->max_lag * 1e9 / hz,
	       (unsigned long long)p->yields);
	pktgen_print_spread(p->win, full, rate);
}

/* A trial's DMAC: xx:xx:xx:xx:xx:xx (pktgen_mac() exits on a bad one). */
static bool parse_mac(const char *s, uint8_t mac[6])
{
	unsigned v[6];
	char tail;

	if (sscanf(s, "%x:%x:%x:%x:%x:%x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &tail) != 6)
		return false;
	for (int i = 0; i < 6; i++) {
		if (v[i] > 255)
			return false;
		mac[i] = (uint8_t)v[i];
	}
	return true;
}

/* Wait for a line on stdin, reading the port meanwhile: the line, or NULL
 * at the end of stdin. */
static char *serve_line(const struct gen *g, char *line, int size, uint64_t *rx)
{
	struct pollfd pf = {.fd = 0, .events = POLLIN};

	for (;;) {
		drain_rx(g, rx, NULL);
		int r = poll(&pf, 1, 1);
		if (r > 0)
			return fgets(line, size, stdin);
		if (r < 0 && errno != EINTR)
			return NULL;
	}
}

/* --serve: trials on command until quit (docs above). */
static int serve(struct gen *g)
{
	char line[256];
	uint64_t rx = 0;
	uint32_t *rtt = malloc(RTT_MAX * sizeof *rtt);

	if (!rtt)
		fail("malloc", ENOMEM);
	/* Unbuffered: a line stdio read ahead would wait unseen by poll(). */
	setvbuf(stdin, NULL, _IONBF, 0);
	printf("vupacegen: ready\n");
	fflush(stdout);
	while (serve_line(g, line, sizeof line, &rx)) {
		long long trial;
		double rate, seconds, settle;
		int lat, used = 0;
		char word[16], dmac[32];

		if (sscanf(line, "%15s", word) == 1 && !strcmp(word, "quit"))
			break;
		if (sscanf(line, "trial %lld %31s %lf %lf %lf %d %n", &trial, dmac, &rate, &seconds,
		           &settle, &lat, &used) != 6 ||
		    !parse_mac(dmac, g->dmac) || line[used] || trial < 0 ||
		    !(rate >= 1 && rate <= 1e8) || !(seconds >= 0.01 && seconds <= SERVE_MAX_S) ||
		    !(settle >= 0 && settle <= 30) || (lat != 0 && lat != 1)) {
			printf("{\"error\":\"bad command (expected: trial N DMAC RATE 1..1e8 "
			       "SECONDS 0.01..%d SETTLE 0..30 LAT 0|1)\"}\n",
			       SERVE_MAX_S);
			fflush(stdout);
			continue;
		}
		struct back b = {.rtt = lat ? rtt : NULL};
		struct paced p;
		rte_eth_stats_reset(g->port);
		if (pace(g, rate, seconds, &rx, &b, &p))
			fail("calloc", ENOMEM);
		/* SETTLE seconds with nothing back, counted from the last frame
		 * sent or back, whichever is later. */
		uint64_t quiet = (uint64_t)(settle * (double)g->hz), t,
		         end = p.t_end + SERVE_DRAIN_S * g->hz;
		while ((t = rte_rdtsc()) < end && t - (b.last > p.t_end ? b.last : p.t_end) < quiet)
			drain_rx(g, &rx, &b);
		double marker_s = (double)(rte_rdtsc() - p.t_end) / (double)g->hz;
		bool marker = send_marker(g, trial, &rx, &b);
		struct rte_eth_stats st;
		rte_eth_stats_get(g->port, &st);
		printf("{\"trial\":%lld,", trial);
		print_paced(g, &p, rate, seconds);
		printf(
		    ",\"back\":%llu,\"back_other\":%llu,\"back_gaps\":%llu,\"back_reorder\":%llu,"
		    "\"marker\":%s,\"marker_s\":%.3f,\"port_opackets\":%llu,\"port_ipackets\":%llu,"
		    "\"port_imissed\":%llu",
		    (unsigned long long)b.frames, (unsigned long long)b.other,
		    (unsigned long long)b.gaps, (unsigned long long)b.reorder,
		    marker ? "true" : "false", marker_s, (unsigned long long)st.opackets,
		    (unsigned long long)st.ipackets, (unsigned long long)st.imissed);
		if (lat)
			pktgen_print_rtt(rtt, b.nrtt);
		printf("}\n");
		fflush(stdout);
		free(p.win);
	}
	free(rtt);
	return 0;
}

int main(int argc, char **argv)
{
	int eal = rte_eal_init(argc, argv);
	if (eal < 0)
		usage_error("EAL arguments refused (rte_eal_init: %s)", rte_strerror(rte_errno));
	argc -= eal;
	argv += eal;

	static const struct option opts[] = {
	    {"size", required_argument, 0, 's'},
	    {"burst", required_argument, 0, 'b'},
	    {"trial", required_argument, 0, 't'},
	    {"wait-go", no_argument, 0, 'g'},
	    {"fifo", no_argument, 0, 'f'},
	    {"serve", no_argument, 0, 'S'},
	    {0, 0, 0, 0},
	};
	struct gen g = {.size = 64};
	long long trial = -1;
	bool wait_go = false, serving = false;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			g.size = (unsigned)pktgen_num(optarg, "--size", 64, 1518);
			break;
		case 'b':
			g.burst = (unsigned)pktgen_num(optarg, "--burst", 1, MAX_BURST);
			break;
		case 't':
			trial = (long long)pktgen_num(optarg, "--trial", 0, 1e15);
			break;
		case 'g':
			wait_go = true;
			break;
		case 'f':
			g.fifo = true;
			break;
		case 'S':
			serving = true;
			break;
		default:
			usage_error("unknown option");
		}
	}
	double rate = 0, seconds = 0;
	if (serving) {
		if (argc - optind != 0)
			usage_error(
			    "--serve takes its trials on stdin: no DMAC RATE SECONDS (got %d "
			    "arguments)",
			    argc - optind);
		if (wait_go || trial >= 0 || g.fifo)
			usage_error(
			    "--serve takes its trials on stdin: no --wait-go, --trial or --fifo");
	} else {
		if (argc - optind != 3)
			usage_error(
			    "expected DMAC RATE SECONDS after the EAL arguments and --, got %d",
			    argc - optind);
		pktgen_mac(argv[optind], g.dmac);
		rate = pktgen_num(argv[optind + 1], "RATE", 1, 1e8);
		seconds = pktgen_num(argv[optind + 2], "SECONDS", 0.01, PKTGEN_MAX_S);
	}
	if (rte_eth_dev_count_avail() != 1)
		usage_error("the EAL arguments must give exactly one port (--vdev "
		            "net_vhost0,iface=SOCK), not %u",
		            rte_eth_dev_count_avail());

	RTE_ETH_FOREACH_DEV(g.port) break;
	g.pool = rte_pktmbuf_pool_create("vupacegen", NB_MBUFS, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
	                                 (int)rte_socket_id());
	if (!g.pool)
		fail("rte_pktmbuf_pool_create", rte_errno);
	struct rte_eth_conf conf = {0};
	int r = rte_eth_dev_configure(g.port, 1, 1, &conf);
	if (r < 0)
		fail("rte_eth_dev_configure", r);
	if ((r = rte_eth_rx_queue_setup(g.port, 0, RING, (unsigned)rte_eth_dev_socket_id(g.port),
	                                NULL, g.pool)) < 0)
		fail("rte_eth_rx_queue_setup", r);
	if ((r = rte_eth_tx_queue_setup(g.port, 0, RING, (unsigned)rte_eth_dev_socket_id(g.port),
	                                NULL)) < 0)
		fail("rte_eth_tx_queue_setup", r);
	if ((r = rte_eth_dev_start(g.port)) < 0)
		fail("rte_eth_dev_start", r);
	struct rte_ether_addr mac;
	rte_eth_macaddr_get(g.port, &mac);
	memcpy(g.smac, mac.addr_bytes, 6);
	printf("vupacegen: port %u up, waiting for the guest\n", g.port);
	fflush(stdout);

	/* The guest's driver is up when the vhost PMD reports link up. */
	g.hz = rte_get_tsc_hz();
	uint64_t rx = 0, until = rte_rdtsc() + LINK_WAIT_S * g.hz;
	struct rte_eth_link link = {0};
	while (rte_rdtsc() < until) {
		rte_eth_link_get_nowait(g.port, &link);
		if (link.link_status)
			break;
		rte_delay_ms(10);
	}
	if (!link.link_status) {
		printf("{\"error\":\"no guest on the port within %d s\"}\n", LINK_WAIT_S);
		return 1;
	}
	if (g.fifo) { /* pktgen.h: the pacing loop gives the CPU up 6 % of the time */
		struct sched_param sp = {.sched_priority = 1};

		if (sched_setscheduler(0, SCHED_FIFO, &sp))
			fail("sched_setscheduler(SCHED_FIFO)", errno);
	}
	if (serving) {
		r = serve(&g);
		rte_eth_dev_stop(g.port);
		rte_eth_dev_close(g.port);
		rte_eal_cleanup();
		return r;
	}
	if (wait_go) {
		printf("vupacegen: guest up, waiting for a line on stdin\n");
		fflush(stdout);
		struct pollfd p = {.fd = 0, .events = POLLIN};
		while (rte_rdtsc() < until + LINK_WAIT_S * g.hz) {
			drain_rx(&g, &rx, NULL);
			if (poll(&p, 1, 1) > 0)
				break;
		}
		char line[64];
		if (!(p.revents & POLLIN) || !fgets(line, sizeof line, stdin)) {
			printf("{\"error\":\"no go line on stdin\"}\n");
			return 1;
		}
	}
	rte_eth_stats_reset(g.port);

	struct paced p;
	if (pace(&g, rate, seconds, &rx, NULL, &p))
		fail("calloc", ENOMEM);
	bool marker = false;
	if (trial >= 0) {
		uint64_t t1 = rte_rdtsc() + g.hz / 10;
		while (rte_rdtsc() < t1)
			drain_rx(&g, &rx, NULL);
		marker = send_marker(&g, trial, &rx, NULL);
	}
	struct rte_eth_stats st;
	rte_eth_stats_get(g.port, &st);

	printf("{");
	print_paced(&g, &p, rate, seconds);
	printf(",\"last_seq\":%llu,\"marker\":%s,\"port_opackets\":%llu,\"port_oerrors\":%llu,"
	       "\"port_ipackets\":%llu,\"rx_freed\":%llu,\"tsc_hz\":%llu}\n",
	       (unsigned long long)(p.total - 1),
	       trial < 0 ? "null"
	       : marker  ? "true"
	                 : "false",
	       (unsigned long long)st.opackets, (unsigned long long)st.oerrors,
	       (unsigned long long)st.ipackets, (unsigned long long)rx, (unsigned long long)g.hz);
	fflush(stdout);
	free(p.win);
	if (wait_go) {
		/* The port stays up (the guest sees its link go down when it
		 * closes) until stdin ends, at most LINK_WAIT_S more seconds. */
		struct pollfd pf = {.fd = 0, .events = POLLIN};
		char line[64];
		uint64_t end = rte_rdtsc() + LINK_WAIT_S * g.hz;

		while (rte_rdtsc() < end) {
			drain_rx(&g, &rx, NULL);
			if (poll(&pf, 1, 1) > 0 && !fgets(line, sizeof line, stdin))
				break;
		}
	}
	rte_eth_dev_stop(g.port);
	rte_eth_dev_close(g.port);
	rte_eal_cleanup();
	return 0;
}
