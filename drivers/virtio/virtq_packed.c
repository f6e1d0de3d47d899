/*
 * virtq_packed.c: packed virtqueue, driver side (virtio 1.2 section 2.8);
 * the RING=packed half of virtq.h, linked instead of virtq.c.
 *
 * One descriptor ring written by both sides (2.8): the driver makes a
 * descriptor available by writing its flags with AVAIL = its Driver Ring
 * Wrap Counter and USED = the inverse; the device marks a buffer used by
 * writing one descriptor (Buffer ID, length) with AVAIL = USED = its
 * Device Ring Wrap Counter at its next used position, then skips the rest
 * of that buffer's descriptors (2.8.6). Each side polls one place: the
 * device the next available descriptor, the driver the next used one
 * (2.8.2). Both counters start at 1 and toggle at the end of the ring
 * (2.8.1). Buffers complete in any order (no VIRTIO_F_IN_ORDER).
 *
 * The driver's view, all in private shadows (nothing published is read
 * back): descriptors [used_pos, pub_pos) are the device's, [pub_pos,
 * next_avail) hold chains added but not yet made available (their first
 * descriptor's flags are written only by virtq_publish()), the rest are
 * free. Buffer ids come from a free list of 0..size-1, one per chain;
 * chain_len[id] says how far to skip when id comes back used.
 *
 * Barriers, named by what they order (each pairs with one in the device):
 *   A  publish:      descriptor bodies (and later descriptors of a chain),
 *                    then the first descriptor's flags (2.8.21.1)
 *   B  kick_prepare: those flags stores, then the Device Area load (2.8.21.2)
 *   C  get_used:     the used descriptor's flags load, then its id / len loads
 *   D  enable_cb:    the Driver Area store, then the re-read of the used
 *                    position's flags
 * As in virtq.c, A and C only stop the compiler on x86-64 (arch_wmb /
 * arch_rmb); B and D are store-then-load and need arch_mb() (Linux
 * virtqueue_kick_prepare_packed(), virtqueue_enable_cb_prepare_packed()).
 */
#include <stdio.h>
#include "kernel/arch.h"
#include "drivers/virtio/virtq.h"

/* 2.8.1: the AVAIL/USED bits that make a descriptor available in the lap
 * whose Driver Ring Wrap Counter is wrap. */
static uint16_t virtq_avail_bits(bool wrap)
{
	return wrap ? VIRTQ_DESC_F_AVAIL : VIRTQ_DESC_F_USED;
}

/* 2.8.14: desc_event_off | desc_event_wrap << 15. */
static uint16_t virtq_off_wrap(uint16_t pos, bool wrap)
{
	return (uint16_t)(pos | (wrap ? VIRTQ_EVENT_WRAP : 0));
}

/* The Driver Area as one untorn store: flags and off_wrap together, so the
 * device never sees a new flag with a stale offset. */
static void virtq_driver_event(struct virtq *vq, uint16_t off_wrap, uint16_t flags)
{
	virtq_store32((uint32_t *)vq->driver_event, (uint32_t)off_wrap | (uint32_t)flags << 16);
}

