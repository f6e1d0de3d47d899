/*
 * host_shim.h: the few kernel services the driver uses, for the host unit
 * tests: memory from a resettable arena (physical == pointer, as in the
 * guest) and a clock the test moves by hand.
 */
#ifndef VNETLAB_HOST_SHIM_H
#define VNETLAB_HOST_SHIM_H

#include <stddef.h>
#include <stdint.h>

extern uint64_t shim_now_ns;
extern uint64_t shim_clock_step;
extern void (*shim_halt_hook)(void); /* runs inside halt_until(): the device during a halt */
extern uint64_t shim_halts;          /* added at every clock_ns() (0: time moves only by hand) */
void *shim_alloc(size_t size, size_t align);
void shim_reset(void);

#endif
