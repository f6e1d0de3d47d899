/*
 * virtio_pci.c: virtio 1.x modern PCI transport (virtio 1.2 section 4.1).
 * Finds the device, walks its vendor capabilities to the common, notify,
 * ISR and device configuration structures, maps them and offers the
 * register-level steps the device drivers compose into 3.1.1. Legacy
 * (0.9.5, I/O port) devices are refused. No interrupts: we poll.
 */
#include <stdio.h>
#include <string.h>
#include "kernel/arch.h"
#include "kernel/kernel.h"
#include "drivers/virtio/virtio_pci.h"

#define PCI_STATUS          0x06
#define PCI_STATUS_CAP_LIST 0x10
#define PCI_CAP_PTR         0x34
#define PCI_SUBSYSTEM_ID    0x2e
#define PCI_CAP_ID_VNDR     0x09
#define PCI_CAP_WALK_MAX    48 /* 256-byte config space holds at most 48 capabilities */

#define VIRTIO_PCI_RESET_TIMEOUT_NS 1000000000ull
#define VIRTIO_PCI_CFG_RETRIES      100

struct virtio_pci_cap_loc {
	bool found;
	uint8_t bar;
	uint32_t offset, length;
	uintptr_t addr;
};

/* 4.1.2: modern id 0x1040 + type, or a transitional 0x1000..0x103f whose
 * subsystem device id names the type. */
static bool virtio_pci_match(const struct pci_dev *d, uint16_t virtio_id, bool *transitional)
{
	if (d->vendor != VIRTIO_PCI_VENDOR)
		return false;
	*transitional = d->device >= 0x1000 && d->device <= 0x103f;
	if (d->device == VIRTIO_PCI_MODERN_BASE + virtio_id)
		return true;
	return *transitional && pci_cfg_read16(d, PCI_SUBSYSTEM_ID) == virtio_id;
}

/* Map the part of a BAR a capability points at (4.1.4.1: offset and length
 * within the BAR; the driver MUST ignore capabilities pointing at BAR > 5). */
static int virtio_pci_map_cap(const struct pci_dev *d, struct virtio_pci_cap_loc *c,
                              const char *what, char *err, size_t errlen)
{
	uint64_t base, size;
	bool is_io;

	base = pci_bar(d, c->bar, &size, &is_io);
	if (base == 0 || is_io) {
		snprintf(err, errlen, "virtio %s structure is in BAR%u, which is %s", what, c->bar,
		         is_io ? "an I/O BAR" : "not assigned");
		return -1;
	}
	if ((uint64_t)c->offset + c->length > size) {
		snprintf(err, errlen,
		         "virtio %s structure 0x%lx+0x%lx overruns BAR%u (0x%lx bytes)", what,
		         (unsigned long)c->offset, (unsigned long)c->length, c->bar,
		         (unsigned long)size);
		return -1;
	}
	paging_map_mmio(base + c->offset, c->length);
	c->addr = (uintptr_t)(base + c->offset);
	return 0;
}

/* 4.1.4: walk the capability list; the first capability of each type the
 * driver understands wins. */
