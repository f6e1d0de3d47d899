/*
 * test_vnet_rx.c: the RX path (vnet_rx.c): buffer ownership, batched
 * refill, starvation, double release, every header field written by the
 * device, the budget per poll pass.
 */
#include "tests/unit/vnet_fixture.h"

/* ---- RX: ownership, refill, starvation, double release ---- */

_Static_assert(VNET_RX_REFILL_BATCH > 10, "test_rx_path holds 10 buffers below one refill batch");

void test_rx_path(void)
{
	struct vnet_counters rx, rx0, tx;
	struct vnet_rx got[VIRTQ_MAX_SIZE];
	uint8_t frame[200];
	unsigned held = 0, bad = 0;

	if (!dev_open(SIM_SYNC))
		return;
	for (unsigned i = 0; i < 10; i++) {
		memset(frame, (int)i, sizeof(frame));
		CHECK(sim_rx_inject(frame, 60 + i), "device delivers");
	}
	for (unsigned i = 0; i < 10; i++) {
		CHECK_EQ(1, vnet_rx(vn, &got[i]), "frame received");
		CHECK_EQ(60 + i, got[i].len, "length");
		if (((const uint8_t *)got[i].buf[0].data)[59] != i ||
		    (uintptr_t)got[i].buf[0].data % 4 != 2 || got[i].nbufs != 1)
			bad++;
		memset(got[i].buf[0].priv, 0xaa, VNET_RX_PRIV_SIZE); /* caller scratch is usable */
	}
	CHECK_EQ(0, bad, "payload and alignment (data % 4 == 2)");
	CHECK_EQ(0, vnet_rx(vn, &got[10]), "nothing more");
	for (unsigned i = 10; i > 0; i--)
		vnet_rx_release(vn, got[i - 1].buf[0].handle);
	vnet_rx_release(vn, got[0].buf[0].handle); /* double release: refused */
	counters(&rx0, &tx);
	vnet_poll(vn);
	counters(&rx, &tx);
	CHECK_EQ(0, rx.refilled - rx0.refilled, "poll pass: refill waits for a batch");
	for (unsigned i = 0; i < VNET_RX_REFILL_BATCH - 10; i++) { /* the rest of a batch */
		CHECK(sim_rx_inject(frame, 60), "device delivers");
		CHECK_EQ(1, vnet_rx(vn, &got[i]), "frame received");
	}
	for (unsigned i = 0; i < VNET_RX_REFILL_BATCH - 10; i++)
		vnet_rx_release(vn, got[i].buf[0].handle);
	counters(&rx, &tx);
	CHECK_EQ(VNET_RX_REFILL_BATCH, rx.refilled - rx0.refilled, "a full batch re-posted");
	CHECK_EQ(1, rx.refills - rx0.refills, "in one refill");

	/* A runt is dropped, not handed up (its buffer waits for a batch). */
	CHECK(sim_rx_inject(frame, 5), "device delivers a runt");
	CHECK_EQ(0, vnet_rx(vn, &got[0]), "runt not handed up");
	counters(&rx, &tx);
	CHECK_EQ(1, rx.drops, "drops");

	/* Hold every buffer: the device starves, then is told about refills. */
	for (held = 0; held < VIRTQ_MAX_SIZE; held++) {
		/* One frame per pass; the pass's refill is not wanted here, so
		 * only its budget restart (test_rx_budget has the real thing). */
		vn->rx_quota = VNET_RX_BUDGET;
		if (!sim_rx_inject(frame, 64) || vnet_rx(vn, &got[held]) != 1)
			break;
	}
	/* 256 buffers, minus the runt's, which waits for a refill batch. */
	CHECK_EQ(255, held, "frames deliverable while the caller holds buffers");
	CHECK(!sim_rx_inject(frame, 64), "device out of buffers");
	for (unsigned i = 0; i < held; i++)
		vnet_rx_release(vn, got[i].buf[0].handle);
	vnet_before_wait(vn);
	CHECK_EQ(0, sim_lost_wakeup(rxd), "device told about new buffers");
	CHECK(sim_rx_inject(frame, 64), "device delivers again");
	CHECK_EQ(1, vnet_rx(vn, &got[0]), "and the driver receives");
	CHECK_EQ(0, sim.driver_errors, "no buffer posted twice");
}

