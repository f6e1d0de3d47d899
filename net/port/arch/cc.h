/*
 * arch/cc.h: lwIP's compiler/platform port for the freestanding kernel
 * (lwIP doc/sys_arch.txt). picolibc gives stdint, inttypes, errno, limits.
 */
#ifndef VNETLAB_LWIP_ARCH_CC_H
#define VNETLAB_LWIP_ARCH_CC_H

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>

/* picolibc defines ssize_t but not SSIZE_MAX; without it lwIP's arch.h
 * typedefs its own ssize_t as int and the two clash. */
#ifndef SSIZE_MAX
#define SSIZE_MAX LONG_MAX
#endif

/* BYTE_ORDER comes from picolibc's <sys/types.h> (x86 is little-endian).
 * Byte swaps inline as one instruction (lwIP def.h would otherwise call
 * def.c's out-of-line lwip_htons()/lwip_htonl() for every header field;
 * under TCG each call's return is an indirect jump QEMU must look up). */
#define lwip_htons(x) ((u16_t)__builtin_bswap16((u16_t)(x)))
#define lwip_htonl(x) ((u32_t)__builtin_bswap32((u32_t)(x)))

/* Diagnostics go to the serial console like everything else. */
#define LWIP_PLATFORM_DIAG(x)                                                                      \
	do {                                                                                       \
		printf x;                                                                          \
	} while (0)

/* A failed lwIP assertion is a bug: report it like a CPU exception. */
void lwip_port_assert(const char *msg, int line, const char *file) __attribute__((noreturn));
#define LWIP_PLATFORM_ASSERT(x) lwip_port_assert((x), __LINE__, __FILE__)

/* RDRAND when the CPU has it, else a seeded xorshift (net/sys_arch.c). */
unsigned int lwip_port_rand(void);
#define LWIP_RAND() ((u32_t)lwip_port_rand())

#endif
