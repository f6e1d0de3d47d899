/*
 * test_vnet_faults.c: device faults through the driver: every ring
 * fault on TX and RX, completion of an unpublished chain, DEVICE_NEEDS_RESET,
 * a used length on a TX chain.
 */
#include "tests/unit/vnet_fixture.h"

/* ---- device faults through the driver ---- */

static void run_tx_fault(enum sim_fault f, const char *name)
{
	struct vnet_counters rx, tx;
	int rc = 0, tries;

	if (!dev_open(SIM_SYNC))
		return;
	txd->fault = f;
	for (tries = 0; tries < 600 && rc != -VNET_EDEVICE; tries++) {
		rc = send_frame();
		vnet_tx_end_burst(vn);
		shim_now_ns += 10000;
		if (rc != -VNET_EDEVICE)
			rc = vnet_poll(vn);
	}
	counters(&rx, &tx);
	printf("     tx fault %s: %s after %d frames: %s\n", name,
	       rc == -VNET_EDEVICE ? "detected" : "MISSED", tries, vnet_error(vn));
	CHECK_EQ(-VNET_EDEVICE, rc, name);
	CHECK_EQ(1, tx.device_errors, "counted once");
	CHECK_EQ(-VNET_EDEVICE, send_frame(), "TX refuses after a fault");
	CHECK_EQ(-VNET_EDEVICE, vnet_poll(vn), "poll reports it");
	CHECK_EQ(0, done_twice, "no frame completed twice");
}

static void run_rx_fault(enum sim_fault f, const char *name)
{
	struct vnet_counters rx, tx;
	struct vnet_rx r;
	uint8_t frame[64] = {0};
	int rc = 0, tries;

	if (!dev_open(SIM_SYNC))
		return;
	sim_rx_inject(frame, sizeof(frame));
	CHECK_EQ(1, vnet_rx(vn, &r), "clean frame first");
	vnet_rx_release_frame(vn, &r);
	rxd->fault = f;
	sim_rx_inject(frame, sizeof(frame));
	/* Most faults show in the next vnet_rx(); a buffer used twice one
	 * later, a wrap counter that never toggles a lap later. */
	for (tries = 0; tries < 600; tries++) {
		rc = vnet_rx(vn, &r);
		if (rc < 0)
			break;
		if (rc == 1) {
			vnet_rx_release_frame(vn, &r);
			continue;
		}
		vnet_poll(vn);
		sim_rx_inject(frame, sizeof(frame));
	}
	counters(&rx, &tx);
	printf("     rx fault %s: %s after %d frames\n", name,
	       rc == -VNET_EDEVICE ? "detected" : "MISSED", tries);
	CHECK_EQ(-VNET_EDEVICE, rc, name);
	CHECK_EQ(1, rx.device_errors, "counted once");
	CHECK_EQ(-VNET_EDEVICE, vnet_rx(vn, &r), "RX refuses after a fault");
}

/* avail=batched: a frame added but not yet published (before the end of
 * the burst) does not exist for the device; completing it is a fault. */
static void run_tx_unpublished_fault(void)
{
	struct vnet_counters rx, tx;
	int rc;

	if (!dev_open(SIM_MANUAL))
		return;
	send_frame();
	vnet_tx_end_burst(vn);
	settle();
	send_frame(); /* added, not published */
	CHECK(virtq_unpublished(&vn->txq), "second frame unpublished");
	txd->fault = SIM_FAULT_UNPUBLISHED;
	sim_run(txd);
	/* Reclaim now, as any policy may before the next publication (the
	 * poll pass would publish the frame first). */
	vnet_tx_reclaim(vn, 0xffffffffu);
	rc = vn->failed ? -VNET_EDEVICE : 0;
	counters(&rx, &tx);
	printf("     tx fault used_id_not_published: %s: %s\n",
	       rc == -VNET_EDEVICE ? "detected" : "MISSED", vnet_error(vn));
	CHECK_EQ(-VNET_EDEVICE, rc, "completing an unpublished frame is a fault");
	CHECK_EQ(1, vn->txq.stats.faults[VIRTQ_FAULT_NOT_PUBLISHED], "counted as not published");
}

