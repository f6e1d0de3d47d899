/*
 * vnet.c: virtio-net device bring-up (virtio 1.2 3.1.1 and 5.1.5), the
 * main-loop hooks and the counters. Registers are the transport's business
 * (virtio_dev.h: virtio_pci.c or virtio_mmio.c); rings are virtq.c's; TX and RX live in vnet_tx.c
 * and vnet_rx.c.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "kernel/kernel.h"
#include "drivers/virtio/vnet_priv.h"

/* Read the device status and the link state (MMIO reads: VM exits under
 * KVM) every status_check_ns (command-line key vnet.status_ms), looking at
 * the clock every VNET_STATUS_CLOCK_PASSES poll passes, and whenever a
 * caller asks through vnet_check(). A link that goes down mid-run ends the
 * run within that bound (we take no config-change interrupt: we poll). */
#define VNET_STATUS_CLOCK_PASSES 64u

static uint64_t status_check_ns = VNET_STATUS_MS_DEFAULT * 1000000ull;

static struct vnet vnet_dev[VNET_MQ_MAX];

/* First failure wins; the run must end with an error result. */
void vnet_fail(struct vnet *vn, const char *fmt, ...)
{
	va_list ap;

	if (vn->failed)
		return;
	vn->failed = true;
	va_start(ap, fmt);
	vsnprintf(vn->error, sizeof(vn->error), fmt, ap);
	va_end(ap);
}

/* The features this build asks for; the rest of the offer is declined. */
static uint64_t vnet_wanted_features(void)
{
	uint64_t f = VIRTIO_BIT(VIRTIO_F_VERSION_1) | VIRTIO_BIT(VIRTIO_NET_F_MAC) |
	             VIRTIO_BIT(VIRTIO_NET_F_STATUS) | VIRTIO_BIT(VIRTIO_NET_F_MTU);

	/* 6.1: a driver SHOULD accept ACCESS_PLATFORM when offered, and a
	 * device that needs it (QEMU iommu_platform=on, vDPA, hardware NICs,
	 * SEV/TDX guests) refuses FEATURES_OK without it. It means "the device
	 * sees addresses through the platform's DMA translation": nothing here
	 * enables an IOMMU (no DMAR programming; firmware leaves translation
	 * off), so the translation is the identity and the physical addresses
	 * we already use are the DMA addresses. ORDER_PLATFORM asks for the
	 * platform's DMA barriers rather than SMP ones: on x86 with rings in
	 * coherent write-back memory those are the same (Linux: dma_wmb() and
	 * dma_rmb() are compiler barriers, virtio_mb() is MFENCE, as our
	 * arch_wmb/arch_rmb/arch_mb). */
	f |= VIRTIO_BIT(VIRTIO_F_ACCESS_PLATFORM) | VIRTIO_BIT(VIRTIO_F_ORDER_PLATFORM);

	if (VNET_EVENT_IDX)
		f |= VIRTIO_BIT(VIRTIO_F_EVENT_IDX);
	if (VNET_MRG_RXBUF)
		f |= VIRTIO_BIT(VIRTIO_NET_F_MRG_RXBUF);
	if (VNET_WANT_CSUM)
		f |= VIRTIO_BIT(VIRTIO_NET_F_CSUM) | VIRTIO_BIT(VIRTIO_NET_F_GUEST_CSUM);
	if (VNET_WANT_TSO)
		f |= VIRTIO_BIT(VIRTIO_NET_F_HOST_TSO4);
	if (VNET_WANT_LRO)
		f |= VIRTIO_BIT(VIRTIO_NET_F_GUEST_TSO4);
	if (VNET_NOTIFICATION_DATA)
		f |= VIRTIO_BIT(VIRTIO_F_NOTIFICATION_DATA);
	if (VNET_IS_RING_PACKED)
		f |= VIRTIO_BIT(VIRTIO_F_RING_PACKED);
	return f;
}

