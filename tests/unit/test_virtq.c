/*
 * test_virtq.c: the split ring (drivers/virtio/virtq.c) against the
 * simulated device: event index arithmetic, 16-bit wraparound, a full ring,
 * notification suppression, private shadows and every device fault.
 */
#include <stdio.h>
#include <string.h>
#include "drivers/virtio/virtq.h"
#include "tests/unit/check.h"
#include "tests/unit/host_shim.h"
#include "tests/unit/sim_dev.h"

int check_failed, check_total;

static struct virtq vq;
static struct sim_queue *dq = &sim.q[1];
static uint8_t payload[64];

static void ring_notify(void *ctx, uint16_t qidx, uint16_t avail_idx)
{
	(void)ctx;
	sim_doorbell(qidx, avail_idx);
}

/* A fresh queue of the given size, device attached, device live. */
static void ring_setup(uint16_t size, bool event_idx, enum sim_mode mode)
{
	shim_reset();
	sim_reset(0);
	sim.status = VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK |
	             VIRTIO_STATUS_DRIVER_OK;
	sim.mode = mode;
	CHECK_EQ(0, virtq_init(&vq, 1, size, event_idx, shim_alloc, ring_notify, NULL),
	         "virtq_init");
	sim_attach(dq, &vq, 1);
	for (unsigned i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)i;
}

/* One chain of n descriptors (12-byte header + frame), device-readable
 * (TX) or device-writable (RX). */
static int ring_add_dir(unsigned n, uintptr_t token, bool writable)
{
	struct virtq_buf b[4];

	for (unsigned i = 0; i < n; i++)
		b[i] = (struct virtq_buf){(uintptr_t)payload, i == 0 ? 12 : 20, writable};
	return virtq_add(&vq, b, n, (void *)token);
}

static int ring_add(unsigned n, uintptr_t token)
{
	return ring_add_dir(n, token, false);
}

