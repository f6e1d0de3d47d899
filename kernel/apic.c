/*
 * apic.c: the local APIC (Intel SDM vol. 3A chapter 11), x2APIC mode when
 * CPUID.1:ECX[21] says the CPU has it (registers are MSRs 0x800 + offset/16),
 * xAPIC (memory-mapped at the IA32_APIC_BASE address) otherwise; QEMU's TCG
 * in Debian 12 offers only xAPIC. We use it for three things: EOI for
 * MSI-X interrupts, the LINT0 virtual wire for the legacy PIC, and a timer
 * that bounds every halt: TSC-deadline mode when CPUID.1:ECX[24] has it
 * (KVM), otherwise one-shot mode calibrated against the TSC at first use.
 */
#include <stdio.h>
#include "kernel/arch.h"
#include "kernel/kernel.h"

#define MSR_APIC_BASE    0x1b
#define APIC_BASE_ENABLE (1ull << 11)
#define APIC_BASE_X2     (1ull << 10)
#define MSR_TSC_DEADLINE 0x6e0
#define MSR_X2APIC_FIRST 0x800

#define APIC_ID      0x020
#define APIC_TPR     0x080
#define APIC_EOI     0x0b0
#define APIC_SVR     0x0f0
#define APIC_ICR_LO  0x300
#define APIC_ICR_HI  0x310 /* xAPIC: destination in bits 31:24 */
#define APIC_LVT_TMR 0x320
#define APIC_LINT0   0x350
#define APIC_LINT1   0x360
#define APIC_LVT_ERR 0x370
#define APIC_TMR_ICR 0x380 /* initial count */
#define APIC_TMR_CCR 0x390 /* current count */
#define APIC_TMR_DCR 0x3e0 /* divide configuration */

#define SVR_ENABLE      (1u << 8)
#define LVT_MASKED      (1u << 16)
#define LVT_EXTINT      (7u << 8)
#define LVT_NMI         (4u << 8)
#define LVT_TSCDEADLINE (2u << 17)
#define DCR_DIV1        0xb
#define ICR_FIXED       (0u << 8)
#define ICR_INIT        (5u << 8)
#define ICR_STARTUP     (6u << 8)
#define ICR_PENDING     (1u << 12) /* xAPIC delivery status: send pending */
#define ICR_ASSERT      (1u << 14)
#define ICR_WAIT_US     1000 /* an xAPIC ICR that stays pending longer is refused */

#define CAL_US 500 /* one-shot calibration window */

static bool x2, present, tsc_deadline;
static uintptr_t mmio;
static int timer_vec = -1;
static uint64_t ticks_per_ms; /* one-shot mode, divide by 1 */

static uint32_t apic_read(uint32_t reg)
{
	if (x2)
		return (uint32_t)rdmsr(MSR_X2APIC_FIRST + (reg >> 4));
	return mmio_read32(mmio + reg);
}

static void apic_write(uint32_t reg, uint32_t v)
{
	if (x2)
		wrmsr(MSR_X2APIC_FIRST + (reg >> 4), v);
	else
		mmio_write32(mmio + reg, v);
}

