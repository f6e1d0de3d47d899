/*
 * mmio_trace.h: forced in front of drivers/virtio/virtio_pci.c for
 * test_virtio_pci (gcc -include). It stands in for kernel/arch.h (same
 * include guard) with MMIO accessors that act on host memory and record
 * the address and width of every access, so the test can check the widths
 * virtio 1.2 4.1.3.1 requires.
 */
#ifndef VNETLAB_MMIO_TRACE_H
#define VNETLAB_MMIO_TRACE_H
#define VNETLAB_ARCH_H /* kernel/arch.h is replaced */

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

struct mmio_access {
	uintptr_t addr;
	uint8_t width; /* bytes */
	bool write;
};
extern struct mmio_access mmio_log[256];
extern unsigned mmio_nlog;

static inline void mmio_note(uintptr_t a, uint8_t width, bool write)
{
	if (mmio_nlog < sizeof(mmio_log) / sizeof(mmio_log[0]))
		mmio_log[mmio_nlog++] = (struct mmio_access){a, width, write};
}
/* A register that reads all ones whatever was written (0: none), as a
 * device's queue_msix_vector that answers NO_VECTOR (4.1.4.3). Each test
 * file defines it. */
extern uintptr_t mmio_refuse_addr;
/* kernel/arch.h's MMIO accessors, one pair per width, noted as they act. */
#define TRACED_MMIO(bits)                                                                          \
	static inline uint##bits##_t mmio_read##bits(uintptr_t a)                                  \
	{                                                                                          \
		mmio_note(a, bits / 8, false);                                                     \
		if (mmio_refuse_addr && a == mmio_refuse_addr)                                     \
			return (uint##bits##_t) ~0u;                                               \
		return *(volatile uint##bits##_t *)a;                                              \
	}                                                                                          \
	static inline void mmio_write##bits(uintptr_t a, uint##bits##_t v)                         \
	{                                                                                          \
		mmio_note(a, bits / 8, true);                                                      \
		*(volatile uint##bits##_t *)a = v;                                                 \
	}
TRACED_MMIO(8)
TRACED_MMIO(16)
TRACED_MMIO(32)
static inline void mmio_write64_split(uintptr_t a, uint64_t v)
{
	mmio_write32(a, (uint32_t)v);
	mmio_write32(a + 4, (uint32_t)(v >> 32));
}
static inline void cpu_relax(void)
{
}
#endif
