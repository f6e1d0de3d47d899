/*
 * test_trap.c: kernel/trap.c's IDT read back on the host
 * (tests/unit/idt_shim.h replaces kernel/arch.h). Before pvm_init(), which
 * runs in KVM's emulator under this machine kind's kvm_pvm, only #DF, #NP
 * and #GP may be present (docs/kvm.md, "Boot to ready"): any other vector
 * raises #NP, which names it. After trap_init() all 32 exception gates
 * point at their stubs, and no interrupt gate is present until irq.c
 * asks for one.
 */
#include <stdio.h>
#include <stdlib.h>
#include "kernel/kernel.h"
#include "tests/unit/check.h"

int check_failed, check_total;
uint16_t shim_idt_limit;
uintptr_t shim_idt_base;
unsigned shim_lidts;
/* The stubs' addresses (isr.S on the target): distinct, with every
 * offset field of a gate in use. */
const uint64_t isr_table[32] = {
#define STUB(i) [i] = 0x0000123456780000ull + (i)*0x10101ull
    STUB(0),  STUB(1),  STUB(2),  STUB(3),  STUB(4),  STUB(5),  STUB(6),  STUB(7),
    STUB(8),  STUB(9),  STUB(10), STUB(11), STUB(12), STUB(13), STUB(14), STUB(15),
    STUB(16), STUB(17), STUB(18), STUB(19), STUB(20), STUB(21), STUB(22), STUB(23),
    STUB(24), STUB(25), STUB(26), STUB(27), STUB(28), STUB(29), STUB(30), STUB(31),
};

void kernel_exit(int status)
{
	printf("unexpected kernel_exit(%d)\n", status);
	exit(2);
}

struct gate {
	uint16_t off_lo, sel;
	uint8_t ist, type;
	uint16_t off_mid;
	uint32_t off_hi, zero;
} __attribute__((packed));

static const struct gate *idt(void)
{
	return (const struct gate *)shim_idt_base;
}

static uint64_t gate_handler(const struct gate *g)
{
	return g->off_lo | (uint64_t)g->off_mid << 16 | (uint64_t)g->off_hi << 32;
}

/* Present gates, as a bit mask over vectors 0-31; the rest must be empty. */
static uint32_t present_exceptions(unsigned *present_above)
{
	uint32_t mask = 0;

	*present_above = 0;
	for (unsigned v = 0; v < 256; v++) {
		const struct gate *g = &idt()[v];
		if (!(g->type & 0x80))
			continue;
		if (v >= 32) {
			(*present_above)++;
			continue;
		}
		mask |= 1u << v;
		CHECK_EQ(0x8e, g->type, "a present gate is a 64-bit interrupt gate, DPL 0");
		CHECK_EQ(0x08, g->sel, "a present gate's selector is the kernel code segment");
		CHECK_EQ(isr_table[v], gate_handler(g),
		         "a present gate points at its vector's stub");
	}
	return mask;
}

static void test_early_gates_only(void)
{
	unsigned above;

	trap_init_early();
	CHECK_EQ(1, shim_lidts, "trap_init_early() loads the IDT once");
	CHECK_EQ(256 * 16 - 1, shim_idt_limit, "the IDT's limit covers 256 gates");
	CHECK_EQ((1u << 8) | (1u << 11) | (1u << 13), present_exceptions(&above),
	         "before pvm_init only #DF (8), #NP (11) and #GP (13) present");
	CHECK_EQ(0, above, "no interrupt gate before pvm_init");
}

static void test_all_exceptions_after(void)
{
	unsigned above;

	trap_init();
	CHECK_EQ(1, shim_lidts, "trap_init() writes gates into the loaded IDT, no second lidt");
	CHECK_EQ(0xffffffffu, present_exceptions(&above),
	         "after trap_init all 32 exception gates present");
	CHECK_EQ(0, above, "still no interrupt gate (irq.c adds them)");
}

int main(void)
{
	printf("test_trap\n");
	RUN(test_early_gates_only);
	RUN(test_all_exceptions_after);
	return check_done("test_trap");
}
