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
 *       pkt.count=N txonly: frames to send, then end (0: for pkt.seconds),
 *       pkt.idle=S receive modes: end S seconds after the last frame once
 *       frames came (0: run pkt.seconds), pkt.src=, pkt.dst= generated
 *       frames' IPv4 addresses (10.77.0.2, 10.77.0.1), pkt.dmac= (broadcast),
 *       pkt.port= UDP destination port (9), backend=LABEL.
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

#define PKT_BURST_MAX 256
#define PKT_SLOT_SIZE 2048
#define PKT_HEADROOM  64 /* >= vnet_tx_headroom */
#define PKT_DRAIN_NS  100000000ull

static const char *const pkt_modes[] = {"txonly", "rxonly", "macswap", "reflect", NULL};

static struct {
	enum pkt_mode mode;
	const char *size_str;
	uint32_t size; /* 0: imix */
	uint64_t rate, count, seconds_ns, idle_ns;
	unsigned flows, burst;
	struct pkt_addrs addrs;
	struct vnet *vn;

	/* txonly: frame slots the device may still read (zero copy) */
	uint8_t *slots;
	uint16_t *free;
	unsigned nfree, nslots;

	/* forwarding: received, not yet accepted by the TX ring */
	struct vnet_rx pend[PKT_BURST_MAX];
	unsigned npend;

	uint64_t frames, bytes; /* sent (txonly), received (rxonly), forwarded */
	uint64_t rx_other, fwd_unsent, tx_full, markers;
	struct pkt_seq seq;
	struct { /* the counts at the last trial marker (PKT_TRIAL lines are deltas) */
		uint64_t seq_frames, seq_gaps, seq_reorder, frames, rx_other;
	} mark;
	uint64_t t_start, t_first, t_last; /* clock_ns(); t_first 0: no frame yet */
} pk;

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
	pkt_parse_ip("pkt.src", "10.77.0.2", pk.addrs.src);
	pkt_parse_ip("pkt.dst", "10.77.0.1", pk.addrs.dst);
	pkt_parse_mac("pkt.dmac", "ff:ff:ff:ff:ff:ff", pk.addrs.dmac);
	pk.addrs.dport = (uint16_t)cmdline_u64("pkt.port", 9, 1, 65535);
	if (pk.mode != PKT_TXONLY &&
	    (cmdline_str("pkt.count", NULL) || cmdline_str("pkt.rate", NULL)))
		kernel_usage_error("cmdline", "keys 'pkt.count' and 'pkt.rate' apply to "
		                              "pkt.mode=txonly only");
	if (pk.mode == PKT_TXONLY && cmdline_str("pkt.idle", NULL))
		kernel_usage_error("cmdline", "key 'pkt.idle' applies to the receive modes only");
}

static void pkt_failed(void)
{
	kernel_error("virtio-net", "%s (backend %s)", vnet_error(pk.vn), net_backend());
}

static uint8_t *pkt_slot(unsigned i)
{
	return pk.slots + (size_t)i * PKT_SLOT_SIZE + PKT_HEADROOM;
}

static void pkt_tx_done(void *arg, void *cookie)
{
	(void)arg;
	pk.free[pk.nfree++] = (uint16_t)(uintptr_t)cookie;
}

/* Frames due now: a burst at full speed, else what the rate allows since
 * the start (a generator that fell behind catches up a burst at a time). */
static uint64_t pkt_tx_quota(uint64_t now)
{
	uint64_t q = pk.burst;

	if (pk.rate) {
		uint64_t due =
		    (uint64_t)((unsigned __int128)(now - pk.t_start) * pk.rate / 1000000000ull);

		q = due > pk.frames ? due - pk.frames : 0;
		q = q < pk.burst ? q : pk.burst;
	}
	if (pk.count && pk.count - pk.frames < q)
		q = pk.count - pk.frames;
	return q;
}

/* txonly receives too: whatever arrives (a host's ARP, a switch's
 * chatter) is counted and released, or it would sit on the used ring and
 * end every halt before it began. */
