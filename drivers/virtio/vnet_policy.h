/*
 * vnet_policy.h: every compile-time policy of the virtio-net driver, with its
 * default, its validation and the combinations that make no sense. The
 * Makefile sets them from TX_RECLAIM=, TX_KICK=, ... (mk/variants.mk); code
 * uses the VNET_IS_* 0/1 constants below in plain `if`, never `#if`, so
 * every variant type-checks in every build (Linux IS_ENABLED(), lwIP opt.h).
 * vnet_variant() prints the choice so two result lines say how they differ.
 */
#ifndef VNETLAB_VNET_POLICY_H
#define VNETLAB_VNET_POLICY_H

/* ---- TX_RECLAIM: where the one reclaim routine is called ---- */
#define VNET_RECLAIM_BEFORE 1 /* reclaim all completed, then queue (2011 "base", Linux, Solo5) */
#define VNET_RECLAIM_AFTER  2 /* queue, then reclaim all completed */
#define VNET_RECLAIM_V1     3 /* 2011 v1: queue, then reclaim at most K */
#define VNET_RECLAIM_V2     4 /* 2011 v2: reclaim at most K, then queue */
#define VNET_RECLAIM_LAZY   5 /* reclaim all only when free descriptors < threshold (DPDK) */
#define VNET_RECLAIM_POLL   6 /* only from vnet_poll(), never on the TX path (TX NAPI) */

#ifndef VNET_TX_RECLAIM
#define VNET_TX_RECLAIM VNET_RECLAIM_BEFORE
#endif
#if VNET_TX_RECLAIM < VNET_RECLAIM_BEFORE || VNET_TX_RECLAIM > VNET_RECLAIM_POLL
#error "VNET_TX_RECLAIM: unknown value (before|after|v1|v2|lazy|poll)"
#endif

/* v1/v2: completions taken back per transmitted frame ("free 2" in 2011). */
#ifndef VNET_RECLAIM_K
#define VNET_RECLAIM_K 2
#endif
#if VNET_RECLAIM_K < 1
#error "VNET_RECLAIM_K must be at least 1"
#endif

/* lazy: reclaim once fewer than this many descriptors are free. */
#ifndef VNET_LAZY_THRESH
#define VNET_LAZY_THRESH 32
#endif

/* ---- TX_KICK: when a notification is decided ---- */
#define VNET_KICK_EVERY    1 /* after each frame (subject to suppression) */
#define VNET_KICK_BURST    2 /* at vnet_tx_end_burst(), and every VNET_KICK_BURST_MAX frames */
#define VNET_KICK_DEFERRED 3 /* once per vnet_poll() pass, and in vnet_before_wait() */
#define VNET_KICK_TIMER    4 /* LATENCY PENALTY ON PURPOSE: hold up to VNET_KICK_TIMER_US */

#ifndef VNET_TX_KICK
#define VNET_TX_KICK VNET_KICK_EVERY
#endif
#if VNET_TX_KICK < VNET_KICK_EVERY || VNET_TX_KICK > VNET_KICK_TIMER
#error "VNET_TX_KICK: unknown value (every|burst|deferred|timer)"
#endif

#ifndef VNET_KICK_BURST_MAX
#define VNET_KICK_BURST_MAX 32
#endif
#if VNET_KICK_BURST_MAX < 1
#error "VNET_KICK_BURST_MAX must be at least 1"
#endif

/* The 2008 batching patch held the doorbell until something else flushed
 * it; this variant holds it for a bounded time to show that cost. */
#ifndef VNET_KICK_TIMER_US
#define VNET_KICK_TIMER_US 150
#endif
#if VNET_KICK_TIMER_US < 1
#error "VNET_KICK_TIMER_US must be at least 1"
#endif

/* ---- EVENT_IDX: VIRTIO_F_EVENT_IDX required (1) or not offered to the device (0) ---- */
#ifndef VNET_EVENT_IDX
#define VNET_EVENT_IDX 1
#endif
#if VNET_EVENT_IDX != 0 && VNET_EVENT_IDX != 1
#error "VNET_EVENT_IDX must be 0 or 1"
#endif

/* ---- AVAIL_PUBLISH: avail->idx per frame (0, eager) or per burst (1, batched) ---- */
#ifndef VNET_AVAIL_BATCHED
#define VNET_AVAIL_BATCHED 0
#endif
#if VNET_AVAIL_BATCHED != 0 && VNET_AVAIL_BATCHED != 1
#error "VNET_AVAIL_BATCHED must be 0 or 1"
#endif
#if VNET_AVAIL_BATCHED && VNET_TX_KICK == VNET_KICK_EVERY
#error "avail=batched with kick=every: a kick per frame must publish per frame; use avail=eager"
#endif

/* ---- TXHDR: virtio-net header inline before the frame (1) or its own descriptor (0) ---- */
#ifndef VNET_TXHDR_INLINE
#define VNET_TXHDR_INLINE 1
#endif
#if VNET_TXHDR_INLINE != 0 && VNET_TXHDR_INLINE != 1
#error "VNET_TXHDR_INLINE must be 0 or 1"
#endif

/* ---- ZEROCOPY: TX descriptors point at the caller's buffers (1) or a driver copy (0) ---- */
#ifndef VNET_ZEROCOPY
#define VNET_ZEROCOPY 1
#endif
#if VNET_ZEROCOPY != 0 && VNET_ZEROCOPY != 1
#error "VNET_ZEROCOPY must be 0 or 1"
#endif

