/*
 * vupacegen: the paced generator on vhost-user, linked against Debian's
 * DPDK (dpdk-dev): the host side of app=pkt's receive modes when the
 * guest's NIC is a vhost-user port (docs/packet-path.md, "A paced
 * generator").
 *
 *   vupacegen EAL-ARGS -- [--size N] [--burst N] [--fifo] [--trial N]
 *             [--wait-go] DMAC RATE SECONDS
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

#define MAX_BURST   64
#define LINK_WAIT_S 60
#define RING        1024
#define NB_MBUFS    8191

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
	        "  RATE 1..100000000 frames/s, SECONDS 0.01..%d\n",
	        MAX_BURST, PKTGEN_MAX_S);
	exit(2);
}

__attribute__((noreturn)) static void fail(const char *what, int err)
{
	printf("{\"error\":\"%s: %s\"}\n", what, strerror(err < 0 ? -err : err));
	fflush(stdout);
	exit(1);
}

static void drain_rx(uint16_t port, uint64_t *rx)
{
	struct rte_mbuf *m[MAX_BURST];
	uint16_t n = rte_eth_rx_burst(port, 0, m, MAX_BURST);

	*rx += n;
	rte_pktmbuf_free_bulk(m, n);
}

int main(int argc, char **argv)
{
	int eal = rte_eal_init(argc, argv);
	if (eal < 0)
		usage_error("EAL arguments refused (rte_eal_init: %s)", rte_strerror(rte_errno));
	argc -= eal;
	argv += eal;

	static const struct option opts[] = {
	    {"size", required_argument, 0, 's'},  {"burst", required_argument, 0, 'b'},
	    {"trial", required_argument, 0, 't'}, {"wait-go", no_argument, 0, 'g'},
	    {"fifo", no_argument, 0, 'f'},        {0, 0, 0, 0},
	};
	unsigned size = 64, burst = 0;
	long long trial = -1;
	bool wait_go = false, fifo = false;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			size = (unsigned)pktgen_num(optarg, "--size", 64, 1518);
			break;
		case 'b':
			burst = (unsigned)pktgen_num(optarg, "--burst", 1, MAX_BURST);
			break;
		case 't':
			trial = (long long)pktgen_num(optarg, "--trial", 0, 1e15);
			break;
		case 'g':
			wait_go = true;
			break;
		case 'f':
			fifo = true;
			break;
		default:
			usage_error("unknown option");
		}
	}
	if (argc - optind != 3)
		usage_error("expected DMAC RATE SECONDS after the EAL arguments and --, got %d",
		            argc - optind);
	uint8_t dmac[6], smac[6];
	pktgen_mac(argv[optind], dmac);
	double rate = pktgen_num(argv[optind + 1], "RATE", 1, 1e8);
	double seconds = pktgen_num(argv[optind + 2], "SECONDS", 0.01, PKTGEN_MAX_S);
	if (!burst)
		burst = pktgen_batch(rate);
	if (rte_eth_dev_count_avail() != 1)
		usage_error("the EAL arguments must give exactly one port (--vdev "
		            "net_vhost0,iface=SOCK), not %u",
		            rte_eth_dev_count_avail());

	uint16_t port = 0;
	RTE_ETH_FOREACH_DEV(port) break;
	struct rte_mempool *pool = rte_pktmbuf_pool_create(
	    "vupacegen", NB_MBUFS, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE, (int)rte_socket_id());
	if (!pool)
		fail("rte_pktmbuf_pool_create", rte_errno);
	struct rte_eth_conf conf = {0};
	int r = rte_eth_dev_configure(port, 1, 1, &conf);
	if (r < 0)
		fail("rte_eth_dev_configure", r);
	if ((r = rte_eth_rx_queue_setup(port, 0, RING, (unsigned)rte_eth_dev_socket_id(port), NULL,
	                                pool)) < 0)
		fail("rte_eth_rx_queue_setup", r);
	if ((r = rte_eth_tx_queue_setup(port, 0, RING, (unsigned)rte_eth_dev_socket_id(port),
	                                NULL)) < 0)
		fail("rte_eth_tx_queue_setup", r);
	if ((r = rte_eth_dev_start(port)) < 0)
		fail("rte_eth_dev_start", r);
	struct rte_ether_addr mac;
	rte_eth_macaddr_get(port, &mac);
	memcpy(smac, mac.addr_bytes, 6);
	printf("vupacegen: port %u up, waiting for the guest\n", port);
	fflush(stdout);

	/* The guest's driver is up when the vhost PMD reports link up. */
	uint64_t hz = rte_get_tsc_hz(), rx = 0;
	uint64_t until = rte_rdtsc() + LINK_WAIT_S * hz;
	struct rte_eth_link link = {0};
	while (rte_rdtsc() < until) {
		rte_eth_link_get_nowait(port, &link);
		if (link.link_status)
			break;
		rte_delay_ms(10);
	}
	if (!link.link_status) {
		printf("{\"error\":\"no guest on the port within %d s\"}\n", LINK_WAIT_S);
		return 1;
	}
	if (wait_go) {
		printf("vupacegen: guest up, waiting for a line on stdin\n");
		fflush(stdout);
		struct pollfd p = {.fd = 0, .events = POLLIN};
		while (rte_rdtsc() < until + LINK_WAIT_S * hz) {
			drain_rx(port, &rx);
			if (poll(&p, 1, 1) > 0)
				break;
		}
		char line[64];
		if (!(p.revents & POLLIN) || !fgets(line, sizeof line, stdin)) {
			printf("{\"error\":\"no go line on stdin\"}\n");
			return 1;
		}
	}
	rte_eth_stats_reset(port);
	if (fifo) { /* pktgen.h: the loop below gives the CPU up 6 % of the time */
		struct sched_param sp = {.sched_priority = 1};

		if (sched_setscheduler(0, SCHED_FIFO, &sp))
			fail("sched_setscheduler(SCHED_FIFO)", errno);
	}

	unsigned len = size - PKTGEN_FCS;
	uint8_t tmpl[1518];
	pktgen_frame(tmpl, len, dmac, smac, "VNPK");
	uint64_t total = (uint64_t)llround(rate * seconds);
	if (!total)
		total = 1;
	uint64_t win_cyc = hz / 100, nwin = (uint64_t)(seconds * 100) + 2;
	uint32_t *win = calloc(nwin, sizeof *win);
	if (!win)
		fail("calloc", ENOMEM);
	double cyc_per_frame = (double)hz / rate;
	struct timespec rt;
	clock_gettime(CLOCK_REALTIME, &rt);
	uint64_t t0 = rte_rdtsc();
	uint64_t wall0 = (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec;
	uint64_t seq = 0, sent = 0, refused = 0, nomem = 0, max_lag = 0, yields = 0;
	uint64_t yield_every = hz * PKTGEN_YIELD_EVERY / 1000000000ull,
	         next_yield = t0 + yield_every;
	struct rte_mbuf *m[MAX_BURST];

	while (seq < total) {
		uint64_t due = t0 + (uint64_t)((double)seq * cyc_per_frame), t;
		if (fifo && rte_rdtsc() >= next_yield) {
			struct timespec ts = {.tv_sec = 0, .tv_nsec = PKTGEN_YIELD_NS};

			nanosleep(&ts, NULL);
			yields++;
			next_yield = rte_rdtsc() + yield_every;
		}
		while ((t = rte_rdtsc()) < due)
			rte_pause();
		if (t - due > max_lag)
			max_lag = t - due;
		unsigned n = total - seq < burst ? (unsigned)(total - seq) : burst;
		if (rte_pktmbuf_alloc_bulk(pool, m, n)) {
			nomem++; /* every mbuf in flight: the same burst again */
			drain_rx(port, &rx);
			continue;
		}
		uint64_t stamp =
		    (wall0 + (uint64_t)((double)(t - t0) * 1e9 / (double)hz)) & PKTGEN_TS_MASK;
		for (unsigned i = 0; i < n; i++) {
			uint8_t *f = rte_pktmbuf_mtod(m[i], uint8_t *);

			memcpy(f, tmpl, len);
			pktgen_be(f + PKTGEN_SEQ_OFF, seq + i, 8);
			pktgen_be(f + PKTGEN_TS_OFF, stamp, 6);
			m[i]->data_len = m[i]->pkt_len = len;
		}
		uint16_t k = rte_eth_tx_burst(port, 0, m, (uint16_t)n);
		sent += k;
		if (k < n) { /* the guest's ring is full: offered, refused, never sent again */
			refused += n - k;
			rte_pktmbuf_free_bulk(m + k, n - k);
		}
		uint64_t w = (t - t0) / win_cyc;
		if (w < nwin)
			win[w] += n;
		seq += n;
		drain_rx(port, &rx);
	}
	uint64_t t_end = rte_rdtsc();
	uint64_t slot_end = t0 + (uint64_t)((double)total * cyc_per_frame);
	uint64_t elapsed = (t_end > slot_end ? t_end : slot_end) - t0;
	bool marker = false;
	if (trial >= 0) {
		uint64_t t1 = rte_rdtsc() + hz / 10;
		while (rte_rdtsc() < t1)
			drain_rx(port, &rx);
		for (int k = 0; k < 1000 && !marker; k++) {
			struct rte_mbuf *mk = rte_pktmbuf_alloc(pool);
			if (mk) {
				uint8_t *f = rte_pktmbuf_mtod(mk, uint8_t *);

				pktgen_frame(f, 60, dmac, smac, "VNPT");
				pktgen_be(f + PKTGEN_SEQ_OFF, (uint64_t)trial, 8);
				mk->data_len = mk->pkt_len = 60;
				marker = rte_eth_tx_burst(port, 0, &mk, 1) == 1;
				if (!marker)
					rte_pktmbuf_free(mk);
			}
			if (!marker)
				rte_delay_ms(1);
		}
	}
	struct rte_eth_stats st;
	rte_eth_stats_get(port, &st);

	uint64_t full = elapsed / win_cyc < nwin ? elapsed / win_cyc : nwin;
	if ((t_end - t0) / win_cyc < full)
		full = (t_end - t0) / win_cyc;
	printf("{\"gen\":\"vupacegen\",\"rate\":%.0f,\"size\":%u,\"burst\":%u,\"fifo\":%d,"
	       "\"seconds\":%.3f,\"offered\":%llu,\"sent\":%llu,\"refused\":%llu,\"nomem\":%llu,"
	       "\"elapsed_ns\":%.0f,\"achieved_pps\":%.1f,\"max_lag_ns\":%.0f,\"yields\":%llu,",
	       rate, size, burst, fifo, seconds, (unsigned long long)total,
	       (unsigned long long)sent, (unsigned long long)refused, (unsigned long long)nomem,
	       (double)elapsed * 1e9 / (double)hz, (double)total * (double)hz / (double)elapsed,
	       (double)max_lag * 1e9 / (double)hz, (unsigned long long)yields);
	pktgen_print_spread(win, full, rate);
	printf(",\"last_seq\":%llu,\"marker\":%s,\"port_opackets\":%llu,\"port_oerrors\":%llu,"
	       "\"port_ipackets\":%llu,\"rx_freed\":%llu,\"tsc_hz\":%llu}\n",
	       (unsigned long long)(total - 1),
	       trial < 0 ? "null"
	       : marker  ? "true"
	                 : "false",
	       (unsigned long long)st.opackets, (unsigned long long)st.oerrors,
	       (unsigned long long)st.ipackets, (unsigned long long)rx, (unsigned long long)hz);
	fflush(stdout);
	free(win);
	if (wait_go) {
		/* The port stays up (the guest sees its link go down when it
		 * closes) until stdin ends, at most LINK_WAIT_S more seconds. */
		struct pollfd p = {.fd = 0, .events = POLLIN};
		char line[64];
		uint64_t end = rte_rdtsc() + LINK_WAIT_S * hz;

		while (rte_rdtsc() < end) {
			drain_rx(port, &rx);
			if (poll(&p, 1, 1) > 0 && !fgets(line, sizeof line, stdin))
				break;
		}
	}
	rte_eth_dev_stop(port);
	rte_eth_dev_close(port);
	rte_eal_cleanup();
	return 0;
}
