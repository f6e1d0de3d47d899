/*
 * test_virtq_packed.c: the packed ring (drivers/virtio/virtq_packed.c,
 * virtio 1.2 section 2.8) against the simulated device playing the packed
 * device side: descriptor flags and wrap counters, the first descriptor
 * written last, wraparound over many laps with chains that cross the end
 * of the ring, out-of-order completion, a full ring, the Device Area (kick
 * suppression: ENABLE / DISABLE / DESC) and the Driver Area (interrupts),
 * and every device fault.
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

static void ring_notify(void *ctx, uint16_t qidx, uint16_t next)
{
	(void)ctx;
	sim_doorbell(qidx, next);
}

static void ring_setup(uint16_t size, bool event_idx, enum sim_mode mode)
{
	shim_reset();
	sim_reset(0);
	sim.status = VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK |
	             VIRTIO_STATUS_DRIVER_OK;
	sim.mode = mode;
	CHECK_EQ(0, virtq_init(&vq, 1, size, event_idx, shim_alloc, ring_notify, NULL),
	         "virtq_init");
	CHECK(vq.packed, "the packed file is linked");
	sim_attach(dq, &vq, 1);
	for (unsigned i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)i;
}

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

static uint16_t flags_at(uint16_t pos)
{
	return vq.pdesc[pos].flags;
}

/* ---- descriptor flags, the first descriptor last, a round trip ---- */

static void test_round_trip(void)
{
	const uint16_t avail1 = VIRTQ_DESC_F_AVAIL; /* lap 1: AVAIL = 1, USED = 0 */
	void *tok;
	uint32_t len;

	ring_setup(8, true, SIM_SYNC);
	CHECK_EQ(VIRTQ_EVENT_F_DISABLE, vq.driver_event->flags, "interrupts start disabled");
	CHECK_EQ(0, ring_add(2, 0x1001), "first buffer id");
	CHECK_EQ(1, ring_add(1, 0x1002), "second buffer id");
	/* Added, not published: the later descriptor of the chain is
	 * written, the first ones are not (2.8.6). */
	CHECK_EQ(0, flags_at(0), "first descriptor of chain 1 not yet available");
	CHECK_EQ(avail1, flags_at(1), "its second descriptor already written");
	CHECK_EQ(0, flags_at(2), "chain 2's only descriptor not yet available");
	CHECK_EQ(0, sim_published(dq), "device sees nothing before publish");
	CHECK_EQ(0, vq.pdesc[1].id, "Buffer ID in the chain's last descriptor");
	virtq_publish(&vq);
	CHECK_EQ(avail1 | VIRTQ_DESC_F_NEXT, flags_at(0), "first descriptor: AVAIL|NEXT");
	CHECK_EQ(avail1, flags_at(2), "second chain: AVAIL");
	CHECK_EQ(2, sim_published(dq), "two chains visible");
	ring_kick();
	CHECK_EQ(1, vq.stats.kicks, "kicks");
	CHECK_EQ(2, dq->frames, "chains the device saw");
	/* The device wrote its used descriptors in place (in order: at the
	 * first descriptor of each chain). */
	CHECK_EQ(VIRTQ_DESC_F_AVAIL | VIRTQ_DESC_F_USED, flags_at(0) & 0x8080,
	         "used: AVAIL=USED=1");
	CHECK_EQ(1, virtq_get_used(&vq, &tok, &len), "first completion");
	CHECK_EQ(0x1001, (uintptr_t)tok, "token of the first completion");
	CHECK_EQ(2, vq.used_pos, "skipped the chain's two descriptors");
	CHECK_EQ(1, virtq_get_used(&vq, &tok, &len), "second completion");
	CHECK_EQ(0x1002, (uintptr_t)tok, "token of the second completion");
	CHECK_EQ(0, virtq_get_used(&vq, &tok, &len), "nothing more");
	CHECK_EQ(8, virtq_num_free(&vq), "all descriptors back");
	CHECK_EQ(0, sim.driver_errors, "driver rule breaks seen by the device");
}

/* A chain across the end of the ring: descriptors after the wrap carry the
 * next lap's bits (AVAIL = 0, USED = 1), and the wrap counters toggle. */
