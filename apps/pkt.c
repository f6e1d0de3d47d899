/*
 * pkt.c: app=pkt, the packet-level benchmark. Frames straight on the
 * driver (no IP stack), one burst loop: poll, up to pkt.burst frames, end
 * of burst, idle policy. Frame layout in pkt.h.
 *
 *	txonly   generate UDP/IPv4 frames, full speed or pkt.rate per second
 *	rxonly   receive and release, counting frames, bytes, sequence gaps
 *	macswap  send every frame back, Ethernet addresses swapped (testpmd)
 *	reflect  send every UDP/IPv4 frame back with Ethernet, IPv4 and UDP
 *	         source and destination swapped (a host socket receives it)
 *	rr       one generated frame at a time: send it, wait until a host
 *	         reflector (testpmd macswap, an XDP_TX program) returns it, and
 *	         time the round trip on this CPU's TSC (clock_ns()); RESULT
 *	         pkt_rr with transactions, tps and lat_* (and a HIST line), a
 *	         frame not back within PKT_RR_LOST_NS counted as lost
 *
 * The forwarding modes transmit the received buffer itself
 * (vnet_tx_forward(): zero copy, the buffer goes back to RX when the TX
 * reclaim takes it). A full TX ring keeps the frames already received (one
 * burst at most) for the next pass, so the guest drops nothing; what it
 * does not forward is counted (rx_other: not UDP/IPv4 for reflect, a
 * large-receive frame, anything txonly receives; fwd_unsent: still held
 * when the run ended).
 *
 * Keys: pkt.mode=txonly|rxonly|macswap|reflect (txonly),
 *       pkt.size=64..1518|imix (64; RFC 2544 frame sizes, FCS included: pkt.h),
 *       pkt.rate=PPS (0: full speed), pkt.flows=N source ports from 1024 (1),
 *       pkt.seconds=S longest run (10), pkt.burst=1..256 (32),
 *       pkt.count=N txonly: frames to send, rr: round trips, then end (0:
 *       for pkt.seconds),
 *       pkt.idle=S receive modes: end S seconds after the last frame once
 *       frames came (0: run pkt.seconds), pkt.src=, pkt.dst= generated
 *       frames' IPv4 addresses (10.77.0.2, 10.77.0.1), pkt.dmac= (broadcast),
 *       pkt.port= UDP destination port (9), pkt.warmup=S rr: round trips
 *       for S seconds first, not measured (0), backend=LABEL,
 *       pkt.rss_cost=N mq>1 with RSS: time N hashes of the RSS check by
 *       look-up and bit by bit before the run (PKT_RSS_COST line),
 *       pkt.hold=MS rxonly, a test's fault: from the first numbered frame
 *       keep every received buffer for MS milliseconds, then release them
 *       all (PKT_HOLD line): the device runs out of RX room on purpose and
 *       must be woken by the refill (tests/cases/test_pkt.py).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "apps/apps.h"
#include "apps/pkt.h"
#include "apps/lib/result.h"
#include "drivers/virtio/vnet.h"
#include "kernel/kernel.h"
#include "kernel/prof.h"
#include "net/net.h"

#define PKT_BURST_MAX  256
#define PKT_SLOT_SIZE  2048
#define PKT_HEADROOM   64 /* >= vnet_tx_headroom */
#define PKT_DRAIN_NS   100000000ull
#define PKT_JOIN_NS    5000000000ull /* an AP's loop ends at most this long after pkt.seconds */
#define PKT_RR_LOST_NS 100000000ull  /* rr: a frame not back by then is lost; the next one goes */

static const char *const pkt_modes[] = {"txonly", "rxonly", "macswap", "reflect", "rr", NULL};

/* The run's parameters: set by pkt_configure(), read-only from then on
 * (every queue's loop reads them, on its own CPU). */
static struct {
	enum pkt_mode mode;
	const char *size_str;
	uint32_t size; /* 0: imix */
	uint64_t rate, count, seconds_ns, idle_ns, warmup_ns, hold_ns, rss_cost;
	unsigned flows, burst, mq;
	struct pkt_addrs addrs;
} pk;

/* One queue pair's burst loop and everything it counts: shared nothing,
 * so with mq=N each runs on its own vCPU (kernel/smp.c). */
struct pkt_q {
	struct vnet *vn;
	unsigned qp;

	/* txonly: frame slots the device may still read (zero copy) */
	uint8_t *slots;
	uint16_t *free;
	unsigned nfree, nslots;

	/* forwarding: received, not yet accepted by the TX ring */
	struct vnet_rx pend[PKT_BURST_MAX];
	unsigned npend;