static void vnet_feature_names(uint64_t f, char *buf, size_t len)
{
	static const struct {
		int bit;
		const char *name;
	} names[] = {
	    {VIRTIO_F_VERSION_1, "VERSION_1"},
	    {VIRTIO_NET_F_MAC, "MAC"},
	    {VIRTIO_NET_F_STATUS, "STATUS"},
	    {VIRTIO_NET_F_MTU, "MTU"},
	    {VIRTIO_F_EVENT_IDX, "EVENT_IDX"},
	    {VIRTIO_NET_F_MRG_RXBUF, "MRG_RXBUF"},
	    {VIRTIO_NET_F_CSUM, "CSUM"},
	    {VIRTIO_NET_F_GUEST_CSUM, "GUEST_CSUM"},
	    {VIRTIO_NET_F_HOST_TSO4, "HOST_TSO4"},
	    {VIRTIO_NET_F_GUEST_TSO4, "GUEST_TSO4"},
	    {VIRTIO_F_NOTIFICATION_DATA, "NOTIFICATION_DATA"},
	    {VIRTIO_F_RING_PACKED, "RING_PACKED"},
	    {VIRTIO_F_ACCESS_PLATFORM, "ACCESS_PLATFORM"},
	    {VIRTIO_F_ORDER_PLATFORM, "ORDER_PLATFORM"},
	    {VIRTIO_NET_F_CTRL_VQ, "CTRL_VQ"},
	    {VIRTIO_NET_F_MQ, "MQ"},
	    {VIRTIO_NET_F_RSS, "RSS"},
	};
	size_t used = 0;

	buf[0] = 0;
	for (size_t i = 0; i < ARRAY_SIZE(names) && used < len; i++)
		if (f & VIRTIO_BIT(names[i].bit))
			used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? "," : "",
			                         names[i].name);
}

const char *vnet_variant(void)
{
	static const char *const reclaim[] = {"?",  "base",  "v0",   "v1",  "v2",
	                                      "v3", "after", "lazy", "poll"};
	static const char *const kick[] = {"?", "every", "burst", "deferred", "timer"};
	static const char *const offload[] = {"none", "csum", "tso", "tso+lro"};
	static char buf[256];
	char rparam[16] = "", kparam[24] = "";

	if (VNET_IS_RECLAIM_V1 || VNET_IS_RECLAIM_V2_V3)
		snprintf(rparam, sizeof(rparam), ":%d", VNET_RECLAIM_K);
	if (VNET_IS_RECLAIM_LAZY)
		snprintf(rparam, sizeof(rparam), ":%d", VNET_LAZY_THRESH);
	if (VNET_IS_KICK_BURST)
		snprintf(kparam, sizeof(kparam), ":%d", VNET_KICK_BURST_MAX);
	if (VNET_IS_KICK_TIMER)
		snprintf(kparam, sizeof(kparam), ":%dus-LATENCY-PENALTY", VNET_KICK_TIMER_US);
	snprintf(buf, sizeof(buf),
	         "reclaim=%s%s,kick=%s%s,event_idx=%d,avail=%s,txhdr=%s,zerocopy=%d,offload=%s%s%s,"
	         "idle=%s,ring=%s",
	         reclaim[VNET_TX_RECLAIM], rparam, kick[VNET_TX_KICK], kparam, VNET_EVENT_IDX,
	         VNET_AVAIL_BATCHED ? "batched" : "eager", VNET_TXHDR_INLINE ? "inline" : "chain",
	         VNET_ZEROCOPY, offload[VNET_OFFLOAD],
	         VNET_MRG_RXBUF && !VNET_WANT_LRO ? ",mrg_rxbuf=1" : "",
	         VNET_NOTIFICATION_DATA ? ",notification_data=1" : "", vnet_idle_policy(),
	         VNET_IS_RING_PACKED ? "packed" : "split");
	return buf;
}

/* 5.1.3.1: a feature may be accepted only with the ones it depends on;
 * large receive also needs merged buffers, since ours are 4 KiB. */
static uint64_t vnet_feature_deps(uint64_t f)
{
	if (!(f & VIRTIO_BIT(VIRTIO_NET_F_CSUM)))
		f &= ~VIRTIO_BIT(VIRTIO_NET_F_HOST_TSO4);
	if (!(f & VIRTIO_BIT(VIRTIO_NET_F_GUEST_CSUM)) || !(f & VIRTIO_BIT(VIRTIO_NET_F_MRG_RXBUF)))
		f &= ~VIRTIO_BIT(VIRTIO_NET_F_GUEST_TSO4);
	return f;
}

