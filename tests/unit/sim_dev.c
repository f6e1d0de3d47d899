/*
 * sim_dev.c: the device side of a split or packed virtqueue, for the host
 * unit tests (see sim_dev.h for the model). Single-threaded: the "device" runs only
 * when a doorbell (SIM_SYNC) or the test (sim_run) makes it, so every run is
 * deterministic. It trusts nothing the driver wrote and records rule breaks
 * in sim.driver_errors.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "tests/unit/sim_dev.h"

struct sim_dev sim;

void sim_driver_error(const char *fmt, ...)
{
	va_list ap;

	sim.driver_errors++;
	va_start(ap, fmt);
	vsnprintf(sim.last_error, sizeof(sim.last_error), fmt, ap);
	va_end(ap);
	printf("SIM: driver broke a rule: %s\n", sim.last_error);
}

void sim_reset(uint64_t offered)
{
	memset(&sim, 0, sizeof(sim));
	sim.offered = offered;
	sim.num_queues = 2;
	sim.max_qsize = 256;
	sim.mode = SIM_SYNC;
	sim.rx_hdr.num_buffers = 1;
	sim.mq_pairs = 1;
	for (int i = 0; i < SIM_QUEUES; i++)
		sim.q[i].rng = 12345u + (uint32_t)i;
}

void sim_net_reset(uint64_t offered, uint16_t mtu)
{
	static const uint8_t mac[6] = {0x52, 0x54, 0x00, 0x12, 0x34, 0x56};

	sim_reset(offered);
	memcpy(sim.cfg + VIRTIO_NET_CFG_MAC, mac, 6);
	sim.cfg[VIRTIO_NET_CFG_STATUS] = VIRTIO_NET_S_LINK_UP;
	sim.cfg[VIRTIO_NET_CFG_MTU] = mtu & 0xff;
	sim.cfg[VIRTIO_NET_CFG_MTU + 1] = mtu >> 8;
}

void sim_net_mq_reset(uint64_t offered, uint16_t mtu, uint16_t pairs)
{
	sim_net_reset(offered | VIRTIO_BIT(VIRTIO_NET_F_MQ) | VIRTIO_BIT(VIRTIO_NET_F_CTRL_VQ),
	              mtu);
	if (pairs < 1 || pairs > SIM_MAX_PAIRS)
		pairs = SIM_MAX_PAIRS;
	/* 5.1.4: max_virtqueue_pairs, le16 */
	sim.cfg[VIRTIO_NET_CFG_MAX_VQ_PAIRS] = pairs & 0xff;
	sim.cfg[VIRTIO_NET_CFG_MAX_VQ_PAIRS + 1] = pairs >> 8;
	sim.num_queues = (uint16_t)(2 * pairs + 1);
	sim.ctrl_qidx = (uint16_t)(2 * pairs); /* 5.1.2 */
}

void sim_net_rss_offer(uint8_t key_max, uint16_t table_max, uint32_t hash_types)
{
	sim.offered |= VIRTIO_BIT(VIRTIO_NET_F_RSS);
	sim.cfg[VIRTIO_NET_CFG_RSS_MAX_KEY] = key_max;
	memcpy(&sim.cfg[VIRTIO_NET_CFG_RSS_MAX_TABLE], &table_max, 2);   /* le16 */
	memcpy(&sim.cfg[VIRTIO_NET_CFG_RSS_HASH_TYPES], &hash_types, 4); /* le32 */
}

/* Is qidx a receiveq (5.1.2: the even indices below the control queue)? */
static bool sim_is_rxq(uint16_t qidx)
{
	return qidx % 2 == 0 && !(sim.ctrl_qidx && qidx == sim.ctrl_qidx);
}

/* What the device sees of the driver's notification request (weak_order:
 * as of the driver's last register access). */
static uint16_t sim_used_event(const struct sim_queue *q)
{
	return q->weak_order ? q->seen_used_event : q->avail->ring[q->size];
}

static uint16_t sim_avail_flags(const struct sim_queue *q)
{
	return q->weak_order ? q->seen_avail_flags : q->avail->flags;
}

/* A register access is serialised with the device: what the driver stored
 * before it is what the device sees from now on. */
static void sim_see_driver_stores(struct sim_queue *q)
{
	if (!q->avail)
		return;
	q->seen_used_event = q->avail->ring[q->size];
	q->seen_avail_flags = q->avail->flags;
	q->seen_avail_idx = q->avail->idx;
}

