/*
 * pci.c: PCI enumeration and configuration space. ECAM (memory-mapped,
 * PCIe base spec 7.2.2) when ACPI's MCFG describes it, else the legacy
 * 0xCF8/0xCFC mechanism (PCI Local Bus 3.0 section 3.2.2.3.2), which every
 * QEMU PC model has. BAR addresses are read at run time: firmware places
 * them, and they move with the device set.
 */
#include <stdio.h>
#include "kernel/arch.h"
#include "kernel/kernel.h"

#define CFG_ADDR     0xcf8
#define CFG_DATA     0xcfc
#define PCI_MAX_DEVS 64

#define PCI_VENDOR       0x00
#define PCI_COMMAND      0x04
#define PCI_CLASS_REV    0x08
#define PCI_HEADER_TYPE  0x0e
#define PCI_BRIDGE_BUSES 0x18 /* type 1 header: primary, secondary, subordinate */
#define PCI_BAR0         0x10
#define CMD_IO           (1u << 0)
#define CMD_MEM          (1u << 1)
#define CMD_MASTER       (1u << 2)

static struct pci_dev devs[PCI_MAX_DEVS];
static int ndevs;
static uintptr_t ecam;
static uint8_t ecam_bus_start, ecam_bus_end;

static uintptr_t ecam_addr(uint8_t bus, uint8_t dev, uint8_t fn, uint16_t off)
{
	return ecam + (((uintptr_t)(bus - ecam_bus_start) << 20) | ((uintptr_t)dev << 15) |
	               ((uintptr_t)fn << 12) | off);
}

static bool use_ecam(uint8_t bus)
{
	return ecam && bus >= ecam_bus_start && bus <= ecam_bus_end;
}

static uint32_t raw_read32(uint8_t bus, uint8_t dev, uint8_t fn, uint16_t off)
{
	if (use_ecam(bus))
		return mmio_read32(ecam_addr(bus, dev, fn, off & ~3));
	outl(CFG_ADDR, 0x80000000u | ((uint32_t)bus << 16) | ((uint32_t)dev << 11) |
	                   ((uint32_t)fn << 8) | (off & 0xfc));
	return inl(CFG_DATA);
}

static void raw_write32(uint8_t bus, uint8_t dev, uint8_t fn, uint16_t off, uint32_t v)
{
	if (use_ecam(bus)) {
		mmio_write32(ecam_addr(bus, dev, fn, off & ~3), v);
		return;
	}
	outl(CFG_ADDR, 0x80000000u | ((uint32_t)bus << 16) | ((uint32_t)dev << 11) |
	                   ((uint32_t)fn << 8) | (off & 0xfc));
	outl(CFG_DATA, v);
}

/* A 16-bit write touches only its own two bytes: through the ports, the
 * byte lanes of CONFIG_DATA select them (PCI 3.0 3.2.2.3.2: an access to
 * 0xCFE writes bytes 2-3 of the addressed dword); through ECAM, a 16-bit
 * MMIO store at the register (PCIe 7.2.2). A read-modify-write of the
 * dword would write the neighbour back: COMMAND's neighbour is STATUS,
 * whose error bits are write-1-to-clear (PCI 3.0 6.2.3), so writing
 * COMMAND would clear every error the device had latched. */
static void raw_write16(uint8_t bus, uint8_t dev, uint8_t fn, uint16_t off, uint16_t v)
{
	if (use_ecam(bus)) {
		mmio_write16(ecam_addr(bus, dev, fn, off & ~1), v);
		return;
	}
	outl(CFG_ADDR, 0x80000000u | ((uint32_t)bus << 16) | ((uint32_t)dev << 11) |
	                   ((uint32_t)fn << 8) | (off & 0xfc));
	outw((uint16_t)(CFG_DATA + (off & 2)), v);
}

uint32_t pci_cfg_read32(const struct pci_dev *d, uint16_t off)
{
	return raw_read32(d->bus, d->dev, d->fn, off);
}

uint16_t pci_cfg_read16(const struct pci_dev *d, uint16_t off)
{
	return (uint16_t)(pci_cfg_read32(d, off) >> ((off & 2) * 8));
}

uint8_t pci_cfg_read8(const struct pci_dev *d, uint16_t off)
{
	return (uint8_t)(pci_cfg_read32(d, off) >> ((off & 3) * 8));
}

void pci_cfg_write32(const struct pci_dev *d, uint16_t off, uint32_t v)
{
	raw_write32(d->bus, d->dev, d->fn, off, v);
}

void pci_cfg_write16(const struct pci_dev *d, uint16_t off, uint16_t v)
{
	raw_write16(d->bus, d->dev, d->fn, off, v);
}

/* A present function. Only where it is: its ids and class are read by
 * pci_identify() after the ready line (under KVM every read is an exit,
 * two through the ports). */
static void probe(uint8_t bus, uint8_t dev, uint8_t fn)
{
	if (ndevs == PCI_MAX_DEVS)
		return;
	struct pci_dev *d = &devs[ndevs++];
	d->bus = bus;
	d->dev = dev;
	d->fn = fn;
}

static bool identified;

