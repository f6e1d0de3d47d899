/*
 * vnet_rx.c: virtio-net receive (virtio 1.2 5.1.6.3-4). Every buffer is
 * posted at start; frames go up without a copy and come back through
 * vnet_rx_release(); freed buffers are re-posted in batches.
 */
#include <stdio.h>
#include <string.h>
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
		/* 5.1.6.3.1: without MRG_RXBUF each buffer holds the header
		 * and a whole frame (at least 1526 bytes; no GUEST_TSO then). */
		struct virtq_buf buf = {(uintptr_t)(b + VNET_RX_HDR_OFF),
		                        VNET_RX_BUF_SIZE - VNET_RX_HDR_OFF, true};

		if (virtq_add(&vn->rxq, &buf, 1, b) < 0)
			break; /* a dead ring (reported by vnet_rx); there is always room */
		vn->rx_nfree--;
		vn->rx_posted++;
		vn->rx_state[i] = VNET_RXB_POSTED;
		vn->rx.refilled++;
	}
	virtq_publish(&vn->rxq);
	if (kick && virtq_kick_prepare(&vn->rxq)) {
		virtq_notify(&vn->rxq);
		vnet_rss_kick_peers(vn);
	}
}

/* Main-loop pass (and before waiting): re-post in batches, or at once if
 * the ring runs low. */
void vnet_rx_poll(struct vnet *vn)
{
	if (vn->rx_nfree >= VNET_RX_REFILL_BATCH ||
	    (vn->rx_nfree && virtq_chains_in_flight(&vn->rxq) < VNET_RX_REFILL_BATCH))
		vnet_rx_refill(vn, true);
}

/* A frame header the device had no right to write (5.1.6.4.1): one line,
 * counted, and the run ends like any other device fault. */
static int vnet_rx_fault(struct vnet *vn, const char *what, unsigned long value)
{
	vn->rx.device_errors++;
	printf("DEVICE_FAULT {\"queue\":%u,\"fault\":\"%s\",\"value\":%lu,\"posted\":%u}\n",
	       VNET_RXQ, what, value, vn->rx_posted);
	vnet_fail(vn, "receive queue: device fault %s=%lu (DEVICE_FAULT line above)", what, value);
	return -VNET_EDEVICE;
}

/* Take the next used RX buffer: 1 with its index, 0 if none, <0 on fault. */
static int vnet_rx_take(struct vnet *vn, uint16_t *idx, uint32_t *len)
{
	void *token;
	int i, rc = virtq_get_used(&vn->rxq, &token, len);

	if (rc == 0)
		return 0;
	if (rc < 0) {
		vnet_fail(vn, "receive queue: device fault %s (DEVICE_FAULT line above)",
		          virtq_fault_name(vn->rxq.fault));
		return -VNET_EDEVICE;
	}
	i = vnet_rx_index(vn, token);
	if (i < 0 || vn->rx_state[i] != VNET_RXB_POSTED) {
		vnet_fail(vn, "receive queue: token %p is not a posted buffer", token);
		return -VNET_EDEVICE;
	}
	vn->rx_state[i] = VNET_RXB_UP;
	vn->rx_posted--;
	vn->rx_held++;
	vn->rx.bufs++;
	*idx = (uint16_t)i;
	return 1;
}

/* 5.1.6.4: check what the header claims against what we negotiated and
 * what arrived. <0: a device fault (already reported). */
static int vnet_rx_check_hdr(struct vnet *vn, const struct virtio_net_hdr *h, uint32_t total)
{
	if (h->gso_type != VIRTIO_NET_HDR_GSO_NONE) {
		/* Only TCPv4 was accepted (GUEST_TSO4), never ECN (GUEST_ECN):
		 * any other value is a fault, the ECN bit on its own included
		 * (found by fuzz_vnet_dev: NONE|ECN passed this check, and
		 * vnet_rx_flags() then marked the frame GSO with an unchecked
		 * gso_size). */
		if (!(vn->offloads & VNET_OFF_LRO4) || h->gso_type != VIRTIO_NET_HDR_GSO_TCPV4)
			return vnet_rx_fault(vn, "gso_type", h->gso_type);
		if (h->gso_size == 0 || h->gso_size > total)
			return vnet_rx_fault(vn, "gso_size", h->gso_size);
		if (h->hdr_len > total)
			return vnet_rx_fault(vn, "hdr_len", h->hdr_len);
	}
	if ((h->flags & VIRTIO_NET_HDR_F_NEEDS_CSUM) && (vn->offloads & VNET_OFF_RX_CSUM) &&
	    (uint32_t)h->csum_start + h->csum_offset + 2u > total)
		return vnet_rx_fault(vn, "csum_start", h->csum_start);
	return 0;
}

