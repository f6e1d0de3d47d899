/*
 * vnet.h: the polling virtio-net driver as seen by the layer above (the lwIP
 * netif, the driver-only apps). The whole surface on one screen, grouped by
 * the file that owns it. Single-threaded: the caller's main loop drives
 * everything through vnet_poll() and vnet_idle(); interrupts (halt idle
 * policies only) just end a HLT and count.
 *
 * Ownership in one paragraph. RX is zero-copy: vnet_rx() hands out a frame
 * in one or more driver buffers (several when MRG_RXBUF merges them); the
 * caller owns each (and VNET_RX_PRIV_SIZE bytes of scratch next to it, room
 * for e.g. a struct pbuf_custom) until vnet_rx_release(). TX takes a
 * scatter list plus a cookie; tx_done(cookie) is called exactly once for
 * every frame vnet_tx() accepted, when the driver stops referencing the
 * caller's memory: at reclaim in zero-copy builds (VNET_ZEROCOPY=1), before
 * vnet_tx() returns in copy builds. When to reclaim and when to kick are
 * compile-time policies (vnet_policy.h); the calls below are the same in
 * every variant. A received frame can also go straight back out in its own
 * buffer (vnet_tx_forward(): the packet apps' macswap and reflect); the
 * driver then owns that buffer and re-posts it to RX when TX completes.
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

#define VNET_HDR_LEN          12    /* struct virtio_net_hdr with VERSION_1 (virtio 1.2 5.1.6) */
#define VNET_FRAME_MAX        1518  /* largest Ethernet frame without GSO, FCS excluded */
#define VNET_GSO_FRAME_MAX    65535 /* largest TSO frame we send: lwIP's 16-bit tot_len */
#define VNET_RX_GSO_FRAME_MAX (14 + 65535) /* largest large-receive frame: a full IP packet */
#define VNET_TX_MAX_SEGS                                                                           \
	64 /* scatter-list entries per frame: a 64 KB TSO segment of 1448-byte pbufs is 46 */
#define VNET_RX_MAX_BUFS     32 /* merged RX buffers per frame (5.1.6.4 num_buffers) */
#define VNET_RX_PRIV_SIZE    64 /* caller scratch bytes per RX buffer (pbuf_custom) */
#define VNET_COUNTER_BUCKETS 9  /* reclaim batch histogram: 0,1,2,3-4,5-8,9-16,17-32,33-64,65+ */

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

/* What the negotiated features let the stack hand to the device
 * (vnet_offloads(); each implies the ones above it). */
#define VNET_OFF_TX_CSUM 1u /* CSUM: vnet_tx() may ask for NEEDS_CSUM */
#define VNET_OFF_RX_CSUM 2u /* GUEST_CSUM: received frames may say the checksum is good */
#define VNET_OFF_TSO4    4u /* HOST_TSO4: vnet_tx() takes TCP/IPv4 frames up to 64 KB */
#define VNET_OFF_LRO4    8u /* GUEST_TSO4 + MRG_RXBUF: TCP/IPv4 frames up to 64 KB arrive */

/* Offload request for vnet_tx() (virtio 1.2 5.1.6.2). csum: the device sums
 * from csum_start to the end and stores the result at csum_start +
 * csum_offset, the field holding the pseudo-header sum. gso (TSO4 only,
 * with csum): the device cuts the TCP payload after hdr_len bytes of
 * Ethernet/IP/TCP headers into gso_size-byte segments. */
struct vnet_txo {
	bool csum;
	uint16_t csum_start, csum_offset;
	uint8_t gso_type; /* VIRTIO_NET_HDR_GSO_NONE or _TCPV4 */
	uint16_t gso_size, hdr_len;
};

#define VNET_RX_F_CSUM_VALID 1u /* device vouches for the L4 checksum (DATA_VALID / NEEDS_CSUM) */
#define VNET_RX_F_GSO        2u /* a large-receive frame: gso_size says the sender's MSS */
#define VNET_RX_F_CSUM_PARTIAL                                                                     \
	4u /* NEEDS_CSUM: the L4 checksum field holds the pseudo-header sum (csum_start/offset) */

