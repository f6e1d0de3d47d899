/*
 * sim_pci.c: the virtio_pci.h transport, implemented against the simulated
 * device (sim_dev.c) for the host unit tests. Linked in place of
 * drivers/virtio/virtio_pci.c; it also checks that the driver walks the
 * 3.1.1 initialisation steps in order.
 */
#include <stdio.h>
#include <string.h>
#include "drivers/virtio/virtio_pci.h"
#include "tests/unit/sim_dev.h"
#include "tests/unit/host_shim.h"

int virtio_pci_probe(struct virtio_pci *vp, uint16_t virtio_id, char *err, size_t errlen)
{
	memset(vp, 0, sizeof(*vp));
	if (virtio_id != VIRTIO_ID_NET) {
		snprintf(err, errlen, "sim: only a network device");
		return -1;
	}
	vp->common = 1; /* "mapped" */
	vp->device_cfg_len = sizeof(sim.cfg);
	return 0;
}

int virtio_pci_reset(struct virtio_pci *vp)
{
	(void)vp;
	sim.status = 0;
	sim.accepted = 0;
	sim.q[0].ready = sim.q[1].ready = false;
	return 0;
}

uint8_t virtio_pci_status(struct virtio_pci *vp)
{
	(void)vp;
	return sim.status;
}

/* Each status bit needs the one before it (3.1.1 steps 2, 3, 5, 8). */
void virtio_pci_add_status(struct virtio_pci *vp, uint8_t bits)
{
	static const struct {
		uint8_t bit, needs;
	} order[] = {
	    {VIRTIO_STATUS_ACKNOWLEDGE, 0},
	    {VIRTIO_STATUS_DRIVER, VIRTIO_STATUS_ACKNOWLEDGE},
	    {VIRTIO_STATUS_FEATURES_OK, VIRTIO_STATUS_DRIVER},
	    {VIRTIO_STATUS_DRIVER_OK, VIRTIO_STATUS_FEATURES_OK},
	};

	(void)vp;
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

uint64_t virtio_pci_device_features(struct virtio_pci *vp)
{
	(void)vp;
	return sim.offered;
}

void virtio_pci_set_features(struct virtio_pci *vp, uint64_t features)
{
	if (sim.status & VIRTIO_STATUS_FEATURES_OK)
		sim_driver_error("features written after FEATURES_OK");
	sim.accepted = features;
	vp->features = features;
}

uint16_t virtio_pci_num_queues(struct virtio_pci *vp)
{
	(void)vp;
	return sim.num_queues;
}

int virtio_pci_cfg_read(struct virtio_pci *vp, uint32_t off, void *buf, uint32_t len)
{
	if ((uint64_t)off + len > vp->device_cfg_len)
		return -1;
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
int virtio_pci_irq_setup(struct virtio_pci *vp, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	if ((sim.status & (VIRTIO_STATUS_FEATURES_OK | VIRTIO_STATUS_DRIVER_OK)) !=
	    VIRTIO_STATUS_FEATURES_OK)
		sim_driver_error("interrupts set up outside 3.1.1 step 7");
	vp->irq_mode = VIRTIO_PCI_IRQ_MSIX;
	return 0;
}

const char *virtio_pci_irq_mode_name(const struct virtio_pci *vp)
{
	return vp->irq_mode == VIRTIO_PCI_IRQ_MSIX ? "msix" : "none";
}

int virtio_pci_queue_setup(struct virtio_pci *vp, struct virtq *vq, uint16_t qidx, bool event_idx,
                           char *err, size_t errlen)
{
	uint16_t size = sim.max_qsize < VIRTQ_MAX_SIZE ? sim.max_qsize : VIRTQ_MAX_SIZE;

	(void)vp;
	if ((sim.status & (VIRTIO_STATUS_FEATURES_OK | VIRTIO_STATUS_DRIVER_OK)) !=
	    VIRTIO_STATUS_FEATURES_OK)
		sim_driver_error("queue %u set up outside 3.1.1 step 7", qidx);
	if (event_idx != !!(sim.accepted & VIRTIO_BIT(VIRTIO_F_EVENT_IDX)))
		sim_driver_error("queue %u: event_idx %d but features say otherwise", qidx,
		                 event_idx);
	if (qidx >= 2 || virtq_init(vq, qidx, size, event_idx, shim_alloc, sim_pci_notify, NULL)) {
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
