/*
 * vnet_tx.c: virtio-net transmit (virtio 1.2 5.1.6.2). One reclaim routine,
 * one kick routine; the TX_RECLAIM and TX_KICK policies (vnet_policy.h) only
 * choose where they are called.
 */
#include <string.h>
#include "kernel/arch.h"
#include "kernel/kernel.h"
#include "kernel/prof.h"
#include "drivers/virtio/vnet_priv.h"

#define VNET_RECLAIM_ALL 0xffffffffu

const unsigned vnet_tx_headroom = (VNET_TXHDR_INLINE && VNET_ZEROCOPY) ? VNET_HDR_LEN : 0;

void vnet_tx_setup(struct vnet *vn)
{
	uint16_t i;

	vn->tx_mem = pmm_alloc((size_t)vn->txq.size * VNET_TX_SLOT_SIZE, 64);
	for (i = 0; i < vn->txq.size; i++)
		vn->tx_slot[i].next_free = (uint16_t)(i + 1);
	vn->tx_slot_free = 0;
	/* Ring smaller than the threshold: keep the policy meaningful. */
	vn->lazy_thresh = VNET_LAZY_THRESH < vn->txq.size ? VNET_LAZY_THRESH : vn->txq.size / 2;
}

static uint16_t vnet_tx_slot_index(const struct vnet *vn, const struct vnet_tx_slot *s)
{
	return (uint16_t)(s - vn->tx_slot);
}

static uint8_t *vnet_tx_slot_mem(const struct vnet *vn, uint16_t i)
{
	return vn->tx_mem + (size_t)i * VNET_TX_SLOT_SIZE;
}

static unsigned vnet_hist_bucket(unsigned n)
{
	unsigned b = 0;

	if (n <= 2)
		return n;
	/* 3-4 -> 3, 5-8 -> 4, ..., 65+ -> 8 */
	for (b = 3, n = (n - 1) >> 2; n && b < VNET_COUNTER_BUCKETS - 1; n >>= 1)
		b++;
	return b;
}

/* Who called the one reclaim routine: the policy under test, or one of
 * the two rules every policy keeps (counted apart, vnet_tx_poll()). */
enum vnet_take { VNET_TAKE_POLICY, VNET_TAKE_IDLE, VNET_TAKE_RX };

/*
 * The one TX reclaim routine (Linux free_old_xmit_skbs()): take back up to
 * max completed frames, return their slots, tell the caller its buffers are
 * free. Every policy calls this and nothing else to reclaim; `why` says
 * whether the policy or a rule called it.
 */
static unsigned vnet_tx_take(struct vnet *vn, unsigned max, enum vnet_take why)
{
	unsigned n = 0;

	prof_enter(PROF_RECLAIM);
	vnet_trace(vn, why == VNET_TAKE_IDLE     ? 'I'
	               : why == VNET_TAKE_RX     ? 'R'
	               : max == VNET_RECLAIM_ALL ? 'F'
	                                         : 'f');
	while (n < max) {
		struct vnet_tx_slot *s;
		void *token;
		uint32_t len;
		int rc = virtq_get_used(&vn->txq, &token, &len);

		if (rc == 0)
			break;
		if (rc < 0) {
			vnet_fail(vn, "transmit queue: device fault %s (DEVICE_FAULT line above)",
			          virtq_fault_name(vn->txq.fault));
			break;
		}
		s = token;
		if (s->rx_handle)
			vnet_rx_tx_done(vn, s->rx_handle); /* a forwarded RX buffer goes home */
		else if (VNET_ZEROCOPY && vn->tx_done)
			vn->tx_done(vn->tx_done_arg, s->cookie);
		s->rx_handle = NULL;
		s->next_free = vn->tx_slot_free;
		vn->tx_slot_free = vnet_tx_slot_index(vn, s);
		n++;
	}
	if (why == VNET_TAKE_IDLE) {
		vn->tx.idle_reclaim_calls++;
		vn->tx.idle_reclaimed += n;
	} else if (why == VNET_TAKE_RX) {
		vn->tx.rx_reclaim_calls++;
		vn->tx.rx_reclaimed += n;
	} else {
		vn->tx.reclaim_calls++;
		vn->tx.reclaimed += n;
		vn->tx.reclaim_hist[vnet_hist_bucket(n)]++;
	}
	prof_exit();
	return n;
}

