/*
 * long_mode.h: the switch from 32-bit protected mode to long mode, for the
 * two places that make it: boot/pvh/entry.S (the boot CPU) and
 * kernel/smp_tramp.S (each application processor). Assembler only.
 *
 * Intel SDM vol. 3A 10.8.5: PAE on, CR3 loaded, EFER.LME set, then paging
 * on; the far jump into a 64-bit code segment that follows is the
 * caller's (its GDT and addressing differ). clang-format is off: this is
 * assembler, not C.
 */

/* clang-format off */

#define CR0_PE   (1 << 0)
#define CR0_PG   (1 << 31)
#define CR4_PAE  (1 << 5)
#define MSR_EFER 0xc0000080
#define EFER_LME (1 << 8)

/* cr3: the operand the page table root is loaded from (one word: no
 * blanks). Clobbers %eax, %ecx, %edx. */
	.macro LONG_MODE_ON cr3
	movl %cr4, %eax
	orl $CR4_PAE, %eax
	movl %eax, %cr4
	movl \cr3, %eax
	movl %eax, %cr3
	movl $MSR_EFER, %ecx
	rdmsr
	orl $EFER_LME, %eax
	wrmsr
	movl %cr0, %eax
	orl $(CR0_PG | CR0_PE), %eax
	movl %eax, %cr0
	.endm
