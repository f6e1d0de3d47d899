/*
 * efi_main.c: UEFI application entry. Gathers what the kernel needs while
 * boot services exist, leaves them, and calls kernel_main().
 *
 * UEFI has already put us where kernel_main() wants to be (UEFI 2.10
 * section 2.3.4, x64 platforms): long mode, identity-mapped memory, a
 * stack of at least 128 KiB. The image is relocated in place by GNU-EFI's
 * crt0 before efi_main() runs, and stays LoaderCode/LoaderData, which the
 * memory map reports as firmware-owned, so the kernel never allocates over
 * its own code, data or this boot_info.
 */
#include "boot/efi/efiboot.h"
#include "kernel/arch.h"

static bool guid_equal(const EFI_GUID *a, const EFI_GUID *b)
{
	const uint8_t *x = (const uint8_t *)a, *y = (const uint8_t *)b;
	unsigned i;

	for (i = 0; i < sizeof(EFI_GUID); i++) {
		if (x[i] != y[i])
			return false;
	}
	return true;
}

/* The ACPI 2.0+ RSDP (with the XSDT) if firmware publishes one, else the
 * ACPI 1.0 RSDP (UEFI 2.10 section 4.6, EFI Configuration Table). */
static uint64_t find_rsdp(const EFI_SYSTEM_TABLE *st)
{
	EFI_GUID acpi20 = ACPI_20_TABLE_GUID, acpi10 = ACPI_TABLE_GUID;
	uint64_t rsdp10 = 0;
	UINTN i;

	for (i = 0; i < st->NumberOfTableEntries; i++) {
		const EFI_CONFIGURATION_TABLE *t = &st->ConfigurationTable[i];

		if (guid_equal(&t->VendorGuid, &acpi20))
			return (uintptr_t)t->VendorTable;
		if (guid_equal(&t->VendorGuid, &acpi10))
			rsdp10 = (uintptr_t)t->VendorTable;
	}
	return rsdp10;
}

EFI_STATUS efi_main(EFI_HANDLE image, EFI_SYSTEM_TABLE *st)
{
	/* First thing: boot_us in the banner is measured from here. */
	uint64_t entry_tsc = rdtsc();
	EFI_BOOT_SERVICES *bs = st->BootServices;
	EFI_GUID li_guid = EFI_LOADED_IMAGE_PROTOCOL_GUID;
	EFI_LOADED_IMAGE *li;
	struct boot_info *bi;
	struct efi_mmap map = {0};
	EFI_STATUS s;

	efi_con_init(st);
	s = bs->HandleProtocol(image, &li_guid, (void **)&li);
	if (EFI_ERROR(s))
		return efi_con_fail("HandleProtocol(LoadedImage)", s);

	/* boot_info is LoaderData so that it survives ExitBootServices() and
	 * is listed as firmware memory, not RAM, in the map it carries. */
	s = bs->AllocatePool(EfiLoaderData, sizeof(*bi), (void **)&bi);
	if (EFI_ERROR(s))
		return efi_con_fail("AllocatePool(boot_info)", s);
	bs->SetMem(bi, sizeof(*bi), 0);
	bi->protocol = "efi";
	bi->entry_tsc = entry_tsc;
	bi->rsdp = find_rsdp(st);
	bi->image_start = (uintptr_t)li->ImageBase;
	bi->image_end = bi->image_start + li->ImageSize;

	s = efi_cmdline_get(bs, li, bi->cmdline, sizeof(bi->cmdline));
	if (EFI_ERROR(s))
		goto fail;

	/* Last allocation: nothing may change the map after this but firmware
	 * events, which the retry in efi_exit_boot_services() absorbs. */
	s = efi_exit_prepare(bs, &map);
	if (EFI_ERROR(s))
		goto fail;
	s = efi_exit_boot_services(image, bs, &map);
	if (EFI_ERROR(s))
		goto fail;

	/* Boot services are gone; whatever firmware left of its interrupt
	 * setup is no longer ours to take, and kernel_main() wants IF clear. */
	cpu_cli();
	efi_mmap_convert(&map, bi);
	kernel_main(bi);

fail:
	/* Back to the firmware, which goes on to its next boot option. */
	if (map.map)
		bs->FreePool(map.map);
	bs->FreePool(bi);
	return s;
}
