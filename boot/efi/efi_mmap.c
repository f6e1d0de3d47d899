/*
 * efi_mmap.c: turn the final UEFI memory map into boot_info regions.
 *
 * Runs after ExitBootServices(), so it is plain computation on the buffer
 * GetMemoryMap() filled. Descriptors are DescriptorSize bytes apart, which
 * firmware may make larger than sizeof(EFI_MEMORY_DESCRIPTOR) to extend it
 * (UEFI 2.10 section 7.2.3, GetMemoryMap(), DescriptorSize). The map is not promised to be sorted,
 * so regions are inserted in address order and merged with same-type neighbours: OVMF's 113
 * descriptors (pc, -m 512) become 17 regions.
 */
#include "boot/efi/efiboot.h"

/* Pages in the memory map are always 4 KiB, whatever the CPU's page size
 * (UEFI 2.10 section 7.2.3, EFI_MEMORY_DESCRIPTOR). */
#define EFI_MAP_PAGE 4096ull

static uint32_t mmap_type(UINT32 efi_type)
{
	switch (efi_type) {
	case EfiConventionalMemory:
		return BOOT_MEM_RAM;
	/* Boot services memory could be reclaimed now, but our stack (and so
	 * kernel_main's) is still UEFI's BootServicesData; the kernel must map
	 * it and must not allocate over it. The image and boot_info are
	 * Loader*, ACPI tables and runtime services stay in use. */
	case EfiLoaderCode:
	case EfiLoaderData:
	case EfiBootServicesCode:
	case EfiBootServicesData:
	case EfiRuntimeServicesCode:
	case EfiRuntimeServicesData:
	case EfiACPIReclaimMemory:
	case EfiACPIMemoryNVS:
		return BOOT_MEM_FIRMWARE;
	/* MMIO, port space, reserved, unusable, PAL code, persistent memory
	 * and types newer than this code: nothing we may use as RAM. */
	default:
		return BOOT_MEM_RESERVED;
	}
}

static bool touches(const struct boot_mem_region *a, uint64_t base, uint32_t type)
{
	return a->type == type && a->base + a->len == base;
}

static void remove_at(struct boot_info *bi, uint32_t i)
{
	for (; i + 1 < bi->nmmap; i++)
		bi->mmap[i] = bi->mmap[i + 1];
	bi->nmmap--;
}

/*
 * Inserts [base, base+len) keeping bi->mmap sorted and merged. If the table
 * is full the region is dropped: the kernel then loses that memory but never
 * uses memory it must not, since it only allocates listed RAM.
 */
static void mmap_add(struct boot_info *bi, uint64_t base, uint64_t len, uint32_t type)
{
	uint32_t i = bi->nmmap, j;

	while (i > 0 && bi->mmap[i - 1].base > base)
		i--;
	if (i > 0 && touches(&bi->mmap[i - 1], base, type)) {
		struct boot_mem_region *prev = &bi->mmap[i - 1];

		prev->len += len;
		if (i < bi->nmmap && touches(prev, bi->mmap[i].base, bi->mmap[i].type)) {
			prev->len += bi->mmap[i].len;
			remove_at(bi, i);
		}
		return;
	}
	if (i < bi->nmmap && bi->mmap[i].type == type && base + len == bi->mmap[i].base) {
		bi->mmap[i].base = base;
		bi->mmap[i].len += len;
		return;
	}
	if (bi->nmmap == BOOT_MMAP_MAX)
		return;
	for (j = bi->nmmap; j > i; j--)
		bi->mmap[j] = bi->mmap[j - 1];
	bi->mmap[i].base = base;
	bi->mmap[i].len = len;
	bi->mmap[i].type = type;
	bi->nmmap++;
}

void efi_mmap_convert(const struct efi_mmap *m, struct boot_info *bi)
{
	const uint8_t *p = (const uint8_t *)m->map;
	UINTN off;

	bi->nmmap = 0;
	for (off = 0; off + m->desc_size <= m->size; off += m->desc_size) {
		const EFI_MEMORY_DESCRIPTOR *d = (const EFI_MEMORY_DESCRIPTOR *)(p + off);

		if (d->NumberOfPages == 0)
			continue;
		mmap_add(bi, d->PhysicalStart, d->NumberOfPages * EFI_MAP_PAGE, mmap_type(d->Type));
	}
}