int virtq_init(struct virtq *vq, uint16_t qidx, uint16_t size, bool event_idx, virtq_alloc_fn alloc,
               virtq_notify_fn notify, void *notify_ctx)
{
	uint16_t i;

	/* 2.8: up to 2^15 entries, any number (not only powers of two). */
	if (size == 0 || size > VIRTQ_MAX_SIZE)
		return -VIRTQ_EINVAL;
	*vq = (struct virtq){0};
	vq->packed = true;
	vq->size = size;
	vq->mask = 0; /* positions wrap at size, not by a mask */
	vq->qidx = qidx;
	vq->event_idx = event_idx;
	vq->notify = notify;
	vq->notify_ctx = notify_ctx;

	/* 2.8.10.1: alignment 16 / 4 / 4. The ring gets its own pages, each
	 * event structure its own cache line: the device writes one, we the
	 * other. "The descriptor ring is zero-initialized" (2.8.13): zero
	 * flags are neither available nor used in the first lap. */
	vq->pdesc = alloc(sizeof(struct virtq_pdesc) * size, 4096);
	vq->driver_event = alloc(sizeof(struct virtq_event), 64);
	vq->device_event = alloc(sizeof(struct virtq_event), 64);
	if (!vq->pdesc || !vq->driver_event || !vq->device_event)
		return -VIRTQ_EINVAL;
	vq->area_desc = (uintptr_t)vq->pdesc;
	vq->area_driver = (uintptr_t)vq->driver_event;
	vq->area_device = (uintptr_t)vq->device_event;

	/* 2.8.1: both wrap counters start at 1. */
	vq->avail_wrap = vq->pub_wrap = vq->used_wrap = true;
	/* Used-buffer notifications start suppressed, as in virtq.c: the poll
	 * policy never wants them, the halt policies ask with
	 * virtq_enable_cb(). DISABLE needs no EVENT_IDX (2.8.10). */
	virtq_driver_event(vq, 0, VIRTQ_EVENT_F_DISABLE);

	for (i = 0; i < size; i++)
		vq->next[i] = (uint16_t)(i + 1);
	vq->free_head = 0;
	vq->num_free = size;
	return 0;
}

/* A device fault: count it, say it in one line (the same shape as
 * virtq.c's; used_idx is the position | wrap << 15 of the descriptor that
 * showed it), stop touching the ring. */
static int virtq_fault(struct virtq *vq, enum virtq_fault f, uint16_t pos, bool wrap, uint32_t id,
                       uint32_t len)
{
	vq->stats.faults[f]++;
	vq->broken = true;
	vq->fault = f;
	printf("DEVICE_FAULT {\"queue\":%u,\"fault\":\"%s\",\"used_idx\":%u,\"last_used\":%u,"
	       "\"in_flight\":%u,\"id\":%lu,\"len\":%lu,\"posted_writable\":%lu,\"ring\":"
	       "\"packed\"}\n",
	       vq->qidx, virtq_fault_name(f), virtq_off_wrap(pos, wrap), vq->last_used, vq->chains,
	       (unsigned long)id, (unsigned long)len,
	       (unsigned long)(id < vq->size ? vq->write_len[id] : 0));
	return -VIRTQ_EDEVICE;
}

/*
 * Write one chain into the free descriptors at next_avail (2.8.21.1), all
 * but its first descriptor's flags: it exists for the device only after
 * virtq_publish(). Returns the buffer id, -VIRTQ_ENOSPC when fewer than n
 * descriptors are free (nothing changed), -VIRTQ_EINVAL for a malformed
 * request.
 */
