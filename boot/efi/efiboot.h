/*
 * efiboot.h: the UEFI front-end's internal surface, grouped by file.
 *
 * boot/efi translates what UEFI tells a loaded application into one
 * struct boot_info and calls kernel_main(); nothing here outlives
 * ExitBootServices() except that struct and the memory it points to.
 *
 * GNU-EFI headers are used with GNU_EFI_USE_MS_ABI: every firmware function
 * pointer carries __attribute__((ms_abi)), so calls go straight through the
 * pointer (no uefi_call_wrapper thunk). efi_main() itself is called with the
 * SysV ABI by GNU-EFI's crt0 after it has applied our relocations.
 */
#ifndef VNETLAB_EFIBOOT_H
#define VNETLAB_EFIBOOT_H

#include <efi.h>
#include <stdbool.h>
#include "kernel/boot_info.h"

#ifndef ARRAY_SIZE
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#endif

/* efi_main.c: the entry GNU-EFI's crt0-efi-x86_64.o calls */
EFI_STATUS efi_main(EFI_HANDLE image, EFI_SYSTEM_TABLE *st);

/* efi_con.c: error reports on the firmware console, before ExitBootServices only */
void efi_con_init(EFI_SYSTEM_TABLE *st);
EFI_STATUS efi_con_fail(const char *what, EFI_STATUS status);

/* efi_cmdline.c: LoadOptions, else \EFI\BOOT\CMDLINE.TXT, as ASCII "key=value ..." */
EFI_STATUS efi_cmdline_get(EFI_BOOT_SERVICES *bs, EFI_LOADED_IMAGE *li, char *out, UINTN max);

/* efi_exit.c: final memory map and ExitBootServices() */
struct efi_mmap {
	EFI_MEMORY_DESCRIPTOR *map; /* LoaderData pool buffer */
	UINTN cap;                  /* bytes allocated at map */
	UINTN size;                 /* bytes GetMemoryMap() filled in */
	UINTN desc_size;            /* stride between descriptors; not sizeof */
};
EFI_STATUS efi_exit_prepare(EFI_BOOT_SERVICES *bs, struct efi_mmap *m);
EFI_STATUS efi_exit_boot_services(EFI_HANDLE image, EFI_BOOT_SERVICES *bs, struct efi_mmap *m);

/* efi_mmap.c: UEFI memory map -> boot_info regions (pure; no firmware calls) */
void efi_mmap_convert(const struct efi_mmap *m, struct boot_info *bi);

#endif
