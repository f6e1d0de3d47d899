/*
 * virtq.c: split virtqueue, driver side (virtio 1.2 section 2.7); the
 * RING=split half of virtq.h (virtq_packed.c is the other).
 *
 * Barriers, named by what they order. The device side runs concurrently
 * (another host thread), so each pairs with a barrier in the device:
 *   A  publish:      descriptors + avail ring entry, then avail->idx
 *   B  kick_prepare: avail->idx store, then avail_event / used->flags load
 *   C  get_used:     used->idx load, then used ring entry loads
 *   D  enable_cb:    used_event / avail->flags store, then used->idx load
 * (B and D plus a device register read under an emulator whose fences do
 * not reach the host: virtq_set_sync())
 * x86-64 write-back memory keeps store/store and load/load order, so A and C
 * only stop the compiler (arch_wmb/arch_rmb); B and D are store-then-load
 * and need arch_mb(), as in Linux virtqueue_kick_prepare_split() and
 * virtqueue_enable_cb_delayed().
 */
#include <stdio.h>
#include "kernel/arch.h"
#include "drivers/virtio/virtq.h"

int virtq_init(struct virtq *vq, uint16_t qidx, uint16_t size, bool event_idx, virtq_alloc_fn alloc,
               virtq_notify_fn notify, void *notify_ctx)
{
	uint16_t i;

	if (size == 0 || size > VIRTQ_MAX_SIZE || (size & (size - 1)))
		return -VIRTQ_EINVAL;
	*vq = (struct virtq){0};
	vq->size = size;
	vq->mask = size - 1;
	vq->qidx = qidx;
	vq->event_idx = event_idx;
	vq->notify = notify;
	vq->notify_ctx = notify_ctx;

	/* 2.7: alignment 16 / 2 / 4. Each part gets its own pages so the
	 * device-written used ring never shares a cache line with what we write. */
	vq->desc = alloc(sizeof(struct virtq_desc) * size, 4096);
	vq->avail = alloc(sizeof(struct virtq_avail) + sizeof(uint16_t) * (size + 1u), 4096);
	vq->used = alloc(sizeof(struct virtq_used) + sizeof(struct virtq_used_elem) * size +
	                     sizeof(uint16_t),
	                 4096);
	if (!vq->desc || !vq->avail || !vq->used)
		return -VIRTQ_EINVAL;
	vq->used_event = &vq->avail->ring[size];
	vq->avail_event = (uint16_t *)&vq->used->ring[size];
	vq->area_desc = (uintptr_t)vq->desc;
	vq->area_driver = (uintptr_t)vq->avail;
	vq->area_device = (uintptr_t)vq->used;

	/* Used-buffer notifications start suppressed (2.7.7.1): the poll
	 * policy never wants them, the halt policies ask with
	 * virtq_enable_cb() just before they halt. Without EVENT_IDX, say so
	 * with the flag. With it the flags must be 0 and used_event stays 0:
	 * the device may raise an interrupt once per 2^16 completions, which
	 * lands nowhere while we poll. */
	if (!event_idx)
		virtq_store16(&vq->avail->flags, VIRTQ_AVAIL_F_NO_INTERRUPT);

	for (i = 0; i < size; i++)
		vq->next[i] = (uint16_t)(i + 1);
	vq->free_head = 0;
	vq->num_free = size;
	return 0;
}

/*
 * Put one chain on the avail ring (not yet visible: see virtq_publish()).
 * Returns the head descriptor id, -VIRTQ_ENOSPC when the ring lacks n free
 * descriptors (nothing changed), -VIRTQ_EINVAL for a malformed request.
 */
