/*
 * main.c: kernel_main, the single entry every boot front-end calls. Brings
 * the machine to a known state, prints the banner and the ready line, then
 * runs a self-test or the application.
 *
 * Console format (parsed by tests/ and host/; documented in docs/interface.md):
 *   vnetlab ready boot_us=N pci=<ecam|ports> pci_functions=N mmio_devices=N
 *   vnetlab boot=<pvh|efi> accel=<kvm|tcg|hw|unknown> kvm_mode=<native|emulated|none>
 *           tsc_khz=N tsc_cal=<method>
 *           tsc_cal_us=N tsc_err_ppm=N mem_mib=N cpu="..." cmdline="..."
 *   mmio 0xBASE+0xSIZE irq=N from=<cmdline|acpi>  (one per virtio-mmio window)
 *   pci BB:DD.F VVVV:DDDD class=CCCCCC        (one per function)
 *
 * Only the ready line comes first (smp=N's lines precede it): under KVM
 * every console byte is an exit (docs/kvm.md), and boot_us is what the
 * ready line says it is. A boot that fails after the banner's old place
 * prints it before its ERROR or PANIC line (kernel_banner()).
 */
#include <stdio.h>
#include "kernel/arch.h"
#include "kernel/kernel.h"

/* Enough for lwIP's pools and the benchmarks' buffers; capped by RAM. */
#define HEAP_MAX (64ull << 20)

static uint64_t boot_tsc;
static const char *boot_protocol;
static bool banner_due; /* from where it used to be printed until printed */

/* Where a boot's time goes: the TSC after each step before the ready line
 * (rdtsc does not leave a native vCPU). `boot.phases=1` prints them after
 * the ready line, as microseconds from entry: docs/kvm.md's breakdown. */
#define PHASES_MAX 24
static struct phase {
	const char *name;
	uint64_t tsc;
} phases[PHASES_MAX];
static int nphases;

static void mark(const char *name)
{
	if (nphases < PHASES_MAX)
		phases[nphases++] = (struct phase){name, rdtsc()};
}

static void phases_print(void)
{
	uint64_t prev = boot_tsc;
	printf("boot phases_us");
	for (int i = 0; i < nphases; i++) {
		printf(" %s=%lu", phases[i].name, clock_tsc_to_ns(phases[i].tsc - prev) / 1000);
		prev = phases[i].tsc;
	}
	printf("\n");
}

uint64_t kernel_boot_tsc(void)
{
	return boot_tsc;
}

const char *kernel_boot_protocol(void)
{
	return boot_protocol;
}

/* The banner follows the ready line (every console byte before it is a
 * VM exit under KVM, docs/kvm.md), unless the boot fails first: then the
 * ERROR or PANIC line comes after it, as it always did. */
void kernel_banner(void)
{
	if (!banner_due)
		return;
	banner_due = false;
	printf("vnetlab boot=%s accel=%s kvm_mode=%s tsc_khz=%lu tsc_cal=%s tsc_cal_us=%lu "
	       "tsc_err_ppm=%lu "
	       "mem_mib=%lu cpu=\"%s\" cmdline=\"%s\"\n",
	       boot_protocol, cpu_accel(), pvm_mode(), clock_tsc_khz(), clock_method(),
	       clock_cal_us(), clock_err_ppm(), pmm_total_bytes() >> 20, cpu_model(),
	       cmdline_raw());
}

void kernel_main(struct boot_info *bi)
{
	boot_tsc = bi->entry_tsc ? bi->entry_tsc : rdtsc();
	boot_protocol = bi->protocol;
	mark("entry"); /* the front-end: PVH's entry.S and pvh_main() */
	/* Under this machine kind's kvm_pvm everything before pvm_init() runs
	 * in KVM's instruction emulator (~1 us per instruction), so only what
	 * the safe MSR probe needs comes first: our GDT and three IDT gates. */
	cpu_init();
	mark("cpu");
	trap_init_early();
	mark("trap");
	pvm_init(bi->tables_user);
	mark("pvm");
	trap_init();
	mark("trap_all");
	console_init();
	mark("console");
	cmdline_init(bi->cmdline);
	mark("cmdline");
	cpu_configure();
	mark("cpu_cfg");
	pvm_configure();
	mark("pvm_cfg");
	exit_init();
	mark("exit");
	clock_init();
	mark("clock");
	pmm_init(bi);
	mark("pmm");
	paging_init(bi);
	mark("paging");
	pvm_after_paging();
	mark("pvm_after_paging");
	uint64_t heap = pmm_free_bytes() / 4;
	heap_init(heap > HEAP_MAX ? HEAP_MAX : heap);
	mark("heap");
	acpi_init(bi->rsdp);
	mark("acpi");
	banner_due = true;

	pci_note_memory(bi);
	pci_init();
	mark("pci");
	mmiodev_init();
	mark("mmiodev");

	smp_configure(bi);
	mark("smp_cfg");
	selftest_configure();
	mark("selftest_cfg");
	app_configure();
	mark("app_cfg");
	bool show_phases = cmdline_bool("boot.phases", false);
	cmdline_finish();
	mark("cmdline_finish");
	smp_start();
	mark("smp_start");

	printf("vnetlab ready boot_us=%lu pci=%s pci_functions=%d mmio_devices=%d\n",
	       clock_tsc_to_ns(rdtsc() - boot_tsc) / 1000, pci_access_method(), pci_count(),
	       mmiodev_count());
	kernel_banner();
	mmiodev_print();
	pci_print();
	if (show_phases)
		phases_print();
	if (selftest_run())
		kernel_exit(EXIT_OK);
	kernel_exit(app_main());
}
