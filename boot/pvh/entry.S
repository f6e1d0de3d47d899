/*
 * entry.S: PVH entry point (Xen PVH boot ABI, as implemented by QEMU's
 * `-kernel` loader for ELF images carrying XEN_ELFNOTE_PHYS32_ENTRY).
 *
 * We are entered in 32-bit protected mode, paging off, flat segments,
 * %ebx = physical address of struct hvm_start_info. We read the TSC first
 * (boot_us counts from here), load boot page tables that identity-map the
 * first 4 GiB with 2 MiB pages, enable long mode and call pvh_main(start_info)
 * on our own stack. The kernel later replaces these tables with its own.
 *
 * The tables are assembled data, not built by a loop: under this machine
 * kind's kvm_pvm every instruction before the kernel registers for native
 * execution is emulated (~1 us each; a 2,048-entry loop cost milliseconds).
 * Every level has U/S=1, which native execution there requires (it runs
 * the kernel at CPL 3; kernel/pvm.c); elsewhere U/S is harmless, as
 * nothing runs at CPL 3 and SMEP/SMAP stay off.
 */

#include "kernel/long_mode.h"

#define XEN_ELFNOTE_PHYS32_ENTRY 18
#define PTE_P 0x1
#define PTE_W 0x2
#define PTE_U 0x4
#define PTE_A 0x20 /* A and D preset, as paging.c's (why there) */
#define PTE_D 0x40
#define PTE_PS 0x80

	/* The note QEMU looks for: name "Xen", type 18, 8-byte payload (the
	 * 32-bit entry address, zero-extended), 4-byte aligned. */
	.section .note.Xen, "a", @note
	.balign 4
	.long 4f - 3f          /* namesz */
	.long 6f - 5f          /* descsz */
	.long XEN_ELFNOTE_PHYS32_ENTRY
3:	.asciz "Xen"
4:	.balign 4
5:	.quad pvh_start32
6:	.balign 4

	.section .text.boot32, "ax"
	.code32
	.globl pvh_start32
pvh_start32:
	cli
	cld
	/* TSC at entry, for boot_us. No stack yet (the PVH ABI gives none),
	 * so it goes straight to memory. */
	rdtsc
	movl %eax, boot_entry_tsc
	movl %edx, boot_entry_tsc + 4

	/* Long mode: PAE, CR3, EFER.LME, then paging. */
	LONG_MODE_ON $boot_pml4

	lgdt boot_gdt_desc
	ljmp $0x08, $pvh_start64

	.code64
pvh_start64:
	movl $0x10, %eax
	movl %eax, %ds
	movl %eax, %es
	movl %eax, %ss
	xorl %eax, %eax
	movl %eax, %fs
	movl %eax, %gs
	leaq boot_stack_top(%rip), %rsp
	xorl %ebp, %ebp         /* terminates stack traces */
	movl %ebx, %edi         /* arg0: hvm_start_info (physical, < 4 GiB; zero-extended) */
	movq boot_entry_tsc(%rip), %rsi /* arg1: TSC at entry */
	call pvh_main
4:	hlt
	jmp 4b

	.section .rodata
	.balign 16
boot_gdt:
	.quad 0
	.quad 0x00af9a000000ffff   /* 0x08: 64-bit code */
	.quad 0x00cf92000000ffff   /* 0x10: data */
boot_gdt_end:
boot_gdt_desc:
	.word boot_gdt_end - boot_gdt - 1
	.long boot_gdt

	/* PML4[0] -> PDPT, PDPT[0..3] -> PD0..PD3, 2,048 PD entries of 2 MiB. */
	.section .data
	.balign 4096
boot_pml4:
	.quad boot_pdpt + (PTE_P | PTE_W | PTE_U | PTE_A | PTE_D)
	.fill 511, 8, 0
boot_pdpt:
	.quad boot_pd + 0 * 4096 + (PTE_P | PTE_W | PTE_U | PTE_A | PTE_D)
	.quad boot_pd + 1 * 4096 + (PTE_P | PTE_W | PTE_U | PTE_A | PTE_D)
	.quad boot_pd + 2 * 4096 + (PTE_P | PTE_W | PTE_U | PTE_A | PTE_D)
	.quad boot_pd + 3 * 4096 + (PTE_P | PTE_W | PTE_U | PTE_A | PTE_D)
	.fill 508, 8, 0
boot_pd:
	.set addr, 0
	.rept 2048
	.quad addr + (PTE_P | PTE_W | PTE_U | PTE_A | PTE_D | PTE_PS)
	.set addr, addr + 0x200000
	.endr

	.section .bss
	.balign 8
boot_entry_tsc:
	.quad 0
	.balign 16
boot_stack:
	.skip 65536
boot_stack_top:

	.section .note.GNU-stack, "", @progbits
