/*
 * test_vnet_reclaim.c: TX_RECLAIM (vnet_policy.h's steps, vnet_tx.c's one
 * reclaim routine) against a reference model: randomized schedules and
 * directed cases per variant.
 */
#include "tests/unit/vnet_fixture.h"

/* ---- reclaim order: a reference model of vnet_policy.h's steps ---- */

#define RECLAIM_ALL_MAX 0xffffffffu

/* A worst-case frame's descriptors, from the layout (not the driver). */
static unsigned worst_desc(void)
{
	if (!VNET_ZEROCOPY)
		return VNET_TXHDR_INLINE ? 1 : 2;
	return VNET_TXHDR_INLINE ? VNET_TX_MAX_SEGS : VNET_TX_MAX_SEGS + 1;
}

struct model {
	unsigned free, done; /* free descriptors; completions not yet taken */
	bool unpub;          /* added, not published */
	uint32_t since;      /* frames since the last kick decision */
	bool holding, hold_expired;
	char t[64];
};

static void model_take(struct model *m, bool all)
{
	unsigned n = all ? m->done : m->done < VNET_RECLAIM_K ? m->done : VNET_RECLAIM_K;

	strcat(m->t, all ? "F" : "f");
	m->done -= n;
	m->free += n * descs_per_frame();
}

static void model_kick(struct model *m)
{
	if (m->unpub)
		strcat(m->t, "P");
	strcat(m->t, "K");
	m->unpub = false;
	m->since = 0;
	m->holding = false;
}

static void model_xmit_end(struct model *m)
{
	if (!VNET_AVAIL_BATCHED && m->unpub) {
		strcat(m->t, "P");
		m->unpub = false;
	}
	m->since++;
	if (VNET_IS_KICK_EVERY)
		model_kick(m);
	if (VNET_IS_KICK_BURST && m->since >= VNET_KICK_BURST_MAX)
		model_kick(m);
	if (VNET_IS_KICK_TIMER) {
		if (!m->holding)
			m->holding = true;
		else if (m->hold_expired)
			model_kick(m);
	}
}

/* The steps one vnet_tx() of a 2-segment frame must take, given the
 * driver's state now; the device does not run during the call. Returns
 * whether the frame fits. */
static bool model_tx(struct model *m)
{
	const unsigned d = descs_per_frame();
	const bool pre_free = VNET_IS_RECLAIM_BASE_V0 || VNET_IS_RECLAIM_V2_V3;

	m->t[0] = 0;
	m->free = virtq_num_free(&vn->txq);
	m->done =
	    (uint16_t)(txd->used_idx - vn->txq.last_used); /* used entries written, not taken */
	m->unpub = virtq_unpublished(&vn->txq);
	m->since = vn->tx_since_kick;
	m->holding = vn->tx_holding;
	m->hold_expired =
	    vn->tx_holding && shim_now_ns - vn->tx_hold_since >= VNET_KICK_TIMER_US * 1000ull;
	if (pre_free)
		model_take(m, true); /* "free" */
	if (VNET_IS_RECLAIM_LAZY && m->free < vn->lazy_thresh)
		model_take(m, true);
	if (m->free < d && !VNET_IS_RECLAIM_POLL && !pre_free)
		model_take(m, true); /* ring full: v1's "xmit, free, xmit" */
	if (m->free < d) {
		model_kick(m); /* back-pressure flushes */
		return false;
	}
	strcat(m->t, "A");
	m->free -= d;
	m->unpub = true;
	if (VNET_IS_RECLAIM_V3) { /* "don't delay avail index update" */
		strcat(m->t, "P");
		m->unpub = false;
	}
	if (!VNET_IS_RECLAIM_V2_V3)
		model_xmit_end(m);
	if (VNET_IS_RECLAIM_AFTER)
		model_take(m, true);
	if (VNET_IS_RECLAIM_V1 || VNET_IS_RECLAIM_V2_V3)
		model_take(m, false); /* "2*free" */
	if ((pre_free || VNET_IS_RECLAIM_V1) && m->free < worst_desc() && m->done)
		model_take(m, true); /* final "free" */
	if (VNET_IS_RECLAIM_V2_V3)
		model_xmit_end(m); /* v2: the delayed index update and kick */
	return true;
}

/* Reclaim calls the trace shows since the last look (then cleared). */
static unsigned trace_take(void)
{
	unsigned n = 0;

	for (unsigned i = 0; i < vn->trace_len; i++)
		n += vn->trace[i] == 'F' || vn->trace[i] == 'f';
	vn->trace_len = 0;
	vn->trace[0] = 0;
	return n;
}

