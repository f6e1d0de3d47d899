/*
 * test_vnet_fwd.c: vnet_tx_forward(), a received buffer sent back out as it
 * is (the packet apps' macswap and reflect), linked into every test_vnet
 * binary so it runs under every policy variant. The device reads the RX
 * buffer itself (zero copy; a copy in VNET_ZEROCOPY=0 builds), the buffer
 * belongs to neither the caller nor RX while it is on the TX ring, comes
 * back to RX through the one reclaim routine, and a refused forward leaves
 * it with the caller.
 */
#include <string.h>
#include "drivers/virtio/vnet_priv.h"
#include "tests/unit/check.h"
#include "tests/unit/host_shim.h"
#include "tests/unit/sim_dev.h"
#include "tests/unit/test_vnet.h"

static struct sim_queue *const ftxd = &sim.q[VNET_TXQ];

static void fill(uint8_t *f, uint32_t len, unsigned seed)
{
	for (uint32_t i = 0; i < len; i++)
		f[i] = (uint8_t)(seed * 13 + i);
}

/* Every RX buffer is back with RX (posted or free): none held, none on TX. */
static void check_rx_buffers_home(struct vnet *vn, const char *what)
{
	CHECK_EQ(0, vn->rx_in_tx, what);
	CHECK_EQ(0, vn->rx_held, what);
	CHECK_EQ(vn->rxq.size, vn->rx_posted + vn->rx_nfree, what);
}

/* The device sees the RX buffer's memory, not a copy; tx_done is not
 * called; the buffer comes home at reclaim. */
static void test_forward_zero_copy(void)
{
	static const uint8_t zero[VNET_HDR_LEN];
	struct vnet *vn = dev_open(SIM_MANUAL);
	struct vnet_rx r;
	uint8_t frame[100];
	uint8_t *data;

	if (!vn)
		return;
	fill(frame, sizeof(frame), 1);
	CHECK(sim_rx_inject(frame, sizeof(frame)), "device delivers");
	CHECK_EQ(1, vnet_rx(vn, &r), "frame received");
	data = r.buf[0].data;
	CHECK_EQ(0, vnet_tx_forward(vn, &r), "forwarded");
	CHECK_EQ(VNET_ZEROCOPY, vn->rx_in_tx, "on the TX ring (zero copy) or copied and home");
	CHECK_EQ(0, vn->rx_held, "no longer the caller's");
	vnet_rx_release(vn, r.buf[0].handle); /* refused: it is not the caller's */
	CHECK_EQ(VNET_ZEROCOPY, vn->rx_in_tx, "a release while on the TX ring is refused");
	data[50] ^= 0xff; /* after the forward: only a device reading the buffer sees it */
	vnet_tx_end_burst(vn);
	vnet_poll(vn);
	if (VNET_IS_KICK_TIMER) {
		shim_now_ns += VNET_KICK_TIMER_US * 1000ull;
		vnet_poll(vn);
	}
	sim_run(ftxd);
	CHECK_EQ(1, ftxd->frames, "the device sent it");
	CHECK_EQ(VNET_HDR_LEN + sizeof(frame), ftxd->last_len, "header + frame");
	CHECK_EQ(0, memcmp(ftxd->last, zero, VNET_HDR_LEN), "virtio-net header all zero");
	CHECK_EQ(0, memcmp(ftxd->last + VNET_HDR_LEN, frame, 50), "frame as received");
	CHECK_EQ(VNET_ZEROCOPY ? (uint8_t)(frame[50] ^ 0xff) : frame[50],
	         ftxd->last[VNET_HDR_LEN + 50],
	         "zero copy: the device read the RX buffer itself (a copy in zc0 builds)");
	CHECK_EQ(0, test_vnet_done_total(), "no tx_done for a forwarded frame");
	shim_clock_step = 1000;
	CHECK_EQ(0, vnet_drain(vn, 1000000), "drain completes");
	shim_clock_step = 0;
	check_rx_buffers_home(vn, "the buffer is back with RX after reclaim");
	CHECK_EQ(0, sim.driver_errors, "no buffer posted twice");
}

/* A stream through every policy: what the device delivers goes back out,
 * byte for byte, and every buffer comes home. Starving RX (every buffer on
 * the TX ring, lazy reclaim) must resolve through the liveness reclaim. */