unsigned vnet_tx_reclaim(struct vnet *vn, unsigned max)
{
	return vnet_tx_take(vn, max, VNET_TAKE_POLICY);
}

/* Make what was added visible to the device. */
static void vnet_tx_publish(struct vnet *vn)
{
	if (!virtq_unpublished(&vn->txq))
		return;
	vnet_trace(vn, 'P');
	virtq_publish(&vn->txq);
}

/* Publish what was added, decide, notify if the device asked for it. The
 * one place a TX kick happens. */
void vnet_tx_kick(struct vnet *vn)
{
	vnet_tx_publish(vn);
	vnet_trace(vn, 'K');
	if (virtq_kick_prepare(&vn->txq)) {
		prof_enter(PROF_KICK);
		virtq_notify(&vn->txq);
		prof_exit();
	}
	vn->tx_since_kick = 0;
	vn->tx_holding = false;
}

bool vnet_tx_kick_pending(const struct vnet *vn)
{
	return virtq_unpublished(&vn->txq) || virtq_kick_pending(&vn->txq);
}

static bool vnet_tx_hold_expired(const struct vnet *vn)
{
	return vn->tx_holding && clock_ns() - vn->tx_hold_since >= VNET_KICK_TIMER_US * 1000ull;
}

/* Build the descriptor list for one frame into bufs; returns its length. */
static unsigned vnet_tx_build(struct vnet *vn, uint16_t slot, const struct vnet_seg *segs,
                              unsigned nseg, uint32_t total, const struct virtio_net_hdr *hdr,
                              struct virtq_buf *bufs)
{
	uint8_t *mem = vnet_tx_slot_mem(vn, slot);
	unsigned i, n = 0;

	if (!VNET_ZEROCOPY) {
		/* Copy: header and frame side by side in the slot. */
		uint32_t off = VNET_HDR_LEN;

		memcpy(mem, hdr, VNET_HDR_LEN);
		for (i = 0; i < nseg; i++) {
			memcpy(mem + off, segs[i].data, segs[i].len);
			off += segs[i].len;
		}
		if (VNET_TXHDR_INLINE) {
			bufs[n++] = (struct virtq_buf){(uintptr_t)mem, VNET_HDR_LEN + total, false};
		} else {
			bufs[n++] = (struct virtq_buf){(uintptr_t)mem, VNET_HDR_LEN, false};
			bufs[n++] = (struct virtq_buf){(uintptr_t)mem + VNET_HDR_LEN, total, false};
		}
		return n;
	}
	/* Zero-copy: descriptors point at the caller's segments. */
	for (i = 0; i < nseg; i++) {
		uint8_t *p = segs[i].data;
		uint32_t len = segs[i].len;

		if (i == 0 && VNET_TXHDR_INLINE) {
			/* Header in the caller's headroom (vnet_tx_headroom). */
			p -= VNET_HDR_LEN;
			memcpy(p, hdr, VNET_HDR_LEN);
			len += VNET_HDR_LEN;
		} else if (i == 0) {
			memcpy(mem, hdr, VNET_HDR_LEN);
			bufs[n++] = (struct virtq_buf){(uintptr_t)mem, VNET_HDR_LEN, false};
		}
		if (len)
			bufs[n++] = (struct virtq_buf){(uintptr_t)p, len, false};
	}
	return n;
}

/* Descriptors one frame takes in this build. */
static unsigned vnet_tx_ndesc(unsigned nseg)
{
	if (!VNET_ZEROCOPY)
		return VNET_TXHDR_INLINE ? 1 : 2;
	return VNET_TXHDR_INLINE ? nseg : nseg + 1;
}

/* A worst-case frame (Linux 2+MAX_SKB_FRAGS): below this many free
 * descriptors the 2011 variants take their final "free". */
#define VNET_TX_WORST_DESC vnet_tx_ndesc(VNET_TX_MAX_SEGS)

static bool vnet_tx_low(const struct vnet *vn)
{
	return virtq_num_free(&vn->txq) < VNET_TX_WORST_DESC;
}