static uint32_t rnd(uint32_t *r)
{
	*r = *r * 1103515245u + 12345u;
	return *r >> 8;
}

/*
 * Randomized schedules (Linux tools/virtio/ringtest style): random bursts
 * of frames, a device that consumes and completes in random bursts, out of
 * order, lagging, random end-of-burst / poll / wait points and time steps.
 * After every step: each vnet_tx() took exactly the model's steps, no kick
 * pending when the driver waits, counters consistent; at the end no frame
 * lost or completed twice.
 */
static void run_schedule(uint32_t seed, unsigned steps)
{
	struct vnet_counters rx, tx;
	struct model m;
	uint32_t r = seed;
	unsigned accepted = 0, refused = 0, calls = 0, order_bad = 0, wait_bad = 0, count_bad = 0;
	unsigned live_bad = 0;
	char first_bad[320] = "";

	if (!dev_open(SIM_MANUAL))
		return;
	trace_take();
	for (unsigned step = 0; step < steps; step++) {
		unsigned burst = 1 + rnd(&r) % (96 / descs_per_frame()), action = rnd(&r) % 8;

		for (unsigned i = 0; i < burst; i++) {
			bool fits = model_tx(&m);
			int rc = send_frame();

			if (strcmp(m.t, vn->trace) || fits != (rc == 0)) {
				if (!order_bad++)
					snprintf(first_bad, sizeof(first_bad),
					         "step %u frame %u: model \"%s\" (%s), driver "
					         "\"%s\" (rc %d)",
					         step, i, m.t, fits ? "fits" : "full", vn->trace,
					         rc);
			}
			calls += trace_take();
			if (rc) {
				refused++;
				break;
			}
			accepted++;
		}
		if (rnd(&r) % 4)
			vnet_tx_end_burst(vn);
		calls += trace_take();
		/* The device: random partial work, sometimes out of order. */
		txd->reorder = rnd(&r) % 2;
		if (action < 3) {
			sim_consume(txd, rnd(&r) % (txd->size + 1u));
			sim_complete(txd, rnd(&r) % (txd->npending + 1u));
		} else if (action < 5) {
			txd->lag = rnd(&r) % 64;
			txd->burst_max = rnd(&r) % 9;
			sim_run(txd);
		}
		shim_now_ns += rnd(&r) % 400000;
		vnet_poll(vn);
		calls += trace_take();
		if (action == 6) {
			/* The appliance waits: nothing may stay unkicked. */
			vnet_before_wait(vn);
			settle();
			if (vnet_kick_pending(vn) || sim_lost_wakeup(txd))
				wait_bad++;
		}
		if (action == 7) {
			/* TX idle: completions waiting must be reclaimed within
			 * VNET_TX_IDLE_RECLAIM_US (two passes: see, then act). */
			sim_run(txd);
			vnet_poll(vn);
			shim_now_ns += VNET_TX_IDLE_RECLAIM_US * 1000ull;
			vnet_poll(vn);
			if (virtq_used_pending(&vn->txq))
				live_bad++;
		}
		calls += trace_take();
		counters(&rx, &tx);
		uint64_t hist = 0;
		for (int b = 0; b < VNET_COUNTER_BUCKETS; b++)
			hist += tx.reclaim_hist[b];
		if (tx.frames != accepted || tx.reclaim_calls != calls || hist != calls ||
		    (VNET_ZEROCOPY && done_total != tx.reclaimed + tx.idle_reclaimed) ||
		    virtq_chains_in_flight(&vn->txq) !=
		        accepted - tx.reclaimed - tx.idle_reclaimed ||
		    tx.ring_full != refused)
			count_bad++;
	}
	/* The end of the run: the device catches up, the driver drains. */
	txd->lag = 0;
	txd->burst_max = 0;
	sim_run(txd);
	CHECK_EQ(0, vnet_drain(vn, 1000000000ull), "drain at the end");
	counters(&rx, &tx);
	printf("     schedule seed %u: %u frames, %u refused, kicks=%llu suppressed=%llu "
	       "reclaim_calls=%llu reclaimed=%llu idle_reclaimed=%llu\n",
	       seed, accepted, refused, (unsigned long long)tx.kicks,
	       (unsigned long long)tx.kicks_suppressed, (unsigned long long)tx.reclaim_calls,
	       (unsigned long long)tx.reclaimed, (unsigned long long)tx.idle_reclaimed);
	if (order_bad)
		printf("     first order mismatch: %s\n", first_bad);
	CHECK_EQ(0, order_bad, "vnet_tx() steps differ from the policy's definition");
	CHECK_EQ(0, wait_bad, "waits with a kick pending or a device left waiting");
	CHECK_EQ(0, count_bad, "steps with inconsistent counters");
	CHECK_EQ(0, live_bad, "completions left unreclaimed on an idle TX path");
	CHECK_EQ(accepted, txd->frames, "no frame lost: the device saw each accepted frame");
	CHECK_EQ(sent_sum, txd->byte_sum, "and their bytes");
	CHECK_EQ(accepted, done_total, "every frame completed (tx_done)");
	CHECK_EQ(0, done_twice, "no frame completed twice");
	CHECK_EQ(0, sim.driver_errors, "ring rules");
	CHECK(accepted > 1000 && refused > 0, "the schedule filled the ring at times");
}

