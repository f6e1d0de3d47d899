/*
 * test_ring_contract.c: what virtq.h promises in either layout, against
 * the simulated device: event index arithmetic, a round trip, wraparound
 * past 65535 with reordered completions and no lost wakeup, a full ring,
 * refused requests, kick suppression with and without EVENT_IDX, used-buffer
 * notifications (enable_cb, enable_cb_after), every device fault, a length
 * on a read-only chain. Linked once per ring file with that layout's test
 * file (ring_contract.h), which also runs the tests only it has.
 */
#include "tests/unit/ring_contract.h"

int check_failed, check_total;

struct virtq vq;
struct sim_queue *dq = &sim.q[1];
uint8_t payload[64];

/* A layout's check at a named point, if it has one there. */
#define PROBE(hook, ...)                                                                           \
	do {                                                                                       \
		if (layout.hook)                                                                   \
			layout.hook(__VA_ARGS__);                                                  \
	} while (0)

void ring_notify(void *ctx, uint16_t qidx, uint16_t avail_idx)
{
	(void)ctx;
	sim_doorbell(qidx, avail_idx);
}

void ring_setup(uint16_t size, bool event_idx, enum sim_mode mode)
{
	shim_reset();
	sim_reset(0);
	sim.status = VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK |
	             VIRTIO_STATUS_DRIVER_OK;
	sim.mode = mode;
	CHECK_EQ(0, virtq_init(&vq, 1, size, event_idx, shim_alloc, ring_notify, NULL),
	         "virtq_init");
	CHECK_EQ(layout.packed, vq.packed, "the ring file this binary links");
	sim_attach(dq, &vq, 1);
	for (unsigned i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)i;
}

int ring_add_dir(unsigned n, uintptr_t token, bool writable)
{
	struct virtq_buf b[4];

	for (unsigned i = 0; i < n; i++)
		b[i] = (struct virtq_buf){(uintptr_t)payload, i == 0 ? 12 : 20, writable};
	return virtq_add(&vq, b, n, (void *)token);
}

int ring_add(unsigned n, uintptr_t token)
{
	return ring_add_dir(n, token, false);
}

void ring_kick(void)
{
	if (virtq_kick_prepare(&vq))
		virtq_notify(&vq);
}

void ring_send(uintptr_t token)
{
	ring_add(1, token);
	virtq_publish(&vq);
	ring_kick();
}

void ring_post_taken(unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		ring_add(1, 1 + i);
	virtq_publish(&vq);
	ring_kick();
	sim_consume(dq, n);
	virtq_disable_cb(&vq);
}

void ring_device_round(unsigned n)
{
	void *tok;
	uint32_t len;

	sim_consume(dq, n);
	sim_complete(dq, n);
	while (virtq_get_used(&vq, &tok, &len) == 1)
		;
}

/* ---- vring_need_event against a reference, all relevant windows ---- */

/* Reference: walk the window [old, new) one index at a time. */
static bool ref_need_event_walk(uint16_t event, uint16_t new_idx, uint16_t old_idx)
{
	for (uint16_t i = old_idx; i != new_idx; i++)
		if (i == event)
			return true;
	return false;
}

/* Reference: distance from old, in plain ints. */
static bool ref_need_event_dist(unsigned event, unsigned new_idx, unsigned old_idx)
{
	unsigned window = (new_idx + 65536u - old_idx) % 65536u;
	unsigned dist = (event + 65536u - old_idx) % 65536u;
	return dist < window;
}

static void test_need_event_reference(void)
{
	static const uint16_t olds[] = {0,      1,      2,      255,    256,   0x7ffe,
	                                0x7fff, 0x8000, 0xfff0, 0xfffe, 0xffff};
	unsigned long long cases = 0, bad = 0;

	/* Every window up to 1024 entries (> VIRTIO's 32768-entry ring would
	 * allow in one go with our cap) from boundary old values, every event
	 * around it, and every event at all for a few windows. */
	for (size_t o = 0; o < sizeof(olds) / sizeof(olds[0]); o++) {
		for (unsigned w = 0; w <= 1024; w++) {
			uint16_t old_idx = olds[o], new_idx = (uint16_t)(olds[o] + w);
			for (int d = -4; d <= 1030; d++) {
				uint16_t ev = (uint16_t)(old_idx + d);
				bool got = virtq_need_event(ev, new_idx, old_idx);
				cases++;
				if (got != ref_need_event_dist(ev, new_idx, old_idx))
					bad++;
				if (w <= 64 && got != ref_need_event_walk(ev, new_idx, old_idx))
					bad++;
			}
		}
		for (unsigned ev = 0; ev < 65536; ev++) {
			uint16_t old_idx = olds[o], new_idx = (uint16_t)(olds[o] + 300);
			cases++;
			if (virtq_need_event((uint16_t)ev, new_idx, old_idx) !=
			    ref_need_event_dist(ev, new_idx, old_idx))
				bad++;
		}
	}
	printf("     need_event: %llu cases compared\n", cases);
	CHECK_EQ(0, bad, "vring_need_event disagreements with the reference");
}