static void test_chain_across_the_end(void)
{
	void *tok;
	uint32_t len;

	ring_setup(5, true, SIM_SYNC); /* not a power of two: 2.8 allows it */
	for (int i = 0; i < 4; i++)
		ring_add(1, 10 + i);
	virtq_publish(&vq);
	ring_kick();
	while (virtq_get_used(&vq, &tok, &len) == 1)
		;
	CHECK_EQ(4, vq.used_pos, "used position before the wrap");
	ring_add(3, 20); /* positions 4, 0, 1 */
	CHECK_EQ(2, vq.next_avail, "next available position after the wrap");
	CHECK(!vq.avail_wrap, "Driver Ring Wrap Counter toggled");
	CHECK_EQ(VIRTQ_DESC_F_USED | VIRTQ_DESC_F_NEXT, flags_at(0), "lap 2 bits after the wrap");
	virtq_publish(&vq);
	CHECK_EQ(VIRTQ_DESC_F_AVAIL | VIRTQ_DESC_F_NEXT, flags_at(4),
	         "first descriptor: lap 1 bits");
	ring_kick();
	CHECK_EQ(1, virtq_get_used(&vq, &tok, &len), "the wrapped chain completes");
	CHECK_EQ(20, (uintptr_t)tok, "its token");
	CHECK_EQ(2, vq.used_pos, "used position after the wrap");
	CHECK(!vq.used_wrap, "used wrap counter toggled");
	CHECK_EQ(0, sim.driver_errors, "ring rules");
}

/* ---- out-of-order completion ---- */

static void test_out_of_order(void)
{
	static const unsigned order[] = {2, 0, 3, 1};
	void *tok;
	uint32_t len;
	unsigned k;

	ring_setup(16, true, SIM_MANUAL);
	/* Four chains of 2, 1, 3, 1 descriptors (positions 0-1, 2, 3-5, 6). */
	ring_add(2, 100);
	ring_add(1, 101);
	ring_add(3, 102);
	ring_add(1, 103);
	virtq_publish(&vq);
	ring_kick();
	sim_consume(dq, 4);
	for (k = 0; k < 4; k++) {
		/* Complete chain order[k]: where it sits among those pending. */
		for (unsigned i = 0; i < dq->npending; i++) {
			if (dq->pending[i].head != (uint16_t)order[k])
				continue;
			struct sim_chain tmp = dq->pending[i];
			dq->pending[i] = dq->pending[0];
			dq->pending[0] = tmp;
			break;
		}
		sim_complete(dq, 1);
		CHECK_EQ(1, virtq_get_used(&vq, &tok, &len), "a completion");
		CHECK_EQ(100 + order[k], (uintptr_t)tok, "completions in the device's order");
	}
	/* Used descriptors at 0 (id 2, skip 3), 3 (id 0, skip 2), 5 (id 3,
	 * skip 1), 6 (id 1, skip 1): the driver followed each skip. */
	CHECK_EQ(7, vq.used_pos, "used position = descriptors taken back");
	CHECK_EQ(16, virtq_num_free(&vq), "every descriptor free");
	CHECK_EQ(0, virtq_chains_in_flight(&vq), "nothing in flight");
	CHECK_EQ(0, virtq_get_used(&vq, &tok, &len), "nothing more");
	CHECK_EQ(0, sim.driver_errors, "ring rules");
}

/* ---- many laps, random chains, reordered completions ---- */

