/*
 * prof.h: where the cycles go (the 2010 zero-copy thread's method), built
 * in with `make PROFILE=1` only. Each stage of the data path brackets
 * itself with prof_enter()/prof_exit(); TSC cycles are charged to the
 * innermost open stage, so nested stages (the driver's kick inside lwIP's
 * output inside the app's write) are exclusive and the stages add up to
 * the time measured, with whatever no stage claims in PROF_OTHER.
 *
 * Without PROFILE the calls are empty inline functions on a 0 constant:
 * nothing is compiled in, and every build still type-checks the calls.
 */
#ifndef VNETLAB_PROF_H
#define VNETLAB_PROF_H

#include <stdint.h>

#ifndef VNETLAB_PROFILE
#define VNETLAB_PROFILE 0
#endif

enum prof_stage {
	PROF_OTHER,   /* main loop, waits: not claimed by a stage below */
	PROF_RX,      /* driver: taking frames off the used ring (vnet_rx) */
	PROF_POLL,    /* driver: vnet_poll() housekeeping (refill, status) */
	PROF_LWIP_IN, /* lwIP input: Ethernet, IP, TCP/UDP, the sends ACKs trigger */
	PROF_APP,     /* the application: ticks, the stream data path (stream.c) */
	PROF_TCP_OUT, /* tcp_write()/tcp_output() called by the stream app */
	PROF_IP_OUT,  /* lwIP below TCP: IP, ARP, Ethernet, the netif */
	PROF_ENQUEUE, /* driver: vnet_tx() putting a frame on the ring */
	PROF_KICK,    /* driver: the notify write (a VM exit under KVM) */
	PROF_RECLAIM, /* driver: the one TX reclaim routine */
	PROF_CSUM,    /* software checksums (lwIP's, and the pseudo-header sums) */
	PROF_TIMERS,  /* lwIP's sys_check_timeouts() */
	PROF_IDLE,    /* the idle policy: spinning, re-arming, halted (vnet_idle) */
	PROF_STAGES
};

struct prof_snap {
	uint64_t cycles[PROF_STAGES];
	uint64_t calls[PROF_STAGES];
};

/* prof.c */
void prof_push(enum prof_stage s);
void prof_pop(void);
void prof_snap(struct prof_snap *s);
const char *prof_name(enum prof_stage s);

static inline void prof_enter(enum prof_stage s)
{
	if (VNETLAB_PROFILE)
		prof_push(s);
}

static inline void prof_exit(void)
{
	if (VNETLAB_PROFILE)
		prof_pop();
}

#endif
