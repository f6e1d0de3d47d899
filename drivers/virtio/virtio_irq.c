/*
 * virtio_irq.c: from "queue q is polled on the CPU with APIC id dest[q]"
 * to an MSI-X table layout (virtio_irq.h). No registers here: virtio_pci.c
 * writes what this decides.
 */
#include <stdbool.h>
#include <stdio.h>
#include "drivers/virtio/virtio_irq.h"

#define MSI_DEST_MAX 0xffu /* xAPIC-format MSI address: 8 destination bits */

static int virtio_msix_check_dests(const struct virtio_irq_plan *p, char *err, size_t errlen)
{
	if (p->nqueues > VIRTIO_IRQ_QUEUES) {
		snprintf(err, errlen, "%u queues want interrupts, at most %u can", p->nqueues,
		         VIRTIO_IRQ_QUEUES);
		return -1;
	}
	if (p->cfg_dest > MSI_DEST_MAX) {
		snprintf(err, errlen, "config interrupt: APIC id %u needs interrupt remapping",
		         p->cfg_dest);
		return -1;
	}
	for (unsigned q = 0; q < p->nqueues; q++)
		if (p->dest[q] > MSI_DEST_MAX) {
			snprintf(err, errlen, "queue %u: APIC id %u needs interrupt remapping", q,
			         p->dest[q]);
			return -1;
		}
	return 0;
}

/* Entry 0 config, entry 1 + q for queue q. */
static void virtio_msix_per_queue(const struct virtio_irq_plan *p, struct virtio_msix_layout *l)
{
	for (unsigned q = 0; q < p->nqueues; q++) {
		l->queue_entry[q] = (uint16_t)(1 + q);
		l->entry_dest[1 + q] = p->dest[q];
		l->entry_slot[1 + q] = (uint8_t)(1 + q);
	}
	l->used = 1 + p->nqueues;
}

/* One entry per destination after entry 0, in the order queues name them;
 * false if the table is too short for that. */
static bool virtio_msix_per_cpu(unsigned entries, const struct virtio_irq_plan *p,
                                struct virtio_msix_layout *l)
{
	l->used = 1;
	for (unsigned q = 0; q < p->nqueues; q++) {
		unsigned e = 1;

		while (e < l->used && l->entry_dest[e] != p->dest[q])
			e++;
		if (e == l->used) {
			if (e >= entries)
				return false;
			l->entry_dest[e] = p->dest[q];
			l->entry_slot[e] = (uint8_t)(1 + q);
			l->used++;
		}
		l->queue_entry[q] = (uint16_t)e;
	}
	return true;
}

int virtio_msix_layout(unsigned entries, const struct virtio_irq_plan *p,
                       struct virtio_msix_layout *l, char *err, size_t errlen)
{
	*l = (struct virtio_msix_layout){0};
	if (virtio_msix_check_dests(p, err, errlen))
		return -1;
	if (entries < 1) {
		snprintf(err, errlen, "MSI-X table has no entry");
		return -1;
	}
	l->entry_dest[0] = p->cfg_dest;
	l->entry_slot[0] = 0;
	if (entries >= 1 + p->nqueues) {
		virtio_msix_per_queue(p, l);
		return 0;
	}
	if (virtio_msix_per_cpu(entries, p, l))
		return 0;
	/* A single entry serves everything only if one CPU polls it all. */
	if (virtio_irq_single_line(p, "a single MSI-X entry", err, errlen) == 0) {
		for (unsigned q = 0; q < p->nqueues; q++)
			l->queue_entry[q] = 0;
		l->used = 1;
		return 0;
	}
	*l = (struct virtio_msix_layout){0};
	snprintf(err, errlen,
	         "MSI-X table has %u entries: %u queues on more than one CPU need at least one "
	         "per CPU and one for config",
	         entries, p->nqueues);
	return -1;
}

int virtio_irq_single_line(const struct virtio_irq_plan *p, const char *what, char *err,
                           size_t errlen)
{
	for (unsigned q = 0; q < p->nqueues; q++)
		if (p->dest[q] != p->cfg_dest) {
			snprintf(
			    err, errlen,
			    "queue %u is polled on APIC id %u, %s reaches APIC id %u only: mq>1 "
			    "with IDLE=halt|adaptive needs MSI-X (virtio-pci), or IDLE=poll",
			    q, p->dest[q], what, p->cfg_dest);
			return -1;
		}
	return 0;
}
