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
#include "drivers/virtio/virtq.h"

#define VIRTIO_PCI_MAX_QUEUES 2

struct pci_dev; /* kernel.h */

struct virtio_pci_notify {
	uintptr_t addr; /* doorbell of one queue */
	bool data;      /* VIRTIO_F_NOTIFICATION_DATA: write vqn | avail idx << 16 */
};

struct virtio_pci {
	const struct pci_dev *pci;
	uintptr_t common, isr, device_cfg; /* mapped structure addresses */
	uint32_t device_cfg_len;
	uintptr_t notify_base;
	uint32_t notify_len, notify_mult;
	uint64_t features; /* accepted by the driver */
	struct virtio_pci_notify notify[VIRTIO_PCI_MAX_QUEUES];
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
int virtio_pci_queue_setup(struct virtio_pci *vp, struct virtq *vq, uint16_t qidx, bool event_idx,
                           char *err, size_t errlen);

#endif