void sim_register_access(void)
{
	for (int i = 0; i < SIM_QUEUES; i++)
		sim_see_driver_stores(&sim.q[i]);
}

void sim_attach(struct sim_queue *q, const struct virtq *vq, uint16_t qidx)
{
	memset(q, 0, sizeof(*q));
	q->desc = vq->desc;
	q->avail = vq->avail;
	q->used = vq->used;
	q->size = vq->size;
	q->qidx = qidx;
	q->event_idx = vq->event_idx;
	q->ready = true;
	q->rng = 777u + qidx;
	q->packed = vq->packed;
	q->pdesc = vq->pdesc;
	q->driver_event = vq->driver_event;
	q->device_event = vq->device_event;
	/* 2.8.1: the Device Ring Wrap Counter starts at 1. */
	q->avail_wrap = q->used_wrap = q->irq_wrap = true;
	sim_see_driver_stores(q);
}

/* ---- packed ring helpers (2.8) ---- */

static uint16_t sim_pflags(const struct sim_queue *q, uint16_t pos)
{
	/* The device's read barrier after it sees a flag change (pairs with
	 * the driver's barrier A). */
	return __atomic_load_n(&q->pdesc[pos].flags, __ATOMIC_ACQUIRE);
}

/* 2.8.1: available in the lap whose wrap counter is wrap. */
static bool sim_pavail(const struct sim_queue *q, uint16_t pos, bool wrap)
{
	uint16_t f = sim_pflags(q, pos);

	return !!(f & VIRTQ_DESC_F_AVAIL) == wrap && !!(f & VIRTQ_DESC_F_USED) != wrap;
}

static void sim_padvance(const struct sim_queue *q, uint16_t *pos, bool *wrap, unsigned n)
{
	unsigned p = *pos + n;

	while (p >= q->size) {
		p -= q->size;
		*wrap = !*wrap;
	}
	*pos = (uint16_t)p;
}

static uint16_t sim_off_wrap(uint16_t pos, bool wrap)
{
	return (uint16_t)(pos | (wrap ? VIRTQ_EVENT_WRAP : 0));
}

/* What the driver has made available ahead of the device: whole chains
 * (returned) and their descriptors, up to the first descriptor that is not
 * available (its position in *end_pos / *end_wrap). */
static unsigned sim_pscan(const struct sim_queue *q, unsigned *descs, uint16_t *end_pos,
                          bool *end_wrap)
{
	uint16_t pos = q->avail_pos;
	bool wrap = q->avail_wrap;
	unsigned chains = 0, n = 0;

	while (n < q->size && sim_pavail(q, pos, wrap)) {
		for (;;) {
			uint16_t f = sim_pflags(q, pos);

			sim_padvance(q, &pos, &wrap, 1);
			n++;
			if (!(f & VIRTQ_DESC_F_NEXT) || n >= q->size)
				break;
		}
		chains++;
	}
	if (descs)
		*descs = n;
	if (end_pos)
		*end_pos = pos;
	if (end_wrap)
		*end_wrap = wrap;
	return chains;
}

static uint16_t *sim_avail_event(const struct sim_queue *q)
{
	return (uint16_t *)&q->used->ring[q->size];
}

uint16_t sim_published(const struct sim_queue *q)
{
	if (q->packed)
		return (uint16_t)(q->last_avail + sim_pscan(q, NULL, NULL, NULL));
	return __atomic_load_n(&q->avail->idx, __ATOMIC_ACQUIRE);
}

static uint32_t sim_rand(struct sim_queue *q)
{
	q->rng = q->rng * 1103515245u + 12345u;
	return q->rng >> 8;
}

/* Descriptor n, the latest of chain c, in either layout: its length, a
 * writable part, or readable bytes copied into frame (all writable ones
 * last, 2.7.4.2 / 2.8.17). */
static void sim_chain_desc(struct sim_queue *q, struct sim_chain *c, uint16_t n, uint64_t addr,
                           uint32_t len, bool write, bool *seen_write, uint8_t *frame,
                           uint32_t *frame_len)
{
	if (len == 0)
		sim_driver_error("q%u: zero-length descriptor %u", q->qidx, n);
	if (c->ndesc == 1)
		c->first_len = len;
	if (write) {
		*seen_write = true;
		c->writable += len;
		if (c->nw < SIM_WBUF_MAX) {
			c->w[c->nw].addr = addr;
			c->w[c->nw].len = len;
			c->nw++;
		}
		return;
	}
	if (*seen_write)
		sim_driver_error("q%u: readable descriptor after writable", q->qidx);
	if (*frame_len + len <= SIM_FRAME_MAX)
		memcpy(frame + *frame_len, (const void *)(uintptr_t)addr, len);
	*frame_len += len;
	c->readable += len;
}