/* The rest of "xmit" once the chain is added: publication and the TX_KICK
 * decision. */
static void vnet_tx_xmit_end(struct vnet *vn)
{
	if (!VNET_AVAIL_BATCHED)
		vnet_tx_publish(vn);
	vn->tx_since_kick++;
	if (VNET_IS_KICK_EVERY)
		vnet_tx_kick(vn);
	if (VNET_IS_KICK_BURST && vn->tx_since_kick >= VNET_KICK_BURST_MAX)
		vnet_tx_kick(vn);
	if (VNET_IS_KICK_TIMER) {
		if (!vn->tx_holding) {
			vn->tx_holding = true;
			vn->tx_hold_since = clock_ns();
		} else if (vnet_tx_hold_expired(vn)) {
			vnet_tx_kick(vn);
		}
	}
}

static bool vnet_tx_room(const struct vnet *vn, unsigned ndesc)
{
	return virtq_num_free(&vn->txq) >= ndesc && vn->tx_slot_free < vn->txq.size;
}

/* 5.1.6.2: the header for one frame, or -VNET_EINVAL when the request
 * asks for an offload the device did not accept or contradicts the frame. */
static int vnet_tx_hdr(const struct vnet *vn, const struct vnet_txo *o, uint32_t total,
                       struct virtio_net_hdr *hdr)
{
	*hdr = (struct virtio_net_hdr){.gso_type = VIRTIO_NET_HDR_GSO_NONE};
	if (!o || (!o->csum && o->gso_type == VIRTIO_NET_HDR_GSO_NONE))
		return total <= vn->max_frame ? 0 : -VNET_EINVAL;
	if (!o->csum || !(vn->offloads & VNET_OFF_TX_CSUM) ||
	    (uint32_t)o->csum_start + o->csum_offset + 2u > total)
		return -VNET_EINVAL;
	hdr->flags = VIRTIO_NET_HDR_F_NEEDS_CSUM;
	hdr->csum_start = o->csum_start;
	hdr->csum_offset = o->csum_offset;
	if (o->gso_type == VIRTIO_NET_HDR_GSO_NONE)
		return total <= vn->max_frame ? 0 : -VNET_EINVAL;
	/* "The driver MUST NOT set gso_type TCPV4 unless HOST_TSO4 was
	 * negotiated"; gso_size is the MSS, hdr_len the header bytes the
	 * device copies into every segment. */
	if (o->gso_type != VIRTIO_NET_HDR_GSO_TCPV4 || !(vn->offloads & VNET_OFF_TSO4) ||
	    o->gso_size == 0 || o->hdr_len <= o->csum_start || o->hdr_len >= total ||
	    total > VNET_GSO_FRAME_MAX)
		return -VNET_EINVAL;
	hdr->gso_type = o->gso_type;
	hdr->gso_size = o->gso_size;
	hdr->hdr_len = o->hdr_len;
	return 0;
}

/* vnet_tx() and vnet_tx_forward(): rx_handle is the forwarded RX buffer
 * (index rx_index), NULL for a caller's frame. */
