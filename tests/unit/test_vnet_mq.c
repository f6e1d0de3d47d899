/*
 * test_vnet_mq.c: multiqueue (vnet_mq.c, VIRTIO_NET_F_MQ, virtio 1.2
 * 5.1.6.5.5) against a simulated device with two queue pairs
 * (sim_net_mq_reset(): rx0, tx0, rx1, tx1 and the control queue at 4):
 * what is negotiated, where each queue is, the VQ_PAIRS_SET command,
 * frames and counters per pair, and every refusal; in the halting
 * variants also where each queue's interrupt goes (pair k's to CPU k's
 * APIC id) and that each pair counts only its own interrupts.
 */
#include "tests/unit/vnet_fixture.h"

#define MQ_BITS (VIRTIO_BIT(VIRTIO_NET_F_MQ) | VIRTIO_BIT(VIRTIO_NET_F_CTRL_VQ))

/* What mq_open()'s next device offers of RSS (key 0: no RSS). */
static struct {
	uint8_t key;
	uint16_t table;
	uint32_t types;
} next_rss;

/* tx_done per pair: arg is the pair's counter. */
static unsigned mq_done[2];

static void mq_on_tx_done(void *arg, void *cookie)
{
	(void)cookie;
	(*(unsigned *)arg)++;
}

/* A fresh two-pair device (max_virtqueue_pairs = max) answering as told,
 * and the driver opened on it with `pairs` pairs; NULL and err if that
 * fails. */
static struct vnet *mq_open(uint16_t max, unsigned pairs, enum sim_ctrl_answer answer, char *err,
                            size_t errlen)
{
	struct vnet *v;

	dev_config(SIM_FEATURES, SIM_SYNC);
	sim_net_mq_reset(SIM_FEATURES, 1500, max);
	if (next_rss.key)
		sim_net_rss_offer(next_rss.key, next_rss.table, next_rss.types);
	next_rss.key = 0;
	sim.ctrl_answer = answer;
	err[0] = 0;
	/* The clock moves during bring-up (1 us per read), so a command the
	 * device never sees answered ends the 1 s wait: a failed check, not
	 * a hang. */
	shim_clock_step = 1000;
	v = vnet_open_mq(pairs, err, errlen);
	shim_clock_step = 0;
	vn = v;
	mq_done[0] = mq_done[1] = 0;
	for (unsigned k = 0; v && k < vnet_queue_pairs(v); k++)
		vnet_set_tx_done(vnet_queue(v, k), mq_on_tx_done, &mq_done[k % 2]);
	return v;
}

/* The ring memory the device was given for queue qidx, and the driver's. */
static const void *sim_ring(uint16_t qidx)
{
	return sim.q[qidx].packed ? (const void *)sim.q[qidx].pdesc
	                          : (const void *)sim.q[qidx].desc;
}

static const void *drv_ring(const struct virtq *vq)
{
	return vq->packed ? (const void *)vq->pdesc : (const void *)vq->desc;
}

/* Frame i on pair q: a 60-byte frame whose bytes say pair and number
 * (with headroom: an inline-header build writes the header in front). */
static int mq_send(struct vnet *q, unsigned i)
{
	static uint8_t f[2][64][HEADROOM + FRAME_LEN];
	uint8_t *p = f[vnet_queue_index(q) % 2][i % 64] + HEADROOM;
	struct vnet_seg seg = {p, FRAME_LEN};

	for (unsigned b = 0; b < FRAME_LEN; b++)
		p[b] = (uint8_t)(0x40 * vnet_queue_index(q) + i + b);
	return vnet_tx(q, &seg, 1, NULL, (void *)(uintptr_t)(i + 1));
}

/* What the appliance does before it waits, on one pair (the labelled
 * timer variant also lets its hold expire). */
static void mq_settle(struct vnet *q)
{
	vnet_tx_end_burst(q);
	vnet_poll(q);
	if (VNET_IS_KICK_TIMER) {
		shim_now_ns += VNET_KICK_TIMER_US * 1000ull;
		vnet_poll(q);
	}
	vnet_before_wait(q);
}

/* mq=1 (the default) on a device that offers MQ: neither feature, no
 * control queue, no command; in every variant. */
static void test_mq_one_pair(void)
{
	char err[256];
	struct vnet *v = mq_open(2, 1, SIM_CTRL_OK, err, sizeof(err));

	CHECK(v != NULL, "mq=1 opens on an MQ device");
	if (!v) {
		printf("     %s\n", err);
		return;
	}
	CHECK_EQ(0, sim.accepted & MQ_BITS, "mq=1: neither MQ nor CTRL_VQ accepted");
	CHECK_EQ(0, vnet_features(v) & MQ_BITS, "mq=1: neither reported");
	CHECK_EQ(1, vnet_queue_pairs(v), "one pair");
	CHECK(vnet_queue(v, 0) == v && vnet_queue(v, 1) == NULL, "vnet_queue: pair 0 only");
	CHECK(!sim.q[2].ready && !sim.q[3].ready && !sim.q[4].ready,
	      "mq=1: only queues 0 and 1 set up");
	CHECK_EQ(0, sim.ctrl_cmds, "mq=1: no control command");
	CHECK_EQ(0, sim.driver_errors, "3.1.1 order and ring rules");
}