static unsigned vnet_offloads_of(uint64_t f)
{
	unsigned o = 0;

	if (f & VIRTIO_BIT(VIRTIO_NET_F_CSUM))
		o |= VNET_OFF_TX_CSUM;
	if (f & VIRTIO_BIT(VIRTIO_NET_F_GUEST_CSUM))
		o |= VNET_OFF_RX_CSUM;
	if (f & VIRTIO_BIT(VIRTIO_NET_F_HOST_TSO4))
		o |= VNET_OFF_TSO4;
	if (f & VIRTIO_BIT(VIRTIO_NET_F_GUEST_TSO4))
		o |= VNET_OFF_LRO4;
	return o;
}

/* 3.1.1 step 4: pick features and read the configuration we need. */
static int vnet_negotiate(struct vnet *vn, char *err, size_t errlen)
{
	uint64_t offered = virtio_dev_device_features(&vn->vd);
	uint64_t f =
	    vnet_feature_deps(offered & (vnet_wanted_features() | vnet_mq_features(vn->pairs) |
	                                 vnet_rss_feature(vn->pairs)));

	vn->offered = offered;
	uint16_t v16;

	if (!(offered & VIRTIO_BIT(VIRTIO_F_VERSION_1))) {
		snprintf(err, errlen,
		         "device offers no VERSION_1 (features 0x%llx): legacy-only, refused",
		         (unsigned long long)offered);
		return -1;
	}
	if (VNET_EVENT_IDX && !(f & VIRTIO_BIT(VIRTIO_F_EVENT_IDX))) {
		snprintf(err, errlen,
		         "this build (event_idx=1) needs EVENT_IDX; device offers 0x%llx",
		         (unsigned long long)offered);
		return -1;
	}
	/* 2.8: the packed layout exists only if the device offers it
	 * (QEMU: packed=on); a packed build has no split ring to fall back to. */
	if (VNET_IS_RING_PACKED && !(f & VIRTIO_BIT(VIRTIO_F_RING_PACKED))) {
		snprintf(
		    err, errlen,
		    "this build (ring=packed) needs VIRTIO_F_RING_PACKED; device offers 0x%llx",
		    (unsigned long long)offered);
		return -1;
	}
	if (f & VIRTIO_BIT(VIRTIO_NET_F_MAC)) {
		if (virtio_dev_cfg_read(&vn->vd, VIRTIO_NET_CFG_MAC, vn->mac, 6)) {
			snprintf(err, errlen, "cannot read the MAC from device config");
			return -1;
		}
	} else {
		/* 5.1.5: without VIRTIO_NET_F_MAC the driver picks one. */
		static const uint8_t local_mac[6] = {0x02, 0x00, 0x00, 0x76, 0x6e, 0x01};
		memcpy(vn->mac, local_mac, 6);
	}
	vn->mtu = 1500;
	if (f & VIRTIO_BIT(VIRTIO_NET_F_MTU)) {
		if (virtio_dev_cfg_read(&vn->vd, VIRTIO_NET_CFG_MTU, &v16, 2) || v16 < 68) {
			snprintf(err, errlen, "device MTU unreadable or below 68");
			return -1;
		}
		/* 5.1.4.2: accepting MTU obliges us to receive mtu-sized
		 * frames without GSO in our buffers, which hold 1500: decline
		 * a larger one (the device then keeps to 1500). */
		if (v16 > 1500)
			f &= ~VIRTIO_BIT(VIRTIO_NET_F_MTU);
		else
			vn->mtu = v16;
	}
	/* 5.1.6.2: never send more than the MTU (plus Ethernet and VLAN headers). */
	vn->max_frame = vn->mtu + 18u;
	vn->features = f;
	vn->offloads = vnet_offloads_of(f);
	if (vnet_mq_check(vn, err, errlen))
		return -1;
	virtio_dev_set_features(&vn->vd, vn->features); /* vnet_mq_check() may drop RSS */
	return 0;
}