static int vnet_tx_queue(struct vnet *vn, const struct vnet_seg *segs, unsigned nseg,
                         const struct vnet_txo *o, void *cookie, void *rx_handle, int rx_index)
{
	struct virtq_buf bufs[VNET_TX_MAX_SEGS + 1];
	struct virtio_net_hdr hdr;
	uint32_t total = 0;
	unsigned i, n, ndesc;
	uint16_t slot;
	int rc;

	if (vn->failed)
		return -VNET_EDEVICE;
	if (nseg == 0 || nseg > VNET_TX_MAX_SEGS)
		return -VNET_EINVAL;
	for (i = 0; i < nseg; i++)
		total += segs[i].len;
	ndesc = vnet_tx_ndesc(nseg);
	if (total == 0 || ndesc > vn->txq.size || (VNET_TXHDR_INLINE && segs[0].len == 0) ||
	    vnet_tx_hdr(vn, o, total, &hdr) < 0)
		return -VNET_EINVAL;

	vn->tx_activity++;
	/* Before queuing (vnet_policy.h has the steps of each variant):
	 * base, v0, v2, v3 "free"; lazy below its threshold. */
	if (VNET_IS_RECLAIM_BASE_V0 || VNET_IS_RECLAIM_V2_V3)
		vnet_tx_reclaim(vn, VNET_RECLAIM_ALL);
	if (VNET_IS_RECLAIM_LAZY && virtq_num_free(&vn->txq) < vn->lazy_thresh)
		vnet_tx_reclaim(vn, VNET_RECLAIM_ALL);
	/* The ring is full: the others "free" now (v1's "xmit, free, xmit");
	 * poll never reclaims on this path, and those above just did. */
	if (!vnet_tx_room(vn, ndesc) && !VNET_IS_RECLAIM_POLL && !VNET_IS_RECLAIM_BASE_V0 &&
	    !VNET_IS_RECLAIM_V2_V3)
		vnet_tx_reclaim(vn, VNET_RECLAIM_ALL);
	if (vn->failed)
		return -VNET_EDEVICE;
	if (!vnet_tx_room(vn, ndesc)) {
		/* Back-pressure. The device must see and be told about what is
		 * queued, or the caller would wait for space forever. */
		vn->tx.ring_full++;
		vnet_tx_kick(vn);
		return -VNET_EAGAIN;
	}

	slot = vn->tx_slot_free;
	n = vnet_tx_build(vn, slot, segs, nseg, total, &hdr, bufs);
	rc = virtq_add(&vn->txq, bufs, n, &vn->tx_slot[slot]);
	if (rc == -VIRTQ_EDEVICE) {
		/* The packed ring checks the descriptors it is about to fill
		 * (the device may have written there). */
		vnet_fail(vn, "transmit queue: device fault %s (DEVICE_FAULT line above)",
		          virtq_fault_name(vn->txq.fault));
		return -VNET_EDEVICE;
	}
	if (rc < 0) /* room was checked: only a bad segment gets here */
		return -VNET_EINVAL;
	vnet_trace(vn, 'A');
	vn->tx_slot_free = vn->tx_slot[slot].next_free;
	vn->tx_slot[slot].cookie = cookie;
	vn->tx.frames++;
	vn->tx.bytes += total;
	vn->tx.csum += hdr.flags != 0;
	vn->tx.gso += hdr.gso_type != VIRTIO_NET_HDR_GSO_NONE;
	if (rx_handle && VNET_ZEROCOPY) {
		/* The descriptors point into the RX buffer: it rides the TX
		 * ring until the one reclaim routine gives it back. */
		vn->tx_slot[slot].rx_handle = rx_handle;
		vnet_rx_to_tx(vn, (uint16_t)rx_index);
	} else if (rx_handle) {
		vnet_rx_release(vn, rx_handle); /* copied: re-posted at once */
	} else if (!VNET_ZEROCOPY && vn->tx_done) {
		vn->tx_done(vn->tx_done_arg, cookie); /* copied: caller's memory is free */
	}

	/* v3: "don't delay avail index update" (avail=eager is enforced). */
	if (VNET_IS_RECLAIM_V3)
		vnet_tx_publish(vn);
	/* The rest of "xmit" now, except in v2/v3, which free first. */
	if (!VNET_IS_RECLAIM_V2_V3)
		vnet_tx_xmit_end(vn);

	/* After queuing: after "free"; v1, v2, v3 "2*free"; then base, v0,
	 * v1, v2, v3 "free" if the ring runs low and completions are waiting
	 * (Linux: stop the queue, re-enable callbacks, "More just got used,
	 * free them then recheck"). */
	if (VNET_IS_RECLAIM_AFTER)
		vnet_tx_reclaim(vn, VNET_RECLAIM_ALL);
	if (VNET_IS_RECLAIM_V1 || VNET_IS_RECLAIM_V2_V3)
		vnet_tx_reclaim(vn, VNET_RECLAIM_K);
	if ((VNET_IS_RECLAIM_BASE_V0 || VNET_IS_RECLAIM_V1 || VNET_IS_RECLAIM_V2_V3) &&
	    vnet_tx_low(vn) && virtq_used_pending(&vn->txq))
		vnet_tx_reclaim(vn, VNET_RECLAIM_ALL);
	if (VNET_IS_RECLAIM_V2_V3)
		vnet_tx_xmit_end(vn);
	return vn->failed ? -VNET_EDEVICE : 0;
}

