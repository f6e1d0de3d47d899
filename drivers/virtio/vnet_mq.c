/*
 * vnet_mq.c: multiqueue (VIRTIO_NET_F_MQ, virtio 1.2 5.1.6.5.5). With
 * pairs > 1 the driver also asks for VIRTIO_NET_F_CTRL_VQ (MQ depends on
 * it, 5.1.3.1), reads max_virtqueue_pairs (5.1.4), sets up the control
 * queue at index 2 * max_virtqueue_pairs (5.1.2) beside the pairs' queues
 * 2k (receiveq k+1) and 2k+1 (transmitq k+1), and after DRIVER_OK sends
 * VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET: until the device acknowledges it, it
 * uses only the first pair (5.1.6.5.5 "the device ... MUST use only
 * receiveq1 and transmitq1" before the command).
 *
 * Shared nothing: every pair is a struct vnet of its own (vnet.c's array)
 * with its own rings, buffers, slots, counters and policy state; only pair
 * 0 owns the control queue and the device-wide bring-up. pairs == 1 (the
 * default) asks for neither feature, so the device and every byte on the
 * wire are what they were without this file.
 */
#include <stdio.h>
#include <string.h>
#include "kernel/kernel.h"
#include "drivers/virtio/vnet_priv.h"
#include "drivers/virtio/virtio.h"

#define CTRL_WAIT_NS 1000000000ull /* a command the device has not answered by then fails */

static struct virtq ctrlq;
#define CTRL_ACK 320 /* after the longest command: class, command, RSS_CONFIG */
#define CTRL_BUF 384
static uint8_t *ctrl_buf; /* [0, 2) class, command; [2, ...) its data; [CTRL_ACK] ack */

uint64_t vnet_mq_features(unsigned pairs)
{
	return pairs > 1 ? VIRTIO_BIT(VIRTIO_NET_F_MQ) | VIRTIO_BIT(VIRTIO_NET_F_CTRL_VQ) : 0;
}

/* After feature negotiation, before FEATURES_OK: can the device give
 * vn->pairs pairs, and where is its control queue? */
int vnet_mq_check(struct vnet *vn, char *err, size_t errlen)
{
	uint64_t need = vnet_mq_features(vn->pairs);
	uint16_t max = 1;

	vn->max_pairs = 1;
	if (vn->pairs == 1)
		return 0;
	if ((vn->features & need) != need) {
		snprintf(err, errlen,
		         "mq=%u needs VIRTIO_NET_F_MQ and CTRL_VQ; device offers 0x%llx (QEMU: "
		         "virtio-net-pci,mq=on on a -netdev with queues=N)",
		         vn->pairs, (unsigned long long)vn->offered);
		return -1;
	}
	if (virtio_dev_cfg_read(&vn->vd, VIRTIO_NET_CFG_MAX_VQ_PAIRS, &max, 2) ||
	    max < VIRTIO_NET_CTRL_MQ_VQ_PAIRS_MIN || max > VIRTIO_NET_CTRL_MQ_VQ_PAIRS_MAX) {
		snprintf(err, errlen, "max_virtqueue_pairs unreadable or out of 1..0x8000 (%u)",
		         max);
		return -1;
	}
	if (vn->pairs > max) {
		snprintf(err, errlen, "mq=%u but the device offers max_virtqueue_pairs=%u",
		         vn->pairs, max);
		return -1;
	}
	if (2u * max + 1 > VIRTIO_PCI_MAX_QUEUES) {
		snprintf(err, errlen,
		         "device has max_virtqueue_pairs=%u: its control queue %u is beyond the "
		         "%u queues this driver sets up",
		         max, 2u * max, VIRTIO_PCI_MAX_QUEUES);
		return -1;
	}
	/* The halt policies aim pair k's interrupts at CPU k (vnet.c). */
	if (!VNET_IS_IDLE_POLL && vn->pairs > smp_cpus()) {
		snprintf(err, errlen,
		         "mq=%u with IDLE=%s needs a CPU per pair for its interrupts; %u running",
		         vn->pairs, vnet_idle_policy(), smp_cpus());
		return -1;
	}
	vn->max_pairs = max;
	vnet_rss_check(vn);
	return 0;
}

