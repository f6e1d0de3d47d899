/*
 * test_offload.c: the driver's offload paths (virtio 1.2 5.1.6.2 transmit
 * header, 5.1.6.4 merged receive) against the simulated device, built per
 * OFFLOAD level. Every NEEDS_CSUM / GSO header field for frames of every
 * segment shape, and the requests the driver must refuse; merged frames of
 * 1..N buffers put back together byte for byte; hostile num_buffers and
 * GSO headers as counted device faults; a device that offers nothing.
 */
#include <stdio.h>
#include <string.h>
#include "drivers/virtio/vnet_priv.h"
#include "tests/unit/check.h"
#include "tests/unit/host_shim.h"
#include "tests/unit/sim_dev.h"

int check_failed, check_total;

/* QEMU's virtio-net on a tap with a vnet header (what offload needs). */
#define SIM_OFFLOADS                                                                               \
	(VIRTIO_BIT(VIRTIO_NET_F_CSUM) | VIRTIO_BIT(VIRTIO_NET_F_GUEST_CSUM) |                     \
	 VIRTIO_BIT(VIRTIO_NET_F_HOST_TSO4) | VIRTIO_BIT(VIRTIO_NET_F_GUEST_TSO4) |                \
	 VIRTIO_BIT(VIRTIO_NET_F_HOST_TSO6) | VIRTIO_BIT(VIRTIO_NET_F_GUEST_TSO6) |                \
	 VIRTIO_BIT(VIRTIO_NET_F_GUEST_ECN) | VIRTIO_BIT(VIRTIO_NET_F_GUEST_UFO) |                 \
	 VIRTIO_BIT(VIRTIO_NET_F_MRG_RXBUF))
#define SIM_BASE                                                                                   \
	(VIRTIO_BIT(VIRTIO_F_VERSION_1) | VIRTIO_BIT(VIRTIO_NET_F_MAC) |                           \
	 VIRTIO_BIT(VIRTIO_NET_F_STATUS) | VIRTIO_BIT(VIRTIO_F_EVENT_IDX) |                        \
	 VIRTIO_BIT(VIRTIO_F_RING_PACKED))

#define BIG 65535

static struct vnet *vn;
static struct sim_queue *txd = &sim.q[VNET_TXQ];
static uint8_t frame[VNET_RX_GSO_FRAME_MAX + 64];
static uint8_t headroom_frame[16 + BIG];
static unsigned done;

static void on_tx_done(void *arg, void *cookie)
{
	(void)arg;
	(void)cookie;
	done++;
}

static struct vnet *open_dev(uint64_t offered)
{
	char err[256] = "";

	shim_reset();
	sim_reset(offered);
	sim.mode = SIM_SYNC;
	sim.cfg[VIRTIO_NET_CFG_STATUS] = VIRTIO_NET_S_LINK_UP;
	vn = vnet_open(err, sizeof(err));
	CHECK(vn != NULL, "vnet_open");
	if (!vn) {
		printf("     vnet_open: %s\n", err);
		return NULL;
	}
	vnet_set_tx_done(vn, on_tx_done, NULL);
	done = 0;
	return vn;
}

static void fill(uint8_t *p, uint32_t n, unsigned seed)
{
	for (uint32_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 31 + i * 7 + (i >> 8));
}

/* Send one frame cut into nseg pieces; the device has taken it when this
 * returns 0 (SIM_SYNC). */
static int send(uint32_t total, unsigned nseg, const struct vnet_txo *o)
{
	struct vnet_seg segs[VNET_TX_MAX_SEGS];
	uint8_t *f = headroom_frame + 16;
	uint32_t off = 0;

	fill(f, total, total);
	for (unsigned i = 0; i < nseg; i++) {
		uint32_t len = i + 1 < nseg ? total / nseg : total - off;

		segs[i] = (struct vnet_seg){f + off, len};
		off += len;
	}
	int rc = vnet_tx(vn, segs, nseg, o, NULL);
	vnet_tx_end_burst(vn);
	vnet_poll(vn);
	sim_run(txd);
	return rc;
}

static const struct virtio_net_hdr *last_hdr(void)
{
	return (const struct virtio_net_hdr *)txd->last;
}

/* ---- transmit header ---- */

