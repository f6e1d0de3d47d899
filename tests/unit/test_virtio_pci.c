/*
 * test_virtio_pci.c: the transport's device-configuration reads
 * (drivers/virtio/virtio_pci.c, compiled with tests/unit/mmio_trace.h in
 * place of kernel/arch.h): each field read with an access of its own width
 * (virtio 1.2 4.1.3.1), and config_generation honoured (2.5.1).
 */
#include <stdio.h>
#include <string.h>
#include "drivers/virtio/virtio_pci.h"
#include "kernel/kernel.h"
#include "tests/unit/check.h"
#include "tests/unit/host_shim.h"

int check_failed, check_total;
struct mmio_access mmio_log[256];
unsigned mmio_nlog;
uintptr_t mmio_refuse_addr;

/* The kernel's PCI surface (kernel/pci.c) as one modelled function:
 * configuration space in cfgsp[], BARs in bars[] (their addresses point at
 * host memory, so the structures they hold are plain arrays). pci_count()
 * is 0 unless a test adds the function. */
static uint8_t cfgsp[256];
static struct {
	uint64_t base, size;
	bool io;
} bars[6];
static struct pci_dev fdev = {.bus = 0, .dev = 3, .fn = 0, .vendor = 0x1af4, .device = 0x1041};
static int npci;

int pci_count(void)
{
	return npci;
}
const struct pci_dev *pci_get(int i)
{
	return i == 0 && npci ? &fdev : NULL;
}
uint8_t pci_cfg_read8(const struct pci_dev *d, uint16_t off)
{
	(void)d;
	return cfgsp[off & 0xff];
}
uint16_t pci_cfg_read16(const struct pci_dev *d, uint16_t off)
{
	return (uint16_t)(pci_cfg_read8(d, off) | pci_cfg_read8(d, (uint16_t)(off + 1)) << 8);
}
uint32_t pci_cfg_read32(const struct pci_dev *d, uint16_t off)
{
	return pci_cfg_read16(d, off) | (uint32_t)pci_cfg_read16(d, (uint16_t)(off + 2)) << 16;
}
uint64_t pci_bar(const struct pci_dev *d, int bar, uint64_t *size, bool *is_io)
{
	(void)d;
	*size = bars[bar].size;
	*is_io = bars[bar].io;
	return bars[bar].base;
}
void pci_enable_mmio_busmaster(const struct pci_dev *d)
{
	(void)d;
}
void pci_cfg_write16(const struct pci_dev *d, uint16_t off, uint16_t v)
{
	(void)d;
	cfgsp[off & 0xff] = (uint8_t)v;
	cfgsp[(off + 1) & 0xff] = (uint8_t)(v >> 8);
}
void paging_map_mmio(uint64_t phys, uint64_t len)
{
	(void)phys, (void)len;
}

static uint8_t common[64] __attribute__((aligned(8)));
static uint8_t devcfg[32] __attribute__((aligned(8)));

static struct virtio_pci fake(void)
{
	struct virtio_pci vp = {0};

	vp.common = (uintptr_t)common;
	vp.device_cfg = (uintptr_t)devcfg;
	vp.device_cfg_len = sizeof(devcfg);
	return vp;
}

/* Widths of the device-config accesses since the log was cleared. */
static void widths(char *out)
{
	for (unsigned i = 0; i < mmio_nlog; i++)
		if (mmio_log[i].addr >= (uintptr_t)devcfg &&
		    mmio_log[i].addr < (uintptr_t)devcfg + sizeof(devcfg))
			*out++ = (char)('0' + mmio_log[i].width);
	*out = 0;
}