int apic_init(char *err, size_t errlen)
{
	uint32_t r[4];

	if (present)
		return 0;
	cpuid(1, 0, r);
	if (!(r[3] & (1u << 9))) {
		snprintf(err, errlen, "CPU has no local APIC (CPUID.1:EDX[9] clear)");
		return -1;
	}
	/* kvm_pvm's native mode offers x2APIC and the TSC-deadline timer, but
	 * with either an MSI during a halt sometimes left the vCPU halted
	 * until the timer (pvm.c): the xAPIC and its one-shot timer there. */
	x2 = (r[2] & (1u << 21)) && pvm_apic_extras_ok();
	tsc_deadline = (r[2] & (1u << 24)) && pvm_apic_extras_ok();
	uint64_t base = rdmsr(MSR_APIC_BASE);
	/* xAPIC -> x2APIC is the one legal transition (SDM 11.12.5): set EN,
	 * then EXTD. */
	base |= APIC_BASE_ENABLE;
	wrmsr(MSR_APIC_BASE, base);
	if (x2)
		wrmsr(MSR_APIC_BASE, base | APIC_BASE_X2);
	else
		mmio = (uintptr_t)(base & 0x000ffffffffff000ull); /* below 4 GiB: mapped uncached */
	present = true;

	apic_write(APIC_TPR, 0);              /* accept every priority */
	apic_write(APIC_LVT_ERR, LVT_MASKED); /* no error interrupts */
	apic_write(APIC_LVT_TMR, LVT_MASKED); /* timer off until armed */
	apic_write(APIC_LINT0, LVT_EXTINT);   /* the 8259's output (virtual wire) */
	apic_write(APIC_LINT1, LVT_NMI);
	apic_write(APIC_SVR, SVR_ENABLE | IRQ_SPURIOUS_VECTOR);
	printf("apic mode=%s id=%u timer=%s\n", x2 ? "x2apic" : "xapic", apic_id(),
	       tsc_deadline ? "tsc-deadline" : "oneshot");
	return 0;
}

/* An application processor's own local APIC, in the BSP's mode (x2APIC or
 * not: every CPU of a machine must use the same, SDM 11.12.5), after
 * smp.c started it. LINT0 stays masked: only the BSP takes the 8259's
 * virtual wire (MP spec 1.4 3.6.2.2). */
void apic_ap_init(void)
{
	uint64_t base = rdmsr(MSR_APIC_BASE) | APIC_BASE_ENABLE;
	wrmsr(MSR_APIC_BASE, base);
	if (x2)
		wrmsr(MSR_APIC_BASE, base | APIC_BASE_X2);
	apic_write(APIC_TPR, 0);
	apic_write(APIC_LVT_ERR, LVT_MASKED);
	apic_write(APIC_LVT_TMR, LVT_MASKED | (timer_vec > 0 ? (uint32_t)timer_vec : 0));
	apic_write(APIC_LINT0, LVT_MASKED);
	apic_write(APIC_LINT1, LVT_NMI);
	apic_write(APIC_SVR, SVR_ENABLE | IRQ_SPURIOUS_VECTOR);
}

/* One interprocessor interrupt through the ICR (SDM 11.6.1): x2APIC one
 * MSR write with the destination in the high half; xAPIC the high word
 * first (the low word's write sends), then wait for the delivery status
 * to clear. */
static int apic_icr(uint32_t dest, uint32_t lo)
{
	if (x2) {
		wrmsr(MSR_X2APIC_FIRST + (APIC_ICR_LO >> 4), (uint64_t)dest << 32 | lo);
		return 0;
	}
	apic_write(APIC_ICR_HI, dest << 24);
	apic_write(APIC_ICR_LO, lo);
	uint64_t t0 = clock_ns();
	while (apic_read(APIC_ICR_LO) & ICR_PENDING)
		if (clock_ns() - t0 > ICR_WAIT_US * 1000ull)
			return -1;
	return 0;
}

int apic_send_init(uint32_t dest)
{
	return apic_icr(dest, ICR_INIT | ICR_ASSERT);
}

int apic_send_startup(uint32_t dest, uint8_t page)
{
	return apic_icr(dest, ICR_STARTUP | ICR_ASSERT | page);
}

int apic_send_ipi(uint32_t dest, uint8_t vector)
{
	return apic_icr(dest, ICR_FIXED | ICR_ASSERT | vector);
}

void apic_eoi(void)
{
	apic_write(APIC_EOI, 0);
}

uint32_t apic_id(void)
{
	return x2 ? apic_read(APIC_ID) : apic_read(APIC_ID) >> 24;
}

bool apic_x2(void)
{
	return x2;
}

