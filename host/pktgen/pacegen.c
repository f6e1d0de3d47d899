/*
 * pacegen: a paced frame generator on a Linux interface (a tap or a veth),
 * the host side of app=pkt's receive modes (docs/packet-path.md, "A paced
 * generator").
 *
 *   pacegen [options] IFACE DMAC RATE SECONDS
 *
 * Sends RATE frames per second for SECONDS on IFACE through one AF_PACKET
 * socket: sendmmsg() of a batch, the batch's start paced by a busy wait on
 * CLOCK_MONOTONIC (a sleep first when the next batch is more than 2 ms
 * away, below 500 frames/s), so the rate holds over any window longer than
 * a batch; --fifo runs it under SCHED_FIFO (pktgen.h says how it leaves
 * the kernel its 5 %). Frames are the appliance's own generator frame
 * (pktgen.h, apps/pkt.h): a sequence number from 0 and the batch's send
 * time on CLOCK_REALTIME (what SO_TIMESTAMPNS gives a receiver). With
 * --trial N a trial marker ("VNPT" and N) follows the last frame after
 * --marker-wait ms: the receive modes print their PKT_TRIAL line on it.
 * --sport N sends the flow from UDP port N instead of 40000 (another
 * flow: with RSS another hash, with a multi_queue tap maybe another tap
 * queue; tests/cases/test_mq.py picks flows by both).
 *
 * Every frame is offered once: a frame the kernel refuses is counted (by
 * errno) and not sent again, so the offered rate does not bend to the sink
 * and the receiver sees the refusal as a sequence gap. With the qdisc path
 * (default) a tap that drops a frame (nobody reads it, or its queue is
 * full) counts it in its tx_dropped and the sender never hears of it; with
 * --qdisc-bypass (PACKET_QDISC_BYPASS) the tap's drop comes back as ENOBUFS
 * on that frame, and sendmmsg() stops the batch there (the rest of the
 * batch goes in the next call).
 *
 * Prints one JSON line: what was offered, sent and refused, the elapsed
 * time from the first batch to the end of the last, the achieved rate, the
 * pacing (batches started late, the largest lag) and the spread of frames
 * per 10 ms window against RATE / 100, and the interface's counters over
 * the run. Exit 0; 1 when the run failed (socket, interface); 2 on a bad
 * argument, with the reason on stderr.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "pktgen.h"

#define MAX_BATCH 64
#define WIN_NS    10000000ull /* the spread's window: 10 ms */
#define SLEEP_NS  2000000     /* sleep first when the next batch is this far off ... */
#define WAKE_NS   1000000     /* ... and wake this much before it (a sleep wakes late) */

static void usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "pacegen: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr,
	        "\nusage: pacegen [--size 64..1518] [--batch 1..%d] [--qdisc-bypass] [--cpu N]\n"
	        "       [--fifo] [--sport N] [--trial N [--marker-wait MS]]\n"
	        "       IFACE DMAC RATE SECONDS\n"
	        "  RATE 1..100000000 frames/s, SECONDS 0.01..%d\n",
	        MAX_BATCH, PKTGEN_MAX_S);
	exit(2);
}

__attribute__((noreturn)) static void fail(const char *what)
{
	printf("{\"error\":\"%s: %s\"}\n", what, strerror(errno));
	exit(1);
}