static void run_wraparound(uint16_t size, bool event_idx)
{
	enum { ROUNDS = 300000 };
	uintptr_t in_flight[64];
	unsigned nin = 0, lost = 0, dup = 0;
	uint64_t added = 0, done = 0, descs = 0;
	uint32_t rng = 99 + size;

	ring_setup(size, event_idx, SIM_MANUAL);
	dq->reorder = true;
	for (unsigned r = 0; r < ROUNDS; r++) {
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
		/* Publish most of the time at once, sometimes a round later. */
		if (rng & 0x1000) {
			virtq_publish(&vq);
			ring_kick();
		}
		if (sim_lost_wakeup(dq))
			lost++;
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
	printf("     size %u event_idx=%d: %llu chains, %llu laps, %llu kicks, %llu suppressed, "
	       "%llu interrupts\n",
	       size, event_idx, (unsigned long long)added, (unsigned long long)(descs / size),
	       (unsigned long long)vq.stats.kicks, (unsigned long long)vq.stats.kicks_suppressed,
	       (unsigned long long)dq->interrupts);
	CHECK(descs / size > 1000, "ran over a thousand laps");
	CHECK(added > 65536, "chain count past 2^16");
	CHECK_EQ(0, lost, "device idle with work and no kick (lost wakeup)");
	CHECK_EQ(0, dup, "tokens returned that were not in flight");
	CHECK_EQ(added - done, nin, "in flight by count");
	CHECK_EQ(nin, virtq_chains_in_flight(&vq), "in flight by the ring");
	CHECK_EQ(0, sim.driver_errors, "driver rule breaks seen by the device");
	CHECK(vq.stats.kicks_suppressed > 0, "some kicks suppressed");
	CHECK_EQ(0, dq->interrupts, "interrupts while the driver polls (Driver Area DISABLE)");
}

static void test_wraparound(void)
{
	run_wraparound(8, true);
	run_wraparound(8, false);
	run_wraparound(7, true); /* chains wrap at odd places */
	run_wraparound(256, true);
}

/* ---- a full ring is back-pressure ---- */

static void test_full_ring(void)
{
	void *tok;
	uint32_t len;

	ring_setup(16, true, SIM_MANUAL);
	for (int i = 0; i < 8; i++)
		CHECK(ring_add(2, 100 + i) >= 0, "2-descriptor chain fits");
	CHECK_EQ(-VIRTQ_ENOSPC, ring_add(1, 999), "no descriptor left");
	CHECK_EQ(0, virtq_num_free(&vq), "free descriptors");
	CHECK_EQ(0, vq.next_avail, "next position back at 0 ...");
	CHECK(!vq.avail_wrap, "... in the next lap");
	virtq_publish(&vq);
	ring_kick();
	sim_consume(dq, 1);
	sim_complete(dq, 1);
	CHECK_EQ(1, virtq_get_used(&vq, &tok, &len), "one completion");
	CHECK_EQ(-VIRTQ_ENOSPC, ring_add(3, 998), "3 descriptors with 2 free");
	CHECK(ring_add(2, 997) >= 0, "2 descriptors with 2 free");
	virtq_publish(&vq);
	CHECK_EQ(VIRTQ_DESC_F_USED | VIRTQ_DESC_F_NEXT, flags_at(0), "refilled slot: lap 2 bits");
	CHECK_EQ(0, sim.driver_errors, "ring rules");
}

static void test_bad_requests(void)
{
	struct virtq_buf b[2] = {{(uintptr_t)payload, 8, true}, {(uintptr_t)payload, 8, false}};
	struct virtq_buf z = {(uintptr_t)payload, 0, false};

	ring_setup(8, true, SIM_MANUAL);
	CHECK_EQ(-VIRTQ_EINVAL, virtq_add(&vq, b, 2, NULL), "readable after writable");
	CHECK_EQ(-VIRTQ_EINVAL, virtq_add(&vq, &z, 1, NULL), "zero-length buffer");
	CHECK_EQ(-VIRTQ_EINVAL, virtq_add(&vq, b, 0, NULL), "no buffers");
	CHECK_EQ(-VIRTQ_EINVAL, virtq_add(&vq, b, 9, NULL), "longer than the ring");
	CHECK_EQ(-VIRTQ_EINVAL,
	         virtq_init(&vq, 0, VIRTQ_MAX_SIZE + 1, true, shim_alloc, ring_notify, NULL),
	         "size above VIRTQ_MAX_SIZE");
	CHECK_EQ(0, virtq_init(&vq, 0, 12, true, shim_alloc, ring_notify, NULL),
	         "any size: 12 (2.8)");
}

/* ---- available buffer notifications: the Device Area (2.8.10) ---- */

static void test_kick_flags(void)
{
	ring_setup(8, false, SIM_MANUAL);
	CHECK_EQ(0, virtq_kick_prepare(&vq), "nothing published: no kick");
	CHECK_EQ(0, vq.stats.kicks_suppressed, "and no suppression counted");
	ring_add(1, 1);
	virtq_publish(&vq);
	ring_kick();
	CHECK_EQ(1, vq.stats.kicks, "ENABLE (zeroed Device Area): kick");
	CHECK_EQ(VIRTQ_EVENT_F_DISABLE, vq.device_event->flags, "busy device: DISABLE");
	ring_add(1, 2);
	virtq_publish(&vq);
	ring_kick();
	CHECK_EQ(1, vq.stats.kicks, "DISABLE: no second kick");
	CHECK_EQ(1, vq.stats.kicks_suppressed, "suppressed");
	sim_run(dq);
	ring_add(1, 3);
	virtq_publish(&vq);
	ring_kick();
	CHECK_EQ(2, vq.stats.kicks, "ENABLE again: kick");
	/* DESC without EVENT_IDX is not valid: the driver kicks anyway. */
	vq.device_event->flags = VIRTQ_EVENT_F_DESC;
	vq.device_event->off_wrap = 7;
	ring_add(1, 4);
	virtq_publish(&vq);
	ring_kick();
	CHECK_EQ(3, vq.stats.kicks, "DESC without EVENT_IDX: kick");
}

/* DESC: kick only when the window of descriptors just made available
 * contains the device's (offset, wrap) -- across the end of the ring and
 * from the previous lap. */
static void test_kick_desc_event(void)
{
	void *tok;
	uint32_t len;

	ring_setup(8, true, SIM_MANUAL);
	/* The device wants to hear about descriptor 3 of lap 1. */
	vq.device_event->off_wrap = 3 | VIRTQ_EVENT_WRAP;
	vq.device_event->flags = VIRTQ_EVENT_F_DESC;
	for (int i = 0; i < 3; i++)
		ring_add(1, 1);
	virtq_publish(&vq);
	CHECK_EQ(0, virtq_kick_prepare(&vq), "window [0,3) misses event 3");
	ring_add(1, 1);
	virtq_publish(&vq);
	CHECK_EQ(1, virtq_kick_prepare(&vq), "window [3,4) holds it");
	/* Event 1 of lap 2 (wrap 0); the window [4, 8+1) crosses the end. */
	vq.device_event->off_wrap = 1;
	for (int i = 0; i < 4; i++)
		ring_add(1, 2);
	virtq_publish(&vq);
	CHECK_EQ(0, virtq_kick_prepare(&vq), "window [4,8) before the wrap misses lap-2 event 1");
	sim_consume(dq, 8);
	sim_complete(dq, 8);
	while (virtq_get_used(&vq, &tok, &len) == 1)
		;
	ring_add(1, 3);
	virtq_publish(&vq);
	CHECK_EQ(0, virtq_kick_prepare(&vq), "window [0',1') misses event 1'");
	ring_add(1, 3);
	ring_add(1, 3);
	virtq_publish(&vq);
	CHECK_EQ(1, virtq_kick_prepare(&vq), "window [1',3') holds event 1'");
	/* An event still in the previous lap (the device fell behind) is
	 * behind the window: no kick. */
	vq.device_event->off_wrap = 7 | VIRTQ_EVENT_WRAP;
	ring_add(1, 4);
	virtq_publish(&vq);
	CHECK_EQ(0, virtq_kick_prepare(&vq), "event in the previous lap, behind the window");
	/* A lap's worth published between decisions: always kick. */
	sim_consume(dq, 8);
	sim_complete(dq, 8);
	while (virtq_get_used(&vq, &tok, &len) == 1)
		;
	for (int r = 0; r < 3; r++) {
		for (int i = 0; i < 8 && ring_add(1, 5) >= 0; i++)
			;
		virtq_publish(&vq);
		sim_consume(dq, 8);
		sim_complete(dq, 8);
		while (virtq_get_used(&vq, &tok, &len) == 1)
			;
	}
	/* An event just ahead of the window: the formula alone says no. */
	vq.device_event->off_wrap = (uint16_t)(vq.pub_pos | (vq.pub_wrap ? VIRTQ_EVENT_WRAP : 0));
	CHECK_EQ(1, virtq_kick_prepare(&vq), "a whole lap undecided: kick forced");
}

/* The simulated device's own DESC request via sim_idle(): one kick per
 * batch, none lost. */
static void test_event_idx_suppression(void)
{
	ring_setup(8, true, SIM_MANUAL);
	for (int i = 0; i < 5; i++) {
		ring_add(1, 1 + i);
		virtq_publish(&vq);
		ring_kick();
	}
	CHECK_EQ(1, vq.stats.kicks, "one kick while the device has not re-armed");
	CHECK_EQ(4, vq.stats.kicks_suppressed, "four suppressed");
	sim_run(dq);
	CHECK_EQ(VIRTQ_EVENT_F_DESC, vq.device_event->flags, "device asks with DESC");
	CHECK_EQ(5 | VIRTQ_EVENT_WRAP, vq.device_event->off_wrap, "for descriptor 5 of lap 1");
	for (int i = 0; i < 3; i++)
		ring_add(1, 10 + i);
	virtq_publish(&vq);
	ring_kick();
	CHECK_EQ(2, vq.stats.kicks, "one kick for a batch of three");
	CHECK_EQ(0, sim_lost_wakeup(dq), "no lost wakeup");
	CHECK_EQ(0, sim.driver_errors, "notification data = next_off | next_wrap (2.8.16)");
}

/* ---- used buffer notifications: the Driver Area ---- */

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
	if (event_idx) {
		CHECK_EQ(VIRTQ_EVENT_F_DESC, vq.driver_event->flags, "DESC");
		CHECK_EQ(1 | VIRTQ_EVENT_WRAP, vq.driver_event->off_wrap,
		         "at the next used position");
	} else {
		CHECK_EQ(VIRTQ_EVENT_F_ENABLE, vq.driver_event->flags, "ENABLE");
	}
	CHECK(sim_irq_armed(dq), "the device would interrupt");
	sim_complete(dq, 1);
	CHECK_EQ(base + 1, dq->interrupts, "armed: the next completion interrupts");
	virtq_disable_cb(&vq);
	CHECK_EQ(VIRTQ_EVENT_F_DISABLE, vq.driver_event->flags, "DISABLE again");
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

/* DESC armed for a used position in the next lap: only that used
 * descriptor interrupts, not the ones before it. */
static void test_enable_cb_across_the_end(void)
{
	void *tok;
	uint32_t len;

	ring_setup(4, true, SIM_MANUAL);
	for (int r = 0; r < 3; r++) {
		ring_add(1, 1);
		virtq_publish(&vq);
		sim_consume(dq, 1);
		sim_complete(dq, 1);
		CHECK_EQ(1, virtq_get_used(&vq, &tok, &len), "one round");
	}
	for (int i = 0; i < 3; i++)
		ring_add(1, 2); /* positions 3, 0', 1' */
	virtq_publish(&vq);
	sim_consume(dq, 3);
	CHECK_EQ(0, virtq_enable_cb(&vq), "armed at position 3 of lap 1");
	uint64_t base = dq->interrupts;
	sim_complete(dq, 1);
	CHECK_EQ(base + 1, dq->interrupts, "position 3 interrupts");
	CHECK_EQ(1, virtq_get_used(&vq, &tok, &len), "taken");
	CHECK_EQ(0, virtq_enable_cb(&vq), "armed at position 0 of lap 2");
	CHECK_EQ(0, vq.driver_event->off_wrap, "off 0, wrap 0");
	sim_complete(dq, 1);
	CHECK_EQ(base + 2, dq->interrupts, "position 0' interrupts");
	virtq_disable_cb(&vq);
	sim_complete(dq, 1);
	CHECK_EQ(base + 2, dq->interrupts, "disabled: position 1' does not");
}

/* enable_cb_after(k) (RX interrupt moderation): with EVENT_IDX a DESC
 * event k - 1 descriptors past the used position; single-descriptor
 * buffers give no interrupt for the first k - 1 completions and one on
 * the k-th; with k waiting it says "do not halt" (virtq_used_count()).
 * Without EVENT_IDX the first completion interrupts whatever k says. */
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
		CHECK_EQ(3 | VIRTQ_EVENT_WRAP, vq.driver_event->off_wrap,
		         "DESC at used position + k - 1");
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
	CHECK_EQ(1, virtq_enable_cb_after(&vq, 4), "k completions waiting: do not halt");
	CHECK_EQ(event_idx ? 0 : 1, virtq_enable_cb_after(&vq, 5),
	         event_idx ? "fewer than k waiting: halt" : "no EVENT_IDX: k is 1");
	CHECK_EQ(1, virtq_enable_cb_after(&vq, 0), "k = 0 is taken as 1");
	virtq_disable_cb(&vq);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(1, virtq_get_used(&vq, &tok, &len), "take them");
	CHECK_EQ(0, virtq_used_count(&vq), "none left");
}

