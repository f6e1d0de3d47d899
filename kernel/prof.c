/*
 * prof.c: the stage stack behind prof.h, one per CPU: with smp=N each
 * CPU runs its own data path (app=pkt's queue pairs, the lwIP copies), so
 * each charges its own cycles, and prof_snap() gives the calling CPU's.
 * A CPU's stack is touched by that CPU only and never from an interrupt
 * handler, so a plain array is enough; a stack overflow or an unbalanced
 * prof_exit() is a bug in the instrumentation and panics. (One stack for
 * every CPU, as before, had two CPUs pushing and popping the same depth:
 * mq=2 with PROFILE=1 panicked.)
 */
#include "kernel/arch.h"
#include "kernel/kernel.h"
#include "kernel/prof.h"

#define PROF_DEPTH 16

static struct prof_cpu {
	struct prof_snap acc;
	enum prof_stage stack[PROF_DEPTH];
	unsigned depth;
	uint64_t last;
} __attribute__((aligned(64))) prof_cpus[SMP_MAX];

static struct prof_cpu *prof_me(void)
{
	return &prof_cpus[smp_cpu_index()];
}

/* Charge the cycles since this CPU's last event to its stage open now. */
static void prof_charge(struct prof_cpu *p)
{
	uint64_t now = rdtsc();

	if (p->last)
		p->acc.cycles[p->depth ? p->stack[p->depth - 1] : PROF_OTHER] += now - p->last;
	p->last = now;
}

void prof_push(enum prof_stage s)
{
	struct prof_cpu *p = prof_me();

	prof_charge(p);
	if (p->depth == PROF_DEPTH)
		panic("prof: stages nested deeper than %d", PROF_DEPTH);
	p->stack[p->depth++] = s;
	p->acc.calls[s]++;
}

void prof_pop(void)
{
	struct prof_cpu *p = prof_me();

	prof_charge(p);
	if (!p->depth)
		panic("prof: prof_exit() without prof_enter()");
	p->depth--;
}

void prof_snap(struct prof_snap *s)
{
	struct prof_cpu *p = prof_me();

	prof_charge(p);
	*s = p->acc;
}

const char *prof_name(enum prof_stage s)
{
	static const char *const names[PROF_STAGES] = {
	    "other",   "rx",   "poll",    "lwip_in", "app",    "tcp_out", "ip_out",
	    "enqueue", "kick", "reclaim", "csum",    "timers", "idle",
	};
	return s < PROF_STAGES ? names[s] : "?";
}