static void test_forward_stream(void)
{
	enum { N = 3000, BURST = 32 };
	struct vnet *vn = dev_open(SIM_SYNC);
	struct vnet_rx r[BURST];
	unsigned injected = 0, forwarded = 0, refused = 0, held = 0, passes = 0;
	uint64_t sum = 0;
	uint8_t frame[64 + BURST];

	if (!vn)
		return;
	while (forwarded < N && passes++ < 20 * N) {
		for (unsigned k = 0; k < BURST && injected < N; k++) {
			uint32_t len = 60 + (injected % BURST);

			fill(frame, len, injected);
			if (!sim_rx_inject(frame, len)) {
				refused++; /* no buffer posted: QEMU would drop it too */
				break;
			}
			for (uint32_t i = 0; i < len; i++)
				sum += frame[i];
			injected++;
		}
		shim_now_ns += 200000; /* 200 us a pass: holds and liveness bounds expire */
		vnet_poll(vn);
		while (held < BURST && vnet_rx(vn, &r[held]) == 1)
			held++;
		unsigned sent = 0;
		while (sent < held) {
			int rc = vnet_tx_forward(vn, &r[sent]);

			if (rc == -VNET_EAGAIN)
				break; /* back-pressure: keep the rest for the next pass */
			CHECK_EQ(0, rc, "forward accepted");
			if (rc)
				return;
			sent++;
		}
		forwarded += sent;
		memmove(r, r + sent, (held - sent) * sizeof(r[0]));
		held -= sent;
		vnet_tx_end_burst(vn);
	}
	shim_clock_step = 1000;
	CHECK_EQ(0, vnet_drain(vn, 1000000), "drain completes");
	shim_clock_step = 0;
	printf("     %u frames forwarded in %u passes, %u injections found no buffer\n", forwarded,
	       passes, refused);
	CHECK_EQ(N, forwarded, "every delivered frame forwarded");
	CHECK_EQ(N, ftxd->frames, "the device sent every one");
	CHECK_EQ(sum, ftxd->byte_sum, "byte for byte");
	CHECK_EQ(0, test_vnet_done_total(), "no tx_done");
	check_rx_buffers_home(vn, "every buffer home");
	CHECK_EQ(0, sim.driver_errors, "ring rules and no buffer posted twice");
}

/* Forwarded buffers go home at TX reclaim; whatever the policy, the RX
 * ring keeps at least half its buffers posted once the device has sent
 * them (vnet_tx_rx_reclaim(): under lazy reclaim it held ~LAZY_THRESH, and
 * a stall of the guest dropped frames at the device). A steady stream of
 * a burst a pass never finds the ring short. */
static void test_forward_keeps_rx_posted(void)
{
	enum { N = 4000, BURST = 32 };
	struct vnet *vn = dev_open(SIM_SYNC);
	struct vnet_rx r[BURST];
	unsigned injected = 0, refused = 0, passes = 0, min_posted;
	uint8_t frame[64];

	if (!vn)
		return;
	min_posted = vn->rxq.size;
	while (injected < N && passes++ < 4 * N) {
		unsigned held = 0, sent = 0;

		/* 200 us a pass: kick=timer's hold (150 us) ends within it, so
		 * what was forwarded has been sent by the next pass. */
		shim_now_ns += 200000;
		vnet_poll(vn);
		if (injected && vn->rx_posted < min_posted)
			min_posted = vn->rx_posted;
		for (unsigned k = 0; k < BURST && injected < N; k++, injected++) {
			fill(frame, sizeof(frame), injected);
			if (!sim_rx_inject(frame, sizeof(frame)))
				refused++;
		}
		while (held < BURST && vnet_rx(vn, &r[held]) == 1)
			held++;
		while (sent < held && vnet_tx_forward(vn, &r[sent]) == 0)
			sent++;
		for (unsigned k = sent; k < held; k++)
			vnet_rx_release_frame(vn,
			                      &r[k]); /* a full TX ring: not this test's point */
		vnet_tx_end_burst(vn);
	}
	printf("     %u frames a burst at a time: RX ring posted >= %u of %u after each poll, %u "
	       "found no "
	       "buffer, %llu rule reclaims\n",
	       injected, min_posted, vn->rxq.size, refused,
	       (unsigned long long)vn->tx.rx_reclaim_calls);
	CHECK(min_posted + VNET_RX_REFILL_BATCH >= vn->rxq.size / 2u,
	      "at least half the RX ring posted (less a refill batch) after every poll");
	CHECK_EQ(0, refused, "no frame found the RX ring empty");
	CHECK_EQ(0, sim.driver_errors, "ring rules and no buffer posted twice");
}

