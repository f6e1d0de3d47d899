/*
 * halt.c: sleep until an interrupt or a deadline. The LAPIC timer bounds
 * every halt, so a guest with nothing to do still reaches its own
 * deadlines (lwIP timers, the end of a run, a server whose client never
 * comes) with no traffic at all. Each CPU halts on its own timer and
 * keeps its own counts (halt_stats() is the calling CPU's).
 */
#include "kernel/arch.h"
#include "kernel/kernel.h"

static bool ready;

/* Per CPU (smp_cpu_index()): its halts, its timer's interrupts (the LVT
 * timer is each CPU's own; one vector for all, counted where it fires),
 * and whether its LVT is programmed yet. Written by that CPU only. */
struct halt_cpu {
	struct halt_stats st;
	volatile uint64_t timer_irqs;
	bool timer_on;
} __attribute__((aligned(64)));
static struct halt_cpu per_cpu[SMP_MAX];

static void timer_fired(void *unused)
{
	(void)unused;
	per_cpu[smp_cpu_index()].timer_irqs++;
}

int halt_init(char *err, size_t errlen)
{
	if (ready)
		return 0;
	if (irq_init(err, errlen))
		return -1;
	apic_timer_init(irq_alloc(timer_fired, NULL));
	per_cpu[smp_cpu_index()].timer_on = true;
	ready = true;
	return 0;
}

/* An AP programs its own timer LVT at its first halt (apic_ap_init() left
 * it masked: halt_init() ran on the BSP, maybe after the APs started). */
static struct halt_cpu *halt_cpu_ready(void)
{
	struct halt_cpu *c = &per_cpu[smp_cpu_index()];

	if (!c->timer_on && ready) {
		apic_timer_local_init();
		c->timer_on = true;
	}
	return c;
}

/* Arm the timer, halt once with interrupts on, disarm. Where interrupts
 * come in only inside a window (kvm_pvm native: pvm.c) the window is
 * opened first, and busy(arg), the caller's last look for work, is asked
 * in it: what arrived since the caller armed is seen there, what arrives
 * from then on interrupts the halt. False: busy, no halt. */
static bool halt_once(uint64_t deadline_ns, bool (*busy)(void *), void *arg)
{
	apic_timer_arm(deadline_ns);
	bool opened = pvm_irq_window_open();
	bool halt = !(opened && busy && busy(arg));
	if (halt)
		cpu_sti_hlt_cli();
	if (opened)
		pvm_irq_window_close();
	apic_timer_cancel();
	return halt;
}

uint64_t halt_until_idle(uint64_t deadline_ns, bool (*busy)(void *), void *arg)
{
	struct halt_cpu *c = halt_cpu_ready();
	uint64_t fired = c->timer_irqs;
	uint64_t t0 = clock_ns();

	if (deadline_ns <= t0 || !halt_once(deadline_ns, busy, arg))
		return 0;
	uint64_t dt = clock_ns() - t0;
	c->st.halts++;
	c->st.halted_ns += dt;
	if (c->timer_irqs != fired)
		c->st.timer_wakes++;
	return dt;
}

uint64_t halt_until(uint64_t deadline_ns)
{
	return halt_until_idle(deadline_ns, NULL, NULL);
}

const struct halt_stats *halt_stats(void)
{
	return &per_cpu[smp_cpu_index()].st;
}

/* A halt this short takes an interrupt already latched at once, and
 * otherwise ends on the timer. */
#define LET_IN_HALT_NS 50000

void halt_let_pending_in(void)
{
	/* kvm_pvm injects interrupts into an emulated vCPU only where it
	 * stops emulating (a halt), not after `sti; nop` (pvm.c): there a
	 * latched interrupt comes in through a short halt. */
	if (pvm_irq_needs_halt())
		halt_once(clock_ns() + LET_IN_HALT_NS, NULL, NULL);
	else
		cpu_sti_nop_cli();
}