/* Walk one chain from its head, checking what 2.7.4.2 / 2.7.5 require. */
static bool sim_walk(struct sim_queue *q, uint16_t head, struct sim_chain *c, uint8_t *frame,
                     uint32_t *frame_len)
{
	uint16_t id = head;
	bool seen_write = false;

	memset(c, 0, sizeof(*c));
	c->head = head;
	*frame_len = 0;
	for (;;) {
		const struct virtq_desc *d;

		if (id >= q->size) {
			sim_driver_error("q%u: descriptor id %u out of range", q->qidx, id);
			return false;
		}
		if (++c->ndesc > q->size) {
			sim_driver_error("q%u: descriptor chain loops", q->qidx);
			return false;
		}
		d = &q->desc[id];
		sim_chain_desc(q, c, id, d->addr, d->len, d->flags & VIRTQ_DESC_F_WRITE,
		               &seen_write, frame, frame_len);
		if (!(d->flags & VIRTQ_DESC_F_NEXT))
			return true;
		id = d->next;
	}
}

static bool sim_in_flight(const struct sim_queue *q, uint16_t head)
{
	for (unsigned i = 0; i < q->npending; i++)
		if (q->pending[i].head == head)
			return true;
	return false;
}

/* Does chain c write into memory a chain the device already holds writes
 * into? (One buffer posted twice, e.g. after a double release.) */
static bool sim_overlaps_pending(const struct sim_queue *q, const struct sim_chain *c)
{
	for (unsigned i = 0; i < q->npending; i++)
		for (unsigned a = 0; a < c->nw; a++)
			for (unsigned b = 0; b < q->pending[i].nw; b++) {
				uint64_t x = c->w[a].addr, y = q->pending[i].w[b].addr;

				if (x < y + q->pending[i].w[b].len && y < x + c->w[a].len)
					return true;
			}
	return false;
}

/* Split: the next avail entry's chain (device reads avail->idx, then the
 * ring). 1 taken, 0 none, -1 a rule broken (reported). */
static int sim_next_split(struct sim_queue *q, struct sim_chain *c, uint8_t *frame, uint32_t *flen)
{
	uint16_t pub = sim_published(q), head;

	if (q->last_avail == pub)
		return 0;
	head = q->avail->ring[q->last_avail & (q->size - 1)];
	if ((uint16_t)(pub - q->last_avail) > q->size) {
		sim_driver_error("q%u: avail idx %u is %u ahead of the device", q->qidx, pub,
		                 (uint16_t)(pub - q->last_avail));
		return -1;
	}
	if (q->npending >= q->size || sim_in_flight(q, head)) {
		sim_driver_error("q%u: head %u made available while in flight", q->qidx, head);
		return -1;
	}
	return sim_walk(q, head, c, frame, flen) ? 1 : -1;
}

/* Packed: the chain at the device's next available position, checking what
 * 2.8.6 and 2.8.17 require of every descriptor in it. */
static int sim_next_packed(struct sim_queue *q, struct sim_chain *c, uint8_t *frame, uint32_t *flen)
{
	uint16_t pos = q->avail_pos;
	bool wrap = q->avail_wrap, seen_write = false;

	if (!sim_pavail(q, pos, wrap))
		return 0;
	memset(c, 0, sizeof(*c));
	*flen = 0;
	for (;;) {
		const struct virtq_pdesc *d = &q->pdesc[pos];
		uint16_t f = sim_pflags(q, pos);

		if (++c->ndesc > q->size) {
			sim_driver_error("q%u: descriptor chain longer than the ring", q->qidx);
			return -1;
		}
		/* 2.8.6: AVAIL/USED set right in every descriptor of the list. */
		if (!sim_pavail(q, pos, wrap)) {
			sim_driver_error("q%u: descriptor %u of a chain not available (flags 0x%x)",
			                 q->qidx, pos, f);
			return -1;
		}
		sim_chain_desc(q, c, pos, d->addr, d->len, f & VIRTQ_DESC_F_WRITE, &seen_write,
		               frame, flen);
		c->head = d->id; /* 2.8.6: the last descriptor's Buffer ID counts */
		sim_padvance(q, &pos, &wrap, 1);
		if (!(f & VIRTQ_DESC_F_NEXT))
			break;
	}
	if (q->npending >= q->size || sim_in_flight(q, c->head)) {
		sim_driver_error("q%u: buffer id %u made available while in flight", q->qidx,
		                 c->head);
		return -1;
	}
	q->avail_pos = pos;
	q->avail_wrap = wrap;
	return 1;
}

