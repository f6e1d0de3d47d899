/*
 * sim_rx.c: QEMU 7.2's virtio-net receive side on receiveq1, step by step
 * (sim_rx.h has the model); built on sim_dev.c's ring access.
 */
#include <string.h>
#include "tests/unit/sim_rx.h"

struct sim_rx simrx;

static struct sim_queue *const rq = &sim.q[0];

void sim_rx_model_reset(bool mrg, bool weak)
{
	memset(&simrx, 0, sizeof(simrx));
	simrx.mrg = mrg;
	simrx.weak = weak && !rq->packed;
	simrx.view = sim_published(rq);
}

void sim_rx_drain(void)
{
	simrx.view = sim_published(rq);
}

/* avail->idx as the device reads it: the value in memory, or in weak mode
 * the newest the driver's register accesses or a drain let through. */
static uint16_t sim_rx_avail_idx(void)
{
	if (!simrx.weak)
		return sim_published(rq);
	if ((uint16_t)(rq->seen_avail_idx - simrx.view) < 0x8000u)
		simrx.view = rq->seen_avail_idx;
	return simrx.view;
}

static uint16_t sim_rx_pflags(uint16_t pos)
{
	return __atomic_load_n(&rq->pdesc[pos].flags, __ATOMIC_ACQUIRE);
}

static bool sim_rx_pavail(uint16_t pos, bool wrap)
{
	uint16_t f = sim_rx_pflags(pos);

	return !!(f & VIRTQ_DESC_F_AVAIL) == wrap && !!(f & VIRTQ_DESC_F_USED) != wrap;
}

/* Where the device's next scan starts (its shadow): split last_avail,
 * packed position | wrap << 15. */
static uint16_t sim_rx_pos(void)
{
	if (rq->packed)
		return (uint16_t)(rq->avail_pos | (rq->avail_wrap ? VIRTQ_EVENT_WRAP : 0));
	return rq->last_avail;
}

/* Writable bytes made available past the device's position and not yet
 * read by it (nothing is consumed). */
static uint64_t sim_rx_unseen(unsigned *chains)
{
	uint64_t bytes = 0;

	*chains = 0;
	if (rq->packed) {
		uint16_t pos = rq->avail_pos;
		bool wrap = rq->avail_wrap;

		for (unsigned n = 0; n < rq->size && sim_rx_pavail(pos, wrap); n++) {
			uint16_t f = sim_rx_pflags(pos);

			if (f & VIRTQ_DESC_F_WRITE)
				bytes += rq->pdesc[pos].len;
			if (!(f & VIRTQ_DESC_F_NEXT))
				(*chains)++;
			if (++pos == rq->size) {
				pos = 0;
				wrap = !wrap;
			}
		}
		return bytes;
	}
	for (uint16_t i = rq->last_avail; i != sim_published(rq); i++) {
		uint16_t d = rq->avail->ring[i & (rq->size - 1)];

		for (unsigned n = 0; n < rq->size; n++) {
			if (rq->desc[d].flags & VIRTQ_DESC_F_WRITE)
				bytes += rq->desc[d].len;
			if (!(rq->desc[d].flags & VIRTQ_DESC_F_NEXT))
				break;
			d = rq->desc[d].next & (rq->size - 1);
		}
		(*chains)++;
	}
	return bytes;
}

uint64_t sim_rx_room(uint64_t *unseen, unsigned *nunseen)
{
	uint64_t seen = 0;

	for (unsigned k = 0; k < rq->npending; k++)
		seen += rq->pending[k].writable;
	*unseen = sim_rx_unseen(nunseen);
	return seen;
}

bool sim_rx_fits(uint64_t bytes, unsigned bufs)
{
	/* Without MRG_RXBUF QEMU only asks for a buffer (virtio_queue_empty);
	 * the driver's hold a whole frame (5.1.6.3.1). */
	return simrx.mrg ? bytes >= simrx.want : bufs > 0;
}

/* virtio_queue_set_notification(vq, 0) once the frame fits: with EVENT_IDX
 * nothing is written (vq->notification == 0 makes vring_set_avail_event()
 * return early), so avail_event keeps the value of the last park. */