int virtq_add(struct virtq *vq, const struct virtq_buf *bufs, unsigned n, void *token)
{
	uint16_t head, id, last = 0;
	uint32_t wlen = 0;
	unsigned i;
	int rc = virtq_add_check(vq, bufs, n);

	if (rc)
		return rc;

	head = id = vq->free_head;
	for (i = 0; i < n; i++) {
		struct virtq_desc *d = &vq->desc[id];
		bool more = i + 1 < n;

		d->addr = bufs[i].addr;
		d->len = bufs[i].len;
		d->flags = (uint16_t)((bufs[i].writable ? VIRTQ_DESC_F_WRITE : 0) |
		                      (more ? VIRTQ_DESC_F_NEXT : 0));
		d->next = more ? vq->next[id] : 0;
		if (bufs[i].writable)
			wlen += bufs[i].len;
		last = id;
		id = vq->next[id];
	}
	vq->free_head = id;
	vq->num_free = (uint16_t)(vq->num_free - n);
	vq->chains++;
	vq->chain_len[head] = (uint16_t)n;
	vq->chain_tail[head] = last;
	vq->write_len[head] = wlen;
	vq->avail_pos[head] = vq->avail_idx;
	vq->token[head] = token;

	vq->avail->ring[vq->avail_idx & vq->mask] = head;
	vq->avail_idx++;
	return head;
}

/* Make everything added so far visible to the device (2.7.13.3). */
void virtq_publish(struct virtq *vq)
{
	if (vq->avail_idx == vq->avail_pub)
		return;
	/* Barrier A (pairs with the device's read barrier after it loads
	 * avail->idx): descriptors and avail ring entries must be visible
	 * before the index that exposes them. */
	arch_wmb();
	virtq_store16(&vq->avail->idx, vq->avail_idx);
	vq->unkicked += (uint16_t)(vq->avail_idx - vq->avail_pub);
	vq->avail_pub = vq->avail_idx;
}

/*
 * Decide whether what was published since the previous decision needs a
 * notification (2.7.13.4 / 2.7.10). Deciding and notifying are separate so a
 * batching policy can decide once for many frames and count both.
 */
/* Does the device's answer (avail_event, or NO_NOTIFY) ask for a kick for
 * the entries [old, new)? */
static bool virtq_device_asks(const struct virtq *vq, uint16_t new_idx, uint16_t old_idx)
{
	if (vq->unkicked >= 0x10000u)
		return true; /* window wider than the index space: always ask */
	if (vq->event_idx)
		return virtq_need_event(virtq_load16(vq->avail_event), new_idx, old_idx);
	return !(virtq_load16(&vq->used->flags) & VIRTQ_USED_F_NO_NOTIFY);
}

bool virtq_kick_prepare(struct virtq *vq)
{
	uint16_t old_idx = vq->kick_old, new_idx = vq->avail_pub;
	bool need;

	if (vq->unkicked == 0)
		return false;
	/* Barrier B (pairs with the device's full barrier between re-enabling
	 * notifications - writing avail_event or clearing NO_NOTIFY - and
	 * re-reading avail->idx): our avail->idx store must be globally visible
	 * before we read its answer, or both sides see stale values, the
	 * device goes idle and we skip the kick it needed. */
	arch_mb();
	need = virtq_device_asks(vq, new_idx, old_idx);
	/* Barrier B under an emulator whose fences do not reach the device
	 * (virtq_enable_cb_after() says why): the answer we read may predate
	 * our avail->idx store reaching the device, and the device, having
	 * re-armed and found nothing new, then waits for a kick we skip (the
	 * TX stall of QEMU 7.2 TCG at high rate). Before trusting a "no", a
	 * register read serialises us with the device, and we read again.
	 * A "yes" needs no proof: a kick too many is harmless. */
	if (!need && vq->sync) {
		vq->stats.kick_syncs++;
		vq->sync(vq->sync_ctx);
		need = virtq_device_asks(vq, new_idx, old_idx);
		if (need)
			vq->stats.kick_rescues++;
	}
	vq->kick_old = new_idx;
	vq->unkicked = 0;
	if (!need)
		vq->stats.kicks_suppressed++;
	return need;
}

/*
 * Ask for an interrupt on the next used buffer (2.7.7.2), then look again:
 * true means completions are already waiting and the caller must not wait
 * for an interrupt that may never come (Linux virtqueue_enable_cb()).
 * EVENT_IDX: used_event = the next entry we will read, so the device
 * interrupts once it writes it; otherwise clear NO_INTERRUPT.
 */
bool virtq_enable_cb(struct virtq *vq)
{
	return virtq_enable_cb_after(vq, 1);
}

/*
 * The same, but with EVENT_IDX the interrupt comes only once k more used
 * entries are there (used_event = last_used + k - 1, 2.7.10): interrupt
 * moderation by count (Linux virtqueue_enable_cb_delayed() picks k itself).
 * True when k entries are already waiting. Without EVENT_IDX the device
 * cannot count for us: k is taken as 1.
 */