/* Read up to max newly available chains. */
unsigned sim_consume(struct sim_queue *q, unsigned max)
{
	static uint8_t frame[SIM_FRAME_MAX];
	unsigned n = 0;

	while (n < max) {
		struct sim_chain c;
		uint32_t flen;
		int r = q->packed ? sim_next_packed(q, &c, frame, &flen)
		                  : sim_next_split(q, &c, frame, &flen);

		if (r <= 0)
			return n;
		if (c.nw && sim_overlaps_pending(q, &c))
			sim_driver_error("q%u: head %u's buffer is already posted (posted twice)",
			                 q->qidx, c.head);
		if (c.readable) {
			/* A transmitted frame: 12-byte header, then the frame. */
			if (flen < 12 || flen > SIM_FRAME_MAX) {
				sim_driver_error("q%u: readable length %u", q->qidx, flen);
			} else {
				q->frames++;
				q->bytes += flen - 12;
				for (uint32_t i = 12; i < flen; i++)
					q->byte_sum += frame[i];
				memcpy(q->last, frame, flen);
				q->last_len = flen;
				q->last_chain = c;
			}
		}
		q->pending[q->npending++] = c;
		q->last_avail++;
		q->consumed++;
		n++;
	}
	return n;
}

static void sim_put_used(struct sim_queue *q, uint32_t id, uint32_t len, uint16_t ndesc)
{
	if (q->packed) {
		/* 2.8.1, 2.8.6: one used descriptor at the used position,
		 * AVAIL = USED = the Device Ring Wrap Counter (the wrong one
		 * under SIM_FAULT_WRAP), then skip the buffer's descriptors. */
		struct virtq_pdesc *d = &q->pdesc[q->used_pos];
		bool w = q->used_wrap != (q->fault == SIM_FAULT_WRAP);
		bool before = q->used_wrap;

		d->id = (uint16_t)id;
		d->len = len;
		/* Device's write barrier: id and len before the flags (pairs
		 * with the driver's barrier C). */
		__atomic_store_n(&d->flags,
		                 (uint16_t)((w ? VIRTQ_DESC_F_AVAIL | VIRTQ_DESC_F_USED : 0) |
		                            (len ? VIRTQ_DESC_F_WRITE : 0)),
		                 __ATOMIC_RELEASE);
		sim_padvance(q, &q->used_pos, &q->used_wrap, ndesc);
		if (q->fault == SIM_FAULT_WRAP_STUCK)
			q->used_wrap = before; /* never toggles */
		q->used_idx++;
		return;
	}
	struct virtq_used_elem *e = &q->used->ring[q->used_idx & (q->size - 1)];

	e->id = id;
	e->len = len;
	q->used_idx++;
}

/* An id the driver does not have in flight: a head completed before and
 * not reused since (a double completion), else the highest idle
 * descriptor - the last one a LIFO free list hands out again, so the
 * driver cannot mistake it for a chain it has just added. */
static uint16_t sim_stale_id(const struct sim_queue *q, const struct sim_chain *c)
{
	uint16_t id;

	for (id = 0; id < q->size; id++)
		if (q->was_head[id] && id != c->head && !sim_in_flight(q, id))
			return id;
	for (id = q->size; id > 0; id--)
		if (id - 1 != c->head && !sim_in_flight(q, (uint16_t)(id - 1)))
			break;
	return (uint16_t)(id - 1);
}

/* A descriptor in the middle of chain c (a one-descriptor chain has none:
 * then an idle one). */
static uint16_t sim_second_desc(const struct sim_queue *q, const struct sim_chain *c)
{
	const struct virtq_desc *d = &q->desc[c->head];

	return (d->flags & VIRTQ_DESC_F_NEXT) ? d->next : sim_stale_id(q, c);
}

