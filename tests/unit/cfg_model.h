/*
 * cfg_model.h: forced in front of kernel/pci.c for test_pci (gcc -include).
 * It stands in for kernel/arch.h (same include guard): port I/O and MMIO go
 * to a configuration-space model in test_pci.c, which decodes CONFIG_ADDRESS
 * / CONFIG_DATA byte lanes and ECAM addresses the way a host bridge does and
 * gives STATUS its write-1-to-clear bits.
 */
#ifndef VNETLAB_CFG_MODEL_H
#define VNETLAB_CFG_MODEL_H
#define VNETLAB_ARCH_H /* kernel/arch.h is replaced */

#include <stdint.h>

uint32_t model_port_read(uint16_t port, unsigned width);
void model_port_write(uint16_t port, unsigned width, uint32_t v);
uint32_t model_mmio_read(uintptr_t a, unsigned width);
void model_mmio_write(uintptr_t a, unsigned width, uint32_t v);

/* kernel/arch.h's accessors, one pair per width, all into the model. */
#define MODEL_PORT(sfx, type, bytes)                                                               \
	static inline void out##sfx(uint16_t port, type v)                                         \
	{                                                                                          \
		model_port_write(port, bytes, v);                                                  \
	}                                                                                          \
	static inline type in##sfx(uint16_t port)                                                  \
	{                                                                                          \
		return (type)model_port_read(port, bytes);                                         \
	}
#define MODEL_MMIO(bits)                                                                           \
	static inline uint##bits##_t mmio_read##bits(uintptr_t a)                                  \
	{                                                                                          \
		return (uint##bits##_t)model_mmio_read(a, bits / 8);                               \
	}                                                                                          \
	static inline void mmio_write##bits(uintptr_t a, uint##bits##_t v)                         \
	{                                                                                          \
		model_mmio_write(a, bits / 8, v);                                                  \
	}
MODEL_PORT(b, uint8_t, 1)
MODEL_PORT(w, uint16_t, 2)
MODEL_PORT(l, uint32_t, 4)
MODEL_MMIO(8)
MODEL_MMIO(16)
MODEL_MMIO(32)
#endif
