/*
 * virtq.h: one virtqueue, driver side, in either layout: split (virtio 1.2
 * section 2.7, virtq.c) or packed (2.8, virtq_packed.c). A build links
 * exactly one of the two files (RING=split|packed, chosen in the Makefile);
 * both implement this whole API with the same meaning, so the net driver
 * is the same code on both. Policy-free: the caller decides when to
 * publish, when to ask whether a kick is needed and when to reclaim.
 * Builds for the guest and for the host unit tests; its only links to the
 * outside are the two function pointers given to virtq_init() (memory,
 * notify). The device is not trusted: every used entry is checked before
 * it is believed.
 */
#ifndef VNETLAB_VIRTQ_H
#define VNETLAB_VIRTQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "drivers/virtio/virtio.h"
#include "drivers/virtio/vnet_policy.h" /* VIRTQ_MAX_SIZE */

enum {
	VIRTQ_ENOSPC = 1,  /* not enough free descriptors: back-pressure */
	VIRTQ_EINVAL = 2,  /* malformed request from the caller */
	VIRTQ_EDEVICE = 3, /* the device broke the ring rules; the queue is dead */
};

enum virtq_fault {
	VIRTQ_FAULT_ID_RANGE,      /* used id >= queue size */
	VIRTQ_FAULT_NOT_IN_FLIGHT, /* used id is not the head of a chain we posted */
	VIRTQ_FAULT_LEN,           /* used len > device-writable bytes posted */
	VIRTQ_FAULT_IDX_JUMP,      /* used idx advanced past what is published and in flight */
	VIRTQ_FAULT_NOT_PUBLISHED, /* used id heads a chain added but not yet published */
	VIRTQ_FAULT_WRAP,          /* packed: the descriptor at the used position carries
	                              flags of neither this lap's available nor its used form */
	VIRTQ_FAULT_KINDS
};

struct virtq_buf {
	uint64_t addr; /* guest physical == virtual (identity map; host tests: pointers) */
	uint32_t len;
	bool writable; /* device writes it; all writable buffers come last (2.7.4.2) */
};

struct virtq_stats {
	uint64_t kicks;            /* virtq_notify() calls */
	uint64_t kicks_suppressed; /* virtq_kick_prepare() said no */
	uint64_t faults[VIRTQ_FAULT_KINDS];
	uint64_t len_readonly; /* used len > 0 on a chain with nothing writable: ignored */
	uint64_t cb_enables;   /* virtq_enable_cb() calls (halt policies re-arming) */
	uint64_t syncs;        /* device register reads made by virtq_enable_cb_after() */
	uint64_t kick_syncs;   /* ... by virtq_kick_prepare() before trusting a "no" */
	uint64_t kick_rescues; /* ... after which the device did ask for the kick */
};

/* Notify the device that queue qidx has new buffers up to avail_idx (the
 * transport's doorbell; avail_idx is for VIRTIO_F_NOTIFICATION_DATA). */
typedef void (*virtq_notify_fn)(void *ctx, uint16_t qidx, uint16_t avail_idx);
/* A device register read with no side effect, made between the driver's
 * re-arm store and its re-read of used->idx (virtq_enable_cb_after() says
 * why), and between its publish and the re-read of the device's answer
 * before it suppresses a kick (virtq_kick_prepare()). Only where the CPU's
 * fences may not reach the device. */
typedef void (*virtq_sync_fn)(void *ctx);
/* Zeroed memory, physical address == pointer. pmm_alloc() in the guest. */
typedef void *(*virtq_alloc_fn)(size_t size, size_t align);

struct virtq {
	/* Split layout, shared with the device (2.7: three separately
	 * allocated parts). NULL in a packed queue. */
	struct virtq_desc *desc;
	struct virtq_avail *avail;
	struct virtq_used *used;
	uint16_t *used_event;  /* driver-written, after avail->ring[size] */
	uint16_t *avail_event; /* device-written, after used->ring[size] */

	/* Packed layout (2.8), shared with the device. NULL in a split queue. */
	struct virtq_pdesc *pdesc;
	struct virtq_event *driver_event; /* Driver Area: driver-written */
	struct virtq_event *device_event; /* Device Area: device-written */