static void ring_kick(void)
{
	if (virtq_kick_prepare(&vq))
		virtq_notify(&vq);
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

/* ---- basic round trip ---- */

static void test_round_trip(void)
{
	void *tok;
	uint32_t len;

	ring_setup(8, true, SIM_SYNC);
	CHECK_EQ(0, ring_add(2, 0x1001), "first head id");
	CHECK_EQ(2, ring_add(1, 0x1002), "second head id");
	CHECK(virtq_unpublished(&vq), "added but not published");
	CHECK_EQ(0, sim_published(dq), "avail->idx before publish");
	virtq_publish(&vq);
	CHECK_EQ(2, sim_published(dq), "avail->idx after publish");
	ring_kick();
	CHECK_EQ(1, vq.stats.kicks, "kicks");
	CHECK_EQ(2, dq->frames, "chains the device saw");
	CHECK_EQ(1, virtq_get_used(&vq, &tok, &len), "first completion");
	CHECK_EQ(0x1001, (uintptr_t)tok, "token of the first completion");
	CHECK_EQ(1, virtq_get_used(&vq, &tok, &len), "second completion");
	CHECK_EQ(0x1002, (uintptr_t)tok, "token of the second completion");
	CHECK_EQ(0, virtq_get_used(&vq, &tok, &len), "nothing more");
	CHECK_EQ(8, virtq_num_free(&vq), "all descriptors back");
	CHECK_EQ(0, sim.driver_errors, "driver rule breaks seen by the device");
}

/* ---- wraparound past 65535, reordered completions, no lost wakeup ---- */

static void run_wraparound(bool event_idx)
{
	enum { ROUNDS = 400000 };
	uintptr_t in_flight[8];
	unsigned nin = 0, lost = 0, dup = 0;
	uint64_t added = 0, done = 0;
	uint32_t rng = 99;

	ring_setup(8, event_idx, SIM_MANUAL);
	dq->reorder = true;
	for (unsigned r = 0; r < ROUNDS; r++) {
		void *tok;
		uint32_t len;
		unsigned want;
		int rc;

		rng = rng * 1103515245u + 12345u;
		want = (rng >> 16) % 4;
		for (unsigned i = 0; i < want; i++) {
			unsigned n = 1 + (rng >> (i + 3)) % 3;
			if (ring_add(n, added + 1) < 0)
				break;
			in_flight[nin++] = added + 1;
			added++;
		}
		virtq_publish(&vq);
		ring_kick();
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
	printf("     wraparound event_idx=%d: %llu chains, used idx wrapped %llu times, "
	       "%llu kicks, %llu suppressed\n",
	       event_idx, (unsigned long long)added, (unsigned long long)(done >> 16),
	       (unsigned long long)vq.stats.kicks, (unsigned long long)vq.stats.kicks_suppressed);
	CHECK(added > 3 * 65536, "ran past 65535 several times");
	CHECK_EQ(0, lost, "device idle with work and no kick (lost wakeup)");
	CHECK_EQ(0, dup, "tokens returned that were not in flight");
	CHECK_EQ(added - done, nin, "in flight by count");
	CHECK_EQ(nin, virtq_chains_in_flight(&vq), "in flight by the ring");
	CHECK_EQ(0, sim.driver_errors, "driver rule breaks seen by the device");
	CHECK(vq.stats.kicks_suppressed > 0, "some kicks suppressed");
}

static void test_wraparound_event_idx(void)
{
	run_wraparound(true);
}

static void test_wraparound_flags(void)
{
	run_wraparound(false);
}

/* ---- a full ring is back-pressure, and changes nothing ---- */

static void test_full_ring(void)
{
	void *tok;
	uint32_t len;
	int i;

	ring_setup(16, true, SIM_MANUAL);
	for (i = 0; i < 16; i++)
		CHECK(ring_add(1, 100 + i) >= 0, "1-descriptor chain fits");
	CHECK_EQ(-VIRTQ_ENOSPC, ring_add(1, 999), "17th chain");
	CHECK_EQ(16, vq.avail_idx, "avail idx unchanged by the refused add");
	virtq_publish(&vq);
	ring_kick();
	sim_consume(dq, 1);
	sim_complete(dq, 1);
	CHECK_EQ(1, virtq_get_used(&vq, &tok, &len), "one completion");
	CHECK_EQ(-VIRTQ_ENOSPC, ring_add(2, 998), "2 descriptors with 1 free");
	CHECK(ring_add(1, 997) >= 0, "1 descriptor with 1 free");

	ring_setup(16, true, SIM_MANUAL);
	for (i = 0; i < 8; i++)
		CHECK(ring_add(2, 100 + i) >= 0, "2-descriptor chain fits");
	CHECK_EQ(-VIRTQ_ENOSPC, ring_add(2, 999), "9th 2-descriptor chain");
	CHECK_EQ(0, virtq_num_free(&vq), "free descriptors");
}

static void test_bad_requests(void)
{
	struct virtq_buf b[2] = {{(uintptr_t)payload, 8, true}, {(uintptr_t)payload, 8, false}};
	struct virtq_buf z = {(uintptr_t)payload, 0, false};

	ring_setup(8, true, SIM_MANUAL);
	CHECK_EQ(-VIRTQ_EINVAL, virtq_add(&vq, b, 2, NULL), "readable after writable");
	CHECK_EQ(-VIRTQ_EINVAL, virtq_add(&vq, &z, 1, NULL), "zero-length buffer");
	CHECK_EQ(-VIRTQ_EINVAL, virtq_add(&vq, b, 0, NULL), "no buffers");
	CHECK_EQ(-VIRTQ_EINVAL, virtq_init(&vq, 0, 12, true, shim_alloc, ring_notify, NULL),
	         "size not a power of two");
	CHECK_EQ(-VIRTQ_EINVAL,
	         virtq_init(&vq, 0, VIRTQ_MAX_SIZE * 2, true, shim_alloc, ring_notify, NULL),
	         "size above VIRTQ_MAX_SIZE");
}

/* ---- suppression ---- */

static void test_flag_suppression(void)
{
	ring_setup(8, false, SIM_MANUAL);
	CHECK_EQ(VIRTQ_AVAIL_F_NO_INTERRUPT, vq.avail->flags, "driver asks for no interrupts");
	CHECK_EQ(0, virtq_kick_prepare(&vq), "nothing published: no kick");
	CHECK_EQ(0, vq.stats.kicks_suppressed, "and no suppression counted");
	ring_add(1, 1);
	virtq_publish(&vq);
	ring_kick();
	CHECK_EQ(1, vq.stats.kicks, "idle device: kick");
	ring_add(1, 2);
	virtq_publish(&vq);
	ring_kick();
	CHECK_EQ(1, vq.stats.kicks, "busy device (NO_NOTIFY): no second kick");
	CHECK_EQ(1, vq.stats.kicks_suppressed, "suppressed");
	sim_run(dq);
	ring_add(1, 3);
	virtq_publish(&vq);
	ring_kick();
	CHECK_EQ(2, vq.stats.kicks, "re-armed device: kick");
	CHECK_EQ(0, dq->interrupts, "device never interrupted (NO_INTERRUPT honoured)");
}

static void test_event_idx_suppression(void)
{
	ring_setup(8, true, SIM_MANUAL);
	CHECK_EQ(0, vq.avail->flags, "flags 0 with EVENT_IDX (2.7.10)");
	for (int i = 0; i < 5; i++) {
		ring_add(1, 1 + i);
		virtq_publish(&vq);
		ring_kick();
	}
	CHECK_EQ(1, vq.stats.kicks, "one kick while the device has not re-armed");
	CHECK_EQ(4, vq.stats.kicks_suppressed, "four suppressed");
	sim_run(dq);
	CHECK_EQ(5, *vq.avail_event, "device asks to be told about entry 5");
	/* Batched publication: three entries, one decision, one kick. */
	for (int i = 0; i < 3; i++)
		ring_add(1, 10 + i);
	virtq_publish(&vq);
	ring_kick();
	CHECK_EQ(2, vq.stats.kicks, "one kick for a batch of three");
	CHECK_EQ(0, sim_lost_wakeup(dq), "no lost wakeup");
}

/* Used-buffer notifications for the halt policies (2.7.7.2, 2.7.10):
 * disabled, a completion raises nothing; enable_cb() with a completion
 * already waiting says so (the caller must not halt); armed with nothing
 * waiting, the next completion raises exactly one interrupt. */
static void enable_cb_case(bool event_idx)
{
	void *tok;
	uint32_t len;

	ring_setup(8, event_idx, SIM_MANUAL);
	for (int i = 0; i < 3; i++)
		ring_add(1, 1 + i);
	virtq_publish(&vq);
	ring_kick();
	sim_consume(dq, 3);
	virtq_disable_cb(&vq);
	uint64_t base = dq->interrupts;
	sim_complete(dq, 1);
	CHECK_EQ(base, dq->interrupts, "disabled: a completion raises no interrupt");
	CHECK_EQ(1, virtq_enable_cb(&vq), "enable_cb sees the waiting completion (do not halt)");
	CHECK_EQ(1, virtq_get_used(&vq, &tok, &len), "take it");
	CHECK_EQ(0, virtq_enable_cb(&vq), "armed, nothing waiting");
	if (event_idx)
		CHECK_EQ(vq.last_used, *vq.used_event, "used_event = next entry to read");
	else
		CHECK_EQ(0, vq.avail->flags, "NO_INTERRUPT cleared");
	sim_complete(dq, 1);
	CHECK_EQ(base + 1, dq->interrupts, "armed: the next completion interrupts");
	virtq_disable_cb(&vq);
	if (!event_idx)
		CHECK_EQ(VIRTQ_AVAIL_F_NO_INTERRUPT, vq.avail->flags, "NO_INTERRUPT set again");
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

/* Interrupt moderation by count (2.7.10): enable_cb_after(k) with EVENT_IDX
 * gets no interrupt for the first k-1 completions and exactly one on the
 * k-th; with k already waiting it says "do not halt". Without EVENT_IDX
 * the first completion interrupts whatever k says. */
static void enable_cb_after_case(bool event_idx)
{
	void *tok;
	uint32_t len;
	uint64_t base;

	ring_setup(16, event_idx, SIM_MANUAL);
	for (int i = 0; i < 12; i++)
		ring_add(1, 1 + i);
	virtq_publish(&vq);
	ring_kick();
	sim_consume(dq, 12);
	virtq_disable_cb(&vq);
	base = dq->interrupts;
	CHECK_EQ(0, virtq_enable_cb_after(&vq, 4), "armed for 4, nothing waiting");
	if (event_idx)
		CHECK_EQ((uint16_t)(vq.last_used + 3), *vq.used_event,
		         "used_event = last_used + k - 1");
	for (int i = 1; i <= 4; i++) {
		sim_complete(dq, 1);
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
	CHECK_EQ(0, sim_lost_wakeup(dq), "no lost wakeup");
}

static void test_enable_cb_after(void)
{
	enable_cb_after_case(true);
	enable_cb_after_case(false);
}

/* Barrier D under an emulator whose fences do not reach the device
 * (virtq_set_sync(), sim weak_order): the register read comes after the
 * re-arm store and before the re-read, so a completion the device
 * publishes at the read is seen (do not halt) and one it publishes after
 * it raises an interrupt. */
static uint16_t sync_saw_event, sync_saw_flags;
static unsigned sync_calls;
static bool sync_completes;

static void ring_sync(void *ctx)
{
	(void)ctx;
	sync_calls++;
	sync_saw_event = *vq.used_event;
	sync_saw_flags = vq.avail->flags;
	sim_register_access();
	if (sync_completes)
		sim_complete(dq, 1);
}

static void enable_cb_sync_case(bool event_idx)
{
	void *tok;
	uint32_t len;
	uint64_t base;

	ring_setup(8, event_idx, SIM_MANUAL);
	dq->weak_order = true;
	virtq_set_sync(&vq, ring_sync, NULL);
	sync_calls = 0;
	for (int i = 0; i < 4; i++)
		ring_add(1, 1 + i);
	virtq_publish(&vq);
	ring_kick();
	sim_consume(dq, 4);
	virtq_disable_cb(&vq);
	sync_completes = true;
	CHECK_EQ(1, virtq_enable_cb(&vq), "a completion published at the read is seen after it");
	sync_completes = false;
	CHECK_EQ(1, sync_calls, "one register read per re-arm");
	CHECK(event_idx ? sync_saw_event == vq.last_used : sync_saw_flags == 0,
	      "the read comes after the re-arm store");
	CHECK_EQ(1, virtq_get_used(&vq, &tok, &len), "take it");
	virtq_disable_cb(&vq);
	CHECK_EQ(0, virtq_enable_cb(&vq), "armed, nothing waiting");
	base = dq->interrupts;
	sim_complete(dq, 1);
	CHECK_EQ(base + 1, dq->interrupts, "the device saw the re-arm: the completion interrupts");
	CHECK_EQ(2, vq.stats.syncs, "register reads counted");
	virtq_disable_cb(&vq);
	CHECK_EQ(1, virtq_get_used(&vq, &tok, &len), "take the second");
	/* The model has teeth: a doorbell while notifications are off, then a
	 * re-arm without the read, and the device never hears of it. */
	sim_register_access();
	virtq_set_sync(&vq, NULL, NULL);
	CHECK_EQ(0, virtq_enable_cb(&vq), "armed, nothing waiting");
	base = dq->interrupts;
	sim_complete(dq, 1);
	CHECK_EQ(base, dq->interrupts, "without the read the device sees the old request");
	CHECK_EQ(2, vq.stats.syncs, "no read without a sync function");
}

static void test_enable_cb_sync(void)
{
	enable_cb_sync_case(true);
	enable_cb_sync_case(false);
}

/* Barrier B under an emulator (virtq_set_sync()): a "no kick" answer read
 * before our avail->idx store reached the device may be stale. The
 * register read serialises us with a device that re-armed meanwhile (here
 * the sync moves avail_event to where the device found the ring: nothing
 * new), and the second read asks for the kick. A "yes" needs no read. */
static uint16_t kick_sync_event;
static unsigned kick_sync_calls;

static void kick_sync(void *ctx)
{
	(void)ctx;
	kick_sync_calls++;
	*vq.avail_event = kick_sync_event;
}

static void test_kick_sync(void)
{
	ring_setup(8, true, SIM_MANUAL);
	virtq_set_sync(&vq, kick_sync, NULL);
	kick_sync_calls = 0;
	ring_add(1, 1);
	virtq_publish(&vq);  /* [0, 1) to decide */
	*vq.avail_event = 5; /* stale: "not before entry 5" */
	kick_sync_event = 0; /* the device re-armed having seen nothing */
	CHECK_EQ(1, virtq_kick_prepare(&vq), "after the read the device asks for the kick");
	CHECK_EQ(1, kick_sync_calls, "one register read before trusting a no");
	CHECK_EQ(1, vq.stats.kick_rescues, "the rescued kick counted");
	CHECK_EQ(0, vq.stats.kicks_suppressed, "a rescued kick is not a suppressed one");
	ring_add(1, 2);
	virtq_publish(&vq); /* [1, 2) */
	*vq.avail_event = 1;
	CHECK_EQ(1, virtq_kick_prepare(&vq), "the device asks");
	CHECK_EQ(1, kick_sync_calls, "no read for a yes");
	ring_add(1, 3);
	virtq_publish(&vq); /* [2, 3) */
	*vq.avail_event = 7;
	kick_sync_event = 7;
	CHECK_EQ(0, virtq_kick_prepare(&vq), "the device really does not ask");
	CHECK_EQ(2, vq.stats.kick_syncs, "a read for every no");
	CHECK_EQ(1, vq.stats.kicks_suppressed, "that no is a suppressed kick");
	virtq_set_sync(&vq, NULL, NULL);
	ring_add(1, 4);
	virtq_publish(&vq); /* [3, 4) */
	*vq.avail_event = 9;
	kick_sync_event = 3;
	CHECK_EQ(0, virtq_kick_prepare(&vq), "without a sync function the no stands");
	CHECK_EQ(2, kick_sync_calls, "no read without a sync function");
}

/* More than 2^16 entries published between two decisions: the window
 * aliases, so the ring must ask for a kick rather than trust the formula. */
static void test_unkicked_window_wrap(void)
{
	void *tok;
	uint32_t len;

	ring_setup(8, true, SIM_MANUAL);
	for (int r = 0; r < 9000; r++) {
		for (int i = 0; i < 8; i++)
			ring_add(1, 1 + i);
		virtq_publish(&vq);
		sim_consume(dq, 8); /* a polling device: no doorbell needed */
		sim_complete(dq, 8);
		while (virtq_get_used(&vq, &tok, &len) == 1)
			;
	}
	*vq.avail_event = vq.avail_pub; /* formula alone would say "no" */
	CHECK_EQ(1, virtq_kick_prepare(&vq), "kick forced after 72000 undecided entries");
}

/* ---- nothing published is read back ---- */

static void test_shadows(void)
{
	ring_setup(8, true, SIM_SYNC);
	ring_add(2, 1);
	virtq_publish(&vq);
	/* Scribble over what we published: the driver must not care. */
	vq.avail->idx = 0x5555;
	for (int i = 0; i < 8; i++)
		vq.desc[i].next = 0xdead;
	ring_add(2, 2);
	virtq_publish(&vq);
	CHECK_EQ(2, vq.avail->idx, "avail->idx comes from the shadow");
	CHECK_EQ(2, vq.avail->ring[1], "second head from the private free list");
	CHECK_EQ(3, vq.desc[2].next, "chain link from the private list");
}

/* ---- device faults: detected, counted, reported, nothing freed twice ---- */

static void run_fault(enum sim_fault sf, enum virtq_fault expect, const char *name, bool writable)
{
	unsigned got = 0;
	void *tok;
	uint32_t len;
	int rc;

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
	ring_add_dir(2, 1, writable);
	ring_add_dir(1, 2, writable);
	virtq_publish(&vq);
	ring_kick();
	/* One more added but not published: the device must not see it. */
	if (sf == SIM_FAULT_UNPUBLISHED || sf == SIM_FAULT_IDX_AHEAD)
		ring_add_dir(1, 4, writable);
	dq->fault = sf;
	sim_run(dq);
	while ((rc = virtq_get_used(&vq, &tok, &len)) == 1)
		got++;
	printf("     fault %s: %s\n", name, rc < 0 ? "detected" : "MISSED");
	CHECK_EQ(-VIRTQ_EDEVICE, rc, name);
	CHECK_EQ(1, vq.stats.faults[expect], name);
	CHECK_EQ(1, virtq_faults(&vq), "exactly one fault counted");
	CHECK(got <= 2, "no token returned twice");
	CHECK_EQ(-VIRTQ_EDEVICE, virtq_get_used(&vq, &tok, &len), "dead ring stays dead");
	CHECK_EQ(1, virtq_faults(&vq), "and is not re-counted");
	CHECK_EQ(-VIRTQ_EDEVICE, ring_add(1, 3), "no adds on a dead ring");
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

static void test_faults(void)
{
	for (int w = 0; w < 2; w++) {
		run_fault(SIM_FAULT_ID_RANGE, VIRTQ_FAULT_ID_RANGE, "used_id_out_of_range", w);
		run_fault(SIM_FAULT_NOT_IN_FLIGHT, VIRTQ_FAULT_NOT_IN_FLIGHT, "used_id_twice", w);
		run_fault(SIM_FAULT_NOT_HEAD, VIRTQ_FAULT_NOT_IN_FLIGHT, "used_id_not_a_head", w);
		run_fault(SIM_FAULT_IDX_JUMP, VIRTQ_FAULT_IDX_JUMP, "used_idx_jump", w);
		run_fault(SIM_FAULT_IDX_AHEAD, VIRTQ_FAULT_IDX_JUMP,
		          "used_idx_one_past_published (below the ring size)", w);
		run_fault(SIM_FAULT_UNPUBLISHED, VIRTQ_FAULT_NOT_PUBLISHED, "used_id_not_published",
		          w);
	}
	run_fault(SIM_FAULT_LEN, VIRTQ_FAULT_LEN, "used_len_beyond_buffer (writable)", true);
}

int main(void)
{
	printf("test_virtq (VIRTQ_MAX_SIZE=%d)\n", VIRTQ_MAX_SIZE);
	RUN(test_need_event_reference);
	RUN(test_enable_cb);
	RUN(test_enable_cb_after);
	RUN(test_enable_cb_sync);
	RUN(test_kick_sync);
	RUN(test_round_trip);
	RUN(test_wraparound_event_idx);
	RUN(test_wraparound_flags);
	RUN(test_full_ring);
	RUN(test_bad_requests);
	RUN(test_flag_suppression);
	RUN(test_event_idx_suppression);
	RUN(test_unkicked_window_wrap);
	RUN(test_shadows);
	RUN(test_faults);
	RUN(test_len_on_readonly_chain);
	printf("test_virtq: %d checks, %d failed\n", check_total, check_failed);
	return check_failed ? 1 : 0;
}
