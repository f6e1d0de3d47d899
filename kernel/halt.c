/*
 * halt.c: sleep until an interrupt or a deadline. The LAPIC timer bounds
 * every halt, so a guest with nothing to do still reaches its own
 * deadlines (lwIP timers, the end of a run, a server whose client never
 * comes) with no traffic at all.
 */
#include "kernel/arch.h"
#include "kernel/kernel.h"

static bool ready;
static int timer_vec = -1;
static struct halt_stats st;

static void timer_fired(void *unused)
{
	(void)unused;
}

int halt_init(char *err, size_t errlen)
{
	if (ready)
		return 0;
	if (irq_init(err, errlen))
		return -1;
	timer_vec = irq_alloc(timer_fired, NULL);
	apic_timer_init(timer_vec);
	ready = true;
	return 0;
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
	uint64_t fired = irq_count(timer_vec);
	uint64_t t0 = clock_ns();

	if (deadline_ns <= t0 || !halt_once(deadline_ns, busy, arg))
		return 0;
	uint64_t dt = clock_ns() - t0;
	st.halts++;
	st.halted_ns += dt;
	if (irq_count(timer_vec) != fired)
		st.timer_wakes++;
	return dt;
}

uint64_t halt_until(uint64_t deadline_ns)
{
	return halt_until_idle(deadline_ns, NULL, NULL);
}

const struct halt_stats *halt_stats(void)
{
	return &st;
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