/* Buffers of two descriptors: the device's used position moves two per
 * completion, so DESC k - 1 on is passed at or before the k-th completion
 * (early, never late), also across the end of the ring. */
static void test_enable_cb_after_chains(void)
{
	void *tok;
	uint32_t len;

	ring_setup(8, true, SIM_MANUAL);
	for (int r = 0; r < 3; r++) { /* used position 6 of lap 1 */
		ring_add(2, 1);
		virtq_publish(&vq);
		sim_consume(dq, 1);
		sim_complete(dq, 1);
		CHECK_EQ(1, virtq_get_used(&vq, &tok, &len), "one round");
	}
	for (int i = 0; i < 4; i++)
		ring_add(2, 2 + i); /* positions 6, 0', 2', 4' */
	virtq_publish(&vq);
	sim_consume(dq, 4);
	uint64_t base = dq->interrupts;
	CHECK_EQ(0, virtq_enable_cb_after(&vq, 3), "armed for 3");
	CHECK_EQ(0, vq.driver_event->off_wrap, "6 + 2 = position 0 of lap 2, wrap 0");
	unsigned seen = 0;
	for (int i = 1; i <= 3 && !seen; i++) {
		sim_complete(dq, 1);
		CHECK_EQ(i, virtq_used_count(&vq), "used_count follows the chains");
		if (dq->interrupts > base)
			seen = (unsigned)i;
	}
	CHECK(seen >= 1 && seen <= 3, "interrupted no later than the k-th completion");
	CHECK_EQ(base + 1, dq->interrupts, "exactly once");
	virtq_disable_cb(&vq);
	CHECK_EQ(1, virtq_enable_cb_after(&vq, (uint16_t)seen), "that many waiting: do not halt");
	virtq_disable_cb(&vq);
}

