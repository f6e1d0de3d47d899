/*
 * test_vnet_kick.c: TX_KICK and avail publication through the driver
 * (vnet_tx.c's kick sites): exact kick counts for a 70-frame burst, no
 * kick left pending when the appliance waits (the timer variant: a bounded
 * hold), the poll pass's flush, EVENT_IDX against the flag protocol.
 */
#include "tests/unit/vnet_fixture.h"

/* ---- exact kick counts for a 70-frame burst ---- */

/* Not a multiple of KICK_BURST_MAX: the tail needs the end-of-burst kick. */
#define BURST_N 70
_Static_assert(BURST_N % VNET_KICK_BURST_MAX != 0 || VNET_KICK_BURST_MAX > BURST_N,
               "the burst must leave a tail for vnet_tx_end_burst()");

static unsigned burst_kicks_sync(void)
{
	if (VNET_IS_KICK_EVERY)
		return BURST_N;
	if (VNET_IS_KICK_BURST)
		return BURST_N / VNET_KICK_BURST_MAX + (BURST_N % VNET_KICK_BURST_MAX != 0);
	return 1; /* deferred: at the poll; timer: when the hold expires */
}

static uint64_t tx_kicks(void)
{
	struct vnet_counters rx, tx;

	counters(&rx, &tx);
	return tx.kicks;
}

/* BURST_N frames, end of burst, one poll pass; kicks counted from here. */
static void run_burst(unsigned expect_kicks, const char *label)
{
	struct vnet_counters rx, tx;
	uint64_t k0 = tx_kicks(), s0;
	int fails = 0;

	counters(&rx, &tx);
	s0 = tx.kicks_suppressed;
	for (int i = 0; i < BURST_N; i++)
		fails += send_frame() != 0;
	CHECK_EQ(0, fails, "all frames of the burst accepted");
	vnet_tx_end_burst(vn);
	if (VNET_IS_KICK_EVERY || VNET_IS_KICK_BURST) {
		CHECK_EQ(expect_kicks, tx_kicks() - k0, "kicks at end of burst");
		CHECK(!vnet_kick_pending(vn), "nothing pending after the end of the burst");
	} else
		CHECK_EQ(0, tx_kicks() - k0, "no kick before the poll pass (deferred/timer)");
	vnet_poll(vn);
	if (VNET_IS_KICK_TIMER) {
		/* The labelled hold: nothing until VNET_KICK_TIMER_US has passed. */
		CHECK_EQ(0, tx_kicks() - k0, "timer: held at the poll");
		CHECK(vnet_kick_pending(vn), "timer: kick pending (bounded hold)");
		shim_now_ns += VNET_KICK_TIMER_US * 1000ull - 1;
		vnet_poll(vn);
		CHECK_EQ(0, tx_kicks() - k0, "timer: still held 1 ns before the bound");
		shim_now_ns += 1;
		vnet_poll(vn);
	}
	counters(&rx, &tx);
	printf("     %s: kicks=%llu suppressed=%llu reclaim_calls=%llu reclaimed=%llu\n", label,
	       (unsigned long long)(tx.kicks - k0), (unsigned long long)(tx.kicks_suppressed - s0),
	       (unsigned long long)tx.reclaim_calls, (unsigned long long)tx.reclaimed);
	CHECK_EQ(expect_kicks, tx.kicks - k0, label);
	CHECK(!vnet_kick_pending(vn), "no kick pending after the poll pass");
}

