/*
 * sim_pci.c: the third struct virtio_transport_ops (virtio_dev.h), over
 * the simulated device (sim_dev.c) for the host unit tests. Linked with
 * drivers/virtio/virtio_dev.c in place of virtio_probe.c and the two real
 * transports (it plays a PCI device: its state is the struct virtio_pci);
 * it also checks that the driver walks the 3.1.1 initialisation steps in
 * order.
 */
#include <stdio.h>
#include <string.h>
#include "drivers/virtio/virtio_dev.h"
#include "tests/unit/sim_dev.h"
#include "tests/unit/host_shim.h"

static int sim_pci_reset(void *t)
{
	(void)t;
	sim.status = 0;
	sim.accepted = 0;
	sim.mq_pairs = 1; /* 5.1.6.5.5: after a reset, one pair again */
	for (int i = 0; i < SIM_QUEUES; i++)
		sim.q[i].ready = false;
	return 0;
}

static uint8_t sim_pci_status(void *t)
{
	(void)t;
	sim_register_access();
	sim.status_reads++;
	return sim.status;
}

/* Each status bit needs the one before it (3.1.1 steps 2, 3, 5, 8). */
static void sim_pci_add_status(void *t, uint8_t bits)
{
	static const struct {
		uint8_t bit, needs;
	} order[] = {
	    {VIRTIO_STATUS_ACKNOWLEDGE, 0},
	    {VIRTIO_STATUS_DRIVER, VIRTIO_STATUS_ACKNOWLEDGE},
	    {VIRTIO_STATUS_FEATURES_OK, VIRTIO_STATUS_DRIVER},
	    {VIRTIO_STATUS_DRIVER_OK, VIRTIO_STATUS_FEATURES_OK},
	};

	(void)t;
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		if ((bits & order[i].bit) && (sim.status & order[i].needs) != order[i].needs)
			sim_driver_error("status bit 0x%x set before 0x%x (3.1.1)", order[i].bit,
			                 order[i].needs);
	if (bits & VIRTIO_STATUS_FEATURES_OK) {
		/* 3.1.1 step 5-6: the device may refuse the subset. */
		if (sim.refuse_features || (sim.accepted & ~sim.offered))
			bits &= (uint8_t)~VIRTIO_STATUS_FEATURES_OK;
	}
	sim.status |= bits;
}

static uint64_t sim_pci_device_features(void *t)
{
	(void)t;
	return sim.offered;
}

static void sim_pci_set_features(void *t, uint64_t features)
{
	struct virtio_pci *vp = t;

	if (sim.status & VIRTIO_STATUS_FEATURES_OK)
		sim_driver_error("features written after FEATURES_OK");
	sim.accepted = features;
	vp->features = features;
}

static uint16_t sim_pci_num_queues(void *t)
{
	(void)t;
	return sim.num_queues;
}

static int sim_pci_cfg_read(void *t, uint32_t off, void *buf, uint32_t len)
{
	const struct virtio_pci *vp = t;

	if ((uint64_t)off + len > vp->device_cfg_len)
		return -1;
	sim.cfg_reads++;
	memcpy(buf, sim.cfg + off, len);
	return 0;
}

static void sim_pci_notify(void *ctx, uint16_t qidx, uint16_t avail_idx)
{
	(void)ctx;
	sim_doorbell(qidx, avail_idx);
}

/* The simulated device interrupts by counting (sim_dev.c decides per
 * 2.7.7.2 / 2.7.10 whether a completion would raise one). */
static int sim_pci_irq_setup(void *t, const struct virtio_irq_plan *plan, char *err, size_t errlen)
{
	struct virtio_pci *vp = t;

	(void)err;
	(void)errlen;
	sim.irq_plan = *plan;
	sim.irq_setups++;
	if ((sim.status & (VIRTIO_STATUS_FEATURES_OK | VIRTIO_STATUS_DRIVER_OK)) !=
	    VIRTIO_STATUS_FEATURES_OK)
		sim_driver_error("interrupts set up outside 3.1.1 step 7");
	vp->irq_mode = VIRTIO_PCI_IRQ_MSIX;
	return 0;
}

static const char *sim_pci_irq_mode_name(const void *t)
{
	const struct virtio_pci *vp = t;

	return vp->irq_mode == VIRTIO_PCI_IRQ_MSIX ? "msix" : "none";
}

static int sim_pci_queue_setup(void *t, struct virtq *vq, uint16_t qidx, bool event_idx, char *err,
                               size_t errlen)
{
	uint16_t size = sim.max_qsize < VIRTQ_MAX_SIZE ? sim.max_qsize : VIRTQ_MAX_SIZE;

	(void)t;
	if ((sim.status & (VIRTIO_STATUS_FEATURES_OK | VIRTIO_STATUS_DRIVER_OK)) !=
	    VIRTIO_STATUS_FEATURES_OK)
		sim_driver_error("queue %u set up outside 3.1.1 step 7", qidx);
	if (event_idx != !!(sim.accepted & VIRTIO_BIT(VIRTIO_F_EVENT_IDX)))
		sim_driver_error("queue %u: event_idx %d but features say otherwise", qidx,
		                 event_idx);
	if (qidx >= sim.num_queues || qidx >= SIM_QUEUES ||
	    virtq_init(vq, qidx, size, event_idx, shim_alloc, sim_pci_notify, NULL)) {
		snprintf(err, errlen, "sim: cannot set up queue %u", qidx);
		return -1;
	}
	if (vq->packed != !!(sim.accepted & VIRTIO_BIT(VIRTIO_F_RING_PACKED)))
		sim_driver_error("queue %u: %s ring but RING_PACKED %s", qidx,
		                 vq->packed ? "packed" : "split",
		                 vq->packed ? "not negotiated" : "negotiated");
	sim_attach(&sim.q[qidx], vq, qidx);
	return 0;
}

static const struct virtio_transport_ops sim_transport_ops = {
    .name = "pci",
    .reset = sim_pci_reset,
    .status = sim_pci_status,
    .add_status = sim_pci_add_status,
    .device_features = sim_pci_device_features,
    .set_features = sim_pci_set_features,
    .num_queues = sim_pci_num_queues,
    .cfg_read = sim_pci_cfg_read,
    .irq_setup = sim_pci_irq_setup,
    .irq_mode_name = sim_pci_irq_mode_name,
    .queue_setup = sim_pci_queue_setup,
};

/* Stands in for virtio_probe.c. */
int virtio_dev_probe(struct virtio_dev *vd, uint16_t virtio_id, char *err, size_t errlen)
{
	memset(vd, 0, sizeof(*vd));
	if (virtio_id != VIRTIO_ID_NET) {
		snprintf(err, errlen, "sim: only a network device");
		return -1;
	}
	vd->pci.common = 1; /* "mapped" */
	vd->pci.device_cfg_len = sizeof(sim.cfg);
	vd->ops = &sim_transport_ops;
	vd->t = &vd->pci;
	vd->irqs = vd->pci.irqs;
	vd->config_changed = &vd->pci.config_changed;
	return 0;
}