static void test_enable_cb_after(void)
{
	enable_cb_after_case(true);
	enable_cb_after_case(false);
	test_enable_cb_after_chains();
}

/* ---- nothing published is read back ---- */

static void test_shadows(void)
{
	void *tok;
	uint32_t len;

	ring_setup(8, true, SIM_SYNC);
	ring_add(2, 1);
	virtq_publish(&vq);
	ring_kick();
	CHECK_EQ(1, virtq_get_used(&vq, &tok, &len), "completed");
	/* Scribble over the ring where we wrote: the driver must not care
	 * (ids and chain lengths come from its own arrays). */
	for (int i = 2; i < 8; i++)
		vq.pdesc[i].id = 0x5555;
	ring_add(2, 2);
	virtq_publish(&vq);
	CHECK_EQ(0, vq.pdesc[3].id, "Buffer ID from the private free list");
	CHECK_EQ(2, vq.head_pos[0], "first descriptor position from the shadow");
}

/* ---- device faults: detected, counted, reported, nothing freed twice ---- */

static void run_fault(enum sim_fault sf, enum virtq_fault expect, const char *name, bool writable,
                      unsigned rounds)
{
	unsigned got = 0;
	void *tok;
	uint32_t len;
	int rc = 0;

	ring_setup(8, true, SIM_MANUAL);
	/* A clean round first, so "twice" has an id to repeat. */
	for (int i = 0; i < 4; i++)
		ring_add_dir(1, 7, writable);
	virtq_publish(&vq);
	ring_kick();
	sim_run(dq);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(1, virtq_get_used(&vq, &tok, &len), "clean completion");
	dq->fault = sf;
	for (unsigned r = 0; r < rounds && rc >= 0; r++) {
		ring_add_dir(2, 1, writable);
		ring_add_dir(1, 2, writable);
		virtq_publish(&vq);
		ring_kick();
		/* One more added but not published: the device must not see it. */
		if (sf == SIM_FAULT_UNPUBLISHED)
			ring_add_dir(1, 4, writable);
		sim_run(dq);
		while ((rc = virtq_get_used(&vq, &tok, &len)) == 1)
			got++;
	}
	printf("     fault %s: %s\n", name, rc < 0 ? "detected" : "MISSED");
	CHECK_EQ(-VIRTQ_EDEVICE, rc, name);
	CHECK_EQ(1, vq.stats.faults[expect], name);
	CHECK_EQ(1, virtq_faults(&vq), "exactly one fault counted");
	CHECK(got <= 2 * rounds, "no token returned twice");
	CHECK_EQ(-VIRTQ_EDEVICE, virtq_get_used(&vq, &tok, &len), "dead ring stays dead");
	CHECK_EQ(1, virtq_faults(&vq), "and is not re-counted");
	CHECK_EQ(-VIRTQ_EDEVICE, ring_add(1, 3), "no adds on a dead ring");
}

