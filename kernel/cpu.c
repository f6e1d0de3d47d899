/*
 * cpu.c: the CPU state the kernel relies on, whoever booted it: our own GDT
 * (UEFI's selectors are not ours to keep), SSE enabled for picolibc's string
 * routines, and identification (model string, which accelerator runs us).
 */
#include <string.h>
#include "kernel/arch.h"
#include "kernel/kernel.h"

#define CR0_MP         (1u << 1)
#define CR0_EM         (1u << 2)
#define CR4_OSFXSR     (1u << 9)
#define CR4_OSXMMEXCPT (1u << 10)

static const uint64_t gdt[] __attribute__((aligned(16))) = {
    0, 0x00af9a000000ffff, /* 0x08: 64-bit code, DPL 0 */
    0x00cf92000000ffff,    /* 0x10: data */
};

static char model[49];
static const char *accel = "unknown";
static uint32_t hv_base; /* the leaf holding the signature, 0 if none */

static void gdt_load(void)
{
	struct __attribute__((packed)) {
		uint16_t limit;
		uint64_t base;
	} d = {sizeof(gdt) - 1, (uintptr_t)gdt};
	/* Reload CS with a far return; the data segments directly. */
	__asm__ volatile("lgdt %0\n\t"
	                 "pushq $0x08\n\t"
	                 "leaq 1f(%%rip), %%rax\n\t"
	                 "pushq %%rax\n\t"
	                 "lretq\n"
	                 "1:\n\t"
	                 "movl $0x10, %%eax\n\t"
	                 "movl %%eax, %%ds\n\t"
	                 "movl %%eax, %%es\n\t"
	                 "movl %%eax, %%ss\n\t"
	                 "xorl %%eax, %%eax\n\t"
	                 "movl %%eax, %%fs\n\t"
	                 "movl %%eax, %%gs\n\t"
	                 :
	                 : "m"(d)
	                 : "rax", "memory");
}

/* The hypervisor's signature: leaves 0x40000000-0x4000ff00 in steps of
 * 0x100 (KVM with Hyper-V enlightenments answers "Microsoft Hv" at
 * 0x40000000 and moves its own to 0x40000100). Scanned whatever
 * CPUID.1:ECX[31] says: `-cpu qemu64,-hypervisor` clears the bit under TCG
 * but still answers "TCGTCGTCGTCG". A leaf whose EAX (highest leaf of that
 * range) is below it holds no signature; bare metal answers garbage there,
 * which matches none. */
static const char *scan_hypervisor(void)
{
	for (uint32_t base = 0x40000000; base <= 0x4000ff00; base += 0x100) {
		uint32_t r[4];
		char sig[13];
		cpuid(base, 0, r);
		if (r[0] < base || r[0] > base + 0xff)
			continue;
		memcpy(sig, &r[1], 4);
		memcpy(sig + 4, &r[2], 4);
		memcpy(sig + 8, &r[3], 4);
		sig[12] = 0;
		if (!memcmp(sig, "KVMKVMKVM", 9)) {
			hv_base = base;
			return "kvm";
		}
		if (!memcmp(sig, "TCGTCGTCGTCG", 12)) {
			hv_base = base;
			return "tcg";
		}
	}
	return NULL;
}

static void identify(void)
{
	uint32_t r[4];
	cpuid(0x80000000, 0, r);
	if (r[0] >= 0x80000004) {
		for (uint32_t i = 0; i < 3; i++)
			cpuid(0x80000002 + i, 0, (uint32_t *)(model + 16 * i));
		model[48] = 0;
	}
	const char *hv = scan_hypervisor();
	if (hv) {
		accel = hv;
		return;
	}
	/* CPUID.1:ECX[31] = running under a hypervisor we cannot name. */
	cpuid(1, 0, r);
	accel = r[2] & (1u << 31) ? "unknown" : "hw";
}

void cpu_ap_init(void)
{
	gdt_load();
	write_cr0((read_cr0() & ~(uint64_t)CR0_EM) | CR0_MP);
	write_cr4(read_cr4() | CR4_OSFXSR | CR4_OSXMMEXCPT);
}

void cpu_init(void)
{
	cpu_ap_init();
	identify();
}

/* accel=kvm|tcg|hw|unknown overrides what identify() found (the driver's
 * fence workaround follows it, see vnet.c), for a hypervisor that hides. */
void cpu_configure(void)
{
	static const char *const choices[] = {"auto", "kvm", "tcg", "hw", "unknown", NULL};
	int c = cmdline_choice("accel", choices, 0);
	if (c > 0)
		accel = choices[c];
}

uint32_t cpu_hypervisor_leaf(void)
{
	return hv_base;
}

const char *cpu_accel(void)
{
	return accel;
}

const char *cpu_model(void)
{
	/* Leading blanks are common in brand strings. */
	const char *m = model;
	while (*m == ' ')
		m++;
	return *m ? m : "unknown";
}