/* Return pending chain k as one used entry (or the armed fault instead). */
static void sim_complete_at(struct sim_queue *q, unsigned k)
{
	struct sim_chain c = q->pending[k];

	memmove(&q->pending[k], &q->pending[k + 1], (q->npending - k - 1) * sizeof(q->pending[0]));
	q->npending--;
	enum sim_fault f = q->fault;

	/* The split-only faults have no packed form: complete normally. */
	if (q->packed &&
	    (f == SIM_FAULT_NOT_HEAD || f == SIM_FAULT_IDX_JUMP || f == SIM_FAULT_IDX_AHEAD))
		f = SIM_FAULT_NONE;
	switch (f) {
	case SIM_FAULT_ID_RANGE:
		sim_put_used(q, q->size + 3u, c.written, c.ndesc);
		break;
	case SIM_FAULT_NOT_IN_FLIGHT:
		sim_put_used(q, sim_stale_id(q, &c), c.written, c.ndesc);
		break;
	case SIM_FAULT_NOT_HEAD:
		sim_put_used(q, sim_second_desc(q, &c), c.written, c.ndesc);
		break;
	case SIM_FAULT_LEN:
		sim_put_used(q, c.head, c.writable + 1, c.ndesc);
		break;
	case SIM_FAULT_IDX_JUMP:
		sim_put_used(q, c.head, c.written, c.ndesc);
		q->used_idx = (uint16_t)(q->used_idx + q->size + 1);
		break;
	case SIM_FAULT_IDX_AHEAD:
		sim_put_used(q, c.head, c.written, c.ndesc);
		q->ahead = true; /* applied when the index is published */
		break;
	case SIM_FAULT_UNPUBLISHED:
		/* A device reading ahead of avail->idx / of the first
		 * descriptor's flags (the packed driver writes the Buffer ID in
		 * every descriptor, so the unexposed head has one). */
		if (q->packed) {
			uint16_t end;

			sim_pscan(q, NULL, &end, NULL);
			sim_put_used(q, q->pdesc[end].id, 0, 1);
		} else {
			sim_put_used(q, q->avail->ring[sim_published(q) & (q->size - 1)], 0, 1);
		}
		break;
	case SIM_FAULT_LEN_READONLY:
		sim_put_used(q, c.head, c.writable ? c.written : 60, c.ndesc);
		q->was_head[c.head] = true;
		break;
	case SIM_FAULT_USED_TWICE:
		sim_put_used(q, c.head, c.written, c.ndesc);
		sim_put_used(q, c.head, c.written, 1);
		q->was_head[c.head] = true;
		break;
	default:
		sim_put_used(q, c.head, c.written, c.ndesc);
		q->was_head[c.head] = true;
	}
	if (q->fault != SIM_FAULT_WRAP_STUCK) /* a device that stays broken */
		q->fault = SIM_FAULT_NONE;
	q->completed++;
}

/* Packed: would the used descriptors written since the last look raise an
 * interrupt (2.8.10)? The Driver Area says ENABLE, DISABLE, or DESC: only
 * once the descriptor at (off, wrap) is marked used. */
static void sim_publish_used_packed(struct sim_queue *q)
{
	uint32_t ev = __atomic_load_n((const uint32_t *)q->driver_event, __ATOMIC_SEQ_CST);
	uint16_t flags = (uint16_t)((ev >> 16) & 3);
	bool fire;

	if (q->used_pos == q->irq_pos && q->used_wrap == q->irq_wrap && q->used_idx == q->irq_count)
		return;
	if (flags == VIRTQ_EVENT_F_DISABLE) {
		fire = false;
	} else if (flags == VIRTQ_EVENT_F_DESC && q->event_idx) {
		/* Positions relative to the current lap's start. */
		int newp = q->used_pos,
		    oldp = q->irq_pos - (q->irq_wrap != q->used_wrap ? q->size : 0);
		int evp =
		    (int)(ev & 0x7fff) - (!!(ev & VIRTQ_EVENT_WRAP) != q->used_wrap ? q->size : 0);

		fire = oldp <= evp && evp < newp;
	} else {
		fire = true;
	}
	q->irq_pos = q->used_pos;
	q->irq_wrap = q->used_wrap;
	q->irq_count = q->used_idx;
	if (fire)
		q->interrupts++;
}

static void sim_publish_used(struct sim_queue *q, uint16_t old)
{
	if (q->packed) {
		sim_publish_used_packed(q);
		return;
	}
	if (q->ahead) {
		/* SIM_FAULT_IDX_AHEAD: the index covers everything the driver
		 * published (completed, held here or not yet read) plus one;
		 * below the ring size while the ring is not full. */
		q->used_idx = (uint16_t)(q->used_idx + q->npending +
		                         (uint16_t)(sim_published(q) - q->last_avail) + 1);
		q->ahead = false;
	}
	if (q->used_idx == old)
		return;
	/* Device's write barrier: entries before the index (pairs with the
	 * driver's barrier C). */
	__atomic_store_n(&q->used->idx, q->used_idx, __ATOMIC_RELEASE);
	/* 2.7.10: would an interrupt be sent? The driver polls and should
	 * have suppressed it. */
	if (q->event_idx ? virtq_need_event(sim_used_event(q), q->used_idx, old)
	                 : !(sim_avail_flags(q) & VIRTQ_AVAIL_F_NO_INTERRUPT))
		q->interrupts++;
}