static int virtio_pci_walk_caps(struct virtio_pci *vp, char *err, size_t errlen)
{
	static const char *const what[] = {[VIRTIO_PCI_CAP_COMMON_CFG] = "common",
	                                   [VIRTIO_PCI_CAP_NOTIFY_CFG] = "notify",
	                                   [VIRTIO_PCI_CAP_ISR_CFG] = "ISR",
	                                   [VIRTIO_PCI_CAP_DEVICE_CFG] = "device"};
	struct virtio_pci_cap_loc caps[VIRTIO_PCI_CAP_DEVICE_CFG + 1] = {0};
	const struct pci_dev *d = vp->pci;
	uint8_t pos;
	int n, t;

	if (pci_cfg_read16(d, PCI_STATUS) & PCI_STATUS_CAP_LIST)
		pos = pci_cfg_read8(d, PCI_CAP_PTR) & 0xfc;
	else
		pos = 0;
	for (n = 0; pos && n < PCI_CAP_WALK_MAX; n++) {
		uint8_t type = pci_cfg_read8(d, pos + VIRTIO_PCI_CAP_CFG_TYPE);
		uint8_t bar = pci_cfg_read8(d, pos + VIRTIO_PCI_CAP_BAR);
		uint8_t len = pci_cfg_read8(d, pos + VIRTIO_PCI_CAP_LEN);
		/* struct virtio_pci_cap, and the notify one with its multiplier */
		uint8_t need = type == VIRTIO_PCI_CAP_NOTIFY_CFG ? VIRTIO_PCI_NOTIFY_CAP_MULT + 4
		                                                 : VIRTIO_PCI_CAP_LENGTH + 4;

		if (pci_cfg_read8(d, pos) == PCI_CAP_ID_VNDR && type >= VIRTIO_PCI_CAP_COMMON_CFG &&
		    type <= VIRTIO_PCI_CAP_DEVICE_CFG && bar <= 5 && len >= need &&
		    !caps[type].found) {
			caps[type].found = true;
			caps[type].bar = bar;
			caps[type].offset = pci_cfg_read32(d, pos + VIRTIO_PCI_CAP_OFFSET);
			caps[type].length = pci_cfg_read32(d, pos + VIRTIO_PCI_CAP_LENGTH);
			if (type == VIRTIO_PCI_CAP_NOTIFY_CFG)
				vp->notify_mult =
				    pci_cfg_read32(d, pos + VIRTIO_PCI_NOTIFY_CAP_MULT);
		}
		pos = pci_cfg_read8(d, pos + 1) & 0xfc;
	}
	if (!caps[VIRTIO_PCI_CAP_COMMON_CFG].found) {
		snprintf(
		    err, errlen,
		    "device %04x:%04x has no virtio 1.x capabilities: legacy-only (virtio 0.9.5) "
		    "devices are not supported; use a modern device (e.g. disable-legacy=on)",
		    d->vendor, d->device);
		return -1;
	}
	for (t = VIRTIO_PCI_CAP_COMMON_CFG; t <= VIRTIO_PCI_CAP_DEVICE_CFG; t++) {
		if (!caps[t].found) {
			snprintf(err, errlen, "virtio %s capability missing (4.1.4)", what[t]);
			return -1;
		}
		if (virtio_pci_map_cap(d, &caps[t], what[t], err, errlen))
			return -1;
	}
	if (caps[VIRTIO_PCI_CAP_COMMON_CFG].length < VIRTIO_PCI_COMMON_LEN) {
		snprintf(err, errlen, "virtio common structure too short (%lu bytes)",
		         (unsigned long)caps[VIRTIO_PCI_CAP_COMMON_CFG].length);
		return -1;
	}
	vp->common = caps[VIRTIO_PCI_CAP_COMMON_CFG].addr;
	vp->isr = caps[VIRTIO_PCI_CAP_ISR_CFG].addr;
	vp->device_cfg = caps[VIRTIO_PCI_CAP_DEVICE_CFG].addr;
	vp->device_cfg_len = caps[VIRTIO_PCI_CAP_DEVICE_CFG].length;
	vp->notify_base = caps[VIRTIO_PCI_CAP_NOTIFY_CFG].addr;
	vp->notify_len = caps[VIRTIO_PCI_CAP_NOTIFY_CFG].length;
	printf("virtio-pci: %02x:%02x.%x %04x:%04x common=bar%u+0x%lx notify=bar%u+0x%lx "
	       "mult=%lu device=bar%u+0x%lx\n",
	       d->bus, d->dev, d->fn, d->vendor, d->device, caps[VIRTIO_PCI_CAP_COMMON_CFG].bar,
	       (unsigned long)caps[VIRTIO_PCI_CAP_COMMON_CFG].offset,
	       caps[VIRTIO_PCI_CAP_NOTIFY_CFG].bar,
	       (unsigned long)caps[VIRTIO_PCI_CAP_NOTIFY_CFG].offset,
	       (unsigned long)vp->notify_mult, caps[VIRTIO_PCI_CAP_DEVICE_CFG].bar,
	       (unsigned long)caps[VIRTIO_PCI_CAP_DEVICE_CFG].offset);
	return 0;
}

/* Find the first device of the given virtio type and map its structures. */
int virtio_pci_probe(struct virtio_pci *vp, uint16_t virtio_id, char *err, size_t errlen)
{
	int i;

	*vp = (struct virtio_pci){0};
	for (i = 0; i < pci_count(); i++) {
		const struct pci_dev *d = pci_get(i);
		bool transitional;

		if (!virtio_pci_match(d, virtio_id, &transitional))
			continue;
		vp->pci = d;
		pci_enable_mmio_busmaster(d);
		return virtio_pci_walk_caps(vp, err, errlen);
	}
	snprintf(err, errlen, "no virtio device of type %u (1af4:%04x or transitional 1af4:10xx)",
	         virtio_id, VIRTIO_PCI_MODERN_BASE + virtio_id);
	return -1;
}

static uintptr_t virtio_pci_common(const struct virtio_pci *vp, unsigned off)
{
	return vp->common + off;
}