int virtq_add(struct virtq *vq, const struct virtq_buf *bufs, unsigned n, void *token)
{
	uint16_t id, pos;
	uint32_t wlen = 0;
	bool wrap;
	unsigned i;
	int rc = virtq_add_check(vq, bufs, n);

	if (rc)
		return rc;

	/* A free descriptor still holds the previous lap (2.8.1: AVAIL is
	 * the other wrap counter's). One marked in this lap was written by
	 * the device beyond what we made available (a used descriptor too
	 * many: it moved past what is in flight); checked before anything
	 * changes. */
	pos = vq->next_avail;
	wrap = vq->avail_wrap;
	for (i = 0; i < n; i++) {
		struct virtq_pdesc *d = &vq->pdesc[pos];

		if (!!(virtq_load16(&d->flags) & VIRTQ_DESC_F_AVAIL) == wrap)
			return virtq_fault(vq, VIRTQ_FAULT_IDX_JUMP, pos, wrap,
			                   virtq_load16(&d->id), virtq_load32(&d->len));
		if (++pos == vq->size) {
			pos = 0;
			wrap = !wrap;
		}
	}

	id = vq->free_head;
	pos = vq->next_avail;
	wrap = vq->avail_wrap;
	vq->head_pos[id] = pos;
	for (i = 0; i < n; i++) {
		struct virtq_pdesc *d = &vq->pdesc[pos];
		uint16_t flags =
		    (uint16_t)((bufs[i].writable ? VIRTQ_DESC_F_WRITE : 0) |
		               (i + 1 < n ? VIRTQ_DESC_F_NEXT : 0) | virtq_avail_bits(wrap));

		d->addr = bufs[i].addr;
		d->len = bufs[i].len;
		/* 2.8.6: the device reads the Buffer ID from the last
		 * descriptor; every one carries it, so no stale id is left. */
		d->id = id;
		if (bufs[i].writable)
			wlen += bufs[i].len;
		/* 2.8.6: "all flags ... must be set/cleared correctly in all
		 * descriptors in the list"; the first one's wait for
		 * virtq_publish(), which exposes the whole chain. */
		if (i == 0)
			vq->head_flags[id] = flags;
		else
			virtq_store16(&d->flags, flags);
		/* 2.8.1: the wrap counter toggles after the last descriptor;
		 * descriptors of a chain that wraps carry the new lap's bits. */
		if (++pos == vq->size) {
			pos = 0;
			wrap = !wrap;
		}
	}
	vq->next_avail = pos;
	vq->avail_wrap = wrap;
	vq->free_head = vq->next[id];
	vq->num_free = (uint16_t)(vq->num_free - n);
	vq->chains++;
	vq->chain_len[id] = (uint16_t)n;
	vq->write_len[id] = wlen;
	vq->avail_pos[id] = vq->avail_idx;
	vq->token[id] = token;
	vq->order[vq->avail_idx & (VIRTQ_MAX_SIZE - 1)] = id;
	vq->avail_idx++;
	return id;
}

/* Make every chain added so far available, oldest first (2.8.21.1: "Set
 * d.flags to the calculated flags value", the first descriptor last). */
void virtq_publish(struct virtq *vq)
{
	uint16_t c;

	if (vq->avail_idx == vq->avail_pub)
		return;
	/* Barrier A (pairs with the device's read barrier after it sees a
	 * descriptor's AVAIL bit change): every descriptor body and the later
	 * descriptors' flags must be visible before the first one's flags
	 * expose them. */
	arch_wmb();
	for (c = vq->avail_pub; c != vq->avail_idx; c++) {
		uint16_t id = vq->order[c & (VIRTQ_MAX_SIZE - 1)];

		virtq_store16(&vq->pdesc[vq->head_pos[id]].flags, vq->head_flags[id]);
		vq->unkicked_desc += vq->chain_len[id];
	}
	vq->unkicked += (uint16_t)(vq->avail_idx - vq->avail_pub);
	vq->avail_pub = vq->avail_idx;
	vq->pub_pos = vq->next_avail;
	vq->pub_wrap = vq->avail_wrap;
}

/*
 * Decide whether what was made available since the previous decision needs
 * a notification (2.8.21.2, 2.8.10). The device says so in the Device Area:
 * ENABLE (always), DISABLE (never), or with EVENT_IDX, DESC: only once the
 * descriptor at (off, wrap) has been made available.
 */
/* The device's answer (its Device Area) to what was made available since
 * the previous decision. */
static bool virtq_kick_needed(const struct virtq *vq)
{
	uint16_t new_pos = vq->pub_pos, old_pos, event, flags;
	uint32_t ev =
	    virtq_load32((const uint32_t *)vq->device_event); /* off_wrap and flags, untorn */
	bool need;

	flags = (uint16_t)((ev >> 16) & 3);
	if (vq->unkicked_desc >= vq->size) {
		need = true; /* a whole lap undecided: the window aliases, always ask */
	} else if (flags == VIRTQ_EVENT_F_DESC && vq->event_idx) {
		/* Positions relative to the start of pub_pos's lap: the window
		 * [old, new) may begin in the previous lap (old "negative"),
		 * and an event whose wrap counter is not this lap's lies in the
		 * previous lap too (its offset minus the ring size). */
		old_pos = (uint16_t)(new_pos - vq->unkicked_desc);
		event = (uint16_t)(ev & 0x7fff);
		if (!!(ev & VIRTQ_EVENT_WRAP) != vq->pub_wrap)
			event = (uint16_t)(event - vq->size);
		need = virtq_need_event(event, new_pos, old_pos);
	} else {
		/* ENABLE, or DESC without EVENT_IDX (not valid: ask anyway);
		 * the reserved value 3 counts as enabled too. */
		need = flags != VIRTQ_EVENT_F_DISABLE;
	}
	return need;
}