/* ---- a round trip ---- */

static void test_round_trip(void)
{
	void *tok;
	uint32_t len;

	ring_setup(8, true, SIM_SYNC);
	PROBE(round_trip_fresh);
	CHECK_EQ(0, ring_add(2, 0x1001), "first chain's id");
	CHECK_EQ(layout.second_id, ring_add(1, 0x1002), "second chain's id");
	CHECK(virtq_unpublished(&vq), "added but not published");
	CHECK_EQ(0, sim_published(dq), "device sees nothing before publish");
	PROBE(round_trip_added);
	virtq_publish(&vq);
	PROBE(round_trip_published);
	CHECK_EQ(2, sim_published(dq), "two chains visible after publish");
	ring_kick();
	CHECK_EQ(1, vq.stats.kicks, "kicks");
	CHECK_EQ(2, dq->frames, "chains the device saw");
	PROBE(round_trip_completed);
	CHECK_EQ(1, virtq_get_used(&vq, &tok, &len), "first completion");
	CHECK_EQ(0x1001, (uintptr_t)tok, "token of the first completion");
	PROBE(round_trip_first_taken);
	CHECK_EQ(1, virtq_get_used(&vq, &tok, &len), "second completion");
	CHECK_EQ(0x1002, (uintptr_t)tok, "token of the second completion");
	CHECK_EQ(0, virtq_get_used(&vq, &tok, &len), "nothing more");
	CHECK_EQ(8, virtq_num_free(&vq), "all descriptors back");
	CHECK_EQ(0, sim.driver_errors, "driver rule breaks seen by the device");
}

/* ---- wraparound past 65535, reordered completions, no lost wakeup ---- */

static void run_wraparound(const struct ring_wrap_case *c)
{
	uintptr_t in_flight[64];
	unsigned nin = 0, lost = 0, dup = 0;
	uint64_t added = 0, done = 0, descs = 0;
	uint32_t rng = c->seed;

	ring_setup(c->size, c->event_idx, SIM_MANUAL);
	dq->reorder = true;
	for (unsigned r = 0; r < c->rounds; r++) {
		void *tok;
		uint32_t len;
		unsigned want;
		int rc;

		rng = rng * 1103515245u + 12345u;
		want = (rng >> 16) % 4;
		for (unsigned i = 0; i < want && nin < 64; i++) {
			unsigned n = 1 + (rng >> (i + 3)) % 3;
			if (ring_add(n, added + 1) < 0)
				break;
			in_flight[nin++] = added + 1;
			added++;
			descs += n;
		}
		/* Late publication: most of the time at once, sometimes a
		 * round later. */
		if (!c->late_publish || (rng & 0x1000)) {
			virtq_publish(&vq);
			ring_kick();
		}
		if (sim_lost_wakeup(dq))
			lost++;
		/* Device: a random amount of work, re-arm when caught up. */
		sim_consume(dq, (rng >> 20) % 4);
		sim_complete(dq, (rng >> 24) % 4);
		if (dq->last_avail == sim_published(dq) && (rng & 0x100))
			sim_idle(dq);
		while ((rc = virtq_get_used(&vq, &tok, &len)) == 1) {
			unsigned k;
			for (k = 0; k < nin && in_flight[k] != (uintptr_t)tok; k++)
				;
			if (k == nin) {
				dup++;
				continue;
			}
			in_flight[k] = in_flight[--nin];
			done++;
		}
		CHECK_EQ(0, rc < 0, "no fault from a well-behaved device");
		if (rc < 0)
			return;
	}
	printf("     size %u event_idx=%d%s: %llu chains, %llu laps, used wrapped %llu times, "
	       "%llu kicks, %llu suppressed, %llu interrupts\n",
	       c->size, c->event_idx, c->late_publish ? " late publish" : "",
	       (unsigned long long)added, (unsigned long long)(descs / c->size),
	       (unsigned long long)(done >> 16), (unsigned long long)vq.stats.kicks,
	       (unsigned long long)vq.stats.kicks_suppressed, (unsigned long long)dq->interrupts);
	CHECK(descs / c->size > 1000, "ran over a thousand laps");
	CHECK(added > c->min_chains, "chain count past 2^16 (as many times as the case asks)");
	CHECK_EQ(0, lost, "device idle with work and no kick (lost wakeup)");
	CHECK_EQ(0, dup, "tokens returned that were not in flight");
	CHECK_EQ(added - done, nin, "in flight by count");
	CHECK_EQ(nin, virtq_chains_in_flight(&vq), "in flight by the ring");
	CHECK_EQ(0, sim.driver_errors, "driver rule breaks seen by the device");
	CHECK(vq.stats.kicks_suppressed > 0, "some kicks suppressed");
	PROBE(wrap_done, c);
}

