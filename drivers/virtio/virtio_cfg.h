/*
 * virtio_cfg.h: one device-configuration field read at the width the spec
 * requires, shared by both transports (virtio_pci.c, virtio_mmio.c).
 * 4.1.3.1: "the driver MUST use 8-bit wide accesses for 8-bit wide fields,
 * 16-bit wide and aligned accesses for 16-bit wide fields and 32-bit wide
 * and aligned accesses for 32-bit and 64-bit wide fields" (4.2.2.2 says the
 * same for MMIO). So len 2, 4 and 8 at a naturally aligned offset are one
 * 16-bit, 32-bit or two 32-bit fields; anything else is an array of bytes
 * (e.g. the MAC).
 */
#ifndef VNETLAB_VIRTIO_CFG_H
#define VNETLAB_VIRTIO_CFG_H

#include <stdint.h>
#include <string.h>
#include "kernel/arch.h"

/* The field of len bytes at offset off of the configuration mapped at cfg. */
static inline void virtio_cfg_field(uintptr_t cfg, uint32_t off, uint8_t *out, uint32_t len)
{
	uintptr_t a = cfg + off;

	if (len == 2 && off % 2 == 0) {
		uint16_t v = mmio_read16(a);
		memcpy(out, &v, 2);
	} else if ((len == 4 || len == 8) && off % 4 == 0) {
		for (uint32_t i = 0; i < len; i += 4) {
			uint32_t v = mmio_read32(a + i);
			memcpy(out + i, &v, 4);
		}
	} else {
		for (uint32_t i = 0; i < len; i++)
			out[i] = mmio_read8(a + i);
	}
}

#endif
