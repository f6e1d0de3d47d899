/*
 * clock.c: a monotonic nanosecond clock from the TSC. The TSC frequency
 * comes from CPUID leaf 0x15 (TSC/crystal ratio and crystal frequency) or
 * 0x16 (base frequency) when the CPU reports them, otherwise it is measured
 * against PIT channel 2 (1.193182 MHz), which every PC-compatible machine
 * and QEMU model has. We assume an invariant TSC, as KVM and TCG provide.
 */
#include <stdio.h>
#include "kernel/arch.h"
#include "kernel/kernel.h"

#define PIT_HZ         1193182u
#define PIT_CH2        0x42
#define PIT_CMD        0x43
#define PIT_GATE       0x61 /* bit0 gate ch2, bit1 speaker, bit5 OUT2 */
#define PIT_CAL_MS     10u
#define PIT_CAL_ROUNDS 3

static uint64_t tsc_khz;
static uint64_t tsc_base;
static uint64_t ns_mult; /* ns = (delta * ns_mult) >> 32 */
static const char *method = "none";

static uint64_t khz_from_cpuid(void)
{
	uint32_t r[4];
	cpuid(0, 0, r);
	uint32_t max = r[0];
	if (max >= 0x15) {
		cpuid(0x15, 0, r); /* eax = denominator, ebx = numerator, ecx = crystal Hz */
		if (r[0] && r[1] && r[2]) {
			method = "cpuid15";
			return (uint64_t)r[2] * r[1] / r[0] / 1000;
		}
	}
	if (max >= 0x16) {
		cpuid(0x16, 0, r); /* eax = base MHz */
		if (r[0]) {
			method = "cpuid16";
			return (uint64_t)(r[0] & 0xffff) * 1000;
		}
	}
	return 0;
}

/* One PIT one-shot of PIT_CAL_MS: count TSC ticks until OUT2 goes high. */
static uint64_t pit_round(void)
{
	uint32_t count = PIT_HZ / 1000 * PIT_CAL_MS;
	outb(PIT_GATE, (inb(PIT_GATE) & ~0x02) | 0x01);
	outb(PIT_CMD, 0xb0); /* channel 2, lo/hi byte, mode 0, binary */
	outb(PIT_CH2, (uint8_t)count);
	outb(PIT_CH2, (uint8_t)(count >> 8));
	uint64_t t0 = rdtsc();
	/* Bounded: 50 ms is far below 200M port reads even under emulation. */
	for (uint32_t i = 0; i < 200000000u; i++) {
		if (inb(PIT_GATE) & 0x20)
			return rdtsc() - t0;
	}
	return 0;
}

static uint64_t khz_from_pit(void)
{
	uint64_t best = 0;
	for (int i = 0; i < PIT_CAL_ROUNDS; i++) {
		uint64_t t = pit_round();
		if (!t)
			return 0;
		/* The shortest round had the least interference (a preempted
		 * vCPU only ever makes a round look longer). */
		if (!best || t < best)
			best = t;
	}
	method = "pit";
	return best / PIT_CAL_MS;
}

void clock_init(void)
{
	tsc_khz = khz_from_cpuid();
	if (!tsc_khz)
		tsc_khz = khz_from_pit();
	if (!tsc_khz)
		panic("clock: TSC calibration failed (no CPUID 0x15/0x16, PIT OUT2 never rose)");
	ns_mult = ((uint64_t)1000000 << 32) / tsc_khz;
	tsc_base = rdtsc();
}

uint64_t clock_tsc_to_ns(uint64_t delta)
{
	return (uint64_t)(((unsigned __int128)delta * ns_mult) >> 32);
}

uint64_t clock_ns(void)
{
	return clock_tsc_to_ns(rdtsc() - tsc_base);
}

uint64_t clock_since_entry_ns(uint64_t clock)
{
	uint64_t entry = kernel_boot_tsc();
	return clock + (tsc_base > entry ? clock_tsc_to_ns(tsc_base - entry) : 0);
}

uint64_t clock_tsc_khz(void)
{
	return tsc_khz;
}

const char *clock_method(void)
{
	return method;
}

void clock_delay_us(uint64_t us)
{
	uint64_t end = clock_ns() + us * 1000;
	while (clock_ns() < end)
		cpu_relax();
}