int vnet_tx(struct vnet *vn, const struct vnet_seg *segs, unsigned nseg, const struct vnet_txo *o,
            void *cookie)
{
	return vnet_tx_queue(vn, segs, nseg, o, cookie, NULL, -1);
}

int vnet_tx_forward(struct vnet *vn, const struct vnet_rx *f)
{
	struct vnet_seg seg = {f->buf[0].data, f->len};
	struct vnet_txo o = {.csum = true,
	                     .csum_start = f->csum_start,
	                     .csum_offset = f->csum_offset,
	                     .gso_type = VIRTIO_NET_HDR_GSO_NONE};
	int i = vnet_rx_held_index(vn, f->buf[0].handle);

	if (vn->failed)
		return -VNET_EDEVICE;
	if (f->nbufs != 1 || i < 0 || f->len > f->buf[0].len || (f->flags & VNET_RX_F_GSO))
		return -VNET_EINVAL;
	return vnet_tx_queue(vn, &seg, 1, (f->flags & VNET_RX_F_CSUM_PARTIAL) ? &o : NULL, NULL,
	                     f->buf[0].handle, i);
}

uint16_t vnet_tx_ring_size(const struct vnet *vn)
{
	return vn->txq.size;
}

void vnet_tx_end_burst(struct vnet *vn)
{
	if (vn->failed)
		return;
	if (VNET_AVAIL_BATCHED)
		vnet_tx_publish(vn);
	if (VNET_IS_KICK_BURST && vnet_tx_kick_pending(vn))
		vnet_tx_kick(vn);
}

/*
 * Liveness, every policy: a frame the device has completed must not stay
 * unreclaimed for ever just because nothing else is sent. In zero-copy
 * builds its pbuf stays referenced until reclaim, and lwIP refuses to
 * retransmit a segment whose pbuf is referenced, so a lost last segment
 * would never be sent again (Linux, 2008: "it is not allowed for your TX
 * mitigation scheme to let TX packets hang out in the TX ring unreclaimed
 * forever"). Once the TX path has been idle for VNET_TX_IDLE_RECLAIM_US
 * with completions waiting, reclaim them, counted apart from the policy's
 * own reclaims. A busy TX path (vnet_tx() called since the last look)
 * never triggers it, so the policy under test is not changed.
 */
/*
 * The busy-path bound (issue 23 finding 6): with TX_RECLAIM=lazy and a
 * steady unrelated stream (ACKs of an inbound flow) the idle reclaim never
 * fires and lazy frees nothing until fewer than VNET_LAZY_THRESH
 * descriptors are free, ~ring-32 frames later; a completed zero-copy
 * segment would stay referenced all that while, and lwIP's retransmission
 * of it waits for the next slow-timer tick after that. So: completions
 * seen waiting, and no reclaim of any kind since for
 * VNET_TX_STALE_RECLAIM_US, are taken back now, counted with the idle
 * reclaims. A policy that reclaims on its TX path resets the clock with
 * every reclaim and never gets here.
 */
static void vnet_tx_stale_reclaim(struct vnet *vn, uint64_t now)
{
	uint64_t calls = vn->tx.reclaim_calls + vn->tx.idle_reclaim_calls + vn->tx.rx_reclaim_calls;

	if (!virtq_used_pending(&vn->txq)) {
		vn->tx_waiting_since = 0;
		return;
	}
	if (calls != vn->tx_reclaims_seen || !vn->tx_waiting_since) {
		vn->tx_reclaims_seen = calls;
		vn->tx_waiting_since = now;
		return;
	}
	if (now - vn->tx_waiting_since < VNET_TX_STALE_RECLAIM_US * 1000ull)
		return;
	vnet_tx_take(vn, VNET_RECLAIM_ALL, VNET_TAKE_IDLE);
	vn->tx_waiting_since = 0;
}

