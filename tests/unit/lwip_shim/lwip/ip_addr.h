/*
 * lwip_shim/lwip/ip_addr.h: the few lwIP types net/net.h names, so a host
 * unit test (test_result.c) can include the real net/net.h without lwIP's
 * headers (deps/ is not part of a unit build). Only declarations: nothing
 * here is lwIP's code.
 */
#ifndef VNETLAB_LWIP_SHIM_IP_ADDR_H
#define VNETLAB_LWIP_SHIM_IP_ADDR_H

#include <stdint.h>

typedef int8_t err_t;
typedef uint16_t u16_t;
typedef struct {
	uint32_t addr;
} ip4_addr_t;
typedef ip4_addr_t ip_addr_t;

#endif