/* Not IDLE=poll: pair k's interrupts go to CPU k, so mq=2 needs two
 * running CPUs, an error that says so (before anything is negotiated). */
static void test_mq_needs_cpu_per_pair(void)
{
	char err[256];
	struct vnet *v;

	shim_cpus = 1;
	v = mq_open(2, 2, SIM_CTRL_OK, err, sizeof(err));
	shim_cpus = 2;
	CHECK(v == NULL, "mq=2 on one CPU refused");
	CHECK(strstr(err, "mq=2 with IDLE=") && strstr(err, "needs a CPU per pair"),
	      "the error names the reason");
	CHECK(sim.status & VIRTIO_STATUS_FAILED, "FAILED status bit set");
	CHECK_EQ(0, sim.irq_setups, "no interrupt set up");
	printf("     %s -> \"%s\"\n", vnet_idle_policy(), err);
}

/* The interrupt plan the transport gets: queue q of pair q / 2 to that
 * pair's CPU (SHIM_APIC_ID(k), not k), config to pair 0's; mq=1 as
 * before, both queues to the BSP. Then each pair's counters and IDLE
 * figures come from its own queues' slots. */
static void test_mq_irq_per_pair(void)
{
	char err[256];
	struct vnet *v = mq_open(2, 1, SIM_CTRL_OK, err, sizeof(err)), *q0, *q1;

	CHECK(v && sim.irq_setups == 1 && sim.irq_plan.nqueues == 2, "mq=1: one plan, 2 queues");
	CHECK(sim.irq_plan.dest[0] == SHIM_APIC_ID(0) && sim.irq_plan.dest[1] == SHIM_APIC_ID(0),
	      "mq=1: both queues to the BSP");
	v = mq_open(2, 2, SIM_CTRL_OK, err, sizeof(err));
	CHECK(v != NULL, "mq=2 opens on two CPUs");
	if (!v) {
		printf("     %s\n", err);
		return;
	}
	CHECK_EQ(1, sim.irq_setups, "one interrupt set-up");
	CHECK_EQ(4, sim.irq_plan.nqueues, "four queues with interrupts (not the control queue)");
	CHECK_EQ(SHIM_APIC_ID(0), sim.irq_plan.cfg_dest, "config to pair 0's CPU");
	for (unsigned q = 0; q < 4; q++)
		CHECK_EQ(SHIM_APIC_ID(q / 2), sim.irq_plan.dest[q], "queue q to pair q/2's CPU");
	q0 = vnet_queue(v, 0);
	q1 = vnet_queue(v, 1);
	volatile uint64_t *irqs = (volatile uint64_t *)virtio_dev_irqs(&q0->vd);
	irqs[0] = 1; /* config */
	irqs[1] = 2; /* queue 0: pair 0 RX */
	irqs[2] = 3;
	irqs[3] = 7; /* queue 2: pair 1 RX */
	irqs[4] = 5;
	struct vnet_counters rx, tx;
	struct vnet_idle_stats s;
	vnet_counters(q0, &rx, &tx);
	CHECK(rx.irqs == 2 && tx.irqs == 3, "pair 0 counts queues 0 and 1");
	vnet_counters(q1, &rx, &tx);
	CHECK(rx.irqs == 7 && tx.irqs == 5, "pair 1 counts queues 2 and 3");
	vnet_idle_counters(q0, &s);
	CHECK_EQ(1, s.irq_cfg, "pair 0 has the config interrupts");
	vnet_idle_counters(q1, &s);
	CHECK_EQ(0, s.irq_cfg, "pair 1 none");
	for (unsigned i = 0; i < VIRTIO_DEV_IRQ_SLOTS; i++)
		irqs[i] = 0;
}

/* mq=2 on the two-pair device: features, queue indices, VQ_PAIRS_SET(2),
 * distinct rings per pair. */
