/*
 * test_rx_contract.c: the receive path one level above the ring contract.
 * The driver's real RX path (vnet_rx.c through the vnet API: batched
 * refill, frames held by the application and released in any order,
 * buffers lent to TX by vnet_tx_forward() and given back by reclaim, the
 * TX liveness reclaim) against QEMU 7.2's virtio-net receive side
 * (sim_rx.h: it parks whenever the next frame does not fit what it can
 * see, even with buffers on the ring, and only a doorbell resumes it),
 * through seeded random interleavings of driver, application, TX device,
 * clock and the device's parking steps. Built once per policy variant
 * (unit.mk UNIT_RXC_VARIANTS: both ring layouts, with and without
 * EVENT_IDX, large receive over merged buffers).
 *
 * The invariant, checked after every step (the driver's functions run
 * whole between two device steps, as barrier B makes them look to the
 * device; under TCG the split ring's device sees avail->idx only as of the
 * driver's last register access or a drain, sim_rx.h weak mode, which the
 * kick decision's register read covers):
 *   LOST WAKE-UP: the device is parked (it scanned, armed notifications,
 *   re-checked and found nothing new), no doorbell reached it since its
 *   failed scan began, and the buffers it holds plus the ones the driver
 *   made available since would let the queued frame fit. The driver has
 *   then published what the device needs without the kick that tells it,
 *   and waits for frames that cannot come.
 * and after every poll pass (vnet_poll(), vnet_before_wait()):
 *   WITHHELD: the device is parked, the driver has taken every frame the
 *   device completed (it is about to wait for the next one), what is
 *   available does not fit the frame, and the buffers the driver keeps
 *   free (not posted, not the application's, not on the TX ring) would.
 *   (With completed frames still to take, a busy application can leave
 *   buffers free until it gets to them: the refill follows their release.)
 * A failure prints the seed, the step and the last steps taken; rerun
 * with the seed as the only argument.
 */
#include <stdlib.h>
#include "tests/unit/sim_rx.h"
#include "tests/unit/test_vnet.h"
#include "tests/unit/vnet_fixture.h"

int check_failed, check_total;

#define STEPS    1000000u
#define HELD_MAX VIRTQ_MAX_SIZE /* frames the application holds at most */
#define TRACE    24             /* steps shown on a failure */

static uint64_t rng;
static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}
static uint32_t below(uint32_t n)
{
	return (uint32_t)(rnd() % n);
}

static struct vnet_rx held[HELD_MAX];
static unsigned nheld, held_bufs, hold_cap;
static bool fwd_phase; /* the application forwards what it can */
static bool app_busy;  /* ... or takes no frames for a while */
static uint64_t next_seq, forwarded, fwd_refused, releases;
static char trace[TRACE][96];
static unsigned ntrace;

static const char *const phase_name[] = {"running", "arming", "recheck", "parked"};

static void note(const char *what)
{
	snprintf(trace[ntrace++ % TRACE], sizeof(trace[0]),
	         "%-10s dev=%s want=%u posted=%u free=%u held=%u in_tx=%u kicks=%llu", what,
	         phase_name[simrx.phase], simrx.want, vn->rx_posted, vn->rx_nfree, vn->rx_held,
	         vn->rx_in_tx, (unsigned long long)rxd->doorbells);
}

static bool fail_at(uint32_t seed, unsigned step, const char *what)
{
	uint64_t unseen;
	unsigned nunseen;
	uint64_t seen = sim_rx_room(&unseen, &nunseen);

	printf("FAIL seed %u step %u: %s\n", seed, step, what);
	printf(
	    "     frame needs %u bytes; device holds %u buffers (%llu bytes), %u made available "
	    "since its scan (%llu bytes); driver: %u free, avail_event/flags as the ring says:\n",
	    simrx.want, rxd->npending, (unsigned long long)seen, nunseen,
	    (unsigned long long)unseen, vn->rx_nfree);
	vnet_print_rings(vn);
	for (unsigned i = ntrace > TRACE ? ntrace - TRACE : 0; i < ntrace; i++)
		printf("     step -%u: %s\n", ntrace - i, trace[i % TRACE]);
	CHECK(0, what);
	return false;
}

/* LOST WAKE-UP (see the top of the file). */
static bool lost_wakeup(void)
{
	uint64_t unseen;
	unsigned nunseen;
	uint64_t seen = sim_rx_room(&unseen, &nunseen);

	return simrx.phase == SIM_RX_PARKED && rxd->doorbells == simrx.park_kicks &&
	       sim_rx_fits(seen + unseen, rxd->npending + nunseen);
}