static void test_tx_headers(void)
{
	struct vnet_txo cs = {.csum = true, .csum_start = 34, .csum_offset = 16};
	struct vnet_txo gso = cs;
	static const unsigned shapes[] = {1, 2, 3, 7, VNET_TX_MAX_SEGS};

	if (!open_dev(SIM_BASE | SIM_OFFLOADS))
		return;
	CHECK_EQ((VNET_WANT_CSUM ? VNET_OFF_TX_CSUM | VNET_OFF_RX_CSUM : 0) |
	             (VNET_WANT_TSO ? VNET_OFF_TSO4 : 0) | (VNET_WANT_LRO ? VNET_OFF_LRO4 : 0),
	         vnet_offloads(vn), "offloads = what this level asks and the device offers");
	CHECK_EQ(0,
	         sim.accepted &
	             (VIRTIO_BIT(VIRTIO_NET_F_HOST_TSO6) | VIRTIO_BIT(VIRTIO_NET_F_GUEST_TSO6) |
	              VIRTIO_BIT(VIRTIO_NET_F_GUEST_ECN) | VIRTIO_BIT(VIRTIO_NET_F_GUEST_UFO)),
	         "no IPv6, ECN or UFO offload accepted");

	/* No offload: an all-zero header, for every shape. */
	for (unsigned i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		CHECK_EQ(0, send(1514, shapes[i], NULL), "plain frame");
		CHECK_EQ(12 + 1514, txd->last_len, "header + frame reach the device");
		CHECK_EQ(0, last_hdr()->flags | last_hdr()->gso_type | last_hdr()->csum_start,
		         "plain header is zero");
	}
	CHECK_EQ(-VNET_EINVAL, send(1519, 1, NULL), "plain frame beyond MTU + 18");

	/* Checksum offload. */
	for (unsigned i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		int rc = send(1514, shapes[i], &cs);

		if (!VNET_WANT_CSUM) {
			CHECK_EQ(-VNET_EINVAL, rc, "NEEDS_CSUM without CSUM refused");
			continue;
		}
		CHECK_EQ(0, rc, "NEEDS_CSUM frame");
		CHECK_EQ(VIRTIO_NET_HDR_F_NEEDS_CSUM, last_hdr()->flags, "flags");
		CHECK_EQ(34, last_hdr()->csum_start, "csum_start");
		CHECK_EQ(16, last_hdr()->csum_offset, "csum_offset");
		CHECK_EQ(VIRTIO_NET_HDR_GSO_NONE, last_hdr()->gso_type, "no GSO below the MTU");
	}
	cs.csum_start = 1500;
	CHECK_EQ(-VNET_EINVAL, send(1514, 1, &cs), "checksum field beyond the frame");
	cs.csum_start = 34;

	/* TSO: a 64 KB frame in every shape. */
	gso.gso_type = VIRTIO_NET_HDR_GSO_TCPV4;
	gso.gso_size = 1448;
	gso.hdr_len = 66;
	for (unsigned i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		int rc = send(BIG, shapes[i], &gso);

		if (!VNET_WANT_TSO) {
			CHECK_EQ(-VNET_EINVAL, rc, "GSO without HOST_TSO4 refused");
			continue;
		}
		CHECK_EQ(0, rc, "TSO frame");
		CHECK_EQ(12 + BIG, txd->last_len, "whole frame posted");
		CHECK_EQ(VIRTIO_NET_HDR_F_NEEDS_CSUM, last_hdr()->flags, "TSO: NEEDS_CSUM");
		CHECK_EQ(VIRTIO_NET_HDR_GSO_TCPV4, last_hdr()->gso_type, "gso_type");
		CHECK_EQ(1448, last_hdr()->gso_size, "gso_size");
		CHECK_EQ(66, last_hdr()->hdr_len, "hdr_len");
		CHECK_EQ(34, last_hdr()->csum_start, "csum_start");
	}
	if (VNET_WANT_TSO) {
		struct vnet_txo bad = gso;

		bad.csum = false;
		CHECK_EQ(-VNET_EINVAL, send(BIG, 1, &bad), "GSO without NEEDS_CSUM");
		bad = gso;
		bad.gso_size = 0;
		CHECK_EQ(-VNET_EINVAL, send(BIG, 1, &bad), "gso_size 0");
		bad = gso;
		bad.hdr_len = BIG;
		CHECK_EQ(-VNET_EINVAL, send(BIG, 1, &bad), "hdr_len covers the whole frame");
		bad = gso;
		bad.gso_type = VIRTIO_NET_HDR_GSO_TCPV6;
		CHECK_EQ(-VNET_EINVAL, send(BIG, 1, &bad), "TCPv6 GSO never negotiated");
	}
	CHECK_EQ(0, sim.driver_errors, "ring rules");
}