static void test_mq_bringup(void)
{
	char err[256];
	struct vnet *v = mq_open(2, 2, SIM_CTRL_OK, err, sizeof(err)), *q0, *q1;

	CHECK(v != NULL, "mq=2 opens");
	if (!v) {
		printf("     %s\n", err);
		return;
	}
	CHECK_EQ(MQ_BITS, sim.accepted & MQ_BITS, "mq=2: MQ and CTRL_VQ accepted");
	CHECK_EQ(MQ_BITS, vnet_features(v) & MQ_BITS, "mq=2: both reported");
	CHECK_EQ(VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK |
	             VIRTIO_STATUS_DRIVER_OK,
	         sim.status, "device status after bring-up");
	CHECK_EQ(0, sim.driver_errors, "3.1.1 order and ring rules");
	CHECK_EQ(2, vnet_queue_pairs(v), "two pairs");
	q0 = vnet_queue(v, 0);
	q1 = vnet_queue(v, 1);
	CHECK(q0 == v, "pair 0 is the device's struct vnet");
	CHECK(q1 != NULL && q1 != q0, "pair 1 is a struct vnet of its own");
	CHECK(vnet_queue(v, 2) == NULL, "no pair 2");
	if (!q1 || q1 == q0)
		return;
	CHECK_EQ(0, vnet_queue_index(q0), "pair 0's index");
	CHECK_EQ(1, vnet_queue_index(q1), "pair 1's index");
	CHECK_EQ(2, vnet_queue_pairs(q1), "pair 1 knows the count");
	/* 5.1.2: receiveq k+1 at 2k, transmitq k+1 at 2k+1, controlq at 2 x max. */
	for (uint16_t i = 0; i < 5; i++)
		CHECK(sim.q[i].ready, "queues 0..4 set up");
	CHECK(sim_ring(0) == drv_ring(&q0->rxq), "pair 0 RX is queue 0");
	CHECK(sim_ring(1) == drv_ring(&q0->txq), "pair 0 TX is queue 1");
	CHECK(sim_ring(2) == drv_ring(&q1->rxq), "pair 1 RX is queue 2");
	CHECK(sim_ring(3) == drv_ring(&q1->txq), "pair 1 TX is queue 3");
	CHECK(drv_ring(&q1->rxq) != drv_ring(&q0->rxq) && drv_ring(&q1->txq) != drv_ring(&q0->txq),
	      "each pair's rings its own");
	CHECK(q1->rx_mem != q0->rx_mem && q1->tx_mem != q0->tx_mem, "each pair's buffers its own");
	if (sim.q[0].ready && sim.q[2].ready) {
		CHECK_EQ(256, sim_published(&sim.q[0]), "pair 0: every RX buffer posted");
		CHECK_EQ(256, sim_published(&sim.q[2]), "pair 1: every RX buffer posted");
	}
	/* 5.1.6.5.5: one VQ_PAIRS_SET, virtqueue_pairs le16 = 2, acked. */
	CHECK_EQ(1, sim.ctrl_cmds, "one control command");
	CHECK_EQ(VIRTIO_NET_CTRL_MQ, sim.ctrl_class, "class VIRTIO_NET_CTRL_MQ");
	CHECK_EQ(VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET, sim.ctrl_cmd, "command VQ_PAIRS_SET");
	CHECK_EQ(4, sim.ctrl_len, "class, command, le16 virtqueue_pairs");
	CHECK_EQ(2, sim.ctrl_data[0] | sim.ctrl_data[1] << 8, "virtqueue_pairs = 2 (le16)");
	CHECK_EQ(2, sim.mq_pairs, "the device uses two pairs");
	CHECK_EQ(1, sim.q[4].completed, "the command was answered");
	CHECK(!vnet_kick_pending(q0) && !vnet_kick_pending(q1), "nothing pending after bring-up");
}

/* A device with more pairs than asked for: the control queue still sits
 * at 2 x max_virtqueue_pairs (5.1.2), past queues nobody uses. */
static void test_mq_ctrlq_at_max(void)
{
	char err[256];
	struct vnet *v = mq_open(3, 2, SIM_CTRL_OK, err, sizeof(err));

	/* The open-and-return of the tests above again: each test checks its
	 * own case's open and must return from itself when it fails. */
	CHECK(v != NULL, "mq=2 opens on a max_virtqueue_pairs=3 device");
	if (!v) {
		printf("     %s\n", err);
		return;
	}
	CHECK(sim.q[6].ready, "control queue at 6 = 2 x max_virtqueue_pairs");
	CHECK(!sim.q[4].ready && !sim.q[5].ready, "pair 3's queues (4, 5) not set up");
	CHECK_EQ(1, sim.ctrl_cmds, "the command reached it");
	CHECK_EQ(2, sim.ctrl_data[0] | sim.ctrl_data[1] << 8, "virtqueue_pairs = 2, not max");
	CHECK_EQ(0, sim.driver_errors, "no rule broken");
}

/* Frames on pair 1 go out on queue 3 only, frames the device puts on
 * queue 2 come in on pair 1 only, and each pair counts its own. */
