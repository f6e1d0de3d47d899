/*
 * pvm.c: native execution under this machine kind's kvm_pvm hypervisor.
 * The only file that knows its ABI; nothing else depends on it.
 *
 * kvm_pvm ("Pagetable-based Virtual Machine") runs a guest without VMX/SVM:
 * a guest that does not register with it stays at CPL 0 inside KVM's
 * instruction emulator (every instruction emulated, ~4,000x slower than
 * the CPU). The version on this machine kind does not follow the published
 * X86 PVM Specification (no PVM CPUID leaves, MSRs 0x4b564df0-f7 #GP).
 * What it does, measured with probe kernels (undocumented; re-check on a
 * new host):
 *  - MSR 0x4b564d11 reads 0x4d5650 ("PVM"), 0x4b564d12 0x1ff, 0x4b564d13
 *    the TSC frequency in kHz;
 *  - writing a page-aligned guest-physical address to MSR 0x4b564d10 from
 *    64-bit code registers a shared page and switches the vCPU to native
 *    execution at hardware CPL 3 (CS reads 0x33); the hypervisor writes
 *    event flags at offset 0 of the page;
 *  - from then on every page-table level must have U/S=1 (a supervisor
 *    page refaults forever), privileged instructions (port I/O, MSRs,
 *    CR writes, cli/sti/hlt) trap and are emulated one at a time, and
 *    exceptions arrive through the guest's own IDT;
 *  - external interrupts are NOT injected into a native vCPU: the timer's
 *    or an MSI's vector stays latched in the LAPIC's IRR (read back via
 *    x2APIC MSR 0x821 after a 50 ms spin with sti and a 1 ms timer), and a
 *    native `hlt` returns without delivering it, whatever the shared page
 *    holds (0x200 at offset 0 or in every word tried);
 *  - writing 0 to MSR 0x4b564d10 unregisters: the vCPU is emulated again
 *    (CS reads 0x08) and takes the latched interrupt at `sti; hlt`, but
 *    not at `sti; nop; cli` (KVM injects where emulation stops: found as
 *    "lost" wake-ups with the vector still in the IRR); registering again
 *    costs ~47 us (one nested exit);
 *  - with x2APIC or the TSC-deadline timer (KVM offers both, even with
 *    -cpu qemu64) a halting server counted 1-3 lost wake-ups in nearly
 *    every run: the RX vector latched in the IRR, the vCPU halted until
 *    the timer. With the xAPIC and its one-shot timer about one run in
 *    ten still counts one or two; apic.c takes those natively
 *    (pvm_apic_extras_ok()).
 * So interrupts are enabled only inside halt.c's halt, and a native vCPU
 * leaves native mode around it (pvm_irq_window_open/close); the driver's
 * last look for work comes after the window opened (halt_until_idle()).
 * A polling build never pays for it, a halting one two MSR writes per
 * halt.
 */
#include <string.h>
#include "kernel/arch.h"
#include "kernel/kernel.h"

#define MSR_PVM_ENABLE 0x4b564d10  /* write: shared page's physical address */
#define MSR_PVM_MAGIC  0x4b564d11  /* reads PVM_MAGIC */
#define MSR_PVM_TSC    0x4b564d13  /* TSC frequency, kHz */
#define PVM_MAGIC      0x4d5650ull /* "PVM" */

/* Owned by the hypervisor once registered; the kernel never reads it. */
static uint8_t shared_page[4096] __attribute__((aligned(4096)));
static bool present, off, native;
static uint64_t tsc_khz;

static void enter_native(void)
{
	wrmsr(MSR_PVM_ENABLE, (uintptr_t)shared_page);
	native = true;
}

/* Everything here runs in KVM's emulator (about 1 us an instruction), so
 * it does the least that registers: the command line's pvm=off is looked
 * at natively by pvm_configure(), which leaves native mode again. */
void pvm_init(bool tables_user)
{
	uint64_t v;
	if (strcmp(cpu_accel(), "kvm") || !rdmsr_safe(MSR_PVM_MAGIC, &v) || v != PVM_MAGIC)
		return;
	present = true;
	if (rdmsr_safe(MSR_PVM_TSC, &v))
		tsc_khz = v;
	/* The front-end's page tables must be user-accessible at every level
	 * (PVH's are, UEFI's are not): else wait for paging_init()'s. */
	if (tables_user)
		enter_native();
}

bool pvm_irq_window_open(void)
{
	if (!native)
		return false;
	wrmsr(MSR_PVM_ENABLE, 0);
	return true;
}

void pvm_irq_window_close(void)
{
	wrmsr(MSR_PVM_ENABLE, (uintptr_t)shared_page);
}

bool pvm_apic_extras_ok(void)
{
	return !native;
}

bool pvm_irq_needs_halt(void)
{
	return native;
}

void pvm_after_paging(void)
{
	if (present && !off && !native)
		enter_native();
}

/* pvm=off keeps the vCPU emulated, to compare: registered by pvm_init()
 * already (a PVH boot), it unregisters here, before the clock, paging and
 * every device. */
void pvm_configure(void)
{
	static const char *const choices[] = {"auto", "off", NULL};
	off = cmdline_choice("pvm", choices, 0) == 1;
	if (off && native) {
		wrmsr(MSR_PVM_ENABLE, 0);
		native = false;
	}
}

const char *pvm_mode(void)
{
	if (!present)
		return "none";
	return native ? "native" : "emulated";
}

uint64_t pvm_tsc_khz(void)
{
	return tsc_khz;
}
