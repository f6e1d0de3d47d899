/*
 * selftest.c: kernel self-tests selected with test=..., driven by tests/.
 *   test=fault  touch an unmapped address: the exception report must appear
 *   test=clock  check the clock is monotonic, then mark two instants 2 s
 *               apart by the TSC so the host can compare with its wall clock
 */
#include <stdio.h>
#include "kernel/arch.h"
#include "kernel/kernel.h"

enum { TEST_NONE, TEST_FAULT, TEST_CLOCK };
static const char *const tests[] = {"none", "fault", "clock", NULL};
static int which;

void selftest_configure(void)
{
	which = cmdline_choice("test", tests, TEST_NONE);
}

static void test_fault(void)
{
	printf("selftest fault: writing to unmapped address 0x10000000000\n");
	mmio_write32(0x10000000000ull, 1); /* 1 TiB: never mapped */
	printf("selftest fault: no exception\n");
	kernel_exit(EXIT_FAIL);
}

static void test_clock(void)
{
	uint64_t prev = clock_ns(), backwards = 0;
	const uint64_t samples = 1000000;
	for (uint64_t i = 0; i < samples; i++) {
		uint64_t now = clock_ns();
		if (now < prev)
			backwards++;
		prev = now;
	}
	printf("selftest clock samples=%lu backwards=%lu\n", samples, backwards);
	const uint64_t span_ns = 2000000000ull;
	uint64_t t0 = clock_ns();
	printf("selftest clock mark=0 ns=%lu\n", t0);
	while (clock_ns() - t0 < span_ns)
		cpu_relax();
	printf("selftest clock mark=1 ns=%lu\n", clock_ns());
	if (backwards)
		kernel_error("selftest", "clock went backwards %lu times", backwards);
}

bool selftest_run(void)
{
	switch (which) {
	case TEST_FAULT:
		test_fault();
		return true;
	case TEST_CLOCK:
		test_clock();
		return true;
	default:
		return false;
	}
}