static void vnet_tx_idle_reclaim(struct vnet *vn)
{
	uint64_t now;

	if (VNET_IS_RECLAIM_POLL || !virtq_chains_in_flight(&vn->txq))
		return;
	now = clock_ns();
	vnet_tx_stale_reclaim(vn, now);
	if (vn->tx_activity != vn->tx_activity_seen) {
		vn->tx_activity_seen = vn->tx_activity;
		vn->tx_idle_since = now;
		return;
	}
	if (now - vn->tx_idle_since < VNET_TX_IDLE_RECLAIM_US * 1000ull ||
	    !virtq_used_pending(&vn->txq))
		return;
	vnet_tx_take(vn, VNET_RECLAIM_ALL, VNET_TAKE_IDLE);
	vn->tx_idle_since = now;
}

/* Before a halt (IDLE=halt|adaptive): the TX path is idle by definition,
 * so completions already waiting are taken back now, as the liveness
 * reclaim would after its delay, and counted with it; the halt then only
 * has to wake for frames the device has not completed yet. */
void vnet_tx_reclaim_before_halt(struct vnet *vn)
{
	if (!VNET_IS_RECLAIM_POLL && virtq_used_pending(&vn->txq))
		vnet_tx_take(vn, VNET_RECLAIM_ALL, VNET_TAKE_IDLE);
}

/*
 * Zero-copy forwarding lends RX buffers to TX (vnet_tx_forward()), one
 * buffer per RX descriptor, and they go home only when TX reclaims them. A
 * policy that reclaims late (lazy: not before fewer than LAZY_THRESH TX
 * descriptors are free; DPDK refills its RX ring from a mempool many times
 * larger) would leave the device about LAZY_THRESH of the RX ring's
 * buffers: 32 of 256 are 0.6 ms at 50 kpps, and a longer stall of the
 * guest (an exit, the host's interrupt) drops frames at the device (under
 * KVM on vhost-user 2026-12-07: the NDR 4x lower than with the `after`
 * policy; docs/results/ndr-mlrsearch.md). So once fewer than half the RX
 * ring is posted and completed TX frames wait on the used ring, they are
 * taken back now, counted apart (rx_reclaim_calls / rx_reclaimed). A TX
 * path that forwards nothing never gets here.
 */
static void vnet_tx_rx_reclaim(struct vnet *vn)
{
	if (vn->rx_in_tx && vn->rx_posted < vn->rxq.size / 2 && virtq_used_pending(&vn->txq))
		vnet_tx_take(vn, VNET_RECLAIM_ALL, VNET_TAKE_RX);
}

/* The TX part of one main-loop pass. Every policy but the labelled timer
 * flushes a pending kick here (deferred: this is its only kick point;
 * the others: a safety net for a caller that skipped end_burst). */
void vnet_tx_poll(struct vnet *vn)
{
	if (VNET_IS_KICK_TIMER) {
		if (vnet_tx_hold_expired(vn))
			vnet_tx_kick(vn);
	} else if (vnet_tx_kick_pending(vn)) {
		vnet_tx_kick(vn);
	}
	if (VNET_IS_RECLAIM_POLL)
		vnet_tx_reclaim(vn, VNET_RECLAIM_ALL);
	vnet_tx_rx_reclaim(vn);
	vnet_tx_idle_reclaim(vn);
}

/* Nothing may stay unkicked while the appliance waits (the 2008 lesson),
 * except in the timer variant, whose hold vnet_tx_poll() bounds. */
void vnet_tx_before_wait(struct vnet *vn)
{
	if (VNET_IS_KICK_TIMER)
		vnet_tx_publish(vn);
	else if (vnet_tx_kick_pending(vn))
		vnet_tx_kick(vn);
}

/* End of a run: kick whatever is queued (the timer variant's hold too: the
 * measured interval is over) and take every frame back, so the caller can
 * exit knowing the device has sent everything. QEMU's virtio-net transmits
 * from a bottom half after the kick, so a guest that exits right after
 * kicking can lose its last frames. */
int vnet_tx_drain(struct vnet *vn, uint64_t timeout_ns)
{
	if (vnet_tx_kick_pending(vn))
		vnet_tx_kick(vn);
	uint64_t end = clock_ns() + timeout_ns;
	while (virtq_chains_in_flight(&vn->txq) && !vn->failed) {
		if (clock_ns() > end)
			return -1;
		if (!vnet_tx_reclaim(vn, VNET_RECLAIM_ALL))
			cpu_relax();
	}
	return vn->failed ? -VNET_EDEVICE : 0;
}
