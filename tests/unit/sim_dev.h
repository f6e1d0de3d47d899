/*
 * sim_dev.h: a simulated virtio device for the host unit tests. It plays the
 * device side of a split ring (virtio 1.2 2.7) or of a packed one (2.8,
 * whichever the driver's virtq_init() set up) in the same process: consumes
 * avail entries, produces used entries (in order, or reordered as 2.7.8
 * allows), publishes avail_event / NO_NOTIFY like QEMU's virtio-net, counts
 * doorbells and the interrupts it would raise, checks the driver's rings,
 * and injects each device fault the driver must survive.
 *
 * Device model, per queue: idle (notifications enabled: flags 0,
 * avail_event = next entry it will read) until a doorbell; then busy
 * (NO_NOTIFY set, avail_event left stale) until sim_run() processes
 * everything and re-arms. In SIM_SYNC mode the doorbell itself runs the
 * queue, as a very fast device would. RX here takes any buffer posted
 * when a frame is injected; sim_rx.h is QEMU 7.2's receive side on top of
 * this file, which parks when a frame does not fit and waits for a kick
 * (test_rx_contract.c).
 */
#ifndef VNETLAB_SIM_DEV_H
#define VNETLAB_SIM_DEV_H

#include <stdbool.h>
#include <stdint.h>
#include "drivers/virtio/virtio_irq.h"
#include "drivers/virtio/virtq.h"

#define SIM_FRAME_MAX (12 + 65536) /* a TSO frame with its header */
#define SIM_WBUF_MAX  4            /* writable descriptors remembered per chain */
/* Queues the device can have: up to three pairs and the control queue
 * (sim_net_mq_reset(); 5.1.2: receiveq k+1 at 2k, transmitq k+1 at 2k+1,
 * controlq at 2 * max_virtqueue_pairs: with 2 pairs rx0, tx0, rx1, tx1,
 * ctrl at 4). Single-pair devices use q[0..1]. */
#define SIM_MAX_PAIRS 3
#define SIM_QUEUES    (2 * SIM_MAX_PAIRS + 1)

enum sim_fault {
	SIM_FAULT_NONE,
	SIM_FAULT_ID_RANGE,      /* used id beyond the queue */
	SIM_FAULT_NOT_IN_FLIGHT, /* an id already returned (completed twice) */
	SIM_FAULT_NOT_HEAD,      /* a descriptor in the middle of a chain */
	SIM_FAULT_LEN,           /* used len one past the writable bytes */
	SIM_FAULT_IDX_JUMP,      /* used idx moved by size + 1 with no entries */
	SIM_FAULT_IDX_AHEAD,     /* used idx one past everything the driver published */
	SIM_FAULT_UNPUBLISHED,   /* completes the chain in the avail slot past avail->idx */
	SIM_FAULT_LEN_READONLY,  /* used len > 0 on a chain with nothing writable */
	/* Packed ring only (the three split-only ones above, NOT_HEAD,
	 * IDX_JUMP and IDX_AHEAD, have no packed meaning and are ignored): */
	SIM_FAULT_WRAP,       /* used descriptor written with the wrong wrap counter */
	SIM_FAULT_WRAP_STUCK, /* the device never toggles its wrap counter (fails a lap later) */
	SIM_FAULT_USED_TWICE, /* one buffer marked used twice, in two used descriptors */
	SIM_FAULT_KINDS
};

/* How the control queue (5.1.6.5) answers a command. */
enum sim_ctrl_answer {
	SIM_CTRL_OK,    /* VIRTIO_NET_OK, and VQ_PAIRS_SET takes effect */
	SIM_CTRL_ERR,   /* VIRTIO_NET_ERR */
	SIM_CTRL_NEVER, /* takes the command and never returns it */
};

enum sim_mode {
	SIM_MANUAL, /* the test calls sim_run() */
	SIM_SYNC,   /* a doorbell runs the queue at once */
};

struct sim_chain {
	uint16_t head, ndesc; /* packed: head is the Buffer ID */
	uint32_t readable, writable;
	uint32_t first_len;
	uint32_t written; /* bytes the device wrote (RX): the used len */
	uint8_t nw;
	struct {
		uint64_t addr;
		uint32_t len;
	} w[SIM_WBUF_MAX];
};

struct sim_queue {
	struct virtq_desc *desc;
	struct virtq_avail *avail;
	struct virtq_used *used;
	uint16_t size, qidx;
	bool event_idx, ready;

	/* Packed layout (2.8): the ring, the two event structures, and the
	 * device's positions with its wrap counters (2.8.1). */
	bool packed;
	struct virtq_pdesc *pdesc;
	struct virtq_event *driver_event, *device_event;
	uint16_t avail_pos, used_pos, irq_pos; /* irq_pos: used_pos at the last interrupt check */
	bool avail_wrap, used_wrap, irq_wrap;
	uint16_t irq_count; /* used_idx at the last interrupt check */

	uint16_t last_avail; /* next avail entry the device reads (packed: chains taken) */
	uint16_t used_idx;   /* device's shadow of used->idx (packed: used descriptors written) */
	bool busy;
	bool starved;           /* RX: a frame found no buffer; waiting for a doorbell */
	bool kicked_since_idle; /* a doorbell arrived since the device re-armed */
	struct sim_chain pending[VIRTQ_MAX_SIZE];
	unsigned npending;