static void test_faults(void)
{
	for (int w = 0; w < 2; w++) {
		run_fault(SIM_FAULT_ID_RANGE, VIRTQ_FAULT_ID_RANGE, "used_id_out_of_range", w, 1);
		run_fault(SIM_FAULT_NOT_IN_FLIGHT, VIRTQ_FAULT_NOT_IN_FLIGHT,
		          "used_id_not_in_flight", w, 1);
		run_fault(SIM_FAULT_USED_TWICE, VIRTQ_FAULT_NOT_IN_FLIGHT,
		          "descriptor marked used twice", w, 1);
		run_fault(SIM_FAULT_UNPUBLISHED, VIRTQ_FAULT_NOT_PUBLISHED, "used_id_not_published",
		          w, 1);
		run_fault(SIM_FAULT_WRAP, VIRTQ_FAULT_WRAP, "used with the wrong wrap counter", w,
		          1);
		run_fault(SIM_FAULT_WRAP_STUCK, VIRTQ_FAULT_WRAP,
		          "wrap counter never toggled (a lap later)", w, 8);
	}
	run_fault(SIM_FAULT_LEN, VIRTQ_FAULT_LEN, "used_len_beyond_buffer (writable)", true, 1);
}

/* A used descriptor too many lands in a free slot, beyond what is in
 * flight: the driver finds it when it is about to fill that slot, before
 * it has read the first one (a lazy reclaimer). */
