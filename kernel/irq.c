/*
 * irq.c: external interrupts. Vectors 32-255 get gates to irq_entry.S's
 * stubs; irq_dispatch() counts every interrupt per vector, runs the
 * handler registered for it and acknowledges it where it came from (the
 * local APIC, or the 8259 PIC for a legacy INTx line).
 *
 * The 8259 pair is remapped to vectors 0x20-0x2f (off the exception range)
 * and masked, except for a legacy PCI line a driver asks for; its output
 * reaches the CPU through LINT0 in ExtINT mode (virtual-wire mode, MP spec
 * 1.4 section 3.6.2.2), which apic.c programs. MSI-X, the LAPIC timer and
 * the GSIs routed through an I/O APIC (ioapic.c) are delivered by the local
 * APIC.
 *
 * Nothing here races with the interrupted code: interrupts are enabled
 * only inside cpu_sti_hlt_cli(), so a handler always interrupts that HLT.
 * With more than one CPU each counts in its own block; the vector table is
 * filled before the CPUs that take those vectors halt.
 */
#include <stdio.h>
#include "kernel/arch.h"
#include "kernel/kernel.h"

#define PIC1_CMD     0x20
#define PIC1_DATA    0x21
#define PIC2_CMD     0xa0
#define PIC2_DATA    0xa1
#define PIC_EOI      0x20
#define PIC_READ_ISR 0x0b
#define PIC_BASE     0x20 /* vectors 0x20-0x2f */
#define VEC_FIRST    0x30 /* allocated from here up to 0xfe */

enum irq_kind { IRQ_FREE, IRQ_APIC, IRQ_PIC };

struct irq {
	enum irq_kind kind;
	uint8_t line; /* IRQ_PIC */
	irq_fn fn;
	void *arg;
};

/* Counted per CPU (smp_cpu_index()): each CPU writes its own block only,
 * so two CPUs taking interrupts at once need no atomics or lock. */
struct irq_cpu {
	uint64_t count[256];
	uint64_t unexpected, spurious;
} __attribute__((aligned(64)));

extern const char irq_stubs[];
static struct irq irqs[256];
static struct irq_cpu per_cpu[SMP_MAX];
static bool ready;
static int next_vec = VEC_FIRST;
static uint16_t pic_mask = 0xffff;

void irq_dispatch(uint64_t vector);

static void io_wait(void)
{
	outb(0x80, 0); /* the classic post-code port: a short, harmless delay */
}

static void pic_write_mask(void)
{
	outb(PIC1_DATA, (uint8_t)pic_mask);
	outb(PIC2_DATA, (uint8_t)(pic_mask >> 8));
}

/* 8259A initialisation (ICW1-ICW4): edge/level comes from the ELCR the
 * firmware set for PCI lines; we only move the vectors and mask. */
static void pic_init(void)
{
	outb(PIC1_CMD, 0x11); /* ICW1: init, ICW4 follows, cascade */
	io_wait();
	outb(PIC2_CMD, 0x11);
	io_wait();
	outb(PIC1_DATA, PIC_BASE); /* ICW2: vector base */
	io_wait();
	outb(PIC2_DATA, PIC_BASE + 8);
	io_wait();
	outb(PIC1_DATA, 4); /* ICW3: slave on IRQ2 */
	io_wait();
	outb(PIC2_DATA, 2);
	io_wait();
	outb(PIC1_DATA, 1); /* ICW4: 8086 mode, normal EOI */
	io_wait();
	outb(PIC2_DATA, 1);
	io_wait();
	pic_mask = 0xffff;
	pic_write_mask();
}

static uint16_t pic_isr(void)
{
	outb(PIC1_CMD, PIC_READ_ISR);
	outb(PIC2_CMD, PIC_READ_ISR);
	return (uint16_t)(inb(PIC1_CMD) | inb(PIC2_CMD) << 8);
}

int irq_init(char *err, size_t errlen)
{
	if (ready)
		return 0;
	pic_init();
	if (apic_init(err, errlen))
		return -1;
	for (int v = 32; v < 256; v++)
		trap_set_gate((uint8_t)v, (uintptr_t)irq_stubs + 16u * (unsigned)(v - 32));
	ready = true;
	return 0;
}

int irq_alloc(irq_fn fn, void *arg)
{
	if (next_vec >= IRQ_SPURIOUS_VECTOR)
		return -1;
	int v = next_vec++;
	irqs[v] = (struct irq){.kind = IRQ_APIC, .fn = fn, .arg = arg};
	return v;
}

int irq_alloc_legacy(unsigned line, irq_fn fn, void *arg)
{
	if (line >= 16 || line == 2)
		return -1;
	int v = PIC_BASE + (int)line;
	irqs[v] = (struct irq){.kind = IRQ_PIC, .line = (uint8_t)line, .fn = fn, .arg = arg};
	pic_mask &= (uint16_t) ~(1u << line);
	if (line >= 8)
		pic_mask &= (uint16_t) ~(1u << 2); /* the cascade */
	pic_write_mask();
	return v;
}

int irq_alloc_gsi(uint32_t gsi, bool level, bool active_low, irq_fn fn, void *arg, char *err,
                  size_t errlen)
{
	int v = irq_alloc(fn, arg);

	if (v < 0) {
		snprintf(err, errlen, "no interrupt vector left for GSI %u", gsi);
		return -1;
	}
	if (ioapic_route(gsi, (uint8_t)v, level, active_low, err, errlen)) {
		irqs[v].kind = IRQ_FREE;
		return -1;
	}
	return v;
}

void irq_dispatch(uint64_t vector)
{
	struct irq *q = &irqs[vector & 0xff];
	struct irq_cpu *c = &per_cpu[smp_cpu_index()];

	if (vector == IRQ_SPURIOUS_VECTOR) {
		c->spurious++; /* LAPIC spurious: no EOI (Intel SDM 11.9) */
		return;
	}
	if (vector >= PIC_BASE && vector < PIC_BASE + 16 && q->kind != IRQ_PIC) {
		/* A masked PIC line can still show up as IRQ7/15 spurious
		 * (8259A datasheet): acknowledge only what the PIC says is
		 * in service. */
		uint16_t in = pic_isr();
		unsigned line = (unsigned)(vector - PIC_BASE);
		if (in & (1u << line)) {
			c->unexpected++;
			if (line >= 8)
				outb(PIC2_CMD, PIC_EOI);
			outb(PIC1_CMD, PIC_EOI);
		} else {
			c->spurious++;
		}
		return;
	}
	c->count[vector & 0xff]++;
	if (q->kind == IRQ_FREE)
		c->unexpected++;
	else if (q->fn)
		q->fn(q->arg); /* level-triggered INTx: the device drops the line here */
	if (q->kind == IRQ_PIC) {
		if (q->line >= 8)
			outb(PIC2_CMD, PIC_EOI);
		outb(PIC1_CMD, PIC_EOI);
	} else {
		apic_eoi();
	}
}

uint64_t irq_count(int vector)
{
	return vector >= 0 && vector < 256 ? per_cpu[smp_cpu_index()].count[vector] : 0;
}

uint64_t irq_unexpected(unsigned cpu)
{
	return cpu < SMP_MAX ? per_cpu[cpu].unexpected : 0;
}

uint64_t irq_spurious(unsigned cpu)
{
	return cpu < SMP_MAX ? per_cpu[cpu].spurious : 0;
}
