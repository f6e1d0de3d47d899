/*
 * acpi.c: just enough ACPI to find tables (RSDP -> XSDT/RSDT, ACPI 6.4
 * section 5.2), the DSDT (for kernel/mmiodev.c), the PCI ECAM window (MCFG, PCI Firmware spec 3.2
 * section 4.1.2) and the FADT reset register (section 4.8.4.6) for a clean reboot on hardware
 * without QEMU's isa-debug-exit.
 */
#include <string.h>
#include "kernel/arch.h"
#include "kernel/kernel.h"

struct sdt_header {
	char sig[4];
	uint32_t length;
	uint8_t revision;
	uint8_t checksum;
	char oem[6];
	char oem_table[8];
	uint32_t oem_rev;
	uint32_t creator;
	uint32_t creator_rev;
} __attribute__((packed));

struct rsdp {
	char sig[8];
	uint8_t checksum;
	char oem[6];
	uint8_t revision;
	uint32_t rsdt;
	/* revision >= 2 */
	uint32_t length;
	uint64_t xsdt;
	uint8_t xchecksum;
	uint8_t reserved[3];
} __attribute__((packed));

struct gas {
	uint8_t space; /* 0 system memory, 1 system I/O */
	uint8_t bit_width;
	uint8_t bit_offset;
	uint8_t access_size;
	uint64_t address;
} __attribute__((packed));

#define FADT_DSDT_OFF        40
#define FADT_X_DSDT_OFF      140
#define FADT_FLAGS_OFF       112
#define FADT_RESET_REG_OFF   116
#define FADT_RESET_VALUE_OFF 128
#define FADT_RESET_REG_SUP   (1u << 10)

static const struct sdt_header *root;
static bool root_is_xsdt;

static bool checksum_ok(const void *p, size_t n)
{
	uint8_t sum = 0;
	for (size_t i = 0; i < n; i++)
		sum += ((const uint8_t *)p)[i];
	return sum == 0;
}

void acpi_init(uint64_t rsdp_addr)
{
	if (!rsdp_addr)
		return;
	const struct rsdp *r = (const struct rsdp *)(uintptr_t)rsdp_addr;
	if (memcmp(r->sig, "RSD PTR ", 8) || !checksum_ok(r, 20))
		return;
	if (r->revision >= 2 && r->xsdt) {
		root = (const struct sdt_header *)(uintptr_t)r->xsdt;
		root_is_xsdt = true;
	} else {
		root = (const struct sdt_header *)(uintptr_t)r->rsdt;
	}
	if (!checksum_ok(root, root->length))
		root = NULL;
}

const void *acpi_find_table(const char sig[4])
{
	if (!root)
		return NULL;
	size_t esz = root_is_xsdt ? 8 : 4;
	size_t n = (root->length - sizeof(*root)) / esz;
	const uint8_t *ents = (const uint8_t *)(root + 1);
	for (size_t i = 0; i < n; i++) {
		uint64_t a = 0;
		memcpy(&a, ents + i * esz, esz); /* entries are unaligned in the XSDT */
		const struct sdt_header *h = (const struct sdt_header *)(uintptr_t)a;
		if (h && !memcmp(h->sig, sig, 4) && checksum_ok(h, h->length))
			return h;
	}
	return NULL;
}

uint64_t acpi_ecam_base(uint8_t *bus_start, uint8_t *bus_end)
{
	const struct sdt_header *m = acpi_find_table("MCFG");
	/* header (36) + 8 reserved, then 16-byte allocation entries; we use
	 * the one for segment 0. */
	if (!m || m->length < 44 + 16)
		return 0;
	const uint8_t *e = (const uint8_t *)m + 44;
	for (; e + 16 <= (const uint8_t *)m + m->length; e += 16) {
		uint64_t base;
		uint16_t seg;
		memcpy(&base, e, 8);
		memcpy(&seg, e + 8, 2);
		if (seg == 0) {
			*bus_start = e[10];
			*bus_end = e[11];
			return base;
		}
	}
	return 0;
}

/* The DSDT (section 5.2.11.1): FADT's X_DSDT when present, else DSDT. */
const void *acpi_dsdt(void)
{
	const uint8_t *f = acpi_find_table("FACP");
	uint32_t flen;
	uint64_t a = 0;

	if (!f)
		return NULL;
	memcpy(&flen, f + 4, 4);
	if (flen >= FADT_X_DSDT_OFF + 8)
		memcpy(&a, f + FADT_X_DSDT_OFF, 8);
	if (!a && flen >= FADT_DSDT_OFF + 4)
		memcpy(&a, f + FADT_DSDT_OFF, 4);
	const struct sdt_header *h = (const struct sdt_header *)(uintptr_t)a;
	if (!h || memcmp(h->sig, "DSDT", 4) || !checksum_ok(h, h->length))
		return NULL;
	return h;
}

void acpi_reset(void)
{
	const uint8_t *f = acpi_find_table("FACP");
	if (!f || ((const struct sdt_header *)f)->length < FADT_RESET_VALUE_OFF + 1)
		return;
	uint32_t flags;
	struct gas reg;
	memcpy(&flags, f + FADT_FLAGS_OFF, 4);
	memcpy(&reg, f + FADT_RESET_REG_OFF, sizeof(reg));
	if (!(flags & FADT_RESET_REG_SUP))
		return;
	uint8_t v = f[FADT_RESET_VALUE_OFF];
	if (reg.space == 1)
		outb((uint16_t)reg.address, v);
	else if (reg.space == 0)
		mmio_write8((uintptr_t)reg.address, v);
}
