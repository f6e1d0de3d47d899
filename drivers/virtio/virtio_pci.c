/*
 * virtio_pci.c: virtio 1.x modern PCI transport (virtio 1.2 section 4.1).
 * Finds the device, walks its vendor capabilities to the common, notify,
 * ISR and device configuration structures, maps them and offers the
 * register-level steps the device drivers compose into 3.1.1. Legacy
 * (0.9.5, I/O port) devices are refused. Interrupts only when the driver
 * asks (the halt idle policies): MSI-X, or the INTx line as a fallback.
 */
#include <stdio.h>
#include <string.h>
#include "kernel/arch.h"
#include "kernel/kernel.h"
#include "drivers/virtio/virtio_cfg.h"
#include "drivers/virtio/virtio_dev.h"
#include "drivers/virtio/virtio_pci.h"

#define PCI_COMMAND         0x04
#define PCI_CMD_INTX_OFF    (1u << 10)
#define PCI_STATUS          0x06
#define PCI_STATUS_CAP_LIST 0x10
#define PCI_CAP_PTR         0x34
#define PCI_SUBSYSTEM_ID    0x2e
#define PCI_CAP_ID_VNDR     0x09
#define PCI_CAP_ID_MSIX     0x11
#define PCI_INTERRUPT_LINE  0x3c
#define PCI_INTERRUPT_PIN   0x3d
/* PCI 3.0 6.8.2: MSI-X capability and table entry layout */
#define MSIX_CTRL          2
#define MSIX_CTRL_ENABLE   (1u << 15)
#define MSIX_CTRL_FMASK    (1u << 14)
#define MSIX_TABLE         4
#define MSIX_ENTRY_SIZE    16
#define MSIX_ENTRY_ADDR_LO 0
#define MSIX_ENTRY_ADDR_HI 4
#define MSIX_ENTRY_DATA    8
#define MSIX_ENTRY_CTRL    12
#define MSIX_ENTRY_MASKED  1u
/* 4.1.4.5 ISR status bits */
#define VIRTIO_PCI_ISR_QUEUE  1u
#define VIRTIO_PCI_ISR_CONFIG 2u
#define PCI_CAP_WALK_MAX      48 /* 256-byte config space holds at most 48 capabilities */

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
 * driver can use wins (4.1.4.1: the order is the device's preference, and
 * the driver SHOULD use the first instance it can support). One in an I/O
 * BAR, an unassigned BAR or overrunning its BAR is skipped, so a later
 * one of the same type in a memory BAR is still found. */
static int virtio_pci_walk_caps(struct virtio_pci *vp, char *err, size_t errlen)
{
	static const char *const what[] = {[VIRTIO_PCI_CAP_COMMON_CFG] = "common",
	                                   [VIRTIO_PCI_CAP_NOTIFY_CFG] = "notify",
	                                   [VIRTIO_PCI_CAP_ISR_CFG] = "ISR",
	                                   [VIRTIO_PCI_CAP_DEVICE_CFG] = "device"};
	struct virtio_pci_cap_loc caps[VIRTIO_PCI_CAP_DEVICE_CFG + 1] = {0};
	bool skipped[VIRTIO_PCI_CAP_DEVICE_CFG + 1] = {0};
	char why[VIRTIO_PCI_CAP_DEVICE_CFG + 1][96];
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
			struct virtio_pci_cap_loc c = {
			    .found = true,
			    .bar = bar,
			    .offset = pci_cfg_read32(d, pos + VIRTIO_PCI_CAP_OFFSET),
			    .length = pci_cfg_read32(d, pos + VIRTIO_PCI_CAP_LENGTH),
			};

			if (virtio_pci_map_cap(d, &c, what[type], why[type], sizeof(why[type]))) {
				skipped[type] = true;
			} else {
				caps[type] = c;
				if (type == VIRTIO_PCI_CAP_NOTIFY_CFG)
					vp->notify_mult =
					    pci_cfg_read32(d, pos + VIRTIO_PCI_NOTIFY_CAP_MULT);
			}
		}
		pos = pci_cfg_read8(d, pos + 1) & 0xfc;
	}
	if (!caps[VIRTIO_PCI_CAP_COMMON_CFG].found && !skipped[VIRTIO_PCI_CAP_COMMON_CFG]) {
		snprintf(
		    err, errlen,
		    "device %04x:%04x has no virtio 1.x capabilities: legacy-only (virtio 0.9.5) "
		    "devices are not supported; use a modern device (e.g. disable-legacy=on)",
		    d->vendor, d->device);
		return -1;
	}
	for (t = VIRTIO_PCI_CAP_COMMON_CFG; t <= VIRTIO_PCI_CAP_DEVICE_CFG; t++) {
		if (caps[t].found)
			continue;
		if (skipped[t])
			snprintf(err, errlen, "no usable virtio %s capability: %s", what[t],
			         why[t]);
		else
			snprintf(err, errlen, "virtio %s capability missing (4.1.4)", what[t]);
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

		virtio_cfg_field(vp->device_cfg, off, buf, len);
		if (gen == mmio_read8(virtio_pci_common(vp, VIRTIO_PCI_COMMON_CFGGENERATION)))
			return 0;
	}
	return -1;
}

