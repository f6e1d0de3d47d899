/*
 * prof.c: the stage stack behind prof.h. Single-threaded and interrupt
 * free, so a plain array is enough; a stack overflow or an unbalanced
 * prof_exit() is a bug in the instrumentation and panics.
 */
#include "kernel/arch.h"
#include "kernel/kernel.h"
#include "kernel/prof.h"

#define PROF_DEPTH 16

static struct prof_snap acc;
static enum prof_stage stack[PROF_DEPTH];
static unsigned depth;
static uint64_t last;

/* Charge the cycles since the last event to the stage open now. */
static void prof_charge(void)
{
	uint64_t now = rdtsc();

	if (last)
		acc.cycles[depth ? stack[depth - 1] : PROF_OTHER] += now - last;
	last = now;
}

void prof_push(enum prof_stage s)
{
	prof_charge();
	if (depth == PROF_DEPTH)
		panic("prof: stages nested deeper than %d", PROF_DEPTH);
	stack[depth++] = s;
	acc.calls[s]++;
}

void prof_pop(void)
{
	prof_charge();
	if (!depth)
		panic("prof: prof_exit() without prof_enter()");
	depth--;
}

void prof_snap(struct prof_snap *s)
{
	prof_charge();
	*s = acc;
}

const char *prof_name(enum prof_stage s)
{
	static const char *const names[PROF_STAGES] = {
	    "other",   "rx",   "poll",    "lwip_in", "app",    "tcp_out", "ip_out",
	    "enqueue", "kick", "reclaim", "csum",    "timers", "idle",
	};
	return s < PROF_STAGES ? names[s] : "?";
}
