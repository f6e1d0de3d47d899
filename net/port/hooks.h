/*
 * hooks.h: lwIP's hook file (LWIP_HOOK_FILENAME), included by lwIP's core
 * sources after their own headers. Only prototypes of what lwipopts.h
 * names; the code lives in net/offload.c, net/flood.c and net/ooseq.c.
 */
#ifndef VNETLAB_LWIP_HOOKS_H
#define VNETLAB_LWIP_HOOKS_H

#include "lwip/arch.h"
#include "lwip/err.h"

struct tcp_pcb;
struct tcp_hdr;
/* LWIP_HOOK_TCP_INPACKET_PCB: called for every segment before a pcb
 * processes it: bounds half-open connections on a listening pcb
 * (net/flood.c), then sizes established connections for TSO
 * (offload_tcp_inpacket, net/offload.c). Always ERR_OK. */
err_t flood_tcp_inpacket(struct tcp_pcb *pcb, const struct tcp_hdr *hdr);
err_t offload_tcp_inpacket(struct tcp_pcb *pcb);
/* TCP_OOSEQ_PBUFS_LIMIT: the out-of-order bound, counting what lwIP will
 * discard beyond it (net/ooseq.c). */
u16_t vnet_tcp_ooseq_pbufs_limit(struct tcp_pcb *pcb);

#endif
