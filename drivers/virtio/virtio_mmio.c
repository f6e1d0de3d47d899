/*
 * virtio_mmio.c: virtio 1.x MMIO transport (virtio 1.2 section 4.2).
 * Version 2 devices only: a version 1 (legacy, pre-1.0 layout with
 * QueuePFN and guest page size) device is refused with the reason. All
 * control registers are 32-bit and read and written at that width
 * (4.2.2.2); device configuration fields at their own width, as on PCI.
 */
#include <stdio.h>
#include <string.h>
#include "kernel/arch.h"
#include "kernel/kernel.h"
#include "drivers/virtio/virtio_cfg.h"
#include "drivers/virtio/virtio_dev.h"
#include "drivers/virtio/virtio_mmio.h"

/* 4.2.2 MMIO Device Register Layout */
#define VM_MAGIC            0x000 /* "virt" */
#define VM_VERSION          0x004
#define VM_DEVICE_ID        0x008
#define VM_VENDOR_ID        0x00c
#define VM_DEVICE_FEATURES  0x010
#define VM_DEVICE_FEAT_SEL  0x014
#define VM_DRIVER_FEATURES  0x020
#define VM_DRIVER_FEAT_SEL  0x024
#define VM_QUEUE_SEL        0x030
#define VM_QUEUE_NUM_MAX    0x034
#define VM_QUEUE_NUM        0x038
#define VM_QUEUE_READY      0x044
#define VM_QUEUE_NOTIFY     0x050
#define VM_INTERRUPT_STATUS 0x060
#define VM_INTERRUPT_ACK    0x064
#define VM_STATUS           0x070
#define VM_QUEUE_DESC_LO    0x080
#define VM_QUEUE_DRIVER_LO  0x090
#define VM_QUEUE_DEVICE_LO  0x0a0
#define VM_CONFIG_GEN       0x0fc
#define VM_CONFIG           0x100
#define VM_MAGIC_VALUE      0x74726976u
#define VM_INT_USED_BUFFER  1u
#define VM_INT_CONFIG       2u
#define VM_QUEUES_MAX       16 /* how far num_queues looks */

#define VIRTIO_MMIO_RESET_TIMEOUT_NS 1000000000ull
#define VIRTIO_MMIO_CFG_RETRIES      100

static uint32_t vm_read(const struct virtio_mmio *vm, unsigned off)
{
	return mmio_read32(vm->base + off);
}

static void vm_write(const struct virtio_mmio *vm, unsigned off, uint32_t v)
{
	mmio_write32(vm->base + off, v);
}

/* 4.2.3.1.1: check MagicValue and Version, then DeviceID (0: no device
 * behind this window, "the driver MUST ignore"). The first window holding
 * the wanted type wins. */
int virtio_mmio_probe(struct virtio_mmio *vm, uint16_t virtio_id, char *err, size_t errlen)
{
	char why[160] = "";

	*vm = (struct virtio_mmio){0};
	for (int i = 0; i < mmiodev_count(); i++) {
		const struct mmio_dev *w = mmiodev_get(i);
		struct virtio_mmio t = {.win = w, .base = (uintptr_t)w->base};
		uint32_t magic = vm_read(&t, VM_MAGIC), version = vm_read(&t, VM_VERSION);

		if (magic != VM_MAGIC_VALUE) {
			snprintf(why, sizeof(why),
			         "window 0x%lx has MagicValue 0x%08x, not \"virt\"",
			         (unsigned long)w->base, magic);
			continue;
		}
		if (vm_read(&t, VM_DEVICE_ID) != virtio_id)
			continue;
		if (version != 2) {
			snprintf(
			    err, errlen,
			    "virtio-mmio device at 0x%lx has Version %u: only version 2 (virtio "
			    "1.x, 4.2.2) is supported%s",
			    (unsigned long)w->base, version,
			    version == 1 ? "; version 1 is the legacy interface (QEMU: "
			                   "-global virtio-mmio.force-legacy=false)"
			                 : "");
			return -1;
		}
		*vm = t;
		printf("virtio-mmio: 0x%lx version=2 device=%u vendor=0x%08x irq=%u (%s)\n",
		       (unsigned long)w->base, virtio_id, vm_read(vm, VM_VENDOR_ID), w->irq,
		       w->source);
		return 0;
	}
	snprintf(err, errlen, "no virtio device of type %u among %d virtio-mmio window(s)%s%s",
	         virtio_id, mmiodev_count(), why[0] ? ": " : "", why);
	return -1;
}

uint8_t virtio_mmio_status(struct virtio_mmio *vm)
{
	return (uint8_t)vm_read(vm, VM_STATUS);
}

/* 2.1.2: the driver only ever sets bits (reset aside). */
void virtio_mmio_add_status(struct virtio_mmio *vm, uint8_t bits)
{
	vm_write(vm, VM_STATUS, virtio_mmio_status(vm) | bits);
}

