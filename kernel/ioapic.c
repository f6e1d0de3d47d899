/*
 * ioapic.c: I/O APICs as the MADT lists them (ACPI 6.4 section 5.2.12,
 * entry type 1, I/O APIC Structure, 5.2.12.3), programmed through their
 * two-register window (Intel 82093AA datasheet section 3: IOREGSEL at
 * +0x00 selects a register, IOWIN at +0x10 reads or writes it).
 *
 * One use: a device interrupt (a GSI) that does not reach the 8259, such
 * as QEMU microvm's virtio-mmio lines with acpi=on (GSIs 24-47 on its
 * second I/O APIC). Each routed GSI becomes a fixed-delivery, physical
 * destination interrupt to this CPU's local APIC on a vector irq.c
 * allocated; a level-triggered one is completed by the local APIC EOI,
 * which the local APIC broadcasts to the I/O APICs for level vectors
 * (Intel SDM vol. 3A 11.8.5), clearing the entry's Remote IRR. Entries we
 * do not route stay as reset leaves them: masked.
 */
#include <stdio.h>
#include <string.h>
#include "kernel/arch.h"
#include "kernel/kernel.h"

#define IOAPIC_MAX     8
#define MADT_ENTRIES   44 /* header (36), local APIC address, flags */
#define MADT_IOAPIC    1
#define IOREGSEL       0x00
#define IOWIN          0x10
#define IOAPICVER      0x01
#define IOREDTBL(n)    (0x10 + 2 * (n))
#define RTE_LEVEL      (1u << 15)
#define RTE_ACTIVE_LOW (1u << 13)
#define RTE_MASKED     (1u << 16)

struct ioapic {
	uintptr_t base;
	uint8_t id;
	uint32_t gsi_base;
	unsigned pins; /* redirection entries (maximum redirection entry + 1) */
};

static struct ioapic ioapics[IOAPIC_MAX];
static int nioapics = -1; /* -1: MADT not read yet */

static uint32_t ioapic_read(const struct ioapic *a, uint32_t reg)
{
	mmio_write32(a->base + IOREGSEL, reg);
	return mmio_read32(a->base + IOWIN);
}

static void ioapic_write(const struct ioapic *a, uint32_t reg, uint32_t v)
{
	mmio_write32(a->base + IOREGSEL, reg);
	mmio_write32(a->base + IOWIN, v);
}

static void ioapic_scan(void)
{
	const uint8_t *m = acpi_find_table("APIC");
	uint32_t len = 0;

	nioapics = 0;
	if (!m)
		return;
	memcpy(&len, m + 4, 4);
	for (uint32_t off = MADT_ENTRIES; off + 2 <= len && nioapics < IOAPIC_MAX;) {
		uint8_t type = m[off], elen = m[off + 1];
		if (elen < 2 || off + elen > len)
			break; /* a malformed entry ends the walk */
		if (type == MADT_IOAPIC && elen >= 12) {
			struct ioapic *a = &ioapics[nioapics];
			uint32_t addr;
			memcpy(&addr, m + off + 4, 4);
			memcpy(&a->gsi_base, m + off + 8, 4);
			a->id = m[off + 2];
			a->base = addr;
			a->pins = ((ioapic_read(a, IOAPICVER) >> 16) & 0xff) + 1;
			printf("ioapic id=%u at 0x%lx gsi=%u-%u\n", a->id, (unsigned long)addr,
			       a->gsi_base, a->gsi_base + a->pins - 1);
			nioapics++;
		}
		off += elen;
	}
}

static const struct ioapic *ioapic_for(uint32_t gsi)
{
	if (nioapics < 0)
		ioapic_scan();
	for (int i = 0; i < nioapics; i++)
		if (gsi >= ioapics[i].gsi_base && gsi - ioapics[i].gsi_base < ioapics[i].pins)
			return &ioapics[i];
	return NULL;
}

bool ioapic_has(uint32_t gsi)
{
	return ioapic_for(gsi) != NULL;
}

int ioapic_route(uint32_t gsi, uint8_t vector, bool level, bool active_low, char *err,
                 size_t errlen)
{
	const struct ioapic *a = ioapic_for(gsi);

	if (!a) {
		snprintf(err, errlen, "GSI %u is on no I/O APIC the MADT lists", gsi);
		return -1;
	}
	unsigned pin = gsi - a->gsi_base;
	uint32_t lo = vector | (level ? RTE_LEVEL : 0) | (active_low ? RTE_ACTIVE_LOW : 0);
	/* Destination first, with the entry still masked, then the low word,
	 * which unmasks it: no interrupt is sent with half an entry. */
	ioapic_write(a, IOREDTBL(pin), RTE_MASKED);
	ioapic_write(a, IOREDTBL(pin) + 1, (apic_id() & 0xff) << 24);
	ioapic_write(a, IOREDTBL(pin), lo);
	printf("ioapic id=%u pin=%u gsi=%u vector=0x%x %s active-%s\n", a->id, pin, gsi, vector,
	       level ? "level" : "edge", active_low ? "low" : "high");
	return 0;
}
