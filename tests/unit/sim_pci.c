/*
 * sim_pci.c: the virtio_dev.h transport surface, implemented against the
 * simulated device (sim_dev.c) for the host unit tests. Linked in place of
 * drivers/virtio/virtio_dev.c and the transports behind it (it plays a PCI
 * device); it also checks that the driver walks the 3.1.1 initialisation
 * steps in order.
 */
#include <stdio.h>
#include <string.h>
#include "drivers/virtio/virtio_dev.h"
#include "tests/unit/sim_dev.h"
#include "tests/unit/host_shim.h"

int virtio_dev_probe(struct virtio_dev *vd, uint16_t virtio_id, char *err, size_t errlen)
{
	memset(vd, 0, sizeof(*vd));
	if (virtio_id != VIRTIO_ID_NET) {
		snprintf(err, errlen, "sim: only a network device");
		return -1;
	}
	vd->transport = VIRTIO_DEV_PCI;
	vd->pci.common = 1; /* "mapped" */
	vd->pci.device_cfg_len = sizeof(sim.cfg);
	return 0;
}

int virtio_dev_reset(struct virtio_dev *vd)
{
	(void)vd;
	sim.status = 0;
	sim.accepted = 0;
	sim.q[0].ready = sim.q[1].ready = false;
	return 0;
}

uint8_t virtio_dev_status(struct virtio_dev *vd)
{
	(void)vd;
	sim_register_access();
	return sim.status;
}

/* Each status bit needs the one before it (3.1.1 steps 2, 3, 5, 8). */
void virtio_dev_add_status(struct virtio_dev *vd, uint8_t bits)
{
	static const struct {
		uint8_t bit, needs;
	} order[] = {
	    {VIRTIO_STATUS_ACKNOWLEDGE, 0},
	    {VIRTIO_STATUS_DRIVER, VIRTIO_STATUS_ACKNOWLEDGE},
	    {VIRTIO_STATUS_FEATURES_OK, VIRTIO_STATUS_DRIVER},
	    {VIRTIO_STATUS_DRIVER_OK, VIRTIO_STATUS_FEATURES_OK},
	};

	(void)vd;
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

uint64_t virtio_dev_device_features(struct virtio_dev *vd)
{
	(void)vd;
	return sim.offered;
}

void virtio_dev_set_features(struct virtio_dev *vd, uint64_t features)
{
	if (sim.status & VIRTIO_STATUS_FEATURES_OK)
		sim_driver_error("features written after FEATURES_OK");
	sim.accepted = features;
	vd->pci.features = features;
}

uint16_t virtio_dev_num_queues(struct virtio_dev *vd)
{
	(void)vd;
	return sim.num_queues;
}

int virtio_dev_cfg_read(struct virtio_dev *vd, uint32_t off, void *buf, uint32_t len)
{
	if ((uint64_t)off + len > vd->pci.device_cfg_len)
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
int virtio_dev_irq_setup(struct virtio_dev *vd, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	if ((sim.status & (VIRTIO_STATUS_FEATURES_OK | VIRTIO_STATUS_DRIVER_OK)) !=
	    VIRTIO_STATUS_FEATURES_OK)
		sim_driver_error("interrupts set up outside 3.1.1 step 7");
	vd->pci.irq_mode = VIRTIO_PCI_IRQ_MSIX;
	return 0;
}

const char *virtio_dev_irq_mode_name(const struct virtio_dev *vd)
{
	return vd->pci.irq_mode == VIRTIO_PCI_IRQ_MSIX ? "msix" : "none";
}

int virtio_dev_queue_setup(struct virtio_dev *vd, struct virtq *vq, uint16_t qidx, bool event_idx,
                           char *err, size_t errlen)
{
	uint16_t size = sim.max_qsize < VIRTQ_MAX_SIZE ? sim.max_qsize : VIRTQ_MAX_SIZE;

	(void)vd;
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

bool virtio_dev_found(const struct virtio_dev *vd)
{
	return vd->transport != VIRTIO_DEV_NONE;
}

const char *virtio_dev_transport_name(const struct virtio_dev *vd)
{
	return virtio_dev_found(vd) ? "pci" : "none";
}

const volatile uint64_t *virtio_dev_irqs(const struct virtio_dev *vd)
{
	return vd->pci.irqs;
}

bool virtio_dev_config_changed(const struct virtio_dev *vd)
{
	return vd->pci.config_changed;
}

void virtio_dev_config_clear(struct virtio_dev *vd)
{
	vd->pci.config_changed = false;
}