/* WITHHELD (see the top of the file). */
static bool withheld(void)
{
	uint64_t unseen;
	unsigned nunseen, bufs;
	uint64_t room = sim_rx_room(&unseen, &nunseen) + unseen;

	bufs = rxd->npending + nunseen;
	return simrx.phase == SIM_RX_PARKED && virtq_used_count(&vn->rxq) == 0 &&
	       !sim_rx_fits(room, bufs) &&
	       sim_rx_fits(room + (uint64_t)vn->rx_nfree * (VNET_RX_BUF_SIZE - VNET_RX_HDR_OFF),
	                   bufs + vn->rx_nfree);
}

static uint32_t frame_size(void)
{
	uint32_t r = below(100);

	if (!VNET_WANT_LRO || fwd_phase || r < 70) /* a forwarding phase: small frames */
		return 60 + below(1514 - 60 + 1);
	if (r < 90)
		return 1515 + below(9000 - 1515);
	return 9000 + below(VNET_RX_GSO_FRAME_MAX - 9000 + 1);
}

/* The application takes what the driver hands up, while it holds fewer
 * buffers than it means to; every frame in order and intact. */
static bool take_frames(void)
{
	struct vnet_rx r;
	int rc;

	if (app_busy)
		return true; /* frames wait on the used ring meanwhile */
	while (nheld < HELD_MAX && held_bufs < hold_cap && (rc = vnet_rx(vn, &r)) == 1) {
		uint64_t seq;

		memcpy(&seq, r.buf[0].data, sizeof(seq));
		if (seq != next_seq) {
			printf("     frame %llu handed up, expected %llu\n",
			       (unsigned long long)seq, (unsigned long long)next_seq);
			return false;
		}
		next_seq++;
		held[nheld++] = r;
		held_bufs += r.nbufs;
	}
	return !vn->failed;
}

static void drop_held(unsigned k)
{
	held_bufs -= held[k].nbufs;
	held[k] = held[--nheld];
}

/* The TX device: takes and completes some of what was sent; re-arms when
 * caught up. */
static void tx_device(void)
{
	sim_consume(txd, below(8));
	sim_complete(txd, below(8));
	if (txd->last_avail == sim_published(txd) && !txd->npending && below(2))
		sim_idle(txd);
}

/* The application is done with held frame k: it releases it, or in a
 * forwarding phase (app=pkt macswap) sends it back out in its own buffer
 * when it can (one buffer, no large receive), which lends the buffer to TX
 * until reclaim gives it back. */
static void let_go(unsigned k)
{
	if (fwd_phase && held[k].nbufs == 1 && held[k].len <= 1514) {
		int rc = vnet_tx_forward(vn, &held[k]);

		if (rc == 0) {
			drop_held(k);
			forwarded++;
			return;
		}
		fwd_refused++;
		if (rc == -VNET_EAGAIN)
			return; /* TX ring full: keep it for later */
	}
	vnet_rx_release_frame(vn, &held[k]);
	drop_held(k);
	releases++;
}

static bool step(uint32_t seed, unsigned s)
{
	uint32_t a = below(100);

	if (s % 512 == 0)
		app_busy = below(4) == 0;
	if (s % 4096 == 0) {
		/* A new phase: an application that keeps up, or one that sits
		 * on nearly every buffer; one in three forwards what it can. */
		uint32_t r = below(3);

		fwd_phase = below(3) == 0;

		hold_cap = r == 0   ? vn->rxq.size
		           : r == 1 ? vn->rxq.size - below(48)
		                    : below(vn->rxq.size);
	}
	if (a < 14) {
		if (sim_rx_frame(frame_size()))
			note("frame");
	} else if (a < 34) {
		if (below(2))
			sim_rx_drain(); /* the store buffer drains (weak mode) */
		sim_rx_step();
		note("dev step");
	} else if (a < 48) {
		vnet_poll(vn);
		note("poll");
		if (withheld())
			return fail_at(seed, s,
			               "WITHHELD: the device is parked and the driver keeps "
			               "free buffers that would fit the frame");
		if (!take_frames())
			return fail_at(seed, s, "frames lost, reordered or a device fault");
		note("rx");
	} else if (a < 64) {
		/* An application that sits on its buffers lets one go now
		 * and then; at its cap it lets several go. */
		if (held_bufs < hold_cap && below(4))
			return true;
		for (unsigned n = 1 + below(held_bufs >= hold_cap ? 16 : 2); n && nheld; n--)
			let_go(below(nheld));
		vnet_tx_end_burst(vn);
		note(fwd_phase ? "fwd/rel" : "release");
	} else if (a < 72) {
		if (nheld) {
			unsigned k = below(nheld);
			int rc = held[k].nbufs == 1 && held[k].len <= 1514
			             ? vnet_tx_forward(vn, &held[k])
			             : -VNET_EINVAL;

			if (rc == 0) {
				drop_held(k);
				forwarded++;
			} else {
				fwd_refused++;
			}
			vnet_tx_end_burst(vn);
			note("forward");
		}
	} else if (a < 82) {
		tx_device();
		note("tx dev");
	} else if (a < 90) {
		shim_now_ns += below(400000);
		note("time");
	} else {
		vnet_before_wait(vn);
		note("wait");
		if (withheld())
			return fail_at(seed, s,
			               "WITHHELD before waiting: the device is parked and the "
			               "driver keeps free buffers that would fit the frame");
	}
	if (lost_wakeup())
		return fail_at(seed, s,
		               "LOST WAKE-UP: the device is parked, the buffers made "
		               "available since would fit its frame, and no kick came");
	if (vn->failed || sim.driver_errors)
		return fail_at(seed, s, vn->failed ? vnet_error(vn) : sim.last_error);
	return true;
}