struct vnet_rx_buf {
	void *data;   /* part of the frame; buf[0].data % 4 == 2 so the IP header
	               * is 4-aligned; the 12 bytes before buf[0].data are free */
	uint32_t len; /* bytes of the frame in this buffer */
	void *priv;   /* VNET_RX_PRIV_SIZE bytes owned by the caller until release */
	void *handle; /* give back with vnet_rx_release() */
};

struct vnet_rx {
	uint32_t len;                     /* whole frame, all buffers */
	uint32_t flags;                   /* VNET_RX_F_* */
	uint16_t gso_size;                /* VNET_RX_F_GSO: segment size the device reported */
	uint16_t csum_start, csum_offset; /* VNET_RX_F_CSUM_PARTIAL: as the device wrote them */
	unsigned nbufs; /* 1..VNET_RX_MAX_BUFS (more than 1 only with MRG_RXBUF) */
	struct vnet_rx_buf buf[VNET_RX_MAX_BUFS];
};

/* Per-queue counters; snapshot with vnet_counters(). */
struct vnet_counters {
	uint64_t frames, bytes;
	uint64_t kicks;            /* notify writes */
	uint64_t kicks_suppressed; /* kick decisions that found no notify needed */
	uint64_t kick_syncs;       /* register reads before trusting a "no" (emulator) */
	uint64_t kick_rescues;     /* ... that turned it into a kick */
	uint64_t reclaim_calls;    /* TX: calls of the one reclaim routine */
	uint64_t reclaimed;        /* TX: descriptor chains (frames) taken back */
	uint64_t reclaim_hist[VNET_COUNTER_BUCKETS];
	uint64_t idle_reclaim_calls; /* TX: liveness reclaims (TX idle, completions waiting) */
	uint64_t idle_reclaimed;     /* TX: frames they took back */
	uint64_t rx_reclaim_calls;   /* TX: reclaims refilling the RX ring (forwarding) */
	uint64_t rx_reclaimed;       /* TX: frames they took back */
	uint64_t ring_full;          /* TX: vnet_tx() returned VNET_EAGAIN */
	uint64_t refills;            /* RX: refill batches */
	uint64_t refilled;           /* RX: buffers re-posted */
	uint64_t peer_kicks;         /* RX: doorbells rung on other pairs' receiveqs (vnet_rss.c) */
	uint64_t drops;              /* RX: frames dropped by the driver (malformed) */
	uint64_t csum;          /* TX: frames sent NEEDS_CSUM; RX: frames the device vouched for */
	uint64_t gso;           /* TX: TSO frames; RX: large-receive frames */
	uint64_t bufs;          /* RX: buffers consumed (> frames when merged) */
	uint64_t device_errors; /* faults detected on this queue */
	uint64_t irqs; /* used-buffer interrupts (halt policies; INTx: both queues' in rx) */
};

/* The idle policy's counters (vnet_idle_counters()); all 0 but polls and
 * idle_polls under IDLE=poll. */
struct vnet_idle_stats {
	uint64_t polls;         /* main-loop passes (vnet_idle() calls) */
	uint64_t idle_polls;    /* ... that found no work */
	uint64_t halts;         /* HLTs */
	uint64_t halted_ns;     /* time in them */
	uint64_t timer_wakes;   /* halts the timer ended */
	uint64_t lost_wakeups;  /* ... with a frame waiting and no interrupt for it */
	uint64_t arm_races;     /* halts given up: work appeared while re-arming */
	uint64_t dev_syncs;     /* device reads made while re-arming (an emulator's fences) */
	uint64_t coal_halts;    /* halts that asked for k > 1 RX entries (RX_COALESCE) */
	uint64_t coal_timeouts; /* ... that the VNET_RX_COALESCE_US bound ended */
	uint16_t coal_k;        /* the current k (1 without RX_COALESCE) */
	uint64_t irq_cfg;       /* configuration-change interrupts */
	uint64_t irq_other;     /* INTx with ISR status 0, unexpected or spurious vectors */
};

typedef void (*vnet_tx_done_fn)(void *arg, void *cookie);

/* vnet.c: bring-up, main-loop hooks, counters */
/* Find and initialise the first virtio-net device (virtio 1.2 3.1.1). On
 * failure returns NULL and writes the failed step and reason into err. */