/* ---- interrupts ---- */

static void virtio_pci_msix_config(void *arg)
{
	struct virtio_pci *vp = arg;

	vp->irqs[0]++;
	vp->config_changed = true;
}

/* A queue entry: arg is its counter slot (only its target CPU bumps it). */
static void virtio_pci_msix_queue(void *arg)
{
	(*(volatile uint64_t *)arg)++;
}

/* 4.1.4.5.2: reading the ISR status clears it and de-asserts the line,
 * which a level-triggered INTx needs before its EOI. */
static void virtio_pci_intx(void *arg)
{
	struct virtio_pci *vp = arg;
	uint8_t isr = mmio_read8(vp->isr);

	if (isr & VIRTIO_PCI_ISR_QUEUE)
		vp->irqs[1]++;
	if (isr & VIRTIO_PCI_ISR_CONFIG) {
		vp->irqs[0]++;
		vp->config_changed = true;
	}
	if (!(isr & (VIRTIO_PCI_ISR_QUEUE | VIRTIO_PCI_ISR_CONFIG)))
		vp->irqs[VIRTIO_PCI_IRQ_QUEUES + 1]++;
}

static uint8_t virtio_pci_find_cap(const struct pci_dev *d, uint8_t id)
{
	uint8_t pos = 0;

	if (pci_cfg_read16(d, PCI_STATUS) & PCI_STATUS_CAP_LIST)
		pos = pci_cfg_read8(d, PCI_CAP_PTR) & 0xfc;
	for (int n = 0; pos && n < PCI_CAP_WALK_MAX; n++) {
		if (pci_cfg_read8(d, pos) == id)
			return pos;
		pos = pci_cfg_read8(d, pos + 1) & 0xfc;
	}
	return 0;
}

/* Undo a partial MSI-X set-up so the INTx fallback can fire: PCI 3.0
 * 6.8.2.3, while MSI-X Enable is set the function may not use INTx, and
 * with Function Mask set it sends nothing at all; so both bits go, and
 * COMMAND's Interrupt Disable with them. */
static void virtio_pci_msix_off(const struct pci_dev *d, uint8_t cap, uint16_t ctrl)
{
	pci_cfg_write16(d, cap + MSIX_CTRL,
	                (uint16_t)(ctrl & ~(MSIX_CTRL_ENABLE | MSIX_CTRL_FMASK)));
	pci_cfg_write16(d, PCI_COMMAND,
	                (uint16_t)(pci_cfg_read16(d, PCI_COMMAND) & ~PCI_CMD_INTX_OFF));
}

/* Table entry e: its vector's handler, then the message (address with
 * the destination CPU, data the vector), then unmasked. */
static int virtio_pci_msix_entry(struct virtio_pci *vp, uintptr_t table, unsigned e)
{
	uint8_t slot = vp->msix.entry_slot[e];
	int vec = slot == 0 ? irq_alloc(virtio_pci_msix_config, vp)
	                    : irq_alloc(virtio_pci_msix_queue, (void *)&vp->irqs[slot]);
	uintptr_t a = table + e * MSIX_ENTRY_SIZE;
	uint64_t msg = apic_msi_addr_to(vp->msix.entry_dest[e]);

	if (vec < 0)
		return -1;
	mmio_write32(a + MSIX_ENTRY_ADDR_LO, (uint32_t)msg);
	mmio_write32(a + MSIX_ENTRY_ADDR_HI, (uint32_t)(msg >> 32));
	mmio_write32(a + MSIX_ENTRY_DATA, (uint32_t)vec);
	mmio_write32(a + MSIX_ENTRY_CTRL, 0); /* unmasked */
	return 0;
}