static int vnet_step_fail(struct vnet *vn, char *err, size_t errlen, const char *step,
                          const char *why)
{
	snprintf(err, errlen, "virtio-net init %s: %s", step, why);
	/* 3.1.1: "If any of these steps go irrecoverably wrong, the driver
	 * SHOULD set the FAILED status bit". */
	if (virtio_dev_found(&vn->vd))
		virtio_dev_add_status(&vn->vd, VIRTIO_STATUS_FAILED);
	return -1;
}

/* A side-effect-free register read (the device status) for the ring's
 * re-arm sequence: see virtq_enable_cb_after(). */
static void vnet_dev_sync(void *arg)
{
	struct vnet *vn = arg;

	(void)virtio_dev_status(&vn->vd);
}

/* Do the CPU's fences order ring memory against the device? On hardware
 * and under KVM they do (the device is another CPU or a host thread, and
 * MFENCE is MFENCE). Under an emulator they may not: QEMU 7.2's TCG with
 * one vCPU emits no host barrier for them (virtq_enable_cb_after()). An
 * accelerator we cannot name is treated as one that may not either. */
static bool vnet_fences_reach_device(void)
{
	return !strcmp(cpu_accel(), "kvm") || !strcmp(cpu_accel(), "hw");
}

/* Every build decides kicks (barrier B); the halt policies also re-arm
 * notifications (barrier D). Where fences do not reach the device both
 * need a register read between the ring write and the ring read, so each
 * queue pair's two rings get one. */
static void vnet_attach_sync(struct vnet *q)
{
	if (!vnet_fences_reach_device()) {
		virtq_set_sync(&q->rxq, vnet_dev_sync, q);
		virtq_set_sync(&q->txq, vnet_dev_sync, q);
	}
}

/* Pair k is polled on CPU k (shared nothing: vnet_queue()), so its two
 * queues interrupt CPU k; configuration changes go to pair 0's CPU. */
static int vnet_irq_setup(struct vnet *vn, char *err, size_t errlen)
{
	struct virtio_irq_plan plan = {.nqueues = 2 * vn->pairs, .cfg_dest = smp_apic_id(0)};

	for (unsigned q = 0; q < plan.nqueues; q++)
		plan.dest[q] = smp_apic_id(q / 2);
	if (virtio_dev_irq_setup(&vn->vd, &plan, err, errlen))
		return -1;
	return halt_init(err, errlen);
}