static void test_mq_per_pair_traffic(void)
{
	enum { N1 = 40, N0 = 7, R1 = 5, R0 = 3 };
	struct vnet_counters rx0, tx0, rx1, tx1;
	struct vnet_rx got;
	char err[256];
	struct vnet *v = mq_open(2, 2, SIM_CTRL_OK, err, sizeof(err)), *q0, *q1;
	unsigned sent = 0, bad = 0, n;
	uint8_t frame[FRAME_LEN];

	CHECK(v != NULL, "mq=2 opens");
	if (!v) {
		printf("     %s\n", err);
		return;
	}
	q0 = vnet_queue(v, 0);
	q1 = vnet_queue(v, 1);
	if (!q1 || q1 == q0) {
		CHECK(0, "pair 1 is a struct vnet of its own");
		return;
	}
	for (unsigned i = 0; i < N1; i++)
		sent += mq_send(q1, i) == 0;
	mq_settle(q1);
	CHECK_EQ(N1, sent, "pair 1 takes every frame");
	CHECK_EQ(N1, sim.q[3].frames, "pair 1's frames on transmitq2 (queue 3)");
	CHECK_EQ(0, sim.q[1].frames, "none on transmitq1 (queue 1)");
	CHECK_EQ(0x40 + (N1 - 1), sim.q[3].last[12], "the last frame is pair 1's, whole");
	CHECK_EQ(FRAME_LEN + 12, sim.q[3].last_len, "header + frame");
	sent = 0;
	for (unsigned i = 0; i < N0; i++)
		sent += mq_send(q0, i) == 0;
	mq_settle(q0);
	CHECK_EQ(N0, sent, "pair 0 takes every frame");
	CHECK_EQ(N0, sim.q[1].frames, "pair 0's frames on queue 1");
	CHECK_EQ(N1, sim.q[3].frames, "queue 3 unchanged");
	CHECK_EQ(N0 - 1, sim.q[1].last[12], "the last frame on queue 1 is pair 0's");
	CHECK_EQ(0, vnet_drain(q1, 1000000000ull), "pair 1 drains");
	CHECK_EQ(0, vnet_drain(q0, 1000000000ull), "pair 0 drains");
	CHECK_EQ(N1, mq_done[1], "pair 1's tx_done for each of its frames");
	CHECK_EQ(N0, mq_done[0], "pair 0's for each of its");

	/* RX: receiveq2 (queue 2) is pair 1's. */
	for (unsigned i = 0; i < R1; i++) {
		memset(frame, 0x10 + (int)i, sizeof(frame));
		CHECK(sim_rx_inject_q(2, frame, sizeof(frame)), "device delivers on queue 2");
	}
	for (unsigned i = 0; i < R0; i++) {
		memset(frame, 0x80 + (int)i, sizeof(frame));
		CHECK(sim_rx_inject_q(0, frame, sizeof(frame)), "device delivers on queue 0");
	}
	for (n = 0; vnet_rx(q1, &got) == 1; n++) {
		if (got.len != FRAME_LEN || ((const uint8_t *)got.buf[0].data)[0] != 0x10 + n)
			bad++;
		vnet_rx_release_frame(q1, &got);
	}
	CHECK_EQ(R1, n, "pair 1 receives queue 2's frames");
	CHECK_EQ(0, bad, "in order, whole, none of queue 0's");
	for (n = 0; vnet_rx(q0, &got) == 1; n++) {
		if (got.len != FRAME_LEN || ((const uint8_t *)got.buf[0].data)[0] != 0x80 + n)
			bad++;
		vnet_rx_release_frame(q0, &got);
	}
	CHECK_EQ(R0, n, "pair 0 receives queue 0's frames only");
	CHECK_EQ(0, bad, "none of queue 2's");

	vnet_counters(q0, &rx0, &tx0);
	vnet_counters(q1, &rx1, &tx1);
	CHECK_EQ(N1, tx1.frames, "pair 1 counts its TX frames");
	CHECK_EQ(N0, tx0.frames, "pair 0 counts its own");
	CHECK_EQ(N1 * FRAME_LEN, tx1.bytes, "pair 1's TX bytes");
	CHECK_EQ(R1, rx1.frames, "pair 1 counts its RX frames");
	CHECK_EQ(R0, rx0.frames, "pair 0 counts its own");
	CHECK_EQ(sim.q[3].doorbells, tx1.kicks, "pair 1's TX kicks are queue 3's doorbells");
	CHECK_EQ(sim.q[1].doorbells, tx0.kicks, "pair 0's are queue 1's");
	CHECK_EQ(0, sim.driver_errors, "no rule broken");
}

static void expect_mq_failure(uint16_t max, unsigned pairs, enum sim_ctrl_answer answer,
                              const char *says, const char *what)
{
	char err[256];
	struct vnet *v = mq_open(max, pairs, answer, err, sizeof(err));

	CHECK(v == NULL, what);
	CHECK(strstr(err, says) != NULL, what);
	CHECK(sim.status & VIRTIO_STATUS_FAILED, "FAILED status bit set");
	printf("     %s -> \"%s\"\n", what, err);
}