	uint64_t frames, bytes; /* sent (txonly), received (rxonly), forwarded */
	uint64_t rx_other, fwd_unsent, tx_full, markers;
	uint64_t rss_misses; /* mq=N with RSS: frames on a queue RSS did not name */
	struct pkt_seq seq;
	struct { /* the counts at the last trial marker (PKT_TRIAL lines are deltas) */
		uint64_t seq_frames, seq_gaps, seq_reorder, frames, rx_other;
	} mark;
	uint64_t t_start, t_first, t_last; /* clock_ns(); t_first 0: no frame yet */
	/* Stalls: passes whose work (vnet_poll() and the mode's pass, not
	 * vnet_idle()) took over PKT_STALL_NS (an exit, the host taking the
	 * vCPU's CPU), since the last trial marker: how many, the longest,
	 * their sum. */
	uint64_t t_pass, stalls, stall_max_ns, stalled_ns;

	/* pkt.hold: the buffers kept back (at most the RX ring's), since when */
	void **held; /* vnet_rx_ring_size() entries */
	unsigned nheld, nheld_max, held_frames;
	uint64_t t_hold; /* 0: not started */
	bool hold_over;
	/* rr: the frame out (its number, when it left; t_sent 0: none) */
	uint64_t rr_seq, rr_sent, rr_lost, rr_late;
	uint64_t rr_warm_end; /* clock_ns() the warm-up ends at; 0: measuring */
	struct hist *rr_hist;
	struct result_snap a, b; /* the driver counters around the run */
	int drain_rc;            /* vnet_drain(): -1 timed out */
};

static struct pkt_q pq[VNET_MQ_MAX];

/* A pass longer than this is a stall on PKT_TRIAL's line: a polling pass
 * with nothing to do takes well under a microsecond natively. */
#define PKT_STALL_NS 20000ull

static void pkt_parse_ip(const char *key, const char *def, uint8_t out[4])
{
	const char *s = cmdline_str(key, def);
	ip4_addr_t a;

	if (!ip4addr_aton(s, &a))
		kernel_usage_error("cmdline", "bad value '%s' for key '%s' (not an IPv4 address)",
		                   s, key);
	memcpy(out, &a.addr, 4); /* network order already */
}

static int pkt_hex(char c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
	                              : -1;
}

static void pkt_parse_mac(const char *key, const char *def, uint8_t out[6])
{
	const char *s = cmdline_str(key, def), *p = s;

	for (int i = 0; i < 6; i++, p += 3) {
		int hi = pkt_hex(p[0]), lo = hi < 0 ? -1 : pkt_hex(p[1]);

		if (lo < 0 || p[2] != (i < 5 ? ':' : '\0'))
			kernel_usage_error(
			    "cmdline", "bad value '%s' for key '%s' (expected xx:xx:xx:xx:xx:xx)",
			    s, key);
		out[i] = (uint8_t)(hi << 4 | lo);
	}
}

static uint32_t pkt_parse_size(void)
{
	const char *s = pk.size_str = cmdline_str("pkt.size", "64");
	char *end;
	unsigned long v;

	if (!strcmp(s, "imix"))
		return 0;
	v = strtoul(s, &end, 10);
	if (*s < '0' || *s > '9' || *end || v < PKT_MIN || v > PKT_MAX)
		kernel_usage_error("cmdline",
		                   "bad value '%s' for key 'pkt.size' (expected %u..%u or imix)", s,
		                   PKT_MIN, PKT_MAX);
	return (uint32_t)v;
}

