/*
 * test_pci.c: kernel/pci.c's configuration accesses against a model of one
 * function's configuration space (tests/unit/cfg_model.h replaces
 * kernel/arch.h), through the 0xCF8/0xCFC ports and through ECAM. A 16-bit
 * write must change its own two bytes only: writing COMMAND may not write
 * STATUS back, whose error bits are write-1-to-clear (PCI 3.0 6.2.3; issue
 * 23 finding 4).
 */
#include <stdio.h>
#include <string.h>
#include "kernel/kernel.h"
#include "tests/unit/check.h"

int check_failed, check_total;

#define ECAM_BASE   0xe0000000u
#define STATUS_W1C  0xf900u /* PCI 3.0 6.2.3: bits 8 and 11-15 */
#define CFG_ADDR    0xcf8
#define CFG_DATA    0xcfc
#define PCI_COMMAND 0x04
#define PCI_STATUS  0x06
static uint8_t space[256]; /* function 00:00.0; every other one is absent */
static uint32_t cf8;
static unsigned dword_writes_cmd; /* 32-bit writes to the COMMAND/STATUS dword */
static unsigned data_reads;       /* CONFIG_DATA reads: each an exit under KVM */
static uint64_t ecam_on;
static int no_ports; /* microvm: nothing answers at 0xCF8/0xCFC */

/* The function's BARs as a device decodes them (PCI 3.0 6.2.5.1): size
 * 0 = not implemented (reads 0 whatever is written), else the address bits
 * below the size read 0 and the low four bits are the BAR's type. BAR1: a
 * 32-bit memory BAR of 4 KiB; BAR4-5: a 64-bit prefetchable one of 16 KiB
 * (virtio-net-pci's modern BAR). */
static const struct {
	uint32_t size, flags;
} bar_model[6] = {{0, 0}, {0x1000, 0x0}, {0, 0}, {0, 0}, {0x4000, 0xc}, {0, 0}};

static void bar_decode(unsigned off)
{
	unsigned i = (off - 0x10) / 4;
	uint32_t v = 0;

	for (int k = 0; k < 4; k++)
		v |= (uint32_t)space[0x10 + 4 * i + k] << (8 * k);
	/* BAR5 as BAR4's upper half keeps every bit (16 KiB < 4 GiB) */
	if (!(i == 5 && bar_model[4].size))
		v = bar_model[i].size ? (v & ~(bar_model[i].size - 1) & ~15u) | bar_model[i].flags
		                      : 0;
	for (int k = 0; k < 4; k++)
		space[0x10 + 4 * i + k] = (uint8_t)(v >> (8 * k));
}

static void space_write(unsigned off, unsigned width, uint32_t v)
{
	if (width == 4 && off == PCI_COMMAND)
		dword_writes_cmd++;
	for (unsigned i = 0; i < width; i++) {
		unsigned o = off + i;
		uint8_t b = (uint8_t)(v >> (8 * i));

		if (o == PCI_STATUS || o == PCI_STATUS + 1) {
			uint8_t w1c = (uint8_t)(STATUS_W1C >> (8 * (o - PCI_STATUS)));
			space[o] &= (uint8_t) ~(b & w1c); /* the rest of STATUS is read-only */
		} else if (o >= 4) {
			space[o] = b; /* ids read-only */
		}
	}
	if (off >= 0x10 && off < 0x28)
		bar_decode(off & ~3u);
}

static uint32_t space_read(unsigned off, unsigned width)
{
	uint32_t v = 0;

	for (unsigned i = 0; i < width; i++)
		v |= (uint32_t)space[off + i] << (8 * i);
	return v;
}

/* CONFIG_ADDRESS bits 23:16 bus, 15:11 device, 10:8 function, 7:2 dword;
 * the CONFIG_DATA port's low two bits are the byte lane (PCI 3.0 3.2.2.3.2). */
uint32_t model_port_read(uint16_t port, unsigned width)
{
	if (no_ports) {
		if (port >= CFG_DATA && port < CFG_DATA + 4)
			data_reads++; /* a slot read where nothing answers */
		return 0xffffffffu;
	}
	if (port == CFG_ADDR && width == 4)
		return cf8;
	if (port >= CFG_DATA && port + width <= CFG_DATA + 4 && (cf8 & 0x80000000u)) {
		data_reads++;
		if (cf8 & 0x00ffff00u)
			return width == 4 ? 0xffffffffu : (1u << (8 * width)) - 1;
		return space_read((cf8 & 0xfc) + (port & 3u), width);
	}
	return 0xffffffffu;
}

void model_port_write(uint16_t port, unsigned width, uint32_t v)
{
	if (port == CFG_ADDR && width == 4) {
		cf8 = v;
		return;
	}
	if (port >= CFG_DATA && port + width <= CFG_DATA + 4 && (cf8 & 0x80000000u) &&
	    !(cf8 & 0x00ffff00u))
		space_write((cf8 & 0xfc) + (port & 3u), width, v);
}