void test_burst_kicks_sync_device(void)
{
	struct vnet_counters rx, tx;

	if (!dev_open(SIM_SYNC))
		return;
	run_burst(burst_kicks_sync(), "70-frame burst, device runs at each kick");
	CHECK_EQ(BURST_N, txd->frames, "frames the device saw");
	CHECK_EQ(sent_sum, txd->byte_sum, "bytes the device saw (sum)");
	CHECK_EQ(0, sim_lost_wakeup(txd), "no lost wakeup");
	CHECK_EQ(0, sim.driver_errors, "ring rules");
	counters(&rx, &tx);
	if (VNET_IS_KICK_EVERY) {
		/* Each frame completes at its own kick: where reclaim runs
		 * decides exactly what it finds. */
		/* base/v0 "free" first (finds the previous frame); v1 "2*free"
		 * after the kick (finds this one); v2/v3 "free" first, then
		 * "2*free" before the kick (finds nothing); after: all after. */
		unsigned calls = VNET_IS_RECLAIM_LAZY    ? 0
		                 : VNET_IS_RECLAIM_POLL  ? 1
		                 : VNET_IS_RECLAIM_V2_V3 ? 2 * BURST_N
		                                         : BURST_N;
		unsigned got = VNET_IS_RECLAIM_LAZY                                 ? 0
		               : (VNET_IS_RECLAIM_BASE_V0 || VNET_IS_RECLAIM_V2_V3) ? BURST_N - 1
		                                                                    : BURST_N;
		CHECK_EQ(calls, tx.reclaim_calls, "reclaim calls (kick=every)");
		CHECK_EQ(got, tx.reclaimed, "frames reclaimed (kick=every)");
	}
	if (VNET_IS_RECLAIM_V1) { /* v2/v3 also "free" all before queuing */
		uint64_t over = 0;
		for (int b = VNET_RECLAIM_K + 1; b < VNET_COUNTER_BUCKETS; b++)
			over += tx.reclaim_hist[b];
		CHECK_EQ(0, over, "bounded reclaim never takes more than K");
	}
	if (VNET_IS_RECLAIM_POLL)
		CHECK_EQ(BURST_N, tx.reclaimed, "poll: one pass took them all");
	CHECK_EQ(VNET_ZEROCOPY ? tx.reclaimed : BURST_N, done_total, "tx_done calls");
	CHECK_EQ(0, done_twice, "tx_done twice for a frame");
	CHECK_EQ(0, txd->interrupts > 1, "interrupts the device would raise");
}

void test_burst_kicks_sleepy_device(void)
{
	if (!dev_open(SIM_MANUAL))
		return;
	/* QEMU tx=bh-like: after a doorbell the device stops listening until
	 * it has run; event index and NO_NOTIFY both suppress the rest. */
	run_burst(1, "70-frame burst, device runs after the burst");
	sim_run(txd);
	vnet_poll(vn); /* the main loop goes on (reclaim=poll reclaims here) */
	run_burst(1, "second burst after the device re-armed");
	sim_run(txd);
	CHECK_EQ(2 * BURST_N, txd->frames, "frames the device saw");
	CHECK_EQ(0, sim.driver_errors, "ring rules");
}

/* ---- avail publication ---- */

void test_avail_publish(void)
{
	if (!dev_open(SIM_MANUAL))
		return;
	for (int i = 0; i < 3; i++)
		send_frame();
	if (VNET_IS_KICK_EVERY)
		CHECK_EQ(3, sim_published(txd), "eager + kick=every: published per frame");
	else if (VNET_AVAIL_BATCHED)
		CHECK_EQ(0, sim_published(txd), "batched: nothing published mid-burst");
	else
		CHECK_EQ(3, sim_published(txd), "eager: published per frame");
	vnet_tx_end_burst(vn);
	CHECK_EQ(3, sim_published(txd), "published at end of burst");
}

/* ---- no kick pending when the appliance waits ---- */

