/*
 * sim_rx.h: QEMU 7.2's virtio-net receive side (hw/net/virtio-net.c,
 * hw/virtio/virtio.c, with f937309fbdbb "Fix network stall at the host
 * side waiting for kick", which Debian's 7.2.22 carries) on receiveq1
 * (sim.q[0]), one device step at a time so a test can run the driver
 * between any two of them, as the vCPU runs beside QEMU's I/O thread.
 *
 * A frame from the tap is queued and tried (virtio_net_has_buffers()): the
 * device reads every chain made available (sim_consume) and checks room:
 * with MRG_RXBUF the bytes of all of them (virtqueue_get_avail_bytes), else
 * one buffer. If the frame fits it is written (over num_buffers buffers
 * with MRG_RXBUF) and notifications stay disabled: with EVENT_IDX QEMU
 * leaves avail_event stale while vq->notification is 0 (its
 * vring_set_avail_event() returns early, also after each pop), without it
 * used->flags says NO_NOTIFY, packed: the Device Area says DISABLE. If not,
 * the device parks in three steps:
 *   ARMING   virtio_queue_set_notification(vq, 1): split EVENT_IDX
 *            avail_event = avail->idx read now, else NO_NOTIFY cleared;
 *            packed: Device Area DESC at the first descriptor the scan
 *            found not available (ENABLE without EVENT_IDX); full barrier
 *   RECHECK  virtio_queue_poll(): anything made available since the scan?
 *            yes: scan again from the top; no: PARKED
 *   PARKED   the tap is not read (tap_read_poll false); only a doorbell on
 *            the queue (virtio_net_handle_rx() -> flush) makes it try again.
 * A doorbell that arrives while the device is arming or re-checking is
 * handled after (the I/O thread's main loop), so it resumes it too.
 *
 * Weak mode (split ring): QEMU 7.2's TCG with one vCPU drops the guest's
 * MFENCE, so the driver's avail->idx store can sit in the host CPU's store
 * buffer while the I/O thread reads the ring. The device then sees avail->idx
 * as of the driver's last register access (a doorbell, or the register
 * read virtq_kick_prepare() makes before trusting a "no": sim_dev.c
 * seen_avail_idx), or newer once the test says the store buffer drained
 * (sim_rx_drain()).
 */
#ifndef VNETLAB_SIM_RX_H
#define VNETLAB_SIM_RX_H

#include <stdbool.h>
#include <stdint.h>
#include "tests/unit/sim_dev.h"

enum sim_rx_phase { SIM_RX_RUNNING, SIM_RX_ARMING, SIM_RX_RECHECK, SIM_RX_PARKED };

struct sim_rx {
	bool mrg;      /* MRG_RXBUF negotiated: a frame may take several buffers */
	bool weak;     /* split: the device sees avail->idx late (see above) */
	uint16_t view; /* ... this value of it */
	enum sim_rx_phase phase;
	uint32_t want;      /* bytes the queued frame needs (header + frame); 0: none */
	uint32_t frame_len; /* its frame bytes */
	uint16_t opaque;    /* where the last scan ended: split avail->idx; packed pos|wrap << 15 */
	uint64_t park_kicks; /* the queue's doorbells when the failed scan began */
	uint64_t frames, bytes, gso, parks, resumes, rescans;
};

extern struct sim_rx simrx;

void sim_rx_model_reset(bool mrg, bool weak);
/* Weak mode: the driver's stores so far reach the device now. */
void sim_rx_drain(void);
/* A frame from the tap (len frame bytes, a large-receive one when above
 * 1514): false if one is queued already (the tap is not read meanwhile). */
bool sim_rx_frame(uint32_t len);
/* The I/O thread's next step: arm, re-check, or a parked device's
 * resumption after a doorbell. */
void sim_rx_step(void);
/* Bytes the device could fill now: buffers it has read but not used, and
 * (unseen) the ones made available since its last scan, which it has not
 * looked at; chains counted in *nunseen. */
uint64_t sim_rx_room(uint64_t *unseen, unsigned *nunseen);
/* Would the queued frame fit these bytes in this many buffers? */
bool sim_rx_fits(uint64_t bytes, unsigned bufs);

#endif