uint32_t model_mmio_read(uintptr_t a, unsigned width)
{
	uintptr_t off = a - ECAM_BASE;

	if (off >= 4096) /* only 00:00.0 exists */
		return width == 4 ? 0xffffffffu : (1u << (8 * width)) - 1;
	return space_read((unsigned)off, width);
}

void model_mmio_write(uintptr_t a, unsigned width, uint32_t v)
{
	uintptr_t off = a - ECAM_BASE;

	if (off < 256)
		space_write((unsigned)off, width, v);
}

uint64_t acpi_ecam_base(uint8_t *bus_start, uint8_t *bus_end)
{
	*bus_start = 0;
	*bus_end = 0;
	return ecam_on;
}

void paging_map_mmio(uint64_t phys, uint64_t len)
{
	(void)phys, (void)len;
}

static void reset_space(void)
{
	memset(space, 0, sizeof(space));
	space[0] = 0xf4, space[1] = 0x1a; /* 1af4:1041 */
	space[2] = 0x41, space[3] = 0x10;
	space[PCI_COMMAND] = 0x03;
	/* STATUS: capability list, and three latched errors (received master
	 * abort, signaled system error, detected parity error). */
	space[PCI_STATUS] = 0x10;
	space[PCI_STATUS + 1] = 0x20 | 0x40 | 0x80;
	dword_writes_cmd = 0;
}

static void check_writes(const char *how)
{
	const struct pci_dev *d = pci_get(0);
	char what[96];

	reset_space();
	pci_cfg_write16(d, PCI_COMMAND, 0x0407);
	snprintf(what, sizeof(what), "%s: COMMAND written", how);
	CHECK_EQ(0x0407, pci_cfg_read16(d, PCI_COMMAND), what);
	snprintf(what, sizeof(what), "%s: STATUS error bits survive a COMMAND write", how);
	CHECK_EQ(0xe010, pci_cfg_read16(d, PCI_STATUS), what);
	snprintf(what, sizeof(what), "%s: no dword write for a 16-bit register", how);
	CHECK_EQ(0, dword_writes_cmd, what);

	/* The upper half of a dword, through the 0xCFE lane. */
	space[0x0c] = 0x11, space[0x0d] = 0x22, space[0x0e] = 0x33, space[0x0f] = 0x44;
	pci_cfg_write16(d, 0x0e, 0xbeef);
	snprintf(what, sizeof(what), "%s: 16-bit write at offset 2 of a dword", how);
	CHECK_EQ(0xbeef2211u, pci_cfg_read32(d, 0x0c), what);

	/* Clearing an error on purpose still works: a 1 written to STATUS. */
	pci_cfg_write16(d, PCI_STATUS, 0x2000);
	snprintf(what, sizeof(what), "%s: W1C clears only the bit written", how);
	CHECK_EQ(0xc010, pci_cfg_read16(d, PCI_STATUS), what);

	/* pci_enable_mmio_busmaster() and pci_bar() write COMMAND too. */
	reset_space();
	pci_enable_mmio_busmaster(d);
	(void)pci_bar(d, 0, NULL, NULL);
	snprintf(what, sizeof(what), "%s: STATUS intact after busmaster enable and BAR sizing",
	         how);
	CHECK_EQ(0xe010, pci_cfg_read16(d, PCI_STATUS), what);
}

static void test_no_ports(void)
{
	ecam_on = 0;
	no_ports = 1;
	reset_space();
	data_reads = 0;
	pci_init();
	no_ports = 0;
	CHECK_EQ(0, pci_count(), "no functions where CONFIG_ADDRESS does not hold its value");
	CHECK_EQ(0, data_reads,
	         "no slot read without configuration mechanism #1 (64 exits on microvm)");
	CHECK(!strcmp(pci_access_method(), "none"), "pci=none");
}

static void test_ports(void)
{
	ecam_on = 0;
	reset_space();
	data_reads = 0;
	pci_init();
	CHECK_EQ(1, pci_count(), "one function found through the ports");
	/* One read per slot (its header type: there, and one function or
	 * eight), nothing else before the ready line: the ids and the class
	 * are left for after it (every read is an exit under KVM). */
	CHECK_EQ(32, data_reads, "configuration reads to scan a bus with one function");
	space_write(0x08, 4, 0x02000001u);    /* class 020000 (Ethernet), revision 1 */
	const struct pci_dev *d = pci_get(0); /* a driver's first look: the ids */
	CHECK_EQ(0x1af4, d->vendor, "vendor ID read by the first pci_get()");
	CHECK_EQ(0x1041, d->device, "device ID read by the first pci_get()");
	CHECK_EQ(0x02000001u, d->class_rev, "class read with the ids");
	CHECK_EQ(34, data_reads, "two more reads per function: the ids and the class");
	pci_print(); /* after the ready line */
	CHECK_EQ(34, data_reads, "each function's ids and class read once");
	CHECK(!strcmp(pci_access_method(), "ports"), "ports");
	check_writes("ports");
}

