/*
 * vnet_fixture.h: the test_vnet binary's shared fixture (vnet_fixture.c)
 * and its tests, grouped by the file that holds them. One binary per
 * policy variant (unit.mk): the driver (vnet*.c + one ring file) against
 * the simulated device (sim_dev.c) over the simulated transport
 * (sim_pci.c).
 */
#ifndef VNETLAB_VNET_FIXTURE_H
#define VNETLAB_VNET_FIXTURE_H

#include <stdio.h>
#include <string.h>
#include "drivers/virtio/vnet_priv.h"
#include "tests/unit/check.h"
#include "tests/unit/host_shim.h"
#include "tests/unit/sim_dev.h"

/* What QEMU's virtio-net offers with packed=on (and NOTIFICATION_DATA,
 * which 7.2 does not). */
#define SIM_FEATURES                                                                               \
	(VIRTIO_BIT(VIRTIO_F_VERSION_1) | VIRTIO_BIT(VIRTIO_NET_F_MAC) |                           \
	 VIRTIO_BIT(VIRTIO_NET_F_STATUS) | VIRTIO_BIT(VIRTIO_F_EVENT_IDX) |                        \
	 VIRTIO_BIT(VIRTIO_NET_F_MRG_RXBUF) | VIRTIO_BIT(VIRTIO_NET_F_CSUM) |                      \
	 VIRTIO_BIT(VIRTIO_NET_F_GUEST_CSUM) | VIRTIO_BIT(VIRTIO_NET_F_MTU) |                      \
	 VIRTIO_BIT(VIRTIO_NET_F_HOST_TSO4) | VIRTIO_BIT(VIRTIO_NET_F_GUEST_TSO4) |                \
	 VIRTIO_BIT(VIRTIO_F_INDIRECT_DESC) | VIRTIO_BIT(VIRTIO_F_NOTIFICATION_DATA) |             \
	 VIRTIO_BIT(VIRTIO_F_RING_PACKED))

#define FRAME_LEN 60
#define POOL      1024 /* frame buffers; cookie % POOL, reuse checked */
#define COOKIES   200000
#define HEADROOM  16

/* vnet_fixture.c: one driver over the simulated device, frames it sends */
extern struct vnet *vn;
extern struct sim_queue *txd, *rxd;
extern uint8_t pool[POOL][HEADROOM + FRAME_LEN];
extern uint8_t done_count[COOKIES]; /* tx_done calls per cookie */
extern unsigned done_total, done_twice;
extern uint64_t sent_sum; /* byte sum of every frame accepted */
extern unsigned next_cookie;
/* A fresh device offering these features, link up, MTU 1500. */
void dev_config(uint64_t offered, enum sim_mode mode);
/* dev_config(SIM_FEATURES), then vnet_open(); NULL (a failed check) if it fails. */
struct vnet *dev_open(enum sim_mode mode);
/* One 60-byte frame in two segments (Ethernet header, rest) from the pool. */
int send_frame(void);
unsigned descs_per_frame(void);
void counters(struct vnet_counters *rx, struct vnet_counters *tx);
/* The appliance is about to wait: one main-loop pass (plus, for the
 * labelled timer variant, the time its hold allows). */
void settle(void);

/* test_vnet.c: bring-up (vnet.c), link state, barrier B's set-up */
void test_kick_sync_every_policy(void);
void test_bringup(void);
void test_bringup_failures(void);
void test_device_mtu_larger_than_buffers(void);
void test_status_check_period(void);
void test_link_down(void);

/* test_vnet_kick.c: TX_KICK and avail publication (vnet_tx.c's kick sites) */
void test_burst_kicks_sync_device(void);
void test_burst_kicks_sleepy_device(void);
void test_avail_publish(void);
void test_no_pending_kick_when_idle(void);
void test_kick_hold_bound(void);
void test_poll_flushes_kick(void);
void test_event_idx_ahead(void);

/* test_vnet_tx.c: the TX path: back-pressure, layouts, wraparound, liveness, drain */
void test_backpressure(void);
void test_tx_layout(void);
void test_wraparound(void);
void test_tx_idle_reclaim(void);
void test_tx_stale_reclaim_busy_stream(void);
void test_drain(void);

/* test_vnet_reclaim.c: TX_RECLAIM against a reference model of its steps */
void test_reclaim_order(void);
void test_random_schedules(void);

/* test_vnet_rx.c: the RX path (vnet_rx.c) */
void test_rx_path(void);
void test_rx_header_fields(void);
void test_rx_budget(void);

/* test_vnet_faults.c: device faults through the driver */
void test_faults(void);
void test_tx_used_len(void);

/* test_vnet_idle.c: the idle policy and RX interrupt moderation (vnet_idle.c) */
void test_idle_policy(void);
void test_rx_coalesce(void);
void test_idle_weak_fences(void);

/* test_vnet_mq.c: multiqueue on a two-pair device (vnet_mq.c); runs its own */
void test_vnet_mq(void);

#endif
