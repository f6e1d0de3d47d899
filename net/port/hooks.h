/*
 * hooks.h: lwIP's hook file (LWIP_HOOK_FILENAME), included by lwIP's core
 * sources after their own headers. Only prototypes of what lwipopts.h
 * names; the code lives in net/offload.c.
 */
#ifndef VNETLAB_LWIP_HOOKS_H
#define VNETLAB_LWIP_HOOKS_H

#include "lwip/err.h"

struct tcp_pcb;
/* LWIP_HOOK_TCP_INPACKET_PCB: called for every segment before a pcb
 * processes it; sizes established connections for TSO. Always ERR_OK. */
err_t offload_tcp_inpacket(struct tcp_pcb *pcb);

#endif
