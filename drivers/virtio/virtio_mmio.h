/*
 * virtio_mmio.h: the virtio 1.x MMIO transport (virtio 1.2 section 4.2),
 * version 2 only, for machines without PCI (QEMU microvm, Firecracker-style
 * VMMs). kernel/mmiodev.c lists the windows the machine declares; this
 * file looks behind them. Same steps as virtio_pci.h, composed by the
 * device driver through virtio_dev.h.
 */
#ifndef VNETLAB_VIRTIO_MMIO_H
#define VNETLAB_VIRTIO_MMIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "drivers/virtio/virtq.h"
#include "drivers/virtio/virtio_pci.h" /* VIRTIO_PCI_IRQ_QUEUES, the irq slots */

struct mmio_dev; /* kernel.h */

struct virtio_mmio {
	const struct mmio_dev *win;
	uintptr_t base;
	uint64_t features; /* accepted by the driver */
	bool notify_data;  /* VIRTIO_F_NOTIFICATION_DATA */
	bool irq_on;       /* the halt policies asked for the interrupt */
	/* Interrupt counts, laid out as virtio_pci's irqs[]: [0] config
	 * changes, [1] used buffers (one line: queues cannot be told apart),
	 * [VIRTIO_PCI_IRQ_QUEUES + 1] interrupts with InterruptStatus 0. */
	volatile uint64_t irqs[VIRTIO_PCI_IRQ_SLOTS];
	volatile bool config_changed;
};

/* virtio_mmio.c */
int virtio_mmio_probe(struct virtio_mmio *vm, uint16_t virtio_id, char *err, size_t errlen);
int virtio_mmio_reset(struct virtio_mmio *vm);
uint8_t virtio_mmio_status(struct virtio_mmio *vm);
void virtio_mmio_add_status(struct virtio_mmio *vm, uint8_t bits);
uint64_t virtio_mmio_device_features(struct virtio_mmio *vm);
void virtio_mmio_set_features(struct virtio_mmio *vm, uint64_t features);
uint16_t virtio_mmio_num_queues(struct virtio_mmio *vm);
int virtio_mmio_cfg_read(struct virtio_mmio *vm, uint32_t off, void *buf, uint32_t len);
/* The window's interrupt line for the halt policies: through the I/O APIC
 * the MADT lists for its GSI (microvm's default acpi=on: 24-47 on a second
 * one), with the DSDT's trigger mode and polarity; else a GSI below 16
 * through the 8259 PIC (microvm,acpi=off: GSIs 5-12, no ACPI tables); any
 * other GSI is refused with the reason. */
int virtio_mmio_irq_setup(struct virtio_mmio *vm, const struct virtio_irq_plan *plan, char *err,
                          size_t errlen);
const char *virtio_mmio_irq_mode_name(const struct virtio_mmio *vm); /* "line" or "none" */
int virtio_mmio_queue_setup(struct virtio_mmio *vm, struct virtq *vq, uint16_t qidx, bool event_idx,
                            char *err, size_t errlen);

#endif
