/*
 * vnet_policy.h: every compile-time policy of the virtio-net driver, with its
 * default, its validation and the combinations that make no sense. The
 * Makefile sets them from TX_RECLAIM=, TX_KICK=, ... (each declared once in
 * mk/policies.def, which mk/variants.mk reads; tests/cases/test_policies.py
 * checks this header against it); code uses the VNET_IS_* 0/1 constants
 * below in plain `if`, never `#if`, so every variant type-checks in every
 * build (Linux IS_ENABLED(), lwIP opt.h).
 * vnet_variant() prints the choice so two result lines say how they differ.
 */
#ifndef VNETLAB_VNET_POLICY_H
#define VNETLAB_VNET_POLICY_H

/* ---- TX_RECLAIM: where the one reclaim routine is called ----
 *
 * The 2011 "limit xmit polling" variants, as Michael S. Tsirkin defined them
 * in the RFT mail that started the thread (2011-06-19):
 *
 *   "virtio-net-limit-xmit-polling/base - this is net-next baseline to test against
 *    virtio-net-limit-xmit-polling/v0 - fixes checks on out of capacity
 *    virtio-net-limit-xmit-polling/v1 - previous revision of the patch
 *            this does xmit,free,xmit,2*free,free
 *    virtio-net-limit-xmit-polling/v2 - new revision of the patch
 *            this does free,xmit,2*free,free
 *    There's also this on top:
 *    virtio-net-limit-xmit-polling/v3 -> don't delay avail index update"
 *
 * and later in the thread (2011-06-29): "I found out that V0 because of
 * mistake on my part was actually almost identical to base."
 *
 * Our reading, in this driver's terms. The thread gives only the shorthand;
 * the words map onto the 2011 start_xmit() like this:
 *   "xmit"   add the frame's chain (and, unless stated otherwise, publish it
 *            and take the TX_KICK decision, as virtqueue_kick() did then);
 *   "free"   free_old_xmit_skbs(): reclaim every completed frame;
 *   "2*free" free two: reclaim at most VNET_RECLAIM_K (2) completed frames,
 *            so reclamation keeps pace with transmission without polling
 *            the whole used ring on every frame ("limit xmit polling");
 *   the capacity checks decide the conditional steps: a "free" after a
 *   failed "xmit" runs only because the ring was full, and the final "free"
 *   only when fewer descriptors are free than a worst-case frame needs
 *   (VNET_TX_WORST_DESC, Linux 2+MAX_SKB_FRAGS): Linux's stop-the-queue
 *   branch ("More just got used, free them then recheck").
 * Step by step, per frame in vnet_tx():
 *   base  free; xmit; if free descriptors < worst case: free
 *   v0    as base. v0 fixed the capacity estimate after that last free (it
 *         counted the freed skbs' scatter entries, an overestimate with
 *         indirect descriptors, instead of reading the ring's capacity);
 *         this driver uses no indirect descriptors and always reads the
 *         ring's exact free count, so the two cannot differ here, which is
 *         what the thread found for the v0 that was tested.
 *   v1    xmit (if the ring is full: free, xmit again); 2*free;
 *         if free descriptors < worst case: free
 *   v2    free; add; 2*free; if free descriptors < worst case: free; then
 *         publish and take the kick decision: the avail index update is
 *         delayed behind the frees, as in the 2011 ring where the index
 *         moved only in virtqueue_kick()
 *   v3    v2 with the avail index published right after the add (before the
 *         frees), the kick decision still after them: "don't delay avail
 *         index update". So v3 needs AVAIL_PUBLISH=eager.
 * Every variant but poll also takes a full "free" when the ring is full,
 * before returning back-pressure. Our "stop the queue" is that back-pressure: a
 * frame is refused only when its own chain does not fit (the driver knows
 * each frame's exact need), so no entries are wasted.
 *
 * Extras, not in the thread:
 *   after  xmit; free
 *   lazy   free only when fewer than VNET_LAZY_THRESH descriptors are free (DPDK)
 *   poll   never on the TX path; only from vnet_poll() (TX NAPI)
 * `before` (this project's old name for base) is accepted as an alias.
 *
 * Liveness, every policy: when the TX path has been idle for
 * VNET_TX_IDLE_RECLAIM_US with completions waiting, vnet_poll() reclaims
 * them, counted apart (idle_reclaim_calls / idle_reclaimed), so a zero-copy
 * frame the device has finished does not stay referenced (lwIP will not
 * retransmit a segment whose pbuf is still referenced). Busy TX does not
 * trigger it. A busy TX path whose policy does not reclaim (lazy above its
 * threshold: a steady stream of ACKs for an inbound flow) is bounded
 * apart: completions left waiting with no reclaim of any kind for
 * VNET_TX_STALE_RECLAIM_US are taken back the same way, so no completed
 * frame stays referenced longer than that (plus one main-loop pass).
 * Every policy that reclaims on its own TX path stays below that bound, so
 * only lazy (under a slow stream) is changed, by one counted reclaim per
 * bound.
 */