void pkt_configure(void)
{
	net_configure_link();
	pk.mode = (enum pkt_mode)cmdline_choice("pkt.mode", pkt_modes, PKT_TXONLY);
	pk.size = pkt_parse_size();
	pk.rate = cmdline_u64("pkt.rate", 0, 0, 1000000000);
	pk.flows = (unsigned)cmdline_u64("pkt.flows", 1, 1, 65536 - PKT_SPORT_BASE);
	pk.seconds_ns = cmdline_u64("pkt.seconds", 10, 1, 86400) * 1000000000ull;
	pk.burst = (unsigned)cmdline_u64("pkt.burst", 32, 1, PKT_BURST_MAX);
	pk.count = cmdline_u64("pkt.count", 0, 0, (uint64_t)1 << 48);
	pk.idle_ns = cmdline_u64("pkt.idle", 0, 0, 86400) * 1000000000ull;
	pk.hold_ns = cmdline_u64("pkt.hold", 0, 0, 60000) * 1000000ull;
	pk.rss_cost = cmdline_u64("pkt.rss_cost", 0, 0, 10000000);
	pk.warmup_ns = cmdline_u64("pkt.warmup", 0, 0, 3600) * 1000000000ull;
	pkt_parse_ip("pkt.src", "10.77.0.2", pk.addrs.src);
	pkt_parse_ip("pkt.dst", "10.77.0.1", pk.addrs.dst);
	pkt_parse_mac("pkt.dmac", "ff:ff:ff:ff:ff:ff", pk.addrs.dmac);
	pk.addrs.dport = (uint16_t)cmdline_u64("pkt.port", 9, 1, 65535);
	pk.mq = (unsigned)cmdline_u64("mq", 1, 1, VNET_MQ_MAX);
	if (pk.mq > smp_requested())
		kernel_usage_error(
		    "cmdline",
		    "key 'mq': mq=%u needs smp=%u or more (one vCPU per queue pair), "
		    "smp is %u",
		    pk.mq, pk.mq, smp_requested());
	if (pk.mode != PKT_TXONLY && pk.mode != PKT_RR && cmdline_str("pkt.count", NULL))
		kernel_usage_error("cmdline", "key 'pkt.count' applies to pkt.mode=txonly|rr only");
	if (pk.mode != PKT_TXONLY && cmdline_str("pkt.rate", NULL))
		kernel_usage_error("cmdline", "key 'pkt.rate' applies to pkt.mode=txonly only");
	if (pk.mode != PKT_RXONLY && pk.hold_ns)
		kernel_usage_error("cmdline", "key 'pkt.hold' applies to pkt.mode=rxonly only");
	if ((pk.mode == PKT_TXONLY || pk.mode == PKT_RR) && cmdline_str("pkt.idle", NULL))
		kernel_usage_error("cmdline", "key 'pkt.idle' applies to the receive modes only");
	if (pk.mode != PKT_RR && cmdline_str("pkt.warmup", NULL))
		kernel_usage_error("cmdline", "key 'pkt.warmup' applies to pkt.mode=rr only");
	if (pk.mode == PKT_RR && pk.mq > 1)
		kernel_usage_error("cmdline", "key 'mq': pkt.mode=rr runs on one queue pair");
}

static void pkt_failed(struct pkt_q *q)
{
	kernel_error("virtio-net", "%s (backend %s)", vnet_error(q->vn), net_backend());
}

static uint8_t *pkt_slot(struct pkt_q *q, unsigned i)
{
	return q->slots + (size_t)i * PKT_SLOT_SIZE + PKT_HEADROOM;
}

static void pkt_tx_done(void *arg, void *cookie)
{
	struct pkt_q *q = arg;

	q->free[q->nfree++] = (uint16_t)(uintptr_t)cookie;
}

/* Frames due now: a burst at full speed, else what the rate allows since
 * the start (a generator that fell behind catches up a burst at a time). */
static uint64_t pkt_tx_quota(struct pkt_q *q, uint64_t now)
{
	uint64_t n = pk.burst;

	if (pk.rate) {
		uint64_t due =
		    (uint64_t)((unsigned __int128)(now - q->t_start) * pk.rate / 1000000000ull);

		n = due > q->frames ? due - q->frames : 0;
		n = n < pk.burst ? n : pk.burst;
	}
	if (pk.count && pk.count - q->frames < n)
		n = pk.count - q->frames;
	return n;
}

/* txonly receives too: whatever arrives (a host's ARP, a switch's
 * chatter) is counted and released, or it would sit on the used ring and
 * end every halt before it began. */
static void pkt_tx_drain_rx(struct pkt_q *q)
{
	struct vnet_rx *r = &q->pend[0];
	int rc = 1;

	for (unsigned n = 0; n < pk.burst && (rc = vnet_rx(q->vn, r)) > 0; n++) {
		q->rx_other++;
		vnet_rx_release_frame(q->vn, r);
	}
	if (rc < 0)
		pkt_failed(q);
}

static void pkt_tx_pass(struct pkt_q *q, uint64_t now)
{
	uint64_t n = pkt_tx_quota(q, now);

	pkt_tx_drain_rx(q);
	prof_enter(PROF_APP);
	for (uint64_t k = 0; k < n && q->nfree; k++) {
		uint16_t s = q->free[--q->nfree];
		uint8_t *f = pkt_slot(q, s);
		uint32_t size = pk.size ? pk.size : pkt_imix[q->frames % PKT_IMIX_N];
		struct vnet_seg seg = {f, size - PKT_FCS};
		int rc;

		pkt_frame_build(f, size - PKT_FCS, &pk.addrs,
		                (uint16_t)(PKT_SPORT_BASE + q->frames % pk.flows), q->frames);
		prof_enter(PROF_ENQUEUE);
		rc = vnet_tx(q->vn, &seg, 1, NULL, (void *)(uintptr_t)s);
		prof_exit();
		if (rc < 0) {
			q->free[q->nfree++] = s; /* not accepted: still ours */
			if (rc != -VNET_EAGAIN)
				pkt_failed(q);
			q->tx_full++; /* back-pressure: the next pass retries */
			break;
		}
		q->frames++;
		q->bytes += size;
		q->t_last = now;
	}
	prof_exit();
}