struct vnet *vnet_open(char *err, size_t errlen);
#define VNET_MQ_MAX 8 /* queue pairs (vnet_open_mq()); VIRTIO_PCI_MAX_QUEUES follows */
/* The same with `pairs` queue pairs (VIRTIO_NET_F_MQ, 1..VNET_MQ_MAX; 1 = vnet_open):
 * the first pair's struct vnet; vnet_queue() gives each pair's, which the
 * whole surface below takes like the first one's. Pairs share nothing, so
 * each may be driven from its own CPU; under IDLE=halt|adaptive pair k
 * must be, from CPU k: its interrupts are aimed there (needs pairs CPUs). */
struct vnet *vnet_open_mq(unsigned pairs, char *err, size_t errlen);
unsigned vnet_queue_pairs(const struct vnet *vn);
/* Receive-side scaling (VIRTIO_NET_F_RSS, vnet_rss.c): with mq > 1 on a
 * device that offers it, the driver's Toeplitz key and table decide each
 * flow's receive queue. vnet_rss_rx_queue(): the pair a TCP or UDP frame
 * from saddr:sport to daddr:dport lands on, -1 without RSS;
 * vnet_rss_frame_queue() the same for a received Ethernet frame (its
 * first len bytes), -1 also for one that is not TCP/UDP over unfragmented
 * IPv4 (the receivers count a frame on another queue: rss_misses). */
#define VNET_RSS_KEY_LEN   40
#define VNET_RSS_INPUT_LEN 12 /* IPv4 source, destination, source and destination port */
bool vnet_rss(void);
int vnet_rss_rx_queue(const uint8_t saddr[4], const uint8_t daddr[4], uint16_t sport,
                      uint16_t dport);
int vnet_rss_frame_queue(const uint8_t *eth, size_t len);
/* The hash bit by bit from any key (the reference); with RSS on, a
 * 12-byte input's hash under the driver's key by table look-up (what the
 * receivers use) and bit by bit (what they used before: pkt.rss_cost). */
uint32_t vnet_toeplitz(const uint8_t *key, size_t keylen, const uint8_t *in, size_t n);
uint32_t vnet_rss_hash(const uint8_t in[VNET_RSS_INPUT_LEN]);
uint32_t vnet_rss_hash_bitwise(const uint8_t in[VNET_RSS_INPUT_LEN]);
/* Whether an RX kick under RSS also rings the other pairs' receiveqs
 * (on by default; vnet_rss.c says why, command-line key rss.peer_kick).
 * Set before vnet_open_mq(). */
void vnet_rss_set_peer_kick(bool on);
/* How often the poll loop reads the device status and the link state
 * (vnet.c: MMIO reads, so exits under KVM), in ms; command-line key
 * vnet.status_ms. Set before the run. */
#define VNET_STATUS_MS_DEFAULT 1000u
void vnet_set_status_period(uint32_t ms);
struct vnet *vnet_queue(struct vnet *vn, unsigned qp); /* NULL past the last */
unsigned vnet_queue_index(const struct vnet *vn);      /* this pair's: 0.. */
const uint8_t *vnet_mac(const struct vnet *vn);
uint16_t vnet_mtu(const struct vnet *vn);          /* IP MTU (1500 unless the device says less) */
bool vnet_link_up(const struct vnet *vn);          /* true without the STATUS feature */
uint64_t vnet_features(const struct vnet *vn);     /* negotiated feature bits */
unsigned vnet_offloads(const struct vnet *vn);     /* VNET_OFF_* the negotiation allows */
uint16_t vnet_rx_held(const struct vnet *vn);      /* RX buffers handed up, not yet released */
uint16_t vnet_rx_ring_size(const struct vnet *vn); /* RX buffers in all */
/* Memory this build set aside (RX buffers, TX slots, rings), for the boot line. */
void vnet_memory(const struct vnet *vn, size_t *rx, size_t *tx, size_t *rings);
const char *vnet_variant(void); /* "reclaim=before,kick=every,..." */
void vnet_set_tx_done(struct vnet *vn, vnet_tx_done_fn fn, void *arg);
int vnet_poll(struct vnet *vn);                /* one main-loop pass; <0 on device error */
void vnet_before_wait(struct vnet *vn);        /* nothing may stay unkicked while we wait */
bool vnet_kick_pending(const struct vnet *vn); /* frames published but not yet kicked */
/* End of a run only (not a policy point): kick everything, wait until the
 * device has completed every TX frame. 0, -1 on timeout, -VNET_EDEVICE. */
