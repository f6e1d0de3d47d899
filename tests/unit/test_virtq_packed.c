/*
 * test_virtq_packed.c: the packed ring (drivers/virtio/virtq_packed.c,
 * virtio 1.2 section 2.8) in the ring contract (test_ring_contract.c,
 * ring_contract.h): what only the packed layout shows (descriptor flags and
 * wrap counters, the first descriptor written last, buffer ids, the Device
 * Area for kicks and the Driver Area for interrupts, any ring size, its
 * fault classes), and the tests only it has: chains across the end of the
 * ring, out-of-order completion, DESC events across laps, used positions
 * moved by chains, a used descriptor beyond what is in flight, barrier B
 * with a device register read.
 */
#include "tests/unit/ring_contract.h"

static uint16_t flags_at(uint16_t pos)
{
	return vq.pdesc[pos].flags;
}

/* ---- the packed layout at the contract's points ---- */

/* Lap 1: AVAIL = 1, USED = 0. */
static const uint16_t avail1 = VIRTQ_DESC_F_AVAIL;

static void packed_round_trip_fresh(void)
{
	CHECK_EQ(VIRTQ_EVENT_F_DISABLE, vq.driver_event->flags, "interrupts start disabled");
}

/* Added, not published: the later descriptor of the chain is written, the
 * first ones are not (2.8.6). */
static void packed_round_trip_added(void)
{
	CHECK_EQ(0, flags_at(0), "first descriptor of chain 1 not yet available");
	CHECK_EQ(avail1, flags_at(1), "its second descriptor already written");
	CHECK_EQ(0, flags_at(2), "chain 2's only descriptor not yet available");
	CHECK_EQ(0, vq.pdesc[1].id, "Buffer ID in the chain's last descriptor");
}

static void packed_round_trip_published(void)
{
	CHECK_EQ(avail1 | VIRTQ_DESC_F_NEXT, flags_at(0), "first descriptor: AVAIL|NEXT");
	CHECK_EQ(avail1, flags_at(2), "second chain: AVAIL");
}

/* The device wrote its used descriptors in place (in order: at the first
 * descriptor of each chain). */
static void packed_round_trip_completed(void)
{
	CHECK_EQ(VIRTQ_DESC_F_AVAIL | VIRTQ_DESC_F_USED, flags_at(0) & 0x8080,
	         "used: AVAIL=USED=1");
}

static void packed_round_trip_first_taken(void)
{
	CHECK_EQ(2, vq.used_pos, "skipped the chain's two descriptors");
}

static void packed_wrap_done(const struct ring_wrap_case *c)
{
	(void)c;
	CHECK_EQ(0, dq->interrupts, "interrupts while the driver polls (Driver Area DISABLE)");
}

static void packed_full_ring_full(unsigned n)
{
	(void)n;
	CHECK_EQ(0, vq.next_avail, "next position back at 0 ...");
	CHECK(!vq.avail_wrap, "... in the next lap");
}

static void packed_full_ring_refilled(unsigned n)
{
	CHECK_EQ(VIRTQ_DESC_F_USED | (n > 1 ? VIRTQ_DESC_F_NEXT : 0), flags_at(0),
	         "refilled slot: lap 2 bits");
}

static void packed_bad_requests(void)
{
	struct virtq_buf b[2] = {{(uintptr_t)payload, 8, true}, {(uintptr_t)payload, 8, false}};

	CHECK_EQ(-VIRTQ_EINVAL, virtq_add(&vq, b, 9, NULL), "longer than the ring");
	CHECK_EQ(-VIRTQ_EINVAL,
	         virtq_init(&vq, 0, VIRTQ_MAX_SIZE + 1, true, shim_alloc, ring_notify, NULL),
	         "size above VIRTQ_MAX_SIZE");
	CHECK_EQ(0, virtq_init(&vq, 0, 12, true, shim_alloc, ring_notify, NULL),
	         "any size: 12 (2.8)");
}

/* The Device Area (2.8.10): zeroed is ENABLE; a busy device says DISABLE. */
static void packed_flags_busy(void)
{
	CHECK_EQ(VIRTQ_EVENT_F_DISABLE, vq.device_event->flags, "busy device: DISABLE");
}

/* DESC without EVENT_IDX is not valid: the driver kicks anyway. */
static void packed_flags_end(void)
{
	vq.device_event->flags = VIRTQ_EVENT_F_DESC;
	vq.device_event->off_wrap = 7;
	ring_send(4);
	CHECK_EQ(3, vq.stats.kicks, "DESC without EVENT_IDX: kick");
}

static void packed_device_asks(uint16_t entry)
{
	CHECK_EQ(VIRTQ_EVENT_F_DESC, vq.device_event->flags, "device asks with DESC");
	CHECK_EQ(entry | VIRTQ_EVENT_WRAP, vq.device_event->off_wrap,
	         "for that descriptor of lap 1");
}

static void packed_cb_armed(bool event_idx)
{
	if (event_idx) {
		CHECK_EQ(VIRTQ_EVENT_F_DESC, vq.driver_event->flags, "DESC");
		CHECK_EQ(1 | VIRTQ_EVENT_WRAP, vq.driver_event->off_wrap,
		         "at the next used position");
	} else {
		CHECK_EQ(VIRTQ_EVENT_F_ENABLE, vq.driver_event->flags, "ENABLE");
	}
}