/* rr: take what came back (the frame out ends its round trip; a late one,
 * already counted lost, or anything else is counted and released), then
 * send the next frame when none is out, kicked at once (vnet_tx_end_burst:
 * the kick policy decides, kick=timer holds it as it would any frame). */
static void pkt_rr_pass(struct pkt_q *q, uint64_t now)
{
	struct vnet_rx *r = &q->pend[0];
	int rc;

	while ((rc = vnet_rx(q->vn, r)) > 0) {
		uint64_t t = clock_ns(), seq;
		bool numbered = r->nbufs == 1 && pkt_seq_of(r->buf[0].data, r->buf[0].len, &seq);

		if (numbered && q->rr_sent && seq == q->rr_seq) {
			hist_add(q->rr_hist, t - q->rr_sent);
			q->frames++;
			q->bytes += r->len + PKT_FCS;
			q->t_last = t;
			q->rr_sent = 0;
			q->rr_seq++;
		} else if (numbered) {
			q->rr_late++;
		} else {
			q->rx_other++;
		}
		vnet_rx_release_frame(q->vn, r);
	}
	if (rc < 0)
		pkt_failed(q);
	if (q->rr_warm_end && now >= q->rr_warm_end) {
		/* The warm-up is over: the run starts now, from nothing. */
		q->rr_warm_end = 0;
		hist_reset(q->rr_hist);
		q->frames = q->bytes = q->rr_lost = q->rr_late = q->rx_other = q->tx_full = 0;
		result_snap_of(&q->a, q->vn);
		q->t_start = q->t_first = q->t_last = now; /* not a.ns: later than now */
	}
	if (q->rr_sent && now - q->rr_sent >= PKT_RR_LOST_NS) {
		q->rr_lost++;
		q->rr_sent = 0;
		q->rr_seq++;
	}
	if (!q->rr_sent && q->nfree && !(pk.count && q->frames + q->rr_lost >= pk.count)) {
		uint16_t s = q->free[--q->nfree];
		uint8_t *f = pkt_slot(q, s);
		uint32_t size = pk.size ? pk.size : pkt_imix[q->rr_seq % PKT_IMIX_N];
		struct vnet_seg seg = {f, size - PKT_FCS};

		pkt_frame_build(f, size - PKT_FCS, &pk.addrs,
		                (uint16_t)(PKT_SPORT_BASE + q->rr_seq % pk.flows), q->rr_seq);
		q->rr_sent = clock_ns();
		rc = vnet_tx(q->vn, &seg, 1, NULL, (void *)(uintptr_t)s);
		if (rc < 0) {
			q->free[q->nfree++] = s;
			if (rc != -VNET_EAGAIN)
				pkt_failed(q);
			q->tx_full++;
			q->rr_sent = 0;
			return;
		}
		vnet_tx_end_burst(q->vn);
	}
}

/* A trial marker: what this trial's frames did in the guest, for the
 * search to compare with what the peer saw (loss counted at both ends).
 * Frames held for a full ring are not forwarded yet: pend says how many. */
static void pkt_trial_line(struct pkt_q *q, uint64_t trial)
{
	printf("PKT_TRIAL {\"trial\":%lu,\"seq_frames\":%lu,\"seq_gaps\":%lu,\"seq_reorder\":%lu,"
	       "\"frames\":%lu,\"rx_other\":%lu,\"pend\":%u,\"stalls\":%lu,\"stall_max_us\":%lu,"
	       "\"stalled_us\":%lu}\n",
	       trial, q->seq.frames - q->mark.seq_frames, q->seq.gaps - q->mark.seq_gaps,
	       q->seq.reorder - q->mark.seq_reorder, q->frames - q->mark.frames,
	       q->rx_other - q->mark.rx_other, q->npend, q->stalls, q->stall_max_ns / 1000,
	       q->stalled_ns / 1000);
	q->stalls = q->stall_max_ns = q->stalled_ns = 0;
	/* The line's console bytes (exits) are no stall of the next trial. */
	q->t_pass = clock_ns();
	q->mark.seq_frames = q->seq.frames;
	q->mark.seq_gaps = q->seq.gaps;
	q->mark.seq_reorder = q->seq.reorder;
	q->mark.frames = q->frames;
	q->mark.rx_other = q->rx_other;
	q->seq.next = 0; /* the next trial numbers from 0 again */
	q->markers++;
}

/* pkt.hold: keep the frame's buffers. Every buffer is one the RX ring
 * had, so the ring's size bounds them. */
static void pkt_hold(struct pkt_q *q, const struct vnet_rx *r, uint64_t now)
{
	if (!q->t_hold)
		q->t_hold = now;
	for (unsigned k = 0; k < r->nbufs && q->nheld < q->nheld_max; k++)
		q->held[q->nheld++] = r->buf[k].handle;
	q->held_frames++;
}

/* The hold is over: everything back to the driver at once (its refill
 * must wake a device that found the ring empty), one line for the test. */