static void pkt_tx_drain_rx(void)
{
	struct vnet_rx *r = &pk.pend[0];
	int rc = 1;

	for (unsigned n = 0; n < pk.burst && (rc = vnet_rx(pk.vn, r)) > 0; n++) {
		pk.rx_other++;
		vnet_rx_release_frame(pk.vn, r);
	}
	if (rc < 0)
		pkt_failed();
}

static void pkt_tx_pass(uint64_t now)
{
	uint64_t q = pkt_tx_quota(now);

	pkt_tx_drain_rx();
	prof_enter(PROF_APP);
	for (uint64_t k = 0; k < q && pk.nfree; k++) {
		uint16_t s = pk.free[--pk.nfree];
		uint8_t *f = pkt_slot(s);
		uint32_t size = pk.size ? pk.size : pkt_imix[pk.frames % PKT_IMIX_N];
		struct vnet_seg seg = {f, size - PKT_FCS};
		int rc;

		pkt_frame_build(f, size - PKT_FCS, &pk.addrs,
		                (uint16_t)(PKT_SPORT_BASE + pk.frames % pk.flows), pk.frames);
		prof_enter(PROF_ENQUEUE);
		rc = vnet_tx(pk.vn, &seg, 1, NULL, (void *)(uintptr_t)s);
		prof_exit();
		if (rc < 0) {
			pk.free[pk.nfree++] = s; /* not accepted: still ours */
			if (rc != -VNET_EAGAIN)
				pkt_failed();
			pk.tx_full++; /* back-pressure: the next pass retries */
			break;
		}
		pk.frames++;
		pk.bytes += size;
		pk.t_last = now;
	}
	prof_exit();
}

/* A trial marker: what this trial's frames did in the guest, for the
 * search to compare with what the peer saw (loss counted at both ends).
 * Frames held for a full ring are not forwarded yet: pend says how many. */
static void pkt_trial_line(uint64_t trial)
{
	printf("PKT_TRIAL {\"trial\":%lu,\"seq_frames\":%lu,\"seq_gaps\":%lu,\"seq_reorder\":%lu,"
	       "\"frames\":%lu,\"rx_other\":%lu,\"pend\":%u}\n",
	       trial, pk.seq.frames - pk.mark.seq_frames, pk.seq.gaps - pk.mark.seq_gaps,
	       pk.seq.reorder - pk.mark.seq_reorder, pk.frames - pk.mark.frames,
	       pk.rx_other - pk.mark.rx_other, pk.npend);
	pk.mark.seq_frames = pk.seq.frames;
	pk.mark.seq_gaps = pk.seq.gaps;
	pk.mark.seq_reorder = pk.seq.reorder;
	pk.mark.frames = pk.frames;
	pk.mark.rx_other = pk.rx_other;
	pk.seq.next = 0; /* the next trial numbers from 0 again */
	pk.markers++;
}

/* A received frame: counted, edited for its mode, or released. True when
 * it is to be forwarded. */
static bool pkt_rx_one(struct vnet_rx *r, uint64_t now)
{
	uint8_t *f = r->buf[0].data;
	uint64_t trial;

	if (pkt_is_marker(f, r->buf[0].len, &trial)) {
		pkt_trial_line(trial);
		vnet_rx_release_frame(pk.vn, r);
		return false;
	}
	if (!pk.t_first)
		pk.t_first = now;
	pk.t_last = now;
	pkt_seq_count(&pk.seq, f, r->buf[0].len);
	if (pk.mode == PKT_RXONLY) {
		pk.frames++;
		pk.bytes += r->len + PKT_FCS;
		vnet_rx_release_frame(pk.vn, r);
		return false;
	}
	if (r->nbufs != 1 || (r->flags & VNET_RX_F_GSO) ||
	    (pk.mode == PKT_REFLECT && !pkt_reflect(f, r->len))) {
		pk.rx_other++; /* not forwardable here: counted, released */
		vnet_rx_release_frame(pk.vn, r);
		return false;
	}
	if (pk.mode == PKT_MACSWAP)
		pkt_macswap(f);
	return true;
}

