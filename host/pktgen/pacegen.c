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
 * --back counts what comes back on IFACE in the same thread, no reader
 * process (the NDR search's receiver on tap: tests/tools/pktpeer.py swap
 * runs it so): a second AF_PACKET socket with a TPACKET_V3 receive ring
 * and PACKET_IGNORE_OUTGOING (our own frames are not queued to it) is read
 * while the next batch is more than RX_AHEAD_NS away and after each batch.
 * It counts the numbered frames addressed to IFACE's MAC (the guest's
 * macswap) per sequence number: frames, unique numbers, duplicates,
 * reordered, gaps, the numbers sent that never came back (lost), and
 * anything else read (other); the ring's own drops (PACKET_STATISTICS
 * tp_drops: the ring was full) are reported, so nothing is dropped
 * without a counter. After the last frame it waits until --settle seconds
 * pass with nothing back (from the last frame sent or back, at most
 * BACK_DRAIN_S), then sends the --trial marker (no --marker-wait). --lat
 * also times each number's first copy from its send stamp to the kernel's
 * receive stamp in the ring (round-trip percentiles).
 *
 * --sleep US gives the CPU away between batches: when the next batch is
 * more than US microseconds off, clock_nanosleep() until US / 2 before it
 * (then the busy wait), so on a 2-CPU host QEMU's I/O thread runs there;
 * without --batch a batch then covers 2 US (at most 32 frames).
 *
 * Prints one JSON line: what was offered, sent and refused, the elapsed
 * time from the first batch to the end of the last, the achieved rate, the
 * pacing (batches started late, the largest lag) and the spread of frames
 * per 10 ms window against RATE / 100, and the interface's counters over
 * the run; with --back the object "back". Exit 0; 1 when the run failed
 * (socket, interface); 2 on a bad argument, with the reason on stderr.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <getopt.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "pktgen.h"

#define MAX_BATCH 64
#define WIN_NS    10000000ull /* the spread's window: 10 ms */
#define SLEEP_NS  2000000     /* sleep first when the next batch is this far off ... */
#define WAKE_NS   1000000     /* ... and wake this much before it (a sleep wakes late) */
/* --back: the receive ring. 512 blocks of 128 KiB (64 MiB): about 1,000
 * 64-byte frames a block, so half a second of 1 Mpps, or 1 s of blocks the
 * kernel retires after RING_TOV_MS when few frames come back. */
#define RING_BLOCK   (1u << 17)
#define RING_BLOCKS  512u
#define RING_FRAME   2048u
#define RING_TOV_MS  2
#define RX_AHEAD_NS  3000       /* read the ring while the next batch is this far off */
#define RX_BUDGET    16u        /* frames per read while waiting (~1-2 us) */
#define BACK_DRAIN_S 30         /* the longest wait for frames back after the last sent */
#define BACK_MAX     1e9        /* --back: RATE x SECONDS at most (a bit per number) */
#define RTT_MAX      (1u << 22) /* --lat: round trips kept */

static void usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "pacegen: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr,
	        "\nusage: pacegen [--size 64..1518] [--batch 1..%d] [--qdisc-bypass] [--cpu N]\n"
	        "       [--fifo] [--sleep US] [--sport N] [--trial N [--marker-wait MS]]\n"
	        "       [--back [--settle S] [--lat]] IFACE DMAC RATE SECONDS\n"
	        "  RATE 1..100000000 frames/s, SECONDS 0.01..%d; --back: RATE x SECONDS <= %.0e\n",
	        MAX_BATCH, PKTGEN_MAX_S, BACK_MAX);
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

/* --back: what came back, per sequence number. */
struct back {
	uint64_t frames;     /* numbered frames addressed to us, duplicates included */
	uint64_t uniq, dups; /* numbers seen once / copies after the first */
	uint64_t reorder;    /* a first copy that came after a higher number */
	uint64_t gaps, next; /* numbers skipped when a higher one arrived (pktpeer.py SeqCount) */
	uint64_t out_of_run; /* numbered, but no number of this run (an earlier run's) */
	uint64_t other;      /* anything else read: the marker, ARP, another flow */
	uint64_t last_ns;    /* CLOCK_MONOTONIC when a numbered frame was last read */
	uint8_t *seen;       /* a bit per number sent, 0 .. total - 1 */
	uint64_t total;
	uint32_t *rtt; /* --lat: round trips in ns of first copies, nrtt of them */
	uint64_t nrtt, rtt_untimed;
};