/* 3.1.1 Driver Requirements: Device Initialization, step by step. */
static int vnet_init(struct vnet *vn, char *err, size_t errlen)
{
	char why[256];

	/* "1. Reset the device." */
	if (virtio_dev_reset(&vn->vd))
		return vnet_step_fail(vn, err, errlen, "step 1 (reset)",
		                      "device_status did not read back 0 within 1 s");
	/* "2. Set the ACKNOWLEDGE status bit: the guest OS has noticed the device." */
	virtio_dev_add_status(&vn->vd, VIRTIO_STATUS_ACKNOWLEDGE);
	/* "3. Set the DRIVER status bit: the guest OS knows how to drive the device." */
	virtio_dev_add_status(&vn->vd, VIRTIO_STATUS_DRIVER);
	/* "4. Read device feature bits, and write the subset of feature bits
	 * understood by the OS and driver to the device. During this step the
	 * driver MAY read (but MUST NOT write) the device-specific
	 * configuration fields to check that it can support the device before
	 * accepting it." */
	if (vnet_negotiate(vn, why, sizeof(why)))
		return vnet_step_fail(vn, err, errlen, "step 4 (features)", why);
	/* "5. Set the FEATURES_OK status bit. The driver MUST NOT accept new
	 * feature bits after this step." */
	virtio_dev_add_status(&vn->vd, VIRTIO_STATUS_FEATURES_OK);
	/* "6. Re-read device status to ensure the FEATURES_OK bit is still set:
	 * otherwise, the device does not support our subset of features and
	 * the device is unusable." */
	if (!(virtio_dev_status(&vn->vd) & VIRTIO_STATUS_FEATURES_OK)) {
		snprintf(why, sizeof(why), "device cleared FEATURES_OK: it refuses features 0x%llx",
		         (unsigned long long)vn->features);
		return vnet_step_fail(vn, err, errlen, "step 6 (FEATURES_OK)", why);
	}
	/* "7. Perform device-specific setup, including discovery of virtqueues
	 * for the device, optional per-bus setup, reading and possibly writing
	 * the device's virtio configuration space, and population of
	 * virtqueues." */
	if (virtio_dev_num_queues(&vn->vd) < 2) {
		snprintf(why, sizeof(why), "device has %u queues, need receiveq1 + transmitq1",
		         virtio_dev_num_queues(&vn->vd));
		return vnet_step_fail(vn, err, errlen, "step 7 (queues)", why);
	}
	/* Interrupts before the queues: step 5 of 4.1.5.1.3 gives each queue
	 * its MSI-X vector. Only the halt policies want them. */
	if (!VNET_IS_IDLE_POLL && vnet_irq_setup(vn, why, sizeof(why)))
		return vnet_step_fail(vn, err, errlen, "step 7 (interrupts)", why);
	if (virtio_dev_queue_setup(&vn->vd, &vn->rxq, VNET_RXQ,
	                           vn->features & VIRTIO_BIT(VIRTIO_F_EVENT_IDX), why,
	                           sizeof(why)) ||
	    virtio_dev_queue_setup(&vn->vd, &vn->txq, VNET_TXQ,
	                           vn->features & VIRTIO_BIT(VIRTIO_F_EVENT_IDX), why, sizeof(why)))
		return vnet_step_fail(vn, err, errlen, "step 7 (queues)", why);
	/* More pairs (vnet_mq.c): 2k and 2k+1 for pair k, then the control
	 * queue. Each pair copies pair 0's device-wide state. */
	for (unsigned k = 1; k < vn->pairs; k++) {
		struct vnet *q = &vnet_dev[k];

		memset(q, 0, sizeof(*q));
		q->vd = vn->vd;
		q->qp = k;
		q->pairs = vn->pairs;
		q->max_pairs = vn->max_pairs;
		q->offered = vn->offered;
		q->features = vn->features;
		memcpy(q->mac, vn->mac, 6);
		q->mtu = vn->mtu;
		q->max_frame = vn->max_frame;
		q->offloads = vn->offloads;
		q->idle.coal_k = 1;
		if (virtio_dev_queue_setup(&q->vd, &q->rxq, (uint16_t)(2 * k),
		                           vn->features & VIRTIO_BIT(VIRTIO_F_EVENT_IDX), why,
		                           sizeof(why)) ||
		    virtio_dev_queue_setup(&q->vd, &q->txq, (uint16_t)(2 * k + 1),
		                           vn->features & VIRTIO_BIT(VIRTIO_F_EVENT_IDX), why,
		                           sizeof(why)))
			return vnet_step_fail(vn, err, errlen, "step 7 (queues)", why);
		vnet_attach_sync(q);
	}
	if (vnet_mq_setup(vn, why, sizeof(why)))
		return vnet_step_fail(vn, err, errlen, "step 7 (control queue)", why);
	/* The Makefile links virtq.c or virtq_packed.c by the same RING=
	 * that set VNET_RING; a mix would drive one layout as the other. */
	if (vn->rxq.packed != VNET_IS_RING_PACKED)
		return vnet_step_fail(vn, err, errlen, "step 7 (queues)",
		                      "ring file linked does not match VNET_RING (build error)");
	vnet_attach_sync(vn);
	vn->link_up = true;
	if (vn->features & VIRTIO_BIT(VIRTIO_NET_F_STATUS)) {
		uint16_t st = 0;

		if (virtio_dev_cfg_read(&vn->vd, VIRTIO_NET_CFG_STATUS, &st, 2))
			return vnet_step_fail(vn, err, errlen, "step 7 (config)",
			                      "cannot read the link status");
		vn->link_up = st & VIRTIO_NET_S_LINK_UP;
	}
	for (unsigned k = 0; k < vn->pairs; k++) {
		struct vnet *q = &vnet_dev[k];

		q->link_up = vn->link_up;
		vnet_tx_setup(q);
		vnet_rx_setup(q);
		q->rx_quota = VNET_RX_BUDGET;
	}
	/* "8. Set the DRIVER_OK status bit. At this point the device is
	 * 'live'." Only now may the device be notified (3.1.1, 2.7.13.4). */
	virtio_dev_add_status(&vn->vd, VIRTIO_STATUS_DRIVER_OK);
	if (vnet_check(vn))
		return vnet_step_fail(vn, err, errlen, "step 8 (DRIVER_OK)", vn->error);
	for (unsigned k = 0; k < vn->pairs; k++)
		if (virtq_kick_prepare(&vnet_dev[k].rxq))
			virtq_notify(&vnet_dev[k].rxq);
	/* Only now may the device use the other pairs (5.1.6.5.5). */
	if (vnet_mq_set_pairs(vn, why, sizeof(why)))
		return vnet_step_fail(vn, err, errlen, "step 8 (VQ_PAIRS_SET)", why);
	return 0;
}

