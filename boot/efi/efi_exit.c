/*
 * efi_exit.c: take the final memory map and leave boot services.
 *
 * UEFI 2.10 section 7.4.6, EFI_BOOT_SERVICES.ExitBootServices(): the call
 * succeeds only if MapKey names the current memory map. "If MapKey value is
 * incorrect, ExitBootServices() returns EFI_INVALID_PARAMETER and
 * GetMemoryMap() with ExitBootServices() must be called again." The first
 * call may already shut parts of boot services down, so from then on only
 * GetMemoryMap() may be called (UEFI 2.9 and later also allow the memory
 * allocation services; older firmware does not, so we do not rely on it).
 *
 * The map changes under us because firmware timer events still run and
 * allocate until boot services end. Hence the buffer is allocated up front
 * with headroom, and the retry loop calls nothing but GetMemoryMap() and
 * ExitBootServices(). This is the shape of Linux's efi_exit_boot_services()
 * (drivers/firmware/efi/libstub).
 */
#include "boot/efi/efiboot.h"
#include "kernel/arch.h"

/* Descriptors of headroom beyond the size GetMemoryMap() first reports: the
 * pool allocation for the buffer itself can split a free region (+2), and
 * events between our calls can allocate more. */
#define MMAP_SLACK_DESCS 32

/* Bound on ExitBootServices() attempts: each retry only happens if firmware
 * changed the map in the few microseconds since GetMemoryMap(). */
#define EXIT_ATTEMPTS 8

EFI_STATUS efi_exit_prepare(EFI_BOOT_SERVICES *bs, struct efi_mmap *m)
{
	UINTN key;
	UINT32 version;
	EFI_STATUS st;

	m->size = 0;
	st = bs->GetMemoryMap(&m->size, NULL, &key, &m->desc_size, &version);
	if (st != EFI_BUFFER_TOO_SMALL)
		return efi_con_fail("GetMemoryMap(size query)", st);
	if (m->desc_size < sizeof(EFI_MEMORY_DESCRIPTOR))
		return efi_con_fail("GetMemoryMap descriptor size", EFI_UNSUPPORTED);
	m->cap = m->size + MMAP_SLACK_DESCS * m->desc_size;
	st = bs->AllocatePool(EfiLoaderData, m->cap, (void **)&m->map);
	if (EFI_ERROR(st))
		return efi_con_fail("AllocatePool(memory map)", st);
	return EFI_SUCCESS;
}

/* Nothing of the firmware may be used any more and the kernel's console is
 * not up: stop with interrupts off. Only reachable if ExitBootServices()
 * keeps failing despite the retry, i.e. a firmware bug. */
static __attribute__((noreturn)) void halt_forever(void)
{
	for (;;) {
		cpu_cli();
		cpu_hlt();
	}
}

/*
 * Returns EFI_SUCCESS with boot services gone and m holding the map in
 * effect from now on, or an error (reported on the console) if nothing has
 * been torn down yet. Once ExitBootServices() has been called, failure
 * leaves no one to return to: it halts.
 */
EFI_STATUS efi_exit_boot_services(EFI_HANDLE image, EFI_BOOT_SERVICES *bs, struct efi_mmap *m)
{
	UINTN key, desc_size;
	UINT32 version;
	EFI_STATUS st;
	int i;

	for (i = 0; i < EXIT_ATTEMPTS; i++) {
		m->size = m->cap;
		st = bs->GetMemoryMap(&m->size, m->map, &key, &desc_size, &version);
		if (EFI_ERROR(st) && i == 0)
			return efi_con_fail("GetMemoryMap", st);
		if (EFI_ERROR(st))
			halt_forever();
		m->desc_size = desc_size;
		st = bs->ExitBootServices(image, key);
		if (st == EFI_SUCCESS)
			return st;
		if (st != EFI_INVALID_PARAMETER)
			halt_forever();
	}
	halt_forever();
}
