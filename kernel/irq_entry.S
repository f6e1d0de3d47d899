/*
 * irq_entry.S: entry stubs for external interrupts, vectors 32-255. Each
 * stub is 16 bytes at irq_stubs + 16 * (vector - 32): it pushes its vector
 * and joins irq_common, which saves the caller-saved registers (the C
 * handler preserves the rest), calls irq_dispatch(vector) on a 16-byte
 * aligned stack and returns with iretq. Interrupts are only ever enabled
 * in cpu_sti_hlt_cli(), so the interrupted code is always that HLT.
 */
	.text
	.balign 16
	.globl irq_stubs
irq_stubs:
	.set vec, 32
	.rept 224
	.balign 16
	pushq $vec
	jmp irq_common
	.set vec, vec + 1
	.endr

irq_common:
	pushq %rax
	pushq %rcx
	pushq %rdx
	pushq %rsi
	pushq %rdi
	pushq %r8
	pushq %r9
	pushq %r10
	pushq %r11
	pushq %rbp
	movq %rsp, %rbp
	movq 80(%rsp), %rdi     /* the vector the stub pushed */
	andq $-16, %rsp         /* SysV alignment for the C handler */
	cld
	call irq_dispatch
	movq %rbp, %rsp
	popq %rbp
	popq %r11
	popq %r10
	popq %r9
	popq %r8
	popq %rdi
	popq %rsi
	popq %rdx
	popq %rcx
	popq %rax
	addq $8, %rsp           /* the vector */
	iretq

	.section .note.GNU-stack, "", @progbits
