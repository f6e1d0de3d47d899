/*
 * test_vnet.c: the virtio-net driver (vnet*.c + one ring file) against the
 * simulated device, built once per policy variant; this file holds the
 * bring-up tests (vnet.c: 3.1.1 order and its failures, link state) and
 * main(), which runs every test_vnet_*.c test (vnet_fixture.h lists them;
 * test_vnet_fwd.c, forwarding a received buffer, declares its own in
 * test_vnet.h).
 */
#include "tests/unit/test_vnet.h"
#include "tests/unit/vnet_fixture.h"

int check_failed, check_total;

/* ---- bring-up ---- */

void test_bringup(void)
{
	uint64_t want = VIRTIO_BIT(VIRTIO_F_VERSION_1) | VIRTIO_BIT(VIRTIO_NET_F_MAC) |
	                VIRTIO_BIT(VIRTIO_NET_F_STATUS) | VIRTIO_BIT(VIRTIO_NET_F_MTU);

	if (VNET_EVENT_IDX)
		want |= VIRTIO_BIT(VIRTIO_F_EVENT_IDX);
	if (VNET_MRG_RXBUF)
		want |= VIRTIO_BIT(VIRTIO_NET_F_MRG_RXBUF);
	if (VNET_WANT_CSUM)
		want |= VIRTIO_BIT(VIRTIO_NET_F_CSUM) | VIRTIO_BIT(VIRTIO_NET_F_GUEST_CSUM);
	if (VNET_WANT_TSO)
		want |= VIRTIO_BIT(VIRTIO_NET_F_HOST_TSO4);
	if (VNET_WANT_LRO)
		want |= VIRTIO_BIT(VIRTIO_NET_F_GUEST_TSO4);
	if (VNET_NOTIFICATION_DATA)
		want |= VIRTIO_BIT(VIRTIO_F_NOTIFICATION_DATA);
	if (VNET_IS_RING_PACKED)
		want |= VIRTIO_BIT(VIRTIO_F_RING_PACKED);
	if (!dev_open(SIM_SYNC))
		return;
	CHECK_EQ(want, sim.accepted, "accepted features");
	CHECK_EQ(want, vnet_features(vn), "features reported");
	CHECK_EQ(VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK |
	             VIRTIO_STATUS_DRIVER_OK,
	         sim.status, "device status after bring-up");
	CHECK_EQ(0, sim.driver_errors, "3.1.1 order and ring rules");
	CHECK_EQ(256, sim_published(rxd), "every RX buffer posted");
	CHECK_EQ(0x56, vnet_mac(vn)[5], "MAC from config");
	CHECK_EQ(1500, vnet_mtu(vn), "MTU");
	CHECK(vnet_link_up(vn), "link up");
	CHECK(!vnet_kick_pending(vn), "nothing pending after bring-up");
	CHECK(strstr(vnet_variant(), "reclaim=") != NULL, "variant string");
	CHECK_EQ(VNET_IS_RING_PACKED, strstr(vnet_variant(), ",ring=packed") != NULL,
	         "variant string names the packed layout");
	CHECK_EQ(!VNET_IS_RING_PACKED, strstr(vnet_variant(), ",ring=split") != NULL,
	         "variant string names the split layout");
	CHECK_EQ(VNET_IS_RING_PACKED, vn->txq.packed, "ring layout linked");
}

/* 5.1.6.3.1: without MRG_RXBUF every RX buffer must hold a whole frame of
 * the MTU the driver uses; a device offering a larger MTU must not make
 * the driver use it with 2 KiB buffers. */
void test_device_mtu_larger_than_buffers(void)
{
	char err[256] = "";

	dev_config(SIM_FEATURES, SIM_SYNC);
	sim.cfg[VIRTIO_NET_CFG_MTU] = 9000 & 0xff;
	sim.cfg[VIRTIO_NET_CFG_MTU + 1] = 9000 >> 8;
	vn = vnet_open(err, sizeof(err));
	CHECK(vn != NULL, "opens with a 9000-byte device MTU");
	if (!vn)
		return;
	printf("     device MTU 9000 -> driver MTU %u\n", vnet_mtu(vn));
	if (!(vnet_features(vn) & VIRTIO_BIT(VIRTIO_NET_F_MRG_RXBUF)))
		CHECK(vnet_mtu(vn) + 18u + VNET_HDR_LEN <= VNET_RX_BUF_SIZE - VNET_RX_HDR_OFF,
		      "MTU frames fit one RX buffer");
}

static void expect_open_failure(const char *step, const char *what)
{
	char err[256] = "";
	struct vnet *v = vnet_open(err, sizeof(err));

	CHECK(v == NULL, what);
	CHECK(strstr(err, step) != NULL, what);
	CHECK(sim.status & VIRTIO_STATUS_FAILED, "FAILED status bit set");
	printf("     %s -> \"%s\"\n", what, err);
}