static void test_field_widths(void)
{
	struct virtio_pci vp = fake();
	uint8_t mac[6];
	uint16_t status, mtu;
	uint32_t v32;
	char w[64];

	for (unsigned i = 0; i < sizeof(devcfg); i++)
		devcfg[i] = (uint8_t)(0x10 + i);
	mmio_nlog = 0;
	CHECK_EQ(0, virtio_pci_cfg_read(&vp, VIRTIO_NET_CFG_MAC, mac, 6), "MAC read");
	widths(w);
	CHECK_EQ(0, strcmp(w, "111111"), "MAC: six 8-bit accesses");
	CHECK_EQ(0x15, mac[5], "MAC bytes");

	mmio_nlog = 0;
	CHECK_EQ(0, virtio_pci_cfg_read(&vp, VIRTIO_NET_CFG_STATUS, &status, 2), "status read");
	widths(w);
	printf("     status (16-bit field at 6): accesses of widths \"%s\"\n", w);
	CHECK_EQ(0, strcmp(w, "2"), "status: one 16-bit access");
	CHECK_EQ(0x1716, status, "status value (little-endian)");
	CHECK_EQ((uintptr_t)devcfg + 6, mmio_log[1].addr, "at the field's own address");

	mmio_nlog = 0;
	CHECK_EQ(0, virtio_pci_cfg_read(&vp, VIRTIO_NET_CFG_MTU, &mtu, 2), "MTU read");
	widths(w);
	CHECK_EQ(0, strcmp(w, "2"), "MTU: one 16-bit access");
	CHECK_EQ(0x1b1a, mtu, "MTU value");

	mmio_nlog = 0;
	CHECK_EQ(0, virtio_pci_cfg_read(&vp, 12, &v32, 4), "32-bit field");
	widths(w);
	CHECK_EQ(0, strcmp(w, "4"), "32-bit field: one 32-bit access");
	CHECK_EQ(0x1f1e1d1c, v32, "32-bit value");

	CHECK_EQ(-1, virtio_pci_cfg_read(&vp, 30, &v32, 4), "beyond the structure refused");
}

/* A config_generation that never settles is reported, not spun on. */
static void test_generation(void)
{
	struct virtio_pci vp = fake();
	uint16_t st;

	/* Mid-update on every read: the generation byte changes under us.
	 * With plain memory we emulate it by checking the retry bound: the
	 * read succeeds when the generation is stable. */
	common[VIRTIO_PCI_COMMON_CFGGENERATION] = 7;
	mmio_nlog = 0;
	CHECK_EQ(0, virtio_pci_cfg_read(&vp, VIRTIO_NET_CFG_STATUS, &st, 2), "stable generation");
	CHECK(mmio_nlog == 3 && mmio_log[0].width == 1 && mmio_log[2].width == 1,
	      "generation read before and after the field (2.5.1)");
}

/* Capabilities for the modelled function: a list from 0x40 on. */
static uint8_t cap_pos;

static void caps_reset(void)
{
	memset(cfgsp, 0, sizeof(cfgsp));
	memset(bars, 0, sizeof(bars));
	cfgsp[0x06] = 0x10; /* STATUS: capability list */
	cfgsp[0x34] = 0;
	cap_pos = 0;
	npci = 1;
}

static void cap_link(uint8_t pos, uint8_t len)
{
	if (cap_pos)
		cfgsp[cap_pos + 1] = pos;
	else
		cfgsp[0x34] = pos;
	cap_pos = pos;
	cfgsp[pos + 1] = 0;
	(void)len;
}

static void cap_add(uint8_t pos, uint8_t type, uint8_t bar, uint32_t off, uint32_t len)
{
	uint8_t caplen = type == VIRTIO_PCI_CAP_NOTIFY_CFG ? 20 : 16;

	cap_link(pos, caplen);
	cfgsp[pos] = 0x09; /* vendor-specific */
	cfgsp[pos + VIRTIO_PCI_CAP_LEN] = caplen;
	cfgsp[pos + VIRTIO_PCI_CAP_CFG_TYPE] = type;
	cfgsp[pos + VIRTIO_PCI_CAP_BAR] = bar;
	memcpy(&cfgsp[pos + VIRTIO_PCI_CAP_OFFSET], &off, 4);
	memcpy(&cfgsp[pos + VIRTIO_PCI_CAP_LENGTH], &len, 4);
	if (type == VIRTIO_PCI_CAP_NOTIFY_CFG) {
		uint32_t mult = 4;
		memcpy(&cfgsp[pos + 16], &mult, 4);
	}
}

static uint8_t bar4[0x4000] __attribute__((aligned(4096)));

/* 4.1.4.1: the first capability of each type the driver can use. QEMU
 * lays out common 0x0, ISR 0x1000, device 0x2000, notify 0x3000 in BAR4;
 * in front of each the test puts one the driver cannot use: in an I/O
 * BAR, in an unassigned BAR, overrunning its BAR. */