/* Forward what is held, oldest first; what the ring refuses waits. */
static void pkt_forward_held(void)
{
	unsigned sent = 0;

	while (sent < pk.npend) {
		int rc;

		prof_enter(PROF_ENQUEUE);
		rc = vnet_tx_forward(pk.vn, &pk.pend[sent]);
		prof_exit();
		if (rc == -VNET_EAGAIN) {
			pk.tx_full++;
			break;
		}
		if (rc == -VNET_EDEVICE)
			pkt_failed();
		if (rc < 0) {
			pk.rx_other++; /* refused (e.g. an offload the device did not take) */
			vnet_rx_release_frame(pk.vn, &pk.pend[sent]);
		} else {
			pk.frames++;
			pk.bytes += pk.pend[sent].len + PKT_FCS;
		}
		sent++;
	}
	memmove(pk.pend, pk.pend + sent, (pk.npend - sent) * sizeof(pk.pend[0]));
	pk.npend -= sent;
}

static void pkt_rx_pass(uint64_t now)
{
	unsigned n = 0;
	int rc = 1;

	if (pk.npend)
		pkt_forward_held(); /* a full ring last pass: these go first */
	while (n < pk.burst && pk.npend < pk.burst) {
		struct vnet_rx *r = &pk.pend[pk.npend];

		prof_enter(PROF_RX);
		rc = vnet_rx(pk.vn, r);
		prof_exit();
		if (rc <= 0)
			break;
		n++;
		prof_enter(PROF_APP);
		if (pkt_rx_one(r, now))
			pk.npend++;
		prof_exit();
	}
	if (rc < 0)
		pkt_failed();
	if (pk.npend)
		pkt_forward_held();
}

static bool pkt_done(uint64_t now)
{
	if (now - pk.t_start >= pk.seconds_ns)
		return true;
	if (pk.mode == PKT_TXONLY)
		return pk.count && pk.frames == pk.count;
	return pk.idle_ns && pk.t_first && now - pk.t_last >= pk.idle_ns;
}

/* The halt policies' deadline: the next frame a rate allows, the idle
 * bound, or the end of the run. */
static uint64_t pkt_deadline(void *arg)
{
	uint64_t end = pk.t_start + pk.seconds_ns;

	(void)arg;
	if (pk.mode == PKT_TXONLY && pk.rate) {
		uint64_t next = pk.t_start + (uint64_t)((unsigned __int128)(pk.frames + 1) *
		                                        1000000000ull / pk.rate);
		end = next < end ? next : end;
	} else if (pk.mode != PKT_TXONLY && pk.idle_ns && pk.t_first &&
	           pk.t_last + pk.idle_ns < end) {
		end = pk.t_last + pk.idle_ns;
	}
	return end;
}

static void pkt_setup_tx(void)
{
	/* More slots than the TX ring has descriptors: the ring is full
	 * (back-pressure, a reclaim) before the slots run out. */
	pk.nslots = vnet_tx_ring_size(pk.vn) + pk.burst;
	pk.slots = pmm_alloc((size_t)pk.nslots * PKT_SLOT_SIZE, 64);
	pk.free = pmm_alloc(pk.nslots * sizeof(pk.free[0]), 8);
	memset(pk.slots, 0, (size_t)pk.nslots * PKT_SLOT_SIZE);
	for (unsigned i = 0; i < pk.nslots; i++)
		pk.free[i] = (uint16_t)(pk.nslots - 1 - i);
	pk.nfree = pk.nslots;
	memcpy(pk.addrs.smac, vnet_mac(pk.vn), 6);
	vnet_set_tx_done(pk.vn, pkt_tx_done, NULL);
}

