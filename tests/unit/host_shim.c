/*
 * host_shim.c: kernel.h services for the host unit tests (see host_shim.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernel/kernel.h"
#include "kernel/prof.h"
#include "tests/unit/host_shim.h"

#define SHIM_ARENA_SIZE (64u << 20) /* a copy build with TSO keeps 64 KB per TX slot */

static uint8_t shim_arena[SHIM_ARENA_SIZE] __attribute__((aligned(4096)));
static size_t shim_used;
uint64_t shim_now_ns;
uint64_t shim_clock_step;

void *shim_alloc(size_t size, size_t align)
{
	size_t off = (shim_used + align - 1) & ~(align - 1);

	if (off + size > SHIM_ARENA_SIZE) {
		fprintf(stderr, "shim: arena exhausted (%zu + %zu)\n", off, size);
		abort();
	}
	shim_used = off + size;
	memset(shim_arena + off, 0, size);
	return shim_arena + off;
}

void shim_reset(void)
{
	shim_used = 0;
	shim_now_ns = 0;
	shim_clock_step = 0;
}

/* The accelerator the driver believes it runs under (kernel/cpu.c); the
 * tests run as under TCG, the machine kind every system test uses. */
const char *shim_accel = "tcg";

const char *cpu_accel(void)
{
	return shim_accel;
}

void *pmm_alloc(size_t size, size_t align)
{
	return shim_alloc(size, align);
}

uint64_t clock_ns(void)
{
	shim_now_ns += shim_clock_step;
	return shim_now_ns;
}

/* kernel/prof.c is not part of the host build: PROFILE is off there. */
void prof_push(enum prof_stage s)
{
	(void)s;
}

void prof_pop(void)
{
}

/* Interrupts and halting (kernel/irq.c, apic.c, halt.c). The halt idle
 * policies call these; the host build has no interrupts, so a halt
 * "sleeps" by moving the clock to its deadline, after letting the test
 * play the device (shim_halt_hook) as if it ran during the halt. */
void (*shim_halt_hook)(void);
uint64_t shim_halts;
bool shim_halt_woken;
static struct halt_stats shim_halt_st;

int halt_init(char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	return 0;
}

uint64_t halt_until(uint64_t deadline_ns)
{
	uint64_t t0 = shim_now_ns;

	if (deadline_ns <= t0)
		return 0; /* as kernel/halt.c: a passed deadline is no halt */
	shim_halts++;
	shim_halt_st.halts++;
	shim_halt_woken = false;
	if (shim_halt_hook)
		shim_halt_hook();
	if (shim_halt_woken && deadline_ns > shim_now_ns + 1000)
		shim_now_ns += 1000;
	else if (deadline_ns > shim_now_ns) {
		shim_now_ns = deadline_ns;
		shim_halt_st.timer_wakes++;
	}
	shim_halt_st.halted_ns += shim_now_ns - t0;
	return shim_now_ns - t0;
}

/* The shim never needs the second look (as kernel/halt.c off kvm_pvm). */
uint64_t halt_until_idle(uint64_t deadline_ns, bool (*busy)(void *), void *arg)
{
	(void)busy;
	(void)arg;
	return halt_until(deadline_ns);
}

const struct halt_stats *halt_stats(void)
{
	return &shim_halt_st;
}

int irq_init(char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	return 0;
}

static int shim_next_vec = 0x30;
int shim_irq_alloc_left = -1;

int irq_alloc(irq_fn fn, void *arg)
{
	(void)fn;
	(void)arg;
	if (shim_irq_alloc_left == 0)
		return -1;
	if (shim_irq_alloc_left > 0)
		shim_irq_alloc_left--;
	return shim_next_vec++;
}

int irq_alloc_legacy(unsigned line, irq_fn fn, void *arg)
{
	(void)fn;
	(void)arg;
	return line < 16 ? 0x20 + (int)line : -1;
}

/* The I/O APIC, as QEMU microvm with acpi=on has it: GSIs 24-47 on one;
 * the last routing asked for is kept for the tests. */
struct shim_gsi shim_gsi_last;

bool ioapic_has(uint32_t gsi)
{
	return gsi >= 24 && gsi <= 47;
}

int irq_alloc_gsi(uint32_t gsi, bool level, bool active_low, irq_fn fn, void *arg, char *err,
                  size_t errlen)
{
	(void)fn;
	(void)arg;
	if (!ioapic_has(gsi)) {
		snprintf(err, errlen, "GSI %u is on no I/O APIC the MADT lists", gsi);
		return -1;
	}
	shim_gsi_last = (struct shim_gsi){gsi, level, active_low, shim_gsi_last.calls + 1};
	return shim_next_vec++;
}

uint64_t irq_unexpected(unsigned cpu)
{
	(void)cpu;
	return 0;
}

uint64_t irq_spurious(unsigned cpu)
{
	(void)cpu;
	return 0;
}

uint64_t apic_msi_addr_to(uint32_t apic_id)
{
	return 0xfee00000ull | (uint64_t)(apic_id & 0xff) << 12;
}

uint64_t apic_msi_addr(void)
{
	return apic_msi_addr_to(SHIM_APIC_ID(0));
}

/* kernel/smp.c: shim_cpus CPUs running, CPU k with APIC id SHIM_APIC_ID(k). */
unsigned shim_cpus = 1;

unsigned smp_cpus(void)
{
	return shim_cpus;
}

uint32_t smp_apic_id(unsigned cpu)
{
	return SHIM_APIC_ID(cpu < shim_cpus ? cpu : 0);
}

void halt_let_pending_in(void)
{
}