/* 0xfee in bits 31:20, destination APIC id in 19:12, physical mode, no
 * redirection hint. The data word is the vector (fixed, edge). Ids above
 * 255 need interrupt remapping: none of ours (SMP_MAX) has one. */
uint64_t apic_msi_addr_to(uint32_t apic_id)
{
	return 0xfee00000ull | (uint64_t)(apic_id & 0xff) << 12;
}

uint64_t apic_msi_addr(void)
{
	return apic_msi_addr_to(apic_id());
}

const char *apic_timer_mode(void)
{
	return tsc_deadline ? "tsc-deadline" : "oneshot";
}

/* The calling CPU's timer LVT in the mode apic_timer_init() chose: each
 * CPU has its own (an AP's is masked by apic_ap_init() until then). */
void apic_timer_local_init(void)
{
	if (timer_vec < 0)
		return;
	if (tsc_deadline) {
		apic_write(APIC_LVT_TMR, LVT_TSCDEADLINE | (uint32_t)timer_vec);
		/* SDM 10.5.4.1: the xAPIC's LVT write is a memory write and WRMSR
		 * to IA32_TSC_DEADLINE is not serializing, so a first deadline
		 * could reach a timer still in its old mode: MFENCE between them.
		 * (x2APIC's LVT is itself an MSR write, ordered already.) */
		if (!x2)
			arch_mb();
		return;
	}
	apic_write(APIC_TMR_DCR, DCR_DIV1);
	apic_write(APIC_TMR_ICR, 0);
	apic_write(APIC_LVT_TMR, (uint32_t)timer_vec); /* one-shot, unmasked */
}

/* Once, on the BSP: the vector, the one-shot calibration (every CPU's
 * timer runs at the same rate), then the BSP's own LVT. */
void apic_timer_init(int vector)
{
	timer_vec = vector;
	if (tsc_deadline) {
		apic_timer_local_init();
		return;
	}
	/* Count down from the top for CAL_US of TSC time, masked. */
	apic_write(APIC_TMR_DCR, DCR_DIV1);
	apic_write(APIC_LVT_TMR, LVT_MASKED | (uint32_t)vector);
	apic_write(APIC_TMR_ICR, 0xffffffffu);
	uint64_t t0 = clock_ns();
	while (clock_ns() - t0 < CAL_US * 1000ull)
		;
	uint32_t left = apic_read(APIC_TMR_CCR);
	uint64_t dt = clock_ns() - t0;
	apic_write(APIC_TMR_ICR, 0);
	ticks_per_ms = (uint64_t)(0xffffffffu - left) * 1000000ull / (dt ? dt : 1);
	if (!ticks_per_ms)
		ticks_per_ms = 1;
	apic_timer_local_init();
	printf("apic timer oneshot ticks_per_ms=%lu\n", ticks_per_ms);
}

void apic_timer_arm(uint64_t deadline_ns)
{
	uint64_t now = clock_ns();
	uint64_t dt = deadline_ns > now ? deadline_ns - now : 0;

	if (timer_vec < 0)
		return;
	if (tsc_deadline) {
		/* ns -> TSC ticks at tsc_khz; 0 would disarm, so at least 1. */
		uint64_t ticks = (uint64_t)((unsigned __int128)dt * clock_tsc_khz() / 1000000u);
		wrmsr(MSR_TSC_DEADLINE, rdtsc() + (ticks ? ticks : 1));
		return;
	}
	uint64_t ticks = (uint64_t)((unsigned __int128)dt * ticks_per_ms / 1000000u);
	if (ticks > 0xffffffffu)
		ticks = 0xffffffffu;
	apic_write(APIC_TMR_ICR, ticks ? (uint32_t)ticks : 1);
}

void apic_timer_cancel(void)
{
	if (timer_vec < 0)
		return;
	if (tsc_deadline)
		wrmsr(MSR_TSC_DEADLINE, 0);
	else
		apic_write(APIC_TMR_ICR, 0);
}
