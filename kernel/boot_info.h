/*
 * boot_info.h: the one structure every boot front-end (boot/pvh, boot/efi)
 * fills before calling kernel_main(). kernel/ never learns more than this
 * about who booted it.
 */
#ifndef VNETLAB_BOOT_INFO_H
#define VNETLAB_BOOT_INFO_H

#include <stdint.h>

#define BOOT_MMAP_MAX    256
#define BOOT_CMDLINE_MAX 1024

enum boot_mem_type {
	BOOT_MEM_RAM = 1, /* free for the kernel to use */
	BOOT_MEM_FIRMWARE =
	    2, /* memory, but owned by firmware/loader/ACPI: map WB, do not allocate */
	BOOT_MEM_RESERVED =
	    3, /* not memory we know of (MMIO, holes): map uncached only on request */
};

struct boot_mem_region {
	uint64_t base;
	uint64_t len;
	uint32_t type; /* enum boot_mem_type */
};

struct boot_info {
	const char *protocol; /* "pvh" or "efi"; printed in the banner */
	uint64_t entry_tsc;   /* TSC at front-end entry, for boot_us */
	/* The page tables in CR3 at entry have U/S=1 at every level (the PVH
	 * boot tables do): pvm.c may enter native mode before paging_init(). */
	uint32_t tables_user;
	uint64_t rsdp;        /* physical address of the ACPI RSDP, 0 if unknown */
	uint64_t image_start; /* physical range of the loaded image; never allocated */
	uint64_t image_end;
	uint32_t nmmap;
	struct boot_mem_region mmap[BOOT_MMAP_MAX];
	char cmdline[BOOT_CMDLINE_MAX]; /* NUL-terminated "key=value key=value" */
};

/* kernel/main.c: the single kernel entry. Identity-mapped long mode,
 * interrupts off, any valid stack. Never returns. */
void kernel_main(struct boot_info *bi) __attribute__((noreturn));

#endif