static void test_used_beyond_in_flight(void)
{
	void *tok;
	uint32_t len;

	ring_setup(8, true, SIM_MANUAL);
	ring_add(1, 1); /* position 0 */
	virtq_publish(&vq);
	ring_kick();
	dq->fault = SIM_FAULT_USED_TWICE; /* used at 0 and again at 1 */
	sim_run(dq);
	CHECK_EQ(-VIRTQ_EDEVICE, ring_add(1, 2), "filling position 1 finds the device's write");
	CHECK_EQ(1, vq.stats.faults[VIRTQ_FAULT_IDX_JUMP], "counted as used beyond in flight");
	CHECK_EQ(1, virtq_faults(&vq), "once");
	CHECK_EQ(7, virtq_num_free(&vq), "nothing changed by the refused add");
	CHECK_EQ(-VIRTQ_EDEVICE, virtq_get_used(&vq, &tok, &len), "dead ring stays dead");
}

/* A length on a chain with nothing writable (TX) is counted, not fatal. */
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

/*
 * Barrier B under an emulator whose MFENCE never reaches the host (as in
 * test_virtq.c's test_kick_sync): the first read of the Device Area is the
 * device's stale answer (DISABLE while busy, or a DESC event already
 * passed); the register read is when it went idle having seen only the
 * first descriptor (ENABLE, or DESC at the next position). Without the
 * read the suppression is final.
 */