/* Each refusal is an error naming it, never a hang. */
static void test_mq_refusals(void)
{
	char err[256] = "";
	uint64_t t0;

	dev_config(SIM_FEATURES, SIM_SYNC); /* no MQ */
	CHECK(vnet_open_mq(2, err, sizeof(err)) == NULL, "mq=2 on a device without MQ refused");
	CHECK(strstr(err, "needs VIRTIO_NET_F_MQ and CTRL_VQ") != NULL, "the error names MQ");
	CHECK_EQ(0, sim.accepted & MQ_BITS, "nothing of MQ accepted");
	printf("     no MQ -> \"%s\"\n", err);

	expect_mq_failure(2, 3, SIM_CTRL_OK, "mq=3 but the device offers max_virtqueue_pairs=2",
	                  "mq=3 on a two-pair device");
	CHECK_EQ(0, sim.ctrl_cmds, "no command sent");

	expect_mq_failure(2, 2, SIM_CTRL_ERR, "VQ_PAIRS_SET(2) answered 1, not OK",
	                  "control queue answers VIRTIO_NET_ERR");
	CHECK_EQ(1, sim.ctrl_cmds, "the command was sent");

	/* A device that never answers: the wait ends at 1 s of clock_ns()
	 * (mq_open() moves it 1 us per read; t0 is 0 after the reset). */
	t0 = 0;
	CHECK(mq_open(2, 2, SIM_CTRL_NEVER, err, sizeof(err)) == NULL,
	      "control queue never answers: refused");
	CHECK(strstr(err, "VQ_PAIRS_SET(2) not answered in 1 s") != NULL, "the error says so");
	CHECK(sim.status & VIRTIO_STATUS_FAILED, "FAILED status bit set");
	CHECK_EQ(1, sim.ctrl_cmds, "the command was taken");
	CHECK(shim_now_ns - t0 >= 1000000000ull && shim_now_ns - t0 < 1100000000ull,
	      "after 1 s, not much more");
	printf("     never answered -> \"%s\" after %llu ms\n", err,
	       (unsigned long long)((shim_now_ns - t0) / 1000000));
}

/* The Toeplitz hash (5.1.6.4.3.1) against Microsoft's RSS verification
 * suite (its key is vnet_rss.c's): IPv4 alone, then with TCP ports. */
static const uint8_t ms_key[VNET_RSS_KEY_LEN] = {
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
    0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
    0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa};
static const struct {
	uint8_t src[4], dst[4];
	uint16_t sport, dport;
	uint32_t ip, tcp;
} ms_vectors[] = {
    {{66, 9, 149, 187}, {161, 142, 100, 80}, 2794, 1766, 0x323e8fc2, 0x51ccc178},
    {{199, 92, 111, 2}, {65, 69, 140, 83}, 14230, 4739, 0xd718262a, 0xc626b0ea},
    {{24, 19, 198, 95}, {12, 22, 207, 184}, 12898, 38024, 0xd2d0a5de, 0x5c2b394a},
    {{38, 27, 205, 30}, {209, 142, 163, 6}, 48228, 2217, 0x82989176, 0xafc7327f},
    {{153, 39, 163, 191}, {202, 188, 127, 2}, 44251, 1303, 0x5d1809c5, 0x10e828a2},
};

/* ms_vectors[i]'s hash input: source and destination address, then the
 * ports, in network order (virtio 1.2 5.1.6.4.3.1). */
static void ms_input(size_t i, uint8_t in[12])
{
	memcpy(in, ms_vectors[i].src, 4);
	memcpy(in + 4, ms_vectors[i].dst, 4);
	in[8] = (uint8_t)(ms_vectors[i].sport >> 8);
	in[9] = (uint8_t)ms_vectors[i].sport;
	in[10] = (uint8_t)(ms_vectors[i].dport >> 8);
	in[11] = (uint8_t)ms_vectors[i].dport;
}

static void test_rss_toeplitz(void)
{
	for (size_t i = 0; i < sizeof(ms_vectors) / sizeof(ms_vectors[0]); i++) {
		uint8_t in[12];

		ms_input(i, in);
		CHECK_EQ(ms_vectors[i].ip, vnet_toeplitz(ms_key, sizeof(ms_key), in, 8),
		         "IPv4 2-tuple hash");
		CHECK_EQ(ms_vectors[i].tcp, vnet_toeplitz(ms_key, sizeof(ms_key), in, 12),
		         "TCP/IPv4 4-tuple hash");
	}
}

#define RSS_TYPES_V4 7u /* IPv4, TCPv4, UDPv4 */

/* A frame of ms_vectors[i]'s flow: Ethernet, IPv4 (ihl 5, or 6 with an
 * option), then proto's ports. Its length. */