bool virtq_kick_prepare(struct virtq *vq)
{
	bool need;

	if (vq->unkicked == 0)
		return false;
	/* Barrier B (pairs with the device's full barrier between writing
	 * the Device Area and re-reading the next available descriptor): our
	 * flags stores must be visible before we read its answer, or both
	 * sides see stale values and the device sleeps on work (2.8.21.2:
	 * "a suitable memory barrier before reading the Event Suppression
	 * structure"). */
	arch_mb();
	need = virtq_kick_needed(vq);
	/* Under an emulator whose fences do not reach the host, a register
	 * read before a suppression (virtq.c, virtq_kick_prepare(): a
	 * suppression read from a stale Device Area would be final). */
	if (!need && vq->sync) {
		vq->stats.kick_syncs++;
		vq->sync(vq->sync_ctx);
		need = virtq_kick_needed(vq);

		if (need)
			vq->stats.kick_rescues++;
	}
	vq->unkicked = 0;
	vq->unkicked_desc = 0;
	if (!need)
		vq->stats.kicks_suppressed++;
	return need;
}

void virtq_print_state(const struct virtq *vq, const char *name)
{
	printf("RING {\"queue\":\"%s\",\"layout\":\"packed\",\"next_avail\":%u,\"avail_wrap\":%d,"
	       "\"pub_pos\":%u,\"pub_wrap\":%d,\"used_pos\":%u,\"used_wrap\":%d,"
	       "\"used_pos_flags\":%u,\"driver_event\":%lu,\"device_event\":%lu,\"unkicked\":%lu,"
	       "\"free\":%u,\"chains\":%u,\"broken\":%d}\n",
	       name, vq->next_avail, vq->avail_wrap, vq->pub_pos, vq->pub_wrap, vq->used_pos,
	       vq->used_wrap, virtq_load16(&vq->pdesc[vq->used_pos].flags),
	       (unsigned long)virtq_load32((const uint32_t *)vq->driver_event),
	       (unsigned long)virtq_load32((const uint32_t *)vq->device_event),
	       (unsigned long)vq->unkicked, vq->num_free, vq->chains, vq->broken);
}

/* 2.8.16: "When notifying the device, driver MUST set next_off and
 * next_wrap to match the next descriptor not yet made available". */
void virtq_notify(struct virtq *vq)
{
	vq->stats.kicks++;
	vq->notify(vq->notify_ctx, vq->qidx, virtq_off_wrap(vq->pub_pos, vq->pub_wrap));
}

void virtq_doorbell_foreign(const struct virtq *vq)
{
	vq->notify(vq->notify_ctx, vq->qidx,
	           virtq_off_wrap(__atomic_load_n(&vq->pub_pos, __ATOMIC_RELAXED),
	                          __atomic_load_n(&vq->pub_wrap, __ATOMIC_RELAXED)));
}

/* What the descriptor at the used position says (2.8.1): */
enum virtq_slot {
	VIRTQ_SLOT_WAIT, /* not used yet (ours, available; or nothing in flight) */
	VIRTQ_SLOT_USED, /* AVAIL == USED == the used wrap counter */
	VIRTQ_SLOT_BAD,  /* neither, while published chains are in flight */
};

static enum virtq_slot virtq_slot(const struct virtq *vq, uint16_t flags)
{
	bool avail = flags & VIRTQ_DESC_F_AVAIL, used = flags & VIRTQ_DESC_F_USED;

