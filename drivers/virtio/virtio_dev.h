/*
 * virtio_dev.h: one virtio device on whichever transport found it, the
 * surface the device drivers (vnet.c, vnet_idle.c) use for the 3.1.1 steps
 * and queue set-up: modern PCI (virtio_pci.c, 4.1) or MMIO version 2
 * (virtio_mmio.c, 4.2). virtio_dev.c only dispatches. The host unit tests
 * link a simulated implementation of these functions (tests/unit/sim_pci.c)
 * in place of virtio_dev.c and both transports.
 */
#ifndef VNETLAB_VIRTIO_DEV_H
#define VNETLAB_VIRTIO_DEV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "drivers/virtio/virtq.h"
#include "drivers/virtio/virtio_pci.h"
#include "drivers/virtio/virtio_mmio.h"

enum virtio_dev_transport {
	VIRTIO_DEV_NONE,
	VIRTIO_DEV_PCI,
	VIRTIO_DEV_MMIO,
};

/* Interrupt counters, the same slots on both transports: [0] config
 * changes, [1 + q] used buffers of queue q (INTx and the MMIO line count
 * all queues in [1]), [VIRTIO_PCI_MAX_QUEUES + 1] interrupts with nothing
 * to say. */
#define VIRTIO_DEV_IRQ_SLOTS VIRTIO_PCI_IRQ_SLOTS

struct virtio_dev {
	enum virtio_dev_transport transport;
	struct virtio_pci pci;
	struct virtio_mmio mmio;
};

/* virtio_dev.c: PCI functions first, then the virtio-mmio windows. */
int virtio_dev_probe(struct virtio_dev *vd, uint16_t virtio_id, char *err, size_t errlen);
bool virtio_dev_found(const struct virtio_dev *vd);
const char *virtio_dev_transport_name(const struct virtio_dev *vd); /* "pci" "mmio" "none" */
int virtio_dev_reset(struct virtio_dev *vd);
uint8_t virtio_dev_status(struct virtio_dev *vd);
void virtio_dev_add_status(struct virtio_dev *vd, uint8_t bits);
uint64_t virtio_dev_device_features(struct virtio_dev *vd);
void virtio_dev_set_features(struct virtio_dev *vd, uint64_t features);
uint16_t virtio_dev_num_queues(struct virtio_dev *vd);
int virtio_dev_cfg_read(struct virtio_dev *vd, uint32_t off, void *buf, uint32_t len);
int virtio_dev_irq_setup(struct virtio_dev *vd, char *err, size_t errlen);
const char *virtio_dev_irq_mode_name(const struct virtio_dev *vd);
int virtio_dev_queue_setup(struct virtio_dev *vd, struct virtq *vq, uint16_t qidx, bool event_idx,
                           char *err, size_t errlen);
/* The handlers' counters and the config-change flag they set. */
const volatile uint64_t *virtio_dev_irqs(const struct virtio_dev *vd);
bool virtio_dev_config_changed(const struct virtio_dev *vd);
void virtio_dev_config_clear(struct virtio_dev *vd);

#endif