static void test_cap_first_usable(void)
{
	struct virtio_pci vp;
	char err[160] = "";

	caps_reset();
	bars[0] = (typeof(bars[0])){.base = 0xc000, .size = 0x40, .io = true};
	bars[2] = (typeof(bars[0])){.base = 0, .size = 0x4000, .io = false}; /* unassigned */
	bars[4] = (typeof(bars[0])){.base = (uintptr_t)bar4, .size = sizeof(bar4), .io = false};
	cap_add(0x40, VIRTIO_PCI_CAP_COMMON_CFG, 0, 0, 0x38);        /* I/O BAR */
	cap_add(0x50, VIRTIO_PCI_CAP_COMMON_CFG, 4, 0, 0x1000);      /* usable */
	cap_add(0x60, VIRTIO_PCI_CAP_ISR_CFG, 2, 0x1000, 0x1000);    /* unassigned */
	cap_add(0x70, VIRTIO_PCI_CAP_ISR_CFG, 4, 0x1000, 0x1000);    /* usable */
	cap_add(0x80, VIRTIO_PCI_CAP_DEVICE_CFG, 4, 0x3f00, 0x1000); /* overruns BAR4 */
	cap_add(0x90, VIRTIO_PCI_CAP_DEVICE_CFG, 4, 0x2000, 0x1000); /* usable */
	cap_add(0xa0, VIRTIO_PCI_CAP_NOTIFY_CFG, 0, 0, 0x10);        /* I/O BAR */
	cap_add(0xb4, VIRTIO_PCI_CAP_NOTIFY_CFG, 4, 0x3000, 0x1000); /* usable */
	cap_add(0xc8, VIRTIO_PCI_CAP_COMMON_CFG, 4, 0x100, 0x38);    /* usable, but later */
	int r = virtio_pci_probe(&vp, 1, err, sizeof(err));
	CHECK_EQ(0, r, "probe with a usable capability of each type after an unusable one");
	if (r)
		printf("    probe said: %s\n", err);
	CHECK_EQ((uintptr_t)bar4, vp.common,
	         "common: the first usable one (BAR4+0), not the I/O BAR's or a later one");
	CHECK_EQ((uintptr_t)bar4 + 0x1000, vp.isr, "ISR: BAR4+0x1000, not the unassigned BAR's");
	CHECK_EQ((uintptr_t)bar4 + 0x2000, vp.device_cfg,
	         "device: BAR4+0x2000, not the overrunning one");
	CHECK_EQ((uintptr_t)bar4 + 0x3000, vp.notify_base, "notify: BAR4+0x3000");
	CHECK_EQ(4, vp.notify_mult, "notify multiplier of the capability taken");

	/* Only unusable ones: refused, with the reason. */
	caps_reset();
	bars[0] = (typeof(bars[0])){.base = 0xc000, .size = 0x40, .io = true};
	bars[4] = (typeof(bars[0])){.base = (uintptr_t)bar4, .size = sizeof(bar4), .io = false};
	cap_add(0x40, VIRTIO_PCI_CAP_COMMON_CFG, 0, 0, 0x38);
	cap_add(0x50, VIRTIO_PCI_CAP_ISR_CFG, 4, 0x1000, 0x1000);
	cap_add(0x60, VIRTIO_PCI_CAP_DEVICE_CFG, 4, 0x2000, 0x1000);
	cap_add(0x70, VIRTIO_PCI_CAP_NOTIFY_CFG, 4, 0x3000, 0x1000);
	err[0] = 0;
	CHECK_EQ(-1, virtio_pci_probe(&vp, 1, err, sizeof(err)),
	         "only an I/O-BAR common capability: refused");
	CHECK(strstr(err, "I/O BAR") != NULL, "the refusal names the I/O BAR");
	npci = 0;
}

/* The driver's plans (vnet.c): one pair on the BSP; two pairs, pair k's
 * queues polled on CPU k. */
#define A0 SHIM_APIC_ID(0)
#define A1 SHIM_APIC_ID(1)
static const struct virtio_irq_plan one_pair = {2, A0, {A0, A0}};
static const struct virtio_irq_plan two_pairs = {4, A0, {A0, A0, A1, A1}};

/* MSI-X capability at 0xe0: table in BAR1, `entries` entries (3 unless
 * msix_device_n says otherwise). */
static uint8_t bar1[0x1000] __attribute__((aligned(4096)));

static void msix_device_n(unsigned entries)
{
	caps_reset();
	memset(bar1, 0, sizeof(bar1));
	bars[1] = (typeof(bars[0])){.base = (uintptr_t)bar1, .size = sizeof(bar1), .io = false};
	cap_link(0xe0, 12);
	cfgsp[0xe0] = 0x11;
	cfgsp[0xe0 + 2] = (uint8_t)(entries - 1); /* table size - 1 */
	cfgsp[0xe0 + 4] = 1;                      /* BIR 1, offset 0 */
	cfgsp[0x3c] = 11;                         /* interrupt line */
	cfgsp[0x3d] = 1;                          /* pin INTA */
	memset(common, 0, sizeof(common));
}