static uint64_t now_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t if_stat(const char *iface, const char *name)
{
	char path[128];
	unsigned long long v = 0;
	FILE *f;

	snprintf(path, sizeof path, "/sys/class/net/%s/statistics/%s", iface, name);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fscanf(f, "%llu", &v) != 1)
		v = 0;
	fclose(f);
	return v;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"size", required_argument, 0, 's'},  {"batch", required_argument, 0, 'b'},
	    {"trial", required_argument, 0, 't'}, {"marker-wait", required_argument, 0, 'w'},
	    {"cpu", required_argument, 0, 'c'},   {"qdisc-bypass", no_argument, 0, 'q'},
	    {"fifo", no_argument, 0, 'f'},        {"sport", required_argument, 0, 'p'},
	    {"help", no_argument, 0, 'h'},        {0, 0, 0, 0},
	};
	unsigned size = 64, batch = 0, sport = 40000;
	long long trial = -1, marker_wait_ms = 100, cpu = -1;
	bool bypass = false, fifo = false;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			size = (unsigned)pktgen_num(optarg, "--size", PKTGEN_MIN, PKTGEN_MAX);
			break;
		case 'b':
			batch = (unsigned)pktgen_num(optarg, "--batch", 1, MAX_BATCH);
			break;
		case 't':
			trial = (long long)pktgen_num(optarg, "--trial", 0, 1e15);
			break;
		case 'w':
			marker_wait_ms = (long long)pktgen_num(optarg, "--marker-wait", 0, 60000);
			break;
		case 'c':
			cpu = (long long)pktgen_num(optarg, "--cpu", 0, CPU_SETSIZE - 1);
			break;
		case 'q':
			bypass = true;
			break;
		case 'f':
			fifo = true;
			break;
		case 'p':
			sport = (unsigned)pktgen_num(optarg, "--sport", 1, 65535);
			break;
		case 'h':
			usage_error("help");
		default:
			usage_error("unknown option");
		}
	}
	if (argc - optind != 4)
		usage_error("expected IFACE DMAC RATE SECONDS, got %d arguments", argc - optind);
	const char *iface = argv[optind];
	uint8_t dmac[6], smac[6];
	pktgen_mac(argv[optind + 1], dmac);
	double rate = pktgen_num(argv[optind + 2], "RATE", 1, 1e8);
	double seconds = pktgen_num(argv[optind + 3], "SECONDS", 0.01, PKTGEN_MAX_S);
	unsigned ifindex = if_nametoindex(iface);
	if (strlen(iface) >= IFNAMSIZ || !ifindex)
		usage_error("IFACE: no interface '%s' here", iface);
	/* One batch per >= 16 us: 1 frame per call up to 62.5 kpps, 16 at 1 Mpps. */
	if (!batch)
		batch = pktgen_batch(rate);

	if (cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET((int)cpu, &set);
		if (sched_setaffinity(0, sizeof set, &set))
			fail("sched_setaffinity");
	}
	if (fifo) {
		/* pktgen.h: the loop below gives the CPU up 6 % of the time */
		struct sched_param sp = {.sched_priority = 1};

		if (sched_setscheduler(0, SCHED_FIFO, &sp))
			fail("sched_setscheduler(SCHED_FIFO)");
	}
	prctl(PR_SET_TIMERSLACK, 1UL);           /* the sleeps below 500 frames/s: wake on time */
	int fd = socket(AF_PACKET, SOCK_RAW, 0); /* protocol 0: this socket receives nothing */
	if (fd < 0)
		fail("socket(AF_PACKET)");
	struct sockaddr_ll ll = {.sll_family = AF_PACKET, .sll_ifindex = (int)ifindex};
	if (bind(fd, (struct sockaddr *)&ll, sizeof ll))
		fail("bind");
	int one = 1, sndbuf = 4 << 20;
	if (bypass && setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof one))
		fail("PACKET_QDISC_BYPASS");
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
	struct ifreq ifr = {0};
	memcpy(ifr.ifr_name, iface, strlen(iface));
	if (ioctl(fd, SIOCGIFHWADDR, &ifr))
		fail("SIOCGIFHWADDR");
	memcpy(smac, ifr.ifr_hwaddr.sa_data, 6);

	unsigned len = size - PKTGEN_FCS;
	static uint8_t bufs[MAX_BATCH][PKTGEN_MAX];
	struct iovec iov[MAX_BATCH];
	struct mmsghdr msgs[MAX_BATCH];
	for (unsigned i = 0; i < batch; i++) {
		pktgen_frame(bufs[i], len, dmac, smac, "VNPK");
		pktgen_be(bufs[i] + 34, sport, 2);
		iov[i] = (struct iovec){.iov_base = bufs[i], .iov_len = len};
		msgs[i] = (struct mmsghdr){.msg_hdr = {.msg_iov = &iov[i], .msg_iovlen = 1}};
	}

	uint64_t total = (uint64_t)llround(rate * seconds);
	if (total == 0)
		total = 1;
	uint64_t nwin = (uint64_t)(seconds * 1e9 / WIN_NS) + 2;
	uint32_t *win = calloc(nwin, sizeof *win);
	if (!win)
		fail("calloc");
	uint64_t tx0 = if_stat(iface, "tx_packets"), drop0 = if_stat(iface, "tx_dropped");
	uint64_t sent = 0, refused = 0, enobufs = 0, eagain = 0, other = 0, calls = 0;
	uint64_t late = 0, max_lag = 0, seq = 0, yields = 0;
	double ns_per_frame = 1e9 / rate;
	uint64_t wall_off = now_ns(CLOCK_REALTIME) - now_ns(CLOCK_MONOTONIC);
	uint64_t t0 = now_ns(CLOCK_MONOTONIC), t = t0, next_yield = t0 + PKTGEN_YIELD_EVERY;

	while (seq < total) {
		/* Batch k starts when its first frame is due: t0 + seq / rate. */
		uint64_t due = t0 + (uint64_t)((double)seq * ns_per_frame);
		t = now_ns(CLOCK_MONOTONIC);
		if (fifo && t >= next_yield) {
			struct timespec ts = {.tv_sec = 0, .tv_nsec = PKTGEN_YIELD_NS};

			nanosleep(&ts, NULL);
			yields++;
			t = now_ns(CLOCK_MONOTONIC);
			next_yield = t + PKTGEN_YIELD_EVERY;
		}
		if (due > t + SLEEP_NS) {
			struct timespec ts = {.tv_sec = (time_t)((due - WAKE_NS) / 1000000000ull),
			                      .tv_nsec = (long)((due - WAKE_NS) % 1000000000ull)};
			clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
		}
		while ((t = now_ns(CLOCK_MONOTONIC)) < due)
			; /* the busy wait that holds the rate: a sleep wakes 50+ us late */
		if (t - due > max_lag)
			max_lag = t - due;
		if (seq && t - due > (uint64_t)ns_per_frame * batch)
			late++;
		unsigned n = total - seq < batch ? (unsigned)(total - seq) : batch;
		uint64_t stamp = (t + wall_off) & 0xffffffffffffull;
		for (unsigned i = 0; i < n; i++) {
			pktgen_be(bufs[i] + PKTGEN_SEQ_OFF, seq + i, 8);
			pktgen_be(bufs[i] + PKTGEN_TS_OFF, stamp, 6);
		}
		unsigned i = 0;
		while (i < n) {
			int r = sendmmsg(fd, msgs + i, n - i, MSG_DONTWAIT);
			calls++;
			if (r > 0) {
				sent += (unsigned)r;
				i += (unsigned)r;
				continue;
			}
			/* Frame i refused: counted, never sent again (the offered
			 * load does not bend to the sink; the receiver sees a gap). */
			refused++;
			if (errno == ENOBUFS)
				enobufs++;
			else if (errno == EAGAIN || errno == EWOULDBLOCK)
				eagain++;
			else if (errno == ENETDOWN || errno == ENXIO || errno == ENODEV)
				fail("sendmmsg");
			else
				other++;
			i++;
		}
		uint64_t w = (t - t0) / WIN_NS;
		if (w < nwin)
			win[w] += n;
		seq += n;
	}
	uint64_t t_end = now_ns(CLOCK_MONOTONIC);
	/* The last batch was due at (total - n) / rate: the run lasts total /
	 * rate when every batch left on time, so elapsed is t0 to the end of the
	 * last batch's slot or the real end, whichever is later. */
	uint64_t slot_end = t0 + (uint64_t)((double)total * ns_per_frame);
	uint64_t elapsed = (t_end > slot_end ? t_end : slot_end) - t0;

	bool marker_sent = false;
	if (trial >= 0) {
		struct timespec ts = {.tv_sec = marker_wait_ms / 1000,
		                      .tv_nsec = (marker_wait_ms % 1000) * 1000000};
		uint8_t m[PKTGEN_MAX];

		nanosleep(&ts, NULL);
		pktgen_frame(m, PKTGEN_MIN - PKTGEN_FCS, dmac, smac, "VNPT");
		pktgen_be(m + 34, sport, 2);
		pktgen_be(m + PKTGEN_SEQ_OFF, (uint64_t)trial, 8);
		for (int k = 0; k < 100 && !marker_sent; k++) {
			marker_sent = send(fd, m, PKTGEN_MIN - PKTGEN_FCS, 0) ==
			              (ssize_t)(PKTGEN_MIN - PKTGEN_FCS);
			if (!marker_sent)
				usleep(10000);
		}
	}
	uint64_t tx = if_stat(iface, "tx_packets") - tx0,
	         drop = if_stat(iface, "tx_dropped") - drop0;

	/* The spread: frames offered per whole 10 ms window against rate / 100. */
	uint64_t full = (elapsed / WIN_NS < nwin) ? elapsed / WIN_NS : nwin;
	if (t_end - t0 < full * WIN_NS)
		full = (t_end - t0) / WIN_NS;
	printf("{\"gen\":\"pacegen\",\"iface\":\"%s\",\"rate\":%.0f,\"size\":%u,\"batch\":%u,"
	       "\"qdisc_bypass\":%d,\"fifo\":%d,\"seconds\":%.3f,\"offered\":%llu,\"sent\":%llu,"
	       "\"refused\":%llu,\"refused_enobufs\":%llu,\"refused_eagain\":%llu,\"refused_"
	       "other\":%llu,"
	       "\"calls\":%llu,\"elapsed_ns\":%llu,\"achieved_pps\":%.1f,\"late_batches\":%llu,"
	       "\"max_lag_ns\":%llu,\"yields\":%llu,",
	       iface, rate, size, batch, bypass, fifo, seconds, (unsigned long long)total,
	       (unsigned long long)sent, (unsigned long long)refused, (unsigned long long)enobufs,
	       (unsigned long long)eagain, (unsigned long long)other, (unsigned long long)calls,
	       (unsigned long long)elapsed, (double)total * 1e9 / (double)elapsed,
	       (unsigned long long)late, (unsigned long long)max_lag, (unsigned long long)yields);
	pktgen_print_spread(win, full, rate);
	printf(",\"first_seq\":0,\"last_seq\":%llu,\"marker\":%s,\"if_tx_packets\":%llu,"
	       "\"if_tx_dropped\":%llu}\n",
	       (unsigned long long)(total - 1),
	       trial < 0     ? "null"
	       : marker_sent ? "true"
	                     : "false",
	       (unsigned long long)tx, (unsigned long long)drop);
	free(win);
	close(fd);
	return 0;
}