static void test_ecam(void)
{
	ecam_on = ECAM_BASE;
	pci_init(); /* bus 0 already scanned: only switches to ECAM */
	CHECK(!strcmp(pci_access_method(), "ecam"), "ecam");
	check_writes("ecam");
}

static void test_place(void)
{
	static const struct pci_range busy[] = {{0x20000000, 0x1000}, {0x20005000, 0x3000}};
	static const struct pci_range tail[] = {{0x20005000, 0x2000}};

	CHECK_EQ(0x20000000u, pci_place(NULL, 0, 0x20000000, 0xfec00000ull, 0x4000),
	         "an empty hole: its first aligned address");
	CHECK_EQ(0x20004000u, pci_place(NULL, 0, 0x20000001, 0xfec00000ull, 0x4000),
	         "a start that is not aligned: the next multiple of the size");
	CHECK_EQ(0x20008000u, pci_place(busy, 2, 0x20000000, 0xfec00000ull, 0x4000),
	         "first fit clear of both busy ranges, size-aligned");
	CHECK_EQ(0x20001000u, pci_place(busy, 2, 0x20000000, 0xfec00000ull, 0x1000),
	         "a small BAR fits the gap between them");
	CHECK_EQ(0, pci_place(busy, 2, 0x20000000, 0x20008000ull, 0x4000),
	         "no room below the end: 0");
	CHECK_EQ(0x20007000u, pci_place(tail, 1, 0x20005000, 0x20008000ull, 0x1000),
	         "the last page below the end");
	CHECK_EQ(0, pci_place(busy + 1, 1, 0x20005000, 0x20008000ull, 0x1000),
	         "a window all busy: 0");
	CHECK_EQ(0, pci_place(NULL, 0, 0x20000000, 0xfec00000ull, 0x3000),
	         "a size that is not a power of two: 0");
	CHECK_EQ(0, pci_place(NULL, 0, 0x20000000, 0xfec00000ull, 0), "size 0: 0");
	CHECK_EQ(0, pci_place(NULL, 0, 0xfffffffffffff000ull, ~0ull, 0x4000),
	         "an aligned start that wraps: 0");
}

/* pci_bar() on a BAR firmware left at 0 (qboot leaves virtio-net-pci's
 * 64-bit BAR so): placed above RAM, clear of the reserved ranges of the
 * boot map and of every BAR decoding, written back, counted. */
static void test_assign(void)
{
	static struct boot_info bi;
	const struct pci_dev *d = pci_get(0);
	uint64_t size = 0;
	bool io = true;

	ecam_on = 0;
	reset_space();
	space_write(0x14, 4, 0x20000000u); /* BAR1 decodes at the bottom of the hole */
	space_write(0x20, 4, 0);
	space_write(0x24, 4, 0);
	CHECK_EQ(0, pci_bar(d, 4, &size, &io), "no memory map yet: nothing is known free, 0");
	CHECK_EQ(0x4000u, size, "BAR4 sized 16 KiB");
	CHECK_EQ(0, pci_bars_assigned(), "nothing placed without a map");

	bi.nmmap = 4;
	bi.mmap[0] = (struct boot_mem_region){0, 0x9fc00, BOOT_MEM_RAM};
	bi.mmap[1] = (struct boot_mem_region){0x100000, 0x1ff00000, BOOT_MEM_RAM};
	bi.mmap[2] = (struct boot_mem_region){0x20004000, 0x4000, BOOT_MEM_RESERVED};
	bi.mmap[3] = (struct boot_mem_region){0xfffc0000, 0x40000, BOOT_MEM_RESERVED};
	pci_note_memory(&bi);
	uint64_t a = pci_bar(d, 4, &size, &io);
	CHECK_EQ(
	    0x20008000u, a,
	    "above RAM (0x20000000), past BAR1 (0x20000000+) and the reserved range at 0x20004000");
	CHECK(!io, "a memory BAR");
	CHECK_EQ(0x2000800cu, pci_cfg_read32(d, 0x20), "the lower half written, type bits kept");
	CHECK_EQ(0, pci_cfg_read32(d, 0x24), "the upper half written");
	CHECK_EQ(1, pci_bars_assigned(), "one BAR placed");
	CHECK_EQ(0x20008000u, pci_bar(d, 4, &size, &io),
	         "assigned now: read back, not placed again");
	CHECK_EQ(1, pci_bars_assigned(), "still one");
	CHECK_EQ(0, pci_bar(d, 0, &size, &io), "an unimplemented BAR stays 0");
	CHECK_EQ(0, size, "and has no size");
	CHECK_EQ(1, pci_bars_assigned(), "and is not placed");
}

int main(void)
{
	printf("test_pci\n");
	RUN(test_no_ports);
	if (check_failed) /* bus 0 marked seen by a wrong scan: the rest would fault */
		return check_done("test_pci");
	RUN(test_ports);
	RUN(test_ecam);
	RUN(test_place);
	RUN(test_assign);
	return check_done("test_pci");
}