/* 4.2.3.1.1 / 2.4: write 0 to Status, then wait for it to read 0 (bounded). */
int virtio_mmio_reset(struct virtio_mmio *vm)
{
	uint64_t deadline;

	vm_write(vm, VM_STATUS, 0);
	deadline = clock_ns() + VIRTIO_MMIO_RESET_TIMEOUT_NS;
	while (virtio_mmio_status(vm) != 0) {
		if (clock_ns() > deadline)
			return -1;
		cpu_relax();
	}
	return 0;
}

uint64_t virtio_mmio_device_features(struct virtio_mmio *vm)
{
	uint64_t f = 0;

	for (uint32_t sel = 0; sel < 2; sel++) {
		vm_write(vm, VM_DEVICE_FEAT_SEL, sel);
		f |= (uint64_t)vm_read(vm, VM_DEVICE_FEATURES) << (32 * sel);
	}
	return f;
}

void virtio_mmio_set_features(struct virtio_mmio *vm, uint64_t features)
{
	for (uint32_t sel = 0; sel < 2; sel++) {
		vm_write(vm, VM_DRIVER_FEAT_SEL, sel);
		vm_write(vm, VM_DRIVER_FEATURES, (uint32_t)(features >> (32 * sel)));
	}
	vm->features = features;
}

/* MMIO has no queue count: queues exist while QueueNumMax is not 0
 * (4.2.3.2 step 3). */
uint16_t virtio_mmio_num_queues(struct virtio_mmio *vm)
{
	uint16_t n = 0;

	while (n < VM_QUEUES_MAX) {
		vm_write(vm, VM_QUEUE_SEL, n);
		if (vm_read(vm, VM_QUEUE_NUM_MAX) == 0)
			break;
		n++;
	}
	return n;
}

/* 4.2.2.2 / 2.5.1: retry while ConfigGeneration changes under the read. */
int virtio_mmio_cfg_read(struct virtio_mmio *vm, uint32_t off, void *buf, uint32_t len)
{
	if ((uint64_t)VM_CONFIG + off + len > vm->win->size)
		return -1;
	for (int tries = 0; tries < VIRTIO_MMIO_CFG_RETRIES; tries++) {
		uint32_t gen = vm_read(vm, VM_CONFIG_GEN);

		virtio_cfg_field(vm->base + VM_CONFIG, off, buf, len);
		if (gen == vm_read(vm, VM_CONFIG_GEN))
			return 0;
	}
	return -1;
}

/* 4.2.3.3 / 4.2.2: InterruptStatus says why; writing the same bits to
 * InterruptACK clears them and drops the (level) line before the EOI. */
static void virtio_mmio_irq(void *arg)
{
	struct virtio_mmio *vm = arg;
	uint32_t st = vm_read(vm, VM_INTERRUPT_STATUS);

	vm_write(vm, VM_INTERRUPT_ACK, st);
	if (st & VM_INT_USED_BUFFER)
		vm->irqs[1]++;
	if (st & VM_INT_CONFIG) {
		vm->irqs[0]++;
		vm->config_changed = true;
	}
	if (!(st & (VM_INT_USED_BUFFER | VM_INT_CONFIG)))
		vm->irqs[VIRTIO_PCI_IRQ_QUEUES + 1]++;
}

/* One line (4.2.2), routed to the BSP: every queue must be polled there. */
int virtio_mmio_irq_setup(struct virtio_mmio *vm, const struct virtio_irq_plan *plan, char *err,
                          size_t errlen)
{
	const struct mmio_dev *w = vm->win;
	unsigned gsi = w->irq;

	if (virtio_irq_single_line(plan, "virtio-mmio's one interrupt line", err, errlen))
		return -1;
	if (irq_init(err, errlen))
		return -1;
	/* An I/O APIC the MADT lists for the GSI (microvm with acpi=on: GSIs
	 * 24-47 on its second one) wins; without ACPI (acpi=off) lines 0-15
	 * reach the 8259. */
	if (ioapic_has(gsi)) {
		char why[96];
		int v = irq_alloc_gsi(gsi, !w->edge, w->active_low, virtio_mmio_irq, vm, why,
		                      sizeof(why));
		if (v < 0) {
			snprintf(err, errlen, "virtio-mmio interrupt: %s", why);
			return -1;
		}
		vm->irq_on = true;
		printf("virtio-mmio: irq gsi=%u vector=0x%x (ioapic)\n", gsi, v);
		return 0;
	}
	if (gsi >= 16 || gsi == 2) {
		snprintf(
		    err, errlen,
		    "virtio-mmio GSI %u is on no I/O APIC the MADT lists and is not an 8259 line; "
		    "IDLE=halt|adaptive need its interrupt, use IDLE=poll",
		    gsi);
		return -1;
	}
	if (irq_alloc_legacy(gsi, virtio_mmio_irq, vm) < 0) {
		snprintf(err, errlen, "virtio-mmio interrupt line %u is not routable", gsi);
		return -1;
	}
	vm->irq_on = true;
	printf("virtio-mmio: irq line=%u (8259)\n", gsi);
	return 0;
}