static void msix_device(void)
{
	msix_device_n(3);
}

/* irq_alloc() failing part way through the MSI-X set-up must leave MSI-X
 * disabled and the function unmasked (PCI 3.0 6.8.2.3: with MSI-X Enable
 * set the function may not use INTx), and COMMAND's Interrupt Disable
 * clear, or the INTx fallback never fires. */
static void test_msix_partial_failure_falls_back_to_intx(void)
{
	struct virtio_pci vp = fake();
	char err[160] = "";

	for (int left = 0; left < 3; left++) {
		char what[96];

		msix_device();
		vp = fake();
		vp.pci = &fdev;
		shim_irq_alloc_left = left;
		int r = virtio_pci_irq_setup(&vp, &one_pair, err, sizeof(err));
		shim_irq_alloc_left = -1;
		snprintf(what, sizeof(what), "irq_alloc fails after %d: INTx fallback taken", left);
		CHECK(r == 0 && vp.irq_mode == VIRTIO_PCI_IRQ_INTX, what);
		uint16_t ctrl = pci_cfg_read16(&fdev, 0xe0 + 2);
		snprintf(what, sizeof(what),
		         "irq_alloc fails after %d: MSI-X Enable and Function Mask clear", left);
		CHECK_EQ(0, ctrl & 0xc000, what);
		snprintf(what, sizeof(what),
		         "irq_alloc fails after %d: COMMAND Interrupt Disable clear", left);
		CHECK_EQ(0, pci_cfg_read16(&fdev, 0x04) & (1u << 10), what);
	}
	/* With vectors to spare, MSI-X stays on and unmasked. */
	msix_device();
	vp = fake();
	vp.pci = &fdev;
	CHECK_EQ(0, virtio_pci_irq_setup(&vp, &one_pair, err, sizeof(err)), "MSI-X set-up");
	CHECK_EQ(VIRTIO_PCI_IRQ_MSIX, vp.irq_mode, "MSI-X mode");
	CHECK_EQ(0x8000, pci_cfg_read16(&fdev, 0xe0 + 2) & 0xc000,
	         "MSI-X enabled, function unmasked");
	npci = 0;
}

/* Table entry e's destination APIC id (address bits 19:12) and vector. */
static unsigned entry_dest(unsigned e)
{
	uint32_t lo;

	memcpy(&lo, bar1 + 16 * e, 4);
	return (lo >> 12) & 0xff;
}

static unsigned entry_vec(unsigned e)
{
	uint32_t d;

	memcpy(&d, bar1 + 16 * e + 8, 4);
	return d;
}

/* virtio_msix_layout(): a table big enough gives config entry 0 and one
 * entry per queue, each aimed at its queue's CPU; a short one one entry
 * per CPU (its queues share it, counted in the first one's slot); one
 * entry serves a single CPU only; a table too short for the CPUs, or an
 * APIC id an MSI cannot address, is refused. */
static void test_msix_layout(void)
{
	struct virtio_msix_layout l;
	char err[256] = "";

	CHECK_EQ(0, virtio_msix_layout(5, &two_pairs, &l, err, sizeof(err)), "5 entries, 4 queues");
	CHECK_EQ(5, l.used, "5 used");
	for (unsigned q = 0; q < 4; q++) {
		CHECK_EQ(1 + q, l.queue_entry[q], "queue q on entry 1 + q");
		CHECK_EQ(two_pairs.dest[q], l.entry_dest[1 + q], "entry 1 + q to queue q's CPU");
		CHECK_EQ(1 + q, l.entry_slot[1 + q], "entry 1 + q counts in slot 1 + q");
	}
	CHECK(l.entry_dest[0] == A0 && l.entry_slot[0] == 0, "entry 0: config, to pair 0's CPU");

	CHECK_EQ(0, virtio_msix_layout(3, &two_pairs, &l, err, sizeof(err)), "3 entries, 2 CPUs");
	CHECK_EQ(3, l.used, "3 used");
	CHECK(l.queue_entry[0] == 1 && l.queue_entry[1] == 1, "pair 0's queues share entry 1");
	CHECK(l.queue_entry[2] == 2 && l.queue_entry[3] == 2, "pair 1's queues share entry 2");
	CHECK(l.entry_dest[1] == A0 && l.entry_dest[2] == A1, "each to its pair's CPU");
	CHECK(l.entry_slot[1] == 1 && l.entry_slot[2] == 3, "counted in each pair's RX slot");

	CHECK_EQ(-1, virtio_msix_layout(2, &two_pairs, &l, err, sizeof(err)), "2 entries, 2 CPUs");
	CHECK(strstr(err, "2 entries") != NULL, "the error gives the table size");
	printf("     2 entries, 2 CPUs: %s\n", err);

	CHECK_EQ(0, virtio_msix_layout(2, &one_pair, &l, err, sizeof(err)), "2 entries, one pair");
	CHECK(l.used == 2 && l.queue_entry[0] == 1 && l.queue_entry[1] == 1,
	      "both queues on entry 1");
	CHECK_EQ(0, virtio_msix_layout(1, &one_pair, &l, err, sizeof(err)), "1 entry, one pair");
	CHECK(l.used == 1 && l.queue_entry[0] == 0 && l.queue_entry[1] == 0,
	      "everything on entry 0");

	struct virtio_irq_plan far = two_pairs;
	far.dest[3] = 256;
	CHECK_EQ(-1, virtio_msix_layout(5, &far, &l, err, sizeof(err)), "APIC id 256 refused");
	CHECK(strstr(err, "queue 3") != NULL, "the error names the queue");
}

