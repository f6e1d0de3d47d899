/*
 * smp.c: application processors. `smp=N` (default 1) starts N-1 of the
 * CPUs the MADT lists (ACPI 6.4 5.2.12.2 Processor Local APIC and
 * 5.2.12.12 Processor Local x2APIC entries, enabled or online-capable),
 * one at a time, with the INIT-SIPI-SIPI sequence of Intel SDM vol. 3A
 * 9.4.4.1 (INIT, 10 ms, STARTUP, 200 us, STARTUP) into the real-mode
 * trampoline smp_tramp.S copied to a free RAM page below 1 MiB; the AP
 * reaches long mode on the kernel's own page tables, loads the kernel's
 * GDT and IDT, enables its local APIC (apic_ap_init()) and says it is up
 * in its per-CPU block. An AP that has not said so within SMP_AP_WAIT_MS
 * ends the boot with an ERROR line (status 1): never a hang.
 *
 * An AP then sleeps in `sti; hlt` (interrupts on only there, as on the
 * BSP) until smp_run() hands it a function and wakes it with a fixed IPI
 * on a vector of its own; smp_join() waits, bounded, for the function's
 * return. Each per-CPU block is written by one side at a time: the BSP
 * fills fn/arg and then bumps `go`; the AP reads them after seeing `go`,
 * stores `ret` and then `done`. x86 keeps stores in order with stores
 * and loads with loads (arch.h), so the two ends need compiler barriers
 * only, named below by what they order.
 *
 * Each CPU's block is also in its GS base (smp_cpu_index()), so irq.c's
 * counters and halt.c's stats and timer are kept per CPU without a lock.
 * The console writes each CPU's line whole (console.c); nothing else on
 * the kernel side is made safe for concurrency. What an AP runs must
 * touch only its own data: with mq=N a copy of lwIP, the apps' code and
 * its queue pair per CPU (net/inst.h), each printing its own lines; for
 * app=pkt its queue pair only, the BSP printing after smp_join().
 *
 * Under this machine kind's kvm_pvm in native mode (pvm.c) smp=N > 1 is
 * refused: pvm.c keeps one shared page and one native/emulated state, the
 * BSP's, and an AP would have to register its own page and run its own
 * interrupt windows (untried). In emulated mode (pvm=off) the APs start
 * through KVM's emulator like the BSP runs, and do (test_smp); TCG too.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include "kernel/arch.h"
#include "kernel/kernel.h"

#define MADT_ENTRIES    44 /* header (36), local APIC address, flags */
#define MADT_LAPIC      0
#define MADT_X2APIC     9
#define MADT_ENABLED    (1u << 0)
#define MADT_ONLINE_CAP (1u << 1)
#define LOW_PAGE_FIRST  0x1000ull  /* page 0 holds the real-mode IVT and BDA */
#define LOW_PAGE_END    0x9f000ull /* below the EBDA and the VGA hole */
#define AP_STACK        (64u << 10)
#define SMP_AP_WAIT_MS  1000 /* an AP not up by then is an error */
#define INIT_DELAY_US   10000
#define SIPI_DELAY_US   200
#define MSR_GS_BASE     0xc0000101

/* smp_tramp.S's parameter block, at smp_tramp_params in the copy. */
struct smp_tramp_params {
	uint16_t gdt_limit;
	uint32_t gdt_base;
	uint16_t pad0;
	uint32_t pm32_off;
	uint16_t pm32_sel, pad1;
	uint32_t lm64_off;
	uint16_t lm64_sel, pad2;
	uint64_t cr3, stack, cpu, entry;
} __attribute__((packed));

extern const char smp_tramp[], smp_tramp_end[], smp_tramp_params[];
extern const uint32_t smp_tramp_off_gdt, smp_tramp_off_pm32, smp_tramp_off_lm64;

static struct smp_cpu cpus[SMP_MAX];
static unsigned nmadt = 1, nwanted = 1, nrunning = 1;
static uint64_t tramp_page; /* 0: none found */
static bool send_sipi = true;
static bool percpu_on; /* GS base holds each CPU's block (smp_start()) */

/* This CPU's block in GS base: one MSR write per CPU, after its GDT load
 * (loading GS clears the base). Read back with a %gs-relative load. */
static void percpu_set(struct smp_cpu *c)
{
	wrmsr(MSR_GS_BASE, (uintptr_t)c);
}

unsigned smp_cpu_index(void)
{
	unsigned i;

	if (!percpu_on)
		return 0;
	__asm__ volatile("movl %%gs:%c1, %0" : "=r"(i) : "i"(offsetof(struct smp_cpu, index)));
	return i;
}

uint32_t smp_apic_id(unsigned cpu)
{
	return cpu < nrunning ? cpus[cpu].apic_id : cpus[0].apic_id;
}

