/*
 * pmm.c: physical memory. A bump allocator over the RAM regions of the boot
 * memory map, above 1 MiB and outside the loaded image. The appliance runs
 * one benchmark and exits, so nothing is ever freed: rings, buffers, page
 * tables and the heap are carved out once at start-up.
 */
#include <string.h>
#include "kernel/kernel.h"

#define MAX_RANGES 64
#define LOW_LIMIT  0x100000ull

struct range {
	uint64_t base, end;
};

static struct range free_ranges[MAX_RANGES];
static int nranges;
static int cur;
static uint64_t total, used;

static void add_range(uint64_t base, uint64_t end)
{
	if (base < LOW_LIMIT)
		base = LOW_LIMIT;
	base = ALIGN_UP(base, 4096);
	end &= ~4095ull;
	if (end <= base || nranges == MAX_RANGES)
		return;
	free_ranges[nranges++] = (struct range){base, end};
	total += end - base;
}

void pmm_init(const struct boot_info *bi)
{
	for (uint32_t i = 0; i < bi->nmmap; i++) {
		const struct boot_mem_region *r = &bi->mmap[i];
		if (r->type != BOOT_MEM_RAM)
			continue;
		uint64_t b = r->base, e = r->base + r->len;
		/* Cut the image out; it may sit inside one RAM region. */
		if (bi->image_end > b && bi->image_start < e) {
			add_range(b, bi->image_start);
			add_range(bi->image_end, e);
		} else {
			add_range(b, e);
		}
	}
	if (!total)
		panic("pmm: boot memory map (%s) has no usable RAM above 1 MiB", bi->protocol);
}

static void *alloc(size_t size, size_t align)
{
	if (align < 16)
		align = 16;
	for (; cur < nranges; cur++) {
		struct range *r = &free_ranges[cur];
		uint64_t a = ALIGN_UP(r->base, align);
		if (a + size <= r->end && a + size > a) {
			used += a + size - r->base;
			r->base = a + size;
			return (void *)(uintptr_t)a;
		}
	}
	panic("pmm: out of memory allocating %zu bytes (used %lu of %lu)", size, used, total);
}

uint64_t pmm_total_bytes(void)
{
	return total;
}

uint64_t pmm_free_bytes(void)
{
	return total - used;
}

void *pmm_alloc(size_t size, size_t align)
{
	return memset(alloc(size, align), 0, size);
}

/* For the heap: malloc never assumes zeroed memory, and clearing 64 MiB
 * costs tens of milliseconds of boot time under emulation. */
void *pmm_alloc_uninit(size_t size, size_t align)
{
	return alloc(size, align);
}