struct vnet *vnet_open(char *err, size_t errlen)
{
	return vnet_open_mq(1, err, errlen);
}

unsigned vnet_queue_pairs(const struct vnet *vn)
{
	return vn->pairs;
}

unsigned vnet_queue_index(const struct vnet *vn)
{
	return vn->qp;
}

struct vnet *vnet_queue(struct vnet *vn, unsigned qp)
{
	return qp < vn->pairs ? &vnet_dev[qp] : NULL;
}

struct vnet *vnet_open_mq(unsigned pairs, char *err, size_t errlen)
{
	struct vnet *vn = &vnet_dev[0];
	char feats[160];

	if (pairs < 1 || pairs > VNET_MQ_MAX) {
		snprintf(err, errlen, "%u queue pairs: this driver takes 1..%u", pairs,
		         VNET_MQ_MAX);
		return NULL;
	}
	memset(vn, 0, sizeof(*vn));
	vn->pairs = pairs;
	vn->idle.coal_k = 1; /* RX_COALESCE's k: one entry until halts teach it more */
	if (virtio_dev_probe(&vn->vd, VIRTIO_ID_NET, err, errlen))
		return NULL;
	if (vnet_init(vn, err, errlen))
		return NULL;
	vnet_feature_names(vn->features, feats, sizeof(feats));
	printf("virtio-net: features=0x%llx (%s) offered=0x%llx\n",
	       (unsigned long long)vn->features, feats, (unsigned long long)vn->offered);
	printf("virtio-net: mac=%02x:%02x:%02x:%02x:%02x:%02x mtu=%u link=%s rxq=%u txq=%u "
	       "variant=%s\n",
	       vn->mac[0], vn->mac[1], vn->mac[2], vn->mac[3], vn->mac[4], vn->mac[5], vn->mtu,
	       vn->link_up ? "up" : "down", vn->rxq.size, vn->txq.size, vnet_variant());
	return vn;
}

const uint8_t *vnet_mac(const struct vnet *vn)
{
	return vn->mac;
}

uint16_t vnet_mtu(const struct vnet *vn)
{
	return vn->mtu;
}

bool vnet_link_up(const struct vnet *vn)
{
	return vn->link_up;
}

uint64_t vnet_features(const struct vnet *vn)
{
	return vn->features;
}

unsigned vnet_offloads(const struct vnet *vn)
{
	return vn->offloads;
}

/* virtq_init() gives each of the three ring parts its own pages (packed:
 * the ring its pages, each event structure a cache line). */
static size_t vnet_ring_bytes(uint16_t n)
{
	if (VNET_IS_RING_PACKED)
		return ((sizeof(struct virtq_pdesc) * n + 4095) & ~4095ul) + 2 * 64;

	size_t desc = sizeof(struct virtq_desc) * n, avail = 6 + 2u * n;
	size_t used = 6 + sizeof(struct virtq_used_elem) * n;

	return ((desc + 4095) & ~4095ul) + ((avail + 4095) & ~4095ul) + ((used + 4095) & ~4095ul);
}

