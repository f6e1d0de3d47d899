/*
 * lwip_shim/lwip/netif.h: see ip_addr.h here.
 */
#ifndef VNETLAB_LWIP_SHIM_NETIF_H
#define VNETLAB_LWIP_SHIM_NETIF_H

#include "lwip/ip_addr.h"

struct netif;
struct pbuf;

#endif