int vnet_drain(struct vnet *vn, uint64_t timeout_ns);
int vnet_check(struct vnet *vn); /* read device status now; -VNET_EDEVICE if broken */
const char *vnet_irq_mode(const struct vnet *vn); /* "msix", "intx" or "none" (IDLE=poll) */

/* vnet_idle.c: the idle policy (vnet_policy.h VNET_IDLE), called once at the
 * end of every main-loop pass. It decides from the driver's own counters
 * whether the pass did work; if not it spins (poll, optionally with a
 * pause), or re-arms notifications and halts until an interrupt, the
 * caller's next deadline (asked only then: deadline(arg), clock_ns() time,
 * 0 = none) or VNET_IDLE_HALT_MAX_US. */
typedef uint64_t (*vnet_deadline_fn)(void *arg);
void vnet_idle(struct vnet *vn, vnet_deadline_fn deadline, void *arg);
void vnet_idle_counters(const struct vnet *vn, struct vnet_idle_stats *s);
void vnet_idle_print(const struct vnet *vn); /* the IDLE {...} line (also in vnet_print_counters) */
const char *vnet_idle_policy(void);          /* "poll", "halt" or "adaptive:50us", ",pause" added */
const char *vnet_error(const struct vnet *vn); /* first error, "" if none */
void vnet_counters(const struct vnet *vn, struct vnet_counters *rx, struct vnet_counters *tx);
void vnet_print_counters(const struct vnet *vn); /* COUNTERS {...} lines */
void vnet_print_rings(
    const struct vnet *vn); /* RING {...} lines (and RXBUFS), for an ERROR or ctl state */

/* vnet_tx.c: transmit */
/* Queue one frame (virtio header added by the driver). 0 = accepted (and will
 * be completed through tx_done), -VNET_EAGAIN = ring full (nothing queued,
 * any pending kick already flushed), -VNET_EINVAL (also: an offload the
 * device did not accept, or a header that contradicts the frame),
 * -VNET_EDEVICE. o may be NULL (no offload). */
int vnet_tx(struct vnet *vn, const struct vnet_seg *segs, unsigned nseg, const struct vnet_txo *o,
            void *cookie);
/* End of a burst (the xmit_more=false point): kick=burst kicks here,
 * avail=batched publishes here. */
void vnet_tx_end_burst(struct vnet *vn);
/* Send a received frame back out in its own buffer, edited in place or not
 * (f->len bytes from f->buf[0].data; the driver writes the virtio-net
 * header into the 12 bytes in front of it). The same reclaim and kick
 * policies as vnet_tx(). 0: the driver owns the buffer now and re-posts it
 * to RX once the device has sent it (at reclaim; in copy builds,
 * VNET_ZEROCOPY=0, the frame is copied and the buffer re-posted at once);
 * tx_done is not called for it. <0 as vnet_tx(), and the caller still holds
 * the buffer. A frame whose checksum the device left partial
 * (VNET_RX_F_CSUM_PARTIAL) is sent NEEDS_CSUM with the same offsets. One
 * buffer only: a merged (large-receive) frame is -VNET_EINVAL. */
int vnet_tx_forward(struct vnet *vn, const struct vnet_rx *f);
uint16_t vnet_tx_ring_size(const struct vnet *vn); /* TX descriptors */

/* vnet_rx.c: receive */
/* 1 = a frame in *out (every out->buf[i].handle to be released), 0 = none
 * yet (or this pass's VNET_RX_BUDGET frames were handed up: vnet_poll()
 * starts the next pass), -VNET_EDEVICE. */
int vnet_rx(struct vnet *vn, struct vnet_rx *out);
void vnet_rx_release(struct vnet *vn, void *handle);
void vnet_rx_release_frame(struct vnet *vn, const struct vnet_rx *f); /* every buffer */

#endif