/* A device that offers no offload: everything stays in software. */
static void test_device_without_offloads(void)
{
	struct vnet_txo cs = {.csum = true, .csum_start = 34, .csum_offset = 16};
	struct virtio_net_hdr h = {.flags = VIRTIO_NET_HDR_F_DATA_VALID};
	struct vnet_rx f;

	if (!open_dev(SIM_BASE))
		return;
	CHECK_EQ(0, vnet_offloads(vn), "nothing to offload");
	CHECK_EQ(0, sim.accepted & SIM_OFFLOADS, "no offload feature accepted");
	CHECK_EQ(-VNET_EINVAL, send(1514, 1, &cs), "NEEDS_CSUM refused");
	fill(frame, 200, 1);
	CHECK_EQ(1, sim_rx_inject_hdr(&h, frame, 200, -1, -1), "device delivers");
	CHECK_EQ(1, vnet_rx(vn, &f), "received");
	CHECK_EQ(0, f.flags & VNET_RX_F_CSUM_VALID,
	         "DATA_VALID without GUEST_CSUM is not believed: software checks");
	vnet_rx_release_frame(vn, &f);
}

/* ---- merged receive ---- */

static void test_rx_merged(void)
{
	struct virtio_net_hdr h = {0};
	uint32_t per_buf = VNET_RX_BUF_SIZE - VNET_RX_HDR_OFF;
	uint32_t lens[] = {60,          1514, per_buf - 12, per_buf - 11,
	                   2 * per_buf, 9000, BIG,          VNET_RX_GSO_FRAME_MAX};

	if (!open_dev(SIM_BASE | SIM_OFFLOADS))
		return;
	for (unsigned i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		struct vnet_rx f;
		uint32_t len = lens[i], off = 0, bad = 0;
		bool big = len > 1518;
		int n;

		h = (struct virtio_net_hdr){.flags = VIRTIO_NET_HDR_F_DATA_VALID};
		if (big)
			h = (struct virtio_net_hdr){.flags = VIRTIO_NET_HDR_F_NEEDS_CSUM,
			                            .gso_type = VIRTIO_NET_HDR_GSO_TCPV4,
			                            .gso_size = 1448,
			                            .hdr_len = 66,
			                            .csum_start = 34,
			                            .csum_offset = 16};
		if (!VNET_MRG_RXBUF && len + 12 > per_buf)
			continue; /* a device without MRG_RXBUF never spans buffers */
		fill(frame, len, i);
		n = sim_rx_inject_hdr(&h, frame, len, -1, -1);
		if (!VNET_WANT_LRO && big) {
			CHECK_EQ(-VNET_EDEVICE, vnet_rx(vn, &f),
			         "GSO frame never negotiated: fault");
			open_dev(SIM_BASE | SIM_OFFLOADS);
			continue;
		}
		CHECK_EQ((len + 12 + per_buf - 1) / per_buf, n, "buffers the device filled");
		CHECK_EQ(1, vnet_rx(vn, &f), "merged frame received");
		CHECK_EQ(len, f.len, "frame length");
		CHECK_EQ(n, f.nbufs, "one vnet_rx_buf per buffer");
		for (unsigned k = 0; k < f.nbufs; k++) {
			if (memcmp(f.buf[k].data, frame + off, f.buf[k].len))
				bad++;
			off += f.buf[k].len;
		}
		CHECK_EQ(len, off, "buffer lengths add up");
		CHECK_EQ(0, bad, "bytes in order across buffers");
		CHECK_EQ(VNET_WANT_CSUM ? VNET_RX_F_CSUM_VALID : 0, f.flags & VNET_RX_F_CSUM_VALID,
		         "checksum flag from DATA_VALID / NEEDS_CSUM");
		CHECK_EQ(big ? VNET_RX_F_GSO : 0, f.flags & VNET_RX_F_GSO, "GSO flag");
		CHECK_EQ(big ? 1448 : 0, f.gso_size, "gso_size");
		CHECK_EQ(n, vnet_rx_held(vn), "every buffer held by the caller");
		vnet_rx_release_frame(vn, &f);
		CHECK_EQ(0, vnet_rx_held(vn), "all back after release");
		vnet_poll(vn);
	}
	CHECK_EQ(0, sim.driver_errors, "no buffer posted twice");

	/* Too long: a non-GSO frame beyond MTU + 18 and a GSO frame beyond
	 * a full IP packet are dropped and counted, buffers back. */
	if (VNET_MRG_RXBUF && open_dev(SIM_BASE | SIM_OFFLOADS)) {
		struct vnet_counters rx, tx;
		struct vnet_rx f;

		h = (struct virtio_net_hdr){0};
		sim_rx_inject_hdr(&h, frame, 1519, -1, -1);
		CHECK_EQ(0, vnet_rx(vn, &f), "oversize plain frame not handed up");
		vnet_counters(vn, &rx, &tx);
		CHECK_EQ(1, rx.drops, "and counted");
		CHECK_EQ(0, vnet_rx_held(vn), "its buffers are back");
	}
}

