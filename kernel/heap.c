/*
 * heap.c: sbrk() for picolibc's malloc, over one region taken from the
 * physical allocator at start-up. lwIP's pools and the apps' buffers come
 * from here; running out is an error, never silent.
 */
#include <errno.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include "kernel/arch.h"
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

/*
 * picolibc is built single-threaded (host/deps.sh): its malloc takes no
 * lock. With more than one CPU running (the copies of the TCP/IP side for
 * mq=N, net/inst.h), two CPUs may allocate at once, so the link wraps the
 * allocator's entry points (Makefile LDLIBC: ld --wrap) with this lock.
 * It is recursive (calloc and realloc may call malloc inside) and costs
 * nothing with one CPU: smp_cpus() is 1 and no lock is taken.
 */
static volatile uint32_t heap_owner; /* LAPIC ID + 1; 0: free */
static unsigned heap_depth;

static bool heap_lock(void)
{
	if (smp_cpus() <= 1)
		return false;
	uint32_t me = apic_id() + 1;
	if (heap_owner != me)
		while (!__sync_bool_compare_and_swap(&heap_owner, 0, me))
			cpu_relax();
	heap_depth++;
	return true;
}

static void heap_unlock(bool locked)
{
	if (locked && !--heap_depth)
		/* The allocator's stores are done before the lock is free. */
		__atomic_store_n(&heap_owner, 0, __ATOMIC_RELEASE);
}

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
void *__real_memalign(size_t align, size_t n);
struct mallinfo __real_mallinfo(void);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);
void *__wrap_memalign(size_t align, size_t n);
struct mallinfo __wrap_mallinfo(void);

void *__wrap_malloc(size_t n)
{
	bool l = heap_lock();
	void *p = __real_malloc(n);
	heap_unlock(l);
	return p;
}

void *__wrap_calloc(size_t n, size_t size)
{
	bool l = heap_lock();
	void *p = __real_calloc(n, size);
	heap_unlock(l);
	return p;
}

void *__wrap_realloc(void *old, size_t n)
{
	bool l = heap_lock();
	void *p = __real_realloc(old, n);
	heap_unlock(l);
	return p;
}

void __wrap_free(void *p)
{
	bool l = heap_lock();
	__real_free(p);
	heap_unlock(l);
}

void *__wrap_memalign(size_t align, size_t n)
{
	bool l = heap_lock();
	void *p = __real_memalign(align, n);
	heap_unlock(l);
	return p;
}

struct mallinfo __wrap_mallinfo(void)
{
	bool l = heap_lock();
	struct mallinfo mi = __real_mallinfo();
	heap_unlock(l);
	return mi;
}
