/*
 * test_paging.c: kernel/paging.c's tables for a PC-like memory map, walked
 * on the host (tests/unit/cr3_shim.h replaces kernel/arch.h). The first
 * 2 MiB must be 4 KiB pages (SDM vol. 3A 11.11.9: a large page over ranges
 * whose MTRR types differ is undefined, and the fixed-range MTRRs split
 * that range on real hardware; issue 23 finding 5): RAM write-back, the
 * VGA hole and the reserved BIOS area uncached; every level U/S=1 on the
 * entries this adds (kvm_pvm's native mode needs U/S at every level).
 */
#include <stdio.h>
#include <string.h>
#include "kernel/kernel.h"
#include "tests/unit/check.h"
#include "tests/unit/host_shim.h"

int check_failed, check_total;
uint64_t shim_cr3;
unsigned shim_cr3_loads;

#define P    (1ull << 0)
#define W    (1ull << 1)
#define U    (1ull << 2)
#define PWT  (1ull << 3)
#define PCD  (1ull << 4)
#define A    (1ull << 5)
#define D    (1ull << 6)
#define PS   (1ull << 7)
#define ADDR 0x000ffffffffff000ull

static uint64_t *table(uint64_t e)
{
	return (uint64_t *)(uintptr_t)(e & ADDR);
}

/* The leaf entry mapping a (below 1 GiB); *large says whether a 2 MiB page. */
static uint64_t leaf(uint64_t a, bool *large)
{
	uint64_t *pml4 = table(shim_cr3);
	uint64_t *pdpt = table(pml4[0]);
	uint64_t *pd = table(pdpt[0]);
	uint64_t pde = pd[(a >> 21) & 511];

	*large = pde & PS;
	if (*large)
		return pde;
	return table(pde)[(a >> 12) & 511];
}

static bool uncached(uint64_t e)
{
	return (e & (PCD | PWT)) == (PCD | PWT);
}

/* QEMU pc under SeaBIOS, as PVH reports it: low RAM to 0x9fc00, the EBDA
 * and BIOS reserved, RAM from 1 MiB. */
static struct boot_info bi_pc = {
    .nmmap = 4,
    .mmap = {{0, 0x9fc00, BOOT_MEM_RAM},
             {0x9fc00, 0x400, BOOT_MEM_RESERVED},
             {0xf0000, 0x10000, BOOT_MEM_RESERVED},
             {0x100000, 0x1fee0000, BOOT_MEM_RAM}},
};

static void test_low_2m_in_4k_pages(void)
{
	bool large;
	uint64_t *pml4, *pdpt, *pd;

	shim_reset();
	paging_init(&bi_pc);
	CHECK(shim_cr3 != 0, "CR3 loaded");
	pml4 = table(shim_cr3);
	pdpt = table(pml4[0]);
	pd = table(pdpt[0]);
	CHECK((pd[0] & (P | PS)) == P, "PD entry 0 points at a page table, not a 2 MiB page");
	CHECK((pd[0] & (W | U)) == (W | U), "PD entry 0 writable and U/S=1");
	for (uint64_t a = 0; a < (2u << 20); a += 4096) {
		uint64_t e = leaf(a, &large);
		bool ram = a < 0xa0000 || a >= 0x100000; /* 0x9f000: RAM to 0x9fc00 */
		char what[96];

		if (large) {
			CHECK(!large, "a 2 MiB page in the first 2 MiB");
			break;
		}
		snprintf(what, sizeof(what), "page 0x%lx present, writable, U/S=1, identity",
		         (unsigned long)a);
		CHECK((e & (P | W | U)) == (P | W | U) && (e & ADDR) == a, what);
		snprintf(what, sizeof(what), "page 0x%lx %s", (unsigned long)a,
		         ram ? "write-back (RAM)" : "uncached (VGA hole, BIOS)");
		CHECK(uncached(e) == !ram, what);
	}
	/* Page 0x9f000 holds RAM up to 0x9fc00 and the EBDA: memory, so WB. */
	CHECK(!uncached(leaf(0x9f000, &large)), "the page with the end of low RAM write-back");
	/* The 2 MiB pages above stay as they were. */
	CHECK((leaf(0x200000, &large) & (P | PS)) == (P | PS) && large &&
	          !uncached(leaf(0x200000, &large)),
	      "2 MiB at 2 MiB: a write-back large page");

	/* A device window in the first 2 MiB keeps the 4 KiB pages. */
	paging_map_mmio(0x5000, 0x2000);
	CHECK((pd[0] & PS) == 0, "paging_map_mmio below 2 MiB keeps the page table");
	CHECK(uncached(leaf(0x5000, &large)) && uncached(leaf(0x6000, &large)),
	      "the window's pages uncached");
	CHECK(!uncached(leaf(0x4000, &large)) && !uncached(leaf(0x7000, &large)),
	      "the pages around it still write-back");
}

/* Accessed and Dirty set on every entry written, at every level, so the
 * shadow MMU prefetches neighbours and never faults to set them (the boot's
 * first touches are exits under kvm_pvm). */
static void test_accessed_dirty_preset(void)
{
	unsigned entries = 0, missing = 0;

	shim_reset();
	paging_init(&bi_pc);
	uint64_t *pml4 = table(shim_cr3);
	for (int i = 0; i < 512; i++) {
		if (!(pml4[i] & P))
			continue;
		entries++, missing += (pml4[i] & (A | D)) != (A | D);
		uint64_t *pdpt = table(pml4[i]);
		for (int j = 0; j < 512; j++) {
			if (!(pdpt[j] & P))
				continue;
			entries++, missing += (pdpt[j] & (A | D)) != (A | D);
			uint64_t *pd = table(pdpt[j]);
			for (int k = 0; k < 512; k++) {
				if (!(pd[k] & P))
					continue;
				entries++, missing += (pd[k] & (A | D)) != (A | D);
				if (pd[k] & PS)
					continue;
				uint64_t *pt = table(pd[k]);
				for (int l = 0; l < 512; l++)
					if (pt[l] & P)
						entries++, missing += (pt[l] & (A | D)) != (A | D);
			}
		}
	}
	CHECK(entries >= 512 + 2048, "the first 2 MiB's 512 pages and 4 GiB of 2 MiB pages walked");
	CHECK_EQ(0, missing, "entries without Accessed and Dirty");
}

int main(void)
{
	printf("test_paging\n");
	RUN(test_low_2m_in_4k_pages);
	RUN(test_accessed_dirty_preset);
	return check_done("test_paging");
}
