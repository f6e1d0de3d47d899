/*
 * pvh.c: translate the PVH boot protocol (struct hvm_start_info, Xen's
 * arch-x86/hvm/start_info.h) into struct boot_info and enter the kernel.
 */
#include <stddef.h>
#include <stdint.h>
#include "kernel/arch.h"
#include "kernel/boot_info.h"

#define HVM_START_MAGIC 0x336ec578

struct hvm_start_info {
	uint32_t magic;
	uint32_t version;
	uint32_t flags;
	uint32_t nr_modules;
	uint64_t modlist_paddr;
	uint64_t cmdline_paddr;
	uint64_t rsdp_paddr;
	/* version >= 1 */
	uint64_t memmap_paddr;
	uint32_t memmap_entries;
	uint32_t reserved;
};

struct hvm_memmap_entry {
	uint64_t addr;
	uint64_t size;
	uint32_t type; /* E820 types: 1 RAM, 3 ACPI reclaimable, 4 ACPI NVS, others reserved */
	uint32_t reserved;
};

extern char _image_start[], _image_end[];
void pvh_main(const struct hvm_start_info *si, uint64_t entry_tsc) __attribute__((noreturn));

/* Too large for the 64 KiB boot stack; static is fine, we run once. */
static struct boot_info bi;

static uint32_t e820_to_boot(uint32_t t)
{
	switch (t) {
	case 1:
		return BOOT_MEM_RAM;
	case 3:
	case 4:
		return BOOT_MEM_FIRMWARE;
	default:
		return BOOT_MEM_RESERVED;
	}
}

static int rsdp_checksum_ok(const uint8_t *p)
{
	uint8_t sum = 0;
	for (int i = 0; i < 20; i++)
		sum += p[i];
	return sum == 0;
}

/* ACPI 6.4 section 5.2.5.1: on legacy BIOS systems the RSDP sits on a
 * 16-byte boundary in the first KiB of the EBDA or in 0xE0000-0xFFFFF. */
static uint64_t rsdp_scan(void)
{
	uintptr_t ebda = (uintptr_t)mmio_read16(0x40e) << 4; /* BDA: EBDA segment */
	uintptr_t ranges[2][2] = {{ebda, ebda + 1024}, {0xe0000, 0x100000}};
	for (int r = 0; r < 2; r++) {
		if (ranges[r][0] == 0)
			continue;
		for (uintptr_t a = ranges[r][0]; a + 20 <= ranges[r][1]; a += 16) {
			const uint8_t *p = (const uint8_t *)a;
			if (p[0] == 'R' && p[1] == 'S' && p[2] == 'D' && p[3] == ' ' &&
			    p[4] == 'P' && p[5] == 'T' && p[6] == 'R' && p[7] == ' ' &&
			    rsdp_checksum_ok(p))
				return a;
		}
	}
	return 0;
}

void pvh_main(const struct hvm_start_info *si, uint64_t entry_tsc)
{
	bi.protocol = "pvh";
	bi.entry_tsc = entry_tsc;
	bi.tables_user = 1; /* entry.S's boot tables */
	bi.image_start = (uintptr_t)_image_start;
	bi.image_end = (uintptr_t)_image_end;

	if (si->magic == HVM_START_MAGIC) {
		if (si->cmdline_paddr) {
			const char *c = (const char *)(uintptr_t)si->cmdline_paddr;
			size_t i = 0;
			for (; c[i] && i < BOOT_CMDLINE_MAX - 1; i++)
				bi.cmdline[i] = c[i];
			bi.cmdline[i] = 0;
		}
		bi.rsdp = si->rsdp_paddr;
		if (si->version >= 1 && si->memmap_paddr) {
			const struct hvm_memmap_entry *e =
			    (const struct hvm_memmap_entry *)(uintptr_t)si->memmap_paddr;
			for (uint32_t i = 0; i < si->memmap_entries && bi.nmmap < BOOT_MMAP_MAX;
			     i++) {
				bi.mmap[bi.nmmap].base = e[i].addr;
				bi.mmap[bi.nmmap].len = e[i].size;
				bi.mmap[bi.nmmap].type = e820_to_boot(e[i].type);
				bi.nmmap++;
			}
		}
	}
	/* The kernel reports an empty memory map or bad magic on the console;
	 * here we cannot print yet. */
	if (!bi.rsdp)
		bi.rsdp = rsdp_scan();
	kernel_main(&bi);
}