void test_random_schedules(void)
{
	static const uint32_t seeds[] = {1, 7, 42, 1234, 99991};

	for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++)
		run_schedule(seeds[i], 300);
}

/* Directed: each variant's steps on a roomy ring with completions waiting,
 * and the lazy threshold at its exact boundary. */
void test_reclaim_order(void)
{
	static const struct {
		bool on;
		const char *steps;
	} want[] = {
	    /* kick=every, avail=eager, 3 completions waiting, ring roomy */
	    {VNET_IS_RECLAIM_BASE_V0, "FAPK"}, {VNET_IS_RECLAIM_V1, "APKf"},
	    {VNET_IS_RECLAIM_V2, "FAfPK"},     {VNET_IS_RECLAIM_V3, "FAPfK"},
	    {VNET_IS_RECLAIM_AFTER, "APKF"},   {VNET_IS_RECLAIM_LAZY, "APK"},
	    {VNET_IS_RECLAIM_POLL, "APK"},
	};
	struct model m;

	if (!dev_open(SIM_MANUAL))
		return;
	for (int i = 0; i < 3; i++)
		send_frame();
	vnet_tx_end_burst(vn);
	vnet_poll(vn);
	sim_run(txd);
	trace_take();
	model_tx(&m);
	send_frame();
	printf("     one frame, 3 completions waiting: \"%s\"\n", vn->trace);
	CHECK_EQ(0, strcmp(m.t, vn->trace), "steps as the model says");
	if (VNET_IS_KICK_EVERY)
		for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
			if (want[i].on)
				CHECK_EQ(0, strcmp(want[i].steps, vn->trace), want[i].steps);

	/* lazy: "fewer than" LAZY_THRESH free: exactly at it, no reclaim. */
	if (VNET_IS_RECLAIM_LAZY && descs_per_frame() == 2) {
		if (!dev_open(SIM_MANUAL))
			return;
		while (virtq_num_free(&vn->txq) > vn->lazy_thresh)
			send_frame();
		vnet_tx_end_burst(vn);
		vnet_poll(vn);
		sim_run(txd);
		trace_take();
		CHECK_EQ(vn->lazy_thresh, virtq_num_free(&vn->txq), "free == threshold");
		send_frame();
		CHECK(strchr(vn->trace, 'F') == NULL, "lazy: no reclaim at the threshold");
		trace_take();
		send_frame();
		CHECK(strchr(vn->trace, 'F') != NULL, "lazy: reclaim below it");
	}
	/* The final "free": ring low, more completions than "2*free" takes. */
	if (VNET_IS_RECLAIM_V1 || VNET_IS_RECLAIM_V2_V3) {
		if (!dev_open(SIM_MANUAL))
			return;
		while (virtq_num_free(&vn->txq) >= 2 * descs_per_frame())
			send_frame(); /* room for exactly one more */
		vnet_tx_end_burst(vn);
		vnet_poll(vn);
		txd->lag = 0;
		sim_consume(txd, txd->size);
		sim_complete(txd, 2 * VNET_RECLAIM_K + 1);
		trace_take();
		model_tx(&m);
		send_frame();
		printf("     ring low, %u completions waiting: \"%s\"\n", 2 * VNET_RECLAIM_K + 1,
		       vn->trace);
		CHECK_EQ(0, strcmp(m.t, vn->trace), "low ring: steps as the model says");
		if (VNET_IS_RECLAIM_V1 && (VNET_RECLAIM_K + 1) * descs_per_frame() < worst_desc())
			CHECK(strstr(vn->trace, "fF") != NULL, "v1: 2*free, then the final free");
	}
}
