/*
 * main.c: kernel_main, the single entry every boot front-end calls. Brings
 * the machine to a known state, prints the banner and the ready line, then
 * runs a self-test or the application.
 *
 * Console format (parsed by tests/ and host/; documented in README.md):
 *   vnetlab boot=<pvh|efi> accel=<kvm|tcg|hw|unknown> kvm_mode=<native|emulated|none>
 *           tsc_khz=N tsc_cal=<method>
 *           tsc_cal_us=N tsc_err_ppm=N mem_mib=N cpu="..." cmdline="..."
 *   mmio 0xBASE+0xSIZE irq=N from=<cmdline|acpi>  (one per virtio-mmio window)
 *   vnetlab ready boot_us=N pci=<ecam|ports> pci_functions=N mmio_devices=N
 *   pci BB:DD.F VVVV:DDDD class=CCCCCC        (one per function)
 *
 * The pci lines follow the ready line: under KVM every console byte is an
 * exit (docs/kvm.md), and boot_us is what the ready line says it is.
 */
#include <stdio.h>
#include "kernel/arch.h"
#include "kernel/kernel.h"

/* Enough for lwIP's pools and the benchmarks' buffers; capped by RAM. */
#define HEAP_MAX (64ull << 20)

static uint64_t boot_tsc;
static const char *boot_protocol;

uint64_t kernel_boot_tsc(void)
{
	return boot_tsc;
}

const char *kernel_boot_protocol(void)
{
	return boot_protocol;
}

void kernel_main(struct boot_info *bi)
{
	boot_tsc = bi->entry_tsc ? bi->entry_tsc : rdtsc();
	boot_protocol = bi->protocol;
	/* Under this machine kind's kvm_pvm everything before pvm_init() runs
	 * in KVM's instruction emulator (~1 us per instruction), so only what
	 * the safe MSR probe needs comes first: our GDT and the IDT. */
	cpu_init();
	trap_init();
	pvm_init(bi->tables_user, bi->cmdline);
	console_init();
	cmdline_init(bi->cmdline);
	cpu_configure();
	pvm_configure();
	exit_init();
	clock_init();
	pmm_init(bi);
	paging_init(bi);
	pvm_after_paging();
	uint64_t heap = pmm_free_bytes() / 4;
	heap_init(heap > HEAP_MAX ? HEAP_MAX : heap);
	acpi_init(bi->rsdp);

	printf("vnetlab boot=%s accel=%s kvm_mode=%s tsc_khz=%lu tsc_cal=%s tsc_cal_us=%lu "
	       "tsc_err_ppm=%lu "
	       "mem_mib=%lu cpu=\"%s\" cmdline=\"%s\"\n",
	       bi->protocol, cpu_accel(), pvm_mode(), clock_tsc_khz(), clock_method(),
	       clock_cal_us(), clock_err_ppm(), pmm_total_bytes() >> 20, cpu_model(),
	       cmdline_raw());
	pci_init();
	mmiodev_init();

	smp_configure(bi);
	selftest_configure();
	app_configure();
	cmdline_finish();
	smp_start();

	printf("vnetlab ready boot_us=%lu pci=%s pci_functions=%d mmio_devices=%d\n",
	       clock_tsc_to_ns(rdtsc() - boot_tsc) / 1000, pci_access_method(), pci_count(),
	       mmiodev_count());
	pci_print();
	if (selftest_run())
		kernel_exit(EXIT_OK);
	kernel_exit(app_main());
}