static uint64_t be_get(const uint8_t *p, int bytes)
{
	uint64_t v = 0;

	for (int i = 0; i < bytes; i++)
		v = v << 8 | p[i];
	return v;
}

/* One frame read (len bytes at f, the kernel's receive stamp rx_ns on
 * CLOCK_REALTIME, `now` on CLOCK_MONOTONIC) into b. mine: IFACE's MAC. */
static void back_add(struct back *b, const uint8_t *mine, const uint8_t *f, unsigned len,
                     uint64_t rx_ns, uint64_t now)
{
	if (len < PKTGEN_TS_OFF + 6 || memcmp(f, mine, 6) || f[12] != 0x08 || f[13] != 0x00 ||
	    f[23] != 17 || memcmp(f + 42, "VNPK", 4)) {
		b->other++;
		return;
	}
	uint64_t seq = be_get(f + PKTGEN_SEQ_OFF, 8);
	b->frames++;
	b->last_ns = now;
	if (seq >= b->total) {
		b->out_of_run++;
		return;
	}
	if (b->seen[seq / 8] & (1u << (seq % 8))) {
		b->dups++;
		return;
	}
	b->seen[seq / 8] |= (uint8_t)(1u << (seq % 8));
	b->uniq++;
	if (seq >= b->next) {
		b->gaps += seq - b->next;
		b->next = seq + 1;
	} else {
		b->reorder++;
	}
	if (b->rtt) {
		uint64_t d = (rx_ns - be_get(f + PKTGEN_TS_OFF, 6)) & PKTGEN_TS_MASK;

		if (d > 0 && d < 1000000000ull && b->nrtt < RTT_MAX)
			b->rtt[b->nrtt++] = (uint32_t)d;
		else
			b->rtt_untimed++;
	}
}

/* The receive ring (TPACKET_V3): blocks the kernel fills and hands over
 * (TP_STATUS_USER), read frame by frame and handed back (TP_STATUS_KERNEL). */
struct ring {
	int fd;
	uint8_t *map;
	unsigned cur;                  /* the block read next */
	struct tpacket_block_desc *bd; /* the block being read, or NULL */
	struct tpacket3_hdr *ph;       /* its next frame */
	uint32_t left;                 /* frames left in it */
};

static void ring_open(struct ring *r, unsigned ifindex)
{
	/* Protocol 0 until bind(): nothing from other interfaces is queued. */
	int v = TPACKET_V3, one = 1;
	struct tpacket_req3 req = {.tp_block_size = RING_BLOCK,
	                           .tp_block_nr = RING_BLOCKS,
	                           .tp_frame_size = RING_FRAME,
	                           .tp_frame_nr = RING_BLOCK / RING_FRAME * RING_BLOCKS,
	                           .tp_retire_blk_tov = RING_TOV_MS};

	memset(r, 0, sizeof *r);
	r->fd = socket(AF_PACKET, SOCK_RAW, 0);
	if (r->fd < 0)
		fail("socket(AF_PACKET) for --back");
	if (setsockopt(r->fd, SOL_PACKET, PACKET_VERSION, &v, sizeof v))
		fail("PACKET_VERSION TPACKET_V3");
	/* Our own frames would fill the ring and count as its drops. */
	if (setsockopt(r->fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one))
		fail("PACKET_IGNORE_OUTGOING");
	if (setsockopt(r->fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof req))
		fail("PACKET_RX_RING");
	r->map = mmap(NULL, (size_t)RING_BLOCK * RING_BLOCKS, PROT_READ | PROT_WRITE, MAP_SHARED,
	              r->fd, 0);
	if (r->map == MAP_FAILED)
		fail("mmap of the receive ring");
	struct sockaddr_ll ll = {
	    .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL), .sll_ifindex = (int)ifindex};
	if (bind(r->fd, (struct sockaddr *)&ll, sizeof ll))
		fail("bind of the receive socket");
}

/* The ring's drops since the last call (reading resets them). */
static struct tpacket_stats_v3 ring_stats(const struct ring *r)
{
	struct tpacket_stats_v3 st = {0};
	socklen_t len = sizeof st;

	if (getsockopt(r->fd, SOL_PACKET, PACKET_STATISTICS, &st, &len))
		fail("PACKET_STATISTICS");
	return st;
}