static size_t rss_frame(uint8_t *f, size_t i, uint8_t proto, unsigned ihl_words, uint16_t frag)
{
	unsigned ihl = ihl_words * 4u;

	memset(f, 0, 64);
	f[12] = 0x08;
	f[14] = (uint8_t)(0x40 | ihl_words);
	f[14 + 6] = (uint8_t)(frag >> 8);
	f[14 + 7] = (uint8_t)frag;
	f[14 + 9] = proto;
	memcpy(f + 14 + 12, ms_vectors[i].src, 4);
	memcpy(f + 14 + 16, ms_vectors[i].dst, 4);
	f[14 + ihl] = (uint8_t)(ms_vectors[i].sport >> 8);
	f[14 + ihl + 1] = (uint8_t)ms_vectors[i].sport;
	f[14 + ihl + 2] = (uint8_t)(ms_vectors[i].dport >> 8);
	f[14 + ihl + 3] = (uint8_t)ms_vectors[i].dport;
	return 14 + ihl + 8;
}

/* With RSS on (two pairs, 128 entries): the look-up hash the receivers use
 * is the bitwise one, for the published vectors and for inputs that set
 * every byte value at every position; a received frame is given the
 * queue its flow's hash names (TCP, UDP, with an IP option), none when it
 * is not TCP/UDP over unfragmented IPv4 or too short to hold its ports.
 * This is what rss_misses (net/netif.c, apps/pkt.c) compares. */
static void test_rss_lookup(void)
{
	uint8_t in[VNET_RSS_INPUT_LEN], f[64];
	unsigned same = 0, tries = 0;
	uint32_t x = 0x12345678u;

	for (size_t i = 0; i < sizeof(ms_vectors) / sizeof(ms_vectors[0]); i++) {
		ms_input(i, in);
		CHECK_EQ(ms_vectors[i].tcp, vnet_rss_hash(in), "look-up hash: published vector");
	}
	for (unsigned v = 0; v < 256; v++)
		for (unsigned r = 0; r < 4; r++, tries++) {
			for (unsigned k = 0; k < VNET_RSS_INPUT_LEN; k++) {
				x = x * 1103515245u + 12345u;
				in[k] = (uint8_t)(x >> 16);
			}
			in[(v + r) % VNET_RSS_INPUT_LEN] = (uint8_t)v;
			same += vnet_rss_hash(in) ==
			        vnet_toeplitz(ms_key, sizeof(ms_key), in, sizeof(in));
		}
	CHECK_EQ(tries, same, "look-up hash = bitwise hash on 1024 inputs");
	for (size_t i = 0; i < sizeof(ms_vectors) / sizeof(ms_vectors[0]); i++) {
		int want = (int)(ms_vectors[i].tcp & 127) % 2;
		size_t n = rss_frame(f, i, 6, 5, 0);

		CHECK_EQ(want, vnet_rss_frame_queue(f, n), "a TCP frame: its flow's queue");
		CHECK_EQ(want, vnet_rss_frame_queue(f, rss_frame(f, i, 17, 5, 0x4000)),
		         "a UDP frame (DF set): its flow's queue");
		CHECK_EQ(want, vnet_rss_frame_queue(f, rss_frame(f, i, 6, 6, 0)),
		         "an IP option: the ports after it");
		CHECK_EQ(-1, vnet_rss_frame_queue(f, rss_frame(f, i, 1, 5, 0)), "ICMP: no queue");
		CHECK_EQ(-1, vnet_rss_frame_queue(f, rss_frame(f, i, 17, 5, 0x2000)),
		         "a fragment (MF): no queue");
		CHECK_EQ(-1, vnet_rss_frame_queue(f, rss_frame(f, i, 17, 5, 0x0010)),
		         "a later fragment: no queue");
		n = rss_frame(f, i, 6, 5, 0);
		CHECK_EQ(-1, vnet_rss_frame_queue(f, 14 + 20 + 3),
		         "too short for the ports: no queue");
		f[13] = 0x06;
		CHECK_EQ(-1, vnet_rss_frame_queue(f, n), "ARP: no queue");
	}
}

/* mq=2 on a device with RSS: RSS negotiated, one RSS_CONFIG (5.1.6.5.7.1)
 * instead of VQ_PAIRS_SET, its table alternating the two receiveqs, and
 * vnet_rss_rx_queue() naming the queue the table gives a flow's hash. */
