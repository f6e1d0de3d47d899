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

static inline void outb(uint16_t port, uint8_t v)
{
	model_port_write(port, 1, v);
}
static inline void outw(uint16_t port, uint16_t v)
{
	model_port_write(port, 2, v);
}
static inline void outl(uint16_t port, uint32_t v)
{
	model_port_write(port, 4, v);
}
static inline uint8_t inb(uint16_t port)
{
	return (uint8_t)model_port_read(port, 1);
}
static inline uint16_t inw(uint16_t port)
{
	return (uint16_t)model_port_read(port, 2);
}
static inline uint32_t inl(uint16_t port)
{
	return model_port_read(port, 4);
}
static inline uint8_t mmio_read8(uintptr_t a)
{
	return (uint8_t)model_mmio_read(a, 1);
}
static inline uint16_t mmio_read16(uintptr_t a)
{
	return (uint16_t)model_mmio_read(a, 2);
}
static inline uint32_t mmio_read32(uintptr_t a)
{
	return model_mmio_read(a, 4);
}
static inline void mmio_write8(uintptr_t a, uint8_t v)
{
	model_mmio_write(a, 1, v);
}
static inline void mmio_write16(uintptr_t a, uint16_t v)
{
	model_mmio_write(a, 2, v);
}
static inline void mmio_write32(uintptr_t a, uint32_t v)
{
	model_mmio_write(a, 4, v);
}
#endif