static void test_random_interleavings(uint32_t seed)
{
	struct vnet_counters rx, tx;
	unsigned s;

	rng = 0x9e3779b97f4a7c15ull ^ seed;
	if (!dev_open(SIM_MANUAL))
		return;
	/* Under TCG (the shim's accelerator) the split ring's device sees
	 * avail->idx late unless a register access or a drain lets it through
	 * (sim_rx.h weak mode): what the kick decision's register read is for. */
	sim_rx_model_reset(!!(vnet_features(vn) & VIRTIO_BIT(VIRTIO_NET_F_MRG_RXBUF)),
	                   vn->rxq.sync != NULL);
	nheld = held_bufs = 0;
	next_seq = forwarded = fwd_refused = releases = 0;
	for (s = 0; s < STEPS; s++)
		if (!step(seed, s))
			return;
	/* The end: the application lets go of everything, the TX device
	 * finishes; then every frame queued must get through. */
	hold_cap = 0;
	app_busy = false;
	for (unsigned r = 0; r < 1000 && (nheld || simrx.want || virtq_used_count(&vn->rxq)); r++) {
		while (nheld) {
			vnet_rx_release_frame(vn, &held[0]);
			drop_held(0);
		}
		sim_run(txd);
		shim_now_ns += 1000000;
		vnet_poll(vn);
		vnet_before_wait(vn);
		sim_rx_drain();
		sim_rx_step();
		hold_cap = vn->rxq.size;
		take_frames();
	}
	counters(&rx, &tx);
	printf("     seed %u: %u steps, %llu frames (%llu large, %llu buffers), %llu parks, "
	       "%llu resumed by a kick, %llu re-scans after arming; refills %llu, RX kicks %llu, "
	       "suppressed %llu; %llu forwarded (%llu refused), %llu liveness reclaims\n",
	       seed, s, (unsigned long long)simrx.frames, (unsigned long long)simrx.gso,
	       (unsigned long long)rx.bufs, (unsigned long long)simrx.parks,
	       (unsigned long long)simrx.resumes, (unsigned long long)simrx.rescans,
	       (unsigned long long)rx.refills, (unsigned long long)vn->rxq.stats.kicks,
	       (unsigned long long)vn->rxq.stats.kicks_suppressed, (unsigned long long)forwarded,
	       (unsigned long long)fwd_refused, (unsigned long long)tx.idle_reclaim_calls);
	CHECK_EQ(0, simrx.want, "the last frame got through once everything was released");
	CHECK_EQ(simrx.frames, next_seq, "every frame delivered was handed up, in order");
	CHECK_EQ(0, rx.drops, "none dropped by the driver");
	CHECK(simrx.parks > 100, "the device parked often");
	CHECK(simrx.resumes > 100, "and was resumed by kicks");
	CHECK(simrx.rescans > 0, "buffers made available while it armed (the race) happened");
	CHECK(forwarded > 1000, "buffers lent to TX");
	CHECK(tx.idle_reclaim_calls > 0, "the liveness reclaim ran");
	CHECK(vn->rxq.stats.kicks_suppressed > 0, "RX kicks suppressed");
	if (VNET_WANT_LRO)
		CHECK(simrx.gso > 1000 && rx.bufs > rx.frames, "large frames over merged buffers");
	CHECK_EQ(0, sim.driver_errors, "ring rules");
}

int main(int argc, char **argv)
{
	uint32_t seed = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 0) : 36;

	printf("test_rx_contract variant=%s seed=%u\n", vnet_variant(), seed);
	test_random_interleavings(seed);
	printf("%s test_random_interleavings\n", check_failed ? "FAIL" : "ok  ");
	return check_done("test_rx_contract %s seed %u", vnet_variant(), seed);
}
