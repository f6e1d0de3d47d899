/*
 * test_virtio_mmio.c: the virtio-mmio transport (drivers/virtio/virtio_mmio.c,
 * compiled with tests/unit/mmio_trace.h in place of kernel/arch.h) against a
 * register window in host memory: version 1 (legacy) refused and a window
 * without a device skipped (4.2.3.1.1), control registers only ever
 * accessed 32 bits wide (4.2.2.2), device-config fields at their own width,
 * and the 4.2.3.2 queue steps in order (QueueReady last, after the sizes and
 * the three area addresses: the split ring's parts or, linked with
 * virtq_packed.c as test_virtio_mmio_packed, the packed ring's descriptor
 * ring and two event suppression structures); the doorbell writes the
 * queue index, with NOTIFICATION_DATA the layout's next position.
 */
#include <stdio.h>
#include <string.h>
#include "drivers/virtio/virtio_mmio.h"
#include "kernel/kernel.h"
#include "tests/unit/check.h"
#include "tests/unit/host_shim.h"

int check_failed, check_total;
struct mmio_access mmio_log[256];
unsigned mmio_nlog;
uintptr_t mmio_refuse_addr;

#define WIN_SIZE 0x200
static uint32_t win[2][WIN_SIZE / 4]; /* two windows */
static struct mmio_dev devs[2];
static int ndevs;

/* The kernel surface virtio_mmio.c links against (the rest: host_shim.c). */
int mmiodev_count(void)
{
	return ndevs;
}
const struct mmio_dev *mmiodev_get(int i)
{
	return i >= 0 && i < ndevs ? &devs[i] : NULL;
}
static void reg(int w, unsigned off, uint32_t v)
{
	win[w][off / 4] = v;
}

static void setup(uint32_t version0, uint32_t id0, uint32_t version1, uint32_t id1)
{
	memset(win, 0, sizeof(win));
	for (int w = 0; w < 2; w++) {
		reg(w, 0x000, 0x74726976);
		reg(w, 0x00c, 0x554d4551);
		reg(w, 0x034, 256); /* QueueNumMax */
		devs[w] = (struct mmio_dev){.base = (uintptr_t)win[w],
		                            .size = WIN_SIZE,
		                            .irq = 5 + (uint32_t)w,
		                            .source = "test"};
	}
	reg(0, 0x004, version0);
	reg(0, 0x008, id0);
	reg(1, 0x004, version1);
	reg(1, 0x008, id1);
	ndevs = 2;
}

/* Every access to a control register (below Config at 0x100) is 32 bits. */
static bool control_accesses_32bit(uintptr_t base)
{
	for (unsigned i = 0; i < mmio_nlog; i++)
		if (mmio_log[i].addr >= base && mmio_log[i].addr < base + 0x100 &&
		    mmio_log[i].width != 4)
			return false;
	return true;
}

static int last_write(uintptr_t a)
{
	int at = -1;
	for (unsigned i = 0; i < mmio_nlog; i++)
		if (mmio_log[i].write && mmio_log[i].addr == a)
			at = (int)i;
	return at;
}

static int first_write(uintptr_t a)
{
	for (unsigned i = 0; i < mmio_nlog; i++)
		if (mmio_log[i].write && mmio_log[i].addr == a)
			return (int)i;
	return -1;
}

static void test_probe(void)
{
	struct virtio_mmio vm;
	char err[256];

	/* An empty window (DeviceID 0) is skipped; the NIC behind the second
	 * is found. */
	setup(2, 0, 2, 1);
	mmio_nlog = 0;
	CHECK_EQ(0, virtio_mmio_probe(&vm, 1, err, sizeof(err)), "NIC behind window 1 found");
	CHECK_EQ((uintptr_t)win[1], vm.base, "the second window");
	CHECK(control_accesses_32bit((uintptr_t)win[0]) &&
	          control_accesses_32bit((uintptr_t)win[1]),
	      "probe reads 32 bits wide");

	/* Version 1 is the legacy layout: refused, saying why. */
	setup(1, 1, 2, 0);
	CHECK_EQ(-1, virtio_mmio_probe(&vm, 1, err, sizeof(err)), "version 1 refused");
	CHECK(strstr(err, "Version 1") && strstr(err, "only version 2"), "error names the version");
	printf("     version 1: %s\n", err);

	/* No magic: not a virtio window. */
	setup(2, 1, 2, 0);
	win[0][0] = 0;
	CHECK_EQ(-1, virtio_mmio_probe(&vm, 1, err, sizeof(err)), "bad magic: no device");
	CHECK(strstr(err, "MagicValue") != NULL, "error names the magic");
}