bool virtq_enable_cb_after(struct virtq *vq, uint16_t k)
{
	vq->stats.cb_enables++;
	if (!vq->event_idx || k == 0)
		k = 1;
	if (vq->event_idx)
		virtq_store16(vq->used_event, (uint16_t)(vq->last_used + k - 1));
	else
		virtq_store16(&vq->avail->flags, 0);
	/* Barrier D (pairs with the device's full barrier between its used->idx
	 * store and its used_event / flags load): our request must be visible
	 * before we re-read used->idx, or the device completes a buffer in
	 * between, reads the stale request, stays silent, and we halt on a
	 * completion nobody announces (a lost wake-up). */
	arch_mb();
	/* Barrier D under an emulator: the fence above may never reach the
	 * host. QEMU 7.2's TCG with one vCPU translates MFENCE to nothing
	 * (tcg_gen_mb() drops barriers from code generated without
	 * CF_PARALLEL, i.e. with -smp maxcpus=1; QEMU 8.1 keeps them, commit
	 * c914d46d, "The virtio devices require proper memory ordering between
	 * the vcpus and the iothreads"), so the host CPU runs our used->idx
	 * load before our used_event store drains, and virtio-net in QEMU's
	 * I/O thread reads the old used_event after publishing the entry:
	 * no interrupt, and the halt lasts its full bound. A device register
	 * read is emulated under the lock the device model holds while it
	 * publishes used entries and decides to interrupt (QEMU's BQL): that
	 * lock's atomic operation drains our store first, and our re-read
	 * below then sees whatever the device published before it. */
	if (vq->sync) {
		vq->stats.syncs++;
		vq->sync(vq->sync_ctx);
	}
	return virtq_used_count(vq) >= k;
}

/* Where the CPU's fences may not order ring memory against the device
 * (virtq_enable_cb_after()), give the ring a register read to make. */
void virtq_set_sync(struct virtq *vq, virtq_sync_fn fn, void *ctx)
{
	vq->sync = fn;
	vq->sync_ctx = ctx;
}

/* Back to polling: suppress interrupts again. With EVENT_IDX, point
 * used_event just behind what we have read: the device only interrupts on
 * crossing it, 2^16 completions from now (2.7.10, vring_need_event). */
void virtq_disable_cb(struct virtq *vq)
{
	if (vq->event_idx)
		virtq_store16(vq->used_event, (uint16_t)(vq->last_used - 1));
	else
		virtq_store16(&vq->avail->flags, VIRTQ_AVAIL_F_NO_INTERRUPT);
}

/* The device has completed chains we have not taken back (used->idx). */
bool virtq_used_pending(const struct virtq *vq)
{
	return virtq_load16(&vq->used->idx) != vq->last_used;
}

/* How many used entries are waiting (used->idx). */
uint16_t virtq_used_count(const struct virtq *vq)
{
	return (uint16_t)(virtq_load16(&vq->used->idx) - vq->last_used);
}

/* RING {...}: both sides' indices as they stand, for an ERROR dump. A
 * stalled queue reads as one of: published but never kicked (unkicked > 0),
 * kicked past the device's avail_event yet not taken (avail_event ==
 * pub: the device saw it all and holds it), or completions we have not
 * read (dev_used != last_used). */
void virtq_print_state(const struct virtq *vq, const char *name)
{
	printf("RING "
	       "{\"queue\":\"%s\",\"layout\":\"split\",\"avail\":%u,\"pub\":%u,\"kick_old\":%u,"
	       "\"unkicked\":%u,"
	       "\"last_used\":%u,\"dev_used\":%u,\"avail_event\":%u,\"used_event\":%u,"
	       "\"used_flags\":%u,\"avail_flags\":%u,\"free\":%u,\"broken\":%d}\n",
	       name, vq->avail_idx, vq->avail_pub, vq->kick_old, (unsigned)vq->unkicked,
	       vq->last_used, virtq_load16(&vq->used->idx),
	       vq->event_idx ? virtq_load16(vq->avail_event) : 0,
	       vq->event_idx ? virtq_load16(vq->used_event) : 0, virtq_load16(&vq->used->flags),
	       virtq_load16(&vq->avail->flags), vq->num_free, vq->broken);
}

