/*
 * cr3_shim.h: forced in front of kernel/paging.c for test_paging (gcc
 * -include). It stands in for kernel/arch.h (same include guard): the only
 * privileged operation paging.c performs, loading CR3, records the root
 * table for the test to walk instead.
 */
#ifndef VNETLAB_CR3_SHIM_H
#define VNETLAB_CR3_SHIM_H
#define VNETLAB_ARCH_H /* kernel/arch.h is replaced */

#include <stdint.h>

extern uint64_t shim_cr3;
extern unsigned shim_cr3_loads;

static inline void write_cr3(uint64_t v)
{
	shim_cr3 = v;
	shim_cr3_loads++;
}
#endif