static void test_wraparound(void)
{
	for (const struct ring_wrap_case *c = layout.wraps; c->size; c++)
		run_wraparound(c);
}

/* ---- a full ring is back-pressure, and changes nothing ---- */

static void test_full_ring(void)
{
	void *tok;
	uint32_t len;

	for (unsigned n = 1; n <= 2; n++) {
		ring_setup(16, true, SIM_MANUAL);
		for (unsigned i = 0; i < 16 / n; i++)
			CHECK(ring_add(n, 100 + i) >= 0, "chain fits");
		CHECK_EQ(-VIRTQ_ENOSPC, ring_add(n, 999), "one chain too many");
		if (n > 1)
			CHECK_EQ(-VIRTQ_ENOSPC, ring_add(1, 999), "no descriptor left");
		CHECK_EQ(0, virtq_num_free(&vq), "free descriptors");
		PROBE(full_ring_full, n);
		virtq_publish(&vq);
		ring_kick();
		sim_consume(dq, 1);
		sim_complete(dq, 1);
		CHECK_EQ(1, virtq_get_used(&vq, &tok, &len), "one completion");
		CHECK_EQ(-VIRTQ_ENOSPC, ring_add(n + 1, 998), "n + 1 descriptors with n free");
		CHECK(ring_add(n, 997) >= 0, "n descriptors with n free");
		virtq_publish(&vq);
		PROBE(full_ring_refilled, n);
		CHECK_EQ(0, sim.driver_errors, "ring rules");
	}
}

static void test_bad_requests(void)
{
	struct virtq_buf b[2] = {{(uintptr_t)payload, 8, true}, {(uintptr_t)payload, 8, false}};
	struct virtq_buf z = {(uintptr_t)payload, 0, false};

	ring_setup(8, true, SIM_MANUAL);
	CHECK_EQ(-VIRTQ_EINVAL, virtq_add(&vq, b, 2, NULL), "readable after writable");
	CHECK_EQ(-VIRTQ_EINVAL, virtq_add(&vq, &z, 1, NULL), "zero-length buffer");
	CHECK_EQ(-VIRTQ_EINVAL, virtq_add(&vq, b, 0, NULL), "no buffers");
	PROBE(bad_requests);
	CHECK_EQ(-VIRTQ_EINVAL,
	         virtq_init(&vq, 0, VIRTQ_MAX_SIZE * 2, true, shim_alloc, ring_notify, NULL),
	         "size above VIRTQ_MAX_SIZE");
}

/* ---- available buffer notifications: kick suppression ---- */

static void test_flag_suppression(void)
{
	ring_setup(8, false, SIM_MANUAL);
	PROBE(flags_fresh);
	CHECK_EQ(0, virtq_kick_prepare(&vq), "nothing published: no kick");
	CHECK_EQ(0, vq.stats.kicks_suppressed, "and no suppression counted");
	ring_send(1);
	CHECK_EQ(1, vq.stats.kicks, "idle device: kick");
	PROBE(flags_busy);
	ring_send(2);
	CHECK_EQ(1, vq.stats.kicks, "busy device: no second kick");
	CHECK_EQ(1, vq.stats.kicks_suppressed, "suppressed");
	sim_run(dq);
	ring_send(3);
	CHECK_EQ(2, vq.stats.kicks, "re-armed device: kick");
	CHECK_EQ(0, dq->interrupts, "device never interrupted (notifications off honoured)");
	PROBE(flags_end);
}