static void packed_cb_disarmed(bool event_idx)
{
	(void)event_idx;
	CHECK_EQ(VIRTQ_EVENT_F_DISABLE, vq.driver_event->flags, "DISABLE again");
}

/* A DESC event k - 1 descriptors past the used position. */
static void packed_cb_armed_after(uint16_t k)
{
	CHECK_EQ((k - 1) | VIRTQ_EVENT_WRAP, vq.driver_event->off_wrap,
	         "DESC at used position + k - 1");
}

/* ---- packed only ---- */

/* Move the used position on: chains of n descriptors, one at a time,
 * through the device and back. */
static void move_used_position(unsigned chains, unsigned n)
{
	void *tok;
	uint32_t len;

	for (unsigned r = 0; r < chains; r++) {
		ring_add(n, 1);
		virtq_publish(&vq);
		sim_consume(dq, 1);
		sim_complete(dq, 1);
		CHECK_EQ(1, virtq_get_used(&vq, &tok, &len), "one round");
	}
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

/* DESC: kick only when the window of descriptors just made available
 * contains the device's (offset, wrap) -- across the end of the ring and
 * from the previous lap. */
static void test_kick_desc_event(void)
{
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
	ring_device_round(8);
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
	ring_device_round(8);
	for (int r = 0; r < 3; r++) {
		for (int i = 0; i < 8 && ring_add(1, 5) >= 0; i++)
			;
		virtq_publish(&vq);
		ring_device_round(8);
	}
	/* An event just ahead of the window: the formula alone says no. */
	vq.device_event->off_wrap = (uint16_t)(vq.pub_pos | (vq.pub_wrap ? VIRTQ_EVENT_WRAP : 0));
	CHECK_EQ(1, virtq_kick_prepare(&vq), "a whole lap undecided: kick forced");
}

/* DESC armed for a used position in the next lap: only that used
 * descriptor interrupts, not the ones before it. */
static void test_enable_cb_across_the_end(void)
{
	void *tok;
	uint32_t len;

	ring_setup(4, true, SIM_MANUAL);
	move_used_position(3, 1);
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

/* Buffers of two descriptors: the device's used position moves two per
 * completion, so DESC k - 1 on is passed at or before the k-th completion
 * (early, never late), also across the end of the ring. */
static void test_enable_cb_after_chains(void)
{
	ring_setup(8, true, SIM_MANUAL);
	move_used_position(3, 2); /* used position 6 of lap 1 */
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

static void packed_tests(void)
{
	RUN(test_kick_sync);
	RUN(test_chain_across_the_end);
	RUN(test_out_of_order);
	RUN(test_kick_desc_event);
	RUN(test_enable_cb_across_the_end);
	RUN(test_enable_cb_after_chains);
	RUN(test_shadows);
	RUN(test_used_beyond_in_flight);
}

static const struct ring_wrap_case packed_wraps[] = {
    {8, true, 300000, 99 + 8, true, 65536},     {8, false, 300000, 99 + 8, true, 65536},
    {7, true, 300000, 99 + 7, true, 65536}, /* chains wrap at odd places */
    {256, true, 300000, 99 + 256, true, 65536}, {0},
};

static const struct ring_fault_case packed_faults[] = {
    {SIM_FAULT_ID_RANGE, VIRTQ_FAULT_ID_RANGE, "used_id_out_of_range", 1},
    {SIM_FAULT_NOT_IN_FLIGHT, VIRTQ_FAULT_NOT_IN_FLIGHT, "used_id_not_in_flight", 1},
    {SIM_FAULT_USED_TWICE, VIRTQ_FAULT_NOT_IN_FLIGHT, "descriptor marked used twice", 1},
    {SIM_FAULT_UNPUBLISHED, VIRTQ_FAULT_NOT_PUBLISHED, "used_id_not_published", 1},
    {SIM_FAULT_WRAP, VIRTQ_FAULT_WRAP, "used with the wrong wrap counter", 1},
    {SIM_FAULT_WRAP_STUCK, VIRTQ_FAULT_WRAP, "wrap counter never toggled (a lap later)", 8},
    {0},
};

const struct ring_layout layout = {
    .name = "test_virtq_packed",
    .packed = true,
    .second_id = 1, /* buffer ids count chains */
    .wraps = packed_wraps,
    .faults = packed_faults,
    .round_trip_fresh = packed_round_trip_fresh,
    .round_trip_added = packed_round_trip_added,
    .round_trip_published = packed_round_trip_published,
    .round_trip_completed = packed_round_trip_completed,
    .round_trip_first_taken = packed_round_trip_first_taken,
    .wrap_done = packed_wrap_done,
    .full_ring_full = packed_full_ring_full,
    .full_ring_refilled = packed_full_ring_refilled,
    .bad_requests = packed_bad_requests,
    .flags_busy = packed_flags_busy,
    .flags_end = packed_flags_end,
    .device_asks = packed_device_asks,
    .cb_armed = packed_cb_armed,
    .cb_disarmed = packed_cb_disarmed,
    .cb_armed_after = packed_cb_armed_after,
    .tests = packed_tests,
};
