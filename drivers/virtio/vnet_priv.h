/*
 * vnet_priv.h: the virtio-net driver's state, shared by vnet.c (bring-up,
 * main-loop hooks), vnet_tx.c and vnet_rx.c. Not for the layers above: they
 * see vnet.h only.
 */
#ifndef VNETLAB_VNET_PRIV_H
#define VNETLAB_VNET_PRIV_H

#include "drivers/virtio/vnet.h"
#include "drivers/virtio/vnet_policy.h"
#include "drivers/virtio/virtio_dev.h"
#include "drivers/virtio/virtq.h"

/* Host unit tests only: record the TX steps (vnet_trace()). */
#ifndef VNET_TRACE
#define VNET_TRACE 0
#endif

#define VNET_RXQ 0 /* 5.1.2: receiveq1 */
#define VNET_TXQ 1 /* transmitq1 */

/*
 * RX buffer layout (one per RX descriptor), VNET_RX_BUF_SIZE bytes:
 *   [0, 64)   caller scratch (vnet_rx.priv), never given to the device
 *   [64, 66)  pad, so the frame starts at 2 mod 4 and its IP header is aligned
 *   [66, 78)  struct virtio_net_hdr, written by the device
 *   [78, ...) the Ethernet frame
 * With MRG_RXBUF the device writes header and frame as one stream over
 * num_buffers buffers: the frame continues at offset 66 of the next ones.
 * Large receive uses 4 KiB buffers, so a 64 KB frame takes 17 of them.
 */
#define VNET_RX_BUF_SIZE  (VNET_WANT_LRO ? 4096 : 2048)
#define VNET_RX_HDR_OFF   (VNET_RX_PRIV_SIZE + 2)
#define VNET_RX_FRAME_OFF (VNET_RX_HDR_OFF + VNET_HDR_LEN)

/* TX slot per frame in flight: the header (zero-copy) or header + frame copy
 * (a whole 64 KB GSO frame when TSO is built in). */
#define VNET_TX_SLOT_SIZE                                                                          \
	(VNET_ZEROCOPY ? 64 : VNET_WANT_TSO ? VNET_HDR_LEN + VNET_GSO_FRAME_MAX + 4 : 1536)

enum vnet_rxb_state {
	VNET_RXB_FREE,   /* driver's, waiting to be re-posted */
	VNET_RXB_POSTED, /* on the ring, device's */
	VNET_RXB_UP,     /* handed to the caller */
	VNET_RXB_TX,     /* forwarded (vnet_tx_forward): on the TX ring until reclaimed */
};

struct vnet_tx_slot {
	void *cookie;
	void *rx_handle; /* a forwarded RX buffer, re-posted at reclaim; NULL: tx_done(cookie) */
	uint16_t next_free;
};

/* One queue pair. Pair 0 brought the device up; pairs 1.. (multiqueue,
 * vnet_mq.c) hold a copy of its struct virtio_dev, whose ops and t point
 * at pair 0's transport state (read-only after bring-up), and every other
 * field of their own. */
struct vnet {
	struct virtio_dev vd;
	unsigned qp;        /* this pair's index: receiveq qp+1 is queue 2*qp */
	unsigned pairs;     /* pairs in use (pair 0's; the same in each) */
	unsigned max_pairs; /* the device's max_virtqueue_pairs (1 without MQ) */
	struct virtq rxq, txq;
	uint64_t offered, features;
	uint8_t mac[6];
	uint16_t mtu, max_frame;
	bool link_up;
	unsigned offloads; /* VNET_OFF_* from the negotiated features */

	/* RX */
	uint8_t *rx_mem;
	uint8_t rx_state[VIRTQ_MAX_SIZE];
	uint16_t rx_free[VIRTQ_MAX_SIZE]; /* FREE buffers, a stack */
	uint16_t rx_nfree;
	uint16_t rx_posted; /* POSTED buffers: what the device can still fill */
	uint16_t rx_held;   /* UP buffers: handed to the caller */
	uint16_t rx_in_tx;  /* TX buffers: forwarded, not yet reclaimed */