/* Each function's vendor/device and class dwords, once: pci_print() (after
 * the ready line) and the first pci_get() come here. */
static void pci_identify(void)
{
	if (identified)
		return;
	identified = true;
	for (int i = 0; i < ndevs; i++) {
		struct pci_dev *d = &devs[i];
		uint32_t id = raw_read32(d->bus, d->dev, d->fn, PCI_VENDOR);

		d->vendor = (uint16_t)id;
		d->device = (uint16_t)(id >> 16);
		d->class_rev = raw_read32(d->bus, d->dev, d->fn, PCI_CLASS_REV);
	}
}

void pci_print(void)
{
	pci_identify();
	for (int i = 0; i < ndevs; i++)
		printf("pci %02x:%02x.%x %04x:%04x class=%06x\n", devs[i].bus, devs[i].dev,
		       devs[i].fn, devs[i].vendor, devs[i].device, devs[i].class_rev >> 8);
}

static uint8_t bus_seen[256 / 8];

/* Header type, the byte that says whether a function is there (PCI 3.0
 * 6.2.1): a read where no function answers returns all ones (3.2.2.3.2's
 * master abort), and no header type is 0xFF (layouts 0-2 only). Reading it
 * instead of the vendor ID makes one read per function tell both whether it
 * is there and whether functions 1-7 may follow (bit 7, on function 0). */
static uint8_t header_type(uint8_t bus, uint8_t dev, uint8_t fn)
{
	return (uint8_t)(raw_read32(bus, dev, fn, PCI_HEADER_TYPE & ~3) >> 16);
}

/* Every function on one bus, then the buses behind its PCI-to-PCI bridges
 * (PCI-to-PCI Bridge spec 1.2 section 3.2.5.3: the secondary bus number
 * firmware assigned). Walking bridges instead of all 256 buses saves ~8,000
 * configuration reads, milliseconds under TCG. Depth is bounded by the 256
 * bus numbers, each scanned once. One read per slot and per function before
 * the ready line (a bridge's bus numbers are one more): under KVM every
 * read is an exit (two through the ports), the boot's largest share after
 * the console (tests/unit/test_pci.c counts them). */
static void scan_bus(uint8_t bus)
{
	if (bus_seen[bus / 8] & (1u << (bus % 8)))
		return;
	bus_seen[bus / 8] |= (uint8_t)(1u << (bus % 8));
	for (uint8_t dev = 0; dev < 32; dev++) {
		uint8_t ht0 = header_type(bus, dev, 0);
		if (ht0 == 0xff)
			continue;
		int nfn = (ht0 & 0x80) ? 8 : 1;
		for (uint8_t fn = 0; fn < nfn; fn++) {
			uint8_t ht = fn ? header_type(bus, dev, fn) : ht0;
			if (ht == 0xff)
				continue;
			probe(bus, dev, fn);
			if ((ht & 0x7f) != 1)
				continue;
			uint8_t secondary =
			    (uint8_t)(raw_read32(bus, dev, fn, PCI_BRIDGE_BUSES) >> 8);
			if (secondary > bus)
				scan_bus(secondary);
		}
	}
}

static bool ports;

/* Configuration mechanism #1 is there when CONFIG_ADDRESS holds what was
 * written to it (a 32-bit access; PCI 3.0 3.2.2.3.2). microvm has no PCI:
 * its unassigned port reads all ones, and the 32 slots' reads it saves
 * are 64 exits under KVM. */
static bool ports_present(void)
{
	outl(CFG_ADDR, 0x80000000u); /* every scan read writes it again */
	return inl(CFG_ADDR) == 0x80000000u;
}

void pci_init(void)
{
	ecam = (uintptr_t)acpi_ecam_base(&ecam_bus_start, &ecam_bus_end);
	if (ecam) {
		paging_map_mmio(ecam, (uint64_t)(ecam_bus_end - ecam_bus_start + 1) << 20);
		scan_bus(ecam_bus_start);
		return;
	}
	ports = ports_present();
	if (ports)
		scan_bus(0);
}

const char *pci_access_method(void)
{
	return ecam ? "ecam" : ports ? "ports" : "none";
}

int pci_count(void)
{
	return ndevs;
}

const struct pci_dev *pci_get(int i)
{
	pci_identify();
	return i >= 0 && i < ndevs ? &devs[i] : NULL;
}

/* Where firmware leaves a memory BAR at 0 (qboot, QEMU's minimal
 * firmware, places no 64-bit BAR: the modern virtio BAR), the kernel
 * places it itself, as Linux's pci_assign_unassigned_resources() does:
 * below 4 GiB (a 64-bit BAR may live there too; PCI 3.0 6.2.5.1), above
 * every byte of RAM and firmware memory the boot map names, clear of
 * every BAR already decoding, and under the local APIC / I/O APIC range
 * at 0xFEC00000 that every x86 machine keeps. */
#define PCI_HOLE_END 0xfec00000ull
#define PCI_BUSY_MAX (BOOT_MMAP_MAX + PCI_MAX_DEVS * 6)