static uint32_t vnet_rx_flags(const struct vnet *vn, const struct virtio_net_hdr *h)
{
	uint32_t f = 0;

	/* NEEDS_CSUM: the sender left the checksum partial and the device
	 * vouches for the data (Linux: CHECKSUM_PARTIAL); DATA_VALID: the
	 * device checked it. Either way nothing is left to verify. */
	if ((vn->offloads & VNET_OFF_RX_CSUM) &&
	    (h->flags & (VIRTIO_NET_HDR_F_NEEDS_CSUM | VIRTIO_NET_HDR_F_DATA_VALID)))
		f |= VNET_RX_F_CSUM_VALID;
	if ((vn->offloads & VNET_OFF_RX_CSUM) && (h->flags & VIRTIO_NET_HDR_F_NEEDS_CSUM))
		f |= VNET_RX_F_CSUM_PARTIAL;
	if (h->gso_type != VIRTIO_NET_HDR_GSO_NONE)
		f |= VNET_RX_F_GSO;
	return f;
}

/* The header lives in memory the device can still write after it
 * published the used entry (a hostile or buggy device, and the untrusted
 * host of a confidential guest). So it is fetched exactly once, into
 * driver memory, and every check and every use reads that copy: a device
 * that rewrites it between the check and the use changes nothing (Linux
 * virtio hardening: read once, validate the copy). Volatile 16-bit loads
 * (the header is 2-byte aligned, 12 bytes) so the compiler can neither
 * repeat nor defer a load past the copy. */
static void vnet_rx_hdr_once(struct virtio_net_hdr *h, const uint8_t *dev)
{
	const volatile uint16_t *s = (const volatile uint16_t *)(const void *)dev;
	uint16_t w[sizeof(*h) / 2];

	_Static_assert(sizeof(*h) == 12, "virtio_net_hdr with num_buffers is 12 bytes");
	for (unsigned i = 0; i < sizeof(*h) / 2; i++)
		w[i] = s[i];
	memcpy(h, w, sizeof(*h));
}

