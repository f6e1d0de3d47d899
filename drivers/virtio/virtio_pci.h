/*
 * virtio_pci.h: the virtio 1.x modern PCI transport (virtio 1.2 section 4.1),
 * the only code that touches a virtio register. Device drivers (vnet.c) call
 * these to run the 3.1.1 initialisation sequence and to set up queues. The
 * host unit tests link a simulated implementation of the same functions
 * (tests/unit/sim_pci.c) in place of virtio_pci.c.
 */
#ifndef VNETLAB_VIRTIO_PCI_H
#define VNETLAB_VIRTIO_PCI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "drivers/virtio/virtio_irq.h"
#include "drivers/virtio/virtq.h"

/* Queues the driver can set up: receiveq1..N, transmitq1..N and the
 * control queue at 2 * max_virtqueue_pairs (virtio 1.2 5.1.2), for up to
 * 8 pairs. Interrupts (halt policies) for the pairs' queues, the first
 * VIRTIO_PCI_IRQ_QUEUES; the control queue is polled (NO_VECTOR). */
#define VIRTIO_PCI_MAX_QUEUES 17
#define VIRTIO_PCI_IRQ_QUEUES VIRTIO_IRQ_QUEUES

struct pci_dev; /* kernel.h */

struct virtio_pci_notify {
	uintptr_t addr; /* doorbell of one queue */
	bool data;      /* VIRTIO_F_NOTIFICATION_DATA: write vqn | avail idx << 16 */
};

/* How the device interrupts us (halt policies only; poll builds: none). */
enum virtio_pci_irq_mode {
	VIRTIO_PCI_IRQ_NONE,
	VIRTIO_PCI_IRQ_MSIX, /* MSI-X: virtio_irq.h's layout (config, per queue or per CPU) */
	VIRTIO_PCI_IRQ_INTX, /* the legacy line; ISR status says which kind */
};
#define VIRTIO_PCI_NO_VECTOR 0xffff

/* Interrupt counts, bumped by the handlers: [0] configuration changes,
 * [1 + q] used buffers of queue q (an MSI-X entry that queues share counts
 * in its first queue's slot, virtio_irq.h; a single entry in [0]). INTx
 * cannot tell queues apart: all of them land in [1];
 * [VIRTIO_PCI_IRQ_QUEUES + 1] counts INTx interrupts whose ISR status was
 * 0 (a shared line, or a spurious one). Each slot is bumped on the one CPU
 * its entry targets. */
#define VIRTIO_PCI_IRQ_SLOTS (VIRTIO_PCI_IRQ_QUEUES + 2)

struct virtio_pci {
	const struct pci_dev *pci;
	uintptr_t common, isr, device_cfg; /* mapped structure addresses */
	uint32_t device_cfg_len;
	uintptr_t notify_base;
	uint32_t notify_len, notify_mult;
	uint64_t features; /* accepted by the driver */
	struct virtio_pci_notify notify[VIRTIO_PCI_MAX_QUEUES];
	enum virtio_pci_irq_mode irq_mode;
	struct virtio_msix_layout msix; /* queue -> table entry, entry -> CPU */
	unsigned msix_queues;           /* queues [0, msix_queues) have an entry */
	volatile uint64_t irqs[VIRTIO_PCI_IRQ_SLOTS];
	volatile bool config_changed; /* set by the handler, cleared by the driver */
};

/* virtio_pci.c */
int virtio_pci_probe(struct virtio_pci *vp, uint16_t virtio_id, char *err, size_t errlen);
int virtio_pci_reset(struct virtio_pci *vp);
uint8_t virtio_pci_status(struct virtio_pci *vp);
void virtio_pci_add_status(struct virtio_pci *vp, uint8_t bits);
uint64_t virtio_pci_device_features(struct virtio_pci *vp);
void virtio_pci_set_features(struct virtio_pci *vp, uint64_t features);
uint16_t virtio_pci_num_queues(struct virtio_pci *vp);
/* One field (len 2/4/8: a 16/32/64-bit field, read at its width; else bytes). */
int virtio_pci_cfg_read(struct virtio_pci *vp, uint32_t off, void *buf, uint32_t len);
/* Interrupts for a driver that halts (4.1.4.5, 4.1.5.1.2): MSI-X when the
 * device has the capability and accepts the vectors, each queue's entry
 * aimed at the CPU plan names, else its INTx line (if plan has one CPU).
 * After FEATURES_OK, before virtio_pci_queue_setup() (which then assigns
 * each queue its vector, NO_VECTOR beyond plan's queues). 0, or -1 with
 * the reason in err. */
int virtio_pci_irq_setup(struct virtio_pci *vp, const struct virtio_irq_plan *plan, char *err,
                         size_t errlen);
const char *virtio_pci_irq_mode_name(const struct virtio_pci *vp); /* "msix" "intx" "none" */
int virtio_pci_queue_setup(struct virtio_pci *vp, struct virtq *vq, uint16_t qidx, bool event_idx,
                           char *err, size_t errlen);

#endif