static unsigned psync_calls;
static uint16_t psync_off_wrap, psync_flags;

static void pkick_sync(void *ctx)
{
	(void)ctx;
	psync_calls++;
	vq.device_event->off_wrap = psync_off_wrap;
	vq.device_event->flags = psync_flags;
}

static void pkick_sync_case(bool desc_event, bool with_sync)
{
	ring_setup(8, desc_event, SIM_MANUAL);
	psync_calls = 0;
	if (with_sync)
		virtq_set_sync(&vq, pkick_sync, NULL);
	vq.device_event->off_wrap = 0;
	vq.device_event->flags = VIRTQ_EVENT_F_ENABLE;
	ring_add(1, 1);
	virtq_publish(&vq);
	CHECK_EQ(1, virtq_kick_prepare(&vq), "packed: the first descriptor is kicked");
	ring_add(1, 2);
	virtq_publish(&vq);
	if (desc_event) { /* stale: DESC at 0 (passed); idle: DESC at 1, lap 1 */
		vq.device_event->off_wrap = VIRTQ_EVENT_WRAP | 0;
		vq.device_event->flags = VIRTQ_EVENT_F_DESC;
		psync_off_wrap = VIRTQ_EVENT_WRAP | 1;
		psync_flags = VIRTQ_EVENT_F_DESC;
	} else { /* stale: DISABLE (busy); idle: ENABLE */
		vq.device_event->flags = VIRTQ_EVENT_F_DISABLE;
		psync_off_wrap = 0;
		psync_flags = VIRTQ_EVENT_F_ENABLE;
	}
	bool kicked = virtq_kick_prepare(&vq);
	if (!with_sync) {
		CHECK(!kicked, "packed model check: without the read the kick is lost");
		return;
	}
	CHECK_EQ(1, kicked, "packed: after the register read the idle device gets its kick");
	CHECK_EQ(1, psync_calls, "packed: one register read, before the would-be suppression");
	CHECK_EQ(1, vq.stats.kick_syncs, "packed: counted");
	CHECK_EQ(1, vq.stats.kick_rescues, "packed: counted as a kick the read saved");
	ring_add(1, 3);
	virtq_publish(&vq);
	vq.device_event->flags = VIRTQ_EVENT_F_ENABLE;
	CHECK_EQ(1, virtq_kick_prepare(&vq), "packed: ENABLE kicks");
	CHECK_EQ(1, psync_calls, "packed: no register read when the answer is a kick");
	ring_add(1, 4);
	virtq_publish(&vq);
	vq.device_event->flags = VIRTQ_EVENT_F_DISABLE;
	psync_flags = VIRTQ_EVENT_F_DISABLE;
	CHECK_EQ(0, virtq_kick_prepare(&vq), "packed: a busy device's DISABLE stands");
	CHECK_EQ(2, psync_calls, "packed: read once more before that suppression");
}

static void test_kick_sync(void)
{
	for (int d = 0; d < 2; d++) {
		pkick_sync_case(d, false);
		pkick_sync_case(d, true);
	}
}

int main(void)
{
	printf("test_virtq_packed (VIRTQ_MAX_SIZE=%d)\n", VIRTQ_MAX_SIZE);
	RUN(test_kick_sync);
	RUN(test_round_trip);
	RUN(test_chain_across_the_end);
	RUN(test_out_of_order);
	RUN(test_wraparound);
	RUN(test_full_ring);
	RUN(test_bad_requests);
	RUN(test_kick_flags);
	RUN(test_kick_desc_event);
	RUN(test_event_idx_suppression);
	RUN(test_enable_cb);
	RUN(test_enable_cb_across_the_end);
	RUN(test_enable_cb_after);
	RUN(test_shadows);
	RUN(test_faults);
	RUN(test_used_beyond_in_flight);
	RUN(test_len_on_readonly_chain);
	printf("test_virtq_packed: %d checks, %d failed\n", check_total, check_failed);
	return check_failed ? 1 : 0;
}