static uint32_t bsp_initial_apic_id(void)
{
	uint32_t r[4];
	cpuid(1, 0, r);
	return r[1] >> 24;
}

/* cpus[0] is the BSP, then the MADT's other usable CPUs in table order. */
static void madt_scan(void)
{
	const uint8_t *m = acpi_find_table("APIC");
	uint32_t len = 0;

	cpus[0].apic_id = bsp_initial_apic_id();
	if (!m)
		return;
	memcpy(&len, m + 4, 4);
	for (uint32_t off = MADT_ENTRIES; off + 2 <= len;) {
		uint8_t type = m[off], elen = m[off + 1];
		uint32_t id, flags;
		if (elen < 2 || off + elen > len)
			break; /* a malformed entry ends the walk */
		if (type == MADT_LAPIC && elen >= 8) {
			id = m[off + 3];
			memcpy(&flags, m + off + 4, 4);
		} else if (type == MADT_X2APIC && elen >= 16) {
			memcpy(&id, m + off + 4, 4);
			memcpy(&flags, m + off + 8, 4);
		} else {
			off += elen;
			continue;
		}
		off += elen;
		if (!(flags & (MADT_ENABLED | MADT_ONLINE_CAP)) || id == cpus[0].apic_id)
			continue;
		if (nmadt < SMP_MAX)
			cpus[nmadt++].apic_id = id;
	}
}

/* A 4 KiB page below 1 MiB that the boot map calls RAM and the image does
 * not use (the boot front-ends have copied what they had there). */
static uint64_t find_low_page(const struct boot_info *bi)
{
	for (uint64_t a = LOW_PAGE_FIRST; a < LOW_PAGE_END; a += 4096) {
		if (a < bi->image_end && a + 4096 > bi->image_start)
			continue;
		for (uint32_t i = 0; i < bi->nmmap; i++) {
			const struct boot_mem_region *r = &bi->mmap[i];
			if (r->type == BOOT_MEM_RAM && r->base <= a && r->base + r->len >= a + 4096)
				return a;
		}
	}
	return 0;
}

void smp_configure(const struct boot_info *bi)
{
	madt_scan();
	nwanted = (unsigned)cmdline_u64("smp", 1, 1, SMP_MAX);
	send_sipi = cmdline_bool("smp.sipi", true);
	if (nwanted == 1)
		return;
	if (!strcmp(pvm_mode(), "native"))
		kernel_usage_error("cmdline",
		                   "key 'smp': smp=%u is not supported in kvm_pvm's native mode "
		                   "(each AP would have to register its own shared page: "
		                   "kernel/smp.c); boot with pvm=off (emulated) or under TCG",
		                   nwanted);
	if (!acpi_find_table("APIC"))
		kernel_usage_error("cmdline",
		                   "key 'smp': smp=%u needs the ACPI MADT to find the CPUs, and "
		                   "this machine has none",
		                   nwanted);
	if (nwanted > nmadt)
		kernel_usage_error(
		    "cmdline", "key 'smp': smp=%u but the MADT lists %u usable CPU%s (QEMU -smp)",
		    nwanted, nmadt, nmadt == 1 ? "" : "s");
	tramp_page = find_low_page(bi);
	if (!tramp_page)
		kernel_usage_error("cmdline", "key 'smp': no free RAM page below 1 MiB for the "
		                              "application processors' start-up code");
}

static void ap_wake(void *unused)
{
	(void)unused;
}

static void ap_main(struct smp_cpu *c) __attribute__((noreturn, used));
static void ap_main(struct smp_cpu *c)
{
	uint32_t seen = 0;

	cpu_ap_init();
	percpu_set(c);
	trap_load();
	apic_ap_init();
	c->apic_id_seen = apic_id();
	/* Everything above is done before the BSP may count this CPU up. */
	arch_wmb();
	c->up = 1;
	for (;;) {
		while (c->go == seen)
			cpu_sti_hlt_cli(); /* the wake IPI ends it; latched if it came first */
		seen = c->go;
		/* fn and arg were stored before go: read them after it. */
		arch_rmb();
		int ret = c->fn(c->arg);
		c->ret = ret;
		/* ret is stored before done says it may be read. */
		arch_wmb();
		c->done = seen;
	}
}

static void tramp_install(void)
{
	size_t n = (size_t)(smp_tramp_end - smp_tramp);
	uint8_t *page = (uint8_t *)(uintptr_t)tramp_page;
	struct smp_tramp_params p = {
	    .gdt_limit = 4 * 8 - 1,
	    .gdt_base = (uint32_t)tramp_page + smp_tramp_off_gdt,
	    .pm32_off = (uint32_t)tramp_page + smp_tramp_off_pm32,
	    .pm32_sel = 0x08,
	    .lm64_off = (uint32_t)tramp_page + smp_tramp_off_lm64,
	    .lm64_sel = 0x18,
	    .cr3 = read_cr3(),
	    .entry = (uintptr_t)ap_main,
	};
	memcpy(page, smp_tramp, n);
	memcpy(page + (smp_tramp_params - smp_tramp), &p, sizeof(p));
}