static void pkt_hold_end(struct pkt_q *q, uint64_t now)
{
	for (unsigned i = 0; i < q->nheld; i++)
		vnet_rx_release(q->vn, q->held[i]);
	printf("PKT_HOLD {\"frames\":%u,\"bufs\":%u,\"held_us\":%lu}\n", q->held_frames, q->nheld,
	       (unsigned long)((now - q->t_hold) / 1000));
	q->nheld = 0;
	q->hold_over = true;
}

/* A received frame: counted, edited for its mode, or released. True when
 * it is to be forwarded. */
static bool pkt_rx_one(struct pkt_q *q, struct vnet_rx *r, uint64_t now)
{
	uint8_t *f = r->buf[0].data;
	uint64_t trial;

	if (pkt_is_marker(f, r->buf[0].len, &trial)) {
		pkt_trial_line(q, trial);
		vnet_rx_release_frame(q->vn, r);
		return false;
	}
	if (pk.mq > 1) { /* the device put a TCP/UDP frame where RSS says? */
		int want = vnet_rss_frame_queue(f, r->buf[0].len);

		if (want >= 0 && (unsigned)want != q->qp)
			q->rss_misses++;
	}
	if (pk.mode == PKT_RXONLY && !pkt_udp4_ihl(f, r->buf[0].len)) {
		/* Not test traffic (every generator sends UDP/IPv4): a host's
		 * IGMP report or ARP is counted apart and starts no clock, so
		 * the idle bound runs from the generator's frames only. */
		q->rx_other++;
		vnet_rx_release_frame(q->vn, r);
		return false;
	}
	if (!q->t_first)
		q->t_first = now;
	q->t_last = now;
	pkt_seq_count(&q->seq, f, r->buf[0].len);
	if (pk.mode == PKT_RXONLY) {
		q->frames++;
		q->bytes += r->len + PKT_FCS;
		if (pk.hold_ns && !q->hold_over)
			pkt_hold(q, r, now);
		else
			vnet_rx_release_frame(q->vn, r);
		return false;
	}
	if (r->nbufs != 1 || (r->flags & VNET_RX_F_GSO) ||
	    (pk.mode == PKT_REFLECT && !pkt_reflect(f, r->len))) {
		q->rx_other++; /* not forwardable here: counted, released */
		vnet_rx_release_frame(q->vn, r);
		return false;
	}
	if (pk.mode == PKT_MACSWAP)
		pkt_macswap(f);
	return true;
}

/* Forward what is held, oldest first; what the ring refuses waits. */
static void pkt_forward_held(struct pkt_q *q)
{
	unsigned sent = 0;

	while (sent < q->npend) {
		int rc;

		prof_enter(PROF_ENQUEUE);
		rc = vnet_tx_forward(q->vn, &q->pend[sent]);
		prof_exit();
		if (rc == -VNET_EAGAIN) {
			q->tx_full++;
			break;
		}
		if (rc == -VNET_EDEVICE)
			pkt_failed(q);
		if (rc < 0) {
			q->rx_other++; /* refused (e.g. an offload the device did not take) */
			vnet_rx_release_frame(q->vn, &q->pend[sent]);
		} else {
			q->frames++;
			q->bytes += q->pend[sent].len + PKT_FCS;
		}
		sent++;
	}
	memmove(q->pend, q->pend + sent, (q->npend - sent) * sizeof(q->pend[0]));
	q->npend -= sent;
}

static void pkt_rx_pass(struct pkt_q *q, uint64_t now)
{
	unsigned n = 0;
	int rc = 1;

	if (q->t_hold && !q->hold_over && now - q->t_hold >= pk.hold_ns)
		pkt_hold_end(q, now);
	if (q->npend)
		pkt_forward_held(q); /* a full ring last pass: these go first */
	while (n < pk.burst && q->npend < pk.burst) {
		struct vnet_rx *r = &q->pend[q->npend];

		prof_enter(PROF_RX);
		rc = vnet_rx(q->vn, r);
		prof_exit();
		if (rc <= 0)
			break;
		n++;
		prof_enter(PROF_APP);
		if (pkt_rx_one(q, r, now))
			q->npend++;
		prof_exit();
	}
	if (rc < 0)
		pkt_failed(q);
	if (q->npend)
		pkt_forward_held(q);
}

static bool pkt_done(struct pkt_q *q, uint64_t now)
{
	if (now - q->t_start >= pk.seconds_ns)
		return true;
	if (pk.mode == PKT_TXONLY)
		return pk.count && q->frames == pk.count;
	if (pk.mode == PKT_RR)
		return pk.count && q->frames + q->rr_lost >= pk.count;
	return pk.idle_ns && q->t_first && now - q->t_last >= pk.idle_ns;
}

/* The halt policies' deadline: the next frame a rate allows, the idle
 * bound, or the end of the run. */