static void test_queue_setup_order(void)
{
	struct virtio_mmio vm;
	struct virtq vq;
	char err[256];
	uintptr_t b = (uintptr_t)win[0];

	setup(2, 1, 2, 0);
	CHECK_EQ(0, virtio_mmio_probe(&vm, 1, err, sizeof(err)), "probe");
	virtio_mmio_set_features(&vm, VIRTIO_BIT(VIRTIO_F_VERSION_1));
	mmio_nlog = 0;
	CHECK_EQ(0, virtio_mmio_queue_setup(&vm, &vq, 1, false, err, sizeof(err)),
	         "queue 1 set up");
	CHECK(control_accesses_32bit(b), "queue set-up: 32-bit accesses only");
	CHECK_EQ(1, win[0][0x030 / 4], "QueueSel = 1");
	CHECK_EQ(256, win[0][0x038 / 4], "QueueNum = the size");
	/* Step 6: the three areas of the ring file this binary links
	 * (2.7: descriptor table, available ring, used ring; 2.8: descriptor
	 * ring, driver and device event suppression). */
	uintptr_t a_desc = vq.packed ? (uintptr_t)vq.pdesc : (uintptr_t)vq.desc;
	uintptr_t a_drv = vq.packed ? (uintptr_t)vq.driver_event : (uintptr_t)vq.avail;
	uintptr_t a_dev = vq.packed ? (uintptr_t)vq.device_event : (uintptr_t)vq.used;
	CHECK(a_desc && a_drv && a_dev, "the ring's three areas exist");
	CHECK_EQ((uint32_t)a_desc, win[0][0x080 / 4], "QueueDescLow");
	CHECK_EQ((uint32_t)(a_desc >> 32), win[0][0x084 / 4], "QueueDescHigh");
	CHECK_EQ((uint32_t)a_drv, win[0][0x090 / 4], "QueueDriverLow");
	CHECK_EQ((uint32_t)(a_drv >> 32), win[0][0x094 / 4], "QueueDriverHigh");
	CHECK_EQ((uint32_t)a_dev, win[0][0x0a0 / 4], "QueueDeviceLow");
	CHECK_EQ((uint32_t)(a_dev >> 32), win[0][0x0a4 / 4], "QueueDeviceHigh");
	CHECK_EQ(1, win[0][0x044 / 4], "QueueReady = 1");
	int ready = first_write(b + 0x044);
	CHECK(ready > last_write(b + 0x038) && ready > last_write(b + 0x080) &&
	          ready > last_write(b + 0x094) && ready > last_write(b + 0x0a4),
	      "QueueReady written after size and addresses (4.2.3.2 step 7)");
	CHECK(last_write(b + 0x030) < last_write(b + 0x038), "QueueSel before QueueNum");

	/* A queue already live is not set up again (step 2). */
	reg(0, 0x044, 1);
	CHECK_EQ(-1, virtio_mmio_queue_setup(&vm, &vq, 1, false, err, sizeof(err)),
	         "QueueReady already set: refused");
	reg(0, 0x044, 0);
	reg(0, 0x034, 0);
	CHECK_EQ(-1, virtio_mmio_queue_setup(&vm, &vq, 1, false, err, sizeof(err)),
	         "QueueNumMax 0: refused");

	/* The doorbell: the queue index into QueueNotify. */
	reg(0, 0x050, 0xdead);
	vq.notify(vq.notify_ctx, 1, 7);
	CHECK_EQ(1, win[0][0x050 / 4], "QueueNotify = queue index");
}

/* With NOTIFICATION_DATA the doorbell carries where the driver is (2.9):
 * split, the next avail index; packed, next_off | next_wrap << 15, which
 * on a fresh ring is offset 0 in lap 1 (2.8.1: wrap counters start at 1). */
static void test_notification_data(void)
{
	struct virtio_mmio vm;
	struct virtq vq;
	char err[256];

	setup(2, 1, 2, 0);
	CHECK_EQ(0, virtio_mmio_probe(&vm, 1, err, sizeof(err)), "probe");
	virtio_mmio_set_features(&vm, VIRTIO_BIT(VIRTIO_F_VERSION_1) |
	                                  VIRTIO_BIT(VIRTIO_F_NOTIFICATION_DATA));
	CHECK_EQ(0, virtio_mmio_queue_setup(&vm, &vq, 1, false, err, sizeof(err)), "queue 1");
	virtq_notify(&vq);
	CHECK_EQ(vq.packed ? 1u | 0x8000u << 16 : 1u, win[0][0x050 / 4],
	         "QueueNotify = vqn | next position << 16");
	printf("     ring=%s QueueNotify=0x%08x\n", vq.packed ? "packed" : "split",
	       win[0][0x050 / 4]);
}

static void test_config_widths(void)
{
	struct virtio_mmio vm;
	char err[256];
	uint16_t st;
	uint8_t mac[6];

	setup(2, 1, 2, 0);
	CHECK_EQ(0, virtio_mmio_probe(&vm, 1, err, sizeof(err)), "probe");
	uint8_t *cfg = (uint8_t *)win[0] + 0x100;
	for (int i = 0; i < 16; i++)
		cfg[i] = (uint8_t)(0x10 + i);
	mmio_nlog = 0;
	CHECK_EQ(0, virtio_mmio_cfg_read(&vm, VIRTIO_NET_CFG_STATUS, &st, 2), "status read");
	CHECK(mmio_nlog == 3 && mmio_log[1].width == 2 && mmio_log[1].addr == (uintptr_t)cfg + 6,
	      "status: ConfigGeneration, one 16-bit read at the field, ConfigGeneration");
	CHECK_EQ(0x1716, st, "status value");
	mmio_nlog = 0;
	CHECK_EQ(0, virtio_mmio_cfg_read(&vm, VIRTIO_NET_CFG_MAC, mac, 6), "MAC read");
	CHECK(mmio_nlog == 8 && mmio_log[1].width == 1, "MAC: byte reads");
	CHECK_EQ(-1, virtio_mmio_cfg_read(&vm, WIN_SIZE - 0x100 - 1, &st, 2),
	         "beyond the window refused");
}