#define VNET_RECLAIM_BASE   1
#define VNET_RECLAIM_V0     2
#define VNET_RECLAIM_V1     3
#define VNET_RECLAIM_V2     4
#define VNET_RECLAIM_V3     5
#define VNET_RECLAIM_AFTER  6
#define VNET_RECLAIM_LAZY   7
#define VNET_RECLAIM_POLL   8
#define VNET_RECLAIM_BEFORE VNET_RECLAIM_BASE /* old name */

#ifndef VNET_TX_RECLAIM
#define VNET_TX_RECLAIM VNET_RECLAIM_BASE
#endif
#if VNET_TX_RECLAIM < VNET_RECLAIM_BASE || VNET_TX_RECLAIM > VNET_RECLAIM_POLL
#error "VNET_TX_RECLAIM: unknown value (base|v0|v1|v2|v3|after|lazy|poll)"
#endif

/* v1/v2/v3: completions taken back per transmitted frame ("2*free"). */
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

/* Liveness: TX idle this long with completions waiting -> reclaim them. */
#ifndef VNET_TX_IDLE_RECLAIM_US
#define VNET_TX_IDLE_RECLAIM_US 1000
#endif
/* The bound on a completed frame's wait for reclaim while TX stays busy:
 * well below lwIP's smallest retransmission timeout (TCP_SLOW_INTERVAL
 * 500 ms ticks), well above lazy's own reclaim interval at benchmark
 * rates (224 frames). */
#ifndef VNET_TX_STALE_RECLAIM_US
#define VNET_TX_STALE_RECLAIM_US 20000
#endif
#if VNET_TX_STALE_RECLAIM_US < 1 || VNET_TX_STALE_RECLAIM_US > 100000
#error "VNET_TX_STALE_RECLAIM_US must be in 1..100000 (a TCP RTO is at least 200 ms)"
#endif
#if VNET_TX_IDLE_RECLAIM_US < 1 || VNET_TX_IDLE_RECLAIM_US > 100000
#error "VNET_TX_IDLE_RECLAIM_US must be in 1..100000 (a TCP RTO is at least 200 ms)"
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
#if VNET_AVAIL_BATCHED && VNET_TX_RECLAIM == VNET_RECLAIM_V3
#error                                                                                             \
    "reclaim=v3 is v2 that publishes the avail index at once (\"don't delay avail index update\"): use avail=eager"
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

/* ---- IDLE: what the main loop does when a pass found no work ----
 * poll:     spin on the rings (the 100 %-of-a-vCPU baseline).
 * halt:     interrupt-driven: re-arm used-buffer notifications (EVENT_IDX
 *           used_event or NO_INTERRUPT), re-check the rings, `sti; hlt`
 *           until an interrupt or the next timer deadline.
 * adaptive: poll for VNET_IDLE_POLL_US after the last work, then halt
 *           (the guest-side counterpart of vhost's poll_stop_idle, 2014).
 * Halting needs MSI-X or INTx from the device (vnet_open() fails without). */
#define VNET_IDLE_POLL     1
#define VNET_IDLE_HALT     2
#define VNET_IDLE_ADAPTIVE 3

#ifndef VNET_IDLE
#define VNET_IDLE VNET_IDLE_POLL
#endif
#if VNET_IDLE < VNET_IDLE_POLL || VNET_IDLE > VNET_IDLE_ADAPTIVE
#error "VNET_IDLE: unknown value (poll|halt|adaptive)"
#endif

#ifndef VNET_IDLE_POLL_US
#define VNET_IDLE_POLL_US 50
#endif
#if VNET_IDLE_POLL_US < 0 || VNET_IDLE_POLL_US > 1000000
#error "VNET_IDLE_POLL_US must be in 0..1000000"
#endif

/* Longest single halt: also the cadence of the status/link check and the
 * apps' own ticks (timeouts) while nothing happens. */
#ifndef VNET_IDLE_HALT_MAX_US
#define VNET_IDLE_HALT_MAX_US 10000
#endif
#if VNET_IDLE_HALT_MAX_US < 10 || VNET_IDLE_HALT_MAX_US > 1000000
#error "VNET_IDLE_HALT_MAX_US must be in 10..1000000"
#endif

/* ---- RX_COALESCE: RX interrupt moderation for the halt policies ----
 * 1 (default): before halting ask for an interrupt on the next used RX
 * entry. N > 1 (needs EVENT_IDX): ask for it only after k entries
 * (used_event = last_used + k - 1, virtio 1.x 2.7.10), where k adapts
 * between 1 and N: it doubles while each wake finds at least 2k entries
 * waiting (a stream outruns the wake-ups), falls back to what came when
 * the wait ran into VNET_RX_COALESCE_US (the bound on the extra delay),
 * and never exceeds half the RX buffers posted. An RR exchange (one frame
 * per wake) keeps k = 1. ---- */