/* Step 7: the control queue (pair 0 only). */
int vnet_mq_setup(struct vnet *vn, char *err, size_t errlen)
{
	if (vn->pairs == 1)
		return 0;
	if (virtio_dev_num_queues(&vn->vd) < 2u * vn->max_pairs + 1) {
		snprintf(err, errlen, "device has %u queues, max_virtqueue_pairs=%u needs %u",
		         virtio_dev_num_queues(&vn->vd), vn->max_pairs, 2u * vn->max_pairs + 1);
		return -1;
	}
	if (virtio_dev_queue_setup(&vn->vd, &ctrlq, (uint16_t)(2u * vn->max_pairs),
	                           vn->features & VIRTIO_BIT(VIRTIO_F_EVENT_IDX), err, errlen))
		return -1;
	/* Every bring-up its own: memory from before a reset (the host unit
	 * tests reset their arena between devices) may be a ring now. */
	ctrl_buf = pmm_alloc(CTRL_BUF, 64);
	return 0;
}

/* After DRIVER_OK: VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET(pairs), or with RSS
 * VIRTIO_NET_CTRL_MQ_RSS_CONFIG, whose max_tx_vq sets the pairs as well
 * (5.1.6.5.7.1); the device's ack VIRTIO_NET_OK within CTRL_WAIT_NS. */
int vnet_mq_set_pairs(struct vnet *vn, char *err, size_t errlen)
{
	struct virtq_buf b[2];
	uint16_t pairs = (uint16_t)vn->pairs;
	const char *cmd = "VQ_PAIRS_SET";
	size_t data = 2;
	void *token;
	uint32_t len;
	int rc;

	if (vn->pairs == 1)
		return 0;
	ctrl_buf[0] = VIRTIO_NET_CTRL_MQ;
	ctrl_buf[1] = VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET;
	memcpy(ctrl_buf + 2, &pairs, 2); /* le16 (x86) */
	if (vn->features & VIRTIO_BIT(VIRTIO_NET_F_RSS)) {
		ctrl_buf[1] = VIRTIO_NET_CTRL_MQ_RSS_CONFIG;
		data = vnet_rss_config(ctrl_buf + 2);
		cmd = "RSS_CONFIG";
	}
	ctrl_buf[CTRL_ACK] = 0xff; /* the device overwrites it */
	b[0] = (struct virtq_buf){(uintptr_t)ctrl_buf, (uint32_t)(2 + data), false};
	b[1] = (struct virtq_buf){(uintptr_t)ctrl_buf + CTRL_ACK, 1, true};
	if (virtq_add(&ctrlq, b, 2, ctrl_buf) < 0) {
		snprintf(err, errlen, "control queue: cannot add the command");
		return -1;
	}
	virtq_publish(&ctrlq);
	/* One command per bring-up: kick whatever the event index says. */
	(void)virtq_kick_prepare(&ctrlq);
	virtq_notify(&ctrlq);
	uint64_t t0 = clock_ns();
	while ((rc = virtq_get_used(&ctrlq, &token, &len)) == 0) {
		if (clock_ns() - t0 > CTRL_WAIT_NS) {
			snprintf(err, errlen, "control queue: %s(%u) not answered in 1 s", cmd,
			         pairs);
			return -1;
		}
	}
	if (rc < 0 || token != ctrl_buf || len < 1) {
		snprintf(err, errlen, "control queue: bad completion (rc %d, len %u)", rc, len);
		return -1;
	}
	if (ctrl_buf[CTRL_ACK] != VIRTIO_NET_OK) {
		snprintf(err, errlen, "control queue: %s(%u) answered %u, not OK", cmd, pairs,
		         ctrl_buf[CTRL_ACK]);
		return -1;
	}
	printf("virtio-net: mq pairs=%u max=%u ctrlq=%u rss=%s\n", pairs, vn->max_pairs,
	       2u * vn->max_pairs, vnet_rss() ? "on" : "off");
	return 0;
}