	/* What the transport writes to queue_desc / queue_driver /
	 * queue_device (4.1.4.3), whichever the layout. */
	uintptr_t area_desc, area_driver, area_device;

	bool packed; /* set by virtq_init(): which file this build linked */
	uint16_t size, mask, qidx;
	bool event_idx;         /* VIRTIO_F_EVENT_IDX negotiated */
	bool broken;            /* a device fault was seen: no further ring access */
	enum virtq_fault fault; /* which one, once broken */

	/* Private shadows: nothing we published is ever read back. */
	uint16_t avail_idx; /* next avail ring slot we fill */
	uint16_t avail_pub; /* value last stored to avail->idx */
	uint16_t kick_old;  /* avail_pub at the last kick decision ("old") */
	uint32_t unkicked;  /* entries published since that decision */
	uint16_t
	    last_used; /* next used ring entry to read (packed: used entries taken, mod 2^16) */
	uint16_t free_head, num_free, chains;

	/* Packed ring positions and 2.8.1 wrap counters (private shadows). */
	uint16_t next_avail; /* next descriptor we fill ... */
	bool avail_wrap;     /* ... and the Driver Ring Wrap Counter there */
	uint16_t pub_pos;    /* first descriptor not yet made available */
	bool pub_wrap;
	uint16_t used_pos; /* where the device writes its next used descriptor */
	bool used_wrap;
	uint32_t unkicked_desc; /* descriptors made available since the kick decision */

	/* Per descriptor, valid while it heads a chain in flight. */
	uint16_t next[VIRTQ_MAX_SIZE];       /* free list / chain links (desc.next is write-only) */
	uint16_t chain_len[VIRTQ_MAX_SIZE];  /* 0 = not a head in flight */
	uint16_t chain_tail[VIRTQ_MAX_SIZE]; /* last descriptor of the chain */
	uint32_t write_len[VIRTQ_MAX_SIZE];  /* device-writable bytes posted */
	uint16_t
	    avail_pos[VIRTQ_MAX_SIZE]; /* avail ring index it was added at (packed: chain number) */
	void *token[VIRTQ_MAX_SIZE];
	/* Packed, per buffer id: its first descriptor and the flags that make
	 * it available, stored only at virtq_publish() (2.8.6: first last). */
	uint16_t head_pos[VIRTQ_MAX_SIZE];
	uint16_t head_flags[VIRTQ_MAX_SIZE];
	uint16_t order[VIRTQ_MAX_SIZE]; /* buffer id by chain number (mod VIRTQ_MAX_SIZE) */

	virtq_notify_fn notify;
	void *notify_ctx;
	virtq_sync_fn sync; /* NULL: arch_mb() alone orders the re-arm (virtq_set_sync()) */
	void *sync_ctx;
	struct virtq_stats stats;
};

/* virtq.c (split) or virtq_packed.c (packed): one of them per build */
int virtq_init(struct virtq *vq, uint16_t qidx, uint16_t size, bool event_idx, virtq_alloc_fn alloc,
               virtq_notify_fn notify, void *notify_ctx);
int virtq_add(struct virtq *vq, const struct virtq_buf *bufs, unsigned n, void *token);
void virtq_publish(struct virtq *vq);
bool virtq_kick_prepare(struct virtq *vq);
void virtq_notify(struct virtq *vq);
/* Ring the doorbell of a queue another CPU owns (vnet_rss.c), counting
 * nothing and changing nothing of the owner's. Without
 * VIRTIO_F_NOTIFICATION_DATA (which the caller must exclude) only the queue
 * index reaches the device; the position virtq_notify() would send rides
 * along, read as it stands (the transports' doorbell takes one). */
void virtq_doorbell_foreign(const struct virtq *vq);
bool virtq_enable_cb(struct virtq *vq); /* true: completions already waiting, do not wait */
bool virtq_enable_cb_after(struct virtq *vq, uint16_t k);
void virtq_set_sync(struct virtq *vq, virtq_sync_fn fn, void *ctx);
void virtq_disable_cb(struct virtq *vq);
int virtq_get_used(struct virtq *vq, void **token, uint32_t *len);
/* The device has completed chains we have not taken back, or broke a rule
 * that virtq_get_used() will report (reads shared memory). */
