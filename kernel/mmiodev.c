/*
 * mmiodev.c: the virtio-mmio windows the machine declares (virtio 1.2
 * section 4.2), the way pci.c lists PCI functions: where each one is and
 * which interrupt it raises, nothing about what sits behind it (that is
 * drivers/virtio/virtio_mmio.c's). Two sources, as QEMU's microvm provides
 * them:
 *   - the command line, Linux's form virtio_mmio.device=<size>@<base>:<irq>
 *     (size with an optional K or M; a fourth :<id> field is accepted and
 *     ignored), one word per device; microvm adds these itself with
 *     acpi=off (its auto-kernel-cmdline);
 *   - ACPI: with acpi=on (microvm's default) each window is a DSDT device
 *     with _HID "LNRO0005" whose _CRS holds a Memory32Fixed descriptor and
 *     an Extended Interrupt descriptor (ACPI 6.4 sections 6.4.3.4 and
 *     6.4.3.6). We do not run AML: we find each _HID string and read the
 *     two descriptors of the resource template that follows it, which is
 *     what a static _CRS (QEMU's) is; a window that is not found this way
 *     is simply not listed.
 * A window found both ways is listed once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernel/arch.h"
#include "kernel/kernel.h"

#define MMIODEV_MAX      16
#define LNRO_HID         "LNRO0005"
#define CRS_SCAN_BYTES   160  /* _HID to the end of its device's _CRS in QEMU's AML */
#define ACPI_MEM32_FIXED 0x86 /* large item, length 9 */
#define ACPI_EXT_IRQ     0x89 /* large item, length >= 6 */
/* Its flags byte (6.4.3.6): bit 1 edge (else level), bit 2 active low. */
#define EXT_IRQ_EDGE       (1u << 1)
#define EXT_IRQ_ACTIVE_LOW (1u << 2)

static struct mmio_dev devs[MMIODEV_MAX];
static int ndevs;

static void mmiodev_add(uint64_t base, uint64_t size, uint32_t irq, uint8_t flags,
                        const char *source)
{
	for (int i = 0; i < ndevs; i++)
		if (devs[i].base == base)
			return;
	if (ndevs == MMIODEV_MAX)
		return;
	devs[ndevs++] = (struct mmio_dev){
	    base, size, irq, flags & EXT_IRQ_EDGE, flags & EXT_IRQ_ACTIVE_LOW, source};
	paging_map_mmio(base, size);
}

/* After the ready line, like pci_print(): a console byte is a VM exit
 * under KVM (docs/kvm.md). */
void mmiodev_print(void)
{
	for (int i = 0; i < ndevs; i++)
		printf("mmio 0x%lx+0x%lx irq=%u %s active-%s from=%s\n",
		       (unsigned long)devs[i].base, (unsigned long)devs[i].size, devs[i].irq,
		       devs[i].edge ? "edge" : "level", devs[i].active_low ? "low" : "high",
		       devs[i].source);
}

/* "<size>@<base>:<irq>[:<id>]" */
static void mmiodev_parse(const char *word)
{
	const char *v = word;
	char *end;
	unsigned long long size = strtoull(v, &end, 0), base, irq;

	if (*end == 'K' || *end == 'k')
		size <<= 10, end++;
	else if (*end == 'M' || *end == 'm')
		size <<= 20, end++;
	if (end == v || *end != '@')
		goto bad;
	v = end + 1;
	base = strtoull(v, &end, 0);
	if (end == v || *end != ':')
		goto bad;
	v = end + 1;
	irq = strtoull(v, &end, 0);
	if (end == v || (*end && *end != ':') || irq > 255 || size < 0x100 || size > (1u << 20) ||
	    base == 0 || base + size > (1ull << 32))
		goto bad;
	mmiodev_add(base, size, (uint32_t)irq, 0, "cmdline"); /* Linux's form: level, high */
	return;
bad:
	kernel_usage_error("cmdline",
	                   "bad value '%s' for key 'virtio_mmio.device' (expected "
	                   "<size>@<base>:<irq>, e.g. 512@0xfeb00e00:12, below 4 GiB)",
	                   word);
}

static void mmiodev_from_dsdt(void)
{
	const uint8_t *t = acpi_dsdt();
	uint32_t len;

	if (!t)
		return;
	memcpy(&len, t + 4, 4);
	for (uint32_t i = 36; i + sizeof(LNRO_HID) <= len; i++) {
		if (memcmp(t + i, LNRO_HID, sizeof(LNRO_HID))) /* with its NUL */
			continue;
		uint32_t end = i + CRS_SCAN_BYTES < len ? i + CRS_SCAN_BYTES : len;
		uint32_t base = 0, size = 0, irq = 0;
		uint8_t flags = 0;
		bool mem = false, have_irq = false;
		for (uint32_t j = i + sizeof(LNRO_HID); j + 12 <= end; j++) {
			if (!memcmp(t + j, LNRO_HID, sizeof(LNRO_HID)))
				break; /* the next device */
			if (!mem && t[j] == ACPI_MEM32_FIXED && t[j + 1] == 9 && t[j + 2] == 0) {
				memcpy(&base, t + j + 4, 4);
				memcpy(&size, t + j + 8, 4);
				mem = true;
				j += 11;
			} else if (mem && t[j] == ACPI_EXT_IRQ && t[j + 1] >= 6 && t[j + 2] == 0 &&
			           t[j + 4] >= 1) {
				memcpy(&irq, t + j + 5, 4);
				flags = t[j + 3];
				have_irq = true;
				break;
			}
		}
		if (mem && have_irq && base && size >= 0x100 && irq <= 255)
			mmiodev_add(base, size, irq, flags, "acpi");
	}
}

void mmiodev_init(void)
{
	const char *v;

	for (int n = 0; (v = cmdline_nth("virtio_mmio.device", n)); n++)
		mmiodev_parse(v);
	mmiodev_from_dsdt();
}

int mmiodev_count(void)
{
	return ndevs;
}

const struct mmio_dev *mmiodev_get(int i)
{
	return i >= 0 && i < ndevs ? &devs[i] : NULL;
}