/* MSI-X (PCI 3.0 6.8.2): the table laid out by virtio_msix_layout() (entry
 * 0 for configuration changes, then per queue, or per CPU when the table
 * is short), each entry a fixed, edge-triggered interrupt to the CPU that
 * polls its queues. Then 4.1.4.3: the device answers VIRTIO_PCI_NO_VECTOR
 * to a vector it cannot use. */
static int virtio_pci_msix_setup(struct virtio_pci *vp, const struct virtio_irq_plan *plan,
                                 char *err, size_t errlen)
{
	const struct pci_dev *d = vp->pci;
	uint8_t cap = virtio_pci_find_cap(d, PCI_CAP_ID_MSIX);
	uint64_t base, size;
	bool is_io;

	if (!cap) {
		snprintf(err, errlen, "no MSI-X capability");
		return -1;
	}
	uint16_t ctrl = pci_cfg_read16(d, cap + MSIX_CTRL);
	unsigned entries = (ctrl & 0x7ffu) + 1;
	uint32_t table = pci_cfg_read32(d, cap + MSIX_TABLE);
	unsigned bir = table & 7;
	uint32_t off = table & ~7u;

	if (bir > 5) {
		snprintf(err, errlen, "MSI-X table in BAR%u", bir);
		return -1;
	}
	base = pci_bar(d, (int)bir, &size, &is_io);
	if (!base || is_io || (uint64_t)off + entries * MSIX_ENTRY_SIZE > size) {
		snprintf(err, errlen, "MSI-X table 0x%lx+%u entries outside BAR%u",
		         (unsigned long)off, entries, bir);
		return -1;
	}
	if (virtio_msix_layout(entries, plan, &vp->msix, err, errlen))
		return -1;
	paging_map_mmio(base + off, entries * MSIX_ENTRY_SIZE);
	uintptr_t t = (uintptr_t)(base + off);

	/* Enabled with the function masked while the entries are written. */
	pci_cfg_write16(d, cap + MSIX_CTRL, (uint16_t)(ctrl | MSIX_CTRL_ENABLE | MSIX_CTRL_FMASK));
	for (unsigned i = 0; i < vp->msix.used; i++) {
		if (virtio_pci_msix_entry(vp, t, i)) {
			snprintf(err, errlen, "out of interrupt vectors");
			virtio_pci_msix_off(d, cap, ctrl);
			return -1;
		}
	}
	pci_cfg_write16(d, cap + MSIX_CTRL,
	                (uint16_t)((ctrl | MSIX_CTRL_ENABLE) & ~MSIX_CTRL_FMASK));
	pci_cfg_write16(d, PCI_COMMAND,
	                (uint16_t)(pci_cfg_read16(d, PCI_COMMAND) | PCI_CMD_INTX_OFF));

	mmio_write16(virtio_pci_common(vp, VIRTIO_PCI_COMMON_MSIX), 0);
	if (mmio_read16(virtio_pci_common(vp, VIRTIO_PCI_COMMON_MSIX)) != 0) {
		snprintf(err, errlen,
		         "device refused MSI-X entry 0 for config changes (NO_VECTOR)");
		virtio_pci_msix_off(d, cap, ctrl);
		return -1;
	}
	vp->msix_queues = plan->nqueues;
	printf("virtio-pci: msix table=bar%u+0x%lx entries=%u used=%u queues=%u\n", bir,
	       (unsigned long)off, entries, vp->msix.used, plan->nqueues);
	return 0;
}