static void test_rss_config(void)
{
	char err[256];

	next_rss.key = 40;
	next_rss.table = 128;
	next_rss.types = 0x1ff;
	struct vnet *v = mq_open(2, 2, SIM_CTRL_OK, err, sizeof(err));
	CHECK(v != NULL, "mq=2 with RSS opens");
	if (!v) {
		printf("     %s\n", err);
		return;
	}
	CHECK(sim.accepted & VIRTIO_BIT(VIRTIO_NET_F_RSS), "RSS accepted");
	CHECK(vnet_rss(), "RSS on");
	CHECK_EQ(1, sim.ctrl_cmds, "one control command");
	CHECK_EQ(VIRTIO_NET_CTRL_MQ_RSS_CONFIG, sim.ctrl_cmd, "command RSS_CONFIG");
	const uint8_t *d = sim.ctrl_data;
	CHECK_EQ(RSS_TYPES_V4, d[0] | d[1] << 8 | d[2] << 16 | (uint32_t)d[3] << 24,
	         "hash types IPv4, TCPv4, UDPv4 of those offered");
	CHECK_EQ(127, d[4] | d[5] << 8, "indirection_table_mask: 128 entries");
	CHECK_EQ(0, d[6] | d[7] << 8, "unclassified frames (ARP) to receiveq1");
	unsigned alternate = 0;
	for (unsigned i = 0; i < 128; i++)
		alternate += (unsigned)(d[8 + 2 * i] | d[9 + 2 * i] << 8) == i % 2;
	CHECK_EQ(128, alternate, "entry i is receiveq (i mod 2) + 1");
	CHECK_EQ(2, d[264] | d[265] << 8, "max_tx_vq = 2");
	CHECK_EQ(40, d[266], "hash_key_length 40");
	CHECK(!memcmp(d + 267, ms_key, 40), "the key");
	CHECK_EQ(2 + 267 + 40, sim.ctrl_len, "the command's length");
	CHECK_EQ(2, sim.mq_pairs, "the device uses two pairs");
	/* The published hash & 127 is the entry, its parity the queue
	 * (0x51ccc178 -> 120 -> receiveq1, 0xafc7327f -> 127 -> receiveq2). */
	for (size_t i = 0; i < sizeof(ms_vectors) / sizeof(ms_vectors[0]); i++)
		CHECK_EQ((int)(ms_vectors[i].tcp & 127) % 2,
		         vnet_rss_rx_queue(ms_vectors[i].src, ms_vectors[i].dst,
		                           ms_vectors[i].sport, ms_vectors[i].dport),
		         "a flow lands where its hash's table entry says");
	test_rss_lookup();
}

/* RSS the driver cannot use is dropped before FEATURES_OK: the pairs are
 * set with VQ_PAIRS_SET as without it. One pair never asks for RSS. */
static void test_rss_unusable(void)
{
	static const struct {
		uint8_t key;
		uint16_t table;
		uint32_t types;
		const char *why;
	} bad[] = {
	    {39, 128, 0x1ff, "a key shorter than 40 bytes"},
	    {40, 1, 0x1ff, "a table shorter than the pairs"},
	    {40, 128, 3, "no UDPv4 hash"},
	};
	char err[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		next_rss.key = bad[i].key;
		next_rss.table = bad[i].table;
		next_rss.types = bad[i].types;
		struct vnet *v = mq_open(2, 2, SIM_CTRL_OK, err, sizeof(err));
		CHECK(v != NULL, bad[i].why);
		CHECK(!(sim.accepted & VIRTIO_BIT(VIRTIO_NET_F_RSS)), "RSS not accepted");
		CHECK(!vnet_rss(), "RSS off");
		CHECK_EQ(VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET, sim.ctrl_cmd, "VQ_PAIRS_SET instead");
		CHECK_EQ(-1, vnet_rss_rx_queue(ms_vectors[0].src, ms_vectors[0].dst, 1, 2),
		         "no RSS queue to name");
		uint8_t f[64];
		CHECK_EQ(-1, vnet_rss_frame_queue(f, rss_frame(f, 0, 6, 5, 0)),
		         "no RSS queue for a frame");
	}
	next_rss.key = 40;
	next_rss.table = 128;
	next_rss.types = 0x1ff;
	CHECK(mq_open(2, 1, SIM_CTRL_OK, err, sizeof(err)) != NULL, "mq=1 opens");
	CHECK(!(sim.accepted & VIRTIO_BIT(VIRTIO_NET_F_RSS)), "mq=1: RSS not asked for");
	CHECK_EQ(0, sim.ctrl_cmds, "mq=1: no command");
}

/* One refill of pair 1 that the device asked for: its receiveq (queue 2)
 * filled until a frame found no buffer (the device re-arms, like QEMU
 * 7.2's virtio_net_has_buffers()), then pair 1 takes every frame and
 * releases it. How many doorbells each receiveq got, and pair 1's RX
 * counters before and after. */
struct peer_kick_run {
	uint64_t q0_bells, q2_bells;
	struct vnet_counters before, after;
	unsigned frames;
};

static struct peer_kick_run rss_peer_kick_run(struct vnet *q1)
{
	struct peer_kick_run r = {0};
	struct vnet_counters tx;
	struct vnet_rx got;
	uint8_t frame[FRAME_LEN];
	uint64_t q0 = sim.q[0].doorbells, q2 = sim.q[2].doorbells;