	if (avail == vq->used_wrap && used == vq->used_wrap)
		return VIRTQ_SLOT_USED;
	if (avail == vq->used_wrap)
		return VIRTQ_SLOT_WAIT; /* USED != AVAIL: our available descriptor */
	/* AVAIL is the previous lap's bit. With nothing published in flight
	 * the slot still holds the previous lap (or the zeroed ring): wait.
	 * With published chains in flight, every descriptor from used_pos to
	 * pub_pos was made available in this lap, so the device wrote these
	 * flags with the wrong wrap counter (or scribbled). */
	return virtq_chains_published(vq) ? VIRTQ_SLOT_BAD : VIRTQ_SLOT_WAIT;
}

bool virtq_used_pending(const struct virtq *vq)
{
	return virtq_slot(vq, virtq_load16(&vq->pdesc[vq->used_pos].flags)) != VIRTQ_SLOT_WAIT;
}

/*
 * Ask for an interrupt on the next used buffer (2.8.10), then look again:
 * true means completions are already waiting and the caller must not wait
 * (Linux virtqueue_enable_cb()). With EVENT_IDX: DESC at the next used
 * position, so the device interrupts once it writes it; otherwise ENABLE.
 */
bool virtq_enable_cb(struct virtq *vq)
{
	return virtq_enable_cb_after(vq, 1);
}

/*
 * How many used buffers are waiting: walk them from the used position,
 * each used descriptor standing for its whole chain (2.8.7: the device
 * skips the chain's length). Stops at the first descriptor not used in
 * this lap or not naming a buffer in flight (virtq_get_used() reports
 * that one); bounded by the chains in flight.
 */
uint16_t virtq_used_count(const struct virtq *vq)
{
	uint16_t pos = vq->used_pos, n = 0;
	bool wrap = vq->used_wrap;

	while (n < vq->chains) {
		uint16_t flags = virtq_load16(&vq->pdesc[pos].flags), id;

		if (!(flags & VIRTQ_DESC_F_AVAIL) != !wrap || !(flags & VIRTQ_DESC_F_USED) != !wrap)
			break;
		/* Barrier C, as in virtq_get_used(): the id after the flags. */
		arch_rmb();
		id = virtq_load16(&vq->pdesc[pos].id);
		if (id >= vq->size || vq->chain_len[id] == 0)
			break;
		n++;
		pos = (uint16_t)(pos + vq->chain_len[id]);
		if (pos >= vq->size) {
			pos = (uint16_t)(pos - vq->size);
			wrap = !wrap;
		}
	}
	return n;
}

/*
 * The same, but with EVENT_IDX the interrupt comes once the device's used
 * position passes used_pos + k - 1 (a DESC event k - 1 descriptors on,
 * 2.8.10): every used buffer advances it by at least one descriptor, so
 * that is at or before the k-th completion, never after it (an early
 * interrupt only makes the caller look again). True when k are already
 * waiting. Without EVENT_IDX (ENABLE) k is taken as 1.
 */
bool virtq_enable_cb_after(struct virtq *vq, uint16_t k)
{
	vq->stats.cb_enables++;
	if (!vq->event_idx || k == 0)
		k = 1;
	if (k > vq->size)
		k = vq->size;
	if (vq->event_idx) {
		uint32_t pos = vq->used_pos + (uint32_t)k - 1u;
		bool wrap = vq->used_wrap;

		if (pos >= vq->size) {
			pos -= vq->size;
			wrap = !wrap;
		}
		virtq_driver_event(vq, virtq_off_wrap((uint16_t)pos, wrap), VIRTQ_EVENT_F_DESC);
	} else {
		virtq_driver_event(vq, 0, VIRTQ_EVENT_F_ENABLE);
	}
	/* Barrier D (pairs with the device's full barrier between marking a
	 * descriptor used and reading the Driver Area): our request must be
	 * visible before we re-read the used position, or the device marks
	 * a buffer used in between, reads the stale DISABLE, stays silent,
	 * and we halt on a completion nobody announces (a lost wake-up).
	 * Under an emulator whose fences do not reach the host (virtq.c,
	 * virtq_enable_cb_after()), a device register read does. */
	arch_mb();
	if (vq->sync) {
		vq->stats.syncs++;
		vq->sync(vq->sync_ctx);
	}
	if (k == 1)
		return virtq_used_pending(vq);
	/* A descriptor virtq_used_count() stopped at without counting it is
	 * a fault for virtq_get_used() to report: do not wait either. */
	uint16_t n = virtq_used_count(vq);
	return n >= k || (n == 0 && virtq_used_pending(vq));
}

