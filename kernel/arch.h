/*
 * arch.h: the only place with inline assembly outside boot/ and the
 * exception stubs. Port I/O, MMIO, barriers, CPUID, TSC and control
 * registers for x86-64. Drivers use these helpers and never write asm or
 * ad-hoc volatile casts themselves.
 */
#ifndef VNETLAB_ARCH_H
#define VNETLAB_ARCH_H

#include <stdbool.h>
#include <stdint.h>

/* ---- port I/O ---- */
static inline void outb(uint16_t port, uint8_t v)
{
	__asm__ volatile("outb %0, %1" : : "a"(v), "Nd"(port));
}
static inline void outw(uint16_t port, uint16_t v)
{
	__asm__ volatile("outw %0, %1" : : "a"(v), "Nd"(port));
}
static inline void outl(uint16_t port, uint32_t v)
{
	__asm__ volatile("outl %0, %1" : : "a"(v), "Nd"(port));
}
static inline uint8_t inb(uint16_t port)
{
	uint8_t v;
	__asm__ volatile("inb %1, %0" : "=a"(v) : "Nd"(port));
	return v;
}
static inline uint16_t inw(uint16_t port)
{
	uint16_t v;
	__asm__ volatile("inw %1, %0" : "=a"(v) : "Nd"(port));
	return v;
}
static inline uint32_t inl(uint16_t port)
{
	uint32_t v;
	__asm__ volatile("inl %1, %0" : "=a"(v) : "Nd"(port));
	return v;
}

/* String output: n bytes to one port, one instruction (fewer instructions
 * to emulate where the hypervisor emulates port I/O; each byte is still
 * one device access). */
static inline void outsb(uint16_t port, const void *p, unsigned long n)
{
	__asm__ volatile("rep outsb" : "+S"(p), "+c"(n) : "d"(port) : "memory");
}

/* ---- MMIO: one access of exactly the given width, never merged or split ---- */
static inline uint8_t mmio_read8(uintptr_t a)
{
	return *(volatile uint8_t *)a;
}
static inline uint16_t mmio_read16(uintptr_t a)
{
	return *(volatile uint16_t *)a;
}
static inline uint32_t mmio_read32(uintptr_t a)
{
	return *(volatile uint32_t *)a;
}
static inline void mmio_write8(uintptr_t a, uint8_t v)
{
	*(volatile uint8_t *)a = v;
}
static inline void mmio_write16(uintptr_t a, uint16_t v)
{
	*(volatile uint16_t *)a = v;
}
static inline void mmio_write32(uintptr_t a, uint32_t v)
{
	*(volatile uint32_t *)a = v;
}
/* 64-bit fields of virtio common config are written as two 32-bit halves
 * (virtio 1.2 section 4.1.3.1: the driver accesses 64-bit fields as two
 * 32-bit accesses, low half first). */
static inline void mmio_write64_split(uintptr_t a, uint64_t v)
{
	mmio_write32(a, (uint32_t)v);
	mmio_write32(a + 4, (uint32_t)(v >> 32));
}

/*
 * ---- Barriers ----
 * x86-64 keeps write-back stores in order with other stores and loads in
 * order with other loads (TSO), so "stores before stores" and "loads before
 * loads" only need the compiler not to reorder: arch_wmb()/arch_rmb() are
 * compiler barriers. The one reordering the CPU does is a later load passing
 * an earlier store (store buffer), so "store, then load what the other side
 * wrote in response" needs a real fence: arch_mb().
 */
static inline void arch_compiler_barrier(void)
{
	__asm__ volatile("" ::: "memory");
}
static inline void arch_wmb(void)
{
	arch_compiler_barrier();
}
static inline void arch_rmb(void)
{
	arch_compiler_barrier();
}
static inline void arch_mb(void)
{
	__asm__ volatile("mfence" ::: "memory");
}

/* Relax inside a bounded spin (Linux cpu_relax()). The main poll loop does
 * not use this unconditionally: under TCG a pause costs ~20 us per round
 * trip, so relaxing there is a compile-time policy. */
static inline void cpu_relax(void)
{
	__asm__ volatile("pause" ::: "memory");
}

static inline uint64_t rdtsc(void)
{
	uint32_t lo, hi;
	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return ((uint64_t)hi << 32) | lo;
}

/* rdtsc that neither runs ahead of earlier instructions nor lets later ones
 * run ahead of it (lfence on both sides, Intel SDM RDTSC): brackets around
 * one I/O instruction, for the PIT calibration. */
static inline uint64_t rdtsc_ordered(void)
{
	uint32_t lo, hi;
	__asm__ volatile("lfence; rdtsc; lfence" : "=a"(lo), "=d"(hi)::"memory");
	return ((uint64_t)hi << 32) | lo;
}

static inline void cpuid(uint32_t leaf, uint32_t sub, uint32_t r[4])
{
	__asm__ volatile("cpuid"
	                 : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3])
	                 : "a"(leaf), "c"(sub));
}

