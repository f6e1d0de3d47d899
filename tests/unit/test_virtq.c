/*
 * test_virtq.c: the split ring (drivers/virtio/virtq.c, virtio 1.2
 * section 2.7) in the ring contract (test_ring_contract.c, ring_contract.h):
 * what only the split layout shows (avail->flags, used_event, avail_event,
 * descriptor-index ids, power-of-two sizes, its fault classes), and the
 * tests only it has: barrier D and barrier B with a device register read,
 * more than 2^16 entries between two kick decisions, private shadows.
 */
#include "tests/unit/ring_contract.h"

/* ---- the split layout at the contract's points ---- */

static void split_bad_requests(void)
{
	CHECK_EQ(-VIRTQ_EINVAL, virtq_init(&vq, 0, 12, true, shim_alloc, ring_notify, NULL),
	         "size not a power of two");
}

static void split_full_ring_full(unsigned n)
{
	CHECK_EQ(16 / n, vq.avail_idx, "avail idx unchanged by the refused add");
}

static void split_flags_fresh(void)
{
	CHECK_EQ(VIRTQ_AVAIL_F_NO_INTERRUPT, vq.avail->flags, "driver asks for no interrupts");
}

static void split_event_idx_fresh(void)
{
	CHECK_EQ(0, vq.avail->flags, "flags 0 with EVENT_IDX (2.7.10)");
}

static void split_device_asks(uint16_t entry)
{
	CHECK_EQ(entry, *vq.avail_event, "avail_event: the entry the device asks to be told about");
}

static void split_cb_armed(bool event_idx)
{
	if (event_idx)
		CHECK_EQ(vq.last_used, *vq.used_event, "used_event = next entry to read");
	else
		CHECK_EQ(0, vq.avail->flags, "NO_INTERRUPT cleared");
}

static void split_cb_disarmed(bool event_idx)
{
	if (!event_idx)
		CHECK_EQ(VIRTQ_AVAIL_F_NO_INTERRUPT, vq.avail->flags, "NO_INTERRUPT set again");
}

static void split_cb_armed_after(uint16_t k)
{
	CHECK_EQ((uint16_t)(vq.last_used + k - 1), *vq.used_event,
	         "used_event = last_used + k - 1");
}

/* ---- split only ---- */

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
	ring_post_taken(4);
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
	ring_setup(8, true, SIM_MANUAL);
	for (int r = 0; r < 9000; r++) {
		for (int i = 0; i < 8; i++)
			ring_add(1, 1 + i);
		virtq_publish(&vq);
		ring_device_round(8); /* a polling device: no doorbell needed */
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

static void split_tests(void)
{
	RUN(test_enable_cb_sync);
	RUN(test_kick_sync);
	RUN(test_unkicked_window_wrap);
	RUN(test_shadows);
}

static const struct ring_wrap_case split_wraps[] = {
    {8, true, 400000, 99, false, 3 * 65536},
    {8, false, 400000, 99, false, 3 * 65536},
    {0},
};

static const struct ring_fault_case split_faults[] = {
    {SIM_FAULT_ID_RANGE, VIRTQ_FAULT_ID_RANGE, "used_id_out_of_range", 1},
    {SIM_FAULT_NOT_IN_FLIGHT, VIRTQ_FAULT_NOT_IN_FLIGHT, "used_id_twice", 1},
    {SIM_FAULT_NOT_HEAD, VIRTQ_FAULT_NOT_IN_FLIGHT, "used_id_not_a_head", 1},
    {SIM_FAULT_IDX_JUMP, VIRTQ_FAULT_IDX_JUMP, "used_idx_jump", 1},
    {SIM_FAULT_IDX_AHEAD, VIRTQ_FAULT_IDX_JUMP, "used_idx_one_past_published (below the ring size)",
     1},
    {SIM_FAULT_UNPUBLISHED, VIRTQ_FAULT_NOT_PUBLISHED, "used_id_not_published", 1},
    {0},
};

const struct ring_layout layout = {
    .name = "test_virtq",
    .packed = false,
    .second_id = 2, /* the head's descriptor index: after descriptors 0 and 1 */
    .wraps = split_wraps,
    .faults = split_faults,
    .full_ring_full = split_full_ring_full,
    .bad_requests = split_bad_requests,
    .flags_fresh = split_flags_fresh,
    .event_idx_fresh = split_event_idx_fresh,
    .device_asks = split_device_asks,
    .cb_armed = split_cb_armed,
    .cb_disarmed = split_cb_disarmed,
    .cb_armed_after = split_cb_armed_after,
    .tests = split_tests,
};