void vnet_memory(const struct vnet *vn, size_t *rx, size_t *tx, size_t *rings)
{
	*rx = (size_t)vn->rxq.size * VNET_RX_BUF_SIZE;
	*tx = (size_t)vn->txq.size * VNET_TX_SLOT_SIZE;
	*rings = vnet_ring_bytes(vn->rxq.size) + vnet_ring_bytes(vn->txq.size);
}

void vnet_set_tx_done(struct vnet *vn, vnet_tx_done_fn fn, void *arg)
{
	vn->tx_done = fn;
	vn->tx_done_arg = arg;
}

/* 2.1.2: DEVICE_NEEDS_RESET means the device gave up; a status without
 * DRIVER_OK means it was reset under us. Either ends the run. */
int vnet_check(struct vnet *vn)
{
	uint8_t st;

	if (vn->failed)
		return -VNET_EDEVICE;
	st = virtio_dev_status(&vn->vd);
	if ((st & VIRTIO_STATUS_DEVICE_NEEDS_RESET) || !(st & VIRTIO_STATUS_DRIVER_OK)) {
		const char *what = (st & VIRTIO_STATUS_DEVICE_NEEDS_RESET) ? "device_needs_reset"
		                                                           : "device_not_live";
		printf("DEVICE_FAULT {\"fault\":\"%s\",\"status\":%u}\n", what, st);
		vnet_fail(vn, "device status 0x%02x: %s", st, what);
		return -VNET_EDEVICE;
	}
	return 0;
}

/* 5.1.4: with VIRTIO_NET_F_STATUS, VIRTIO_NET_S_LINK_UP in the config
 * status says whether the link is up; a change is a config change (4.1.4.5,
 * which we see by reading, not by interrupt). A benchmark on a dead link
 * measures nothing: end the run and say so. */
static void vnet_check_link(struct vnet *vn)
{
	uint16_t st = 0;

	if (vn->failed || !(vn->features & VIRTIO_BIT(VIRTIO_NET_F_STATUS)))
		return;
	if (virtio_dev_cfg_read(&vn->vd, VIRTIO_NET_CFG_STATUS, &st, 2)) {
		vnet_fail(vn, "device config unreadable (config_generation never settles)");
		return;
	}
	if (vn->link_up && !(st & VIRTIO_NET_S_LINK_UP)) {
		vn->link_up = false;
		printf("LINK {\"state\":\"down\",\"status\":%u}\n", st);
		vnet_fail(vn, "link down: device config status 0x%04x (VIRTIO_NET_S_LINK_UP clear)",
		          st);
	}
}

void vnet_set_status_period(uint32_t ms)
{
	status_check_ns = (uint64_t)ms * 1000000ull;
}

void vnet_status_check(struct vnet *vn)
{
	vn->status_checked = clock_ns();
	virtio_dev_config_clear(&vn->vd);
	if (vnet_check(vn) == 0)
		vnet_check_link(vn);
}

int vnet_poll(struct vnet *vn)
{
	if (vn->failed)
		return -VNET_EDEVICE;
	vnet_tx_poll(vn);
	vnet_rx_poll(vn);
	vn->rx_quota = VNET_RX_BUDGET;
	if (virtio_dev_config_changed(&vn->vd))
		vnet_status_check(vn); /* 4.1.4.5: a configuration change interrupt */
	else if (++vn->poll_passes % VNET_STATUS_CLOCK_PASSES == 0 &&
	         clock_ns() - vn->status_checked >= status_check_ns)
		vnet_status_check(vn);
	return vn->failed ? -VNET_EDEVICE : 0;
}

void vnet_before_wait(struct vnet *vn)
{
	if (vn->failed)
		return;
	vnet_tx_before_wait(vn);
	vnet_rx_poll(vn); /* the device must not run dry while we wait */
}

int vnet_drain(struct vnet *vn, uint64_t timeout_ns)
{
	if (vn->failed)
		return -VNET_EDEVICE;
	vnet_rx_poll(vn);
	return vnet_tx_drain(vn, timeout_ns);
}

bool vnet_kick_pending(const struct vnet *vn)
{
	return vnet_tx_kick_pending(vn) || virtq_unpublished(&vn->rxq) ||
	       virtq_kick_pending(&vn->rxq);
}