/* EVENT_IDX: the device's own request via sim_idle(); one kick per batch,
 * none lost. */
static void test_event_idx_suppression(void)
{
	ring_setup(8, true, SIM_MANUAL);
	PROBE(event_idx_fresh);
	for (int i = 0; i < 5; i++) {
		ring_send(1 + i);
	}
	CHECK_EQ(1, vq.stats.kicks, "one kick while the device has not re-armed");
	CHECK_EQ(4, vq.stats.kicks_suppressed, "four suppressed");
	sim_run(dq);
	PROBE(device_asks, 5);
	/* Batched publication: three entries, one decision, one kick. */
	for (int i = 0; i < 3; i++)
		ring_add(1, 10 + i);
	virtq_publish(&vq);
	ring_kick();
	CHECK_EQ(2, vq.stats.kicks, "one kick for a batch of three");
	CHECK_EQ(0, sim_lost_wakeup(dq), "no lost wakeup");
	CHECK_EQ(0, sim.driver_errors, "ring rules (and the notification data)");
}

/* ---- used buffer notifications ---- */

/* For the halt policies (2.7.7.2, 2.7.10, 2.8.10): disabled, a completion
 * raises nothing; enable_cb() with a completion already waiting says so
 * (the caller must not halt); armed with nothing waiting, the next
 * completion raises exactly one interrupt. */
static void enable_cb_case(bool event_idx)
{
	void *tok;
	uint32_t len;

	ring_setup(8, event_idx, SIM_MANUAL);
	ring_post_taken(3);
	uint64_t base = dq->interrupts;
	sim_complete(dq, 1);
	CHECK_EQ(base, dq->interrupts, "disabled: a completion raises no interrupt");
	CHECK_EQ(1, virtq_enable_cb(&vq), "enable_cb sees the waiting completion (do not halt)");
	CHECK_EQ(1, virtq_get_used(&vq, &tok, &len), "take it");
	CHECK_EQ(0, virtq_enable_cb(&vq), "armed, nothing waiting");
	PROBE(cb_armed, event_idx);
	CHECK(sim_irq_armed(dq), "the device would interrupt");
	sim_complete(dq, 1);
	CHECK_EQ(base + 1, dq->interrupts, "armed: the next completion interrupts");
	virtq_disable_cb(&vq);
	PROBE(cb_disarmed, event_idx);
	CHECK_EQ(1, virtq_get_used(&vq, &tok, &len), "take the second");
	sim_complete(dq, 1);
	CHECK_EQ(base + 1, dq->interrupts, "disabled again: no interrupt");
	CHECK_EQ(2, vq.stats.cb_enables, "two enable_cb calls counted");
}

static void test_enable_cb(void)
{
	enable_cb_case(true);
	enable_cb_case(false);
}

/* Interrupt moderation by count (RX_COALESCE): enable_cb_after(k) with
 * EVENT_IDX gets no interrupt for the first k-1 completions of
 * one-descriptor chains and exactly one on the k-th; with k already
 * waiting it says "do not halt" (virtq_used_count()). Without EVENT_IDX
 * the first completion interrupts whatever k says. */
static void enable_cb_after_case(bool event_idx)
{
	void *tok;
	uint32_t len;
	uint64_t base;

	ring_setup(16, event_idx, SIM_MANUAL);
	ring_post_taken(12);
	base = dq->interrupts;
	CHECK_EQ(0, virtq_enable_cb_after(&vq, 4), "armed for 4, nothing waiting");
	if (event_idx)
		PROBE(cb_armed_after, 4);
	for (int i = 1; i <= 4; i++) {
		sim_complete(dq, 1);
		CHECK_EQ(i, virtq_used_count(&vq), "used_count counts what waits");
		if (event_idx)
			CHECK_EQ(base + (i == 4), dq->interrupts,
			         i < 4 ? "no interrupt before the k-th completion"
			               : "one interrupt on the k-th completion");
		else if (i == 1)
			CHECK_EQ(base + 1, dq->interrupts,
			         "no EVENT_IDX: the first completion interrupts");
	}
	virtq_disable_cb(&vq);
	/* 4 waiting: arming for 4 or fewer must not halt, for 5 may. */
	CHECK_EQ(1, virtq_enable_cb_after(&vq, 4), "k completions waiting: do not halt");
	CHECK_EQ(event_idx ? 0 : 1, virtq_enable_cb_after(&vq, 5),
	         event_idx ? "fewer than k waiting: halt" : "no EVENT_IDX: k is 1");
	CHECK_EQ(1, virtq_enable_cb_after(&vq, 0), "k = 0 is taken as 1");
	virtq_disable_cb(&vq);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(1, virtq_get_used(&vq, &tok, &len), "take them");
	CHECK_EQ(0, virtq_used_count(&vq), "none left");
	CHECK_EQ(0, sim_lost_wakeup(dq), "no lost wakeup");
}