	/* TX */
	uint8_t *tx_mem;
	struct vnet_tx_slot tx_slot[VIRTQ_MAX_SIZE];
	uint16_t tx_slot_free;
	vnet_tx_done_fn tx_done;
	void *tx_done_arg;
	uint32_t tx_since_kick; /* kick=burst: frames since the last kick decision */
	bool tx_holding;        /* kick=timer: a kick is being held ... */
	uint64_t tx_hold_since; /* ... since this clock_ns() */
	uint16_t lazy_thresh;
	uint32_t tx_activity;      /* vnet_tx() calls (liveness: is TX busy?) */
	uint32_t tx_activity_seen; /* ... as of tx_idle_since */
	uint64_t tx_idle_since;    /* clock_ns() when TX was last seen busy */
	uint64_t tx_reclaims_seen; /* reclaim calls of any kind, as of tx_waiting_since */
	uint64_t tx_waiting_since; /* clock_ns() completions were first seen waiting; 0: none */

	/* Idle policy (vnet_idle.c) */
	uint64_t idle_sig;           /* work signature at the previous pass */
	uint64_t idle_last_work;     /* clock_ns() of the last pass that did work */
	struct vnet_idle_stats idle; /* idle.coal_k: RX_COALESCE's k, from 1 (vnet_open) */

	struct vnet_counters rx, tx; /* kicks and device_errors come from the rings */
	uint32_t poll_passes;
	uint64_t status_checked; /* clock_ns() of the last status/link check */
	uint16_t rx_quota;       /* frames vnet_rx() may still hand up this pass */
	bool failed;
	char error[192];

	/* Unit tests (VNET_TRACE=1): the TX steps in order, one letter each:
	 * F reclaim all, f reclaim at most K, I idle reclaim, A add,
	 * P publish, K kick decision. */
	char trace[VNET_TRACE ? 128 : 1];
	unsigned trace_len;
};

static inline void vnet_trace(struct vnet *vn, char ev)
{
	if (VNET_TRACE && vn->trace_len + 1 < sizeof(vn->trace)) {
		vn->trace[vn->trace_len++] = ev;
		vn->trace[vn->trace_len] = 0;
	}
}

/* This pair's interrupt counter for its receiveq (VNET_RXQ) or transmitq
 * (VNET_TXQ): virtio_dev.h's slot 1 + queue index. */
static inline unsigned vnet_irq_slot(const struct vnet *vn, unsigned which)
{
	return 1 + 2 * vn->qp + which;
}

/* vnet.c */
void vnet_fail(struct vnet *vn, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void vnet_status_check(struct vnet *vn); /* device status + link now */

/* vnet_mq.c */
uint64_t vnet_mq_features(unsigned pairs);
/* vnet_rss.c (VIRTIO_NET_F_RSS with pairs > 1) */
#define VNET_RSS_CONFIG_MAX (4 + 2 + 2 + 2 * 128 + 2 + 1 + VNET_RSS_KEY_LEN)
uint64_t vnet_rss_feature(unsigned pairs);
void vnet_rss_check(struct vnet *vn);      /* before FEATURES_OK: drops the feature if unusable */
size_t vnet_rss_config(uint8_t *buf);      /* RSS_CONFIG's data; 0 without RSS */
void vnet_rss_kick_peers(struct vnet *vn); /* after vn's RX kick (vnet_rx.c) */
int vnet_mq_check(struct vnet *vn, char *err, size_t errlen);
int vnet_mq_setup(struct vnet *vn, char *err, size_t errlen);
int vnet_mq_set_pairs(struct vnet *vn, char *err, size_t errlen);

/* vnet_tx.c */
void vnet_tx_setup(struct vnet *vn);
unsigned vnet_tx_reclaim(struct vnet *vn, unsigned max);
int vnet_tx_drain(struct vnet *vn, uint64_t timeout_ns);
void vnet_tx_kick(struct vnet *vn);
void vnet_tx_poll(struct vnet *vn);
void vnet_tx_before_wait(struct vnet *vn);
bool vnet_tx_kick_pending(const struct vnet *vn);
void vnet_tx_reclaim_before_halt(struct vnet *vn);

/* vnet_rx.c */
void vnet_rx_setup(struct vnet *vn);
void vnet_rx_refill(struct vnet *vn, bool kick);
void vnet_rx_poll(struct vnet *vn);
/* vnet_tx_forward(): is handle a buffer the caller holds (its index, else
 * -1); then UP -> TX once it is on the TX ring, TX -> FREE at reclaim. */
int vnet_rx_held_index(const struct vnet *vn, const void *handle);
void vnet_rx_to_tx(struct vnet *vn, uint16_t i);
void vnet_rx_tx_done(struct vnet *vn, void *handle);

#endif
