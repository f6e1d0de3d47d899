/*
 * virtio_probe.c: find a virtio device on whichever transport has it --
 * PCI functions first, then the virtio-mmio windows the machine declares --
 * and give the struct virtio_dev that transport's ops (virtio_dev.h).
 */
#include <stdio.h>
#include "kernel/kernel.h"
#include "drivers/virtio/virtio_dev.h"

int virtio_dev_probe(struct virtio_dev *vd, uint16_t virtio_id, char *err, size_t errlen)
{
	char pci_why[160];

	*vd = (struct virtio_dev){0};
	if (virtio_pci_probe(&vd->pci, virtio_id, pci_why, sizeof(pci_why)) == 0) {
		vd->ops = &virtio_pci_ops;
		vd->t = &vd->pci;
		vd->irqs = vd->pci.irqs;
		vd->config_changed = &vd->pci.config_changed;
		return 0;
	}
	/* A PCI device that is there but unusable is the answer, not MMIO. */
	if (vd->pci.pci) {
		snprintf(err, errlen, "%s", pci_why);
		return -1;
	}
	if (virtio_mmio_probe(&vd->mmio, virtio_id, err, errlen) == 0) {
		vd->ops = &virtio_mmio_ops;
		vd->t = &vd->mmio;
		vd->irqs = vd->mmio.irqs;
		vd->config_changed = &vd->mmio.config_changed;
		return 0;
	}
	if (!vd->mmio.win && mmiodev_count() == 0)
		snprintf(err, errlen, "%s, and no virtio-mmio windows", pci_why);
	return -1;
}