static uint64_t mem_top;  /* end of RAM and firmware memory below 4 GiB */
static unsigned assigned; /* BARs this kernel placed */
/* What a placed BAR must stay clear of: the boot map's reserved ranges
 * below the hole's end first (nreserved of them, noted once), then every
 * decoding BAR (found again at each placement). */
static struct pci_range busy[PCI_BUSY_MAX];
static int nreserved, nbusy;

void pci_note_memory(const struct boot_info *bi)
{
	for (uint32_t i = 0; i < bi->nmmap; i++) {
		const struct boot_mem_region *r = &bi->mmap[i];
		uint64_t end = r->base + r->len;

		if (r->base >= PCI_HOLE_END)
			continue;
		if (r->type == BOOT_MEM_RESERVED) {
			/* e.g. q35's ECAM window: not RAM, not free either */
			busy[nreserved++] = (struct pci_range){r->base, r->len};
			continue;
		}
		if (end > mem_top)
			mem_top = end > PCI_HOLE_END ? PCI_HOLE_END : end;
	}
}

unsigned pci_bars_assigned(void)
{
	return assigned;
}

/* The busy scan sizes every memory BAR that decodes somewhere (sizing
 * turns that function's decoding off for a moment, as Linux's boot-time
 * scan does; nothing else runs meanwhile). */
static bool scanning; /* pci_bar() inside the busy scan: never places */

static uint64_t assign(const struct pci_dev *d, int bar, uint64_t size, bool is64)
{
	if (!mem_top || scanning)
		return 0; /* no memory map: nowhere known to be free */
	nbusy = nreserved;
	scanning = true;
	for (int i = 0; i < ndevs; i++)
		for (int b = 0; b < 6; b++) {
			uint32_t lo = pci_cfg_read32(&devs[i], PCI_BAR0 + 4 * b);
			uint64_t sz = 0;
			bool io;

			if (lo & 1)
				continue; /* I/O space */
			uint64_t base = lo & ~15u ? pci_bar(&devs[i], b, &sz, &io) : 0;
			if (((lo >> 1) & 3) == 2)
				b++; /* the upper half of a 64-bit BAR */
			if (base && sz && nbusy < PCI_BUSY_MAX)
				busy[nbusy++] = (struct pci_range){base, sz};
		}
	scanning = false;
	uint64_t a = pci_place(busy, nbusy, mem_top, PCI_HOLE_END, size);
	if (!a)
		return 0;
	uint16_t off = PCI_BAR0 + 4 * bar;
	uint32_t flags = pci_cfg_read32(d, off) & 15u;
	pci_cfg_write32(d, off, (uint32_t)a | flags);
	if (is64)
		pci_cfg_write32(d, off + 4, (uint32_t)(a >> 32));
	assigned++;
	printf("pci %02x:%02x.%x BAR%d unassigned by firmware: placed at 0x%lx (0x%lx bytes)\n",
	       d->bus, d->dev, d->fn, bar, (unsigned long)a, (unsigned long)size);
	return a;
}

/* Size a BAR by the all-ones write (PCI 3.0 section 6.2.5.1), with decoding
 * off so the device never answers at the probe address. A memory BAR
 * firmware left at 0 is placed (assign() above). */
uint64_t pci_bar(const struct pci_dev *d, int bar, uint64_t *size, bool *is_io)
{
	uint16_t off = PCI_BAR0 + 4 * bar;
	uint16_t cmd = pci_cfg_read16(d, PCI_COMMAND);
	pci_cfg_write16(d, PCI_COMMAND, cmd & ~(CMD_IO | CMD_MEM));

	uint32_t lo = pci_cfg_read32(d, off);
	bool io = lo & 1;
	bool is64 = !io && ((lo >> 1) & 3) == 2;
	uint64_t addr = io ? (lo & ~3u) : (lo & ~15u);
	uint64_t mask;

	pci_cfg_write32(d, off, 0xffffffff);
	mask = pci_cfg_read32(d, off);
	pci_cfg_write32(d, off, lo);
	if (is64) {
		uint32_t hi = pci_cfg_read32(d, off + 4);
		addr |= (uint64_t)hi << 32;
		pci_cfg_write32(d, off + 4, 0xffffffff);
		mask |= (uint64_t)pci_cfg_read32(d, off + 4) << 32;
		pci_cfg_write32(d, off + 4, hi);
	} else {
		mask |= 0xffffffff00000000ull;
	}
	pci_cfg_write16(d, PCI_COMMAND, cmd);

	mask &= io ? ~3ull : ~15ull;
	uint64_t sz = mask ? (~mask + 1) : 0;
	if (!is64 && (uint32_t)mask == 0)
		sz = 0; /* no bit took the ones: the BAR is not implemented */
	if (!addr && !io && sz)
		addr = assign(d, bar, sz, is64);
	if (size)
		*size = sz;
	if (is_io)
		*is_io = io;
	return addr;
}

void pci_enable_mmio_busmaster(const struct pci_dev *d)
{
	uint16_t cmd = pci_cfg_read16(d, PCI_COMMAND);
	pci_cfg_write16(d, PCI_COMMAND, cmd | CMD_MEM | CMD_MASTER);
}