void virtq_notify(struct virtq *vq)
{
	vq->stats.kicks++;
	vq->notify(vq->notify_ctx, vq->qidx, vq->avail_pub);
}

void virtq_doorbell_foreign(const struct virtq *vq)
{
	vq->notify(vq->notify_ctx, vq->qidx, __atomic_load_n(&vq->avail_pub, __ATOMIC_RELAXED));
}

/* A device fault: count it, say it in one line, stop touching the ring. */
static int virtq_fault(struct virtq *vq, enum virtq_fault f, uint16_t used_idx, uint32_t id,
                       uint32_t len)
{
	vq->stats.faults[f]++;
	vq->broken = true;
	vq->fault = f;
	printf("DEVICE_FAULT {\"queue\":%u,\"fault\":\"%s\",\"used_idx\":%u,\"last_used\":%u,"
	       "\"in_flight\":%u,\"id\":%lu,\"len\":%lu,\"posted_writable\":%lu}\n",
	       vq->qidx, virtq_fault_name(f), used_idx, vq->last_used, vq->chains,
	       (unsigned long)id, (unsigned long)len,
	       (unsigned long)(id < vq->size ? vq->write_len[id] : 0));
	return -VIRTQ_EDEVICE;
}

/*
 * Take one completed chain back (2.7.8, 2.7.14). Returns 1 with its token and
 * the bytes the device wrote, 0 if nothing completed, -VIRTQ_EDEVICE when the
 * device broke a rule (then and forever after: the entry is not consumed,
 * nothing is freed twice, no index outside the ring is used).
 */
int virtq_get_used(struct virtq *vq, void **token, uint32_t *len)
{
	uint16_t used_idx, pending, id16;
	uint32_t id, l;
	const struct virtq_used_elem *e;

	if (vq->broken)
		return -VIRTQ_EDEVICE;
	used_idx = virtq_load16(&vq->used->idx);
	pending = (uint16_t)(used_idx - vq->last_used);
	if (pending == 0)
		return 0;
	/* The device cannot complete more chains than we have published and
	 * not yet taken back; a larger step (or a step backwards, which looks
	 * huge) is corruption. */
	if (pending > virtq_chains_published(vq))
		return virtq_fault(vq, VIRTQ_FAULT_IDX_JUMP, used_idx, 0, 0);
	/* Barrier C (pairs with the device's write barrier between filling
	 * used ring entries and storing used->idx): read the entry only after
	 * the index that covers it. */
	arch_rmb();
	e = &vq->used->ring[vq->last_used & vq->mask];
	id = virtq_load32(&e->id);
	l = virtq_load32(&e->len);
	if (id >= vq->size)
		return virtq_fault(vq, VIRTQ_FAULT_ID_RANGE, used_idx, id, l);
	id16 = (uint16_t)id;
	if (vq->chain_len[id16] == 0)
		return virtq_fault(vq, VIRTQ_FAULT_NOT_IN_FLIGHT, used_idx, id, l);
	/* 2.7.13: a chain exists for the device only once avail->idx covers
	 * it; one it completes earlier was read ahead of the index. */
	if ((uint16_t)(vq->avail_pos[id16] - vq->avail_pub) <
	    (uint16_t)(vq->avail_idx - vq->avail_pub))
		return virtq_fault(vq, VIRTQ_FAULT_NOT_PUBLISHED, used_idx, id, l);
	if (vq->write_len[id16] == 0 && l) {
		/* Nothing writable (a TX chain), yet a length: devices set it
		 * loosely (Linux virtio_net ignores it). Count, don't fail. */
		vq->stats.len_readonly++;
		l = 0;
	} else if (l > vq->write_len[id16]) {
		return virtq_fault(vq, VIRTQ_FAULT_LEN, used_idx, id, l);
	}

	vq->last_used++;
	vq->next[vq->chain_tail[id16]] = vq->free_head;
	vq->free_head = id16;
	vq->num_free = (uint16_t)(vq->num_free + vq->chain_len[id16]);
	vq->chain_len[id16] = 0;
	vq->chains--;
	*token = vq->token[id16];
	*len = l;
	return 1;
}
