/*
 * vnet.h: the polling virtio-net driver as seen by the layer above (the lwIP
 * netif, the driver-only apps). The whole surface on one screen, grouped by
 * the file that owns it. Single-threaded, no interrupts: the caller's main
 * loop drives everything through vnet_poll().
 *
 * Ownership in one paragraph. RX is zero-copy: vnet_rx() hands out a driver
 * buffer; the caller owns it (and VNET_RX_PRIV_SIZE bytes of scratch next to
 * it, room for e.g. a struct pbuf_custom) until vnet_rx_release(). TX takes a
 * scatter list plus a cookie; tx_done(cookie) is called exactly once for
 * every frame vnet_tx() accepted, when the driver stops referencing the
 * caller's memory: at reclaim in zero-copy builds (VNET_ZEROCOPY=1), before
 * vnet_tx() returns in copy builds. When to reclaim and when to kick are
 * compile-time policies (vnet_policy.h); the calls below are the same in
 * every variant.
 *
 * Main loop shape (lwIP NO_SYS_SampleCode.c):
 *
 *	for (;;) {
 *		if (vnet_poll(vn) < 0) fail;        // deferred kick, poll reclaim, refill
 *		while (vnet_rx(vn, &f) > 0) input(f);   // at most VNET_RX_BUDGET; released later
 *		... timers, application, vnet_tx()s, then vnet_tx_end_burst(vn) ...
 *	}
 *
 * Return codes: 0 or a positive count on success, a negative VNET_E* code on
 * failure. VNET_EDEVICE is sticky: the device broke a rule (fault counted and
 * reported in one line) and the run must end with an error result.
 */
#ifndef VNETLAB_VNET_H
#define VNETLAB_VNET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
	VNET_EAGAIN = 1,  /* TX ring full: back-pressure, retry after vnet_poll() */
	VNET_EINVAL = 2,  /* bad arguments (too many segments, frame too long) */
	VNET_EDEVICE = 3, /* the device misbehaved or needs a reset; sticky */
	VNET_ENODEV = 4,  /* vnet_open(): no usable device (message in vnet_open's err) */
};

#define VNET_HDR_LEN         12   /* struct virtio_net_hdr with VERSION_1 (virtio 1.2 5.1.6) */
#define VNET_FRAME_MAX       1518 /* largest Ethernet frame we send or accept, FCS excluded */
#define VNET_TX_MAX_SEGS     16   /* scatter-list entries per frame */
#define VNET_RX_PRIV_SIZE    64   /* caller scratch bytes per RX buffer (pbuf_custom) */
#define VNET_COUNTER_BUCKETS 9    /* reclaim batch histogram: 0,1,2,3-4,5-8,9-16,17-32,33-64,65+ */

/*
 * Bytes the caller must leave writable in front of segs[0].data for the
 * driver to put the virtio-net header there (inline header + zero-copy
 * builds only; 0 otherwise). lwIP: PBUF_LINK_ENCAPSULATION_HLEN.
 */
extern const unsigned vnet_tx_headroom;

struct vnet; /* one device; opaque */

struct vnet_seg {
	void *data;
	uint32_t len;
};

/* Checksum offload request for vnet_tx() (needs a VNET_CSUM=1 build and the
 * device's CSUM feature): the device sums from csum_start to the end and
 * stores the result at csum_start + csum_offset (virtio 1.2 5.1.6.2). */
struct vnet_csum {
	uint16_t start;
	uint16_t offset;
};

#define VNET_RX_F_CSUM_VALID 1u /* device vouches for the checksums (DATA_VALID / NEEDS_CSUM) */

struct vnet_rx {
	void *data;     /* Ethernet frame, no virtio header; data % 4 == 2 so the IP
	                 * header is 4-aligned; the 12 bytes before it are free */
	uint32_t len;   /* frame length */
	uint32_t flags; /* VNET_RX_F_* */
	void *priv;     /* VNET_RX_PRIV_SIZE bytes owned by the caller until release */
	void *handle;   /* give back with vnet_rx_release() */
};