#ifndef VNET_RX_COALESCE
#define VNET_RX_COALESCE 1
#endif
#if VNET_RX_COALESCE < 1 || VNET_RX_COALESCE > 1024
#error "VNET_RX_COALESCE must be in 1..1024 (used entries per RX interrupt at most)"
#endif
#ifndef VNET_RX_COALESCE_US
#define VNET_RX_COALESCE_US 100
#endif
#if VNET_RX_COALESCE_US < 1 || VNET_RX_COALESCE_US > 100000
#error "VNET_RX_COALESCE_US must be in 1..100000"
#endif

/* ---- RELAX: what an idle poll pass costs: nothing (0) or a `pause` (1).
 * Under TCG a pause is ~20-25 us per round trip; under KVM a spinning
 * pause loop can cause pause-loop exits. ---- */
#ifndef VNET_RELAX_PAUSE
#define VNET_RELAX_PAUSE 0
#endif
#if VNET_RELAX_PAUSE != 0 && VNET_RELAX_PAUSE != 1
#error "VNET_RELAX_PAUSE must be 0 (none) or 1 (pause)"
#endif

/* ---- RING: the virtqueue layout, split (2.7, virtq.c) or packed (2.8,
 * virtq_packed.c). The Makefile links the matching file (RING=); packed
 * builds negotiate VIRTIO_F_RING_PACKED and refuse a device without it.
 * Every TX_RECLAIM / TX_KICK / EVENT_IDX / AVAIL_PUBLISH / IDLE policy means
 * the same on both: the ring API (virtq.h) is the same. ---- */
#define VNET_RING_SPLIT  1
#define VNET_RING_PACKED 2

#ifndef VNET_RING
#define VNET_RING VNET_RING_SPLIT
#endif
#if VNET_RING != VNET_RING_SPLIT && VNET_RING != VNET_RING_PACKED
#error "VNET_RING: unknown value (split|packed)"
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

/* RX: frames vnet_rx() hands up per vnet_poll() pass (NAPI's weight), so a
 * continuous receive stream cannot starve the pass's TX kicks and reclaims:
 * after this many, vnet_rx() says "none" until the next vnet_poll(). */
#ifndef VNET_RX_BUDGET
#define VNET_RX_BUDGET 64
#endif
#if VNET_RX_BUDGET < 1 || VNET_RX_BUDGET > 65535
#error "VNET_RX_BUDGET must be in 1..65535"
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
#define VNET_IS_RECLAIM_BASE  (VNET_TX_RECLAIM == VNET_RECLAIM_BASE)
#define VNET_IS_RECLAIM_V0    (VNET_TX_RECLAIM == VNET_RECLAIM_V0)
#define VNET_IS_RECLAIM_V1    (VNET_TX_RECLAIM == VNET_RECLAIM_V1)
#define VNET_IS_RECLAIM_V2    (VNET_TX_RECLAIM == VNET_RECLAIM_V2)
#define VNET_IS_RECLAIM_V3    (VNET_TX_RECLAIM == VNET_RECLAIM_V3)
#define VNET_IS_RECLAIM_AFTER (VNET_TX_RECLAIM == VNET_RECLAIM_AFTER)
/* base and v0 run the same steps (see above). */
#define VNET_IS_RECLAIM_BASE_V0 (VNET_IS_RECLAIM_BASE || VNET_IS_RECLAIM_V0)
/* v2 and v3: free; add; 2*free; free if low. */
#define VNET_IS_RECLAIM_V2_V3 (VNET_IS_RECLAIM_V2 || VNET_IS_RECLAIM_V3)
#define VNET_IS_RECLAIM_LAZY  (VNET_TX_RECLAIM == VNET_RECLAIM_LAZY)
#define VNET_IS_RECLAIM_POLL  (VNET_TX_RECLAIM == VNET_RECLAIM_POLL)
#define VNET_IS_KICK_EVERY    (VNET_TX_KICK == VNET_KICK_EVERY)
#define VNET_IS_KICK_BURST    (VNET_TX_KICK == VNET_KICK_BURST)
#define VNET_IS_KICK_DEFERRED (VNET_TX_KICK == VNET_KICK_DEFERRED)
#define VNET_IS_KICK_TIMER    (VNET_TX_KICK == VNET_KICK_TIMER)
#define VNET_WANT_CSUM        (VNET_OFFLOAD >= VNET_OFFLOAD_CSUM)
#define VNET_WANT_TSO         (VNET_OFFLOAD >= VNET_OFFLOAD_TSO)
#define VNET_WANT_LRO         (VNET_OFFLOAD == VNET_OFFLOAD_LRO)
#define VNET_IS_IDLE_POLL     (VNET_IDLE == VNET_IDLE_POLL)
#define VNET_IS_IDLE_HALT     (VNET_IDLE == VNET_IDLE_HALT)
#define VNET_IS_IDLE_ADAPTIVE (VNET_IDLE == VNET_IDLE_ADAPTIVE)
#define VNET_IS_RING_PACKED   (VNET_RING == VNET_RING_PACKED)

#endif