bool virtq_used_pending(const struct virtq *vq);
/* How many used buffers are waiting (reads shared memory). */
uint16_t virtq_used_count(const struct virtq *vq);
/* One RING {...} line: where driver and device stand on this ring (reads
 * shared memory; the first question about any stall). */
void virtq_print_state(const struct virtq *vq, const char *name);

/* 2.7.10 (split) and 2.8.10 (packed, on ring positions): the other side
 * wants a notification when its event index lies in [old, new) of the
 * entries just made available or used; computed modulo 2^16. */
static inline bool virtq_need_event(uint16_t event, uint16_t new_idx, uint16_t old_idx)
{
	return (uint16_t)(new_idx - event - 1) < (uint16_t)(new_idx - old_idx);
}

/* For the two ring files: one untorn access to shared ring memory that
 * the compiler may not merge, repeat or drop (Linux READ_ONCE/WRITE_ONCE).
 * Ordering comes only from each file's labelled barriers. */
static inline uint16_t virtq_load16(const uint16_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}
static inline uint32_t virtq_load32(const uint32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}
static inline void virtq_store16(uint16_t *p, uint16_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELAXED);
}
static inline void virtq_store32(uint32_t *p, uint32_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELAXED);
}

/* virtq_add()'s refusals, the same in both layouts: a dead queue; a
 * malformed request (no buffers, more than the ring holds, a zero length,
 * a device-readable buffer after a device-writable one: 2.7.4.2, 2.8.17);
 * then fewer free descriptors than buffers. 0: the chain may be added. */
static inline int virtq_add_check(const struct virtq *vq, const struct virtq_buf *bufs, unsigned n)
{
	if (vq->broken)
		return -VIRTQ_EDEVICE;
	if (n == 0 || n > vq->size)
		return -VIRTQ_EINVAL;
	for (unsigned i = 0; i < n; i++) {
		if (bufs[i].len == 0)
			return -VIRTQ_EINVAL;
		if (i > 0 && bufs[i - 1].writable && !bufs[i].writable)
			return -VIRTQ_EINVAL;
	}
	if (n > vq->num_free)
		return -VIRTQ_ENOSPC;
	return 0;
}

static inline const char *virtq_fault_name(enum virtq_fault f)
{
	static const char *const names[VIRTQ_FAULT_KINDS] = {
	    [VIRTQ_FAULT_ID_RANGE] = "used_id_out_of_range",
	    [VIRTQ_FAULT_NOT_IN_FLIGHT] = "used_id_not_in_flight",
	    [VIRTQ_FAULT_LEN] = "used_len_beyond_buffer",
	    [VIRTQ_FAULT_IDX_JUMP] = "used_idx_jump",
	    [VIRTQ_FAULT_NOT_PUBLISHED] = "used_id_not_published",
	    [VIRTQ_FAULT_WRAP] = "used_wrap_counter",
	};
	return (unsigned)f < VIRTQ_FAULT_KINDS ? names[f] : "unknown";
}

static inline uint64_t virtq_faults(const struct virtq *vq)
{
	uint64_t n = 0;
	for (int i = 0; i < VIRTQ_FAULT_KINDS; i++)
		n += vq->stats.faults[i];
	return n;
}

static inline uint16_t virtq_num_free(const struct virtq *vq)
{
	return vq->num_free;
}
static inline uint16_t virtq_chains_in_flight(const struct virtq *vq)
{
	return vq->chains;
}
/* Chains the device may complete: in flight and published. */
static inline uint16_t virtq_chains_published(const struct virtq *vq)
{
	return (uint16_t)(vq->chains - (uint16_t)(vq->avail_idx - vq->avail_pub));
}
/* Added with virtq_add() but not yet made visible with virtq_publish(). */
static inline bool virtq_unpublished(const struct virtq *vq)
{
	return vq->avail_idx != vq->avail_pub;
}
/* Published but not yet through virtq_kick_prepare(): a kick may be owed. */
static inline bool virtq_kick_pending(const struct virtq *vq)
{
	return vq->unkicked != 0;
}

#endif
