/*
 * sys_arch.c: what lwIP needs from the platform in NO_SYS mode: a
 * millisecond clock, random numbers (TCP ISNs, ports, DHCP xids) and an
 * assertion handler.
 */
#include <stdio.h>
#include "kernel/arch.h"
#include "kernel/kernel.h"
#include "lwip/sys.h"

u32_t sys_now(void)
{
	return (u32_t)(clock_ns() / 1000000);
}

static bool rdrand_checked, has_rdrand;
static uint64_t xs_state;

/* TCP initial sequence numbers and ephemeral ports come from here: RDRAND
 * when the CPU has it (CPUID.1:ECX[30]); otherwise xorshift64 seeded from
 * the TSC at first use, which differs per boot. */
unsigned int lwip_port_rand(void)
{
	if (!rdrand_checked) {
		uint32_t r[4];
		cpuid(1, 0, r);
		has_rdrand = r[2] & (1u << 30);
		xs_state = rdtsc() | 1;
		rdrand_checked = true;
	}
	uint64_t v;
	for (int tries = 0; has_rdrand && tries < 10; tries++)
		if (cpu_rdrand64(&v))
			return (unsigned int)v;
	xs_state ^= xs_state << 13;
	xs_state ^= xs_state >> 7;
	xs_state ^= xs_state << 17;
	return (unsigned int)xs_state;
}

void lwip_port_assert(const char *msg, int line, const char *file)
{
	panic("lwip assertion \"%s\" failed at %s:%d", msg, file, line);
}
