/*
 * selftest.c: kernel self-tests selected with test=..., driven by tests/.
 *   test=fault  touch an unmapped address: the exception report must appear
 *   test=clock  check the clock is monotonic, then mark two instants 2 s
 *               apart by the TSC so the host can compare with its wall clock
 *   test=msr    rdmsr_safe() reads IA32_APIC_BASE, and the #GP resume
 *               path it relies on (trap.c, isr.S) brings a faulting load
 *               back with every register intact (TCG's rdmsr never
 *               faults, so a non-canonical address stands in for an MSR
 *               that does not exist)
 *   test=exits  the cost of the operations that leave the guest (the
 *               floor of this accelerator): cycles per outb to an unused
 *               port, per inb of the UART's LSR, per 16-byte rep outsb,
 *               per CPUID leaf 0; medians of 64 (docs/kvm.md)
 */
#include <stdio.h>
#include "kernel/arch.h"
#include "kernel/kernel.h"

enum { TEST_NONE, TEST_FAULT, TEST_CLOCK, TEST_MSR, TEST_EXITS };
static const char *const tests[] = {"none", "fault", "clock", "msr", "exits", NULL};
static int which;

void selftest_configure(void)
{
	which = cmdline_choice("test", tests, TEST_NONE);
}

static void test_fault(void)
{
	printf("selftest fault: writing to unmapped address 0x10000000000\n");
	mmio_write32(0x10000000000ull, 1); /* 1 TiB: never mapped */
	printf("selftest fault: no exception\n");
	kernel_exit(EXIT_FAIL);
}

static void test_clock(void)
{
	uint64_t prev = clock_ns(), backwards = 0;
	const uint64_t samples = 1000000;
	for (uint64_t i = 0; i < samples; i++) {
		uint64_t now = clock_ns();
		if (now < prev)
			backwards++;
		prev = now;
	}
	printf("selftest clock samples=%lu backwards=%lu\n", samples, backwards);
	const uint64_t span_ns = 2000000000ull;
	uint64_t t0 = clock_ns();
	printf("selftest clock mark=0 ns=%lu\n", t0);
	while (clock_ns() - t0 < span_ns)
		cpu_relax();
	printf("selftest clock mark=1 ns=%lu\n", clock_ns());
	if (backwards)
		kernel_error("selftest", "clock went backwards %lu times", backwards);
}

#define MSR_APIC_BASE 0x1b

/* A load through the same #GP fixup as rdmsr_safe(); r12, callee-saved,
 * holds a canary across the fault. */
static bool load_safe(uint64_t addr, uint64_t *v, uint64_t *canary)
{
	uint64_t val = 0;
	register uint64_t c __asm__("r12") = 0x1122334455667788ull;
	int ok;
	__asm__ volatile(ARCH_GP_FIXUP("movq (%[a]), %[val]")
	                 : [val] "+r"(val), [ok] "=&r"(ok), "+r"(c)
	                 : [a] "r"(addr)
	                 : "r8", "memory");
	*v = val;
	*canary = c;
	return ok;
}

static void test_msr(void)
{
	uint64_t base = 0, v, canary;
	bool base_ok = rdmsr_safe(MSR_APIC_BASE, &base);
	bool gp = !load_safe(0x8000000000000000ull, &v, &canary); /* non-canonical: #GP */
	bool good = load_safe((uintptr_t)&base, &v, &canary) && v == base;
	printf("selftest msr apic_base=0x%lx non_canonical=%s canary=0x%lx mapped=%s\n", base,
	       gp ? "gp" : "read", canary, good ? "read" : "fault");
	if (!base_ok || !(base & 0xfffff000) || !gp || !good || canary != 0x1122334455667788ull)
		kernel_error("selftest", "rdmsr_safe / #GP resume failed");
}

#define POST_PORT 0x80 /* the legacy POST-code port: no device behind it on QEMU's pc */
#define LSR_PORT  0x3fd
#define EXIT_REPS 64

enum { OP_OUTB, OP_INB, OP_OUTSB, OP_CPUID, OP_COUNT };

static uint64_t op_cycles(int op)
{
	static const char bytes[16];
	uint64_t t[EXIT_REPS];
	for (int i = 0; i < EXIT_REPS; i++) {
		uint32_t r[4];
		uint64_t t0 = rdtsc();
		switch (op) {
		case OP_OUTB:
			outb(POST_PORT, 0);
			break;
		case OP_INB:
			(void)inb(LSR_PORT);
			break;
		case OP_OUTSB:
			outsb(POST_PORT, bytes, sizeof(bytes));
			break;
		default:
			cpuid(0, 0, r);
			break;
		}
		t[i] = rdtsc() - t0;
	}
	/* Insertion sort; the median ignores the first call's cold misses and
	 * the host's preemptions. */
	for (int i = 1; i < EXIT_REPS; i++)
		for (int j = i; j > 0 && t[j - 1] > t[j]; j--) {
			uint64_t x = t[j];
			t[j] = t[j - 1];
			t[j - 1] = x;
		}
	return t[EXIT_REPS / 2];
}

static void test_exits(void)
{
	uint64_t c[OP_COUNT];
	for (int op = 0; op < OP_COUNT; op++)
		c[op] = op_cycles(op);
	printf("selftest exits accel=%s kvm_mode=%s outb_cycles=%lu inb_cycles=%lu "
	       "outsb16_cycles=%lu cpuid_cycles=%lu outb_ns=%lu\n",
	       cpu_accel(), pvm_mode(), c[OP_OUTB], c[OP_INB], c[OP_OUTSB], c[OP_CPUID],
	       clock_tsc_to_ns(c[OP_OUTB]));
}

bool selftest_run(void)
{
	switch (which) {
	case TEST_FAULT:
		test_fault();
		return true;
	case TEST_CLOCK:
		test_clock();
		return true;
	case TEST_MSR:
		test_msr();
		return true;
	case TEST_EXITS:
		test_exits();
		return true;
	default:
		return false;
	}
}