/* A forward the driver refuses leaves the buffer with the caller. */
static void test_forward_refused(void)
{
	static uint8_t tx[VIRTQ_MAX_SIZE][16 + 60];
	struct vnet *vn = dev_open(SIM_MANUAL);
	struct vnet_rx r, gone;
	uint8_t frame[80];
	unsigned n = 0;

	if (!vn)
		return;
	fill(frame, sizeof(frame), 7);
	CHECK(sim_rx_inject(frame, sizeof(frame)), "device delivers");
	CHECK(sim_rx_inject(frame, sizeof(frame)), "device delivers");
	CHECK_EQ(1, vnet_rx(vn, &gone), "frame received");
	CHECK_EQ(1, vnet_rx(vn, &r), "frame received");
	vnet_rx_release_frame(vn, &gone);
	CHECK_EQ(-VNET_EINVAL, vnet_tx_forward(vn, &gone), "a released buffer is not forwarded");
	while (n < VIRTQ_MAX_SIZE) {
		struct vnet_seg seg = {tx[n] + 16, 60};

		if (vnet_tx(vn, &seg, 1, NULL, (void *)(uintptr_t)(n + 1)) != 0)
			break;
		n++;
	}
	CHECK_EQ(-VNET_EAGAIN, vnet_tx_forward(vn, &r), "full TX ring: back-pressure");
	CHECK_EQ(1, vn->rx_held, "the caller still holds it");
	CHECK_EQ(0, vn->rx_in_tx, "not on the TX ring");
	vnet_rx_release_frame(vn, &r);
	CHECK_EQ(0, vn->rx_held, "and can release it");
	CHECK_EQ(0, sim.driver_errors, "ring rules");
}

/* A checksum the device left partial (NEEDS_CSUM) stays partial on the
 * way out, with the same offsets; without GUEST_CSUM there is none. */
static void test_forward_partial_csum(void)
{
	struct vnet *vn = dev_open(SIM_MANUAL);
	struct vnet_rx r;
	uint8_t frame[90];
	bool partial;

	if (!vn)
		return;
	partial = (vnet_offloads(vn) & VNET_OFF_RX_CSUM) && (vnet_offloads(vn) & VNET_OFF_TX_CSUM);
	fill(frame, sizeof(frame), 3);
	sim.rx_hdr = (struct virtio_net_hdr){.flags = VIRTIO_NET_HDR_F_NEEDS_CSUM,
	                                     .gso_type = VIRTIO_NET_HDR_GSO_NONE,
	                                     .csum_start = 34,
	                                     .csum_offset = 6,
	                                     .num_buffers = 1};
	CHECK(sim_rx_inject(frame, sizeof(frame)), "device delivers");
	CHECK_EQ(1, vnet_rx(vn, &r), "frame received");
	CHECK_EQ(partial ? VNET_RX_F_CSUM_PARTIAL : 0, r.flags & VNET_RX_F_CSUM_PARTIAL,
	         "partial checksum reported only with GUEST_CSUM");
	CHECK_EQ(0, vnet_tx_forward(vn, &r), "forwarded");
	vnet_tx_end_burst(vn);
	vnet_before_wait(vn);
	if (VNET_IS_KICK_TIMER)
		vnet_tx_kick(vn);
	sim_run(ftxd);
	CHECK_EQ(1, ftxd->frames, "sent");
	CHECK_EQ(partial ? VIRTIO_NET_HDR_F_NEEDS_CSUM : 0, ftxd->last[0], "NEEDS_CSUM kept");
	CHECK_EQ(partial ? 34 : 0, ftxd->last[6], "csum_start kept");
	CHECK_EQ(partial ? 6 : 0, ftxd->last[8], "csum_offset kept");
	sim.rx_hdr = (struct virtio_net_hdr){.num_buffers = 1};
}

void test_vnet_fwd(void)
{
	RUN(test_forward_zero_copy);
	RUN(test_forward_stream);
	RUN(test_forward_keeps_rx_posted);
	RUN(test_forward_refused);
	RUN(test_forward_partial_csum);
}
