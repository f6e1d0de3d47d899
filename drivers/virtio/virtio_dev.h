/*
 * virtio_dev.h: one virtio device on whichever transport found it, the
 * surface the device drivers (vnet.c, vnet_idle.c) use for the 3.1.1 steps
 * and queue set-up: modern PCI (virtio_pci.c, 4.1) or MMIO version 2
 * (virtio_mmio.c, 4.2). Each transport is one const struct
 * virtio_transport_ops (Linux's virtio_config_ops, Unikraft's
 * virtio_config_ops); virtio_probe.c picks one, virtio_dev.c calls through
 * it. The host unit tests link a third, over the simulated device
 * (tests/unit/sim_pci.c, which also stands in for virtio_probe.c).
 */
#ifndef VNETLAB_VIRTIO_DEV_H
#define VNETLAB_VIRTIO_DEV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "drivers/virtio/virtq.h"
#include "drivers/virtio/virtio_pci.h"
#include "drivers/virtio/virtio_mmio.h"

/* A transport's operations on its state t (a struct virtio_pci or
 * virtio_mmio), in the order of the 3.1.1 steps. */
struct virtio_transport_ops {
	const char *name; /* "pci", "mmio" */
	int (*reset)(void *t);
	uint8_t (*status)(void *t);
	void (*add_status)(void *t, uint8_t bits);
	uint64_t (*device_features)(void *t);
	void (*set_features)(void *t, uint64_t features);
	uint16_t (*num_queues)(void *t);
	int (*cfg_read)(void *t, uint32_t off, void *buf, uint32_t len);
	int (*irq_setup)(void *t, const struct virtio_irq_plan *plan, char *err, size_t errlen);
	const char *(*irq_mode_name)(const void *t);
	int (*queue_setup)(void *t, struct virtq *vq, uint16_t qidx, bool event_idx, char *err,
	                   size_t errlen);
};

/* virtio_pci.c, virtio_mmio.c */
extern const struct virtio_transport_ops virtio_pci_ops;
extern const struct virtio_transport_ops virtio_mmio_ops;

/* In a transport's file: NAME_ops over its functions NAME_reset(T *), ...,
 * NAME_queue_setup(T *, ...), as the adapters that only convert t. */
#define VIRTIO_TRANSPORT_OPS(NAME, T, LABEL)                                                       \
	static int NAME##_op_reset(void *t)                                                        \
	{                                                                                          \
		return NAME##_reset((T *)t);                                                       \
	}                                                                                          \
	static uint8_t NAME##_op_status(void *t)                                                   \
	{                                                                                          \
		return NAME##_status((T *)t);                                                      \
	}                                                                                          \
	static void NAME##_op_add_status(void *t, uint8_t b)                                       \
	{                                                                                          \
		NAME##_add_status((T *)t, b);                                                      \
	}                                                                                          \
	static uint64_t NAME##_op_features(void *t)                                                \
	{                                                                                          \
		return NAME##_device_features((T *)t);                                             \
	}                                                                                          \
	static void NAME##_op_set_features(void *t, uint64_t f)                                    \
	{                                                                                          \
		NAME##_set_features((T *)t, f);                                                    \
	}                                                                                          \
	static uint16_t NAME##_op_num_queues(void *t)                                              \
	{                                                                                          \
		return NAME##_num_queues((T *)t);                                                  \
	}                                                                                          \
	static int NAME##_op_cfg_read(void *t, uint32_t off, void *buf, uint32_t len)              \
	{                                                                                          \
		return NAME##_cfg_read((T *)t, off, buf, len);                                     \
	}                                                                                          \
	static int NAME##_op_irq_setup(void *t, const struct virtio_irq_plan *p, char *err,        \
	                               size_t errlen)                                              \
	{                                                                                          \
		return NAME##_irq_setup((T *)t, p, err, errlen);                                   \
	}                                                                                          \
	static const char *NAME##_op_irq_mode_name(const void *t)                                  \
	{                                                                                          \
		return NAME##_irq_mode_name((const T *)t);                                         \
	}                                                                                          \
	static int NAME##_op_queue_setup(void *t, struct virtq *vq, uint16_t qidx, bool ei,        \
	                                 char *err, size_t errlen)                                 \
	{                                                                                          \
		return NAME##_queue_setup((T *)t, vq, qidx, ei, err, errlen);                      \
	}                                                                                          \
	const struct virtio_transport_ops NAME##_ops = {                                           \
	    .name = LABEL,                                                                         \
	    .reset = NAME##_op_reset,                                                              \
	    .status = NAME##_op_status,                                                            \
	    .add_status = NAME##_op_add_status,                                                    \
	    .device_features = NAME##_op_features,                                                 \
	    .set_features = NAME##_op_set_features,                                                \
	    .num_queues = NAME##_op_num_queues,                                                    \
	    .cfg_read = NAME##_op_cfg_read,                                                        \
	    .irq_setup = NAME##_op_irq_setup,                                                      \
	    .irq_mode_name = NAME##_op_irq_mode_name,                                              \
	    .queue_setup = NAME##_op_queue_setup,                                                  \
	}