static struct smp_tramp_params *tramp_params(void)
{
	return (struct smp_tramp_params *)(uintptr_t)(tramp_page +
	                                              (uint64_t)(smp_tramp_params - smp_tramp));
}

static void start_one(struct smp_cpu *c)
{
	struct smp_tramp_params *p = tramp_params();
	uint64_t t0 = clock_ns();

	c->stack_top = (uintptr_t)pmm_alloc(AP_STACK, 4096) + AP_STACK;
	c->wake_vector = irq_alloc(ap_wake, c);
	if (c->wake_vector < 0)
		kernel_error("smp", "no interrupt vector left for cpu %u's wake-up", c->index);
	p->stack = c->stack_top;
	p->cpu = (uintptr_t)c;
	/* The parameters are in memory before the IPIs that start the AP (an
	 * uncached ICR write is not reordered before earlier stores). */
	arch_wmb();
	if (apic_send_init(c->apic_id))
		kernel_error("smp", "cpu %u: INIT IPI not accepted", c->index);
	clock_delay_us(INIT_DELAY_US);
	for (int i = 0; i < 2 && send_sipi; i++) {
		if (apic_send_startup(c->apic_id, (uint8_t)(tramp_page >> 12)))
			kernel_error("smp", "cpu %u: STARTUP IPI not accepted", c->index);
		clock_delay_us(SIPI_DELAY_US);
	}
	while (!c->up) {
		if (clock_ns() - t0 > SMP_AP_WAIT_MS * 1000000ull)
			kernel_error("smp",
			             "cpu %u (apic id %u) did not come up within %u ms of its "
			             "INIT-SIPI-SIPI",
			             c->index, c->apic_id, SMP_AP_WAIT_MS);
		cpu_relax();
	}
	/* up was seen: what the AP stored before it can be read. */
	arch_rmb();
	c->up_ns = clock_ns() - t0;
}

static int ap_hello(void *arg)
{
	struct smp_cpu *c = arg;
	return (int)apic_id() == (int)c->apic_id ? 0 : -1;
}

void smp_start(void)
{
	char err[160];

	if (nwanted == 1)
		return;
	if (read_cr3() >> 32)
		kernel_error("smp",
		             "page tables at 0x%lx: above 4 GiB, the trampoline's "
		             "32-bit code cannot load them",
		             read_cr3());
	if (irq_init(err, sizeof(err)))
		kernel_error("smp", "%s", err);
	cpus[0].index = 0;
	cpus[0].up = 1;
	percpu_set(&cpus[0]);
	/* Each AP sets its own GS base before it takes an interrupt. */
	percpu_on = true;
	tramp_install();
	for (unsigned i = 1; i < nwanted; i++) {
		struct smp_cpu *c = &cpus[i];
		c->index = i;
		start_one(c);
		nrunning++;
		/* A first function on it: the wake-up, the run and the join work. */
		int ret = -1;
		if (smp_run(i, ap_hello, c) || smp_join(i, SMP_AP_WAIT_MS * 1000000ull, &ret) ||
		    ret)
			kernel_error("smp",
			             "cpu %u (apic id %u) came up but did not run a function", i,
			             c->apic_id);
		printf("smp cpu=%u apic_id=%u up_us=%lu stack=0x%lx vector=0x%x\n", i, c->apic_id,
		       c->up_ns / 1000, c->stack_top, c->wake_vector);
	}
	printf("smp cpus=%u madt_cpus=%u trampoline=0x%lx\n", nrunning, nmadt, tramp_page);
}

unsigned smp_requested(void)
{
	return nwanted;
}

unsigned smp_cpus(void)
{
	return nrunning;
}

int smp_run(unsigned cpu, smp_fn fn, void *arg)
{
	struct smp_cpu *c = &cpus[cpu];

	if (cpu == 0 || cpu >= nrunning || c->go != c->done)
		return -1;
	c->fn = fn;
	c->arg = arg;
	/* fn and arg are stored before go publishes them. */
	arch_wmb();
	c->go++;
	return apic_send_ipi(c->apic_id, (uint8_t)c->wake_vector);
}

int smp_join(unsigned cpu, uint64_t timeout_ns, int *ret)
{
	struct smp_cpu *c = &cpus[cpu];
	uint64_t t0 = clock_ns();

	if (cpu == 0 || cpu >= nrunning)
		return -1;
	while (c->done != c->go) {
		if (clock_ns() - t0 > timeout_ns)
			return -1;
		cpu_relax();
	}
	/* done was seen: ret was stored before it. */
	arch_rmb();
	if (ret)
		*ret = c->ret;
	return 0;
}
