/*
 * smp_tramp.S: where an application processor starts (Intel SDM vol. 3A
 * 9.4.4, MP initialization; 11.6.1 for the STARTUP IPI). A SIPI with vector
 * V starts the AP in real mode at CS:IP = (V << 8):0000, so smp.c copies
 * these bytes [smp_tramp, smp_tramp_end) to a free 4 KiB page below 1 MiB
 * and patches the parameter block at the end before each AP's SIPI: the
 * linear addresses the far jumps need (the page is chosen at run time, and
 * the UEFI build is relocated), the kernel's CR3 (below 4 GiB: loaded from
 * 32-bit code), the AP's stack and its per-CPU block, and the C entry.
 *
 * Real mode -> 32-bit protected mode (our own flat GDT) -> PAE, CR3,
 * EFER.LME, paging -> 64-bit code, then smp_ap_entry(cpu) on its own
 * stack, which loads the kernel's GDT and IDT (cpu.c, trap.c). %ebx holds
 * the page's linear address across the mode switches.
 */

#include "kernel/long_mode.h"

/* No blanks: OFF(x)(%ebx) is one LONG_MODE_ON argument. */
#define OFF(sym) ((sym)-smp_tramp)

	.section .rodata
	.balign 16
	.globl smp_tramp, smp_tramp_end
	.code16
smp_tramp:
	cli
	cld
	movw %cs, %ax
	movw %ax, %ds
	movzwl %ax, %ebx
	shll $4, %ebx               /* the page's linear address */
	lgdtl OFF(tramp_gdt_desc)
	movl %cr0, %eax
	orl $CR0_PE, %eax
	movl %eax, %cr0
	ljmpl *OFF(tramp_pm32_ptr)

	.code32
tramp_pm32:
	movl $0x10, %eax
	movl %eax, %ds
	movl %eax, %es
	movl %eax, %ss
	LONG_MODE_ON OFF(tramp_cr3)(%ebx)
	ljmpl *OFF(tramp_lm64_ptr)(%ebx)

	.code64
tramp_lm64:
	movl $0x10, %eax
	movl %eax, %ds
	movl %eax, %es
	movl %eax, %ss
	movl %ebx, %ebx             /* zero-extend the page address */
	movq OFF(tramp_stack)(%rbx), %rsp
	movq OFF(tramp_cpu)(%rbx), %rdi
	xorl %ebp, %ebp             /* terminates stack traces */
	jmpq *OFF(tramp_entry)(%rbx)

	.balign 16
tramp_gdt:
	.quad 0
	.quad 0x00cf9a000000ffff    /* 0x08: 32-bit code */
	.quad 0x00cf92000000ffff    /* 0x10: data */
	.quad 0x00af9a000000ffff    /* 0x18: 64-bit code */
tramp_gdt_end:

	/* The parameter block smp.c patches (struct smp_tramp_params). */
	.balign 8
	.globl smp_tramp_params
smp_tramp_params:
tramp_gdt_desc:
	.word tramp_gdt_end - tramp_gdt - 1
	.long 0                     /* base: page + OFF(tramp_gdt) */
	.word 0
tramp_pm32_ptr:
	.long 0                     /* page + OFF(tramp_pm32) */
	.word 0x08
	.word 0
tramp_lm64_ptr:
	.long 0                     /* page + OFF(tramp_lm64) */
	.word 0x18
	.word 0
tramp_cr3:
	.quad 0
tramp_stack:
	.quad 0
tramp_cpu:
	.quad 0
tramp_entry:
	.quad 0
smp_tramp_end:

	/* Offsets smp.c needs, as data (the symbols' difference is a constant). */
	.balign 4
	.globl smp_tramp_off_gdt, smp_tramp_off_pm32, smp_tramp_off_lm64
smp_tramp_off_gdt:
	.long OFF(tramp_gdt)
smp_tramp_off_pm32:
	.long OFF(tramp_pm32)
smp_tramp_off_lm64:
	.long OFF(tramp_lm64)

	.section .note.GNU-stack, "", @progbits