/* The driver's plans (vnet.c): one pair on the BSP; two pairs, pair k's
 * queues polled on CPU k. */
static const struct virtio_irq_plan one_pair = {
    2, SHIM_APIC_ID(0), {SHIM_APIC_ID(0), SHIM_APIC_ID(0)}};
static const struct virtio_irq_plan two_pairs = {
    4, SHIM_APIC_ID(0), {SHIM_APIC_ID(0), SHIM_APIC_ID(0), SHIM_APIC_ID(1), SHIM_APIC_ID(1)}};

/* The interrupt a halt build needs: a GSI the I/O APIC has goes there with
 * the trigger mode and polarity the DSDT gave; a legacy line without one
 * goes to the 8259; a GSI neither has is refused, saying why. */
static void test_irq_routing(void)
{
	struct virtio_mmio vm;
	char err[256];

	setup(2, 1, 2, 0);
	CHECK_EQ(0, virtio_mmio_probe(&vm, 1, err, sizeof(err)), "probe");
	devs[0].irq = 47; /* microvm, acpi=on: level, active high */
	shim_gsi_last = (struct shim_gsi){0};
	CHECK_EQ(0, virtio_mmio_irq_setup(&vm, &one_pair, err, sizeof(err)), "GSI 47 routed");
	CHECK(shim_gsi_last.calls == 1 && shim_gsi_last.gsi == 47, "through the I/O APIC");
	CHECK(shim_gsi_last.level && !shim_gsi_last.active_low, "level, active high as declared");
	CHECK(!strcmp(virtio_mmio_irq_mode_name(&vm), "line"), "irq mode line");

	setup(2, 1, 2, 0);
	CHECK_EQ(0, virtio_mmio_probe(&vm, 1, err, sizeof(err)), "probe");
	devs[0].irq = 30;
	devs[0].edge = true;
	devs[0].active_low = true;
	shim_gsi_last = (struct shim_gsi){0};
	CHECK_EQ(0, virtio_mmio_irq_setup(&vm, &one_pair, err, sizeof(err)), "GSI 30 routed");
	CHECK(!shim_gsi_last.level && shim_gsi_last.active_low, "edge, active low as declared");

	setup(2, 1, 2, 0);
	CHECK_EQ(0, virtio_mmio_probe(&vm, 1, err, sizeof(err)), "probe");
	shim_gsi_last = (struct shim_gsi){0};
	CHECK_EQ(0, virtio_mmio_irq_setup(&vm, &one_pair, err, sizeof(err)), "line 5 routed");
	CHECK_EQ(0u, shim_gsi_last.calls, "line 5 (no I/O APIC has it): the 8259");

	setup(2, 1, 2, 0);
	CHECK_EQ(0, virtio_mmio_probe(&vm, 1, err, sizeof(err)), "probe");
	devs[0].irq = 60;
	CHECK_EQ(-1, virtio_mmio_irq_setup(&vm, &one_pair, err, sizeof(err)), "GSI 60 refused");
	CHECK(strstr(err, "GSI 60") && strstr(err, "IDLE=poll"),
	      "the error names the GSI and the way out");
	printf("     GSI 60: %s\n", err);

	/* Two pairs polled on two CPUs: one line reaches one of them only, so
	 * the set-up refuses (before it routes anything), naming the queue. */
	setup(2, 1, 2, 0);
	CHECK_EQ(0, virtio_mmio_probe(&vm, 1, err, sizeof(err)), "probe");
	shim_gsi_last = (struct shim_gsi){0};
	CHECK_EQ(-1, virtio_mmio_irq_setup(&vm, &two_pairs, err, sizeof(err)),
	         "two pairs on two CPUs refused");
	CHECK(strstr(err, "queue 2") && strstr(err, "one interrupt line") &&
	          strstr(err, "IDLE=poll"),
	      "the error names the queue, the line and the way out");
	CHECK_EQ(0u, shim_gsi_last.calls, "nothing routed");
	CHECK(!strcmp(virtio_mmio_irq_mode_name(&vm), "none"), "irq mode none");
	printf("     two pairs: %s\n", err);
}

int main(void)
{
	printf("test_virtio_mmio\n");
	RUN(test_probe);
	RUN(test_queue_setup_order);
	RUN(test_notification_data);
	RUN(test_config_widths);
	RUN(test_irq_routing);
	return check_done("test_virtio_mmio");
}