/* Read up to budget frames into b; how many were read. */
static unsigned ring_read(struct ring *r, struct back *b, const uint8_t *mine, unsigned budget)
{
	unsigned n = 0;

	while (n < budget) {
		if (!r->bd) {
			struct tpacket_block_desc *bd =
			    (void *)(r->map + (size_t)r->cur * RING_BLOCK);
			/* Acquire: the block's frames are the kernel's until it says USER. */
			if (!(__atomic_load_n(&bd->hdr.bh1.block_status, __ATOMIC_ACQUIRE) &
			      TP_STATUS_USER))
				break;
			r->bd = bd;
			r->left = bd->hdr.bh1.num_pkts;
			r->ph = (void *)((uint8_t *)bd + bd->hdr.bh1.offset_to_first_pkt);
		}
		if (r->left) {
			struct tpacket3_hdr *ph = r->ph;

			back_add(b, mine, (uint8_t *)ph + ph->tp_mac, ph->tp_snaplen,
			         (uint64_t)ph->tp_sec * 1000000000ull + ph->tp_nsec,
			         now_ns(CLOCK_MONOTONIC));
			r->ph = (void *)((uint8_t *)ph + ph->tp_next_offset);
			r->left--;
			n++;
			continue;
		}
		/* Release: every read of the block done before the kernel refills it. */
		__atomic_store_n(&r->bd->hdr.bh1.block_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
		r->bd = NULL;
		r->cur = (r->cur + 1) % RING_BLOCKS;
	}
	return n;
}

/* ,"back":{...}: b's counts (pktpeer.py swap's keys, and the rest), sent:
 * the frames the kernel took (a refused number cannot come back). */
static void print_back(struct back *b, uint64_t sent, struct tpacket_stats_v3 st, bool lat)
{
	printf(",\"back\":{\"frames\":%llu,\"unique\":%llu,\"dups\":%llu,\"lost\":%llu,"
	       "\"seq_gaps\":%llu,\"seq_reorder\":%llu,\"last_seq\":%lld,\"out_of_run\":%llu,"
	       "\"other\":%llu,\"sock_drops\":%u,\"ring_packets\":%u,\"ring_freezes\":%u",
	       (unsigned long long)b->frames, (unsigned long long)b->uniq,
	       (unsigned long long)b->dups,
	       (unsigned long long)(sent > b->uniq ? sent - b->uniq : 0),
	       (unsigned long long)b->gaps, (unsigned long long)b->reorder, (long long)b->next - 1,
	       (unsigned long long)b->out_of_run, (unsigned long long)b->other, st.tp_drops,
	       st.tp_packets, st.tp_freeze_q_cnt);
	if (lat) {
		pktgen_print_rtt(b->rtt, b->nrtt);
		printf(",\"rtt_untimed\":%llu", (unsigned long long)b->rtt_untimed);
	}
	printf("}");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"size", required_argument, 0, 's'},  {"batch", required_argument, 0, 'b'},
	    {"trial", required_argument, 0, 't'}, {"marker-wait", required_argument, 0, 'w'},
	    {"cpu", required_argument, 0, 'c'},   {"qdisc-bypass", no_argument, 0, 'q'},
	    {"fifo", no_argument, 0, 'f'},        {"sport", required_argument, 0, 'p'},
	    {"back", no_argument, 0, 'B'},        {"settle", required_argument, 0, 'S'},
	    {"lat", no_argument, 0, 'L'},         {"sleep", required_argument, 0, 'z'},
	    {"help", no_argument, 0, 'h'},        {0, 0, 0, 0},
	};
	unsigned size = 64, batch = 0, sport = 40000;
	long long trial = -1, marker_wait_ms = -1, cpu = -1;
	bool bypass = false, fifo = false, back = false, lat = false;
	double settle = -1, sleep_us = 0;
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
		case 'B':
			back = true;
			break;
		case 'S':
			settle = pktgen_num(optarg, "--settle", 0, BACK_DRAIN_S);
			break;
		case 'L':
			lat = true;
			break;
		case 'z':
			sleep_us = pktgen_num(optarg, "--sleep", 10, 1000000);
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
	if (!back && (settle >= 0 || lat))
		usage_error("--settle and --lat count what comes back: only with --back");
	if (back && marker_wait_ms >= 0)
		usage_error("--back sends the marker after --settle: no --marker-wait");
	if (back && rate * seconds > BACK_MAX)
		usage_error(
		    "--back: RATE x SECONDS is %.0f frames, at most %.0e (a bit per number)",
		    rate * seconds, BACK_MAX);
	if (marker_wait_ms < 0)
		marker_wait_ms = 100;
	if (settle < 0)
		settle = 1;
	/* One batch per >= 16 us: 1 frame per call up to 62.5 kpps, 16 at 1
	 * Mpps; with --sleep one per >= 2 US, so most gaps are slept in. */
	if (!batch && sleep_us) {
		double b = rate * 2 * sleep_us / 1e6;
		batch = b < 1 ? 1 : b > 32 ? 32 : (unsigned)b;
	}
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
	struct ring ring = {.fd = -1};
	struct back b = {.total = total};
	if (back) {
		ring_open(&ring, ifindex);
		b.seen = calloc(total / 8 + 1, 1);
		b.rtt = lat ? malloc(RTT_MAX * sizeof *b.rtt) : NULL;
		if (!b.seen || (lat && !b.rtt))
			fail("calloc");
		ring_stats(&ring); /* reading resets: count from here */
	}
	uint64_t sleep_ns = (uint64_t)(sleep_us * 1000);
	uint64_t tx0 = if_stat(iface, "tx_packets"), drop0 = if_stat(iface, "tx_dropped");
	uint64_t sent = 0, refused = 0, enobufs = 0, eagain = 0, other = 0, calls = 0;
	uint64_t late = 0, max_lag = 0, seq = 0, yields = 0, sleeps = 0;
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
		if (due > t + SLEEP_NS || (sleep_ns && due > t + sleep_ns)) {
			/* A sleep wakes late: WAKE_NS before a far batch, --sleep's
			 * half before a near one. */
			uint64_t wake = due - (due > t + SLEEP_NS ? WAKE_NS : sleep_ns / 2);
			struct timespec ts = {.tv_sec = (time_t)(wake / 1000000000ull),
			                      .tv_nsec = (long)(wake % 1000000000ull)};
			clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
			sleeps++;
		}
		/* The busy wait that holds the rate (a sleep wakes 50+ us late);
		 * with --back it reads what came back while the batch is far off. */
		while ((t = now_ns(CLOCK_MONOTONIC)) < due)
			if (back && due - t > RX_AHEAD_NS)
				ring_read(&ring, &b, smac, RX_BUDGET);
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
		/* As many back as went out, so the reader keeps up with the
		 * loop even when no batch leaves time to wait. */
		if (back)
			ring_read(&ring, &b, smac, n);
	}
	uint64_t t_end = now_ns(CLOCK_MONOTONIC);
	/* The last batch was due at (total - n) / rate: the run lasts total /
	 * rate when every batch left on time, so elapsed is t0 to the end of the
	 * last batch's slot or the real end, whichever is later. */
	uint64_t slot_end = t0 + (uint64_t)((double)total * ns_per_frame);
	uint64_t elapsed = (t_end > slot_end ? t_end : slot_end) - t0;

	double marker_s = 0;
	if (back) {
		/* --settle seconds with nothing back, from the last frame sent or
		 * back, whichever is later (at least two of the ring's block
		 * timeouts: a block the kernel has not retired is unseen). */
		uint64_t quiet = (uint64_t)(settle * 1e9),
		         end = t_end + BACK_DRAIN_S * 1000000000ull;
		struct pollfd pf = {.fd = ring.fd, .events = POLLIN};

		if (quiet < 2 * RING_TOV_MS * 1000000ull)
			quiet = 2 * RING_TOV_MS * 1000000ull;
		for (;;) {
			uint64_t now = now_ns(CLOCK_MONOTONIC);
			if (now >= end || now - (b.last_ns > t_end ? b.last_ns : t_end) >= quiet)
				break;
			if (!ring_read(&ring, &b, smac, 256))
				poll(&pf, 1, 1);
		}
		marker_s = (double)(now_ns(CLOCK_MONOTONIC) - t_end) / 1e9;
	}
	bool marker_sent = false;
	if (trial >= 0) {
		struct timespec ts = {.tv_sec = back ? 0 : marker_wait_ms / 1000,
		                      .tv_nsec = back ? 0 : (marker_wait_ms % 1000) * 1000000};
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
	       "\"if_tx_dropped\":%llu,\"sleep_us\":%.0f,\"sleeps\":%llu",
	       (unsigned long long)(total - 1),
	       trial < 0     ? "null"
	       : marker_sent ? "true"
	                     : "false",
	       (unsigned long long)tx, (unsigned long long)drop, sleep_us,
	       (unsigned long long)sleeps);
	if (back) {
		printf(",\"settle\":%.3f,\"marker_s\":%.3f", settle, marker_s);
		print_back(&b, sent, ring_stats(&ring), lat);
		munmap(ring.map, (size_t)RING_BLOCK * RING_BLOCKS);
		close(ring.fd);
		free(b.seen);
		free(b.rtt);
	}
	printf("}\n");
	free(win);
	close(fd);
	return 0;
}