/* Interrupt counters, the same slots on both transports: [0] config
 * changes, [1 + q] used buffers of queue q (INTx and the MMIO line count
 * all queues in [1]; a shared MSI-X entry in its first queue's slot),
 * [VIRTIO_PCI_IRQ_QUEUES + 1] interrupts with nothing to say. */
#define VIRTIO_DEV_IRQ_SLOTS VIRTIO_PCI_IRQ_SLOTS

/* Points into itself once probed: not to be copied after virtio_dev_probe(). */
struct virtio_dev {
	const struct virtio_transport_ops *ops; /* NULL: no device found */
	void *t;                                /* &pci or &mmio */
	/* The transport's interrupt counters and config-change flag, which
	 * its handlers write. */
	volatile uint64_t *irqs;
	volatile bool *config_changed;
	struct virtio_pci pci;
	struct virtio_mmio mmio;
};

/* virtio_probe.c: PCI functions first, then the virtio-mmio windows. */
int virtio_dev_probe(struct virtio_dev *vd, uint16_t virtio_id, char *err, size_t errlen);

/* virtio_dev.c: the device through its transport's ops */
bool virtio_dev_found(const struct virtio_dev *vd);
const char *virtio_dev_transport_name(const struct virtio_dev *vd); /* "pci" "mmio" "none" */
int virtio_dev_reset(struct virtio_dev *vd);
uint8_t virtio_dev_status(struct virtio_dev *vd);
void virtio_dev_add_status(struct virtio_dev *vd, uint8_t bits);
uint64_t virtio_dev_device_features(struct virtio_dev *vd);
void virtio_dev_set_features(struct virtio_dev *vd, uint64_t features);
uint16_t virtio_dev_num_queues(struct virtio_dev *vd);
int virtio_dev_cfg_read(struct virtio_dev *vd, uint32_t off, void *buf, uint32_t len);
/* Interrupts for the plan's queues, each to its CPU (virtio_irq.h). */
int virtio_dev_irq_setup(struct virtio_dev *vd, const struct virtio_irq_plan *plan, char *err,
                         size_t errlen);
const char *virtio_dev_irq_mode_name(const struct virtio_dev *vd);
int virtio_dev_queue_setup(struct virtio_dev *vd, struct virtq *vq, uint16_t qidx, bool event_idx,
                           char *err, size_t errlen);
/* The handlers' counters and the config-change flag they set. */
const volatile uint64_t *virtio_dev_irqs(const struct virtio_dev *vd);
bool virtio_dev_config_changed(const struct virtio_dev *vd);
void virtio_dev_config_clear(struct virtio_dev *vd);

#endif
