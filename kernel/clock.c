/*
 * clock.c: a monotonic nanosecond clock from the TSC. The TSC frequency
 * comes from what the platform states (khz_from_platform()), otherwise it
 * is measured
 * against the i8254 PIT (1.193182 MHz), which every PC-compatible machine
 * and QEMU model (pc, q35, microvm) has. We assume an invariant TSC, as KVM
 * and TCG provide. (QEMU 7.2 under TCG reports neither 0x15/0x16 with its
 * default CPU nor a hypervisor TSC leaf 0x40000010: its leaf 0x40000000 is
 * "TCGTCGTCGTCG" with nothing behind it, so under TCG it is always the PIT.)
 *
 * PIT calibration reads channel 0's counter through the latch command, with
 * the TSC read just before and just after the one OUT that latches it: the
 * count belongs to some instant inside that bracket. Two such samples
 * cal_ms apart give the rate; the error bound is both half-brackets plus
 * one PIT tick (each latched count is truncated to a whole tick), over the
 * window. The window grows past cal_ms until the bound is at most
 * TSC_ERR_GOAL_PPM (a preempted vCPU only widens a bracket, which the
 * bound then shows), for at most PIT_GIVE_UP_MS; clock.cal_ms=N (1-40)
 * sets the least window. Channel 0, not channel 2: its
 * gate is always on, while channel 2's is port 0x61, which microvm lacks.
 * No interrupt is taken here (IF is clear; the PIC masks IRQ0).
 */
#include <stdio.h>
#include <string.h>
#include "kernel/arch.h"
#include "kernel/kernel.h"

#define PIT_HZ           1193182u
#define PIT_CH0          0x40
#define PIT_CMD          0x43
#define PIT_CMD_LATCH0   0x00 /* counter latch, channel 0 */
#define PIT_CMD_MODE2    0x34 /* channel 0, lo/hi byte, mode 2 (rate generator), binary */
#define PIT_CAL_MS_DEF   2u
#define PIT_CAL_MS_MAX   40u  /* largest clock.cal_ms */
#define PIT_GIVE_UP_MS   200u /* accept any bound after this long */
#define TSC_ERR_GOAL_PPM 1000u
/* Until the window holds PIT_EST_TICKS (1 ms) there is no rate to tell how
 * many whole counter periods a long step between two samples hid; a step
 * longer than PIT_STEP_MAX_TSC TSC ticks (0.4 ms at 2.6 GHz, less than one
 * 54.9 ms counter period for any TSC above 18 MHz) then restarts the
 * window. After that the rate so far counts the hidden periods, where it
 * can tell them (a stall inside a sample's bracket can hide its length:
 * then the window restarts too; found as a 60 % wrong rate over a 40 ms
 * window on a host with load 10). */
#define PIT_EST_TICKS    1193u
#define PIT_PERIOD       65536u /* reload 0: the counter's whole period */
#define PIT_STEP_MAX_TSC 1000000u
#define PIT_SAMPLES_MAX  2000000u /* no PIT: give up (seconds under TCG) */

static uint64_t tsc_khz;
static uint64_t tsc_base;
static uint64_t ns_mult; /* ns = (delta * ns_mult) >> 32 */
static const char *method = "none";
static uint64_t err_ppm; /* bound on the calibration's error; 0 for CPUID */
static uint64_t cal_us;  /* the PIT window actually used */

/* Where the platform states the TSC rate: CPUID leaf 0x15 (TSC/crystal
 * ratio times the crystal), the hypervisor's timing leaf (base + 0x10,
 * EAX = TSC kHz: KVM and VMware define it; QEMU fills it under KVM with
 * invtsc or tsc-frequency=), or this machine kind's kvm_pvm MSR (pvm.c).
 * Leaf 0x16 is the processor's base frequency, which need not be the
 * TSC's: it is not used (the PIT measures instead, with a stated bound). */
static uint64_t khz_from_platform(void)
{
	uint32_t r[4];
	cpuid(0, 0, r);
	if (r[0] >= 0x15) {
		cpuid(0x15, 0, r); /* eax = denominator, ebx = numerator, ecx = crystal Hz */
		if (r[0] && r[1] && r[2]) {
			method = "cpuid15";
			return (uint64_t)r[2] * r[1] / r[0] / 1000;
		}
	}
	uint32_t hv = cpu_hypervisor_leaf();
	if (hv && !strcmp(cpu_accel(), "kvm")) {
		cpuid(hv, 0, r);
		if (r[0] >= hv + 0x10) {
			cpuid(hv + 0x10, 0, r);
			if (r[0]) {
				method = "hvleaf";
				err_ppm = 1; /* whole kHz of a GHz rate */
				return r[0];
			}
		}
	}
	uint64_t khz = pvm_tsc_khz();
	if (khz) {
		method = "pvm";
		err_ppm = 1;
		return khz;
	}
	return 0;
}

