/*
 * idt_shim.h: forced in front of kernel/trap.c for test_trap (gcc
 * -include). It stands in for kernel/arch.h (same include guard): loading
 * the IDT register records the descriptor for the test to read the table
 * it points at; CR2 reads as zero.
 */
#ifndef VNETLAB_IDT_SHIM_H
#define VNETLAB_IDT_SHIM_H
#define VNETLAB_ARCH_H /* kernel/arch.h is replaced */

#include <stdint.h>
#include <string.h>

extern uint16_t shim_idt_limit;
extern uintptr_t shim_idt_base;
extern unsigned shim_lidts;

static inline void lidt(const void *desc)
{
	memcpy(&shim_idt_limit, desc, 2);
	memcpy(&shim_idt_base, (const char *)desc + 2, 8);
	shim_lidts++;
}

static inline uint64_t read_cr2(void)
{
	return 0;
}
#endif
