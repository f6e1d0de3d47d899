/*
 * heap.c: sbrk() for picolibc's malloc, over one region taken from the
 * physical allocator at start-up. lwIP's pools and the apps' buffers come
 * from here; running out is an error, never silent.
 */
#include <errno.h>
#include <stdint.h>
#include "kernel/kernel.h"

static char *heap_base, *heap_brk, *heap_end;

void heap_init(size_t bytes)
{
	heap_base = heap_brk = pmm_alloc_uninit(bytes, 4096);
	heap_end = heap_base + bytes;
}

size_t heap_size(void)
{
	return (size_t)(heap_end - heap_base);
}

void *sbrk(ptrdiff_t incr);
void *sbrk(ptrdiff_t incr)
{
	if (!heap_base || incr > heap_end - heap_brk || incr < heap_base - heap_brk) {
		errno = ENOMEM;
		return (void *)-1;
	}
	char *old = heap_brk;
	heap_brk += incr;
	return old;
}