int virtio_pci_irq_setup(struct virtio_pci *vp, const struct virtio_irq_plan *plan, char *err,
                         size_t errlen)
{
	char why[192];

	if (irq_init(err, errlen))
		return -1;
	if (virtio_pci_msix_setup(vp, plan, why, sizeof(why)) == 0) {
		vp->irq_mode = VIRTIO_PCI_IRQ_MSIX;
		return 0;
	}
	/* 4.1.5.3-ish fallback: the legacy line the firmware routed, which
	 * reaches the BSP only. */
	if (virtio_irq_single_line(plan, "the INTx line", err, errlen)) {
		size_t n = strlen(err);
		snprintf(err + n, errlen - n, " (no MSI-X: %s)", why);
		return -1;
	}
	uint8_t pin = pci_cfg_read8(vp->pci, PCI_INTERRUPT_PIN);
	uint8_t line = pci_cfg_read8(vp->pci, PCI_INTERRUPT_LINE);
	int vec = pin ? irq_alloc_legacy(line, virtio_pci_intx, vp) : -1;

	if (vec < 0) {
		snprintf(err, errlen, "no interrupt: %s, and INTx pin=%u line=%u is not routable",
		         why, pin, line);
		return -1;
	}
	vp->irq_mode = VIRTIO_PCI_IRQ_INTX;
	printf("virtio-pci: intx line=%u pin=%c (%s)\n", line, 'A' + pin - 1, why);
	return 0;
}

const char *virtio_pci_irq_mode_name(const struct virtio_pci *vp)
{
	return vp->irq_mode == VIRTIO_PCI_IRQ_MSIX   ? "msix"
	       : vp->irq_mode == VIRTIO_PCI_IRQ_INTX ? "intx"
	                                             : "none";
}

/* Doorbell (4.1.5.2). Without NOTIFICATION_DATA the value written is the
 * queue index; with it, vqn in the low 16 bits and in the high 16, for a
 * split ring, the next avail index, for a packed one next_off | next_wrap
 * << 15 (2.9; virtq.c / virtq_packed.c pass the right one). */
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

/* The queue's MSI-X entry from the layout, read back (4.1.4.3: NO_VECTOR
 * is the device's refusal). A queue beyond the plan (the control queue,
 * polled with a bounded wait) gets NO_VECTOR: 4.1.5.1.2 lets the driver
 * unmap a queue's interrupts that way. */
static int virtio_pci_queue_vector(struct virtio_pci *vp, uint16_t qidx, char *err, size_t errlen)
{
	uint16_t want = qidx < vp->msix_queues ? vp->msix.queue_entry[qidx] : VIRTIO_PCI_NO_VECTOR;

	mmio_write16(virtio_pci_common(vp, VIRTIO_PCI_COMMON_Q_MSIX), want);
	if (mmio_read16(virtio_pci_common(vp, VIRTIO_PCI_COMMON_Q_MSIX)) != want) {
		snprintf(err, errlen, "queue %u: device refused MSI-X entry %u (NO_VECTOR)", qidx,
		         want);
		return -1;
	}
	return 0;
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
	 * queue_size." Split rings are a power of two (2.7); cap at ours.
	 * (Packed rings need not be, 2.8.10.1, but a power of two is one.) */
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
	/* "5. Optionally, if MSI-X capability is present and enabled on the
	 * device, select a vector to use to request interrupts triggered by
	 * virtqueue events. Write the MSI-X Table entry number corresponding
	 * to this vector into queue_msix_vector. Read queue_msix_vector: on
	 * success, previously written value is returned; on failure,
	 * NO_VECTOR value is returned." Only the halt policies enable it. */
	if (vp->irq_mode == VIRTIO_PCI_IRQ_MSIX && virtio_pci_queue_vector(vp, qidx, err, errlen))
		return -1;
	/* "6. Write physical addresses of the virtqueue's Descriptor Area,
	 * Driver Area and Device Area to queue_desc, queue_driver and
	 * queue_device." Identity mapping: pointer == physical address. */
	mmio_write64_split(virtio_pci_common(vp, VIRTIO_PCI_COMMON_Q_DESCLO), vq->area_desc);
	mmio_write64_split(virtio_pci_common(vp, VIRTIO_PCI_COMMON_Q_AVAILLO), vq->area_driver);
	mmio_write64_split(virtio_pci_common(vp, VIRTIO_PCI_COMMON_Q_USEDLO), vq->area_device);
	/* "7. Write 1 to queue_enable." */
	mmio_write16(virtio_pci_common(vp, VIRTIO_PCI_COMMON_Q_ENABLE), 1);
	printf("virtio-pci: queue %u size=%u (device max %u) notify=+0x%lx%s\n", qidx, size,
	       dev_size, (unsigned long)off, n->data ? " notification_data" : "");
	return 0;
}

/* virtio_dev.h's view of this transport. */
VIRTIO_TRANSPORT_OPS(virtio_pci, struct virtio_pci, "pci");