struct pit_sample {
	uint16_t count; /* channel 0 counts down */
	uint64_t tsc;   /* middle of the bracket around the latch */
	uint64_t half;  /* half the bracket, rounded up */
};

static struct pit_sample pit_sample(void)
{
	struct pit_sample s;
	uint64_t t0 = rdtsc_ordered();
	outb(PIT_CMD, PIT_CMD_LATCH0);
	uint64_t t1 = rdtsc_ordered();
	uint8_t lo = inb(PIT_CH0);
	uint8_t hi = inb(PIT_CH0);
	s.count = (uint16_t)(lo | hi << 8);
	s.tsc = t0 + (t1 - t0) / 2;
	s.half = (t1 - t0 + 1) / 2;
	return s;
}

/* Bound in ppm for a window from a to b of ticks PIT ticks. */
static uint64_t pit_err_ppm(const struct pit_sample *a, const struct pit_sample *b, uint64_t ticks)
{
	uint64_t tsc = b->tsc - a->tsc;
	uint64_t err = a->half + b->half + tsc / ticks;
	return err * 1000000u / tsc;
}

static uint64_t khz_from_pit(uint32_t min_ms)
{
	const uint64_t min_ticks = PIT_HZ / 1000 * min_ms;
	const uint64_t max_ticks = PIT_HZ / 1000 * PIT_GIVE_UP_MS;
	outb(PIT_CMD, PIT_CMD_MODE2);
	outb(PIT_CH0, 0); /* reload 0 = 65536 */
	outb(PIT_CH0, 0);
	(void)pit_sample(); /* warm-up: the first one also pays for translating this code (TCG) */
	struct pit_sample a = pit_sample(), prev = a;
	uint64_t ticks = 0; /* from a to prev */
	for (uint32_t i = 0; i < PIT_SAMPLES_MAX; i++) {
		struct pit_sample b = pit_sample();
		uint64_t step = (uint16_t)(prev.count - b.count);
		uint64_t dt = b.tsc - prev.tsc;
		if (ticks < PIT_EST_TICKS) {
			/* No rate estimate yet: a stall could hide whole counter
			 * periods, so start again; and while the count has not
			 * moved, or when the start's bracket was much wider
			 * (preempted inside it), a narrower bracket is a better
			 * start. */
			if (dt > PIT_STEP_MAX_TSC || (ticks == 0 && step == 0 && b.half < a.half) ||
			    b.half < a.half / 2) {
				a = prev = b;
				ticks = 0;
				continue;
			}
		} else {
			/* Whole periods the 16-bit count hid during a stall (a
			 * preempted vCPU), from the rate so far: only when that
			 * is unambiguous, i.e. the step's uncertainty (both
			 * brackets, where a stall may also sit, and the rate's
			 * own error) is below a quarter period (rounding needs
			 * less than half); else start again. */
			uint64_t span = prev.tsc - a.tsc;
			uint64_t expect = dt * ticks / span;
			uint64_t unc = (prev.half + b.half) * ticks / span +
			               expect * pit_err_ppm(&a, &prev, ticks) / 1000000u + 2;
			if (unc >= PIT_PERIOD / 4) {
				a = prev = b;
				ticks = 0;
				continue;
			}
			if (expect > step)
				step += (expect - step + PIT_PERIOD / 2) / PIT_PERIOD * PIT_PERIOD;
		}
		ticks += step;
		prev = b;
		if (ticks < min_ticks)
			continue;
		uint64_t ppm = pit_err_ppm(&a, &b, ticks);
		if (ppm <= TSC_ERR_GOAL_PPM || ticks >= max_ticks) {
			method = "pit";
			err_ppm = ppm;
			cal_us = ticks * 1000000u / PIT_HZ;
			return (b.tsc - a.tsc) * PIT_HZ / ticks / 1000;
		}
	}
	return 0;
}

void clock_init(void)
{
	uint32_t cal_ms = (uint32_t)cmdline_u64("clock.cal_ms", PIT_CAL_MS_DEF, 1, PIT_CAL_MS_MAX);
	tsc_khz = khz_from_platform();
	if (!tsc_khz)
		tsc_khz = khz_from_pit(cal_ms);
	if (!tsc_khz)
		panic("clock: TSC calibration failed (no CPUID 0x15 or hypervisor TSC rate, the "
		      "PIT's channel 0 "
		      "counter never moved)");
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

uint64_t clock_err_ppm(void)
{
	return err_ppm;
}

uint64_t clock_cal_us(void)
{
	return cal_us;
}

void clock_delay_us(uint64_t us)
{
	uint64_t end = clock_ns() + us * 1000;
	while (clock_ns() < end)
		cpu_relax();
}