/* A hostile header: one DEVICE_FAULT, counted, the run ends; never a
 * crash or a frame handed up. */
static void expect_rx_fault(const struct virtio_net_hdr *h, uint32_t len, int claim, int complete,
                            const char *what)
{
	struct vnet_counters rx, tx;
	struct vnet_rx f;

	if (!open_dev(SIM_BASE | SIM_OFFLOADS))
		return;
	fill(frame, len, 3);
	sim_rx_inject_hdr(h, frame, len, claim, complete);
	CHECK_EQ(-VNET_EDEVICE, vnet_rx(vn, &f), what);
	vnet_counters(vn, &rx, &tx);
	CHECK_EQ(1, rx.device_errors, "fault counted");
	CHECK_EQ(-VNET_EDEVICE, vnet_poll(vn), "sticky");
	CHECK_EQ(0, rx.frames, "nothing handed up");
}

/* num_buffers larger than what the driver has posted: hold all but a few
 * buffers first. */
static void test_rx_beyond_posted(void)
{
	struct virtio_net_hdr plain = {0};
	static struct vnet_rx held[VIRTQ_MAX_SIZE];
	struct vnet_counters rx, tx;
	unsigned n = 0;

	if (!VNET_MRG_RXBUF || !open_dev(SIM_BASE | SIM_OFFLOADS))
		return;
	fill(frame, 60, 5);
	while (vnet_rx_held(vn) < vnet_rx_ring_size(vn) - 4) {
		sim_rx_inject_hdr(&plain, frame, 60, -1, -1);
		vnet_poll(vn); /* a new pass: the RX budget is per pass */
		CHECK_EQ(1, vnet_rx(vn, &held[n]), "small frame");
		n++;
	}
	CHECK_EQ(4, vn->rx_posted, "four buffers left on the ring");
	sim_rx_inject_hdr(&plain, frame, 60, 5, -1);
	CHECK_EQ(-VNET_EDEVICE, vnet_rx(vn, &held[n]), "num_buffers 5 with 4 posted");
	CHECK(strstr(vnet_error(vn), "num_buffers=5") != NULL,
	      "refused for what was posted, before reading the used ring");
	vnet_counters(vn, &rx, &tx);
	CHECK_EQ(1, rx.device_errors, "fault counted");
}