static uint64_t pkt_deadline(void *arg)
{
	const struct pkt_q *q = arg;
	uint64_t end = q->t_start + pk.seconds_ns;

	if (pk.mode == PKT_TXONLY && pk.rate) {
		uint64_t next = q->t_start + (uint64_t)((unsigned __int128)(q->frames + 1) *
		                                        1000000000ull / pk.rate);
		end = next < end ? next : end;
	} else if (pk.mode == PKT_RR && q->rr_sent && q->rr_sent + PKT_RR_LOST_NS < end) {
		end = q->rr_sent + PKT_RR_LOST_NS;
	} else if (pk.mode != PKT_TXONLY && pk.idle_ns && q->t_first &&
	           q->t_last + pk.idle_ns < end) {
		end = q->t_last + pk.idle_ns;
	}
	if (q->t_hold && !q->hold_over && q->t_hold + pk.hold_ns < end)
		end = q->t_hold + pk.hold_ns; /* no RX interrupt ends a hold: the ring is empty */
	return end;
}

static void pkt_setup_tx(struct pkt_q *q)
{
	/* More slots than the TX ring has descriptors: the ring is full
	 * (back-pressure, a reclaim) before the slots run out. */
	q->nslots = vnet_tx_ring_size(q->vn) + pk.burst;
	q->slots = pmm_alloc((size_t)q->nslots * PKT_SLOT_SIZE, 64);
	q->free = pmm_alloc(q->nslots * sizeof(q->free[0]), 8);
	memset(q->slots, 0, (size_t)q->nslots * PKT_SLOT_SIZE);
	for (unsigned i = 0; i < q->nslots; i++)
		q->free[i] = (uint16_t)(q->nslots - 1 - i);
	q->nfree = q->nslots;
	memcpy(pk.addrs.smac, vnet_mac(q->vn), 6);
	vnet_set_tx_done(q->vn, pkt_tx_done, q);
}

static void pkt_result(const struct pkt_q *q, const struct result_snap *a,
                       const struct result_snap *b, int queue)
{
	uint64_t ns = q->t_last > q->t_first ? q->t_last - q->t_first : 0;
	uint64_t kicks = (b->tx.kicks - a->tx.kicks) + (b->rx.kicks - a->rx.kicks);
	uint64_t irqs = (b->tx.irqs - a->tx.irqs) + (b->rx.irqs - a->rx.irqs);
	char test[16];

	snprintf(test, sizeof(test), "pkt_%s", pkt_modes[pk.mode]);
	result_begin(test, pk.mode == PKT_TXONLY || pk.mode == PKT_RR ? "client" : "server");
	if (queue >= 0)
		result_u64("queue", (uint64_t)queue); /* mq=N: one line per pair */
	else if (pk.mq > 1)
		result_u64("queues", pk.mq); /* ... and the total */
	result_str("mode", pkt_modes[pk.mode]);
	result_str("size", pk.size_str);
	result_u64("rate", pk.rate);
	result_u64("flows", pk.flows);
	result_u64("burst", pk.burst);
	result_u64("frames", q->frames);
	result_u64("bytes", q->bytes);
	result_ratio("pps", q->frames * 1000000000ull, ns);
	result_rates(q->bytes, q->frames, ns);
	if (pk.mode == PKT_RR) {
		result_u64("transactions", q->frames);
		result_u64("lost", q->rr_lost);
		result_u64("late", q->rr_late);
		result_latency(q->rr_hist);
	}
	result_ratio("frames_per_kick", q->frames, kicks);
	result_ratio("frames_per_reclaim", q->frames, b->tx.reclaim_calls - a->tx.reclaim_calls);
	result_ratio("frames_per_irq", q->frames, irqs);
	result_u64("seq_frames", q->seq.frames);
	result_u64("seq_gaps", q->seq.gaps);
	result_u64("seq_reorder", q->seq.reorder);
	result_u64("rx_other", q->rx_other);
	if (pk.mq > 1)
		result_u64("rss_misses", q->rss_misses);
	result_u64("fwd_unsent", q->fwd_unsent);
	result_u64("markers", q->markers);
	result_u64("tx_full", q->tx_full);
	result_u64("drv_rx_drops", b->rx.drops - a->rx.drops);
	if (VNETLAB_PROFILE) {
		uint64_t cycles = 0;

		for (int i = 0; i < PROF_STAGES; i++)
			cycles += b->prof.cycles[i] - a->prof.cycles[i];
		result_ratio("cycles_per_pkt", cycles, q->frames);
	}
	result_counters(a, b, q->frames);
	result_end();
}

/* The pass that ends at `end` began at q->t_pass (after the last
 * vnet_idle()). */