void test_no_pending_kick_when_idle(void)
{
	uint32_t rng = 4242;
	unsigned pending = 0, lost = 0, eagain = 0;

	if (!dev_open(SIM_MANUAL))
		return;
	for (int round = 0; round < 400; round++) {
		rng = rng * 1103515245u + 12345u;
		unsigned n = 1 + (rng >> 16) % 40;
		for (unsigned i = 0; i < n; i++) {
			if (send_frame() == -VNET_EAGAIN) {
				eagain++;
				break;
			}
		}
		if (rng & 0x100)
			vnet_tx_end_burst(vn);
		if (rng & 0x200)
			sim_run(txd);
		/* The wait: before_wait, then the poll pass(es) of the loop. */
		vnet_before_wait(vn);
		if (!VNET_IS_KICK_TIMER && vnet_kick_pending(vn))
			pending++;
		settle();
		if (vnet_kick_pending(vn))
			pending++;
		if (sim_lost_wakeup(txd) || sim_lost_wakeup(rxd))
			lost++;
	}
	printf("     400 random bursts: %u with a full ring, kicks=%llu\n", eagain,
	       (unsigned long long)vn->txq.stats.kicks);
	CHECK_EQ(0, pending, "waits that began with a kick pending");
	CHECK_EQ(0, lost, "device left waiting for a doorbell");
	CHECK_EQ(0, sim.driver_errors, "ring rules");
}

/* The timer variant's hold is bounded by VNET_KICK_TIMER_US; every other
 * variant flushes in vnet_before_wait(). */
void test_kick_hold_bound(void)
{
	struct vnet_counters rx, tx;
	uint64_t held_ns = 0;

	if (!dev_open(SIM_MANUAL))
		return;
	send_frame(); /* no end of burst: the caller forgot, or is the timer */
	vnet_before_wait(vn);
	while (vnet_kick_pending(vn) && held_ns <= 10 * VNET_KICK_TIMER_US * 1000ull) {
		shim_now_ns += 1000;
		held_ns += 1000;
		vnet_poll(vn);
	}
	counters(&rx, &tx);
	printf("     kick held %llu us (bound %s)\n", (unsigned long long)(held_ns / 1000),
	       VNET_IS_KICK_TIMER ? "VNET_KICK_TIMER_US" : "0");
	CHECK_EQ(VNET_IS_KICK_TIMER ? VNET_KICK_TIMER_US * 1000ull : 0, held_ns,
	         "how long the kick was held (ns)");
	CHECK_EQ(1, tx.kicks, "one kick in the end");
}

/* ---- the poll pass flushes a kick the caller left pending ---- */

void test_poll_flushes_kick(void)
{
	if (!dev_open(SIM_SYNC))
		return;
	send_frame(); /* the caller skips vnet_tx_end_burst() */
	vnet_poll(vn);
	if (VNET_IS_KICK_TIMER) {
		CHECK(vnet_kick_pending(vn), "timer: held (bounded, test_kick_hold_bound)");
		return;
	}
	CHECK(!vnet_kick_pending(vn), "one poll pass flushed the pending kick");
	CHECK_EQ(1, txd->frames, "and the device got the frame");
}

/* ---- EVENT_IDX and the flag really differ ---- */

/* A device whose event index asks for a kick only 4 entries later (vhost
 * and QEMU may place it anywhere ahead): with EVENT_IDX the driver stays
 * silent for the first 4 frames; with the flag protocol it kicks at once. */
void test_event_idx_ahead(void)
{
	if (!dev_open(SIM_MANUAL))
		return;
	/* Packed: the event is a descriptor position (2.8.10), so "4 frames
	 * ahead" is 4 frames' worth of descriptors. */
	txd->event_ahead = (uint16_t)(VNET_IS_RING_PACKED ? 4 * descs_per_frame() : 4);
	sim_idle(txd);
	for (int i = 0; i < 4; i++) {
		send_frame();
		vnet_tx_end_burst(vn);
		vnet_before_wait(vn);
		settle();
	}
	CHECK_EQ(VNET_EVENT_IDX ? 0 : 1, tx_kicks(), "kicks for 4 frames, event index 4 ahead");
	send_frame();
	vnet_tx_end_burst(vn);
	vnet_before_wait(vn);
	settle();
	CHECK_EQ(1, tx_kicks(), "the fifth frame crosses the event index");
	CHECK(!sim_lost_wakeup(txd), "device never left waiting");
}
