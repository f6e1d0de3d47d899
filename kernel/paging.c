/*
 * paging.c: the kernel's own identity-mapped page tables, replacing the
 * boot front-end's (PVH boot tables or UEFI's). 2 MiB pages throughout.
 *
 *  - 0..4 GiB: RAM and firmware memory write-back; everything else (the PCI
 *    hole, LAPIC/IOAPIC, firmware-reserved ranges that may hold ACPI tables)
 *    uncached, so ACPI and low MMIO are reachable wherever they are.
 *  - above 4 GiB: RAM write-back; device BARs are added uncached on request
 *    (paging_map_mmio), since firmware may place 64-bit BARs up there.
 *
 * PAT stays at its reset value, so PCD|PWT selects entry 3 = UC.
 *
 * Every entry has U/S=1: this machine kind's kvm_pvm runs the kernel at
 * CPL 3 in native mode and refaults forever on a supervisor page (pvm.c).
 * Nothing else runs at CPL 3 and SMEP/SMAP stay off, so it costs nothing.
 */
#include "kernel/arch.h"
#include "kernel/kernel.h"

#define PTE_P    (1ull << 0)
#define PTE_W    (1ull << 1)
#define PTE_U    (1ull << 2)
#define PTE_PWT  (1ull << 3)
#define PTE_PCD  (1ull << 4)
#define PTE_PS   (1ull << 7)
#define PTE_ADDR 0x000ffffffffff000ull
#define PAGE_2M  (2ull << 20)
#define FOUR_GIB (4ull << 30)

static uint64_t *pml4;

static uint64_t *next_table(uint64_t *table, unsigned idx)
{
	if (!(table[idx] & PTE_P)) {
		uint64_t *t = pmm_alloc(4096, 4096);
		table[idx] = (uintptr_t)t | PTE_P | PTE_W | PTE_U;
	}
	return (uint64_t *)(uintptr_t)(table[idx] & PTE_ADDR);
}

static void map_2m(uint64_t addr, bool uncached)
{
	uint64_t *pdpt = next_table(pml4, (addr >> 39) & 511);
	uint64_t *pd = next_table(pdpt, (addr >> 30) & 511);
	pd[(addr >> 21) & 511] =
	    addr | PTE_P | PTE_W | PTE_U | PTE_PS | (uncached ? PTE_PCD | PTE_PWT : 0);
}

static bool is_memory(const struct boot_info *bi, uint64_t lo, uint64_t hi)
{
	for (uint32_t i = 0; i < bi->nmmap; i++) {
		const struct boot_mem_region *r = &bi->mmap[i];
		if (r->type == BOOT_MEM_RESERVED)
			continue;
		if (r->base < hi && r->base + r->len > lo)
			return true;
	}
	return false;
}

void paging_init(const struct boot_info *bi)
{
	pml4 = pmm_alloc(4096, 4096);
	for (uint64_t a = 0; a < FOUR_GIB; a += PAGE_2M)
		map_2m(a, a != 0 && !is_memory(bi, a, a + PAGE_2M));
	for (uint32_t i = 0; i < bi->nmmap; i++) {
		const struct boot_mem_region *r = &bi->mmap[i];
		if (r->type == BOOT_MEM_RESERVED || r->base + r->len <= FOUR_GIB)
			continue;
		uint64_t a = r->base < FOUR_GIB ? FOUR_GIB : r->base & ~(PAGE_2M - 1);
		for (; a < r->base + r->len; a += PAGE_2M)
			map_2m(a, false);
	}
	write_cr3((uintptr_t)pml4);
}

void paging_map_mmio(uint64_t phys, uint64_t len)
{
	uint64_t a = phys & ~(PAGE_2M - 1);
	for (; a < phys + len; a += PAGE_2M)
		map_2m(a, true);
	write_cr3((uintptr_t)pml4); /* flush: an entry may have changed type */
}