/* Return up to max consumed chains, FIFO or reordered (2.7.8 allows any
 * order without VIRTIO_F_IN_ORDER), published with one index update. */
unsigned sim_complete(struct sim_queue *q, unsigned max)
{
	uint16_t old = q->used_idx;
	unsigned n;

	for (n = 0; n < max && q->npending; n++)
		sim_complete_at(q, q->reorder ? sim_rand(q) % q->npending : 0);
	sim_publish_used(q, old);
	return n;
}

/* Complete what sim_run() may (all but the newest `lag`), in bursts. */
static void sim_complete_scheduled(struct sim_queue *q)
{
	while (q->npending > q->lag) {
		unsigned n = q->npending - q->lag;

		if (q->burst_max && n > q->burst_max)
			n = q->burst_max;
		if (q->burst_max)
			n = 1 + sim_rand(q) % n;
		sim_complete(q, n);
	}
}

/* Done for now: re-enable notifications (QEMU virtio_queue_set_notification). */
void sim_idle(struct sim_queue *q)
{
	q->busy = false;
	q->kicked_since_idle = false;
	if (q->packed) {
		/* 2.8.10: the Device Area, one untorn store. */
		uint16_t pos = q->avail_pos;
		bool wrap = q->avail_wrap;
		uint32_t v = (uint32_t)VIRTQ_EVENT_F_ENABLE << 16;

		if (q->event_idx) {
			sim_padvance(q, &pos, &wrap, q->event_ahead);
			v = sim_off_wrap(pos, wrap) | (uint32_t)VIRTQ_EVENT_F_DESC << 16;
		}
		__atomic_store_n((uint32_t *)q->device_event, v, __ATOMIC_RELAXED);
	} else if (q->event_idx) {
		*sim_avail_event(q) = (uint16_t)(q->last_avail + q->event_ahead);
	} else {
		q->used->flags = 0;
	}
	/* Device's full barrier between re-arming and re-reading avail->idx
	 * (pairs with the driver's barrier B). */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

void sim_run(struct sim_queue *q)
{
	/* Bounded: each round consumes at least one entry or stops. */
	for (int rounds = 0; rounds < 4; rounds++) {
		sim_consume(q, q->size);
		sim_complete_scheduled(q);
		sim_idle(q);
		if (sim_published(q) == q->last_avail)
			return;
	}
}

/* The control queue (5.1.6.5): each command is a readable part (class,
 * command, command-specific data) and a writable ack byte. Recorded in
 * sim.ctrl_*, answered as sim.ctrl_answer says; VQ_PAIRS_SET answered OK
 * changes the pairs the device uses (5.1.6.5.5). */
static void sim_ctrl_run(struct sim_queue *q)
{
	static uint8_t cmd[SIM_FRAME_MAX];

	for (;;) {
		struct sim_chain c;
		uint32_t len;
		uint16_t old;
		int r = q->packed ? sim_next_packed(q, &c, cmd, &len)
		                  : sim_next_split(q, &c, cmd, &len);

		if (r <= 0)
			return;
		q->last_avail++;
		q->consumed++;
		sim.ctrl_cmds++;
		sim.ctrl_len = len;
		sim.ctrl_class = len > 0 ? cmd[0] : 0xff;
		sim.ctrl_cmd = len > 1 ? cmd[1] : 0xff;
		memset(sim.ctrl_data, 0, sizeof(sim.ctrl_data));
		if (len > 2)
			memcpy(sim.ctrl_data, cmd + 2,
			       len - 2 < sizeof(sim.ctrl_data) ? len - 2 : sizeof(sim.ctrl_data));
		if (len < 2 || c.nw != 1 || c.writable != 1)
			sim_driver_error("ctrl: command of %u readable bytes, %u writable in %u "
			                 "parts (5.1.6.5: class, command, data, then the ack)",
			                 len, c.writable, c.nw);
		q->pending[q->npending++] = c;
		if (sim.ctrl_answer == SIM_CTRL_NEVER)
			continue;
		if (c.nw) {
			*(uint8_t *)(uintptr_t)c.w[0].addr =
			    sim.ctrl_answer == SIM_CTRL_OK ? VIRTIO_NET_OK : VIRTIO_NET_ERR;
			q->pending[q->npending - 1].written = 1;
		}
		if (sim.ctrl_answer == SIM_CTRL_OK && sim.ctrl_class == VIRTIO_NET_CTRL_MQ &&
		    sim.ctrl_cmd == VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET && len >= 4)
			sim.mq_pairs = (uint16_t)(sim.ctrl_data[0] | sim.ctrl_data[1] << 8);
		/* 5.1.6.5.7.1: hash_types, table mask, unclassified, the table,
		 * then max_tx_vq: the pairs in use. */
		if (sim.ctrl_answer == SIM_CTRL_OK && sim.ctrl_class == VIRTIO_NET_CTRL_MQ &&
		    sim.ctrl_cmd == VIRTIO_NET_CTRL_MQ_RSS_CONFIG && len >= 2 + 10) {
			unsigned n = 1u + (sim.ctrl_data[4] | sim.ctrl_data[5] << 8),
			         at = 8 + 2 * n;
			if (2 + at + 2 <= len && at + 2 <= sizeof(sim.ctrl_data))
				sim.mq_pairs =
				    (uint16_t)(sim.ctrl_data[at] | sim.ctrl_data[at + 1] << 8);
		}
		old = q->used_idx;
		sim_complete_at(q, q->npending - 1);
		sim_publish_used(q, old);
	}
}

void sim_doorbell(uint16_t qidx, uint16_t avail_idx)
{
	struct sim_queue *q;

	if (qidx >= SIM_QUEUES || qidx >= sim.num_queues || !sim.q[qidx].ready) {
		sim_driver_error("doorbell for queue %u, which is not set up", qidx);
		return;
	}
	q = &sim.q[qidx];
	sim_register_access();
	q->doorbells++;
	if (!(sim.status & VIRTIO_STATUS_DRIVER_OK))
		sim_driver_error("q%u: notification before DRIVER_OK (3.1.1)", qidx);
	if (q->packed) {
		/* 2.8.16: next_off / next_wrap of the next descriptor not yet
		 * made available. */
		uint16_t end;
		bool wrap;

		sim_pscan(q, NULL, &end, &wrap);
		if (avail_idx != sim_off_wrap(end, wrap))
			sim_driver_error("q%u: doorbell says next 0x%x, ring says 0x%x", qidx,
			                 avail_idx, sim_off_wrap(end, wrap));
	} else if (avail_idx != sim_published(q)) {
		sim_driver_error("q%u: doorbell says avail idx %u, ring says %u", qidx, avail_idx,
		                 sim_published(q));
	}
	q->kicked_since_idle = true;
	if (sim.ctrl_qidx && qidx == sim.ctrl_qidx) {
		sim_ctrl_run(q); /* the device answers at once (or never) */
		return;
	}
	if (sim_is_rxq(qidx)) {
		q->starved = false;
		return; /* RX: buffers are taken when a frame arrives */
	}
	/* TX: busy until run; no more notifications wanted meanwhile (split
	 * with an event index: it is left stale; packed: DISABLE either way,
	 * as QEMU's virtio_queue_packed_set_notification()). */
	q->busy = true;
	if (q->packed)
		__atomic_store_n(&q->device_event->flags, VIRTQ_EVENT_F_DISABLE, __ATOMIC_RELAXED);
	else if (!q->event_idx)
		q->used->flags = VIRTQ_USED_F_NO_NOTIFY;
	if (sim.mode == SIM_SYNC)
		sim_run(q);
}

/* Deliver one frame into the next RX buffer: false if the driver left the
 * device without buffers (the frame is dropped, as QEMU would). */
bool sim_rx_inject(const void *frame, uint32_t len)
{
	return sim_rx_inject_q(0, frame, len);
}

bool sim_rx_inject_q(uint16_t qidx, const void *frame, uint32_t len)
{
	struct sim_queue *q = &sim.q[qidx];
	uint8_t data[SIM_FRAME_MAX];
	struct sim_chain *c;
	uint32_t total = 12 + len, off = 0;
	uint16_t old;

	/* 5.1.6.5.5: pair k + 1 > 1 carries frames only once VQ_PAIRS_SET(> k)
	 * was acknowledged. */
	if (qidx >= SIM_QUEUES || !sim_is_rxq(qidx) || !q->ready || qidx / 2u >= sim.mq_pairs)
		return false;
	/* Take every posted buffer (a real device reads ahead too), so a
	 * buffer posted twice is seen while both copies are held. */
	sim_consume(q, q->size);
	if (q->npending == 0) {
		/* Out of buffers: ask to be told about new ones (QEMU
		 * virtio_net_has_buffers() re-enables notification). */
		sim_idle(q);
		q->starved = true;
		return false;
	}
	c = &q->pending[0];
	if (total > c->writable || total > sizeof(data))
		return false;
	memcpy(data, &sim.rx_hdr, 12);
	memcpy(data + 12, frame, len);
	for (unsigned i = 0; i < c->nw && off < total; i++) {
		uint32_t part = total - off < c->w[i].len ? total - off : c->w[i].len;

		memcpy((void *)(uintptr_t)c->w[i].addr, data + off, part);
		off += part;
	}
	c->written = total;
	old = q->used_idx;
	sim_complete_at(q, 0);
	sim_publish_used(q, old);
	return true;
}

/* The device is waiting for a doorbell that will never come: it re-armed
 * (TX: went idle; RX: ran out of buffers) and the driver has since made
 * entries available without notifying. */
bool sim_lost_wakeup(const struct sim_queue *q)
{
	bool waiting = sim_is_rxq(q->qidx) ? q->starved : !q->busy;
	uint16_t ahead = q->event_idx ? q->event_ahead : 0;
	unsigned descs = 0;

	/* With an event index further ahead, the device itself asked to be
	 * told only once more than `ahead` new entries (packed: descriptors)
	 * are there. */
	if (q->packed) {
		sim_pscan(q, &descs, NULL, NULL);
		return waiting && !q->kicked_since_idle && descs > ahead;
	}
	return waiting && !q->kicked_since_idle &&
	       (uint16_t)(sim_published(q) - q->last_avail) > ahead;
}

bool sim_irq_armed(const struct sim_queue *q)
{
	if (q->packed) {
		uint32_t ev = __atomic_load_n((const uint32_t *)q->driver_event, __ATOMIC_SEQ_CST);
		uint16_t flags = (uint16_t)((ev >> 16) & 3);

		if (flags == VIRTQ_EVENT_F_DESC && q->event_idx)
			return (uint16_t)ev == sim_off_wrap(q->used_pos, q->used_wrap);
		return flags == VIRTQ_EVENT_F_ENABLE;
	}
	if (q->event_idx)
		return sim_used_event(q) == q->used_idx;
	return !(q->avail->flags & VIRTQ_AVAIL_F_NO_INTERRUPT);
}

/* Deliver header + frame as one byte stream over as many RX buffers as it
 * takes (5.1.6.4, MRG_RXBUF). The header is written as given except
 * num_buffers, which says claim (the real count when claim < 0); only the
 * first `complete` buffers (all when < 0) go on the used ring, with one
 * index update. Returns the buffers the frame filled, -1 if the driver had
 * too few posted (nothing is delivered then). */
int sim_rx_inject_hdr(const struct virtio_net_hdr *h, const void *frame, uint32_t len, int claim,
                      int complete)
{
	struct sim_queue *q = &sim.q[0];
	struct virtio_net_hdr hdr = *h;
	const uint8_t *src[2] = {(const uint8_t *)&hdr, frame};
	uint32_t left[2] = {sizeof(hdr), len};
	unsigned used = 0, part = 0;
	uint16_t old;

	/* Take buffers until the stream fits. */
	for (uint32_t room = 0; room < sizeof(hdr) + len; used++) {
		if (used == q->npending && sim_consume(q, 1) == 0)
			return -1;
		room += q->pending[used].w[0].len;
	}
	hdr.num_buffers = (uint16_t)(claim < 0 ? (int)used : claim);
	for (unsigned k = 0; k < used; k++) {
		struct sim_chain *c = &q->pending[k];
		uint8_t *dst = (uint8_t *)(uintptr_t)c->w[0].addr;
		uint32_t off = 0;

		while (part < 2 && off < c->w[0].len) {
			uint32_t n =
			    left[part] < c->w[0].len - off ? left[part] : c->w[0].len - off;

			memcpy(dst + off, src[part], n);
			off += n;
			src[part] += n;
			left[part] -= n;
			if (!left[part])
				part++;
		}
		c->written = off;
	}
	old = q->used_idx;
	for (unsigned k = 0; k < used && (complete < 0 || (int)k < complete); k++)
		sim_complete_at(q, 0);
	sim_publish_used(q, old);
	return (int)used;
}