/* Where the CPU's fences may not order ring memory against the device,
 * give the ring a register read to make (as in virtq.c). */
void virtq_set_sync(struct virtq *vq, virtq_sync_fn fn, void *ctx)
{
	vq->sync = fn;
	vq->sync_ctx = ctx;
}

/* Back to polling: DISABLE is honoured with or without EVENT_IDX. */
void virtq_disable_cb(struct virtq *vq)
{
	virtq_driver_event(vq, 0, VIRTQ_EVENT_F_DISABLE);
}

/*
 * Take one used buffer back (2.8.22). Returns 1 with its token and the
 * bytes the device wrote, 0 if nothing is used yet, -VIRTQ_EDEVICE when the
 * device broke a rule (then and forever after: nothing is consumed or freed
 * twice, no position outside the ring is used).
 */
int virtq_get_used(struct virtq *vq, void **token, uint32_t *len)
{
	struct virtq_pdesc *d;
	enum virtq_slot slot;
	uint16_t id, n;
	uint32_t l;

	if (vq->broken)
		return -VIRTQ_EDEVICE;
	d = &vq->pdesc[vq->used_pos];
	slot = virtq_slot(vq, virtq_load16(&d->flags));
	if (slot == VIRTQ_SLOT_WAIT)
		return 0;
	if (slot == VIRTQ_SLOT_BAD)
		return virtq_fault(vq, VIRTQ_FAULT_WRAP, vq->used_pos, vq->used_wrap,
		                   virtq_load16(&d->id), virtq_load32(&d->len));
	/* Barrier C (pairs with the device's write barrier between writing a
	 * used descriptor's id / len and its flags): read them only after
	 * the flags that say they are there. */
	arch_rmb();
	id = virtq_load16(&d->id);
	l = virtq_load32(&d->len);
	if (id >= vq->size)
		return virtq_fault(vq, VIRTQ_FAULT_ID_RANGE, vq->used_pos, vq->used_wrap, id, l);
	/* Not a buffer we have in flight: never posted, or already used
	 * once (a descriptor marked used twice). */
	if (vq->chain_len[id] == 0)
		return virtq_fault(vq, VIRTQ_FAULT_NOT_IN_FLIGHT, vq->used_pos, vq->used_wrap, id,
		                   l);
	/* A chain exists for the device only once its first descriptor's
	 * flags are written; one it uses earlier was read ahead of them. */
	if ((uint16_t)(vq->avail_pos[id] - vq->avail_pub) <
	    (uint16_t)(vq->avail_idx - vq->avail_pub))
		return virtq_fault(vq, VIRTQ_FAULT_NOT_PUBLISHED, vq->used_pos, vq->used_wrap, id,
		                   l);
	/* 2.8.4: the length is reserved without WRITE; devices set it
	 * loosely on chains with nothing writable (TX): counted, ignored. */
	if (vq->write_len[id] == 0 && l) {
		vq->stats.len_readonly++;
		l = 0;
	} else if (l > vq->write_len[id]) {
		return virtq_fault(vq, VIRTQ_FAULT_LEN, vq->used_pos, vq->used_wrap, id, l);
	}

	/* 2.8.6: skip the rest of this buffer's descriptors; the device
	 * writes its next used descriptor there. */
	n = vq->chain_len[id];
	vq->used_pos = (uint16_t)(vq->used_pos + n);
	if (vq->used_pos >= vq->size) {
		vq->used_pos = (uint16_t)(vq->used_pos - vq->size);
		vq->used_wrap = !vq->used_wrap;
	}
	vq->last_used++;
	vq->next[id] = vq->free_head;
	vq->free_head = id;
	vq->num_free = (uint16_t)(vq->num_free + n);
	vq->chain_len[id] = 0;
	vq->chains--;
	*token = vq->token[id];
	*len = l;
	return 1;
}