void test_bringup_failures(void)
{
	dev_config(SIM_FEATURES & ~VIRTIO_BIT(VIRTIO_F_VERSION_1), SIM_SYNC);
	expect_open_failure("step 4", "legacy-only device (no VERSION_1)");

	dev_config(SIM_FEATURES, SIM_SYNC);
	sim.refuse_features = true;
	expect_open_failure("step 6", "device clears FEATURES_OK");

	dev_config(SIM_FEATURES, SIM_SYNC);
	sim.num_queues = 1;
	expect_open_failure("step 7", "one queue only");

	if (VNET_EVENT_IDX) {
		dev_config(SIM_FEATURES & ~VIRTIO_BIT(VIRTIO_F_EVENT_IDX), SIM_SYNC);
		expect_open_failure("step 4", "event_idx build, device without EVENT_IDX");
	}
	if (VNET_IS_RING_PACKED) {
		dev_config(SIM_FEATURES & ~VIRTIO_BIT(VIRTIO_F_RING_PACKED), SIM_SYNC);
		expect_open_failure("step 4", "ring=packed build, device without RING_PACKED");
	}
}

/* ---- the status check's register reads (exits under KVM) ---- */

/* While polling, the device status and the link are read once every
 * VNET_STATUS_MS_DEFAULT ms, not more: each read is an exit under KVM, and
 * a check every 10 ms was 593 exits a second on a polling appliance,
 * stalls its frames saw (docs/results/ndr-mlrsearch.md). */
void test_status_check_period(void)
{
	const uint64_t span_ms = 3 * VNET_STATUS_MS_DEFAULT;
	unsigned status0, cfg0, checks;

	if (!dev_open(SIM_SYNC))
		return;
	status0 = sim.status_reads;
	cfg0 = sim.cfg_reads;
	for (uint64_t t = 0; t < span_ms * 10; t++) {
		shim_now_ns += 100000; /* a 100 us pass */
		CHECK_EQ(0, vnet_poll(vn), "link up: polling goes on");
	}
	checks = sim.status_reads - status0;
	printf("     %llu ms of polling: %u device status reads, %u config reads\n",
	       (unsigned long long)span_ms, checks, sim.cfg_reads - cfg0);
	CHECK(checks >= 2 && checks <= 4, "one status check per vnet.status_ms (3 periods)");
	CHECK_EQ(checks, sim.cfg_reads - cfg0, "and one link read with each");
}

/* ---- link down mid-run ends the run, in bounded time ---- */

void test_link_down(void)
{
	int rc = 0;
	uint64_t t0;

	if (!dev_open(SIM_SYNC))
		return;
	for (int i = 0; i < 1000; i++)
		CHECK_EQ(0, vnet_poll(vn), "link up: polling goes on");
	sim.cfg[VIRTIO_NET_CFG_STATUS] = 0; /* carrier lost */
	t0 = shim_now_ns;
	for (int i = 0; i < 30000 && rc == 0; i++) {
		shim_now_ns += 100000; /* a 100 us pass */
		rc = vnet_poll(vn);
	}
	printf("     link down seen after %llu us: %s\n",
	       (unsigned long long)((shim_now_ns - t0) / 1000), vnet_error(vn));
	CHECK_EQ(-VNET_EDEVICE, rc, "link down ends the run");
	CHECK(shim_now_ns - t0 <= (VNET_STATUS_MS_DEFAULT + 10) * 1000000ull,
	      "within vnet.status_ms's default and 64 passes");
	CHECK(strstr(vnet_error(vn), "link down") != NULL, "the error names it");
	CHECK(!vnet_link_up(vn), "vnet_link_up() says down");
	CHECK_EQ(-VNET_EDEVICE, send_frame(), "TX refuses afterwards");
}

/* Barrier B needs the register read before a suppressed kick in every
 * policy, not only the halting ones (virtq_kick_prepare()): under TCG both
 * queues get it, under KVM neither. */
void test_kick_sync_every_policy(void)
{
	if (dev_open(SIM_SYNC)) {
		CHECK(vn->txq.sync != NULL && vn->rxq.sync != NULL,
		      "tcg: both queues read a register before a suppression");
	}
	shim_accel = "kvm";
	if (dev_open(SIM_SYNC))
		CHECK(vn->txq.sync == NULL && vn->rxq.sync == NULL, "kvm: fences reach the device");
	shim_accel = "tcg";
}

int main(void)
{
	printf("test_vnet variant=%s\n", vnet_variant());
	RUN(test_kick_sync_every_policy);
	RUN(test_bringup);
	RUN(test_bringup_failures);
	RUN(test_device_mtu_larger_than_buffers);
	RUN(test_burst_kicks_sync_device);
	RUN(test_burst_kicks_sleepy_device);
	RUN(test_avail_publish);
	RUN(test_no_pending_kick_when_idle);
	RUN(test_kick_hold_bound);
	RUN(test_backpressure);
	RUN(test_tx_layout);
	RUN(test_rx_path);
	RUN(test_wraparound);
	RUN(test_faults);
	RUN(test_tx_used_len);
	RUN(test_reclaim_order);
	RUN(test_random_schedules);
	RUN(test_tx_idle_reclaim);
	RUN(test_tx_stale_reclaim_busy_stream);
	RUN(test_drain);
	RUN(test_poll_flushes_kick);
	RUN(test_event_idx_ahead);
	RUN(test_rx_header_fields);
	RUN(test_rx_budget);
	RUN(test_status_check_period);
	RUN(test_link_down);
	RUN(test_idle_policy);
	RUN(test_rx_coalesce);
	RUN(test_idle_weak_fences);
	test_vnet_fwd();
	test_vnet_mq();
	return check_done("test_vnet %s", vnet_variant());
}