static inline uint64_t rdmsr(uint32_t msr)
{
	uint32_t lo, hi;
	__asm__ volatile("rdmsr" : "=a"(lo), "=d"(hi) : "c"(msr));
	return ((uint64_t)hi << 32) | lo;
}

/* One instruction that may raise #GP: trap.c resumes a #GP at
 * trap_fixup_rip at trap_fixup_to, and %[ok] (an "=&r" int operand) says
 * whether it ran. One probe at a time (single CPU, interrupts off); r8 is
 * clobbered. */
extern uint64_t trap_fixup_rip, trap_fixup_to;
#define ARCH_GP_FIXUP(insn)                                                                        \
	"leaq 1f(%%rip), %%r8\n\t"                                                                 \
	"movq %%r8, trap_fixup_rip(%%rip)\n\t"                                                     \
	"leaq 2f(%%rip), %%r8\n\t"                                                                 \
	"movq %%r8, trap_fixup_to(%%rip)\n\t"                                                      \
	"movl $1, %[ok]\n"                                                                         \
	"1:\t" insn "\n\t"                                                                         \
	"jmp 3f\n"                                                                                 \
	"2:\tmovl $0, %[ok]\n"                                                                     \
	"3:\tmovq $0, trap_fixup_rip(%%rip)"

/* rdmsr of an MSR that may not exist: false (and *v untouched) when it
 * raises #GP. */
static inline bool rdmsr_safe(uint32_t msr, uint64_t *v)
{
	uint32_t lo, hi;
	int ok;
	__asm__ volatile(ARCH_GP_FIXUP("rdmsr")
	                 : "=a"(lo), "=d"(hi), [ok] "=&r"(ok)
	                 : "c"(msr)
	                 : "r8", "memory");
	if (ok)
		*v = (uint64_t)hi << 32 | lo;
	return ok;
}

static inline void wrmsr(uint32_t msr, uint64_t v)
{
	__asm__ volatile("wrmsr" : : "c"(msr), "a"((uint32_t)v), "d"((uint32_t)(v >> 32)));
}

/* One accessor per control register, written out rather than made by a
 * macro so each name can be found with grep (the same shape on purpose). */
static inline uint64_t read_cr0(void)
{
	uint64_t v;
	__asm__ volatile("mov %%cr0, %0" : "=r"(v));
	return v;
}
static inline void write_cr0(uint64_t v)
{
	__asm__ volatile("mov %0, %%cr0" : : "r"(v) : "memory");
}
static inline uint64_t read_cr2(void)
{
	uint64_t v;
	__asm__ volatile("mov %%cr2, %0" : "=r"(v));
	return v;
}
static inline uint64_t read_cr3(void)
{
	uint64_t v;
	__asm__ volatile("mov %%cr3, %0" : "=r"(v));
	return v;
}
static inline void write_cr3(uint64_t v)
{
	__asm__ volatile("mov %0, %%cr3" : : "r"(v) : "memory");
}
static inline uint64_t read_cr4(void)
{
	uint64_t v;
	__asm__ volatile("mov %%cr4, %0" : "=r"(v));
	return v;
}
static inline void write_cr4(uint64_t v)
{
	__asm__ volatile("mov %0, %%cr4" : : "r"(v) : "memory");
}

static inline void cpu_cli(void)
{
	__asm__ volatile("cli" ::: "memory");
}
static inline void cpu_hlt(void)
{
	__asm__ volatile("hlt" ::: "memory");
}

/*
 * Halt until an interrupt, with no lost wake-up: the caller runs with
 * interrupts off, has armed every wake-up source and re-checked for work;
 * STI takes effect only after the instruction that follows it (the STI
 * interrupt shadow), so an interrupt that became pending after the
 * re-check is delivered once HLT has begun and ends it. Interrupts are off
 * again on return. These two are the only places interrupts are ever on.
 */
static inline void cpu_sti_hlt_cli(void)
{
	__asm__ volatile("sti; hlt; cli" ::: "memory");
}
/* One instruction with interrupts on: anything already latched is taken. */
static inline void cpu_sti_nop_cli(void)
{
	__asm__ volatile("sti; nop; cli" ::: "memory");
}

/* RDRAND; returns 0 when the CPU has no entropy ready (caller falls back). */
static inline int cpu_rdrand64(uint64_t *out)
{
	unsigned char ok;
	__asm__ volatile("rdrand %0; setc %1" : "=r"(*out), "=qm"(ok));
	return ok;
}

/* Load the IDT register from a 10-byte descriptor (limit, base). */
static inline void lidt(const void *desc)
{
	__asm__ volatile("lidt (%0)" : : "r"(desc) : "memory");
}

static inline uint64_t read_rbp(void)
{
	uint64_t v;
	__asm__ volatile("mov %%rbp, %0" : "=r"(v));
	return v;
}

#endif