static void pkt_result(const struct result_snap *a, const struct result_snap *b)
{
	uint64_t ns = pk.t_last > pk.t_first ? pk.t_last - pk.t_first : 0;
	uint64_t kicks = (b->tx.kicks - a->tx.kicks) + (b->rx.kicks - a->rx.kicks);
	uint64_t irqs = (b->tx.irqs - a->tx.irqs) + (b->rx.irqs - a->rx.irqs);
	char test[16];

	snprintf(test, sizeof(test), "pkt_%s", pkt_modes[pk.mode]);
	result_begin(test, pk.mode == PKT_TXONLY ? "client" : "server");
	result_str("mode", pkt_modes[pk.mode]);
	result_str("size", pk.size_str);
	result_u64("rate", pk.rate);
	result_u64("flows", pk.flows);
	result_u64("burst", pk.burst);
	result_u64("frames", pk.frames);
	result_u64("bytes", pk.bytes);
	result_ratio("pps", pk.frames * 1000000000ull, ns);
	result_rates(pk.bytes, pk.frames, ns);
	result_ratio("frames_per_kick", pk.frames, kicks);
	result_ratio("frames_per_reclaim", pk.frames, b->tx.reclaim_calls - a->tx.reclaim_calls);
	result_ratio("frames_per_irq", pk.frames, irqs);
	result_u64("seq_frames", pk.seq.frames);
	result_u64("seq_gaps", pk.seq.gaps);
	result_u64("seq_reorder", pk.seq.reorder);
	result_u64("rx_other", pk.rx_other);
	result_u64("fwd_unsent", pk.fwd_unsent);
	result_u64("markers", pk.markers);
	result_u64("tx_full", pk.tx_full);
	result_u64("drv_rx_drops", b->rx.drops - a->rx.drops);
	if (VNETLAB_PROFILE) {
		uint64_t cycles = 0;

		for (int i = 0; i < PROF_STAGES; i++)
			cycles += b->prof.cycles[i] - a->prof.cycles[i];
		result_ratio("cycles_per_pkt", cycles, pk.frames);
	}
	result_counters(a, b, pk.frames);
	result_end();
}

int pkt_main(void)
{
	struct result_snap a, b;

	pk.vn = net_open();
	if (pk.mode == PKT_TXONLY)
		pkt_setup_tx();
	printf("pkt: mode=%s size=%s rate=%lu flows=%u burst=%u seconds=%lu count=%lu "
	       "txq=%u rxq=%u ready\n",
	       pkt_modes[pk.mode], pk.size_str, pk.rate, pk.flows, pk.burst,
	       (unsigned long)(pk.seconds_ns / 1000000000ull), pk.count, vnet_tx_ring_size(pk.vn),
	       vnet_rx_ring_size(pk.vn));
	result_snap(&a);
	pk.t_start = a.ns;
	if (pk.mode == PKT_TXONLY)
		pk.t_first = pk.t_start;
	for (;;) {
		uint64_t now;
		int rc;

		prof_enter(PROF_POLL);
		rc = vnet_poll(pk.vn);
		prof_exit();
		if (rc < 0)
			pkt_failed();
		now = clock_ns();
		if (pk.mode == PKT_TXONLY)
			pkt_tx_pass(now);
		else
			pkt_rx_pass(now);
		vnet_tx_end_burst(pk.vn);
		if (pkt_done(now))
			break;
		prof_enter(PROF_IDLE);
		vnet_idle(pk.vn, pkt_deadline, NULL);
		prof_exit();
	}
	for (unsigned i = 0; i < pk.npend; i++)
		vnet_rx_release_frame(pk.vn, &pk.pend[i]);
	pk.fwd_unsent = pk.npend;
	pk.npend = 0;
	if (vnet_drain(pk.vn, PKT_DRAIN_NS) == -1) {
		printf("pkt warning: TX not drained within %llu ms\n", PKT_DRAIN_NS / 1000000);
		vnet_print_rings(pk.vn);
	}
	result_snap(&b);
	if (pk.t_first)
		a.ns = pk.t_first; /* the interval starts at the first frame */
	pkt_result(&a, &b);
	vnet_print_counters(pk.vn);
	return EXIT_OK;
}