static void test_enable_cb_after(void)
{
	enable_cb_after_case(true);
	enable_cb_after_case(false);
}

/* ---- device faults: detected, counted, reported, nothing freed twice ---- */

static void run_fault(const struct ring_fault_case *c, bool writable)
{
	unsigned got = 0;
	void *tok;
	uint32_t len;
	int rc = 0;

	ring_setup(8, true, SIM_MANUAL);
	/* A clean round first, so "twice" has a head to repeat that the
	 * driver has not reused (its free list is LIFO). */
	for (int i = 0; i < 4; i++)
		ring_add_dir(1, 7, writable);
	virtq_publish(&vq);
	ring_kick();
	sim_run(dq);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(1, virtq_get_used(&vq, &tok, &len), "clean completion");
	for (unsigned r = 0; r < c->rounds && rc >= 0; r++) {
		ring_add_dir(2, 1, writable);
		ring_add_dir(1, 2, writable);
		virtq_publish(&vq);
		ring_kick();
		/* One more added but not published: the device must not see it. */
		if (c->sf == SIM_FAULT_UNPUBLISHED || c->sf == SIM_FAULT_IDX_AHEAD)
			ring_add_dir(1, 4, writable);
		if (r == 0)
			dq->fault = c->sf;
		sim_run(dq);
		while ((rc = virtq_get_used(&vq, &tok, &len)) == 1)
			got++;
	}
	printf("     fault %s: %s\n", c->name, rc < 0 ? "detected" : "MISSED");
	CHECK_EQ(-VIRTQ_EDEVICE, rc, c->name);
	CHECK_EQ(1, vq.stats.faults[c->expect], c->name);
	CHECK_EQ(1, virtq_faults(&vq), "exactly one fault counted");
	CHECK(got <= 2 * c->rounds, "no token returned twice");
	CHECK_EQ(-VIRTQ_EDEVICE, virtq_get_used(&vq, &tok, &len), "dead ring stays dead");
	CHECK_EQ(1, virtq_faults(&vq), "and is not re-counted");
	CHECK_EQ(-VIRTQ_EDEVICE, ring_add(1, 3), "no adds on a dead ring");
}

static void test_faults(void)
{
	static const struct ring_fault_case len = {SIM_FAULT_LEN, VIRTQ_FAULT_LEN,
	                                           "used_len_beyond_buffer (writable)", 1};

	for (int w = 0; w < 2; w++)
		for (const struct ring_fault_case *c = layout.faults; c->name; c++)
			run_fault(c, w);
	run_fault(&len, true);
}

/* A length on a chain with nothing writable (TX) is counted, not fatal,
 * and reported as 0. */
static void test_len_on_readonly_chain(void)
{
	void *tok;
	uint32_t len = 99;

	ring_setup(8, true, SIM_MANUAL);
	ring_add(2, 5);
	virtq_publish(&vq);
	ring_kick();
	dq->fault = SIM_FAULT_LEN_READONLY;
	sim_run(dq);
	CHECK_EQ(1, virtq_get_used(&vq, &tok, &len), "completion taken");
	CHECK_EQ(5, (uintptr_t)tok, "its token");
	CHECK_EQ(0, len, "length reported as 0");
	CHECK_EQ(1, vq.stats.len_readonly, "counted");
	CHECK_EQ(0, virtq_faults(&vq), "not a fault");
	CHECK_EQ(8, virtq_num_free(&vq), "descriptors back");
}

int main(void)
{
	printf("%s (VIRTQ_MAX_SIZE=%d)\n", layout.name, VIRTQ_MAX_SIZE);
	RUN(test_need_event_reference);
	RUN(test_round_trip);
	RUN(test_wraparound);
	RUN(test_full_ring);
	RUN(test_bad_requests);
	RUN(test_flag_suppression);
	RUN(test_event_idx_suppression);
	RUN(test_enable_cb);
	RUN(test_enable_cb_after);
	RUN(test_faults);
	RUN(test_len_on_readonly_chain);
	layout.tests();
	return check_done("%s", layout.name);
}