/* A used length on a TX buffer (nothing writable) is counted, the frame
 * completes normally, the run goes on. */
void test_tx_used_len(void)
{
	struct vnet_counters rx, tx;

	if (!dev_open(SIM_SYNC))
		return;
	for (int i = 0; i < 8; i++) {
		txd->fault = SIM_FAULT_LEN_READONLY;
		CHECK_EQ(0, send_frame(), "frame accepted");
		vnet_tx_end_burst(vn);
		settle();
	}
	CHECK_EQ(0, vnet_drain(vn, 1000000), "drained");
	counters(&rx, &tx);
	CHECK_EQ(0, tx.device_errors, "not a device error");
	CHECK_EQ(8, vn->txq.stats.len_readonly, "each counted");
	CHECK_EQ(VNET_ZEROCOPY ? tx.reclaimed + tx.idle_reclaimed : 8, done_total,
	         "every frame completed");
	CHECK_EQ(0, send_frame(), "TX still works");
}

void test_faults(void)
{
	static const struct {
		enum sim_fault f;
		const char *name;
		bool split, packed; /* which layouts the fault exists in */
	} faults[] = {
	    {SIM_FAULT_ID_RANGE, "used_id_out_of_range", true, true},
	    {SIM_FAULT_NOT_IN_FLIGHT, "used_id_not_in_flight", true, true},
	    {SIM_FAULT_NOT_HEAD, "used_id_not_a_head", true, false},
	    {SIM_FAULT_LEN, "used_len_beyond_buffer", true, true},
	    {SIM_FAULT_IDX_JUMP, "used_idx_jump", true, false},
	    {SIM_FAULT_IDX_AHEAD, "used_idx_one_past_published", true, false},
	    {SIM_FAULT_WRAP, "used_wrap_counter", false, true},
	    {SIM_FAULT_WRAP_STUCK, "wrap_counter_never_toggles", false, true},
	    {SIM_FAULT_USED_TWICE, "used_twice", true, true},
	};
	int rc = 0, passes;

	for (size_t i = 0; i < sizeof(faults) / sizeof(faults[0]); i++) {
		if (!(VNET_IS_RING_PACKED ? faults[i].packed : faults[i].split))
			continue;
		/* TX chains have nothing writable: a length there is counted,
		 * not fatal (test_tx_used_len). */
		if (faults[i].f != SIM_FAULT_LEN)
			run_tx_fault(faults[i].f, faults[i].name);
		/* RX chains are one descriptor: every id is some chain's head. */
		if (faults[i].f != SIM_FAULT_NOT_HEAD)
			run_rx_fault(faults[i].f, faults[i].name);
	}
	if (VNET_AVAIL_BATCHED)
		run_tx_unpublished_fault();
	/* DEVICE_NEEDS_RESET: seen by vnet_check() and, unasked, within a
	 * bounded number of poll passes. */
	if (!dev_open(SIM_SYNC))
		return;
	sim.status |= VIRTIO_STATUS_DEVICE_NEEDS_RESET;
	for (passes = 0; passes < 30000 && rc == 0; passes++) {
		shim_now_ns += 100000; /* a 100 us pass */
		rc = vnet_poll(vn);
	}
	printf("     device_needs_reset: seen after %d poll passes: %s\n", passes, vnet_error(vn));
	CHECK(passes <= (int)(VNET_STATUS_MS_DEFAULT * 10 + 100),
	      "within vnet.status_ms's default and 10 ms of 100 us passes");
	CHECK_EQ(-VNET_EDEVICE, rc, "DEVICE_NEEDS_RESET found by polling");
	CHECK_EQ(-VNET_EDEVICE, vnet_check(vn), "and by vnet_check");
	CHECK(strstr(vnet_error(vn), "needs_reset") != NULL, "error names it");
}