const char *vnet_error(const struct vnet *vn)
{
	return vn->error;
}

void vnet_counters(const struct vnet *vn, struct vnet_counters *rx, struct vnet_counters *tx)
{
	*rx = vn->rx;
	*tx = vn->tx;
	rx->kicks = vn->rxq.stats.kicks;
	rx->kicks_suppressed = vn->rxq.stats.kicks_suppressed;
	rx->device_errors = vn->rx.device_errors + virtq_faults(&vn->rxq);
	tx->kicks = vn->txq.stats.kicks;
	tx->kicks_suppressed = vn->txq.stats.kicks_suppressed;
	tx->device_errors = virtq_faults(&vn->txq);
	rx->kick_syncs = vn->rxq.stats.kick_syncs;
	rx->kick_rescues = vn->rxq.stats.kick_rescues;
	tx->kick_syncs = vn->txq.stats.kick_syncs;
	tx->kick_rescues = vn->txq.stats.kick_rescues;
	rx->irqs = virtio_dev_irqs(&vn->vd)[vnet_irq_slot(vn, VNET_RXQ)];
	tx->irqs = virtio_dev_irqs(&vn->vd)[vnet_irq_slot(vn, VNET_TXQ)];
}

const char *vnet_irq_mode(const struct vnet *vn)
{
	return virtio_dev_irq_mode_name(&vn->vd);
}

static void vnet_print_queue(const char *name, const struct vnet_counters *c)
{
	printf("COUNTERS {\"queue\":\"%s\",\"frames\":%llu,\"bytes\":%llu,\"kicks\":%llu,"
	       "\"kicks_suppressed\":%llu,\"kick_syncs\":%llu,\"kick_rescues\":%llu,"
	       "\"reclaim_calls\":%llu,\"reclaimed\":%llu,"
	       "\"idle_reclaim_calls\":%llu,\"idle_reclaimed\":%llu,\"rx_reclaim_calls\":%llu,"
	       "\"rx_reclaimed\":%llu,\"reclaim_hist\":[",
	       name, (unsigned long long)c->frames, (unsigned long long)c->bytes,
	       (unsigned long long)c->kicks, (unsigned long long)c->kicks_suppressed,
	       (unsigned long long)c->kick_syncs, (unsigned long long)c->kick_rescues,
	       (unsigned long long)c->reclaim_calls, (unsigned long long)c->reclaimed,
	       (unsigned long long)c->idle_reclaim_calls, (unsigned long long)c->idle_reclaimed,
	       (unsigned long long)c->rx_reclaim_calls, (unsigned long long)c->rx_reclaimed);
	for (int i = 0; i < VNET_COUNTER_BUCKETS; i++)
		printf("%s%llu", i ? "," : "", (unsigned long long)c->reclaim_hist[i]);
	printf("],\"ring_full\":%llu,\"refills\":%llu,\"refilled\":%llu,\"peer_kicks\":%llu,"
	       "\"drops\":%llu,\"csum\":%llu,\"gso\":%llu,\"bufs\":%llu,\"device_errors\":%llu,"
	       "\"irqs\":%llu}\n",
	       (unsigned long long)c->ring_full, (unsigned long long)c->refills,
	       (unsigned long long)c->refilled, (unsigned long long)c->peer_kicks,
	       (unsigned long long)c->drops, (unsigned long long)c->csum,
	       (unsigned long long)c->gso, (unsigned long long)c->bufs,
	       (unsigned long long)c->device_errors, (unsigned long long)c->irqs);
}

void vnet_print_counters(const struct vnet *vn)
{
	struct vnet_counters rx, tx;

	vnet_counters(vn, &rx, &tx);
	vnet_print_queue("tx", &tx);
	vnet_print_queue("rx", &rx);
	vnet_idle_print(vn);
}

void vnet_print_rings(const struct vnet *vn)
{
	virtq_print_state(&vn->txq, "tx");
	virtq_print_state(&vn->rxq, "rx");
	printf("RXBUFS {\"posted\":%u,\"free\":%u,\"held\":%u,\"in_tx\":%u}\n", vn->rx_posted,
	       vn->rx_nfree, vn->rx_held, vn->rx_in_tx);
}
