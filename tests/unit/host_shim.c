/*
 * host_shim.c: kernel.h services for the host unit tests (see host_shim.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernel/kernel.h"
#include "kernel/prof.h"
#include "tests/unit/host_shim.h"

#define SHIM_ARENA_SIZE (64u << 20) /* a copy build with TSO keeps 64 KB per TX slot */

static uint8_t shim_arena[SHIM_ARENA_SIZE] __attribute__((aligned(4096)));
static size_t shim_used;
uint64_t shim_now_ns;
uint64_t shim_clock_step;

void *shim_alloc(size_t size, size_t align)
{
	size_t off = (shim_used + align - 1) & ~(align - 1);

	if (off + size > SHIM_ARENA_SIZE) {
		fprintf(stderr, "shim: arena exhausted (%zu + %zu)\n", off, size);
		abort();
	}
	shim_used = off + size;
	memset(shim_arena + off, 0, size);
	return shim_arena + off;
}

void shim_reset(void)
{
	shim_used = 0;
	shim_now_ns = 0;
	shim_clock_step = 0;
}

void *pmm_alloc(size_t size, size_t align)
{
	return shim_alloc(size, align);
}

uint64_t clock_ns(void)
{
	shim_now_ns += shim_clock_step;
	return shim_now_ns;
}

/* kernel/prof.c is not part of the host build: PROFILE is off there. */
void prof_push(enum prof_stage s)
{
	(void)s;
}

void prof_pop(void)
{
}