static void pkt_stall_check(struct pkt_q *q, uint64_t end)
{
	uint64_t gap = end - q->t_pass;

	if (gap <= PKT_STALL_NS)
		return;
	q->stalls++;
	q->stalled_ns += gap;
	if (gap > q->stall_max_ns)
		q->stall_max_ns = gap;
}

/* One queue pair's burst loop, from the first snapshot to the drain. */
static void pkt_run(struct pkt_q *q)
{
	result_snap_of(&q->a, q->vn);
	q->t_start = q->a.ns;
	if (pk.mode == PKT_TXONLY || pk.mode == PKT_RR)
		q->t_first = q->t_start;
	if (pk.mode == PKT_RR && pk.warmup_ns)
		q->rr_warm_end = q->t_start + pk.warmup_ns;
	q->t_pass = clock_ns();
	for (;;) {
		uint64_t now;
		int rc;

		prof_enter(PROF_POLL);
		rc = vnet_poll(q->vn);
		prof_exit();
		if (rc < 0)
			pkt_failed(q);
		now = clock_ns();
		if (pk.mode == PKT_TXONLY)
			pkt_tx_pass(q, now);
		else if (pk.mode == PKT_RR)
			pkt_rr_pass(q, now);
		else
			pkt_rx_pass(q, now);
		vnet_tx_end_burst(q->vn);
		pkt_stall_check(q, clock_ns());
		if (pkt_done(q, now))
			break;
		prof_enter(PROF_IDLE);
		vnet_idle(q->vn, pkt_deadline, q);
		prof_exit();
		q->t_pass = clock_ns(); /* a halt in vnet_idle() is no stall */
	}
	if (q->t_hold && !q->hold_over)
		pkt_hold_end(q, clock_ns());
	for (unsigned i = 0; i < q->npend; i++)
		vnet_rx_release_frame(q->vn, &q->pend[i]);
	q->fwd_unsent = q->npend;
	q->npend = 0;
	q->drain_rc = vnet_drain(q->vn, PKT_DRAIN_NS);
	result_snap_of(&q->b, q->vn);
	if (q->t_first)
		q->a.ns = q->t_first; /* the interval starts at the first frame */
}

static int pkt_run_ap(void *arg)
{
	pkt_run(arg);
	return 0;
}

static void pkt_drain_warning(struct pkt_q *q)
{
	if (q->drain_rc == -1) {
		printf("pkt warning: TX not drained within %llu ms\n", PKT_DRAIN_NS / 1000000);
		vnet_print_rings(q->vn);
	}
}

/* mq=N: the pairs' sums, for the total RESULT line. Every counter in
 * struct vnet_counters is a uint64_t. */
static void pkt_add_counters(struct vnet_counters *sum, const struct vnet_counters *c)
{
	uint64_t *d = (uint64_t *)sum;
	const uint64_t *x = (const uint64_t *)c;

	_Static_assert(sizeof(*c) % sizeof(uint64_t) == 0, "vnet_counters: uint64_t only");
	for (size_t i = 0; i < sizeof(*c) / sizeof(uint64_t); i++)
		d[i] += x[i];
}

static void pkt_total(void)
{
	static struct pkt_q t; /* its pend[] is too large for the stack */
	struct result_snap a = pq[0].a, b = pq[0].b;

	t.t_first = pq[0].t_first;
	for (unsigned k = 0; k < pk.mq; k++) {
		const struct pkt_q *q = &pq[k];

		t.frames += q->frames;
		t.bytes += q->bytes;
		t.rx_other += q->rx_other;
		t.rss_misses += q->rss_misses;
		t.fwd_unsent += q->fwd_unsent;
		t.tx_full += q->tx_full;
		t.markers += q->markers;
		t.seq.frames += q->seq.frames;
		t.seq.gaps += q->seq.gaps;
		t.seq.reorder += q->seq.reorder;
		if (q->t_first && (!t.t_first || q->t_first < t.t_first))
			t.t_first = q->t_first;
		if (q->t_last > t.t_last)
			t.t_last = q->t_last;
		if (k) {
			pkt_add_counters(&a.rx, &q->a.rx);
			pkt_add_counters(&a.tx, &q->a.tx);
			pkt_add_counters(&b.rx, &q->b.rx);
			pkt_add_counters(&b.tx, &q->b.tx);
			/* PROFILE=1: each pair's snapshots are its own CPU's
			 * stages (kernel/prof.c); the total is their sum. */
			for (int i = 0; i < PROF_STAGES; i++) {
				a.prof.cycles[i] += q->a.prof.cycles[i];
				a.prof.calls[i] += q->a.prof.calls[i];
				b.prof.cycles[i] += q->b.prof.cycles[i];
				b.prof.calls[i] += q->b.prof.calls[i];
			}
		}
	}
	if (t.t_first)
		a.ns = t.t_first;
	pkt_result(&t, &a, &b, -1);
}

