/*
 * virtio_dev.c: dispatch to the transport that found the device. Nothing
 * here touches a register.
 */
#include <stdio.h>
#include "kernel/kernel.h"
#include "drivers/virtio/virtio_dev.h"

#define PCI(vd) ((vd)->transport == VIRTIO_DEV_PCI)

int virtio_dev_probe(struct virtio_dev *vd, uint16_t virtio_id, char *err, size_t errlen)
{
	char pci_why[160];

	*vd = (struct virtio_dev){0};
	if (virtio_pci_probe(&vd->pci, virtio_id, pci_why, sizeof(pci_why)) == 0) {
		vd->transport = VIRTIO_DEV_PCI;
		return 0;
	}
	/* A PCI device that is there but unusable is the answer, not MMIO. */
	if (vd->pci.pci) {
		snprintf(err, errlen, "%s", pci_why);
		return -1;
	}
	if (virtio_mmio_probe(&vd->mmio, virtio_id, err, errlen) == 0) {
		vd->transport = VIRTIO_DEV_MMIO;
		return 0;
	}
	if (!vd->mmio.win && mmiodev_count() == 0)
		snprintf(err, errlen, "%s, and no virtio-mmio windows", pci_why);
	return -1;
}

bool virtio_dev_found(const struct virtio_dev *vd)
{
	return vd->transport != VIRTIO_DEV_NONE;
}

const char *virtio_dev_transport_name(const struct virtio_dev *vd)
{
	return PCI(vd) ? "pci" : vd->transport == VIRTIO_DEV_MMIO ? "mmio" : "none";
}

int virtio_dev_reset(struct virtio_dev *vd)
{
	return PCI(vd) ? virtio_pci_reset(&vd->pci) : virtio_mmio_reset(&vd->mmio);
}

uint8_t virtio_dev_status(struct virtio_dev *vd)
{
	return PCI(vd) ? virtio_pci_status(&vd->pci) : virtio_mmio_status(&vd->mmio);
}

void virtio_dev_add_status(struct virtio_dev *vd, uint8_t bits)
{
	if (PCI(vd))
		virtio_pci_add_status(&vd->pci, bits);
	else
		virtio_mmio_add_status(&vd->mmio, bits);
}

uint64_t virtio_dev_device_features(struct virtio_dev *vd)
{
	return PCI(vd) ? virtio_pci_device_features(&vd->pci)
	               : virtio_mmio_device_features(&vd->mmio);
}

void virtio_dev_set_features(struct virtio_dev *vd, uint64_t features)
{
	if (PCI(vd))
		virtio_pci_set_features(&vd->pci, features);
	else
		virtio_mmio_set_features(&vd->mmio, features);
}

uint16_t virtio_dev_num_queues(struct virtio_dev *vd)
{
	return PCI(vd) ? virtio_pci_num_queues(&vd->pci) : virtio_mmio_num_queues(&vd->mmio);
}

int virtio_dev_cfg_read(struct virtio_dev *vd, uint32_t off, void *buf, uint32_t len)
{
	return PCI(vd) ? virtio_pci_cfg_read(&vd->pci, off, buf, len)
	               : virtio_mmio_cfg_read(&vd->mmio, off, buf, len);
}

int virtio_dev_irq_setup(struct virtio_dev *vd, char *err, size_t errlen)
{
	return PCI(vd) ? virtio_pci_irq_setup(&vd->pci, err, errlen)
	               : virtio_mmio_irq_setup(&vd->mmio, err, errlen);
}

const char *virtio_dev_irq_mode_name(const struct virtio_dev *vd)
{
	return PCI(vd) ? virtio_pci_irq_mode_name(&vd->pci) : virtio_mmio_irq_mode_name(&vd->mmio);
}

int virtio_dev_queue_setup(struct virtio_dev *vd, struct virtq *vq, uint16_t qidx, bool event_idx,
                           char *err, size_t errlen)
{
	return PCI(vd) ? virtio_pci_queue_setup(&vd->pci, vq, qidx, event_idx, err, errlen)
	               : virtio_mmio_queue_setup(&vd->mmio, vq, qidx, event_idx, err, errlen);
}

const volatile uint64_t *virtio_dev_irqs(const struct virtio_dev *vd)
{
	return PCI(vd) ? vd->pci.irqs : vd->mmio.irqs;
}

bool virtio_dev_config_changed(const struct virtio_dev *vd)
{
	return PCI(vd) ? vd->pci.config_changed : vd->mmio.config_changed;
}

void virtio_dev_config_clear(struct virtio_dev *vd)
{
	if (PCI(vd))
		vd->pci.config_changed = false;
	else
		vd->mmio.config_changed = false;
}