	uint64_t doorbells, consumed, completed, interrupts;
	enum sim_fault fault;          /* armed: the next completion carries it */
	bool ahead;                    /* SIM_FAULT_IDX_AHEAD taken, index not yet moved */
	bool was_head[VIRTQ_MAX_SIZE]; /* completed as a head at some point */
	bool reorder;
	uint32_t rng;
	/* Schedule knobs for sim_run(): keep the newest `lag` chains back
	 * (a device that lags behind), and complete in bursts of 1..burst_max
	 * chains, each published with its own used->idx update (0: one). */
	unsigned lag, burst_max;
	uint16_t event_ahead; /* EVENT_IDX: ask for a kick only this many entries later */
	/* An emulator whose guest fences do not reach the device thread (QEMU
	 * 7.2's TCG with one vCPU, see virtq_enable_cb_after()): the device
	 * decides whether to interrupt from the used_event / avail->flags it
	 * saw at the driver's last register access (a doorbell or a register
	 * read, which the emulator serialises with the device), not from what
	 * the driver stored since. A completion the test plays later stands
	 * for one that raced the driver's re-arm and lost. */
	bool weak_order;
	uint16_t seen_used_event, seen_avail_flags;
	uint16_t seen_avail_idx; /* split: avail->idx at that access (sim_rx.h's weak mode) */

	/* TX capture: the last frame and a running sum over all frames */
	uint64_t frames, bytes, byte_sum;
	uint8_t last[SIM_FRAME_MAX];
	uint32_t last_len;
	struct sim_chain last_chain;
};

struct sim_dev {
	uint8_t status;
	uint64_t offered, accepted;
	bool refuse_features;
	uint16_t num_queues, max_qsize;
	uint8_t cfg[24]; /* virtio_net_config, up to supported_hash_types */
	uint8_t cfg_generation;
	/* Register reads the poll loop's status check makes (exits under
	 * KVM): the device status and the device-config reads. */
	unsigned status_reads, cfg_reads;
	/* RX: the virtio-net header the device writes in front of each frame,
	 * every field (sim_reset: num_buffers 1, the rest 0). */
	struct virtio_net_hdr rx_hdr;
	struct sim_queue q[SIM_QUEUES];
	enum sim_mode mode;
	/* Multiqueue (VIRTIO_NET_F_MQ, 5.1.6.5.5): the control queue's index
	 * (0: none, a single-pair device), how it answers, what it was sent
	 * (every command's class, command and first data bytes, the last
	 * one's readable length), and the pairs the device uses: 1 until a
	 * VQ_PAIRS_SET (or RSS_CONFIG's max_tx_vq) it answered OK. */
	uint16_t ctrl_qidx;
	enum sim_ctrl_answer ctrl_answer;
	unsigned ctrl_cmds;
	uint8_t ctrl_class, ctrl_cmd, ctrl_data[320]; /* RSS_CONFIG's is the longest */
	uint32_t ctrl_len;
	uint16_t mq_pairs;
	/* The driver's interrupt plan (sim_pci.c irq_setup): which CPU each
	 * queue's interrupt is to reach. */
	struct virtio_irq_plan irq_plan;
	unsigned irq_setups;
	unsigned driver_errors; /* rule breaks by the driver */
	char last_error[256];
};

extern struct sim_dev sim;

void sim_reset(uint64_t offered);
/* sim_reset(), then a virtio-net config space as QEMU's: MAC
 * 52:54:00:12:34:56, link up, this MTU. */
void sim_net_reset(uint64_t offered, uint16_t mtu);
/* sim_net_reset(), then VIRTIO_NET_F_MQ and CTRL_VQ offered too, a config
 * with max_virtqueue_pairs = pairs (1..SIM_MAX_PAIRS), 2 * pairs + 1
 * queues and the control queue last, answering OK. */
void sim_net_mq_reset(uint64_t offered, uint16_t mtu, uint16_t pairs);
/* After sim_net_mq_reset(): also offer VIRTIO_NET_F_RSS with these
 * rss_max_key_size, rss_max_indirection_table_length and
 * supported_hash_types (5.1.4). */
void sim_net_rss_offer(uint8_t key_max, uint16_t table_max, uint32_t hash_types);
void sim_attach(struct sim_queue *q, const struct virtq *vq, uint16_t qidx);
void sim_doorbell(uint16_t qidx, uint16_t avail_idx);
void sim_register_access(void); /* the driver read a device register (weak_order) */
unsigned sim_consume(struct sim_queue *q, unsigned max);
unsigned sim_complete(struct sim_queue *q, unsigned max);
void sim_idle(struct sim_queue *q);
void sim_run(struct sim_queue *q);
bool sim_rx_inject(const void *frame, uint32_t len);
/* The same on receiveq qidx / 2 + 1 (qidx even); false also for a pair the
 * device does not use yet (5.1.6.5.5). */
bool sim_rx_inject_q(uint16_t qidx, const void *frame, uint32_t len);
int sim_rx_inject_hdr(const struct virtio_net_hdr *h, const void *frame, uint32_t len, int claim,
                      int complete);
bool sim_lost_wakeup(const struct sim_queue *q);
/* Would the next used buffer raise an interrupt? (the driver's request
 * in used_event / NO_INTERRUPT, or the packed Driver Area) */
bool sim_irq_armed(const struct sim_queue *q);
void sim_driver_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
uint16_t sim_published(const struct sim_queue *q);

#endif