/* ---- OFFLOAD: what the device is asked to do for the stack ----
 * none: 1500-byte frames, every checksum in software (the 2011 reclaim/kick
 *       experiments at frame granularity);
 * csum: + CSUM/GUEST_CSUM: the device fills TCP checksums we mark NEEDS_CSUM
 *       and vouches for received ones (5.1.6.2, 5.1.6.4);
 * tso:  + HOST_TSO4: lwIP hands over TCP segments up to 64 KB, the device
 *       cuts them at the connection's MSS;
 * lro:  + GUEST_TSO4 with MRG_RXBUF: the host delivers up to 64 KB per frame
 *       into merged receive buffers (named "tso+lro" in the variant).
 * Each level includes the ones before; the spec's dependencies (TSO needs
 * CSUM, 5.1.3.1) hold by construction. Features the device does not offer
 * are not negotiated and the stack falls back to software. */
#define VNET_OFFLOAD_NONE 0
#define VNET_OFFLOAD_CSUM 1
#define VNET_OFFLOAD_TSO  2
#define VNET_OFFLOAD_LRO  3

#ifndef VNET_OFFLOAD
#define VNET_OFFLOAD VNET_OFFLOAD_LRO
#endif
#if VNET_OFFLOAD < VNET_OFFLOAD_NONE || VNET_OFFLOAD > VNET_OFFLOAD_LRO
#error "VNET_OFFLOAD: unknown value (none|csum|tso|lro)"
#endif

/* ---- Optional device features, negotiated only when built in and offered ---- */
/* Large receive needs merged buffers: without MRG_RXBUF every RX buffer
 * would have to hold 65562 bytes (5.1.6.3.1). */
#ifndef VNET_MRG_RXBUF
#define VNET_MRG_RXBUF (VNET_OFFLOAD == VNET_OFFLOAD_LRO)
#endif
#ifndef VNET_NOTIFICATION_DATA
#define VNET_NOTIFICATION_DATA 0
#endif
#if (VNET_MRG_RXBUF | VNET_NOTIFICATION_DATA) & ~1
#error "VNET_MRG_RXBUF and VNET_NOTIFICATION_DATA must be 0 or 1"
#endif
#if VNET_OFFLOAD == VNET_OFFLOAD_LRO && !VNET_MRG_RXBUF
#error "offload=lro needs MRG_RXBUF=1 (64 KB frames in merged 4 KiB buffers)"
#endif

/* ---- Sizes ---- */
/* Cap on the queue size the device offers (QEMU: 256). */
#ifndef VIRTQ_MAX_SIZE
#define VIRTQ_MAX_SIZE 256
#endif
#if VIRTQ_MAX_SIZE < 4 || VIRTQ_MAX_SIZE > 32768 || (VIRTQ_MAX_SIZE & (VIRTQ_MAX_SIZE - 1))
#error "VIRTQ_MAX_SIZE must be a power of two in 4..32768"
#endif
#if VNET_LAZY_THRESH < 1 || VNET_LAZY_THRESH >= VIRTQ_MAX_SIZE
#error "VNET_LAZY_THRESH must be in 1..VIRTQ_MAX_SIZE-1"
#endif

/* RX buffers are re-posted this many at a time (or sooner if the ring runs
 * low). With large receive a 64 KB frame takes 17 buffers: re-post about
 * four frames' worth at once, or a device that outruns us (QEMU fills the
 * whole ring between two polls) waits for a kick per frame. */
#ifndef VNET_RX_REFILL_BATCH
#define VNET_RX_REFILL_BATCH (VNET_WANT_LRO ? 64 : 16)
#endif
#if VNET_RX_REFILL_BATCH < 1 || VNET_RX_REFILL_BATCH > VIRTQ_MAX_SIZE
#error "VNET_RX_REFILL_BATCH must be in 1..VIRTQ_MAX_SIZE"
#endif

/* ---- 0/1 constants for plain `if` ---- */
#define VNET_IS_RECLAIM_BEFORE (VNET_TX_RECLAIM == VNET_RECLAIM_BEFORE)
#define VNET_IS_RECLAIM_AFTER  (VNET_TX_RECLAIM == VNET_RECLAIM_AFTER)
#define VNET_IS_RECLAIM_V1     (VNET_TX_RECLAIM == VNET_RECLAIM_V1)
#define VNET_IS_RECLAIM_V2     (VNET_TX_RECLAIM == VNET_RECLAIM_V2)
#define VNET_IS_RECLAIM_LAZY   (VNET_TX_RECLAIM == VNET_RECLAIM_LAZY)
#define VNET_IS_RECLAIM_POLL   (VNET_TX_RECLAIM == VNET_RECLAIM_POLL)
#define VNET_IS_KICK_EVERY     (VNET_TX_KICK == VNET_KICK_EVERY)
#define VNET_IS_KICK_BURST     (VNET_TX_KICK == VNET_KICK_BURST)
#define VNET_IS_KICK_DEFERRED  (VNET_TX_KICK == VNET_KICK_DEFERRED)
#define VNET_IS_KICK_TIMER     (VNET_TX_KICK == VNET_KICK_TIMER)
#define VNET_WANT_CSUM         (VNET_OFFLOAD >= VNET_OFFLOAD_CSUM)
#define VNET_WANT_TSO          (VNET_OFFLOAD >= VNET_OFFLOAD_TSO)
#define VNET_WANT_LRO          (VNET_OFFLOAD == VNET_OFFLOAD_LRO)

#endif