uint8_t virtio_pci_status(struct virtio_pci *vp)
{
	return mmio_read8(virtio_pci_common(vp, VIRTIO_PCI_COMMON_STATUS));
}

/* 2.1.2: the driver only ever sets bits (reset aside). */
void virtio_pci_add_status(struct virtio_pci *vp, uint8_t bits)
{
	mmio_write8(virtio_pci_common(vp, VIRTIO_PCI_COMMON_STATUS),
	            (uint8_t)(virtio_pci_status(vp) | bits));
}

/* 4.1.4.3.2: write 0 to device_status, then wait for a read of 0 before
 * reinitialising. Bounded: a device that never finishes is reported. */
int virtio_pci_reset(struct virtio_pci *vp)
{
	uint64_t deadline;

	mmio_write8(virtio_pci_common(vp, VIRTIO_PCI_COMMON_STATUS), 0);
	deadline = clock_ns() + VIRTIO_PCI_RESET_TIMEOUT_NS;
	while (virtio_pci_status(vp) != 0) {
		if (clock_ns() > deadline)
			return -1;
		cpu_relax();
	}
	return 0;
}

uint64_t virtio_pci_device_features(struct virtio_pci *vp)
{
	uint64_t f = 0;
	uint32_t sel;

	for (sel = 0; sel < 2; sel++) {
		mmio_write32(virtio_pci_common(vp, VIRTIO_PCI_COMMON_DFSELECT), sel);
		f |= (uint64_t)mmio_read32(virtio_pci_common(vp, VIRTIO_PCI_COMMON_DF))
		     << (32 * sel);
	}
	return f;
}

void virtio_pci_set_features(struct virtio_pci *vp, uint64_t features)
{
	uint32_t sel;

	for (sel = 0; sel < 2; sel++) {
		mmio_write32(virtio_pci_common(vp, VIRTIO_PCI_COMMON_GFSELECT), sel);
		mmio_write32(virtio_pci_common(vp, VIRTIO_PCI_COMMON_GF),
		             (uint32_t)(features >> (32 * sel)));
	}
	vp->features = features;
}

uint16_t virtio_pci_num_queues(struct virtio_pci *vp)
{
	return mmio_read16(virtio_pci_common(vp, VIRTIO_PCI_COMMON_NUMQ));
}

/* One device-configuration field of len bytes. 4.1.3.1: "the driver MUST
 * use 8-bit wide accesses for 8-bit wide fields, 16-bit wide and aligned
 * accesses for 16-bit wide fields and 32-bit wide and aligned accesses for
 * 32-bit and 64-bit wide fields". So len 2, 4 and 8 at a naturally aligned
 * offset are one 16-bit, 32-bit or two 32-bit fields; anything else is an
 * array of bytes (e.g. the MAC). */
static void virtio_pci_cfg_field(const struct virtio_pci *vp, uint32_t off, uint8_t *out,
                                 uint32_t len)
{
	uintptr_t a = vp->device_cfg + off;

	if (len == 2 && off % 2 == 0) {
		uint16_t v = mmio_read16(a);
		memcpy(out, &v, 2);
	} else if ((len == 4 || len == 8) && off % 4 == 0) {
		for (uint32_t i = 0; i < len; i += 4) {
			uint32_t v = mmio_read32(a + i);
			memcpy(out + i, &v, 4);
		}
	} else {
		for (uint32_t i = 0; i < len; i++)
			out[i] = mmio_read8(a + i);
	}
}

/* 2.5.1 / 4.1.4.3.1: a multi-field read is consistent only if
 * config_generation did not change across it; retry a bounded number of
 * times. Little-endian device fields land in host order (x86). */
int virtio_pci_cfg_read(struct virtio_pci *vp, uint32_t off, void *buf, uint32_t len)
{
	int tries;

	if ((uint64_t)off + len > vp->device_cfg_len)
		return -1;
	for (tries = 0; tries < VIRTIO_PCI_CFG_RETRIES; tries++) {
		uint8_t gen = mmio_read8(virtio_pci_common(vp, VIRTIO_PCI_COMMON_CFGGENERATION));

		virtio_pci_cfg_field(vp, off, buf, len);
		if (gen == mmio_read8(virtio_pci_common(vp, VIRTIO_PCI_COMMON_CFGGENERATION)))
			return 0;
	}
	return -1;
}

/* Doorbell (4.1.5.2). Without NOTIFICATION_DATA the value written is the
 * queue index; with it, vqn in the low 16 bits and, for a split ring, the
 * next avail index in the high 16 (2.9). */