const char *virtio_mmio_irq_mode_name(const struct virtio_mmio *vm)
{
	return vm->irq_on ? "line" : "none";
}

/* 4.2.3.3: QueueNotify takes the queue index, or with NOTIFICATION_DATA
 * vqn in the low 16 bits and in the high 16, for a split ring, the next
 * avail index, for a packed one next_off | next_wrap << 15 (2.9; virtq.c /
 * virtq_packed.c pass the right one). */
static void virtio_mmio_notify(void *ctx, uint16_t qidx, uint16_t avail_idx)
{
	const struct virtio_mmio *vm = ctx;

	vm_write(vm, VM_QUEUE_NOTIFY,
	         vm->notify_data ? (uint32_t)qidx | (uint32_t)avail_idx << 16 : qidx);
}

static void *virtio_mmio_ring_alloc(size_t size, size_t align)
{
	return pmm_alloc(size, align);
}

/* 4.2.3.2 Virtqueue Configuration, step by step (during 3.1.1 step 7). */
int virtio_mmio_queue_setup(struct virtio_mmio *vm, struct virtq *vq, uint16_t qidx, bool event_idx,
                            char *err, size_t errlen)
{
	uint32_t dev_size;
	uint16_t size;

	vm->notify_data = (vm->features & VIRTIO_BIT(VIRTIO_F_NOTIFICATION_DATA)) != 0;
	/* "1. Select the queue writing its index (first queue is 0) to QueueSel." */
	vm_write(vm, VM_QUEUE_SEL, qidx);
	/* "2. Check if the queue is not already in use: read QueueReady, and
	 * expect a returned value of zero (0x0)." */
	if (vm_read(vm, VM_QUEUE_READY) != 0) {
		snprintf(err, errlen, "queue %u: QueueReady is set before set-up (4.2.3.2)", qidx);
		return -1;
	}
	/* "3. Read maximum queue size (number of elements) from QueueNumMax.
	 * If the returned value is zero (0x0) the queue is not available." */
	dev_size = vm_read(vm, VM_QUEUE_NUM_MAX);
	if (dev_size == 0) {
		snprintf(err, errlen, "queue %u: QueueNumMax is 0 (queue not available)", qidx);
		return -1;
	}
	/* Split rings are a power of two (2.7); cap at ours. (Packed rings
	 * need not be, 2.8.10.1, but a power of two is one.) */
	size = dev_size < VIRTQ_MAX_SIZE ? (uint16_t)dev_size : VIRTQ_MAX_SIZE;
	while (size & (size - 1))
		size &= (uint16_t)(size - 1);
	/* "4. Allocate and zero the queue memory, making sure the memory is
	 * physically contiguous." */
	if (virtq_init(vq, qidx, size, event_idx, virtio_mmio_ring_alloc, virtio_mmio_notify, vm)) {
		snprintf(err, errlen, "queue %u: cannot set up a ring of %u entries", qidx, size);
		return -1;
	}
	/* "5. Notify the device about the queue size by writing the size to
	 * QueueNum." */
	vm_write(vm, VM_QUEUE_NUM, size);
	/* "6. Write physical addresses of the queue's Descriptor Area, Driver
	 * Area and Device Area to (respectively) the QueueDescLow/High,
	 * QueueDriverLow/High and QueueDeviceLow/High register pairs."
	 * Identity mapping: pointer == physical address. Split ring:
	 * descriptor table, available ring, used ring (2.7); packed ring:
	 * descriptor ring, driver and device event suppression (2.8.10).
	 * virtq_init() of the linked ring file says which (area_*). */
	mmio_write64_split(vm->base + VM_QUEUE_DESC_LO, vq->area_desc);
	mmio_write64_split(vm->base + VM_QUEUE_DRIVER_LO, vq->area_driver);
	mmio_write64_split(vm->base + VM_QUEUE_DEVICE_LO, vq->area_device);
	/* "7. Write 0x1 to QueueReady." */
	vm_write(vm, VM_QUEUE_READY, 1);
	printf("virtio-mmio: queue %u size=%u (device max %u)%s\n", qidx, size, dev_size,
	       vm->notify_data ? " notification_data" : "");
	return 0;
}

/* virtio_dev.h's view of this transport. */
VIRTIO_TRANSPORT_OPS(virtio_mmio, struct virtio_mmio, "mmio");
