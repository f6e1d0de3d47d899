/*
 * host_shim.h: the few kernel services the driver uses, for the host unit
 * tests: memory from a resettable arena (physical == pointer, as in the
 * guest) and a clock the test moves by hand.
 */
#ifndef VNETLAB_HOST_SHIM_H
#define VNETLAB_HOST_SHIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

extern uint64_t shim_now_ns;
extern uint64_t shim_clock_step;     /* added at every clock_ns() (0: time moves only by hand) */
extern void (*shim_halt_hook)(void); /* runs inside halt_until(): the device during a halt */
extern uint64_t shim_halts;          /* halt_until() calls that halted */
/* Set by a halt hook when the device it played raised an interrupt: the
 * halt then ends 1 us later, not at its deadline, and is no timer wake. */
extern bool shim_halt_woken;
/* What cpu_accel() says ("tcg" unless a test changes it before bring-up). */
extern const char *shim_accel;
/* The last irq_alloc_gsi() (an I/O APIC route; the shim has one I/O APIC
 * with GSIs 24-47, as QEMU microvm with acpi=on); calls 0 until then. */
struct shim_gsi {
	uint32_t gsi;
	bool level, active_low;
	unsigned calls;
};
extern struct shim_gsi shim_gsi_last;
/* irq_alloc() succeeds this many more times, then fails (-1: never fails). */
extern int shim_irq_alloc_left;
/* kernel/smp.c: CPUs running (smp_cpus(), 1 unless a test says more) and
 * CPU k's APIC id, distinct from k so a mix-up shows. */
extern unsigned shim_cpus;
#define SHIM_APIC_ID(k) (0x20u + 3u * (k))
void *shim_alloc(size_t size, size_t align);
void shim_reset(void);

#endif
