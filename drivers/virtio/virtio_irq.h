/*
 * virtio_irq.h: which CPU each queue's interrupt should reach, and the
 * MSI-X table layout that follows from it (virtio_irq.c, pure logic: the
 * host unit tests run it as is). The driver (vnet.c) says where each queue
 * is polled; the transport (virtio_pci.c) writes the table entries and the
 * queue -> entry selection (virtio 1.2 4.1.4.3, 4.1.5.1.2), or refuses
 * when its interrupts cannot reach those CPUs (one INTx line, virtio-mmio's
 * single line: both end at the BSP).
 */
#ifndef VNETLAB_VIRTIO_IRQ_H
#define VNETLAB_VIRTIO_IRQ_H

#include <stddef.h>
#include <stdint.h>

/* Queues that can have an interrupt: receiveq and transmitq of 8 pairs
 * (the control queue is polled: NO_VECTOR). */
#define VIRTIO_IRQ_QUEUES 16

/* What the driver asks for: queue q (0 .. nqueues-1) interrupts the CPU
 * whose local APIC id is dest[q]; configuration changes go to cfg_dest. */
struct virtio_irq_plan {
	unsigned nqueues;
	uint32_t cfg_dest;
	uint32_t dest[VIRTIO_IRQ_QUEUES];
};

/* An MSI-X layout: entries [0, used) of the table. Entry e's message goes
 * to APIC id entry_dest[e] and its handler counts in counter slot
 * entry_slot[e] (virtio_dev.h: 0 config, 1 + q queue q); queue q selects
 * entry queue_entry[q]. Entry 0 is always the configuration vector. */
struct virtio_msix_layout {
	unsigned used;
	uint16_t queue_entry[VIRTIO_IRQ_QUEUES];
	uint32_t entry_dest[1 + VIRTIO_IRQ_QUEUES];
	uint8_t entry_slot[1 + VIRTIO_IRQ_QUEUES];
};

/* Lay plan out over a table of `entries` entries: entry 0 for config and
 * one per queue when they fit; else one per destination CPU (the queues a
 * CPU polls share it, counted in the first one's slot); else, when every
 * queue's CPU is the config CPU, everything on entry 0. 0, or -1 with the
 * reason in err (a queue whose CPU would have to share another CPU's
 * entry, an APIC id an MSI cannot address). */
int virtio_msix_layout(unsigned entries, const struct virtio_irq_plan *plan,
                       struct virtio_msix_layout *l, char *err, size_t errlen);

/* Can a single interrupt line (INTx, virtio-mmio) that reaches the config
 * CPU serve plan? 0, or -1 naming the first queue it cannot (what: the
 * line's name, for the message). */
int virtio_irq_single_line(const struct virtio_irq_plan *plan, const char *what, char *err,
                           size_t errlen);

#endif
