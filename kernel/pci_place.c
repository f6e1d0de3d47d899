/*
 * pci_place.c: where to put a memory BAR that firmware left unassigned.
 * Pure arithmetic over ranges, so the unit tests drive it directly;
 * pci.c gathers the ranges (RAM from the boot memory map, every BAR
 * already decoding) and writes the answer.
 *
 * A BAR's size is a power of two and its address must be a multiple of
 * it (PCI 3.0 section 6.2.5.1), so the candidate addresses are the
 * size-aligned ones in [lo, hi); the first that overlaps no busy range
 * wins (first fit, lowest address).
 */
#include "kernel/kernel.h"

static bool overlaps(uint64_t a, uint64_t len, const struct pci_range *r)
{
	return a < r->base + r->len && r->base < a + len;
}

uint64_t pci_place(const struct pci_range *busy, int nbusy, uint64_t lo, uint64_t hi, uint64_t size)
{
	if (size == 0 || (size & (size - 1)) || lo >= hi)
		return 0;
	uint64_t a = (lo + size - 1) & ~(size - 1);
	while (a >= lo && a + size > a && a + size <= hi) {
		uint64_t next = 0;
		for (int i = 0; i < nbusy; i++)
			if (busy[i].len && overlaps(a, size, &busy[i])) {
				uint64_t end = busy[i].base + busy[i].len;
				if (end > next)
					next = end;
			}
		if (!next)
			return a;
		/* past the furthest range in the way, aligned again */
		uint64_t b = (next + size - 1) & ~(size - 1);
		if (b <= a)
			return 0; /* wrapped: nothing above */
		a = b;
	}
	return 0;
}