/* 5.1.3.1 dependencies and what our buffers can hold. */
static void test_feature_dependencies(void)
{
	char err[256] = "";

	/* GUEST_TSO4 without MRG_RXBUF would need 64 KB buffers: declined. */
	if (open_dev(SIM_BASE | (SIM_OFFLOADS & ~VIRTIO_BIT(VIRTIO_NET_F_MRG_RXBUF))))
		CHECK_EQ(0, sim.accepted & VIRTIO_BIT(VIRTIO_NET_F_GUEST_TSO4),
		         "no GUEST_TSO4 without MRG_RXBUF");
	/* TSO without checksum offload is not allowed. */
	if (open_dev(SIM_BASE | (SIM_OFFLOADS & ~VIRTIO_BIT(VIRTIO_NET_F_CSUM))))
		CHECK_EQ(0, sim.accepted & VIRTIO_BIT(VIRTIO_NET_F_HOST_TSO4),
		         "no HOST_TSO4 without CSUM");
	if (open_dev(SIM_BASE | (SIM_OFFLOADS & ~VIRTIO_BIT(VIRTIO_NET_F_GUEST_CSUM))))
		CHECK_EQ(0, sim.accepted & VIRTIO_BIT(VIRTIO_NET_F_GUEST_TSO4),
		         "no GUEST_TSO4 without GUEST_CSUM");
	/* 5.1.4.2: an MTU above what a buffer holds is declined, not clamped
	 * while accepted. */
	shim_reset();
	sim_reset(SIM_BASE | VIRTIO_BIT(VIRTIO_NET_F_MTU));
	sim.mode = SIM_SYNC;
	sim.cfg[VIRTIO_NET_CFG_STATUS] = VIRTIO_NET_S_LINK_UP;
	sim.cfg[VIRTIO_NET_CFG_MTU] = 9000 & 0xff;
	sim.cfg[VIRTIO_NET_CFG_MTU + 1] = 9000 >> 8;
	vn = vnet_open(err, sizeof(err));
	CHECK(vn != NULL, "opens with a 9000-byte MTU offered");
	if (vn) {
		CHECK_EQ(0, sim.accepted & VIRTIO_BIT(VIRTIO_NET_F_MTU), "MTU 9000 declined");
		CHECK_EQ(1500, vnet_mtu(vn), "and 1500 used");
	}
}

static void test_rx_hostile(void)
{
	struct virtio_net_hdr plain = {0};
	struct virtio_net_hdr gso = {.flags = VIRTIO_NET_HDR_F_NEEDS_CSUM,
	                             .gso_type = VIRTIO_NET_HDR_GSO_TCPV4,
	                             .gso_size = 1448,
	                             .hdr_len = 66,
	                             .csum_start = 34,
	                             .csum_offset = 16};
	struct virtio_net_hdr h;

	if (VNET_MRG_RXBUF) {
		expect_rx_fault(&plain, 60, 0, -1, "num_buffers 0");
		expect_rx_fault(&plain, 60, VIRTQ_MAX_SIZE + 1, -1, "num_buffers beyond the ring");
		expect_rx_fault(&plain, 60, VNET_RX_MAX_BUFS + 1, -1, "num_buffers beyond a frame");
		expect_rx_fault(&plain, 3000, 5, -1, "num_buffers beyond what was used");
		expect_rx_fault(&plain, 3 * VNET_RX_BUF_SIZE, -1, 2,
		                "buffers of one frame not used together (5.1.6.4.1)");
	}
	if (!VNET_WANT_LRO)
		return;
	h = gso;
	h.gso_type = VIRTIO_NET_HDR_GSO_UDP;
	expect_rx_fault(&h, 9000, -1, -1, "gso_type UDP never negotiated");
	h.gso_type = VIRTIO_NET_HDR_GSO_TCPV6;
	expect_rx_fault(&h, 9000, -1, -1, "gso_type TCPv6 never negotiated");
	h.gso_type = VIRTIO_NET_HDR_GSO_TCPV4 | VIRTIO_NET_HDR_GSO_ECN;
	expect_rx_fault(&h, 9000, -1, -1, "ECN never negotiated");
	h.gso_type = VIRTIO_NET_HDR_GSO_ECN; /* NONE | ECN: found by fuzz_vnet_dev */
	expect_rx_fault(&h, 9000, -1, -1, "ECN alone, no GSO type");
	h = gso;
	h.gso_size = 0;
	expect_rx_fault(&h, 9000, -1, -1, "gso_size 0");
	h = gso;
	h.hdr_len = 9001;
	expect_rx_fault(&h, 9000, -1, -1, "hdr_len beyond the frame");
	h = gso;
	h.csum_start = 8990;
	expect_rx_fault(&h, 9000, -1, -1, "csum_start beyond the frame");
}

int main(void)
{
	printf("test_offload variant=%s\n", vnet_variant());
	RUN(test_tx_headers);
	RUN(test_device_without_offloads);
	RUN(test_rx_merged);
	RUN(test_rx_beyond_posted);
	RUN(test_feature_dependencies);
	RUN(test_rx_hostile);
	return check_done("test_offload %s", vnet_variant());
}
