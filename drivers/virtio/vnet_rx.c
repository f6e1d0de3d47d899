/*
 * vnet_rx.c: virtio-net receive (virtio 1.2 5.1.6.3-4). Every buffer is
 * posted at start; frames go up without a copy and come back through
 * vnet_rx_release(); freed buffers are re-posted in batches.
 */
#include <stdio.h>
#include "kernel/kernel.h"
#include "drivers/virtio/vnet_priv.h"

static uint8_t *vnet_rx_buf(const struct vnet *vn, uint16_t i)
{
	return vn->rx_mem + (size_t)i * VNET_RX_BUF_SIZE;
}

/* Buffer index of a driver-made pointer (a token or a handle); -1 if it is
 * not the start of one of our buffers. */
static int vnet_rx_index(const struct vnet *vn, const void *p)
{
	uintptr_t off = (uintptr_t)p - (uintptr_t)vn->rx_mem;

	if ((uintptr_t)p < (uintptr_t)vn->rx_mem || off % VNET_RX_BUF_SIZE ||
	    off / VNET_RX_BUF_SIZE >= vn->rxq.size)
		return -1;
	return (int)(off / VNET_RX_BUF_SIZE);
}

static void vnet_rx_recycle(struct vnet *vn, uint16_t i)
{
	vn->rx_state[i] = VNET_RXB_FREE;
	vn->rx_free[vn->rx_nfree++] = i;
}

/* One buffer per RX descriptor; all of them go on the ring before DRIVER_OK
 * (3.1.1 step 7: "population of virtqueues"), so no notification yet. */
void vnet_rx_setup(struct vnet *vn)
{
	uint16_t i;

	vn->rx_mem = pmm_alloc((size_t)vn->rxq.size * VNET_RX_BUF_SIZE, 4096);
	vn->rx_nfree = 0;
	for (i = vn->rxq.size; i > 0; i--)
		vnet_rx_recycle(vn, (uint16_t)(i - 1));
	vnet_rx_refill(vn, false);
}

/* Re-post every free buffer, publish once, kick if the device asks. */
void vnet_rx_refill(struct vnet *vn, bool kick)
{
	if (vn->rx_nfree == 0 || vn->failed)
		return;
	vn->rx.refills++;
	while (vn->rx_nfree) {
		uint16_t i = vn->rx_free[vn->rx_nfree - 1];
		uint8_t *b = vnet_rx_buf(vn, i);
		/* 5.1.6.3.1: without MRG_RXBUF or GSO each buffer holds the
		 * header and a whole frame (at least 1526 bytes). */
		struct virtq_buf buf = {(uintptr_t)(b + VNET_RX_HDR_OFF),
		                        VNET_RX_BUF_SIZE - VNET_RX_HDR_OFF, true};

		if (virtq_add(&vn->rxq, &buf, 1, b) < 0)
			break; /* a dead ring (reported by vnet_rx); there is always room */
		vn->rx_nfree--;
		vn->rx_state[i] = VNET_RXB_POSTED;
		vn->rx.refilled++;
	}
	virtq_publish(&vn->rxq);
	if (kick && virtq_kick_prepare(&vn->rxq))
		virtq_notify(&vn->rxq);
}

/* Main-loop pass (and before waiting): re-post in batches, or at once if
 * the ring runs low. */
void vnet_rx_poll(struct vnet *vn)
{
	if (vn->rx_nfree >= VNET_RX_REFILL_BATCH ||
	    (vn->rx_nfree && virtq_chains_in_flight(&vn->rxq) < VNET_RX_REFILL_BATCH))
		vnet_rx_refill(vn, true);
}

static uint32_t vnet_rx_flags(const struct vnet *vn, const struct virtio_net_hdr *h)
{
	if ((vn->features & VIRTIO_BIT(VIRTIO_NET_F_GUEST_CSUM)) &&
	    (h->flags & (VIRTIO_NET_HDR_F_NEEDS_CSUM | VIRTIO_NET_HDR_F_DATA_VALID)))
		return VNET_RX_F_CSUM_VALID;
	return 0;
}

int vnet_rx(struct vnet *vn, struct vnet_rx *out)
{
	uint16_t budget;

	if (vn->failed)
		return -VNET_EDEVICE;
	if (!vn->rx_quota)
		return 0; /* this pass's budget is spent (VNET_RX_BUDGET) */
	/* Each pass consumes one used entry: bounded by the ring. */
	for (budget = vn->rxq.size; budget; budget--) {
		const struct virtio_net_hdr *h;
		void *token;
		uint32_t len;
		uint8_t *b;
		int rc = virtq_get_used(&vn->rxq, &token, &len);
		int i;

		if (rc == 0)
			return 0;
		if (rc < 0) {
			vnet_fail(vn, "receive queue: device fault %s (DEVICE_FAULT line above)",
			          virtq_fault_name(vn->rxq.fault));
			return -VNET_EDEVICE;
		}
		b = token;
		i = vnet_rx_index(vn, b);
		if (i < 0 || vn->rx_state[i] != VNET_RXB_POSTED) {
			vnet_fail(vn, "receive queue: token %p is not a posted buffer", token);
			return -VNET_EDEVICE;
		}
		h = (const struct virtio_net_hdr *)(b + VNET_RX_HDR_OFF);
		if (vn->rx_skip) {
			/* Tail of a multi-buffer frame we already dropped. */
			vn->rx_skip--;
			vnet_rx_recycle(vn, (uint16_t)i);
			continue;
		}
		if ((vn->features & VIRTIO_BIT(VIRTIO_NET_F_MRG_RXBUF)) && h->num_buffers != 1) {
			/* 5.1.6.4: frames never span our 2 KiB buffers without GSO;
			 * drop one that does, with the buffers it announces. */
			vn->rx_skip = h->num_buffers ? (uint16_t)(h->num_buffers - 1) : 0;
			vn->rx.drops++;
			vnet_rx_recycle(vn, (uint16_t)i);
			continue;
		}
		if (len < VNET_HDR_LEN + 14 || len - VNET_HDR_LEN > VNET_FRAME_MAX) {
			vn->rx.drops++; /* runt or oversize */
			vnet_rx_recycle(vn, (uint16_t)i);
			continue;
		}
		vn->rx_state[i] = VNET_RXB_UP;
		vn->rx_quota--;
		vn->rx.frames++;
		vn->rx.bytes += len - VNET_HDR_LEN;
		*out = (struct vnet_rx){
		    .data = b + VNET_RX_FRAME_OFF,
		    .len = len - VNET_HDR_LEN,
		    .flags = vnet_rx_flags(vn, h),
		    .priv = b,
		    .handle = b,
		};
		return 1;
	}
	return 0;
}

void vnet_rx_release(struct vnet *vn, void *handle)
{
	int i = vnet_rx_index(vn, handle);

	if (i < 0 || vn->rx_state[i] != VNET_RXB_UP) {
		/* Never a double free: refuse and say so. */
		printf("vnet: rx_release(%p): not a buffer the caller holds\n", handle);
		return;
	}
	vnet_rx_recycle(vn, (uint16_t)i);
	if (vn->rx_nfree >= VNET_RX_REFILL_BATCH)
		vnet_rx_refill(vn, true);
}
