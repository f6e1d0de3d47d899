/*
 * paging.c: the kernel's own identity-mapped page tables, replacing the
 * boot front-end's (PVH boot tables or UEFI's). 2 MiB pages but for the first 2 MiB.
 *
 *  - 0..4 GiB: RAM and firmware memory write-back; everything else (the PCI
 *    hole, LAPIC/IOAPIC, firmware-reserved ranges that may hold ACPI tables)
 *    uncached, so ACPI and low MMIO are reachable wherever they are.
 *  - above 4 GiB: RAM write-back; device BARs are added uncached on request
 *    (paging_map_mmio), since firmware may place 64-bit BARs up there.
 *
 * PAT stays at its reset value, so PCD|PWT selects entry 3 = UC.
 *
 * Except the first 2 MiB, which gets 4 KiB pages (map_low_4k): on real
 * hardware the fixed-range MTRRs give it several memory types (low RAM
 * WB, VGA memory 0xA0000-0xBFFFF UC, option ROMs and BIOS 0xC0000-0xFFFFF
 * WP/WT/UC), and a large page spanning ranges of different MTRR types is
 * undefined (Intel SDM vol. 3A 11.11.9, "Large Page Size Considerations").
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
#define PTE_A    (1ull << 5)
#define PTE_D    (1ull << 6)
#define PTE_PS   (1ull << 7)
#define PTE_ADDR 0x000ffffffffff000ull
/* Every entry this file writes: present, writable, U/S=1 (kvm_pvm's native
 * mode refaults a supervisor page forever, pvm.c), and Accessed and Dirty
 * already set. Nothing here reads A/D; with them set KVM's shadow MMU
 * (kvm_pvm has no EPT) maps up to 8 neighbouring entries on each shadow
 * fault (its PTE prefetch skips an entry whose A bit is clear), and never
 * faults to set them: a first touch of a page is an exit under kvm_pvm,
 * so a boot touches hundreds fewer (docs/kvm.md, "Boot to ready"). */
#define PTE_RWU  (PTE_P | PTE_W | PTE_U | PTE_A | PTE_D)
#define PAGE_4K  4096ull
#define PAGE_2M  (2ull << 20)
#define FOUR_GIB (4ull << 30)

static uint64_t *pml4;

static uint64_t *next_table(uint64_t *table, unsigned idx)
{
	if (!(table[idx] & PTE_P)) {
		uint64_t *t = pmm_alloc(4096, 4096);
		table[idx] = (uintptr_t)t | PTE_RWU;
	}
	return (uint64_t *)(uintptr_t)(table[idx] & PTE_ADDR);
}

static void map_2m(uint64_t addr, bool uncached)
{
	uint64_t *pdpt = next_table(pml4, (addr >> 39) & 511);
	uint64_t *pd = next_table(pdpt, (addr >> 30) & 511);
	pd[(addr >> 21) & 511] = addr | PTE_RWU | PTE_PS | (uncached ? PTE_PCD | PTE_PWT : 0);
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

/* The first 2 MiB in 4 KiB pages: RAM and firmware memory write-back, the
 * rest (VGA hole, ROM shadows the map reserves) uncached, each page's PAT
 * type then combining with one MTRR type only (SDM 11.11.9). New entries
 * carry U/S like every other level. */
static uint64_t *low_pt;

static void map_low_4k(const struct boot_info *bi)
{
	uint64_t *pdpt = next_table(pml4, 0);
	uint64_t *pd = next_table(pdpt, 0);

	low_pt = pmm_alloc(4096, 4096);
	for (unsigned i = 0; i < 512; i++) {
		uint64_t a = i * PAGE_4K;
		bool uc = !is_memory(bi, a, a + PAGE_4K);

		low_pt[i] = a | PTE_RWU | (uc ? PTE_PCD | PTE_PWT : 0);
	}
	pd[0] = (uintptr_t)low_pt | PTE_RWU;
}

void paging_init(const struct boot_info *bi)
{
	pml4 = pmm_alloc(4096, 4096);
	for (uint64_t a = PAGE_2M; a < FOUR_GIB; a += PAGE_2M)
		map_2m(a, !is_memory(bi, a, a + PAGE_2M));
	map_low_4k(bi);
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
	for (; a < phys + len; a += PAGE_2M) {
		if (a == 0) { /* keep the 4 KiB pages: mark only the range's */
			for (uint64_t p = phys & ~(PAGE_4K - 1); p < phys + len && p < PAGE_2M;
			     p += PAGE_4K)
				low_pt[p / PAGE_4K] |= PTE_PCD | PTE_PWT;
			continue;
		}
		map_2m(a, true);
	}
	write_cr3((uintptr_t)pml4); /* flush: an entry may have changed type */
}