/* Per-queue counters; snapshot with vnet_counters(). */
struct vnet_counters {
	uint64_t frames, bytes;
	uint64_t kicks;            /* notify writes */
	uint64_t kicks_suppressed; /* kick decisions that found no notify needed */
	uint64_t reclaim_calls;    /* TX: calls of the one reclaim routine */
	uint64_t reclaimed;        /* TX: descriptor chains (frames) taken back */
	uint64_t reclaim_hist[VNET_COUNTER_BUCKETS];
	uint64_t idle_reclaim_calls; /* TX: liveness reclaims (TX idle, completions waiting) */
	uint64_t idle_reclaimed;     /* TX: frames they took back */
	uint64_t ring_full;          /* TX: vnet_tx() returned VNET_EAGAIN */
	uint64_t refills;            /* RX: refill batches */
	uint64_t refilled;           /* RX: buffers re-posted */
	uint64_t drops;              /* RX: frames dropped by the driver (malformed) */
	uint64_t device_errors;      /* faults detected on this queue */
};

typedef void (*vnet_tx_done_fn)(void *arg, void *cookie);

/* vnet.c: bring-up, main-loop hooks, counters */
/* Find and initialise the first virtio-net device (virtio 1.2 3.1.1). On
 * failure returns NULL and writes the failed step and reason into err. */
struct vnet *vnet_open(char *err, size_t errlen);
const uint8_t *vnet_mac(const struct vnet *vn);
uint16_t vnet_mtu(const struct vnet *vn);      /* IP MTU (1500 unless the device says less) */
bool vnet_link_up(const struct vnet *vn);      /* true without the STATUS feature */
uint64_t vnet_features(const struct vnet *vn); /* negotiated feature bits */
const char *vnet_variant(void);                /* "reclaim=before,kick=every,..." */
void vnet_set_tx_done(struct vnet *vn, vnet_tx_done_fn fn, void *arg);
int vnet_poll(struct vnet *vn);                /* one main-loop pass; <0 on device error */
void vnet_before_wait(struct vnet *vn);        /* nothing may stay unkicked while we wait */
bool vnet_kick_pending(const struct vnet *vn); /* frames published but not yet kicked */
/* End of a run only (not a policy point): kick everything, wait until the
 * device has completed every TX frame. 0, -1 on timeout, -VNET_EDEVICE. */
int vnet_drain(struct vnet *vn, uint64_t timeout_ns);
int vnet_check(struct vnet *vn);               /* read device status now; -VNET_EDEVICE if broken */
const char *vnet_error(const struct vnet *vn); /* first error, "" if none */
void vnet_counters(const struct vnet *vn, struct vnet_counters *rx, struct vnet_counters *tx);
void vnet_print_counters(const struct vnet *vn); /* COUNTERS {...} lines */

/* vnet_tx.c: transmit */
/* Queue one frame (virtio header added by the driver). 0 = accepted (and will
 * be completed through tx_done), -VNET_EAGAIN = ring full (nothing queued,
 * any pending kick already flushed), -VNET_EINVAL, -VNET_EDEVICE. csum may
 * be NULL. */
int vnet_tx(struct vnet *vn, const struct vnet_seg *segs, unsigned nseg,
            const struct vnet_csum *csum, void *cookie);
/* End of a burst (the xmit_more=false point): kick=burst kicks here,
 * avail=batched publishes here. */
void vnet_tx_end_burst(struct vnet *vn);

/* vnet_rx.c: receive */
/* 1 = a frame in *out, 0 = none yet (or this pass's VNET_RX_BUDGET frames
 * were handed up: vnet_poll() starts the next pass), -VNET_EDEVICE. */
int vnet_rx(struct vnet *vn, struct vnet_rx *out);
void vnet_rx_release(struct vnet *vn, void *handle);

#endif
