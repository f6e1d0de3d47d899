/*
 * entry.S: PVH entry point (Xen PVH boot ABI, as implemented by QEMU's
 * `-kernel` loader for ELF images carrying XEN_ELFNOTE_PHYS32_ENTRY).
 *
 * We are entered in 32-bit protected mode, paging off, flat segments,
 * %ebx = physical address of struct hvm_start_info. We read the TSC first
 * (boot_us counts from here), build boot page tables that identity-map the
 * first 4 GiB with 2 MiB pages, enable long mode and call pvh_main(start_info)
 * on our own stack. The kernel later replaces these tables with its own.
 */

#define XEN_ELFNOTE_PHYS32_ENTRY 18
#define CR0_PE (1 << 0)
#define CR0_PG (1 << 31)
#define CR4_PAE (1 << 5)
#define MSR_EFER 0xc0000080
#define EFER_LME (1 << 8)
#define PTE_P 0x1
#define PTE_W 0x2
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

	/* Zero the boot page tables (6 pages: PML4, PDPT, 4 PDs). */
	movl $boot_pml4, %edx
	movl %edx, %ebp
	movl %ebp, %edi
	xorl %eax, %eax
	movl $(6 * 4096 / 4), %ecx
	rep stosl

	/* PML4[0] -> PDPT, PDPT[0..3] -> PD0..PD3 */
	leal 4096(%ebp), %eax
	orl $(PTE_P | PTE_W), %eax
	movl %eax, (%ebp)
	xorl %ecx, %ecx
1:	leal 8192(%ebp), %eax
	movl %ecx, %edx
	shll $12, %edx
	addl %edx, %eax
	orl $(PTE_P | PTE_W), %eax
	movl %eax, 4096(%ebp, %ecx, 8)
	incl %ecx
	cmpl $4, %ecx
	jb 1b

	/* 2048 PD entries of 2 MiB each: identity map 0..4 GiB. */
	xorl %ecx, %ecx
2:	movl %ecx, %eax
	shll $21, %eax
	orl $(PTE_P | PTE_W | PTE_PS), %eax
	movl %eax, 8192(%ebp, %ecx, 8)
	movl %ecx, %eax
	shrl $11, %eax
	movl %eax, 8196(%ebp, %ecx, 8)
	incl %ecx
	cmpl $2048, %ecx
	jb 2b

	/* Long mode: PAE, CR3, EFER.LME, then paging. */
	movl %cr4, %eax
	orl $CR4_PAE, %eax
	movl %eax, %cr4
	movl %ebp, %cr3
	movl $MSR_EFER, %ecx
	rdmsr
	orl $EFER_LME, %eax
	wrmsr
	movl %cr0, %eax
	orl $(CR0_PG | CR0_PE), %eax
	movl %eax, %cr0

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

	.section .bss
	.balign 8
boot_entry_tsc:
	.quad 0
	.balign 4096
boot_pml4:
	.skip 6 * 4096
	.balign 16
boot_stack:
	.skip 65536
boot_stack_top:

	.section .note.GNU-stack, "", @progbits