static void sim_rx_notify_off(void)
{
	if (rq->packed)
		__atomic_store_n(&rq->device_event->flags, VIRTQ_EVENT_F_DISABLE, __ATOMIC_RELAXED);
	else if (!rq->event_idx)
		rq->used->flags = VIRTQ_USED_F_NO_NOTIFY;
}

static void sim_rx_deliver(void)
{
	static uint8_t frame[SIM_FRAME_MAX];
	struct virtio_net_hdr h = sim.rx_hdr;
	uint32_t len = simrx.frame_len;

	memcpy(frame, &simrx.frames, sizeof(simrx.frames)); /* its number, for order */
	if (len > 1514) {
		h.gso_type = VIRTIO_NET_HDR_GSO_TCPV4; /* large receive (GUEST_TSO4) */
		h.gso_size = 1448;
		h.hdr_len = 54;
		simrx.gso++;
	}
	if (simrx.mrg ? sim_rx_inject_hdr(&h, frame, len, -1, -1) < 0 : !sim_rx_inject(frame, len))
		sim_driver_error("rx model: a frame that fitted was not delivered");
	simrx.frames++;
	simrx.bytes += len;
	simrx.want = 0;
	simrx.phase = SIM_RX_RUNNING;
}

/* virtio_net_has_buffers(), its first half: read what is available and
 * deliver if it fits; else begin to park. */
static void sim_rx_scan(void)
{
	uint64_t room = 0;

	sim_consume(rq, rq->packed ? rq->size : (uint16_t)(sim_rx_avail_idx() - rq->last_avail));
	for (unsigned k = 0; k < rq->npending; k++)
		room += rq->pending[k].writable;
	if (sim_rx_fits(room, rq->npending)) {
		sim_rx_notify_off();
		sim_rx_deliver();
		return;
	}
	simrx.opaque = sim_rx_pos();
	if (simrx.phase == SIM_RX_RUNNING || simrx.phase == SIM_RX_PARKED)
		simrx.park_kicks = rq->doorbells;
	simrx.phase = SIM_RX_ARMING;
}

bool sim_rx_frame(uint32_t len)
{
	if (simrx.want)
		return false;
	simrx.frame_len = len;
	simrx.want = len + (uint32_t)sizeof(struct virtio_net_hdr);
	simrx.phase = SIM_RX_RUNNING;
	sim_rx_scan();
	return true;
}

/* virtio_queue_set_notification(vq, 1), then smp_mb(). */
static void sim_rx_arm(void)
{
	if (rq->packed) {
		uint32_t v = (uint32_t)VIRTQ_EVENT_F_ENABLE << 16;

		if (rq->event_idx)
			v = simrx.opaque | (uint32_t)VIRTQ_EVENT_F_DESC << 16;
		__atomic_store_n((uint32_t *)rq->device_event, v, __ATOMIC_RELAXED);
	} else if (rq->event_idx) {
		*(uint16_t *)&rq->used->ring[rq->size] = sim_rx_avail_idx();
	} else {
		rq->used->flags = 0;
	}
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/* virtio_queue_poll(vq, opaque): made available since the scan? */
static bool sim_rx_changed(void)
{
	if (rq->packed)
		return sim_rx_pavail(simrx.opaque & 0x7fff, !!(simrx.opaque & VIRTQ_EVENT_WRAP));
	return sim_rx_avail_idx() != simrx.opaque;
}

void sim_rx_step(void)
{
	switch (simrx.phase) {
	case SIM_RX_ARMING:
		sim_rx_arm();
		simrx.phase = SIM_RX_RECHECK;
		break;
	case SIM_RX_RECHECK:
		if (sim_rx_changed()) {
			simrx.rescans++;
			sim_rx_scan();
		} else {
			simrx.parks++;
			simrx.phase = SIM_RX_PARKED;
		}
		break;
	case SIM_RX_PARKED:
		if (rq->doorbells != simrx.park_kicks) {
			simrx.resumes++;
			sim_rx_scan();
		}
		break;
	case SIM_RX_RUNNING:
		break;
	}
}