/* pkt.rss_cost=N (mq > 1 with RSS): before the run, time N hashes of the
 * receive path's RSS check by table look-up and N bit by bit (the check
 * before issue 39), each over the same varied 12-byte inputs, on this CPU:
 * PKT_RSS_COST with ns per hash for each (tests/tools/rsscost.py). */
static void pkt_rss_cost(void)
{
	uint8_t in[VNET_RSS_INPUT_LEN] = {10, 77, 0, 1, 10, 77, 0, 2, 0x9c, 0x40, 0, 9};
	uint32_t sink = 0, differ = 0;
	uint64_t t0, t1, t2;

	if (!pk.rss_cost || !vnet_rss())
		return;
	t0 = clock_ns();
	for (uint64_t i = 0; i < pk.rss_cost; i++) {
		in[9] = (uint8_t)i;
		in[8] = (uint8_t)(i >> 8);
		sink ^= vnet_rss_hash(in);
	}
	t1 = clock_ns();
	for (uint64_t i = 0; i < pk.rss_cost; i++) {
		in[9] = (uint8_t)i;
		in[8] = (uint8_t)(i >> 8);
		sink ^= vnet_rss_hash_bitwise(in);
	}
	t2 = clock_ns();
	for (unsigned i = 0; i < 256; i++) {
		in[9] = (uint8_t)i;
		differ += vnet_rss_hash(in) != vnet_rss_hash_bitwise(in);
	}
	printf("PKT_RSS_COST {\"hashes\":%lu,\"lut_ns\":%lu.%03lu,\"bitwise_ns\":%lu.%03lu,"
	       "\"differ\":%u,\"sink\":%u}\n",
	       (unsigned long)pk.rss_cost, (unsigned long)((t1 - t0) / pk.rss_cost),
	       (unsigned long)((t1 - t0) * 1000 / pk.rss_cost % 1000),
	       (unsigned long)((t2 - t1) / pk.rss_cost),
	       (unsigned long)((t2 - t1) * 1000 / pk.rss_cost % 1000), differ, sink);
	if (differ)
		kernel_error("pkt",
		             "the RSS look-up hash differs from the bitwise one on %u inputs",
		             differ);
}

int pkt_main(void)
{
	struct vnet *vn = net_open_mq(pk.mq);

	for (unsigned k = 0; k < pk.mq; k++) {
		pq[k].vn = vnet_queue(vn, k);
		pq[k].qp = k;
		if (pk.mode == PKT_TXONLY || pk.mode == PKT_RR)
			pkt_setup_tx(&pq[k]);
		if (pk.hold_ns) {
			pq[k].nheld_max = vnet_rx_ring_size(pq[k].vn);
			pq[k].held = pmm_alloc(pq[k].nheld_max * sizeof(void *), 8);
		}
	}
	if (pk.mode == PKT_RR) {
		static struct hist rr_hist; /* 30 KB: not on the stack */

		hist_reset(&rr_hist);
		pq[0].rr_hist = &rr_hist;
	}
	pkt_rss_cost();
	printf("pkt: mode=%s size=%s rate=%lu flows=%u burst=%u seconds=%lu count=%lu "
	       "txq=%u rxq=%u%s ready\n",
	       pkt_modes[pk.mode], pk.size_str, pk.rate, pk.flows, pk.burst,
	       (unsigned long)(pk.seconds_ns / 1000000000ull), pk.count, vnet_tx_ring_size(vn),
	       vnet_rx_ring_size(vn), pk.mq > 1 ? " mq=on" : "");
	/* mq=N: pair k's loop on CPU k (pkt_configure() checked smp >= mq). */
	for (unsigned k = 1; k < pk.mq; k++)
		if (smp_run(k, pkt_run_ap, &pq[k]))
			kernel_error("pkt", "cannot start queue %u's loop on cpu %u", k, k);
	pkt_run(&pq[0]);
	/* Queue 0 may end early (a receive mode's pkt.idle) while a queue that
	 * got no frame runs to pkt.seconds: the bound counts from there. */
	uint64_t join_end = pq[0].t_start + pk.seconds_ns + PKT_JOIN_NS;
	for (unsigned k = 1; k < pk.mq; k++)
		if (smp_join(k, join_end > clock_ns() ? join_end - clock_ns() : 1, NULL))
			kernel_error("pkt",
			             "queue %u's loop on cpu %u did not end within %llu s of "
			             "pkt.seconds",
			             k, k, PKT_JOIN_NS / 1000000000ull);
	for (unsigned k = 0; k < pk.mq; k++) {
		pkt_drain_warning(&pq[k]);
		pkt_result(&pq[k], &pq[k].a, &pq[k].b, pk.mq > 1 ? (int)k : -1);
	}
	if (pk.mq > 1)
		pkt_total();
	for (unsigned k = 0; k < pk.mq; k++)
		vnet_print_counters(pq[k].vn);
	return EXIT_OK;
}