static void virtio_pci_notify(void *ctx, uint16_t qidx, uint16_t avail_idx)
{
	const struct virtio_pci_notify *n = ctx;

	if (n->data)
		mmio_write32(n->addr, (uint32_t)qidx | (uint32_t)avail_idx << 16);
	else
		mmio_write16(n->addr, qidx);
}

static void *virtio_pci_ring_alloc(size_t size, size_t align)
{
	return pmm_alloc(size, align);
}

/*
 * 4.1.5.1.3 Virtqueue Configuration, step by step. Called during step 7 of
 * 3.1.1, i.e. after FEATURES_OK (EVENT_IDX and NOTIFICATION_DATA are known)
 * and before DRIVER_OK.
 */
int virtio_pci_queue_setup(struct virtio_pci *vp, struct virtq *vq, uint16_t qidx, bool event_idx,
                           char *err, size_t errlen)
{
	struct virtio_pci_notify *n;
	uint16_t dev_size, size, noff;
	uint64_t off;

	if (qidx >= VIRTIO_PCI_MAX_QUEUES) {
		snprintf(err, errlen, "queue %u: driver supports %u queues", qidx,
		         VIRTIO_PCI_MAX_QUEUES);
		return -1;
	}
	/* "1. Write the virtqueue index to queue_select." */
	mmio_write16(virtio_pci_common(vp, VIRTIO_PCI_COMMON_Q_SELECT), qidx);
	/* "2. Read the virtqueue size from queue_size. ... If this field is 0,
	 * the virtqueue does not exist." */
	dev_size = mmio_read16(virtio_pci_common(vp, VIRTIO_PCI_COMMON_Q_SIZE));
	if (dev_size == 0) {
		snprintf(err, errlen, "queue %u: queue_size is 0 (queue does not exist)", qidx);
		return -1;
	}
	/* "3. Optionally, select a smaller virtqueue size and write it to
	 * queue_size." Split rings are a power of two (2.7); cap at ours. */
	size = dev_size < VIRTQ_MAX_SIZE ? dev_size : VIRTQ_MAX_SIZE;
	while (size & (size - 1))
		size &= (uint16_t)(size - 1);
	mmio_write16(virtio_pci_common(vp, VIRTIO_PCI_COMMON_Q_SIZE), size);

	/* The queue's doorbell: cap.offset + queue_notify_off *
	 * notify_off_multiplier (4.1.4.4); a multiplier of 0 means every queue
	 * shares one address. */
	noff = mmio_read16(virtio_pci_common(vp, VIRTIO_PCI_COMMON_Q_NOFF));
	off = (uint64_t)noff * vp->notify_mult;
	n = &vp->notify[qidx];
	n->data = (vp->features & VIRTIO_BIT(VIRTIO_F_NOTIFICATION_DATA)) != 0;
	if (off + (n->data ? 4 : 2) > vp->notify_len) {
		snprintf(
		    err, errlen,
		    "queue %u: notify offset %u*%lu is outside the notify structure (%lu bytes)",
		    qidx, noff, (unsigned long)vp->notify_mult, (unsigned long)vp->notify_len);
		return -1;
	}
	n->addr = vp->notify_base + (uintptr_t)off;

	/* "4. Allocate and zero Descriptor Table, Available and Used rings." */
	if (virtq_init(vq, qidx, size, event_idx, virtio_pci_ring_alloc, virtio_pci_notify, n)) {
		snprintf(err, errlen, "queue %u: cannot set up a ring of %u entries", qidx, size);
		return -1;
	}
	/* "5. Optionally, if MSI-X capability is present and enabled ..." -
	 * skipped: this driver polls and enables no interrupts. */
	/* "6. Write physical addresses of the virtqueue's Descriptor Area,
	 * Driver Area and Device Area to queue_desc, queue_driver and
	 * queue_device." Identity mapping: pointer == physical address. */
	mmio_write64_split(virtio_pci_common(vp, VIRTIO_PCI_COMMON_Q_DESCLO), (uintptr_t)vq->desc);
	mmio_write64_split(virtio_pci_common(vp, VIRTIO_PCI_COMMON_Q_AVAILLO),
	                   (uintptr_t)vq->avail);
	mmio_write64_split(virtio_pci_common(vp, VIRTIO_PCI_COMMON_Q_USEDLO), (uintptr_t)vq->used);
	/* "7. Write 1 to queue_enable." */
	mmio_write16(virtio_pci_common(vp, VIRTIO_PCI_COMMON_Q_ENABLE), 1);
	printf("virtio-pci: queue %u size=%u (device max %u) notify=+0x%lx%s\n", qidx, size,
	       dev_size, (unsigned long)off, n->data ? " notification_data" : "");
	return 0;
}