/* Two pairs on a 5-entry table: each entry's message goes to its queue's
 * CPU with a vector of its own; then each queue selects its entry
 * (4.1.4.3 queue_msix_vector), the control queue NO_VECTOR, and a device
 * that answers NO_VECTOR is an error naming the queue. */
static uint8_t notify_area[64];

static int queue(struct virtio_pci *vp, struct virtq *vq, uint16_t q, char *err, size_t errlen)
{
	uint16_t size = 8;

	memcpy(common + VIRTIO_PCI_COMMON_Q_SIZE, &size, 2);
	return virtio_pci_queue_setup(vp, vq, q, false, err, errlen);
}

static uint16_t queue_msix_written(void)
{
	uint16_t v;

	memcpy(&v, common + VIRTIO_PCI_COMMON_Q_MSIX, 2);
	return v;
}

static void test_msix_vector_per_queue(void)
{
	static struct virtq vq[5];
	struct virtio_pci vp;
	char err[256] = "";

	msix_device_n(5);
	vp = fake();
	vp.pci = &fdev;
	vp.notify_base = (uintptr_t)notify_area;
	vp.notify_len = sizeof(notify_area);
	CHECK_EQ(0, virtio_pci_irq_setup(&vp, &two_pairs, err, sizeof(err)), "MSI-X, two pairs");
	CHECK_EQ(VIRTIO_PCI_IRQ_MSIX, vp.irq_mode, "MSI-X mode");
	CHECK_EQ(5, vp.msix.used, "five entries used");
	for (unsigned e = 0; e < 5; e++) {
		CHECK_EQ(e < 3 ? A0 : A1, entry_dest(e), "entry e aimed at its queue's CPU");
		CHECK(e == 0 || entry_vec(e) != entry_vec(e - 1), "a vector per entry");
	}
	for (uint16_t q = 0; q < 5; q++) {
		CHECK_EQ(0, queue(&vp, &vq[q], q, err, sizeof(err)), "queue set up");
		CHECK_EQ(q < 4 ? q + 1u : VIRTIO_PCI_NO_VECTOR, queue_msix_written(),
		         "queue_msix_vector: entry 1 + q; the control queue NO_VECTOR");
	}
	mmio_refuse_addr = (uintptr_t)common + VIRTIO_PCI_COMMON_Q_MSIX;
	CHECK_EQ(-1, queue(&vp, &vq[2], 2, err, sizeof(err)), "NO_VECTOR read back: refused");
	CHECK(strstr(err, "queue 2: device refused MSI-X entry 3") != NULL, "the error says so");
	mmio_refuse_addr = 0;

	/* No MSI-X capability: the INTx line reaches the BSP only. */
	caps_reset();
	vp = fake();
	vp.pci = &fdev;
	cfgsp[0x3d] = 1;
	CHECK_EQ(-1, virtio_pci_irq_setup(&vp, &two_pairs, err, sizeof(err)), "INTx, two CPUs");
	CHECK(strstr(err, "the INTx line") && strstr(err, "no MSI-X capability"),
	      "the error names the line and why there is no MSI-X");
	printf("     INTx, two pairs: %s\n", err);
	npci = 0;
}

int main(void)
{
	printf("test_virtio_pci\n");
	RUN(test_field_widths);
	RUN(test_generation);
	RUN(test_cap_first_usable);
	RUN(test_msix_partial_failure_falls_back_to_intx);
	RUN(test_msix_layout);
	RUN(test_msix_vector_per_queue);
	return check_done("test_virtio_pci");
}