	vnet_counters(q1, &r.before, &tx);
	memset(frame, 0x5a, sizeof(frame));
	for (unsigned i = 0; i <= VIRTQ_MAX_SIZE && sim_rx_inject_q(2, frame, sizeof(frame)); i++)
		;
	CHECK(sim.q[2].starved, "queue 2 ran out of buffers");
	/* vnet_poll() opens each pass's RX budget (VNET_RX_BUDGET). */
	for (unsigned pass = 0, n = 1; n && pass < 2 * VIRTQ_MAX_SIZE; pass++) {
		vnet_poll(q1);
		for (n = 0; vnet_rx(q1, &got) == 1; n++) {
			r.frames++;
			vnet_rx_release_frame(q1, &got);
		}
	}
	vnet_counters(q1, &r.after, &tx);
	r.q0_bells = sim.q[0].doorbells - q0;
	r.q2_bells = sim.q[2].doorbells - q2;
	return r;
}

/* QEMU 7.2's software RSS parks a frame for a full receiveq on the
 * subqueue it arrived on, which only that queue's doorbell flushes
 * (vnet_rss.c vnet_rss_kick_peers()): with RSS every RX kick of pair 1
 * rings pair 0's receiveq too, counted in pair 1's peer_kicks; without
 * RSS, with rss.peer_kick=0 (vnet_rss_set_peer_kick(false)) and with
 * NOTIFICATION_DATA (another CPU's ring position cannot be named) it
 * rings nothing but its own. Pair 0's own kicks are not touched. */
static void test_rss_peer_kick(void)
{
	static const struct {
		bool rss, peer_kick;
		const char *what;
	} cases[] = {
	    {true, true, "RSS"},
	    {false, true, "no RSS"},
	    {true, false, "RSS, rss.peer_kick=0"},
	};
	char err[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct vnet_counters rx0a, rx0b, tx;

		next_rss.key = cases[i].rss ? 40 : 0;
		next_rss.table = 128;
		next_rss.types = 0x1ff;
		vnet_rss_set_peer_kick(cases[i].peer_kick);
		struct vnet *v = mq_open(2, 2, SIM_CTRL_OK, err, sizeof(err));
		CHECK(v != NULL, cases[i].what);
		if (!v) {
			printf("     %s\n", err);
			vnet_rss_set_peer_kick(true);
			continue;
		}
		CHECK_EQ(cases[i].rss, vnet_rss(), "RSS as offered");
		bool nd = (v->features & VIRTIO_BIT(VIRTIO_F_NOTIFICATION_DATA)) != 0;
		bool expect = cases[i].rss && cases[i].peer_kick && !nd;
		vnet_counters(vnet_queue(v, 0), &rx0a, &tx);
		struct peer_kick_run r = rss_peer_kick_run(vnet_queue(v, 1));
		vnet_counters(vnet_queue(v, 0), &rx0b, &tx);
		vnet_rss_set_peer_kick(true);
		uint64_t kicks = r.after.kicks - r.before.kicks;
		uint64_t peer = r.after.peer_kicks - r.before.peer_kicks;

		printf("     %s%s: %u frames, pair 1's RX kicks %llu, peer kicks %llu, queue 0 "
		       "doorbells "
		       "%llu\n",
		       cases[i].what, nd ? " (NOTIFICATION_DATA)" : "", r.frames,
		       (unsigned long long)kicks, (unsigned long long)peer,
		       (unsigned long long)r.q0_bells);
		CHECK(r.frames >= VNET_RX_REFILL_BATCH, "pair 1 received a ring's worth");
		CHECK(kicks >= 1, "the refill kicked the device that asked");
		CHECK_EQ(kicks, r.q2_bells, "pair 1's RX kicks are queue 2's doorbells");
		CHECK_EQ(expect ? kicks : 0, peer, "a peer kick with each RX kick, only with RSS");
		CHECK_EQ(peer, r.q0_bells,
		         "each peer kick is a doorbell of queue 0 (pair 0's receiveq)");
		CHECK_EQ(rx0a.kicks, rx0b.kicks, "pair 0's own kick count untouched");
		CHECK_EQ(0, rx0b.peer_kicks - rx0a.peer_kicks, "pair 0 rang nothing");
		CHECK_EQ(0, sim.driver_errors, "no rule broken");
	}
}

void test_vnet_mq(void)
{
	RUN(test_rss_toeplitz);
	shim_cpus = 2; /* a CPU per pair, which the halting variants need */
	RUN(test_mq_one_pair);
	if (!VNET_IS_IDLE_POLL) {
		RUN(test_mq_needs_cpu_per_pair);
		RUN(test_mq_irq_per_pair);
	}
	RUN(test_mq_bringup);
	RUN(test_mq_ctrlq_at_max);
	RUN(test_mq_per_pair_traffic);
	RUN(test_mq_refusals);
	RUN(test_rss_config);
	RUN(test_rss_unusable);
	RUN(test_rss_peer_kick);
	shim_cpus = 1;
}