int vnet_rx(struct vnet *vn, struct vnet_rx *out)
{
	uint16_t budget;

	if (vn->failed)
		return -VNET_EDEVICE;
	if (!vn->rx_quota)
		return 0; /* this pass's budget is spent (VNET_RX_BUDGET) */
	/* Each pass consumes at least one used entry: bounded by the ring. */
	for (budget = vn->rxq.size; budget; budget--) {
		struct virtio_net_hdr hdr;
		const struct virtio_net_hdr *h = &hdr; /* the copy, never device memory */
		uint32_t len, total;
		uint16_t i, nbufs = 1;
		int rc = vnet_rx_take(vn, &i, &len);

		if (rc <= 0)
			return rc;
		uint8_t *b = vnet_rx_buf(vn, i);

		vnet_rx_hdr_once(&hdr, b + VNET_RX_HDR_OFF);
		out->nbufs = 1;
		out->buf[0] = (struct vnet_rx_buf){
		    b + VNET_RX_FRAME_OFF, len > VNET_HDR_LEN ? len - VNET_HDR_LEN : 0, b, b};
		if (vn->features & VIRTIO_BIT(VIRTIO_NET_F_MRG_RXBUF)) {
			/* 5.1.6.4.1: num_buffers >= 1, and "the device MUST use
			 * all buffers used by a single receive packet together":
			 * every one of them must already be on the used ring. */
			nbufs = h->num_buffers;
			if (nbufs == 0 || nbufs > VNET_RX_MAX_BUFS || nbufs > vn->rx_posted + 1u)
				return vnet_rx_fault(vn, "num_buffers", nbufs);
		}
		if (len < VNET_HDR_LEN)
			return vnet_rx_fault(vn, "first_len", len);
		total = len - VNET_HDR_LEN;
		for (uint16_t k = 1; k < nbufs; k++) {
			rc = vnet_rx_take(vn, &i, &len);
			if (rc == 0)
				return vnet_rx_fault(vn, "num_buffers_unused", nbufs);
			if (rc < 0)
				return rc;
			b = vnet_rx_buf(vn, i);
			out->buf[k] = (struct vnet_rx_buf){b + VNET_RX_HDR_OFF, len, b, b};
			out->nbufs++;
			total += len;
		}
		if (vnet_rx_check_hdr(vn, h, total) < 0)
			return -VNET_EDEVICE;
		out->len = total;
		out->flags = vnet_rx_flags(vn, h);
		out->gso_size = (out->flags & VNET_RX_F_GSO) ? h->gso_size : 0;
		out->csum_start = (out->flags & VNET_RX_F_CSUM_PARTIAL) ? h->csum_start : 0;
		out->csum_offset = (out->flags & VNET_RX_F_CSUM_PARTIAL) ? h->csum_offset : 0;
		if (total < 14 || total > VNET_RX_GSO_FRAME_MAX ||
		    (!(out->flags & VNET_RX_F_GSO) && total > vn->max_frame)) {
			vn->rx.drops++; /* runt or oversize: counted, buffers back */
			vnet_rx_release_frame(vn, out);
			continue;
		}
		vn->rx_quota--;
		vn->rx.frames++;
		vn->rx.bytes += total;
		vn->rx.csum += (out->flags & VNET_RX_F_CSUM_VALID) != 0;
		vn->rx.gso += (out->flags & VNET_RX_F_GSO) != 0;
		return 1;
	}
	return 0;
}

void vnet_rx_release_frame(struct vnet *vn, const struct vnet_rx *f)
{
	for (unsigned k = 0; k < f->nbufs; k++)
		vnet_rx_release(vn, f->buf[k].handle);
}

uint16_t vnet_rx_held(const struct vnet *vn)
{
	return vn->rx_held;
}

uint16_t vnet_rx_ring_size(const struct vnet *vn)
{
	return vn->rxq.size;
}

void vnet_rx_release(struct vnet *vn, void *handle)
{
	int i = vnet_rx_index(vn, handle);

	if (i < 0 || vn->rx_state[i] != VNET_RXB_UP) {
		/* Never a double free: refuse and say so. */
		printf("vnet: rx_release(%p): not a buffer the caller holds\n", handle);
		return;
	}
	vn->rx_held--;
	vnet_rx_recycle(vn, (uint16_t)i);
	if (vn->rx_nfree >= VNET_RX_REFILL_BATCH)
		vnet_rx_refill(vn, true);
}

int vnet_rx_held_index(const struct vnet *vn, const void *handle)
{
	int i = vnet_rx_index(vn, handle);

	return i >= 0 && vn->rx_state[i] == VNET_RXB_UP ? i : -1;
}

/* The buffer is on the TX ring now: neither the caller's (a release is
 * refused) nor free. */
void vnet_rx_to_tx(struct vnet *vn, uint16_t i)
{
	vn->rx_state[i] = VNET_RXB_TX;
	vn->rx_held--;
	vn->rx_in_tx++;
}

/* The device has sent a forwarded buffer (the one TX reclaim routine): back
 * to RX, re-posted with the next batch like a released one. */
void vnet_rx_tx_done(struct vnet *vn, void *handle)
{
	int i = vnet_rx_index(vn, handle);

	if (i < 0 || vn->rx_state[i] != VNET_RXB_TX) {
		printf("vnet: forwarded buffer %p is not on the TX ring\n", handle);
		return;
	}
	vn->rx_in_tx--;
	vnet_rx_recycle(vn, (uint16_t)i);
	if (vn->rx_nfree >= VNET_RX_REFILL_BATCH)
		vnet_rx_refill(vn, true);
}
