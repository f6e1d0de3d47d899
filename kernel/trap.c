/*
 * trap.c: CPU exceptions. Every exception is fatal in this appliance: we
 * print one machine-readable PANIC line with vector, error code, RIP and CR2,
 * a frame-pointer stack trace (the kernel is built with frame pointers), and
 * exit non-zero.
 */
#include <stdio.h>
#include "kernel/arch.h"
#include "kernel/kernel.h"

struct trap_frame {
	uint64_t r15, r14, r13, r12, r11, r10, r9, r8;
	uint64_t rbp, rdi, rsi, rdx, rcx, rbx, rax;
	uint64_t vector, error;
	uint64_t rip, cs, rflags, rsp, ss; /* pushed by the CPU */
};

struct idt_entry {
	uint16_t off_lo;
	uint16_t sel;
	uint8_t ist;
	uint8_t type; /* 0x8e: present, DPL 0, 64-bit interrupt gate */
	uint16_t off_mid;
	uint32_t off_hi;
	uint32_t zero;
} __attribute__((packed));

extern const uint64_t isr_table[32];
/* All 256 gates: 0-31 exceptions (here), 32-255 external interrupts
 * (irq.c fills them with trap_set_gate() when an idle policy wants them;
 * until then they are not present, and nothing can raise them: interrupts
 * are only ever enabled inside cpu_sti_hlt_cli()). */
static struct idt_entry idt[256] __attribute__((aligned(16)));

static const char *const names[32] = {
    "#DE", "#DB", "NMI", "#BP", "#OF", "#BR", "#UD", "#NM", "#DF", "CSO", "#TS",
    "#NP", "#SS", "#GP", "#PF", "RSV", "#MF", "#AC", "#MC", "#XM", "#VE", "#CP",
};

void trap_handler(struct trap_frame *f);

uint64_t trap_fixup_rip, trap_fixup_to;

void trap_set_gate(uint8_t vector, uint64_t handler)
{
	idt[vector] = (struct idt_entry){
	    .off_lo = (uint16_t)handler,
	    .sel = 0x08,
	    .type = 0x8e,
	    .off_mid = (uint16_t)(handler >> 16),
	    .off_hi = (uint32_t)(handler >> 32),
	};
}

void trap_load(void)
{
	struct __attribute__((packed)) {
		uint16_t limit;
		uint64_t base;
	} d = {sizeof(idt) - 1, (uintptr_t)idt};
	lidt(&d);
}

/* Before pvm_init(), which runs in KVM's emulator at about 1 us an
 * instruction: only the gates an exception there can reach. rdmsr_safe()'s
 * #GP; any other vector finds its gate not present and raises #NP (SDM
 * vol. 3A 6.12.1.1), whose PANIC line names it in the error code; #DF if
 * even that fails. trap_init() fills the rest natively. */
void trap_init_early(void)
{
	static const uint8_t early[] = {8, 11, 13};
	for (unsigned i = 0; i < sizeof(early); i++)
		trap_set_gate(early[i], isr_table[early[i]]);
	trap_load();
}

/* The IDT is read at each delivery: gates written after lidt take effect. */
void trap_init(void)
{
	for (int i = 0; i < 32; i++)
		trap_set_gate((uint8_t)i, isr_table[i]);
}

/* A frame pointer is plausible if it is aligned and inside identity-mapped
 * RAM we know of; a corrupt chain must not fault inside the fault report. */
static bool frame_ok(uint64_t fp)
{
	return fp >= 0x1000 && (fp & 7) == 0 && fp < (1ull << 40);
}

void trap_handler(struct trap_frame *f)
{
	static int nested;
	if (f->vector == 13 && trap_fixup_rip && f->rip == trap_fixup_rip) {
		f->rip = trap_fixup_to;
		trap_fixup_rip = 0;
		return;
	}
	if (nested++) {
		printf("PANIC: nested exception vector=%lu rip=0x%lx\n", f->vector, f->rip);
		kernel_exit(EXIT_PANIC);
	}
	const char *name = f->vector < 22 && names[f->vector] ? names[f->vector] : "?";
	printf("PANIC: exception vector=%lu (%s) error=0x%lx rip=0x%lx cr2=0x%lx rsp=0x%lx\n",
	       f->vector, name, f->error, f->rip, read_cr2(), f->rsp);
	printf("PANIC: trace 0x%lx", f->rip);
	uint64_t fp = f->rbp;
	for (int depth = 0; depth < 16 && frame_ok(fp); depth++) {
		const uint64_t *frame = (const uint64_t *)fp;
		if (!frame[1])
			break;
		printf(" 0x%lx", frame[1]);
		if (frame[0] <= fp)
			break; /* stacks grow down: callers' frames are higher */
		fp = frame[0];
	}
	printf("\n");
	kernel_exit(EXIT_PANIC);
}