/* ---- RX: the device writes every header field ---- */

/* Hostile values in the header fields a plain frame does not use (GSO
 * sizes, checksum offsets without NEEDS_CSUM): the frame still arrives
 * intact, and checksum validity is reported only when GUEST_CSUM was
 * negotiated (5.1.6.4). A GSO type or NEEDS_CSUM offsets the driver cannot
 * accept are device faults: tests/unit/test_offload.c. */
void test_rx_header_fields(void)
{
	struct vnet_rx r;
	uint8_t frame[100];

	if (!dev_open(SIM_SYNC))
		return;
	for (unsigned i = 0; i < sizeof(frame); i++)
		frame[i] = (uint8_t)(i * 3);
	sim.rx_hdr = (struct virtio_net_hdr){.flags = VIRTIO_NET_HDR_F_DATA_VALID,
	                                     .gso_type = VIRTIO_NET_HDR_GSO_NONE,
	                                     .hdr_len = 0xffff,
	                                     .gso_size = 0xfffe,
	                                     .csum_start = 0x1234,
	                                     .csum_offset = 0xfff0,
	                                     .num_buffers = 1};
	CHECK(sim_rx_inject(frame, sizeof(frame)), "device delivers");
	CHECK_EQ(1, vnet_rx(vn, &r), "frame handed up");
	CHECK_EQ(sizeof(frame), r.len, "length");
	CHECK_EQ(0, memcmp(r.buf[0].data, frame, sizeof(frame)), "payload intact");
	CHECK_EQ((vnet_features(vn) & VIRTIO_BIT(VIRTIO_NET_F_GUEST_CSUM)) ? VNET_RX_F_CSUM_VALID
	                                                                   : 0,
	         r.flags & VNET_RX_F_CSUM_VALID, "DATA_VALID believed only with GUEST_CSUM");
	vnet_rx_release_frame(vn, &r);
	sim.rx_hdr = (struct virtio_net_hdr){.num_buffers = 1};
	CHECK(sim_rx_inject(frame, sizeof(frame)), "device delivers");
	CHECK_EQ(1, vnet_rx(vn, &r), "frame handed up");
	CHECK_EQ(0, r.flags & VNET_RX_F_CSUM_VALID, "no flag, no validity");
	vnet_rx_release_frame(vn, &r);
}

/* ---- RX budget per poll pass (NAPI weight) ---- */

void test_rx_budget(void)
{
	struct vnet_rx r;
	uint8_t frame[64] = {0};
	unsigned got = 0, first = 0, passes = 0;

	if (!dev_open(SIM_SYNC))
		return;
	for (int i = 0; i < VNET_RX_BUDGET + 40; i++)
		CHECK(sim_rx_inject(frame, sizeof(frame)), "device delivers");
	vnet_poll(vn);
	while (vnet_rx(vn, &r) == 1) {
		vnet_rx_release_frame(vn, &r);
		first++;
	}
	CHECK_EQ(VNET_RX_BUDGET, first, "frames handed up in one pass");
	got = first;
	while (got < VNET_RX_BUDGET + 40 && passes < 10) {
		vnet_poll(vn); /* the pass's TX work runs between the budgets */
		passes++;
		while (vnet_rx(vn, &r) == 1) {
			vnet_rx_release_frame(vn, &r);
			got++;
		}
	}
	CHECK_EQ(VNET_RX_BUDGET + 40, got, "the rest in the next pass");
	CHECK_EQ(1, passes, "one more pass");
}
